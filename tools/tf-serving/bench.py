"""A SavedModel served by `ringflow serve`, called from TensorFlow Serving's
own clients: `tensorflow_serving.apis` PredictionService stubs over gRPC
(grpcio) and its REST API over one keep-alive HTTP/1.1 connection
(http.client), against TensorFlow 2.21 calling the same signature on the
model loaded in this Python process (no network at all: a floor under what
TensorFlow Serving itself could answer). Blocks of each take turns, 3 runs.

    pip install tensorflow-cpu==2.21.0
    pip install --no-deps tensorflow-serving-api==2.21.0
    python tools/tf-serving/bench.py --ringflow target/release/ringflow \
        --model tests/fixtures/saved-models/keras_mlp_export --feed x=input_x.npy [--calls 2000]

Feeds are .npy files in the model's directory (a case's inputs).
"""
import argparse
import http.client
import json
import os
import socket
import subprocess
import tempfile
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import grpc  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def json_value(array):
    if array.dtype.kind in "SO":
        return np.vectorize(lambda b: b.decode() if isinstance(b, bytes) else b, otypes=[object])(array).tolist()
    return array.tolist()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ringflow", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--feed", action="append", default=[], help="KEY=FILE.npy (in the model's directory)")
    ap.add_argument("--signature", default="serving_default")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--block", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    model = os.path.abspath(args.model)
    feeds = {}
    for feed in args.feed:
        key, name = feed.split("=", 1)
        feeds[key] = np.load(os.path.join(model, name), allow_pickle=True)

    base = tempfile.mkdtemp()
    os.symlink(model, os.path.join(base, "1"))
    port, rest_port = free_port(), free_port()
    server = subprocess.Popen(
        [args.ringflow, "serve", f"--port={port}", f"--rest_api_port={rest_port}", "--model_name=m",
         f"--model_base_path={base}", "--exit-on-stdin-eof"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    for line in server.stdout:
        if "REST API on" in line:
            break

    stub = prediction_service_pb2_grpc.PredictionServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "m"
    request.model_spec.signature_name = args.signature
    for key, value in feeds.items():
        request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
    conn = http.client.HTTPConnection("127.0.0.1", rest_port)
    body = json.dumps({"signature_name": args.signature, "inputs": {k: json_value(v) for k, v in feeds.items()}})
    loaded = tf.saved_model.load(model)
    signature = loaded.signatures[args.signature]
    tf_feeds = {k: tf.constant(v) for k, v in feeds.items()}

    def rest():
        conn.request("POST", "/v1/models/m:predict", body, {"Content-Type": "application/json"})
        answer = conn.getresponse()
        answer.read()
        assert answer.status == 200, answer.status

    subjects = [
        ("tensorflow_in_process", lambda: signature(**tf_feeds)),
        ("ringflow_grpc", lambda: stub.Predict(request, timeout=30)),
        ("ringflow_rest", rest),
    ]
    try:
        for run in range(args.runs):
            times = {name: [] for name, _ in subjects}
            for name, call in subjects:
                for _ in range(args.block):
                    call()
            done = 0
            while done < args.calls:
                n = min(args.block, args.calls - done)
                for name, call in subjects:
                    for _ in range(n):
                        start = time.perf_counter()
                        call()
                        times[name].append(time.perf_counter() - start)
                done += n
            print(f"run {run}: " + ", ".join(
                f"{name} p50 {np.percentile(t, 50) * 1e6:.1f} us p99 {np.percentile(t, 99) * 1e6:.1f} us"
                for name, t in times.items()), flush=True)
    finally:
        server.stdin.close()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
