"""Exports golden cases from real models, made the ordinary way TensorFlow 2.21
users make them, for ringflow's tests.

Usage: python real_models.py [OUT_DIR] [CASE...]
       (OUT_DIR defaults to tests/fixtures/tf-graphs; no CASE means every case;
        needs tensorflow-cpu 2.21 and keras 3, and installs nothing; the
        repository's tests do not need them)

It reuses export_cases.py's helpers (freeze, write_case, set_weights, ...), so
file names, case.json fields and the one-process-per-case rule are the same as
there: the expected values are TensorFlow's own outputs from re-importing the
written graph.pb into a tf.compat.v1.Session, checked against calling the
frozen function eagerly.

Frozen Keras recurrent models (keras 3; a tf.function calling the model with
training=False, frozen by convert_variables_to_constants_v2). Keras lowers the
recurrence to a `While` loop over TensorList ops (variant tensors):
TensorListFromTensor unstacks the time-major input, TensorListGetItem reads
step t, TensorListReserve/SetItem/Stack collect the outputs.
  keras_lstm         LSTM(6, return_sequences=True) on [2,5,3], then Dense.
  keras_gru          GRU(5) (reset_after, last output only) on [2,4,3].
  keras_simple_rnn   SimpleRNN(4, return_sequences=True) then SimpleRNN(3)
                     (stacked) on [3,6,2].
  keras_bidirectional_lstm
                     Bidirectional(LSTM(4, return_sequences=True)) (the backward
                     direction reverses with ReverseV2), concat merge, on [2,5,3].

Other frozen Keras families:
  keras_mobilenet_v2 keras.applications.MobileNetV2(weights=None,
                     input_shape=(64,64,3), alpha=0.35, classes=10) on [1,64,64,3]
                     (~0.4M weights, set from a seeded generator). Its
                     graph.pbtxt leaves out the bytes of constants over
                     256 bytes (graph.pb has them), to keep the case ~2 MB.
  keras_transformer_encoder
                     an encoder block: MultiHeadAttention(4 heads, key_dim 8)
                     self attention with a padding mask, Dropout (inference),
                     residual Add, LayerNormalization, Dense relu, Dense,
                     Dropout, Add, LayerNormalization; [2,6,16].

Training through loops (tf.compat.v1 graphs, graph mode, tf.gradients and a
tf.compat.v1.train optimizer; an init step, then per step the loss before the
update and the update as two steps, then the final variables; as
training.py does):
  train_rnn_while_v1 control flow v1 (disable_control_flow_v2): an RNN step
                     h = tanh(x_t W + h U + b) in tf.compat.v1.while_loop over
                     T=5 steps of [4,3] inputs, squared error of h_T and a
                     Dense readout; plain gradient descent on ref variables.
                     Its gradient keeps the forward values on stacks
                     (StackV2, StackPushV2, StackPopV2) inside a second loop.
  train_rnn_while_v2 the same RNN with control flow v2 (a While op over
                     TensorList accumulators; its gradient is a second While
                     popping them) and momentum on resource variables.
  train_lstm_dynamic_rnn
                     tf.compat.v1.nn.dynamic_rnn of an LSTMCell (from tf_keras,
                     which this case needs) with an orthogonal initializer (a
                     normal draw through Qr in the init step), Adam on
                     resource variables; its gradient While adds TensorList
                     accumulators (AddN and ZerosLike of variants).
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_cases as ec  # noqa: E402

LOOSE_TOL = {"rtol": 1e-5, "atol": 1e-6}


def frozen_keras_case(out_dir, name, model, input_shape, seed, note, outputs):
    tf = ec.tf
    ec.set_weights(model, seed)
    serve = tf.function(lambda x: model(x, training=False))
    frozen, gd = ec.freeze(serve, tf.TensorSpec([None] + list(input_shape[1:]), tf.float32, name="x"))
    ins, outs = ec.frozen_io(frozen)
    rng = ec.np.random.default_rng(seed)
    feeds = [[rng.normal(0.0, 1.0, input_shape).astype(ec.np.float32)],
             [rng.normal(0.0, 1.0, input_shape).astype(ec.np.float32)]]
    steps, eager = ec.fn_steps(frozen, ins, outs, feeds)
    ec.write_case(out_dir, name, gd, steps, note, tolerance=LOOSE_TOL,
                  outputs={outs[0]: outputs}, eager=eager)


def case_keras_lstm(out_dir):
    keras = ec.keras
    L = keras.layers
    inp = keras.Input((5, 3), name="x")
    x = L.LSTM(6, return_sequences=True, name="lstm")(inp)
    out = L.Dense(2, name="head")(x)
    model = keras.Model(inp, out, name="lstm_model")
    frozen_keras_case(out_dir, "keras_lstm", model, [2, 5, 3], 301,
                      "frozen keras 3 LSTM(6, return_sequences=True) on [2,5,3] then Dense(2): a While loop "
                      "over TensorListFromTensor/GetItem and TensorListReserve/SetItem/Stack; two steps",
                      "[2,5,2] per-step projections of the LSTM's hidden states")


def case_keras_gru(out_dir):
    keras = ec.keras
    L = keras.layers
    inp = keras.Input((4, 3), name="x")
    out = L.GRU(5, name="gru")(inp)
    model = keras.Model(inp, out, name="gru_model")
    frozen_keras_case(out_dir, "keras_gru", model, [2, 4, 3], 302,
                      "frozen keras 3 GRU(5) (reset_after=True, last output only) on [2,4,3]: a While loop "
                      "over TensorList ops; two steps",
                      "[2,5] the GRU's last hidden state")


def case_keras_simple_rnn(out_dir):
    keras = ec.keras
    L = keras.layers
    inp = keras.Input((6, 2), name="x")
    x = L.SimpleRNN(4, return_sequences=True, name="rnn1")(inp)
    out = L.SimpleRNN(3, name="rnn2")(x)
    model = keras.Model(inp, out, name="rnn_model")
    frozen_keras_case(out_dir, "keras_simple_rnn", model, [3, 6, 2], 303,
                      "frozen keras 3 stacked SimpleRNN(4, return_sequences=True) -> SimpleRNN(3) on [3,6,2]: "
                      "two While loops over TensorList ops; two steps",
                      "[3,3] the second SimpleRNN's last hidden state")


def case_keras_bidirectional_lstm(out_dir):
    keras = ec.keras
    L = keras.layers
    inp = keras.Input((5, 3), name="x")
    out = L.Bidirectional(L.LSTM(4, return_sequences=True), name="bilstm")(inp)
    model = keras.Model(inp, out, name="bilstm_model")
    frozen_keras_case(out_dir, "keras_bidirectional_lstm", model, [2, 5, 3], 304,
                      "frozen keras 3 Bidirectional(LSTM(4, return_sequences=True)) on [2,5,3], concat merge: "
                      "a forward and a backward While loop over TensorList ops; two steps",
                      "[2,5,8] forward and backward hidden states, concatenated")


def case_keras_mobilenet_v2(out_dir):
    keras = ec.keras
    model = keras.applications.MobileNetV2(weights=None, input_shape=(64, 64, 3), alpha=0.35, classes=10)
    frozen_keras_case(out_dir, "keras_mobilenet_v2", model, [1, 64, 64, 3], 305,
                      "frozen keras.applications.MobileNetV2(weights=None, input_shape=(64,64,3), alpha=0.35, "
                      "classes=10), weights from a seeded generator; batch 1 through a [None,64,64,3] placeholder",
                      "[1,10] softmax probabilities")
    elide_large_constants(os.path.join(out_dir, "keras_mobilenet_v2"))


def elide_large_constants(case_dir, limit=256):
    """Rewrites graph.pbtxt without the bytes of constants over `limit` bytes."""
    from tensorflow.core.framework import graph_pb2
    gd = graph_pb2.GraphDef()
    with open(os.path.join(case_dir, "graph.pb"), "rb") as f:
        gd.ParseFromString(f.read())
    for node in gd.node:
        if node.op == "Const" and len(node.attr["value"].tensor.tensor_content) > limit:
            node.attr["value"].tensor.tensor_content = b""
    with open(os.path.join(case_dir, "graph.pbtxt"), "w") as f:
        f.write(f"# Constants over {limit} bytes are shown without their bytes; graph.pb has them.\n")
        f.write(str(gd))


def case_keras_transformer_encoder(out_dir):
    keras = ec.keras
    L = keras.layers
    inp = keras.Input((6, 16), name="x")
    attn = L.MultiHeadAttention(num_heads=4, key_dim=8, dropout=0.1, name="mha")(inp, inp)
    x = L.LayerNormalization(epsilon=1e-6, name="ln1")(L.Add()([inp, L.Dropout(0.1)(attn)]))
    ff = L.Dense(32, activation="relu", name="ff1")(x)
    ff = L.Dropout(0.1)(L.Dense(16, name="ff2")(ff))
    out = L.LayerNormalization(epsilon=1e-6, name="ln2")(L.Add()([x, ff]))
    model = keras.Model(inp, out, name="encoder")
    frozen_keras_case(out_dir, "keras_transformer_encoder", model, [2, 6, 16], 306,
                      "frozen keras 3 transformer encoder block: MultiHeadAttention(4 heads, key_dim 8, dropout) "
                      "self attention, Dropout (inference), Add, LayerNormalization, Dense relu, Dense, Dropout, Add, "
                      "LayerNormalization on [2,6,16]",
                      "[2,6,16] the block's output")


def rnn_training_graph(v2):
    tf, tf1, np = ec.tf, ec.tf1, ec.np
    g = tf.Graph()
    with g.as_default():
        xs = tf1.placeholder(tf.float32, [5, 4, 3], name="x")
        y = tf1.placeholder(tf.float32, [4, 2], name="y")
        use_resource = v2
        w = tf1.Variable(np.linspace(-0.6, 0.6, 18, dtype=np.float32).reshape(3, 6), name="w", use_resource=use_resource)
        u = tf1.Variable(np.linspace(0.3, -0.3, 36, dtype=np.float32).reshape(6, 6), name="u", use_resource=use_resource)
        b = tf1.Variable(np.full(6, 0.05, np.float32), name="b", use_resource=use_resource)
        v = tf1.Variable(np.linspace(-0.5, 0.4, 12, dtype=np.float32).reshape(6, 2), name="v", use_resource=use_resource)

        def body(t, h):
            x_t = tf.gather(xs, t)
            return t + 1, tf.tanh(tf.matmul(x_t, w) + tf.matmul(h, u) + b)

        _, h_last = tf1.while_loop(lambda t, h: t < 5, body, [tf.constant(0), tf.zeros([4, 6])], name="rnn")
        pred = tf.matmul(h_last, v)
        loss = tf.identity(tf.reduce_mean(tf.square(pred - y)), name="loss")
        if v2:
            tf1.train.MomentumOptimizer(0.2, 0.9).minimize(loss, name="train")
        else:
            tf1.train.GradientDescentOptimizer(0.5).minimize(loss, name="train")
        tf1.group(tf1.global_variables_initializer(), name="init")
        finals = []
        for var in (w, u, b, v):
            value = var.read_value() if use_resource else var
            finals.append(tf.identity(value, name=var.op.name + "_value").name)
    rng = np.random.default_rng(17 if v2 else 16)

    def feeds():
        return {"x:0": rng.standard_normal([5, 4, 3]).astype(np.float32),
                "y:0": rng.standard_normal([4, 2]).astype(np.float32)}

    return g, feeds, finals


def export_training(out_dir, name, g, feeds, finals, note):
    import json
    import shutil
    tf, tf1, np = ec.tf, ec.tf1, ec.np
    case_dir = os.path.join(out_dir, name)
    if os.path.isdir(case_dir):
        shutil.rmtree(case_dir)
    os.makedirs(case_dir)
    graph_def = g.as_graph_def()
    with open(os.path.join(case_dir, "graph.pb"), "wb") as f:
        f.write(graph_def.SerializeToString(deterministic=True))
    with open(os.path.join(case_dir, "graph.pbtxt"), "w") as f:
        f.write(str(graph_def))

    def save(fname, value):
        np.save(os.path.join(case_dir, fname), value)
        return fname

    steps = [{"feeds": {}, "fetches": {}, "targets": ["init"]}]
    with tf1.Session(graph=g) as sess:
        sess.run("init")
        for i in range(1, 4):
            feed = feeds()
            # The loss before this step's update, then the update, as two steps.
            (loss,) = sess.run(["loss:0"], feed_dict=feed)
            sess.run("train", feed_dict=feed)
            fed = {key: save(f"step{i}_feed_{key.replace(':', '_')}.npy", v) for key, v in feed.items()}
            steps.append({"feeds": fed, "fetches": {"loss:0": save(f"step{i}_expect_loss_0.npy", loss)},
                          "targets": []})
            steps.append({"feeds": fed, "fetches": {}, "targets": ["train"]})
        values = sess.run(finals)
        fetches = {key: save(f"step4_expect_{key.replace(':', '_')}.npy", value)
                   for key, value in zip(finals, values)}
        steps.append({"feeds": {}, "fetches": fetches, "targets": []})
    ops, functions, devices = ec.graph_ops(graph_def)
    case = {"note": note, "steps": steps, "ops": ops, "devices": devices, "tolerance": LOOSE_TOL}
    if functions:
        case["functions"] = functions
    case["tensorflow"] = tf.__version__
    with open(os.path.join(case_dir, "case.json"), "w") as f:
        json.dump(case, f, indent=1)
        f.write("\n")
    print(json.dumps({"case": name, "ops": ops, "functions": functions, "nodes": len(graph_def.node)}))


def case_train_rnn_while_v1(out_dir):
    ec.tf1.disable_eager_execution()
    ec.tf1.disable_control_flow_v2()
    g, feeds, finals = rnn_training_graph(False)
    export_training(out_dir, "train_rnn_while_v1", g, feeds, finals,
                    "control flow v1 RNN (tf.compat.v1.while_loop, 5 steps, tanh cell, [4,3] inputs, hidden 6) "
                    "with a Dense readout and squared error; tf.gradients keeps the loop's values on stacks "
                    "(StackV2/StackPushV2/StackPopV2); GradientDescent(0.5) on ref variables; 3 steps")


def case_train_rnn_while_v2(out_dir):
    ec.tf1.disable_eager_execution()
    ec.tf1.enable_control_flow_v2()
    g, feeds, finals = rnn_training_graph(True)
    export_training(out_dir, "train_rnn_while_v2", g, feeds, finals,
                    "control flow v2 RNN (a While op, 5 steps, tanh cell, [4,3] inputs, hidden 6) with a Dense "
                    "readout and squared error; its gradient is a While over TensorList accumulators; "
                    "Momentum(0.2, 0.9) on resource variables; 3 steps")


def lstm_training_graph():
    tf, tf1, np = ec.tf, ec.tf1, ec.np
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(11)
        xs = tf1.placeholder(tf.float32, [4, 5, 3], name="x")
        y = tf1.placeholder(tf.float32, [4, 2], name="y")
        cell = tf1.nn.rnn_cell.LSTMCell(6, initializer=tf1.orthogonal_initializer(seed=7), forget_bias=1.0)
        with tf1.variable_scope("lstm", use_resource=True):
            outputs, state = tf1.nn.dynamic_rnn(cell, xs, dtype=tf.float32)
            v = tf1.get_variable("readout", [6, 2], initializer=tf1.glorot_uniform_initializer(seed=3))
        pred = tf.matmul(state.h, v) + 0.1 * tf.reduce_mean(outputs, axis=[1, 2])[:, None]
        loss = tf.identity(tf.reduce_mean(tf.square(pred - y)), name="loss")
        tf1.train.AdamOptimizer(0.05).minimize(loss, name="train")
        tf1.group(tf1.global_variables_initializer(), name="init")
        finals = [tf.identity(var.read_value(), name=var.op.name.replace("/", "_") + "_value").name
                  for var in tf1.trainable_variables()]
    rng = np.random.default_rng(19)

    def feeds():
        return {"x:0": rng.standard_normal([4, 5, 3]).astype(np.float32),
                "y:0": rng.standard_normal([4, 2]).astype(np.float32)}

    return g, feeds, finals


def case_train_lstm_dynamic_rnn(out_dir):
    # tf.compat.v1.nn.rnn_cell lives in tf_keras (Keras 2) from TF 2.16 on.
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    ec.tf1.disable_eager_execution()
    g, feeds, finals = lstm_training_graph()
    export_training(out_dir, "train_lstm_dynamic_rnn", g, feeds, finals,
                    "tf.compat.v1 LSTM training graph (control flow v2): LSTMCell(6) with an orthogonal "
                    "initializer (RandomStandardNormal through Qr in the init step) under nn.dynamic_rnn over "
                    "[4,5,3] inputs, a readout of the last state and the mean output, squared error, Adam(0.05) "
                    "on resource variables; the gradient While adds TensorList accumulators (AddN and ZerosLike "
                    "of variants); 3 steps")


CASES = {name[len("case_"):]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}
ORDER = ["keras_lstm", "keras_gru", "keras_simple_rnn", "keras_bidirectional_lstm", "keras_mobilenet_v2",
         "keras_transformer_encoder", "train_rnn_while_v1", "train_rnn_while_v2", "train_lstm_dynamic_rnn"]
assert sorted(ORDER) == sorted(CASES), (ORDER, sorted(CASES))


def main(argv):
    if len(argv) >= 3 and argv[0] == "--one":
        ec._import_tf()
        CASES[argv[2]](argv[1])
        return 0
    out_dir = argv[0] if argv else os.path.join("tests", "fixtures", "tf-graphs")
    names = argv[1:] or ORDER
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print("unknown cases:", unknown, "known:", ORDER, file=sys.stderr)
        return 2
    os.makedirs(out_dir, exist_ok=True)
    failed = []
    for name in names:
        # One process per case: fresh function uids, fresh global control-flow mode.
        rc = subprocess.call([sys.executable, os.path.abspath(__file__), "--one", out_dir, name])
        if rc != 0:
            failed.append(name)
    if failed:
        print("FAILED:", failed, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
