"""Exports the checkpoint fixtures and golden cases, written by TensorFlow.

Usage: python checkpoints.py REPO_ROOT   (needs tensorflow-cpu; the tests do
not; installs nothing)

- tests/fixtures/checkpoints/tf_plain: `Saver(sharded=False)` over ref and
  resource variables of float32, float64, int32, int64, bool and string;
  `expected/NAME.npy` holds each variable's value.
- tests/fixtures/checkpoints/tf_sharded: `Saver(sharded=True)` over
  variables on two CPU devices: two data files merged under one index.
- tests/fixtures/tf-graphs/train_checkpoint_momentum_ref: ref variables, an
  MLP, Momentum, a global step, a string variable and `Saver()`: train 2
  steps, save, train 2, restore, train the same 2 batches again (their
  losses repeat), fetch the variables.
- tests/fixtures/tf-graphs/train_checkpoint_ps_sharded: the same steps on a
  graph placed by `replica_device_setter(ps_tasks=1)` with resource
  variables, the global step pinned to the worker, and
  `Saver(sharded=True)`: the ps and the worker task each save a shard and
  one merges them; run by TensorFlow's own servers (ps=1, worker=1).

Checkpoint prefixes in the golden cases are fed as `$TMPDIR/model.ckpt`:
`ringflow verify` replaces `$TMPDIR` with a fresh directory per case.
"""
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_eager_execution()


def variables_of_every_dtype():
    return [
        ("weights", np.linspace(-1.5, 2.5, 6, dtype=np.float32).reshape(2, 3), False),
        ("scale", np.array([np.pi, -1e300, 7.0]), True),
        ("counts", np.array([[-2147483648, 0], [7, 2147483647]], dtype=np.int32), False),
        ("global_step", np.int64(1 << 40), False),
        ("mask", np.array([True, False, True]), True),
        ("vocab", np.array([b"alpha", b"", b"\xff\x00bytes", b"x" * 200], dtype=object), False),
    ]


def save_expected(out_dir, values):
    os.makedirs(os.path.join(out_dir, "expected"), exist_ok=True)
    for name, value in values.items():
        if isinstance(value, np.ndarray) and value.dtype == object:
            value = value.astype(bytes)
        np.save(os.path.join(out_dir, "expected", name.replace("/", "_") + ".npy"), value)


def plain_fixture(root):
    out_dir = os.path.join(root, "tests/fixtures/checkpoints/tf_plain")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    g = tf.Graph()
    with g.as_default():
        variables = [tf1.Variable(value, name=name, use_resource=resource)
                     for name, value, resource in variables_of_every_dtype()]
        saver = tf1.train.Saver(sharded=False)
        init = tf1.global_variables_initializer()
    with tf1.Session(graph=g) as sess:
        sess.run(init)
        saver.save(sess, os.path.join(out_dir, "model.ckpt"), write_meta_graph=False, write_state=False)
        values = {v.op.name: sess.run(v.read_value()) for v in variables}
    save_expected(out_dir, values)
    print("wrote", out_dir, sorted(os.listdir(out_dir)))


def sharded_fixture(root):
    out_dir = os.path.join(root, "tests/fixtures/checkpoints/tf_sharded")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    g = tf.Graph()
    values = {}
    with g.as_default():
        with tf1.device("/cpu:0"):
            a = tf1.Variable(np.arange(6, dtype=np.float32).reshape(3, 2), name="dev0/a", use_resource=False)
            s = tf1.Variable(np.array([b"shard", b"zero"], dtype=object), name="dev0/s", use_resource=False)
        with tf1.device("/cpu:1"):
            b = tf1.Variable(np.array([5, -6], dtype=np.int64), name="dev1/b", use_resource=True)
            c = tf1.Variable(np.float64(0.25), name="dev1/c", use_resource=True)
        saver = tf1.train.Saver(sharded=True)
        init = tf1.global_variables_initializer()
    config = tf1.ConfigProto(device_count={"CPU": 2})
    with tf1.Session(graph=g, config=config) as sess:
        sess.run(init)
        saver.save(sess, os.path.join(out_dir, "model.ckpt"), write_meta_graph=False, write_state=False)
        for v in (a, s, b, c):
            values[v.op.name] = sess.run(v.read_value())
    save_expected(out_dir, values)
    print("wrote", out_dir, sorted(os.listdir(out_dir)))


_SERVERS = []


def tf_cluster():
    """TensorFlow's own servers: ps and worker (1 task each) in this
    process; returns the worker's target."""
    if not _SERVERS:
        base = 24000 + os.getpid() % 2000 * 4
        jobs = {"ps": [f"localhost:{base}"], "worker": [f"localhost:{base + 1}"]}
        cluster = tf.train.ClusterSpec(jobs)
        for job, tasks in jobs.items():
            for index in range(len(tasks)):
                _SERVERS.append(tf.distribute.Server(cluster, job_name=job, task_index=index))
    return _SERVERS[-1].target


def training_graph(resource, sharded, device_fn, step_device):
    g = tf.Graph()
    with g.as_default(), tf1.device(device_fn):
        x = tf1.placeholder(tf.float32, [8, 4], name="x")
        labels = tf1.placeholder(tf.int64, [8], name="labels")
        w1 = tf1.Variable(np.linspace(-0.5, 0.5, 24, dtype=np.float32).reshape(4, 6), name="w1", use_resource=resource)
        b1 = tf1.Variable(np.zeros(6, np.float32), name="b1", use_resource=resource)
        w2 = tf1.Variable(np.linspace(0.4, -0.4, 18, dtype=np.float32).reshape(6, 3), name="w2", use_resource=resource)
        b2 = tf1.Variable(np.full(3, 0.1, np.float32), name="b2", use_resource=resource)
        with tf1.device(step_device):
            step = tf1.Variable(np.int64(0), name="global_step", use_resource=resource, trainable=False)
        tag = tf1.Variable(b"run-a", name="tag", use_resource=False, trainable=False)
        h = tf.nn.relu(tf.matmul(x, w1) + b1)
        logits = tf.matmul(h, w2) + b2
        xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        tf.identity(tf.reduce_mean(xent), name="loss")
        tf1.train.MomentumOptimizer(0.1, 0.9).minimize(g.get_tensor_by_name("loss:0"), global_step=step, name="train")
        tf1.group(tf1.global_variables_initializer(), name="init")
        for v in (w1, b1, w2, b2, step, tag):
            tf.identity(v.read_value() if resource or v is not tag else v, name=v.op.name + "_value")
        saver = tf1.train.Saver(sharded=sharded)
    finals = [n + "_value:0" for n in ("w1", "b1", "w2", "b2", "global_step", "tag")]
    return g, saver, finals


def training_case(root, case, note, resource, sharded, device_fn, step_device, target):
    out_dir = os.path.join(root, "tests/fixtures/tf-graphs", case)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    g, saver, finals = training_graph(resource, sharded, device_fn, step_device)
    graph_def = g.as_graph_def()
    with open(os.path.join(out_dir, "graph.pb"), "wb") as f:
        f.write(graph_def.SerializeToString())
    with open(os.path.join(out_dir, "graph.pbtxt"), "w") as f:
        f.write(str(graph_def))
    rng = np.random.default_rng(21)
    batches = [{"x:0": rng.standard_normal([8, 4]).astype(np.float32),
                "labels:0": rng.integers(0, 3, 8).astype(np.int64)} for _ in range(4)]
    prefix_name = saver.saver_def.filename_tensor_name
    save_target = saver.saver_def.save_tensor_name.split(":")[0]
    restore_target = saver.saver_def.restore_op_name
    scratch = tempfile.mkdtemp()
    tmp_prefix = os.path.join(scratch, "model.ckpt")
    steps = [{"feeds": {}, "fetches": {}, "targets": ["init"]}]

    def save_npy(name, value):
        np.save(os.path.join(out_dir, name), value)
        return name

    with tf1.Session(target, graph=g) as sess:
        sess.run("init")

        def train(i, b):
            batch = batches[b]
            (loss,) = sess.run(["loss:0"], feed_dict=batch)
            sess.run("train", feed_dict=batch)
            fed = {k: save_npy(f"batch{b}_{k.replace(':', '_')}.npy", v) for k, v in batch.items()}
            steps.append({"feeds": fed, "fetches": {"loss:0": save_npy(f"step{i}_expect_loss_0.npy", loss)}, "targets": []})
            steps.append({"feeds": fed, "fetches": {}, "targets": ["train"]})
            return loss

        train(1, 0)
        train(2, 1)
        sess.run(save_target, feed_dict={prefix_name: tmp_prefix})
        steps.append({"feeds": {prefix_name: "$TMPDIR/model.ckpt"}, "fetches": {}, "targets": [save_target]})
        after_save = [train(3, 2), train(4, 3)]
        sess.run(restore_target, feed_dict={prefix_name: tmp_prefix})
        steps.append({"feeds": {prefix_name: "$TMPDIR/model.ckpt"}, "fetches": {}, "targets": [restore_target]})
        after_restore = [train(5, 2), train(6, 3)]
        assert np.allclose(after_save, after_restore), (after_save, after_restore)
        values = sess.run(finals)
        fetches = {k: save_npy(f"final_expect_{k.replace(':', '_')}.npy", v) for k, v in zip(finals, values)}
        steps.append({"feeds": {}, "fetches": fetches, "targets": []})
    shutil.rmtree(scratch, ignore_errors=True)
    meta = {
        "note": note,
        "steps": steps,
        "ops": sorted({n.op for n in graph_def.node}),
        "devices": sorted({n.device for n in graph_def.node if n.device}),
        "tensorflow": tf.__version__,
    }
    with open(os.path.join(out_dir, "case.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print("wrote", out_dir, "ops:", meta["ops"])


def main(root):
    plain_fixture(root)
    sharded_fixture(root)
    training_case(root, "train_checkpoint_momentum_ref",
                  "ref variables, MLP, Momentum, global step, a string variable; Saver(): train 2, save, "
                  "train 2, restore, the same 2 batches give the same losses",
                  resource=False, sharded=False, device_fn=None, step_device=None, target="")
    setter = tf1.train.replica_device_setter(ps_tasks=1, worker_device="/job:worker/task:0")
    training_case(root, "train_checkpoint_ps_sharded",
                  "replica_device_setter (ps=1), resource variables, Momentum, the global step on the worker; "
                  "Saver(sharded=True): the ps and the worker task each save a shard, one merges; train 2, "
                  "save, train 2, restore, train the same 2 again",
                  resource=True, sharded=True, device_fn=setter, step_device="/job:worker/task:0",
                  target=tf_cluster())


if __name__ == "__main__":
    main(sys.argv[1])
