"""Exports the `ring_four_tasks` golden case: a graph pinned to four worker
tasks, run by TensorFlow's own distributed runtime (four in-process
tf.distribute.Server tasks), its outputs saved as the expected values.

Usage: python four_tasks.py OUT_DIR   (needs tensorflow-cpu; tests do not)

What it covers across tasks: a fed tensor fanned out to every task, a
resource variable per task updated each step, a ring of partial results
task0 -> task1 -> task2 -> task3, a fan-in (AddN) back on task 0, and a
control edge from task 3 to task 0.
"""
import json
import os
import socket
import sys

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_eager_execution()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build():
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:worker/task:0"):
            x = tf1.placeholder(tf.float32, shape=[4, 8], name="x")
        branches, ring, inits = [], None, []
        for t in range(4):
            with tf.device(f"/job:worker/task:{t}"):
                w = tf.constant(np.linspace(-1.0, 1.0, 8 * 8, dtype=np.float32).reshape(8, 8) * (t + 1),
                                name=f"w{t}")
                v = tf1.Variable(np.full([8], 0.5 * t, dtype=np.float32), name=f"v{t}", use_resource=True)
                inits.append(v.initializer)
                bump = v.assign_add(tf.fill([8], 1.0), name=f"bump{t}", read_value=False)
                with tf.control_dependencies([bump]):
                    h = tf.nn.relu(tf.linalg.matmul(x, w) + v.read_value(), name=f"h{t}")
                branches.append(tf.reduce_sum(h, axis=0, name=f"part{t}"))
                ring = branches[-1] if ring is None else tf.math.maximum(ring, branches[-1], name=f"ring{t}")
        with tf.device("/job:worker/task:3"):
            done3 = tf.no_op(name="done3")
        with tf.device("/job:worker/task:0"):
            with tf.control_dependencies([done3]):
                total = tf.add_n(branches, name="total")
            out = tf.identity(total * 0.25 + ring, name="out")
            tf.group(*inits, name="init")
    return g, x


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    ports = [free_port() for _ in range(4)]
    cluster = tf.train.ClusterSpec({"worker": [f"127.0.0.1:{p}" for p in ports]})
    servers = [tf.distribute.Server(cluster, job_name="worker", task_index=i, start=True) for i in range(4)]
    g, x = build()
    graph_def = g.as_graph_def()
    with open(os.path.join(out_dir, "graph.pb"), "wb") as f:
        f.write(graph_def.SerializeToString())
    with open(os.path.join(out_dir, "graph.pbtxt"), "w") as f:
        f.write(str(graph_def))

    rng = np.random.default_rng(4)
    steps = [{"feeds": {}, "fetches": {}, "targets": ["init"]}]
    with tf1.Session(servers[0].target, graph=g) as sess:
        sess.run("init")
        for i in range(1, 4):
            feed = rng.standard_normal([4, 8]).astype(np.float32)
            (value,) = sess.run(["out:0"], feed_dict={"x:0": feed})
            np.save(os.path.join(out_dir, f"step{i}_feed_x_0.npy"), feed)
            np.save(os.path.join(out_dir, f"step{i}_expect_out_0.npy"), value)
            steps.append({
                "feeds": {"x:0": f"step{i}_feed_x_0.npy"},
                "fetches": {"out:0": f"step{i}_expect_out_0.npy"},
                "targets": [],
            })
    case = {
        "note": "four tasks: a fed tensor fanned out, a resource variable bumped per task per step, "
                "a ring of partials task0->task3, a fan-in on task 0 and a control edge from task 3",
        "steps": steps,
        "ops": sorted({n.op for n in graph_def.node}),
        "devices": [f"/job:worker/task:{t}" for t in range(4)],
        "tensorflow": tf.__version__,
    }
    with open(os.path.join(out_dir, "case.json"), "w") as f:
        json.dump(case, f, indent=1)
    print("wrote", out_dir, "ops:", case["ops"])


if __name__ == "__main__":
    main(sys.argv[1])
