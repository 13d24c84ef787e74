"""Step latency through TensorFlow's own Python client (tf.compat.v1.Session
over gRPC): a ringflow cluster against TensorFlow's own servers
(tf.distribute.Server, one subprocess per task), same graph, same client,
same run, in alternating blocks so both see the same phase of a noisy host.

Scenarios: `two-task` (x fed on task 0, y = x + 1 placed on task 1, y
fetched through task 0's master) and `one-task` (everything on task 0);
`in-process` (target "") is the Python client's own floor.

    python bench.py --ringflow target/release/ringflow [--steps 2000] [--block 200]
                    [--rust-probe target/release/examples/grpc_step_latency]

With --rust-probe, the same one-task step from a Rust client over the
native protocol and over gRPC: what ringflow's gRPC front end adds, without
TensorFlow's client.
"""
import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()

TF_SERVER = """
import sys, tensorflow as tf
cluster = tf.train.ClusterSpec({"worker": sys.argv[2].split(",")})
server = tf.distribute.Server(cluster, job_name="worker", task_index=int(sys.argv[1]), start=True)
print("ready", flush=True)
sys.stdin.read()
"""


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def wait_port(port, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def start_ringflow(binary, addresses, work):
    path = os.path.join(work, "cluster.toml")
    with open(path, "w") as f:
        f.write("[cluster]\nworker = [" + ", ".join(f'"{a}"' for a in addresses) + "]\n")
    procs = [subprocess.Popen([binary, "server", "--cluster", path, "--job", "worker", "--task", str(i)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(len(addresses))]
    for a in addresses:
        wait_port(int(a.rsplit(":", 1)[1]))
    return procs


def start_tensorflow(addresses):
    procs = []
    for i in range(len(addresses)):
        p = subprocess.Popen([sys.executable, "-c", TF_SERVER, str(i), ",".join(addresses)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(p)
    for p in procs:
        if p.stdout.readline().strip() != "ready":
            raise RuntimeError("a TensorFlow server did not start")
    return procs


def trivial_graph(task):
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/job:worker/task:0" if task is not None else None):
            x = tf1.placeholder(tf.float32, [], name="x")
        with tf.device(f"/job:worker/task:{task}" if task is not None else None):
            y = tf.add(x, 1.0, name="y")
    return graph, x, y


def timed_block(run, feed, n):
    out = np.empty(n)
    for i in range(n):
        t = time.perf_counter()
        run(feed)
        out[i] = time.perf_counter() - t
    return out


def measure(targets, task, steps, block):
    """Per-target step times, blocks of `block` steps taken in turns."""
    sessions = {}
    for name, target in targets.items():
        graph, x, y = trivial_graph(task if target else None)
        sess = tf1.Session(target, graph=graph)
        run = sess.make_callable(y, feed_list=[x])
        if float(run(np.float32(1.0))) != 2.0:
            raise AssertionError(f"{name}: wrong answer")
        for _ in range(200):
            run(np.float32(1.0))
        sessions[name] = (sess, run)
    times = {name: [] for name in targets}
    for _ in range(max(1, steps // block)):
        for name, (_, run) in sessions.items():
            times[name].append(timed_block(run, np.float32(2.0), block))
    for sess, _ in sessions.values():
        sess.close()
    return {name: np.concatenate(t) for name, t in times.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ringflow", required=True)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--block", type=int, default=200)
    parser.add_argument("--rust-probe")
    args = parser.parse_args()
    ports = free_ports(4)
    rf_addresses = [f"127.0.0.1:{p}" for p in ports[:2]]
    tf_addresses = [f"localhost:{p}" for p in ports[2:]]
    work = tempfile.mkdtemp()
    procs = start_ringflow(args.ringflow, rf_addresses, work) + start_tensorflow(tf_addresses)
    try:
        rows = []
        for scenario, task in [("two-task", 1), ("one-task", 0)]:
            targets = {"ringflow": f"grpc://{rf_addresses[0]}", "tensorflow": f"grpc://{tf_addresses[0]}"}
            if scenario == "one-task":
                targets["in-process"] = ""
            result = measure(targets, task, args.steps, args.block)
            for name, t in result.items():
                rows.append((scenario, name, np.percentile(t, 50) * 1e6, np.percentile(t, 99) * 1e6, len(t)))
        print(f"{'scenario':<10} {'server':<11} {'p50_us':>9} {'p99_us':>9} {'steps':>6}")
        for row in rows:
            print(f"{row[0]:<10} {row[1]:<11} {row[2]:>9.1f} {row[3]:>9.1f} {row[4]:>6}")
        if args.rust_probe:
            probe = subprocess.run([args.rust_probe, rf_addresses[0], str(args.steps)], capture_output=True, text=True,
                                   check=True)
            for line in probe.stdout.splitlines():
                print(f"one-task   rust client over {line}")
        for scenario in ["two-task", "one-task"]:
            p50 = {r[1]: r[2] for r in rows if r[0] == scenario}
            print(f"{scenario}: ringflow p50 is {p50['tensorflow'] / p50['ringflow']:.2f}x faster than TensorFlow's")
    finally:
        for p in procs:
            if p.stdin:
                p.stdin.close()
            p.terminate()
        for p in procs:
            p.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
