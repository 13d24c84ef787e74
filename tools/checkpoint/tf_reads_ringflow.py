"""TensorFlow reads checkpoints that ringflow wrote.

Usage: python tf_reads_ringflow.py [RINGFLOW_BINARY]
       (default: target/release/ringflow; needs tensorflow-cpu; installs
       nothing; the test suite does not need it)

Builds two graphs with TensorFlow, runs each for one step with
`ringflow run`, then reads what ringflow wrote with TensorFlow:
- plain: `SaveV2` of constants of every dtype ringflow has (float32,
  float64, int32, int64, bool, string; scalars, matrices, an empty tensor);
- sharded: two `SaveV2`s into `ShardedFilename` parts, then
  `MergeV2Checkpoints` into one prefix, as `Saver(sharded=True)` does.
Each checkpoint is read twice: `tf.train.load_checkpoint` (every name,
dtype, shape and value) and `tf.raw_ops.RestoreV2`. Exits 1 on a mismatch.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf

VALUES = {
    "dense/kernel": np.linspace(-1.5, 2.5, 6, dtype=np.float32).reshape(2, 3),
    "dense/bias": np.array([np.pi, -1e300, 7.0]),
    "counts": np.array([[-2147483648, 0], [7, 2147483647]], dtype=np.int32),
    "global_step": np.int64(1 << 40),
    "mask": np.array([True, False, True]),
    "vocab": np.array([b"alpha", b"", b"\xff\x00bytes", b"x" * 200], dtype=object),
    "empty": np.zeros([0, 4], np.float32),
    "tag": np.array(b"ringflow", dtype=object),
}


def const(name):
    value = VALUES[name]
    dtype = tf.string if np.asarray(value).dtype == object else tf.as_dtype(np.asarray(value).dtype)
    return tf.constant(value, dtype=dtype, name="value/" + name)


def save_op(prefix, names, name):
    tensors = [const(n) for n in names]
    return tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                             tensors=tensors, name=name)


def plain_graph(prefix):
    g = tf.Graph()
    with g.as_default():
        save_op(tf.constant(prefix), sorted(VALUES), "save")
    return g


def sharded_graph(prefix):
    names = sorted(VALUES)
    parts = [names[::2], names[1::2]]
    g = tf.Graph()
    with g.as_default():
        base = tf.strings.join([tf.constant(prefix), "_temp/part"])
        files, saves = [], []
        for shard, group in enumerate(parts):
            filename = tf.raw_ops.ShardedFilename(basename=base, shard=shard, num_shards=len(parts))
            files.append(filename)
            saves.append(save_op(filename, group, f"save_{shard}"))
        with tf.control_dependencies(saves):
            tf.raw_ops.MergeV2Checkpoints(checkpoint_prefixes=tf.stack(files), destination_prefix=prefix,
                                          delete_old_dirs=True, name="save")
    return g


def run_ringflow(binary, graph, work):
    path = os.path.join(work, "graph.pb")
    with open(path, "wb") as f:
        f.write(graph.as_graph_def().SerializeToString())
    subprocess.run([binary, "run", "--graph", path, "--op", "save"], check=True)


def check(prefix, label):
    problems = []
    reader = tf.train.load_checkpoint(prefix)
    shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    if sorted(shapes) != sorted(VALUES):
        problems.append(f"names {sorted(shapes)} != {sorted(VALUES)}")
    names = sorted(VALUES)
    want_dtypes = [tf.string if np.asarray(VALUES[n]).dtype == object else tf.as_dtype(np.asarray(VALUES[n]).dtype)
                   for n in names]
    restored = tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                                    dtypes=want_dtypes)
    for name, dtype, by_op in zip(names, want_dtypes, restored):
        want = np.asarray(VALUES[name])
        got = reader.get_tensor(name)
        if dtypes.get(name) != dtype or list(shapes.get(name, [])) != list(want.shape):
            problems.append(f"{name}: dtype {dtypes.get(name)} shape {shapes.get(name)}, want {dtype} {want.shape}")
        for how, value in (("load_checkpoint", got), ("RestoreV2", by_op.numpy())):
            # A scalar string comes back as bytes, not an array.
            value = np.asarray(value, dtype=object if want.dtype == object else None)
            if value.shape != want.shape or not np.array_equal(value, want):
                problems.append(f"{name} via {how}: {value!r} != {want!r}")
    files = sorted(os.listdir(os.path.dirname(prefix)))
    if problems:
        print(f"FAIL {label}: " + "; ".join(problems))
    else:
        print(f"OK {label}: TensorFlow {tf.__version__} read {len(names)} tensors, every dtype, shape and value "
              f"equal (files: {', '.join(files)})")
    return not problems


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "../../target/release/ringflow")
    ok = True
    with tempfile.TemporaryDirectory() as work:
        for label, build in (("plain", plain_graph), ("sharded", sharded_graph)):
            os.makedirs(os.path.join(work, label))
            prefix = os.path.join(work, label, "model.ckpt")
            run_ringflow(binary, build(prefix), work)
            ok &= check(prefix, label)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
