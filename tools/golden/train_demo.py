"""Exports the graphs behind `ringflow demo --train` and `ringflow bench
train-step`, as a TensorFlow 1 user builds them, and TensorFlow's own
figures for them.

Usage: python train_demo.py REPO_ROOT [--time]   (needs tensorflow-cpu;
the tests and the binary do not)

Writes:
- tests/fixtures/train-demo/: a 8-32-4 MLP classifier with resource
  variables placed by `tf.compat.v1.train.replica_device_setter` (variables
  on /job:ps/task:0, compute on /job:worker/task:I), Momentum 0.9, one graph
  per worker (`worker0.pb`, `worker1.pb`: between-graph replication), the
  batches (`x.npy` [STEPS, 32, 8], `labels.npy` [STEPS, 32]) and the loss
  TensorFlow computes at each step of a single-worker run (`tf_losses.npy`),
  each step fetching `loss:0` and running `train` together.
- tests/fixtures/tf-graphs/train_ps_momentum: the worker-0 graph as a golden
  case (5 steps, then the variables), for `verify --local-cluster ps=1,worker=1`.
- tests/fixtures/train-bench/{small,medium}.pb: one SGD step of an MLP
  6-8-10 (batch 16) and 256-1024-10 (batch 256), variables on
  /job:worker/task:1, compute on /job:worker/task:0, initial values computed
  in the graph (no megabytes of constants).

With --time, also measures TensorFlow's p50 for one bench step over gRPC
(TensorFlow's servers for ps:1 and worker:2 in this process, the client through worker 0).
"""
import json
import os
import sys
import time

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_eager_execution()

DEMO_STEPS = 40
DEMO_BATCH = 32


def demo_graph(worker):
    g = tf.Graph()
    with g.as_default():
        setter = tf1.train.replica_device_setter(ps_tasks=1, worker_device=f"/job:worker/task:{worker}")
        with tf1.device(setter):
            x = tf1.placeholder(tf.float32, [DEMO_BATCH, 8], name="x")
            labels = tf1.placeholder(tf.int64, [DEMO_BATCH], name="labels")
            w1 = tf1.Variable(np.linspace(-0.4, 0.4, 8 * 32, dtype=np.float32).reshape(8, 32)[:, ::-1] * np.cos(np.arange(32, dtype=np.float32)), name="w1", use_resource=True)
            b1 = tf1.Variable(np.zeros(32, np.float32), name="b1", use_resource=True)
            w2 = tf1.Variable(np.linspace(0.3, -0.3, 32 * 4, dtype=np.float32).reshape(32, 4), name="w2", use_resource=True)
            b2 = tf1.Variable(np.zeros(4, np.float32), name="b2", use_resource=True)
            h = tf.nn.relu(tf.matmul(x, w1) + b1)
            logits = tf.matmul(h, w2) + b2
            xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
            loss = tf.identity(tf.reduce_mean(xent), name="loss")
            tf1.train.MomentumOptimizer(0.1, 0.9).minimize(loss, name="train")
            tf1.group(tf1.global_variables_initializer(), name="init")
            for v in (w1, b1, w2, b2):
                tf.identity(v.read_value(), name=v.op.name + "_value")
    return g


def demo_data():
    rng = np.random.default_rng(2026)
    truth = rng.standard_normal([8, 4]).astype(np.float32)
    x = rng.standard_normal([DEMO_STEPS, DEMO_BATCH, 8]).astype(np.float32)
    labels = np.argmax(x @ truth, axis=-1).astype(np.int64)
    return x, labels


def export_demo(root):
    out = os.path.join(root, "tests/fixtures/train-demo")
    os.makedirs(out, exist_ok=True)
    for worker in (0, 1):
        with open(os.path.join(out, f"worker{worker}.pb"), "wb") as f:
            f.write(demo_graph(worker).as_graph_def().SerializeToString())
    x, labels = demo_data()
    np.save(os.path.join(out, "x.npy"), x)
    np.save(os.path.join(out, "labels.npy"), labels)
    g = demo_graph(0)
    losses = []
    target = tf_cluster()
    with tf1.Session(target, graph=g) as sess:
        sess.run("init")
        for step in range(DEMO_STEPS):
            loss, _ = sess.run(["loss:0", "train"], {"x:0": x[step], "labels:0": labels[step]})
            losses.append(loss)
    np.save(os.path.join(out, "tf_losses.npy"), np.array(losses, np.float32))
    print("demo losses", losses[0], "->", losses[-1])

    case = os.path.join(root, "tests/fixtures/tf-graphs/train_ps_momentum")
    os.makedirs(case, exist_ok=True)
    graph_def = g.as_graph_def()
    with open(os.path.join(case, "graph.pb"), "wb") as f:
        f.write(graph_def.SerializeToString())
    with open(os.path.join(case, "graph.pbtxt"), "w") as f:
        f.write(str(graph_def))
    steps = [{"feeds": {}, "fetches": {}, "targets": ["init"]}]
    with tf1.Session(target, graph=g) as sess:
        sess.run("init")
        for step in range(5):
            feed = {"x:0": x[step], "labels:0": labels[step]}
            loss, _ = sess.run(["loss:0", "train"], feed)
            names = {}
            for key, value in feed.items():
                names[key] = f"step{step}_feed_{key.replace(':', '_')}.npy"
                np.save(os.path.join(case, names[key]), value)
            expect = f"step{step}_expect_loss_0.npy"
            np.save(os.path.join(case, expect), loss)
            steps.append({"feeds": names, "fetches": {"loss:0": expect}, "targets": ["train"]})
        finals = ["w1_value:0", "b1_value:0", "w2_value:0", "b2_value:0"]
        fetches = {}
        for key, value in zip(finals, sess.run(finals)):
            fetches[key] = f"final_expect_{key.replace(':', '_')}.npy"
            np.save(os.path.join(case, fetches[key]), value)
        steps.append({"feeds": {}, "fetches": fetches, "targets": []})
    meta = {
        "note": "replica_device_setter (ps=1), resource variables, MLP, sparse softmax xent, Momentum; loss and update in one step",
        "steps": steps,
        "ops": sorted({n.op for n in graph_def.node}),
        "devices": sorted({n.device for n in graph_def.node if n.device}),
        "tensorflow": tf.__version__,
    }
    with open(os.path.join(case, "case.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print("wrote", case)


_SERVERS = []


def tf_cluster():
    """TensorFlow's own servers for jobs ps (1 task) and worker (2 tasks)
    in this process; returns worker 0's target."""
    if not _SERVERS:
        base = 23000 + os.getpid() % 2000 * 4
        jobs = {"ps": [f"localhost:{base}"], "worker": [f"localhost:{base + 1}", f"localhost:{base + 2}"]}
        cluster = tf.train.ClusterSpec(jobs)
        for job, tasks in jobs.items():
            for index in range(len(tasks)):
                _SERVERS.append(tf.distribute.Server(cluster, job_name=job, task_index=index))
    return _SERVERS[1].target


def init_value(shape, salt):
    n = int(np.prod(shape))
    fan_in = shape[0] if len(shape) > 1 else 1
    wave = tf.sin(tf.range(n, dtype=tf.float32) * (0.37 + 0.01 * salt))
    return tf.reshape(wave, shape) * (1.0 / np.sqrt(fan_in))


def bench_graph(sizes, batch):
    g = tf.Graph()
    with g.as_default():
        variables = []
        with tf1.device("/job:worker/task:1"):
            for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
                w = tf1.Variable(init_value([fan_in, fan_out], 2 * i), name=f"w{i}", use_resource=True)
                b = tf1.Variable(tf.zeros([fan_out]), name=f"b{i}", use_resource=True)
                variables.append((w, b))
        with tf1.device("/job:worker/task:0"):
            x = tf1.placeholder(tf.float32, [batch, sizes[0]], name="x")
            labels = tf1.placeholder(tf.int64, [batch], name="labels")
            h = x
            for i, (w, b) in enumerate(variables):
                h = tf.matmul(h, w) + b
                if i + 1 < len(variables):
                    h = tf.nn.relu(h)
            xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=h)
            loss = tf.identity(tf.reduce_mean(xent), name="loss")
            opt = tf1.train.GradientDescentOptimizer(0.01)
            grads = opt.compute_gradients(loss)
        with tf1.device("/job:worker/task:1"):
            opt.apply_gradients(grads, name="train")
            tf1.group(tf1.global_variables_initializer(), name="init")
    return g


BENCH = {"small": ([6, 8, 10], 16), "medium": ([256, 1024, 10], 256)}


def export_bench(root):
    out = os.path.join(root, "tests/fixtures/train-bench")
    os.makedirs(out, exist_ok=True)
    for name, (sizes, batch) in BENCH.items():
        g = bench_graph(sizes, batch)
        with open(os.path.join(out, f"{name}.pb"), "wb") as f:
            f.write(g.as_graph_def().SerializeToString())
        print("wrote", name, sorted({n.op for n in g.as_graph_def().node}))


def time_tensorflow():
    target = tf_cluster()
    for name, (sizes, batch) in BENCH.items():
        g = bench_graph(sizes, batch)
        rng = np.random.default_rng(1)
        feed = {"x:0": rng.standard_normal([batch, sizes[0]]).astype(np.float32), "labels:0": rng.integers(0, sizes[-1], batch)}
        with tf1.Session(target, graph=g) as sess:
            sess.run("init")
            step = sess.make_callable(["loss:0", "train"], feed_list=["x:0", "labels:0"])
            args = [feed["x:0"], feed["labels:0"]]
            for _ in range(50):
                step(*args)
            times = []
            for _ in range(300 if name == "small" else 100):
                start = time.perf_counter()
                step(*args)
                times.append(time.perf_counter() - start)
        times.sort()
        print(f"tensorflow {tf.__version__} train-step {name}: p50 {times[len(times) // 2] * 1e6:.0f} us, p99 {times[int(len(times) * 0.99)] * 1e6:.0f} us")


if __name__ == "__main__":
    root = sys.argv[1]
    if "--time" in sys.argv:
        time_tensorflow()
    else:
        export_demo(root)
        export_bench(root)
