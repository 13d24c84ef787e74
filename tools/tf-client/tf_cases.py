"""TensorFlow's own client (tf.compat.v1.Session over gRPC) against a
ringflow master: golden cases and the session API's other calls. One line
per case, PASS or FAIL with the reason; exit status 0 only if all pass.

    python tf_cases.py --target grpc://HOST:PORT [--expect-devices N] CASE_DIR...
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import traceback

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_eager_execution()


def isolated():
    return tf1.ConfigProto(isolate_session_state=True)


def check(name, got, expected, rtol, atol):
    got = np.asarray(got)
    if got.shape != expected.shape:
        raise AssertionError(f"{name}: shape {got.shape}, expected {expected.shape}")
    if expected.dtype.kind in "fc":
        if not np.allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True):
            worst = np.max(np.abs(got.astype(np.float64) - expected.astype(np.float64)))
            raise AssertionError(f"{name}: differs by up to {worst}")
    elif expected.dtype.kind in "SUO":
        if [bytes(v) for v in got.ravel()] != [bytes(v) for v in expected.ravel()]:
            raise AssertionError(f"{name}: strings differ")
    elif not np.array_equal(got, expected):
        raise AssertionError(f"{name}: values differ")


def golden_case(target, case_dir):
    case = json.load(open(os.path.join(case_dir, "case.json")))
    tolerance = case.get("tolerance") or {}
    rtol, atol = tolerance.get("rtol", 1e-5), tolerance.get("atol", 1e-6)
    graph_def = tf1.GraphDef()
    with open(os.path.join(case_dir, "graph.pb"), "rb") as f:
        graph_def.ParseFromString(f.read())
    graph = tf.Graph()
    with graph.as_default():
        tf1.import_graph_def(graph_def, name="")
    # A `$TMPDIR/NAME` feed is the path NAME in a fresh directory for this
    # case (checkpoint prefixes), as `ringflow verify` feeds it.
    scratch = tempfile.mkdtemp(prefix="tf-client-case-")

    def feed_value(f):
        if f.startswith("$TMPDIR/"):
            return np.array(os.path.join(scratch, f[len("$TMPDIR/"):]).encode())
        return np.load(os.path.join(case_dir, f), allow_pickle=False)

    try:
        with tf1.Session(target, graph=graph, config=isolated()) as sess:
            for i, step in enumerate(case["steps"]):
                feeds = {n: feed_value(f) for n, f in step["feeds"].items()}
                fetch_names = list(step["fetches"])
                outputs = sess.run(fetch_names + list(step["targets"]), feed_dict=feeds)
                for name, got in zip(fetch_names, outputs):
                    expected = np.load(os.path.join(case_dir, step["fetches"][name]), allow_pickle=False)
                    check(f"step {i} {name}", got, expected, rtol, atol)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def add_graph():
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [None], name="x")
        y = tf.add(x, 1.0, name="y")
    return graph, x, y


def make_callable(target):
    graph, x, y = add_graph()
    with tf1.Session(target, graph=graph, config=isolated()) as sess:
        run = sess.make_callable(y, feed_list=[x])
        for n in range(3):
            got = run(np.arange(n + 2, dtype=np.float32))
            check("callable", got, np.arange(n + 2, dtype=np.float32) + 1, 0, 0)


def callable_from_options(target):
    """TensorFlow's own callable calls: MakeCallable, RunCallable, ReleaseCallable."""
    from tensorflow.core.protobuf import config_pb2
    graph, x, y = add_graph()
    with tf1.Session(target, graph=graph, config=isolated()) as sess:
        run = sess._make_callable_from_options(config_pb2.CallableOptions(feed=[x.name], fetch=[y.name]))
        for n in range(3):
            got = run(np.arange(n + 2, dtype=np.float32))[0]
            check("callable", got, np.arange(n + 2, dtype=np.float32) + 1, 0, 0)
        del run


def partial_run(target):
    graph = tf.Graph()
    with graph.as_default():
        a = tf1.placeholder(tf.float32, [], name="a")
        b = tf1.placeholder(tf.float32, [], name="b")
        c = tf.add(a, b, name="c")
        d = tf.multiply(c, 3.0, name="d")
    with tf1.Session(target, graph=graph, config=isolated()) as sess:
        handle = sess.partial_run_setup([c, d], [a, b])
        check("c", sess.partial_run(handle, c, feed_dict={a: 1.5, b: 2.0}), np.float32(3.5), 0, 0)
        check("d", sess.partial_run(handle, d), np.float32(10.5), 0, 0)


def list_devices(target, expected):
    graph, _, _ = add_graph()
    with tf1.Session(target, graph=graph) as sess:
        names = [d.name for d in sess.list_devices()]
    if expected and len(names) != expected:
        raise AssertionError(f"{len(names)} devices, expected {expected}: {names}")
    if not all(n.startswith("/job:") and "/device:CPU:" in n for n in names):
        raise AssertionError(f"device names {names}")


def session_reset(target):
    graph = tf.Graph()
    with graph.as_default():
        v = tf1.Variable(41.0, name="reset_probe", use_resource=False)
        bump = tf1.assign_add(v, 1.0)
    with tf1.Session(target, graph=graph) as sess:
        sess.run(v.initializer)
        check("bumped", sess.run(bump), np.float32(42.0), 0, 0)
    tf1.Session.reset(target)
    with tf1.Session(target, graph=graph) as sess:
        try:
            sess.run(v)
        except tf.errors.FailedPreconditionError:
            return
    raise AssertionError("the variable survived Session.reset")


def step_timeout(target):
    graph = tf.Graph()
    with graph.as_default():
        n = tf1.placeholder(tf.int32, [], name="n")
        count = tf1.while_loop(lambda i: i < n, lambda i: i + 1, [tf.constant(0)])
    with tf1.Session(target, graph=graph, config=isolated()) as sess:
        check("short loop", sess.run(count, {n: 10}), np.int32(10), 0, 0)
        options = tf1.RunOptions(timeout_in_ms=200)
        try:
            sess.run(count, {n: 2_000_000_000}, options=options)
        except tf.errors.DeadlineExceededError:
            check("after the timeout", sess.run(count, {n: 5}), np.int32(5), 0, 0)
            return
    raise AssertionError("a step past its timeout_in_ms did not raise DeadlineExceededError")


def runtime_error(target):
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [None], name="x")
        y = tf.reshape(x, [2, 2], name="y")
    with tf1.Session(target, graph=graph, config=isolated()) as sess:
        try:
            sess.run(y, {x: np.zeros(3, np.float32)})
        except tf.errors.InvalidArgumentError:
            check("after the error", sess.run(y, {x: np.zeros(4, np.float32)}), np.zeros((2, 2), np.float32), 0, 0)
            return
    raise AssertionError("reshaping 3 elements to [2, 2] did not raise InvalidArgumentError")


def run_trace(target):
    graph, x, y = add_graph()
    with tf1.Session(target, graph=graph, config=isolated()) as sess:
        metadata = tf1.RunMetadata()
        sess.run(y, {x: [1.0]}, options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE), run_metadata=metadata)
    nodes = [n.node_name for d in metadata.step_stats.dev_stats for n in d.node_stats]
    if "y" not in nodes:
        raise AssertionError(f"step stats name {nodes}, not y")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    parser.add_argument("--expect-devices", type=int, default=0)
    parser.add_argument("cases", nargs="*")
    args = parser.parse_args()
    checks = [(os.path.basename(os.path.normpath(c)), lambda c=c: golden_case(args.target, c)) for c in args.cases]
    checks += [
        ("api:make_callable", lambda: make_callable(args.target)),
        ("api:callable_from_options", lambda: callable_from_options(args.target)),
        ("api:partial_run", lambda: partial_run(args.target)),
        ("api:list_devices", lambda: list_devices(args.target, args.expect_devices)),
        ("api:session_reset", lambda: session_reset(args.target)),
        ("api:step_timeout", lambda: step_timeout(args.target)),
        ("api:error_code", lambda: runtime_error(args.target)),
        ("api:run_metadata", lambda: run_trace(args.target)),
    ]
    failed = 0
    for name, run in checks:
        try:
            run()
            print(f"PASS {name}", flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is reported per case
            failed += 1
            reason = f"{type(e).__name__}: {e}".splitlines()[0][:300]
            print(f"FAIL {name}: {reason}", flush=True)
            if os.environ.get("TF_CASES_VERBOSE"):
                traceback.print_exc()
    print(f"{len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
