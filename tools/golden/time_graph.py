"""Times a golden case's GraphDef in TensorFlow, for the README's
comparisons with `ringflow bench graph`: the case's first step's feeds,
the given fetches, one tf.compat.v1.Session in this process, 300 untimed
runs then N timed ones (default 3000), p50 and p99 of each run's wall time.

Usage: python time_graph.py CASE_DIR FETCH... [--steps N]   (needs tensorflow-cpu)
"""
import json
import os
import sys
import time

import numpy as np


def main(argv):
    steps = 3000
    if "--steps" in argv:
        i = argv.index("--steps")
        steps = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    case_dir, fetches = argv[0], argv[1:]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    tf1 = tf.compat.v1
    tf1.disable_eager_execution()
    graph_def = tf1.GraphDef()
    with open(os.path.join(case_dir, "graph.pb"), "rb") as f:
        graph_def.ParseFromString(f.read())
    with open(os.path.join(case_dir, "case.json")) as f:
        case = json.load(f)
    feeds = {name: np.load(os.path.join(case_dir, path), allow_pickle=True)
             for name, path in case["steps"][0]["feeds"].items()}
    g = tf.Graph()
    with g.as_default():
        tf1.import_graph_def(graph_def, name="")
    with tf1.Session(graph=g) as sess:
        for _ in range(300):
            sess.run(fetches, feeds)
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            sess.run(fetches, feeds)
            times.append(time.perf_counter() - start)
    micros = np.array(times) * 1e6
    print(f"TensorFlow {tf.__version__}: p50 {np.percentile(micros, 50):.1f} us, p99 {np.percentile(micros, 99):.1f} us "
          f"over {steps} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
