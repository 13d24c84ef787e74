"""Captures the MasterService requests TensorFlow's own client sends, as
the bytes on the wire: a gRPC proxy in front of a ringflow master saves the
first request of each method to OUT_DIR/NAME.bin (the protobuf, without
gRPC's prefix) and forwards it; TensorFlow's client then runs a session
through the proxy (create, run with a feed, extend, callable, partial run,
devices, reset, close). The proxy runs in a child process: some of the
client's calls hold Python's GIL while they wait for the answer.

    python capture.py --upstream HOST:PORT OUT_DIR
"""
import argparse
import os
import subprocess
import sys
from concurrent import futures

import grpc
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2

tf1 = tf.compat.v1
tf1.disable_eager_execution()

METHODS = ["CreateSession", "ExtendSession", "PartialRunSetup", "RunStep", "CloseSession", "ListDevices",
           "Reset", "MakeCallable", "RunCallable", "ReleaseCallable"]


def serve_proxy(args):
    upstream = grpc.insecure_channel(args.upstream)
    seen = {}

    def forwarder(method):
        call = upstream.unary_unary(f"/tensorflow.MasterService/{method}")

        def handle(request, context):
            key = method
            if method == "RunStep" and key in seen:
                key = "RunStep_partial" if b"partial" in request else "RunStep_extended"
            if key not in seen:
                seen[key] = True
                with open(os.path.join(args.out, f"{key}.bin"), "wb") as f:
                    f.write(request)
            try:
                return call(request, timeout=30)
            except grpc.RpcError as e:
                context.abort(e.code(), e.details())
        return grpc.unary_unary_rpc_method_handler(handle)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("tensorflow.MasterService", {m: forwarder(m) for m in METHODS})])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    sys.stdin.read()
    server.stop(0)
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("out")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.serve:
        return serve_proxy(args)
    proxy = subprocess.Popen([sys.executable, __file__, "--serve", "--upstream", args.upstream, args.out],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    target = f"grpc://127.0.0.1:{int(proxy.stdout.readline())}"

    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [None], name="x")
        y = tf.add(x, 1.0, name="y")
    with tf1.Session(target, graph=graph) as sess:
        sess.run(y, {x: np.array([1.0, 2.0, 3.0], np.float32)},
                 options=tf1.RunOptions(timeout_in_ms=5000, trace_level=tf1.RunOptions.FULL_TRACE),
                 run_metadata=tf1.RunMetadata())
        with graph.as_default():
            z = tf.multiply(y, 2.0, name="z")
        sess.run(z, {x: np.array([4.0], np.float32)})
        # TensorFlow's own callable API (MakeCallable/RunCallable/ReleaseCallable).
        options = config_pb2.CallableOptions(feed=["x:0"], fetch=["z:0"])
        run = sess._make_callable_from_options(options)
        run(np.array([5.0], np.float32))
        del run
        handle = sess.partial_run_setup([y, z], [x])
        sess.partial_run(handle, y, feed_dict={x: np.array([6.0], np.float32)})
        sess.list_devices()
    tf1.Session.reset(target, ["captured"])
    proxy.stdin.close()
    proxy.wait(timeout=30)
    print("captured:", " ".join(sorted(f[:-4] for f in os.listdir(args.out))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
