"""Exports the training golden cases: TF1 graphs as `tf.compat.v1`
optimizers build them (tf.gradients plus the optimizer's apply ops), run by
TensorFlow for a few steps, each step's loss and the final variables saved
as the expected values.

Usage: python training.py FIXTURES_DIR   (needs tensorflow-cpu; tests do not)

Cases:
- train_mlp_momentum_ref: ref variables (VariableV2), a two-layer MLP with
  ReLU, softmax cross-entropy on dense labels plus an L2 penalty, Nesterov
  momentum (ApplyMomentum; ReluGrad, BiasAddGrad, L2Loss in the gradient).
- train_embedding_adam_resource: resource variables, an embedding lookup
  (ResourceGather) averaged per example, tanh, sparse softmax cross-entropy,
  Adam: ResourceApplyAdam for the dense weights and, for the table, the
  sparse path (Unique, UnsortedSegmentSum, ResourceScatterAdd into m and v).
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_eager_execution()


def mlp_momentum_ref():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [8, 4], name="x")
        y = tf1.placeholder(tf.float32, [8, 3], name="labels")
        w1 = tf1.Variable(np.linspace(-0.5, 0.5, 24, dtype=np.float32).reshape(4, 6), name="w1", use_resource=False)
        b1 = tf1.Variable(np.zeros(6, np.float32), name="b1", use_resource=False)
        w2 = tf1.Variable(np.linspace(0.4, -0.4, 18, dtype=np.float32).reshape(6, 3), name="w2", use_resource=False)
        b2 = tf1.Variable(np.full(3, 0.1, np.float32), name="b2", use_resource=False)
        h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1), b1))
        logits = tf.nn.bias_add(tf.matmul(h, w2), b2)
        xent = tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits)
        loss = tf.identity(tf.reduce_mean(xent) + 0.01 * tf.nn.l2_loss(w1), name="loss")
        tf1.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True).minimize(loss, name="train")
        tf1.group(tf1.global_variables_initializer(), name="init")
    rng = np.random.default_rng(7)

    def feeds():
        labels = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 8)]
        return {"x:0": rng.standard_normal([8, 4]).astype(np.float32), "labels:0": labels}

    return g, feeds, ["w1:0", "b1:0", "w2:0", "b2:0"]


def embedding_adam_resource():
    g = tf.Graph()
    with g.as_default():
        ids = tf1.placeholder(tf.int64, [5, 2], name="ids")
        labels = tf1.placeholder(tf.int64, [5], name="labels")
        table = tf1.Variable(np.linspace(-1, 1, 40, dtype=np.float32).reshape(10, 4), name="table", use_resource=True)
        w = tf1.Variable(np.linspace(0.3, -0.3, 12, dtype=np.float32).reshape(4, 3), name="w", use_resource=True)
        b = tf1.Variable(np.zeros(3, np.float32), name="b", use_resource=True)
        e = tf.reduce_mean(tf.nn.embedding_lookup(table, ids), axis=1)
        logits = tf.matmul(tf.tanh(e), w) + b
        xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        tf.identity(tf.reduce_mean(xent), name="loss")
        tf1.train.AdamOptimizer(0.05).minimize(g.get_tensor_by_name("loss:0"), name="train")
        tf1.group(tf1.global_variables_initializer(), name="init")
        for v in (table, w, b):
            tf.identity(v.read_value(), name=v.op.name + "_value")
    rng = np.random.default_rng(11)

    def feeds():
        # Repeated ids within a batch exercise the deduplication.
        return {
            "ids:0": rng.integers(0, 6, [5, 2]).astype(np.int64),
            "labels:0": rng.integers(0, 3, 5).astype(np.int64),
        }

    return g, feeds, ["table_value:0", "w_value:0", "b_value:0"]


CASES = {
    "train_mlp_momentum_ref": (mlp_momentum_ref, "ref variables, MLP, softmax xent + L2, Nesterov momentum"),
    "train_embedding_adam_resource": (
        embedding_adam_resource,
        "resource variables, embedding lookup, sparse softmax xent, Adam (dense and sparse updates)",
    ),
}


def save(out_dir, name, value):
    np.save(os.path.join(out_dir, name), value)
    return name


def export(fixtures, case, build, note):
    out_dir = os.path.join(fixtures, case)
    os.makedirs(out_dir, exist_ok=True)
    g, feeds, finals = build()
    graph_def = g.as_graph_def()
    with open(os.path.join(out_dir, "graph.pb"), "wb") as f:
        f.write(graph_def.SerializeToString())
    with open(os.path.join(out_dir, "graph.pbtxt"), "w") as f:
        f.write(str(graph_def))
    steps = [{"feeds": {}, "fetches": {}, "targets": ["init"]}]
    with tf1.Session(graph=g) as sess:
        sess.run("init")
        for i in range(1, 4):
            feed = feeds()
            # The loss before this step's update, then the update, as two
            # steps (one step fetching both would race in TensorFlow).
            (loss,) = sess.run(["loss:0"], feed_dict=feed)
            sess.run("train", feed_dict=feed)
            fed = {key: save(out_dir, f"step{i}_feed_{key.replace(':', '_')}.npy", v) for key, v in feed.items()}
            expect = {"loss:0": save(out_dir, f"step{i}_expect_loss_0.npy", loss)}
            steps.append({"feeds": fed, "fetches": expect, "targets": []})
            steps.append({"feeds": fed, "fetches": {}, "targets": ["train"]})
        values = sess.run(finals)
        fetches = {}
        for key, value in zip(finals, values):
            fetches[key] = save(out_dir, f"step4_expect_{key.replace(':', '_')}.npy", value)
        steps.append({"feeds": {}, "fetches": fetches, "targets": []})
    meta = {
        "note": note,
        "steps": steps,
        "ops": sorted({n.op for n in graph_def.node}),
        "devices": [],
        "tensorflow": tf.__version__,
    }
    with open(os.path.join(out_dir, "case.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print("wrote", out_dir, "ops:", meta["ops"])


def main(fixtures):
    for case, (build, note) in CASES.items():
        export(fixtures, case, build, note)


if __name__ == "__main__":
    main(sys.argv[1])
