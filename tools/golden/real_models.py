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


CASES = {name[len("case_"):]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}
ORDER = ["keras_lstm", "keras_gru", "keras_simple_rnn", "keras_bidirectional_lstm"]
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
