"""Exports golden cases from TensorFlow 2.21 for ringflow's tests.

Usage: python export_cases.py [OUT_DIR] [CASE...]
       (OUT_DIR defaults to tests/fixtures/tf-graphs; no CASE means every case;
        needs tensorflow-cpu 2.21 and keras 3; the repository's tests do not)

Each case is built by one `case_*` function below and written to OUT_DIR/NAME/:
graph.pb (binary GraphDef), graph.pbtxt, case.json and the .npy feeds and
expected fetches (stepI_feed_NODE_PORT.npy, stepI_expect_NODE_PORT.npy; a '/'
in a node name becomes '_'). The expected values are TensorFlow's own outputs
from importing the exported GraphDef bytes back (tf.compat.v1.import_graph_def)
and running them in a tf.compat.v1.Session, steps in order in one session; for
the cases exported from a tf.function they are also checked against calling the
function eagerly. Every case runs in its own Python process, so the uid suffixes
TensorFlow gives to function names do not depend on which cases ran before, and
re-running gives identical bytes. Inputs and Keras weights come from numpy
generators with fixed seeds (weights are set explicitly, so they do not depend on
Keras' initializers).

For each case it prints one JSON line: the op types, library functions, device
pins, node counts, and the largest difference between the Session's values and
the eager call and between runs with grappler on and off; for the cross-task
cases a second line gives the op types of the partition graphs TF ran per task.

case.json fields: "note", "steps" (feeds tensor -> .npy, fetches tensor ->
expected .npy, targets op names), "ops" (sorted op types of the graph and of
every function in its library; calls by function name are listed under
"functions" instead), "functions" (library function names), "devices" (device
pins in the graph and the library), "tolerance" ({"rtol", "atol"}), "outputs"
(what each fetched tensor is, where the fetch names are TF's Identity_N) and
"tensorflow" (the version).

How the cases are made:

Frozen Keras models (keras 3 as tf.keras; model called with training=False in a
tf.function with a named TensorSpec, converted by
convert_variables_to_constants_v2, frozen.graph.as_graph_def(); the placeholder
and Identity output names are TF's):
  keras_cnn        ZeroPadding2D, strided valid Conv2D, BatchNormalization (keras
                   3 lowers it to Rsqrt/Mul/Sub/AddV2, not FusedBatchNormV3), ReLU
                   max 6 (Relu6), DepthwiseConv2D same, 1x1 Conv2D, MaxPool,
                   AvgPool same, dilated Conv2D (SpaceToBatchND/Conv2D/
                   BatchToSpaceND), GlobalAveragePooling2D, Dense softmax; batch 2
                   fed through a [None,32,32,3] placeholder.
  keras_embedding  Embedding(1000,16) on int32 ids [4,12] (GatherV2 of the frozen
                   table), GlobalAveragePooling1D, Dense relu, Dense; extra outputs
                   using top_k, gather(axis=1, batch_dims=1), argmax, one_hot.
  keras_attention  transformer block: MultiHeadAttention(2 heads, key_dim 8) self
                   attention (Einsum, BatchMatMulV2, Softmax), Add, LayerNormalization,
                   Dense gelu exact (Erfc), Dense, Add, LayerNormalization.
  keras_causal_attention  decoder block: Normalization layer (Sub, Sqrt of the
                   variance, RealDiv), MultiHeadAttention(2 heads, key_dim 8) with
                   use_causal_mask (MatrixBandPart of ones), LayerNormalization, Dense.
  keras_unet       small U-Net: Conv2D, MaxPool, SeparableConv2D, bilinear
                   UpSampling2D and Resizing (ResizeBilinear, half-pixel centers),
                   Conv2DTranspose, Concatenate, nearest Resizing
                   (ResizeNearestNeighbor), sigmoid head.
  keras_conv3d     video classifier on [2,6,8,8,3]: Conv3D same, MaxPooling3D,
                   Conv3D valid stride 2, AveragePooling3D same (padding not
                   counted), GlobalAveragePooling3D, Dense softmax.
Frozen tf.functions:
  array_ops        StridedSlice with every mask, GatherV2 (axis 0 and batch_dims),
                   OneHot, Cumsum (exclusive, reverse), TopKV2, ArgMax (axis 0, -1),
                   Range (fed limit), Split, SplitV, Unpack, Where (1-arg), Pad, PadV2,
                   MirrorPad REFLECT and SYMMETRIC.
  nd_ops           BroadcastTo, BroadcastArgs (tf.linspace), MatrixBandPart (three
                   bands), GatherNd (elements, rows), ScatterNd (duplicates),
                   TensorScatterUpdate/Add/Sub/Max/Min, DepthToSpace, SpaceToDepth,
                   ResizeBilinear and ResizeNearestNeighbor in every convention
                   (legacy, align_corners, half_pixel_centers).
  sequence_and_segment_ops  Roll, ReverseSequence, MatrixDiagPartV3 (one diagonal,
                   a band in two alignments; tf.linalg.trace), MatrixSetDiagV3,
                   LowerBound/UpperBound (tf.searchsorted), Bucketize, EuclideanNorm,
                   SegmentSum/Mean/Prod/Max/Min with an empty segment.
  linalg_ops       MatrixInverse (and adjoint), MatrixDeterminant, LogMatrixDeterminant,
                   MatrixSolve, MatrixTriangularSolve (lower, upper by adjoint),
                   Cholesky on a batch of well-conditioned float32 and float64 matrices.
  detection_ops    CropAndResize (bilinear, nearest, boxes running off the image),
                   NonMaxSuppressionV2/V3/V5 (soft-NMS) on fed boxes with overlaps,
                   equal scores and a score threshold; non_max_suppression_padded
                   (TF 2 builds it as a v1 while loop of its own, not V4). The
                   only case whose graph bytes vary between exports: TensorFlow
                   orders that loop's inputs differently each time; the values
                   and the graph's meaning do not change.
  color_and_lrn_ops  RGBToHSV, HSVToRGB, AdjustContrastv2, AdjustHue (both ways, past
                   a whole turn), AdjustSaturation (down, up past 1), LRN (default
                   and custom radius, bias, alpha, beta).
  math_ops         Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, Atan2,
                   Rint, Xlogy, Xlog1py, Xdivy on fed inputs inside their domains.
  special_and_counting_ops  Lgamma, Digamma, Erfinv, Ndtri, BesselI0e/I1e,
                   CumulativeLogsumexp, log_poisson_loss; DenseBincount (counts,
                   weights, binary rows), UniqueWithCounts, HistogramFixedWidth,
                   SparseToDense; two passing Assert ops an output depends on.
  image_resampling_ops  ResizeBicubic (Keys half-pixel, legacy, align_corners),
                   ResizeArea (down, up), ScaleAndTranslate (antialias, lanczos,
                   gaussian, mitchellcubic), ExtractImagePatches (VALID; SAME with
                   rates), MaxPoolWithArgmax (ties, batch in the index),
                   Dilation2D and erosion2d.
  uint8_images     a fed uint8 image through Cast (both ways, saturating), resizing
                   (bilinear, nearest, bicubic), flips, crops, Transpose, ConcatV2,
                   GatherV2, Equal and Unique on uint8.
  stateless_random_ops  tf.random.stateless_* (uniform float and int, normal,
                   truncated normal; key/counter V2 ops and the v1 ops),
                   stateless_dropout (Keras 3 Dropout in training),
                   tf.image.stateless_random_* on fed seeds.
  audio_spectrogram_ops  tf.signal.stft (RFFT), ComplexAbs, Real, Imag, Angle,
                   log-mel and MFCCs, RFFT padded, IRFFT, FFT/IFFT of Complex and
                   Conj.
  einsum_ops       tf.einsum: batch matmul, implicit output, broadcasting ellipsis,
                   diagonal, trace, transpose, outer, attention scores, sum-out.
  nn_ops           tf.nn ops keras 3 does not emit: FusedBatchNormV3 (inference),
                   Conv2D with explicit paddings and with dilations, Conv2D
                   transpose (Conv2DBackpropInput), dilated depthwise conv, SAME
                   MaxPool, LeakyRelu, Elu, Selu, Sigmoid, Softplus, LogSoftmax.
tf.function graphs with their function library (not frozen, not inlined:
concrete_function.graph.as_graph_def()):
  while_v2         simple, nested (inner with maximum_iterations) and matrix-power
                   loops; steps n=5 and n=0 (zero iterations).
  cond_v2          tf.cond (StatelessIf) on a fed bool, tf.switch_case (StatelessCase)
                   on a fed index; steps take both cond branches and three Case
                   branches plus the out-of-range default.
  function_call    outer() calls inner() twice and middle() once; middle() calls
                   inner() (PartitionedCall in the graph and inside a library function).
tf.compat.v1 graphs (tf.Graph, placeholders):
  function_call_stateful  tf.functions called from a v1 graph, one updating a resource
                   variable (StatefulPartitionedCall with a captured resource
                   handle); an init step, then three steps whose state accumulates.
  while_v1         the while_v2 loops with control flow v2 disabled (Enter, Merge,
                   Switch, LoopCond, NextIteration, Exit); steps n=5 and n=0.
  cond_v1          tf.compat.v1.cond (Switch/Merge), a nested cond and
                   tf.compat.v1.case; steps take each branch.
Across tasks, run by TensorFlow's distributed runtime (two in-process
tf.distribute.Server tasks, the Session's target the task-0 server):
  while_two_tasks     v1 while loop whose counter lives on /job:worker/task:0 and
                      whose body's matmul runs on /job:worker/task:1; n=5 and n=0.
  while_v2_two_tasks  the same loop with control flow v2 (a While op, its body
                      function pinning nodes to both tasks; TF lowers it to
                      Switch/Merge before partitioning).
  while_nested_two_tasks, while_v2_nested_two_tasks
                      an outer loop around an inner loop whose body (matmul and
                      a cond) runs on task 1: both frames span the tasks, dead
                      branches cross inside the inner frame; zero-iteration
                      loops among the steps.
  cond_two_tasks, cond_v2_two_tasks
                      a cond whose predicate is on task 0 and whose branches run
                      on task 1: the untaken branch's dead value crosses.
"""
import json
import os
import shutil
import socket
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

tf = None
tf1 = None
keras = None

DEFAULT_TOL = {"rtol": 1e-5, "atol": 1e-6}
LOOSE_TOL = {"rtol": 1e-4, "atol": 1e-5}
TASK0 = "/job:worker/task:0"
TASK1 = "/job:worker/task:1"


def _import_tf():
    global tf, tf1, keras
    import tensorflow
    import keras as keras_mod
    tf = tensorflow
    tf1 = tf.compat.v1
    keras = keras_mod
    tf.get_logger().setLevel("ERROR")


# ----------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------

def file_part(tensor_name):
    node, _, port = tensor_name.partition(":")
    return f"{node.replace('/', '_')}_{port or '0'}"


def graph_ops(graph_def):
    fn_names = {f.signature.name for f in graph_def.library.function}
    ops = {n.op for n in graph_def.node}
    devices = {n.device for n in graph_def.node if n.device}
    for f in graph_def.library.function:
        ops |= {n.op for n in f.node_def}
        devices |= {n.device for n in f.node_def if n.device}
    return sorted(ops - fn_names), sorted(fn_names), sorted(devices)


def no_grappler_config():
    cfg = tf1.ConfigProto()
    cfg.graph_options.rewrite_options.disable_meta_optimizer = True
    return cfg


def run_graph_def(graph_def, steps, target="", config=None, partitions=None):
    """Imports graph_def into a fresh graph and runs the steps in one session."""
    g = tf.Graph()
    with g.as_default():
        tf1.import_graph_def(graph_def, name="")
    results = []
    options = tf1.RunOptions(output_partition_graphs=True)
    with tf1.Session(target, graph=g, config=config) as sess:
        for st in steps:
            fetches = list(st.get("fetches", []))
            targets = list(st.get("targets", []))
            meta = tf1.RunMetadata()
            out = sess.run(fetches + targets, feed_dict=dict(st.get("feeds", {})), options=options,
                           run_metadata=meta)
            results.append([np.asarray(v) for v in out[:len(fetches)]])
            if partitions is not None:
                for pg in meta.partition_graphs:
                    devs = sorted({n.device for n in pg.node})
                    partitions.setdefault(",".join(devs), set()).update(n.op for n in pg.node)
    return results


def write_case(out_dir, name, graph_def, steps, note, tolerance=DEFAULT_TOL, target="",
               outputs=None, eager=None):
    """steps: [{"feeds": {tensor: array}, "fetches": [tensor], "targets": [op]}].
    eager: per step, a list of reference values for the fetches (or None)."""
    case_dir = os.path.join(out_dir, name)
    if os.path.isdir(case_dir):
        shutil.rmtree(case_dir)
    os.makedirs(case_dir)
    with open(os.path.join(case_dir, "graph.pb"), "wb") as f:
        f.write(graph_def.SerializeToString(deterministic=True))
    with open(os.path.join(case_dir, "graph.pbtxt"), "w") as f:
        f.write(str(graph_def))
    # Run the bytes just written, not the in-memory graph.
    from tensorflow.core.framework import graph_pb2
    reread = graph_pb2.GraphDef()
    with open(os.path.join(case_dir, "graph.pb"), "rb") as f:
        reread.ParseFromString(f.read())
    partitions = {}
    results = run_graph_def(reread, steps, target=target, partitions=partitions)

    diffs = {}
    if target == "":
        plain = run_graph_def(reread, steps, config=no_grappler_config())
        diffs["grappler_off_vs_on"] = max_diff(results, plain)
    if eager is not None:
        diffs["eager_vs_session"] = max_diff(results, eager)
        for got, want in zip(results, eager):
            for a, b in zip(got, want):
                if np.asarray(a).dtype.kind in "OSU":
                    np.testing.assert_array_equal(a, b)
                else:
                    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)

    json_steps = []
    for i, (st, vals) in enumerate(zip(steps, results)):
        feeds, fetches = {}, {}
        for tname, value in st.get("feeds", {}).items():
            fname = f"step{i}_feed_{file_part(tname)}.npy"
            np.save(os.path.join(case_dir, fname), npy_value(value))
            feeds[tname] = fname
        for tname, value in zip(st.get("fetches", []), vals):
            fname = f"step{i}_expect_{file_part(tname)}.npy"
            np.save(os.path.join(case_dir, fname), npy_value(value))
            fetches[tname] = fname
        json_steps.append({"feeds": feeds, "fetches": fetches, "targets": list(st.get("targets", []))})

    ops, functions, devices = graph_ops(graph_def)
    case = {"note": note, "steps": json_steps, "ops": ops, "devices": devices, "tolerance": tolerance}
    if functions:
        case["functions"] = functions
    if outputs:
        case["outputs"] = outputs
    case["tensorflow"] = tf.__version__
    with open(os.path.join(case_dir, "case.json"), "w") as f:
        json.dump(case, f, indent=1)
        f.write("\n")
    print(json.dumps({"case": name, "ops": ops, "functions": functions, "devices": devices,
                      "nodes": len(graph_def.node), "library": len(graph_def.library.function),
                      "diffs": diffs}))
    if target != "":
        # What TF ran: the ops of the partition graphs per device (after lowering).
        print(json.dumps({"case": name, "partitions": {d: sorted(o) for d, o in sorted(partitions.items())}}))


def npy_value(value):
    """A value as .npy stores it readably: strings (object arrays of bytes)
    as fixed-width bytes ('S'), which keep every byte but trailing NULs."""
    value = np.asarray(value)
    if value.dtype.kind == "O":
        assert all(not bytes(v).endswith(b"\0") for v in value.flat), "a string ends with NUL"
        return value.astype(bytes)
    return value


def max_diff(a_steps, b_steps):
    m = 0.0
    for a_vals, b_vals in zip(a_steps, b_steps):
        for a, b in zip(a_vals, b_vals):
            a = np.asarray(a)
            b = np.asarray(b)
            assert a.shape == b.shape, (a.shape, b.shape)
            if a.size and a.dtype.kind in "OSU":
                # Strings: 0 if all equal, else 1.
                m = max(m, 0.0 if np.array_equal(a, b) else 1.0)
            elif a.size:
                m = max(m, float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))))
    return m


def canonical_order(graph_def):
    """Nodes in topological order, ties broken by name. The grappler pass inside
    convert_variables_to_constants_v2 emits nodes in an order that changes from run
    to run (placeholders swap places); this keeps graph.pb byte-identical."""
    import heapq
    from tensorflow.core.framework import graph_pb2
    by_name = {n.name: n for n in graph_def.node}
    deps = {}
    users = {name: [] for name in by_name}
    for n in graph_def.node:
        srcs = set()
        for inp in n.input:
            src = inp.lstrip("^").split(":")[0]
            if src in by_name and by_name[src].op not in ("NextIteration", "RefNextIteration"):
                srcs.add(src)
        deps[n.name] = len(srcs)
        for src in srcs:
            users[src].append(n.name)
    ready = [name for name, d in deps.items() if d == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        name = heapq.heappop(ready)
        order.append(name)
        for u in users[name]:
            deps[u] -= 1
            if deps[u] == 0:
                heapq.heappush(ready, u)
    order += sorted(set(by_name) - set(order))
    out = graph_pb2.GraphDef()
    out.CopyFrom(graph_def)
    del out.node[:]
    out.node.extend([by_name[name] for name in order])
    return out


def freeze(fn, *specs):
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2
    frozen = convert_variables_to_constants_v2(fn.get_concrete_function(*specs))
    return frozen, canonical_order(frozen.graph.as_graph_def())


def fn_steps(fn, input_names, output_names, feeds_list, targets=()):
    """Steps for a (concrete or frozen) function: feeds by position, every output fetched;
    also the eager reference values from calling fn."""
    steps, eager = [], []
    for feeds in feeds_list:
        steps.append({"feeds": dict(zip(input_names, feeds)), "fetches": list(output_names),
                      "targets": list(targets)})
        out = fn(*[tf.constant(v) for v in feeds])
        eager.append([np.asarray(t) for t in tf.nest.flatten(out)])
    return steps, eager


def function_case(out_dir, name, f, specs, feeds, note, names=None, tolerance=DEFAULT_TOL):
    """A case from a tf.function frozen at `specs`, run on each step's
    `feeds`: its outputs are named by `names` (a list) or, for a function
    returning a dict, by the dict's sorted keys."""
    frozen, gd = freeze(f, *specs)
    ins, outs = frozen_io(frozen)
    if names is None:
        names = sorted(f.get_concrete_function(*specs).structured_outputs)
    steps, eager = fn_steps(frozen, ins, outs, feeds)
    write_case(out_dir, name, gd, steps, note, tolerance=tolerance, outputs=dict(zip(outs, names)), eager=eager)


def keras_case(out_dir, name, model, seed, spec, feeds, note, outputs, tolerance=DEFAULT_TOL):
    """A case from a Keras model with weights drawn from `seed`, called with
    training=False in a tf.function at `spec` and frozen; `outputs` names
    each output, in order."""
    set_weights(model, seed)
    serve = tf.function(lambda x: model(x, training=False))
    frozen, gd = freeze(serve, spec)
    ins, outs = frozen_io(frozen)
    steps, eager = fn_steps(frozen, ins, outs, feeds)
    write_case(out_dir, name, gd, steps, note, tolerance=tolerance, outputs=dict(zip(outs, outputs)), eager=eager)


def set_weights(model, seed):
    """Deterministic, non-trivial weights whatever keras' initializers do."""
    rng = np.random.default_rng(seed)
    for w in model.weights:
        shape = tuple(w.shape)
        path = w.path
        if "moving_variance" in path:
            v = rng.uniform(0.5, 1.5, shape)
        elif "gamma" in path:
            v = rng.uniform(0.7, 1.3, shape)
        elif "moving_mean" in path or "beta" in path or "bias" in path:
            v = rng.normal(0.0, 0.1, shape)
        elif "embeddings" in path:
            v = rng.normal(0.0, 0.5, shape)
        else:
            fan_in = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
            v = rng.normal(0.0, 1.0 / np.sqrt(max(fan_in, 1)), shape)
        w.assign(v.astype(w.dtype))


def frozen_io(frozen):
    return [t.name for t in frozen.inputs], [t.name for t in frozen.outputs]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_task_servers():
    ports = [free_port() for _ in range(2)]
    cluster = tf.train.ClusterSpec({"worker": [f"127.0.0.1:{p}" for p in ports]})
    return [tf.distribute.Server(cluster, job_name="worker", task_index=i, start=True) for i in range(2)]


# ----------------------------------------------------------------------------
# frozen Keras models
# ----------------------------------------------------------------------------

def case_keras_cnn(out_dir):
    L = keras.layers
    inp = keras.Input((32, 32, 3), name="image")
    x = L.ZeroPadding2D(name="pad")(inp)
    x = L.Conv2D(8, 3, strides=2, padding="valid", name="conv1")(x)
    x = L.BatchNormalization(name="bn1")(x)
    x = L.ReLU(max_value=6, name="relu6")(x)
    x = L.DepthwiseConv2D(3, padding="same", name="dw")(x)
    x = L.BatchNormalization(name="bn2")(x)
    x = L.ReLU(name="relu")(x)
    x = L.Conv2D(16, 1, name="pw")(x)
    x = L.MaxPooling2D(2, name="maxpool")(x)
    x = L.AveragePooling2D(2, padding="same", name="avgpool")(x)
    x = L.Conv2D(16, 3, padding="same", dilation_rate=2, name="dilated")(x)
    x = L.GlobalAveragePooling2D(name="gap")(x)
    out = L.Dense(10, activation="softmax", name="logits")(x)
    model = keras.Model(inp, out, name="cnn")
    set_weights(model, 101)

    serve = tf.function(lambda image: model(image, training=False))
    frozen, gd = freeze(serve, tf.TensorSpec([None, 32, 32, 3], tf.float32, name="image"))
    ins, outs = frozen_io(frozen)
    rng = np.random.default_rng(1)
    feeds = [[rng.uniform(0.0, 1.0, [2, 32, 32, 3]).astype(np.float32)]]
    steps, eager = fn_steps(frozen, ins, outs, feeds)
    write_case(out_dir, "keras_cnn", gd, steps,
               "frozen keras 3 CNN (convert_variables_to_constants_v2), batch 2 through a [None,32,32,3] "
               "placeholder: ZeroPadding2D(Pad), strided valid Conv2D, BatchNormalization (inference, lowered "
               "by keras 3 to Rsqrt/Mul/Sub/AddV2), ReLU(max_value=6)=Relu6, DepthwiseConv2dNative SAME, "
               "1x1 Conv2D, MaxPool, AvgPool SAME, dilated Conv2D (emitted as SpaceToBatchND, Conv2D VALID, "
               "BatchToSpaceND), GlobalAveragePooling2D(Mean), Dense softmax",
               outputs={outs[0]: "softmax probabilities [2,10]"}, eager=eager)


def case_keras_embedding(out_dir):
    L = keras.layers
    ids_in = keras.Input((12,), dtype="int32", name="ids")
    emb = L.Embedding(1000, 16, name="emb")
    x = L.GlobalAveragePooling1D(name="gap")(emb(ids_in))
    x = L.Dense(8, activation="relu", name="hidden")(x)
    out = L.Dense(3, name="logits")(x)
    model = keras.Model(ids_in, out, name="embed")
    set_weights(model, 202)

    @tf.function
    def serve(ids):
        logits = model(ids, training=False)
        e = emb(ids)                                           # [4,12,16]
        scores = tf.reduce_sum(e, axis=-1)                     # [4,12]
        _, top = tf.math.top_k(scores, k=3)                    # [4,3]
        picked = tf.gather(e, top, axis=1, batch_dims=1)       # [4,3,16]
        cls = tf.argmax(logits, axis=1)
        return logits, picked, tf.one_hot(cls, 3)

    frozen, gd = freeze(serve, tf.TensorSpec([4, 12], tf.int32, name="ids"))
    ins, outs = frozen_io(frozen)
    rng = np.random.default_rng(2)
    feeds = [[rng.integers(0, 1000, [4, 12]).astype(np.int32)],
             [rng.integers(0, 1000, [4, 12]).astype(np.int32)]]
    steps, eager = fn_steps(frozen, ins, outs, feeds)
    write_case(out_dir, "keras_embedding", gd, steps,
               "frozen keras 3 Embedding(1000,16) (GatherV2 on the frozen table, ids guarded by Less/SelectV2) "
               "on int32 ids [4,12], GlobalAveragePooling1D, Dense relu, Dense; extra outputs: TopKV2 of "
               "per-token sums, GatherV2 axis=1 batch_dims=1 of the embeddings, ArgMax axis 1, OneHot; two steps",
               outputs=dict(zip(outs, ["logits [4,3]", "top-3 token embeddings gathered with batch_dims=1 [4,3,16]",
                                       "one_hot(argmax(logits)) [4,3]"])),
               eager=eager)


def case_keras_attention(out_dir):
    L = keras.layers
    inp = keras.Input((8, 16), name="tokens")
    a = L.MultiHeadAttention(num_heads=2, key_dim=8, name="mha")(inp, inp)
    x = L.LayerNormalization(name="ln1")(L.Add(name="res1")([inp, a]))
    h = L.Dense(32, activation="gelu", name="ffn1")(x)
    h = L.Dense(16, name="ffn2")(h)
    out = L.LayerNormalization(name="ln2")(L.Add(name="res2")([x, h]))
    model = keras.Model(inp, out, name="block")

    rng = np.random.default_rng(3)
    feeds = [[rng.standard_normal([2, 8, 16]).astype(np.float32)]]
    keras_case(out_dir, "keras_attention", model, 303, tf.TensorSpec([2, 8, 16], tf.float32, name="tokens"), feeds,
               "frozen keras 3 transformer block on [2,8,16]: MultiHeadAttention(2 heads, key_dim 8) self "
               "attention (projections as BatchMatMulV2, scores and context as Einsum, Softmax), Add, "
               "LayerNormalization (Mean, SquaredDifference, Rsqrt, StopGradient), Dense(32, gelu exact: "
               "0.5*x*Erfc(-x/sqrt 2)), Dense(16), Add, LayerNormalization. tolerance rtol 1e-4 / atol 1e-5: "
               "TF computes Erfc, Exp (Softmax) and Rsqrt with Eigen's polynomial approximations, and a runtime "
               "with other approximations differs by more than float32 rounding; the LayerNormalizations divide "
               "by small standard deviations, which amplifies such differences. (TF's own float32 output is "
               "within 5e-7 of the same graph run in float64.)",
               ["block output [2,8,16]"], tolerance=LOOSE_TOL)


def case_keras_causal_attention(out_dir):
    L = keras.layers
    inp = keras.Input((8, 16), name="tokens")
    x = L.Normalization(mean=0.25, variance=2.0, name="norm")(inp)
    a = L.MultiHeadAttention(num_heads=2, key_dim=8, name="mha")(x, x, use_causal_mask=True)
    x = L.LayerNormalization(name="ln")(L.Add(name="res")([x, a]))
    out = L.Dense(16, name="proj")(x)
    model = keras.Model(inp, out, name="decoder")

    rng = np.random.default_rng(7)
    feeds = [[rng.standard_normal([2, 8, 16]).astype(np.float32)]]
    spec = tf.TensorSpec([2, 8, 16], tf.float32, name="tokens")
    keras_case(out_dir, "keras_causal_attention", model, 404, spec, feeds,
               "frozen keras 3 decoder block on [2,8,16]: Normalization(mean 0.25, variance 2: Sub, Sqrt of "
               "the variance, RealDiv), MultiHeadAttention(2 heads, key_dim 8, use_causal_mask: the mask is "
               "MatrixBandPart(ones, -1, 0) of the sequence length), Add, LayerNormalization, Dense(16). "
               "tolerance rtol 1e-4 / atol 1e-5 as keras_attention (Eigen's Exp and Rsqrt approximations)",
               ["decoder output [2,8,16]"], tolerance=LOOSE_TOL)


def case_keras_unet(out_dir):
    L = keras.layers
    inp = keras.Input((16, 16, 3), name="image")
    c1 = L.Conv2D(8, 3, padding="same", activation="relu", name="enc1")(inp)
    p1 = L.MaxPool2D(name="pool1")(c1)
    c2 = L.SeparableConv2D(16, 3, padding="same", activation="relu", name="enc2")(p1)
    u1 = L.UpSampling2D(interpolation="bilinear", name="up_bilinear")(c2)
    t1 = L.Conv2DTranspose(8, 3, padding="same", name="dec1")(u1)
    m = L.Concatenate(name="skip")([c1, t1])
    head = L.Conv2D(2, 1, activation="sigmoid", name="head")(m)
    small = L.Resizing(11, 7, interpolation="bilinear", name="resize_bilinear")(head)
    big = L.Resizing(21, 19, interpolation="nearest", name="resize_nearest")(head)
    model = keras.Model(inp, [small, big], name="unet")

    rng = np.random.default_rng(8)
    feeds = [[rng.standard_normal([2, 16, 16, 3]).astype(np.float32)]]
    spec = tf.TensorSpec([2, 16, 16, 3], tf.float32, name="image")
    keras_case(out_dir, "keras_unet", model, 505, spec, feeds,
               "frozen keras 3 U-Net on [2,16,16,3]: Conv2D relu, MaxPool, SeparableConv2D (depthwise then "
               "1x1), UpSampling2D bilinear (ResizeBilinear, half-pixel centers), Conv2DTranspose "
               "(Conv2DBackpropInput), Concatenate skip, 1x1 Conv2D sigmoid head, resized down by Resizing "
               "bilinear to [11,7] and up by Resizing nearest to [21,19] (ResizeNearestNeighbor)",
               ["head resized bilinear [2,11,7,2]", "head resized nearest [2,21,19,2]"])


def case_keras_conv3d(out_dir):
    L = keras.layers
    inp = keras.Input((6, 8, 8, 3), name="clip")
    x = L.Conv3D(4, 3, padding="same", activation="relu", name="conv1")(inp)
    x = L.MaxPooling3D(pool_size=(1, 2, 2), name="pool1")(x)
    x = L.Conv3D(6, (2, 3, 3), strides=2, padding="valid", activation="relu", name="conv2")(x)
    x = L.AveragePooling3D(pool_size=2, padding="same", name="pool2")(x)
    x = L.GlobalAveragePooling3D(name="gap")(x)
    out = L.Dense(5, activation="softmax", name="classes")(x)
    model = keras.Model(inp, out, name="video")

    rng = np.random.default_rng(12)
    feeds = [[rng.standard_normal([2, 6, 8, 8, 3]).astype(np.float32)]]
    keras_case(out_dir, "keras_conv3d", model, 606, tf.TensorSpec([2, 6, 8, 8, 3], tf.float32, name="clip"), feeds,
               "frozen keras 3 video classifier on [2,6,8,8,3]: Conv3D(4, 3, same, relu), MaxPooling3D (1,2,2), "
               "Conv3D(6, (2,3,3), stride 2, valid, relu), AveragePooling3D(2, same: the padded taps are not "
               "counted), GlobalAveragePooling3D (Mean), Dense(5, softmax)",
               ["class probabilities [2,5]"])


def case_keras_conv3d_transpose(out_dir):
    L = keras.layers
    inp = keras.Input((4, 6, 6, 2), name="volume")
    x = L.Conv3D(4, 3, strides=2, padding="same", activation="relu", name="down")(inp)
    x = L.Conv3DTranspose(3, 3, strides=2, padding="same", activation="relu", name="up")(x)
    x = L.Concatenate(name="skip")([x, inp])
    x = L.Conv3DTranspose(2, (2, 3, 3), strides=(1, 2, 1), padding="valid", name="up_valid")(x)
    out = L.Conv3D(1, 1, activation="sigmoid", name="mask")(x)
    model = keras.Model(inp, out, name="unet3d")
    rng = np.random.default_rng(14)
    feeds = [[rng.standard_normal([2, 4, 6, 6, 2]).astype(np.float32)]]
    keras_case(out_dir, "keras_conv3d_transpose", model, 607, tf.TensorSpec([2, 4, 6, 6, 2], tf.float32, name="volume"),
               feeds,
               "frozen keras 3 3-D U-Net step on [2,4,6,6,2] (medical volumes): Conv3D stride 2 same, "
               "Conv3DTranspose stride 2 same (Conv3DBackpropInputV2), a skip Concatenate, Conv3DTranspose "
               "(2,3,3) strides (1,2,1) valid, 1x1x1 Conv3D sigmoid",
               ["mask [2,5,13,8,1]"])


def case_conv3d_gradients(out_dir):
    @tf.function
    def f(x, w, dy):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([x, w])
            same = tf.nn.conv3d(x, w, [1, 1, 1, 1, 1], "SAME")
            strided = tf.nn.conv3d(x, w, [1, 2, 2, 1, 1], "VALID")
            loss = tf.reduce_sum(same * dy) + tf.reduce_sum(tf.square(strided))
        dx, dw = tape.gradient(loss, [x, w])
        return {"loss": loss, "d_input": dx, "d_filter": dw}

    rng = np.random.default_rng(15)
    feeds = [[rng.standard_normal([2, 5, 6, 4, 3]).astype(np.float32),
              rng.standard_normal([2, 3, 2, 3, 4]).astype(np.float32) * 0.3,
              rng.standard_normal([2, 5, 6, 4, 4]).astype(np.float32)]]
    specs = [tf.TensorSpec([2, 5, 6, 4, 3], tf.float32, name="x"), tf.TensorSpec([2, 3, 2, 3, 4], tf.float32, name="w"),
             tf.TensorSpec([2, 5, 6, 4, 4], tf.float32, name="dy")]
    function_case(out_dir, "conv3d_gradients", f, specs, feeds,
                  "frozen tf.function with a GradientTape through tf.nn.conv3d (SAME stride 1, VALID strides 2,2,1): "
                  "the input and filter gradients (Conv3DBackpropInputV2, Conv3DBackpropFilterV2), as training a "
                  "Conv3D model computes them; atol 1e-5: a gradient element sums up to 144 products of both signs, "
                  "added in another order than TensorFlow's",
                  tolerance={"rtol": 1e-5, "atol": 1e-5})


# ----------------------------------------------------------------------------
# frozen tf.functions
# ----------------------------------------------------------------------------

def case_math_ops(out_dir):
    @tf.function
    def f(x, unit, y):
        return [
            tf.tan(x), tf.atan(x), tf.sinh(x), tf.cosh(x), tf.asinh(x), tf.acosh(tf.abs(x) + 1.0),
            tf.asin(unit), tf.acos(unit), tf.atanh(unit),
            tf.math.atan2(unit, x),
            tf.math.rint(x * 2.5),
            tf.math.xlogy(tf.round(unit * 2.0), tf.abs(y) + 0.1),
            tf.math.xlog1py(tf.round(unit * 2.0), tf.abs(y)),
            tf.math.xdivy(tf.round(unit * 2.0), y),
        ]

    specs = [tf.TensorSpec([3, 5], tf.float32, name="x"), tf.TensorSpec([3, 5], tf.float32, name="unit"),
             tf.TensorSpec([3, 5], tf.float32, name="y")]
    rng = np.random.default_rng(9)
    feeds = [[rng.uniform(-1.4, 1.4, [3, 5]).astype(np.float32), rng.uniform(-0.95, 0.95, [3, 5]).astype(np.float32),
              rng.standard_normal([3, 5]).astype(np.float32)]]
    names = ["Tan", "Atan", "Sinh", "Cosh", "Asinh", "Acosh(|x|+1)", "Asin", "Acos", "Atanh", "Atan2(unit, x)",
             "Rint(2.5x)", "Xlogy(round(2 unit), |y|+0.1)", "Xlog1py(round(2 unit), |y|)", "Xdivy(round(2 unit), y)"]
    function_case(out_dir, "math_ops", f, specs, feeds,
                  "frozen tf.function of elementwise math on x in (-1.4, 1.4), unit in (-0.95, 0.95) and a normal y: "
                  + "; ".join(names) + ". The x ops' first operand is 0 at about a fifth of the elements",
                  names=names)


def case_sequence_and_segment_ops(out_dir):
    @tf.function
    def f(x, seq, lengths):
        outs = {}
        outs["roll"] = tf.roll(x, shift=[2, -1], axis=[1, 0])
        outs["reverse_sequence"] = tf.reverse_sequence(seq, lengths, seq_axis=1, batch_axis=0)
        outs["diag_part"] = tf.linalg.diag_part(x)
        outs["diag_part_offset"] = tf.linalg.diag_part(x, k=2)
        outs["diag_band_right_left"] = tf.linalg.diag_part(x, k=(-2, 1), padding_value=-9.0)
        outs["diag_band_left_right"] = tf.linalg.diag_part(x, k=(-1, 2), padding_value=7.0, align="LEFT_RIGHT")
        outs["trace"] = tf.linalg.trace(x)
        outs["set_diag"] = tf.linalg.set_diag(x, tf.ones([4, 5]))
        outs["set_diag_band"] = tf.linalg.set_diag(x, tf.zeros([4, 2, 5]), k=(0, 1))
        row_sorted = tf.sort(x[:, 0, :], axis=-1)
        outs["searchsorted_left"] = tf.searchsorted(row_sorted, x[:, 1, :3])
        outs["searchsorted_right"] = tf.searchsorted(row_sorted, tf.round(x[:, 2, :3]), side="right",
                                                     out_type=tf.int64)
        outs["bucketize"] = tf.raw_ops.Bucketize(input=x[0], boundaries=[-1.0, 0.0, 0.5, 2.0])
        outs["euclidean_norm"] = tf.math.reduce_euclidean_norm(x, axis=[1, 2])
        ids = [0, 0, 2, 2, 2, 3]
        rows = tf.reshape(x, [6, -1])[:, :4]
        outs["segment_sum"] = tf.math.segment_sum(rows, ids)
        outs["segment_mean"] = tf.math.segment_mean(rows, ids)
        outs["segment_prod"] = tf.math.segment_prod(rows, ids)
        outs["segment_max"] = tf.math.segment_max(rows, ids)
        outs["segment_min"] = tf.math.segment_min(rows, ids)
        return outs

    specs = [tf.TensorSpec([4, 5, 6], tf.float32, name="x"), tf.TensorSpec([3, 7, 2], tf.float32, name="seq"),
             tf.TensorSpec([3], tf.int64, name="lengths")]
    rng = np.random.default_rng(11)
    feeds = [[rng.standard_normal([4, 5, 6]).astype(np.float32), rng.standard_normal([3, 7, 2]).astype(np.float32),
              np.array([7, 0, 4], np.int64)]]
    function_case(out_dir, "sequence_and_segment_ops", f, specs, feeds,
                  "frozen tf.function: Roll (two axes), ReverseSequence (lengths 7, 0, 4), MatrixDiagPartV3 (main, "
                  "k=2, band (-2,1) RIGHT_LEFT with padding, band (-1,2) LEFT_RIGHT), tf.linalg.trace, MatrixSetDiagV3 "
                  "(main; band (0,1)), LowerBound and UpperBound (tf.searchsorted left, right with int64), Bucketize, "
                  "EuclideanNorm, SegmentSum/Mean/Prod/Max/Min over ids [0,0,2,2,2,3] (segment 1 empty)")


def case_linalg_ops(out_dir):
    @tf.function
    def f(a, b, a64):
        spd = tf.matmul(a, a, transpose_b=True) + 4.0 * tf.eye(4)
        chol = tf.linalg.cholesky(spd)
        sign, logdet = tf.linalg.slogdet(a)
        return [
            tf.linalg.inv(a),
            tf.linalg.inv(a, adjoint=True),
            tf.linalg.det(a),
            sign, logdet,
            tf.linalg.solve(a, b),
            tf.linalg.solve(a, b, adjoint=True),
            chol,
            tf.linalg.triangular_solve(chol, b),
            tf.linalg.triangular_solve(chol, b, adjoint=True),
            tf.linalg.inv(a64),
            tf.linalg.det(a64),
            *tf.linalg.qr(b),
            *tf.linalg.qr(b, full_matrices=True),
            *tf.linalg.qr(tf.transpose(b, [0, 2, 1])),
            *tf.linalg.qr(a64, full_matrices=True),
        ]

    specs = [tf.TensorSpec([3, 4, 4], tf.float32, name="a"), tf.TensorSpec([3, 4, 2], tf.float32, name="b"),
             tf.TensorSpec([2, 3, 3], tf.float64, name="a64")]
    rng = np.random.default_rng(13)
    # Diagonally dominant: well conditioned, so float32 answers agree with
    # any stable factorization to float rounding.
    a = rng.standard_normal([3, 4, 4]) + 5.0 * np.eye(4) * np.array([1, -1, 1])[:, None, None]
    a64 = rng.standard_normal([2, 3, 3]) + 4.0 * np.eye(3)
    feeds = [[a.astype(np.float32), rng.standard_normal([3, 4, 2]).astype(np.float32), a64]]
    names = ["MatrixInverse", "MatrixInverse adjoint", "MatrixDeterminant", "LogMatrixDeterminant sign",
             "LogMatrixDeterminant log", "MatrixSolve", "MatrixSolve adjoint", "Cholesky of a a^T + 4I",
             "MatrixTriangularSolve lower", "MatrixTriangularSolve adjoint (upper)", "MatrixInverse float64",
             "MatrixDeterminant float64", "Qr q of b", "Qr r of b", "Qr q of b full_matrices",
             "Qr r of b full_matrices", "Qr q of b^T (wide)", "Qr r of b^T (wide)", "Qr q float64 full_matrices",
             "Qr r float64 full_matrices"]
    function_case(out_dir, "linalg_ops", f, specs, feeds,
                  "frozen tf.function of tf.linalg on a batch of 3 diagonally dominant 4x4 float32 matrices (one with "
                  "a negative determinant), 2 right-hand sides, and 2 float64 3x3 matrices (QR of the right-hand sides, tall, "
                  "full and wide, and of the float64 ones): " + "; ".join(names),
                  names=names)


def case_special_and_counting_ops(out_dir):
    @tf.function
    def f(x, ids, weights):
        outs = {}
        pos = tf.abs(x) + 0.25
        outs["lgamma"] = tf.math.lgamma(x * 3.0)
        outs["digamma"] = tf.math.digamma(x * 3.0)
        outs["erfinv"] = tf.math.erfinv(tf.tanh(x))
        outs["ndtri"] = tf.math.ndtri(tf.sigmoid(x * 2.0))
        outs["bessel_i0e"] = tf.math.bessel_i0e(x * 8.0)
        outs["bessel_i1e"] = tf.math.bessel_i1e(x * 8.0)
        outs["cumulative_logsumexp"] = tf.math.cumulative_logsumexp(x, axis=1)
        outs["cumulative_logsumexp_exclusive_reverse"] = tf.math.cumulative_logsumexp(x, axis=0, exclusive=True,
                                                                                      reverse=True)
        outs["poisson_nll"] = tf.nn.log_poisson_loss(pos, tf.math.log(pos + 1.0), compute_full_loss=True)
        outs["bincount"] = tf.math.bincount(ids, minlength=6)
        outs["bincount_weighted"] = tf.math.bincount(ids, weights=weights, minlength=6, maxlength=6)
        outs["bincount_rows_binary"] = tf.math.bincount(ids, minlength=6, maxlength=6, axis=-1, binary_output=True)
        y, idx, count = tf.unique_with_counts(tf.reshape(ids, [-1]))
        outs["unique_values"], outs["unique_idx"], outs["unique_counts"] = y, idx, count
        outs["histogram"] = tf.histogram_fixed_width(x, [-1.0, 1.0], nbins=5)
        outs["sparse_round_trip"] = tf.sparse.to_dense(tf.sparse.from_dense(tf.nn.relu(x)))
        outs["sparse_to_dense"] = tf.compat.v1.sparse_to_dense([[0, 1], [2, 3]], [3, 4], [5.0, 6.0], default_value=-1.0)
        with tf.control_dependencies([tf.debugging.assert_non_negative(pos, message="pos must be non-negative"),
                                      tf.debugging.assert_less(ids, 6)]):
            outs["checked"] = tf.identity(pos)
        return outs

    specs = [tf.TensorSpec([4, 5], tf.float32, name="x"), tf.TensorSpec([3, 7], tf.int32, name="ids"),
             tf.TensorSpec([3, 7], tf.float32, name="weights")]
    rng = np.random.default_rng(21)
    feeds = []
    for _ in range(2):
        x = rng.uniform(-0.95, 0.95, [4, 5]).astype(np.float32)
        ids = rng.integers(0, 6, [3, 7]).astype(np.int32)
        feeds.append([x, ids, rng.uniform(0.0, 2.0, [3, 7]).astype(np.float32)])
    function_case(out_dir, "special_and_counting_ops", f, [*specs], feeds,
                  "frozen tf.function of special functions and counting on x in (-0.95, 0.95), ids in [0, 6) and "
                  "weights: Lgamma and Digamma of 3x (poles avoided only by chance: none is hit), Erfinv(tanh x), "
                  "Ndtri(sigmoid 2x), BesselI0e/I1e of 8x, CumulativeLogsumexp (inclusive; exclusive reversed), "
                  "log_poisson_loss with the Stirling term, tf.math.bincount (DenseBincount: counts, weights, "
                  "binary rows), UniqueWithCounts, HistogramFixedWidth, SparseToDense (from_dense/to_dense, and "
                  "compat.v1.sparse_to_dense), and two passing Assert ops (assert_non_negative, assert_less) "
                  "an output depends on; two steps")


def case_image_resampling_ops(out_dir):
    @tf.function
    def f(image):
        outs = {}
        outs["resize_bicubic"] = tf.image.resize(image, [9, 5], method="bicubic")
        outs["resize_bicubic_legacy"] = tf.compat.v1.image.resize_bicubic(image, [4, 13])
        outs["resize_bicubic_align_corners"] = tf.compat.v1.image.resize_bicubic(image, [9, 9], align_corners=True)
        outs["resize_area"] = tf.image.resize(image, [4, 3], method="area")
        outs["resize_area_up"] = tf.image.resize(image, [10, 11], method="area")
        outs["resize_antialias_bilinear"] = tf.image.resize(image, [3, 4], antialias=True)
        outs["resize_antialias_bicubic"] = tf.image.resize(image, [4, 3], method="bicubic", antialias=True)
        outs["resize_lanczos3"] = tf.image.resize(image, [9, 5], method="lanczos3")
        outs["resize_lanczos5_antialias"] = tf.image.resize(image, [3, 3], method="lanczos5", antialias=True)
        outs["resize_gaussian"] = tf.image.resize(image, [5, 10], method="gaussian", antialias=True)
        outs["resize_mitchellcubic"] = tf.image.resize(image, [4, 9], method="mitchellcubic", antialias=True)
        outs["extract_patches"] = tf.image.extract_patches(image, [1, 3, 2, 1], [1, 2, 3, 1], [1, 1, 1, 1], "VALID")
        outs["extract_patches_same_rates"] = tf.image.extract_patches(image, [1, 2, 2, 1], [1, 3, 2, 1],
                                                                      [1, 2, 3, 1], "SAME")
        pooled, argmax = tf.nn.max_pool_with_argmax(image, 3, 2, "SAME")
        outs["max_pool_with_argmax"], outs["argmax"] = pooled, argmax
        _, outs["argmax_with_batch"] = tf.nn.max_pool_with_argmax(image, 2, 2, "VALID", include_batch_in_index=True)
        kernel = tf.reshape(tf.range(2 * 3 * 3, dtype=tf.float32) * 0.1 - 0.8, [2, 3, 3])
        outs["dilation2d"] = tf.nn.dilation2d(image, kernel, [1, 1, 2, 1], "SAME", "NHWC", [1, 2, 1, 1])
        outs["erosion2d"] = tf.nn.erosion2d(image, kernel, [1, 2, 1, 1], "VALID", "NHWC", [1, 1, 1, 1])
        return outs

    specs = [tf.TensorSpec([2, 6, 7, 3], tf.float32, name="image")]
    rng = np.random.default_rng(22)
    image = rng.standard_normal([2, 6, 7, 3]).astype(np.float32)
    image[0, 1, 1:3, 0] = image[0, 1, 0, 0] = 4.0  # ties for the argmax
    function_case(out_dir, "image_resampling_ops", f, specs, [[image]],
                  "frozen tf.function of image resampling on a [2,6,7,3] image: ResizeBicubic (half-pixel Keys "
                  "cubic [9,5], legacy [4,13], align_corners [9,9]), ResizeArea ([4,3] and up to [10,11]), "
                  "ScaleAndTranslate (antialiased bilinear and bicubic, lanczos3, lanczos5, gaussian, mitchellcubic), "
                  "ExtractImagePatches (VALID 3x2 strides 2x3; SAME 2x2 strides 3x2 rates 2x3), "
                  "MaxPoolWithArgmax (SAME 3x3/2; VALID 2x2/2 with the batch in the index; three equal maxima in "
                  "one window), Dilation2D (SAME, strides 1x2, rates 2x1) and erosion2d (Dilation2D of the negated "
                  "image and reversed filter)")


def case_image_projective_ops(out_dir):
    @tf.function
    def f(image, image_u8):
        outs = {}
        angle = 0.4
        rotation = tf.constant([[np.cos(angle), -np.sin(angle), 1.5, np.sin(angle), np.cos(angle), -0.7, 0.0, 0.0]],
                               tf.float32)
        # Row 0: a perspective warp; row 1: a 2.5x zoom out, reaching
        # several periods past the image for the reflect and wrap modes.
        per_image = tf.constant([[0.9, 0.1, 0.5, -0.2, 1.1, 0.3, 0.02, -0.03],
                                 [2.5, 0.0, -4.0, 0.0, 2.5, -5.0, 0.0, 0.0]], tf.float32)
        for mode in ["REFLECT", "WRAP", "CONSTANT", "NEAREST"]:
            for interpolation in ["NEAREST", "BILINEAR"]:
                outs[f"v3_{mode.lower()}_{interpolation.lower()}"] = tf.raw_ops.ImageProjectiveTransformV3(
                    images=image, transforms=per_image, output_shape=[5, 8], fill_value=0.25,
                    interpolation=interpolation, fill_mode=mode)
        outs["v3_rotation_shared"] = tf.raw_ops.ImageProjectiveTransformV3(
            images=image, transforms=rotation, output_shape=[6, 7], fill_value=-1.0, interpolation="BILINEAR",
            fill_mode="CONSTANT")
        outs["v2_reflect"] = tf.raw_ops.ImageProjectiveTransformV2(
            images=image, transforms=rotation, output_shape=[6, 7], interpolation="BILINEAR", fill_mode="REFLECT")
        outs["v3_uint8_wrap"] = tf.raw_ops.ImageProjectiveTransformV3(
            images=image_u8, transforms=per_image, output_shape=[6, 7], fill_value=7.0, interpolation="BILINEAR",
            fill_mode="WRAP")
        outs["ensure_shape"] = tf.ensure_shape(image, [None, 6, 7, 3]) * 2.0
        return outs

    specs = [tf.TensorSpec([2, 6, 7, 3], tf.float32, name="image"), tf.TensorSpec([2, 6, 7, 3], tf.uint8, name="image_u8")]
    rng = np.random.default_rng(31)
    image = rng.standard_normal([2, 6, 7, 3]).astype(np.float32)
    image_u8 = rng.integers(0, 256, [2, 6, 7, 3]).astype(np.uint8)
    function_case(out_dir, "image_projective_ops", f, specs, [[image, image_u8]],
                  "frozen tf.function of ImageProjectiveTransformV3 (Keras RandomRotation/RandomZoom/"
                  "RandomTranslation's op) in every fill mode (reflect, wrap, constant with a fill value, nearest) "
                  "and interpolation, per-image transforms (a perspective warp; a 2.5x zoom out reaching several "
                  "periods past the image), a shared rotation, V2 (fill 0), uint8 images; EnsureShape")


def case_image_decode_ops(out_dir):
    @tf.function
    def f(jpeg, png, png_gray):
        outs = {}
        outs["jpeg"] = tf.io.decode_jpeg(jpeg, channels=3)
        outs["jpeg_as_is"] = tf.io.decode_jpeg(jpeg)
        outs["jpeg_gray"] = tf.io.decode_jpeg(jpeg, channels=1)
        outs["jpeg_accurate"] = tf.io.decode_jpeg(jpeg, channels=3, dct_method="INTEGER_ACCURATE")
        outs["jpeg_plain_upsampling"] = tf.io.decode_jpeg(jpeg, channels=3, fancy_upscaling=False)
        outs["jpeg_half"] = tf.io.decode_jpeg(jpeg, channels=3, ratio=2)
        outs["jpeg_quarter"] = tf.io.decode_jpeg(jpeg, channels=3, ratio=4)
        outs["image_jpeg_float"] = tf.io.decode_image(jpeg, channels=3, dtype=tf.float32, expand_animations=False)
        # A serving input: image bytes to a resized, normalized batch.
        pixels = tf.image.convert_image_dtype(tf.io.decode_jpeg(jpeg, channels=3), tf.float32)
        outs["served"] = tf.image.resize(pixels[None], [16, 16]) * 2.0 - 1.0
        outs["png"] = tf.io.decode_png(png)
        outs["png_rgb"] = tf.io.decode_png(png, channels=3)
        outs["png_gray_rgba"] = tf.io.decode_png(png_gray, channels=4)
        outs["image_png"] = tf.io.decode_image(png, channels=3, expand_animations=False)
        outs["image_png_gray_float"] = tf.io.decode_image(png_gray, dtype=tf.float32, expand_animations=False)
        return outs

    specs = [tf.TensorSpec([], tf.string, name="jpeg"), tf.TensorSpec([], tf.string, name="png"),
             tf.TensorSpec([], tf.string, name="png_gray")]
    rng = np.random.default_rng(37)

    def picture(h, w, c):
        smooth = np.cumsum(rng.standard_normal((h, w, c)), axis=1) * 9 + np.cumsum(rng.standard_normal((h, 1, c)), 0) * 5
        return np.clip(smooth + 128, 0, 255).astype(np.uint8)

    feeds = []
    for (h, w), subsample in [((23, 37), True), ((40, 17), False)]:
        jpeg = tf.io.encode_jpeg(picture(h, w, 3), quality=88, chroma_downsampling=subsample).numpy()
        rgba = picture(h + 3, w - 2, 4)
        png = tf.io.encode_png(rgba).numpy()
        png_gray = tf.io.encode_png(picture(7, 9, 1)).numpy()
        feeds.append([np.array(jpeg, dtype=object), np.array(png, dtype=object), np.array(png_gray, dtype=object)])
    function_case(out_dir, "image_decode_ops", f, specs, feeds,
                  "frozen tf.function decoding image bytes as serving graphs do: DecodeJpeg (3, as-is and 1 "
                  "channels, INTEGER_ACCURATE, without fancy upsampling, ratio 2 and 4; 4:2:0 then 4:4:4 "
                  "chroma), DecodeImage of a JPEG as float32, a decode-convert-resize serving input, DecodePng "
                  "(RGBA as-is and to RGB, gray to RGBA), DecodeImage of PNGs (uint8, float32)")


def case_print_and_format_ops(out_dir):
    @tf.function
    def f(x, ids, words):
        # tf.print builds StringFormat + PrintV2; the outputs wait on the
        # prints through the function's control dependencies.
        tf.print("x:", x, "sum", tf.reduce_sum(x), summarize=2)
        tf.print("ids", ids, output_stream=sys.stdout, end=" <-\n")
        passed = tf.raw_ops.Print(input=x, data=[ids, words], message="legacy: ", first_n=1, summarize=4)
        outs = {}
        outs["passed"] = passed * 2.0
        outs["default"] = tf.strings.format("x={} ids={} words={}", (x, ids, words))
        outs["all"] = tf.strings.format("{}", ids, summarize=-1)
        outs["none"] = tf.strings.format("{} {}", (x, ids), summarize=0)
        outs["shape_and_scalar"] = tf.strings.format("{} of {}", (tf.shape(ids), tf.reduce_max(x)))
        outs["percent"] = tf.strings.format("%s and %s", (tf.size(words), words[:1]), placeholder="%s")
        outs["cube"] = tf.strings.format("{}", tf.reshape(tf.range(tf.size(ids) * 4), [-1, 2, 2]), summarize=2)
        outs["flags"] = tf.strings.format("{}", x > 0.5)
        outs["later"] = tf.timestamp() > 1.5e9
        return outs

    specs = [tf.TensorSpec([None], tf.float32, name="x"), tf.TensorSpec([None, 3], tf.int64, name="ids"),
             tf.TensorSpec([None], tf.string, name="words")]
    rng = np.random.default_rng(41)
    feeds = []
    for n, m in [(5, 2), (9, 8)]:
        x = (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 8, n)).astype(np.float32)
        x[0] = 1.0 / 3.0
        ids = rng.integers(-1000, 1000, (m, 3)).astype(np.int64)
        words = np.array([b"a", b"quote\"d", b"tab\there", "caf\u00e9".encode()] * 3, dtype=object)[:n]
        feeds.append([x, ids, words])
    function_case(out_dir, "print_and_format_ops", f, specs, feeds,
                  "frozen tf.function with tf.print (StringFormat + PrintV2 to stderr and stdout, the outputs "
                  "waiting on the prints), the legacy Print passing its input through, tf.strings.format of "
                  "floats, int64 matrices, strings, bools and shapes with summarize 3, -1, 0 and 2 and a %s "
                  "placeholder, and tf.timestamp")


def case_string_array_ops(out_dir):
    @tf.function
    def f(words, keep, idx):
        outs = {}
        grid = tf.reshape(words, [2, -1])
        outs["gather"] = tf.gather(words, idx)
        outs["gather_axis1"] = tf.gather(grid, [2, 0], axis=1)
        outs["gather_nd"] = tf.gather_nd(grid, [[1, 0], [0, 2]])
        outs["slice"] = tf.slice(grid, [0, 1], [2, 2])
        outs["strided"] = grid[::-1, 1::2]
        outs["transpose"] = tf.transpose(grid)
        outs["reverse"] = tf.reverse(grid, [1])
        outs["masked"] = tf.boolean_mask(words, keep)
        outs["where"] = tf.where(keep, words, "-")
        outs["fill"] = tf.fill([2, 3], "pad")
        outs["expand_squeeze"] = tf.squeeze(tf.expand_dims(words, 0), 0)
        outs["unstack0"], outs["unstack1"] = tf.unstack(grid)
        outs["split"] = tf.split(words, 2)[1]
        outs["concat"] = tf.concat([words, words[:2]], 0)
        outs["stack"] = tf.stack([words, tf.reverse(words, [0])], axis=1)
        outs["tile"] = tf.tile(grid, [2, 1])
        outs["pad"] = tf.pad(grid, [[0, 1], [1, 0]], constant_values="?")
        outs["unique"], outs["unique_idx"] = tf.unique(words)
        outs["broadcast"] = tf.broadcast_to(words[:1], [3])
        outs["identity_n"] = tf.identity_n([words])[0]
        outs["dynamic_stitch"] = tf.dynamic_stitch([[0, 2], [1]], [words[:2], words[2:3]])
        outs["one_hot_like"] = tf.zeros_like(words)
        tokens = tf.compat.v1.string_split(tf.strings.join([words, words[::-1]], separator=" ,"), delimiter=" ,")
        outs["split_v1_indices"], outs["split_v1_values"], outs["split_v1_shape"] = (
            tokens.indices, tokens.values, tokens.dense_shape)
        outs["segment_join"] = tf.strings.unsorted_segment_join(words, tf.math.floormod(tf.range(tf.size(words)), 3), 4,
                                                                separator="+")
        return outs

    specs = [tf.TensorSpec([None], tf.string, name="words"), tf.TensorSpec([None], tf.bool, name="keep"),
             tf.TensorSpec([None], tf.int32, name="idx")]
    feeds = [[np.array([b"ant", b"bee", b"cat", b"ant", b"", "\u00e9l\u00e8ve".encode()], dtype=object),
              np.array([True, False, True, True, False, True]), np.array([5, 0, 0, 3], np.int32)],
             [np.array([b"x", b"y", b"z", b"w", b"v", b"x"], dtype=object), np.array([False, False, True, True, False, True]),
              np.array([1], np.int32)]]
    function_case(out_dir, "string_array_ops", f, specs, feeds,
                  "frozen tf.function moving string tensors as input pipelines and label lookups do: gather "
                  "(both axes, nd), slice and strided slice, transpose, reverse, boolean_mask, where, fill, "
                  "expand/squeeze, unstack, split, concat, stack, tile, pad with a string, unique, broadcast_to, "
                  "identity_n, dynamic_stitch, zeros_like; tf.compat.v1.string_split at any of two delimiter bytes "
                  "(StringSplit, empty tokens skipped), unsorted_segment_join with an empty segment")


def case_unicode_string_ops(out_dir):
    @tf.function
    def f(text):
        outs = {}
        chars = tf.strings.unicode_split(text, "UTF-8")
        outs["split_values"], outs["split_splits"] = chars.flat_values, chars.row_splits
        replaced = tf.strings.unicode_decode(text, "UTF-8", errors="replace", replace_control_characters=True)
        outs["decode_values"], outs["decode_splits"] = replaced.flat_values, replaced.row_splits
        ignored = tf.strings.unicode_decode(text, "UTF-8", errors="ignore", replacement_char=63)
        outs["ignore_values"], outs["ignore_splits"] = ignored.flat_values, ignored.row_splits
        codes, starts = tf.strings.unicode_decode_with_offsets(text, "UTF-8")
        outs["offsets"] = starts.flat_values
        outs["offsets_splits"] = codes.row_splits
        bad = tf.RaggedTensor.from_row_splits(tf.constant([104, 105, -1, 0x110000, 0xD800, 233, 0x1F600], tf.int32),
                                              tf.constant([0, 6, 6, 7], tf.int64))
        outs["encode_replace"] = tf.strings.unicode_encode(bad, "UTF-8", errors="replace", replacement_char=0x2A)
        outs["encode_ignore"] = tf.strings.unicode_encode(bad, "UTF-8", errors="ignore")
        outs["roundtrip"] = tf.strings.unicode_encode(replaced, "UTF-8")
        outs["length_bytes"] = tf.strings.length(text)
        outs["length_chars"] = tf.strings.length(text, unit="UTF8_CHAR")
        outs["strip"] = tf.strings.strip(text)
        outs["to_float"] = tf.strings.to_number(tf.strings.strip(tf.constant([" 1.5", "-2e3", "inf", "7 ", "0.1"])))
        outs["to_int64"] = tf.strings.to_number(tf.constant(["12", "-3", " 40", "+5"]), out_type=tf.int64)
        outs["substr_bytes"] = tf.strings.substr(text, tf.constant([1, 2, 0, 3, 0, 1]), 4 * tf.ones([6], tf.int32))
        outs["substr_chars_from_end"] = tf.strings.substr(text, -3 * tf.ones([6], tf.int32) + tf.constant(
            [0, 1, 3, 0, 3, 2]), 2 * tf.ones([6], tf.int32), unit="UTF8_CHAR")
        outs["substr_to_end"] = tf.strings.substr(text, 0, -1)
        grid = tf.reshape(tf.strings.as_string(tf.range(6)), [2, 3])
        outs["reduce_join_rows"] = tf.strings.reduce_join(grid, axis=1, separator="-")
        outs["reduce_join_both"] = tf.raw_ops.ReduceJoin(inputs=grid, reduction_indices=[0, 1], separator=",")
        outs["reduce_join_keep"] = tf.strings.reduce_join(grid, axis=0, keepdims=True)
        outs["base64"] = tf.io.encode_base64(text)
        outs["base64_padded"] = tf.io.encode_base64(text, pad=True)
        outs["base64_back"] = tf.io.decode_base64(tf.io.encode_base64(text, pad=True))
        numbers = tf.constant([0.0, -1.5, 3.14159265, 1e-5, 123456789.0, -2.5e-12, 1e21, 0.1], tf.float64)
        outs["as_string_f"] = tf.strings.as_string(numbers)
        outs["as_string_e3"] = tf.strings.as_string(numbers, precision=3, scientific=True)
        outs["as_string_g"] = tf.strings.as_string(tf.cast(numbers, tf.float32), shortest=True)
        outs["as_string_g2_width"] = tf.strings.as_string(numbers, precision=2, shortest=True, width=9)
        return outs

    specs = [tf.TensorSpec([6], tf.string, name="text")]
    text = np.array([b"  Hello, World  ", "caf\u00e9 \u00f1 \U0001F600".encode(), b"bad \xff\xfe utf8 \xe2\x82",
                     b"ctrl\x01\x1f tab\t", b"", b"\xf0\x9f\x98"], dtype=object)
    function_case(out_dir, "unicode_string_ops", f, specs, [[text]],
                  "frozen tf.function of tf.strings on six strings (ASCII with spaces, accents and an emoji, invalid "
                  "bytes and a truncated sequence, control characters, empty): unicode_split (UnicodeDecode + "
                  "UnicodeEncode, Keras TextVectorization(split='character')), unicode_decode with errors "
                  "replace (control characters replaced) and ignore, unicode_decode_with_offsets, unicode_encode "
                  "of invalid code points (replace, ignore), StringLength in bytes and UTF-8 characters, "
                  "StringStrip, StringToNumber to float32 and int64, Substr (bytes; UTF-8 characters from the end; "
                  "to the end), ReduceJoin (one axis, two in order, keepdims), web-safe base64 both ways (padded "
                  "or not), AsString of floats (%f, %.3e, %g, %.2g in a width)")


def case_parse_example_ops(out_dir):
    @tf.function
    def f(serialized):
        features = {
            "age": tf.io.FixedLenFeature([], tf.int64, default_value=-1),
            "scores": tf.io.FixedLenFeature([2], tf.float32, default_value=[0.5, 0.25]),
            "word": tf.io.FixedLenFeature([], tf.string, default_value="none"),
            "grid": tf.io.FixedLenFeature([2, 2], tf.float32),
            "tags": tf.io.VarLenFeature(tf.string),
            "ids": tf.io.VarLenFeature(tf.int64),
        }
        parsed = tf.io.parse_example(serialized, features)
        outs = {k: parsed[k] for k in ["age", "scores", "word", "grid"]}
        for k in ["tags", "ids"]:
            outs[k + "_indices"], outs[k + "_values"], outs[k + "_shape"] = (
                parsed[k].indices, parsed[k].values, parsed[k].dense_shape)
        v1 = tf.raw_ops.ParseExample(serialized=serialized, names=[], sparse_keys=["ids"], dense_keys=["age"],
                                     dense_defaults=[tf.constant(-1, tf.int64)], sparse_types=[tf.int64],
                                     dense_shapes=[[]])
        outs["v1_ids_indices"], outs["v1_ids_values"], outs["v1_ids_shape"] = v1[0][0], v1[1][0], v1[2][0]
        outs["v1_age"] = v1[3][0]
        return outs

    def example(**features):
        feature = {}
        for key, value in features.items():
            if isinstance(value[0], bytes):
                feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=value))
            elif isinstance(value[0], float):
                feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=value))
            else:
                feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=value))
        return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()

    serialized = np.array([
        example(age=[31], scores=[1.5, -2.0], word=[b"yes"], grid=[1.0, 2.0, 3.0, 4.0], tags=[b"a", b"bb"],
                ids=[7, 8, 9]),
        example(grid=[0.5, 0.5, 0.25, 0.0], tags=[b"c"], unrelated=[1.0]),
        example(age=[-4], word=[b"\xff\x00bytes"], grid=[9.0, 8.0, 7.0, 6.0], ids=[2**40]),
    ], dtype=object)
    specs = [tf.TensorSpec([None], tf.string, name="serialized")]
    function_case(out_dir, "parse_example_ops", f, specs, [[serialized]],
                  "frozen tf.function of tf.io.parse_example (ParseExampleV2) on three tf.train.Examples: fixed-length "
                  "int64, float32 [2], string and a required float32 [2,2] feature, defaults where one is missing, "
                  "variable-length string and int64 features as sparse tensors, a feature no one asked for; "
                  "tf.raw_ops.ParseExample (v1) with one sparse and one dense key")


def case_sparse_ops(out_dir):
    table = tf.Variable(np.linspace(-1, 1, 48, dtype=np.float32).reshape(12, 4), name="table")

    @tf.function
    def f(indices, ids, weights, dense_shape, other_indices, other_values, mat, grid):
        sp_ids = tf.SparseTensor(indices, ids, dense_shape)
        sp_w = tf.SparseTensor(indices, weights, dense_shape)
        outs = {
            "safe_mean": tf.nn.safe_embedding_lookup_sparse(table, sp_ids, sp_w, combiner="mean"),
            "safe_sqrtn": tf.nn.safe_embedding_lookup_sparse(table, sp_ids, None, combiner="sqrtn", default_id=3),
            "lookup_sum": tf.nn.embedding_lookup_sparse(
                table, tf.sparse.reorder(tf.SparseTensor(indices, tf.abs(ids), dense_shape)), None, combiner="sum"),
        }
        ordered = tf.sparse.reorder(sp_w)
        other = tf.SparseTensor(other_indices, other_values, dense_shape)
        outs["reorder_indices"], outs["reorder_values"] = ordered.indices, ordered.values
        reshaped = tf.sparse.reshape(ordered, tf.stack([dense_shape[1], -1]))
        outs["reshape_indices"], outs["reshape_shape"] = reshaped.indices, reshaped.dense_shape
        sliced = tf.sparse.slice(ordered, [1, 1], [2, 3])
        outs["slice_indices"], outs["slice_values"], outs["slice_shape"] = (
            sliced.indices, sliced.values, sliced.dense_shape)
        joined = tf.sparse.concat(1, [ordered, other])
        outs["concat_indices"], outs["concat_values"], outs["concat_shape"] = (
            joined.indices, joined.values, joined.dense_shape)
        summed = tf.sparse.add(ordered, other, threshold=0.3)
        outs["add_indices"], outs["add_values"] = summed.indices, summed.values
        outs["add_dense"] = tf.sparse.add(ordered, grid)
        outs["to_dense"] = tf.sparse.to_dense(ordered)
        outs["reduce_sum"] = tf.sparse.reduce_sum(ordered, axis=1)
        outs["reduce_max"] = tf.sparse.reduce_max(ordered, axis=0, keepdims=True)
        outs["matmul"] = tf.sparse.sparse_dense_matmul(ordered, mat)
        outs["matmul_adjoint"] = tf.sparse.sparse_dense_matmul(ordered, grid, adjoint_a=True)
        outs["softmax"] = tf.sparse.softmax(ordered).values
        outs["maximum_values"] = tf.sparse.maximum(ordered, other).values
        outs["minimum_indices"] = tf.sparse.minimum(ordered, other).indices
        outs["cwise_mul"] = (ordered * grid[0]).values
        outs["cwise_div"] = (ordered / (tf.abs(grid) + 1.0)).values
        filled, empty = tf.sparse.fill_empty_rows(sp_w, -1.0)
        outs["fill_indices"], outs["fill_values"], outs["fill_empty"] = filled.indices, filled.values, empty
        words = tf.SparseTensor(indices, tf.strings.as_string(ids), dense_shape)
        filled_words, _ = tf.sparse.fill_empty_rows(words, "none")
        outs["fill_strings"] = filled_words.values
        outs["segment_sum_num"] = tf.sparse.segment_sum(grid, [0, 2, 1, 1], [0, 0, 3, 3], num_segments=5)
        outs["segment_mean"] = tf.sparse.segment_mean(grid, [2, 0, 1], [0, 1, 1])
        outs["segment_sqrtn_num"] = tf.sparse.segment_sqrt_n(grid, [1, 1, 0], [1, 1, 2], num_segments=3)
        return outs

    rng = np.random.default_rng(21)

    def step(rows, entries, other_entries):
        coords = sorted({(int(r), int(c)) for r, c in entries})
        order = rng.permutation(len(coords))
        indices = np.array([coords[i] for i in order], np.int64).reshape(-1, 2)
        ids = rng.integers(-1, 12, len(coords)).astype(np.int64)
        weights = rng.choice([0.0, 0.5, 1.0, 2.0, -1.0], len(coords)).astype(np.float32)
        other = np.array(sorted({(int(r), int(c)) for r, c in other_entries}), np.int64).reshape(-1, 2)
        other_values = rng.standard_normal(len(other)).astype(np.float32)
        mat = rng.standard_normal([5, 3]).astype(np.float32)
        grid = rng.standard_normal([rows, 5]).astype(np.float32)
        return [indices, ids, weights, np.array([rows, 5], np.int64), other, other_values, mat, grid]

    feeds = [
        step(4, [(0, 1), (0, 3), (1, 0), (1, 2), (1, 4), (3, 0), (3, 1), (3, 2), (3, 3)], [(0, 1), (2, 2), (3, 4)]),
        step(6, [(5, 4), (0, 0), (2, 1), (2, 3), (4, 0), (4, 2), (4, 4)] + [(5, c) for c in range(4)],
             [(0, 0), (1, 1), (4, 2), (5, 0)]),
        step(3, [], [(1, 3)]),
    ]
    specs = [
        tf.TensorSpec([None, 2], tf.int64, name="indices"), tf.TensorSpec([None], tf.int64, name="ids"),
        tf.TensorSpec([None], tf.float32, name="weights"), tf.TensorSpec([2], tf.int64, name="dense_shape"),
        tf.TensorSpec([None, 2], tf.int64, name="other_indices"),
        tf.TensorSpec([None], tf.float32, name="other_values"),
        tf.TensorSpec([5, 3], tf.float32, name="mat"), tf.TensorSpec([None, 5], tf.float32, name="grid"),
    ]
    function_case(out_dir, "sparse_ops", f, specs, feeds,
                  "frozen tf.function of sparse tensors fed as indices/values/dense_shape: "
                  "safe_embedding_lookup_sparse (mean with weights, ids < 0 and weights <= 0 pruned, rows left "
                  "empty; sqrtn with a default id) and embedding_lookup_sparse (sum) over a frozen table "
                  "(SparseFillEmptyRows, SparseReshape, SparseSegmentMean/SqrtN/Sum), then tf.sparse: reorder of "
                  "shuffled entries, reshape with -1, slice, concat, add with a threshold, add to dense, to_dense, "
                  "reduce_sum, reduce_max keepdims, sparse_dense_matmul (and adjoint_a), softmax, maximum, "
                  "minimum, * and / by dense (broadcast), fill_empty_rows of floats and strings, "
                  "segment_sum/segment_sqrt_n with num_segments and segment_mean; three steps, the last with no "
                  "entries at all")


def case_feature_columns(out_dir):
    fc = tf1.feature_column
    g = tf.Graph()
    with g.as_default():
        words = tf1.placeholder(tf.string, [None, 3], name="words")
        age = tf1.placeholder(tf.float32, [None, 1], name="age")
        hashed = fc.categorical_column_with_hash_bucket("words", 20)
        colors = tf1.placeholder(tf.string, [None, 2], name="colors")
        vocab = fc.categorical_column_with_vocabulary_list("colors", ["red", "green", "blue", "cyan"], num_oov_buckets=2)
        ages = fc.numeric_column("age")
        columns = [
            fc.embedding_column(hashed, 4, combiner="sqrtn",
                                initializer=tf1.constant_initializer(np.linspace(-1, 1, 80, dtype=np.float32))),
            fc.embedding_column(vocab, 3, combiner="mean",
                                initializer=tf1.constant_initializer(np.linspace(2, -2, 18, dtype=np.float32))),
            fc.indicator_column(vocab),
            ages,
            fc.bucketized_column(ages, [18.0, 30.0, 65.0]),
        ]
        net = fc.input_layer({"words": words, "colors": colors, "age": age}, columns)
        out = tf.identity(net, name="features")
        tf1.group(tf1.global_variables_initializer(), tf1.tables_initializer(), name="init_all")
    gd = g.as_graph_def()
    batches = [
        (np.array([[b"the", b"quick", b""], [b"fox", b"", b""], [b"", b"", b""], [b"a", b"a", b"jumps"]],
                  dtype=object),
         np.array([[b"red", b"blue"], [b"teal", b""], [b"", b""], [b"cyan", b"cyan"]], dtype=object),
         np.array([[17.0], [30.0], [44.5], [80.0]], np.float32)),
        (np.array([[b"lazy", b"dog", b"the"]], dtype=object), np.array([[b"green", b"magenta"]], dtype=object),
         np.array([[65.0]], np.float32)),
    ]
    steps = [{"feeds": {}, "fetches": [], "targets": ["init_all"]}]
    steps += [{"feeds": {"words:0": w, "colors:0": c, "age:0": a}, "fetches": [out.name], "targets": []}
              for w, c, a in batches]
    write_case(out_dir, "feature_columns", gd, steps,
               "tf.compat.v1 feature columns through input_layer (a TF1 graph, tables and variables initialized "
               "by an init step): a hashed column (StringToHashBucketFast) embedded with sqrtn, a vocabulary list "
               "with OOV buckets (HashTableV2, LookupTableFindV2) embedded with mean and one-hot (indicator), a "
               "numeric column and its bucketization; empty strings are missing values, so rows lose entries "
               "or have none (SparseFillEmptyRows, SparseReshape, SparseSegmentSqrtN/Mean, SparseToDense)",
               outputs={out.name: "input_layer features: 4 + 3 + 6 + 1 + 4 columns"})


def case_numerics_and_quantization_ops(out_dir):
    @tf.function
    def f(x, logits, labels, ints):
        qat = tf.reshape(x, [-1, 4])
        return {
            "checked": tf.debugging.check_numerics(x * 2.0, "x doubled"),
            "in_top_1": tf.math.in_top_k(labels, logits, 1),
            "in_top_2": tf.math.in_top_k(labels, logits, 2),
            "mul_no_nan": tf.math.multiply_no_nan(tf.math.log(x), tf.nn.relu(x - 0.5)),
            "next_after": tf.math.nextafter(x, tf.zeros_like(x)),
            "bitcast_bytes": tf.bitcast(x, tf.uint8),
            "bitcast_back": tf.bitcast(tf.bitcast(x, tf.int32), tf.float32),
            "bitcast_wide": tf.bitcast(tf.reshape(ints, [-1, 2]), tf.int64),
            "diag": tf.linalg.tensor_diag(tf.reshape(x[:4], [2, 2])),
            "diag_part": tf.linalg.tensor_diag_part(tf.reshape(tf.range(16.0), [2, 2, 2, 2]) * x[0]),
            "cross": tf.linalg.cross(tf.reshape(x[:6], [2, 3]), tf.reshape(x[2:8], [2, 3])),
            "fake_quant_args": tf.quantization.fake_quant_with_min_max_args(x, -1.5, 2.25, num_bits=6),
            "fake_quant_narrow": tf.quantization.fake_quant_with_min_max_args(x, -3.0, 3.0, narrow_range=True),
            "fake_quant_vars": tf.quantization.fake_quant_with_min_max_vars(x, tf.reduce_min(x), tf.reduce_max(x)),
            "fake_quant_channels": tf.quantization.fake_quant_with_min_max_vars_per_channel(
                qat, [-1.0, -0.5, 0.0, -2.0], [1.0, 0.5, 2.0, 0.1], num_bits=4),
            "uniform_ints": tf.random.uniform([6], -4, 9, dtype=tf.int32, seed=7),
            "uniform_int64": tf.random.uniform([3], 0, 10**10, dtype=tf.int64, seed=8),
            "bit_and": tf.bitwise.bitwise_and(ints, ints[::-1]),
            "bit_or_bytes": tf.bitwise.bitwise_or(tf.cast(ints, tf.uint8), tf.constant(0x0F, tf.uint8)),
            "bit_xor_wide": tf.bitwise.bitwise_xor(tf.cast(ints, tf.int64), tf.constant(-1, tf.int64)),
            "bit_invert": tf.bitwise.invert(tf.cast(ints, tf.uint64)),
            "left_shift": tf.bitwise.left_shift(ints, tf.constant([0, 1, 5, 31, 40, -2], tf.int32)),
            "right_shift": tf.bitwise.right_shift(ints, tf.reshape(tf.constant([3, 33], tf.int32), [2, 1])),
            "popcount": tf.raw_ops.PopulationCount(x=ints),
        }

    rng = np.random.default_rng(31)

    def feeds():
        x = rng.uniform(-2.5, 3.0, 8).astype(np.float32)
        x[3] = 0.0
        logits = rng.standard_normal([5, 4]).astype(np.float32)
        logits[1, 2] = logits[1, 0]
        return [x, logits, rng.integers(0, 4, 5).astype(np.int32), rng.integers(-2**31, 2**31, 6).astype(np.int32)]

    specs = [tf.TensorSpec([8], tf.float32, name="x"), tf.TensorSpec([5, 4], tf.float32, name="logits"),
             tf.TensorSpec([5], tf.int32, name="labels"), tf.TensorSpec([6], tf.int32, name="ints")]
    function_case(out_dir, "numerics_and_quantization_ops", f, specs, [feeds(), feeds()],
                  "frozen tf.function: check_numerics passing its input through, in_top_k with k 1 and 2 (a tie "
                  "in the logits), multiply_no_nan (log of non-positives times 0), nextafter toward 0, bitcast to "
                  "bytes, back, and int32 pairs to int64, tensor_diag and tensor_diag_part, cross, fake "
                  "quantization (args with 6 bits, narrow range, vars from the batch's min and max, per channel "
                  "with 4 bits), seeded tf.random.uniform of int32 and int64 (RandomUniformInt; two steps, so the "
                  "second draws what TensorFlow's second run draws), bitwise and/or/xor/invert on int32, uint8, int64 "
                  "and uint64, shifts by amounts outside [0, 31] (broadcast), population count")


def case_ctc_loss_dense(out_dir):
    @tf.function
    def f(logits, labels, label_lengths, logit_lengths):
        return {
            "keras_ctc_loss": keras.ops.ctc_loss(labels, logits, label_lengths, logit_lengths, mask_index=0),
            "nn_ctc_loss_time_major": tf.nn.ctc_loss(labels, tf.transpose(logits, [1, 0, 2]), label_lengths,
                                                     logit_lengths, blank_index=-1),
            "ctc_loss_gradient": tf.gradients(
                tf.reduce_sum(tf.nn.ctc_loss(labels, logits, label_lengths, logit_lengths, logits_time_major=False,
                                             blank_index=0)), logits)[0],
        }

    rng = np.random.default_rng(41)

    def feeds():
        labels = rng.integers(1, 5, [3, 4]).astype(np.int32)
        return [rng.standard_normal([3, 7, 5]).astype(np.float32), labels, np.array([4, 2, 3], np.int32),
                np.array([7, 5, 6], np.int32)]

    specs = [tf.TensorSpec([3, 7, 5], tf.float32, name="logits"), tf.TensorSpec([3, 4], tf.int32, name="labels"),
             tf.TensorSpec([3], tf.int32, name="label_lengths"), tf.TensorSpec([3], tf.int32, name="logit_lengths")]
    function_case(out_dir, "ctc_loss_dense", f, specs, [feeds(), feeds()],
                  "frozen tf.function: CTC losses with dense labels as OCR and speech models train them: "
                  "keras.ops.ctc_loss (batch major, blank 0), tf.nn.ctc_loss time major with the last class "
                  "blank, and the gradient of the summed loss to the logits (tf.nn.ctc_loss's dense path: "
                  "scans over the time steps with Empty, log-sum-exp and gathers)", tolerance={"rtol": 1e-4, "atol": 1e-5})


def case_ctc_loss_sparse(out_dir):
    @tf.function
    def f(logits, indices, values, dense_shape, lengths):
        labels = tf.SparseTensor(indices, values, dense_shape)
        v1 = tf.compat.v1.nn.ctc_loss
        loss = v1(labels, logits, lengths)
        return {
            "ctc_loss_v1": loss,
            "ctc_loss_v1_gradient": tf.gradients(tf.reduce_sum(loss), logits)[0],
            "collapsed": v1(labels, logits, lengths, preprocess_collapse_repeated=True),
            "not_merged": v1(labels, logits, lengths, ctc_merge_repeated=False),
            "ignore_longer": v1(labels, logits, tf.minimum(lengths, 3), ignore_longer_outputs_than_inputs=True),
            "nn_ctc_loss_sparse": tf.nn.ctc_loss(labels, logits, None, lengths, blank_index=-1),
        }

    rng = np.random.default_rng(47)

    def feeds():
        # Entry 0: 4 labels with a repeat; 1: 2; 2: 5 (longer than 3 frames).
        rows = [[1, 1, 3, 2], [4, 0], [2, 2, 2, 0, 1]]
        indices = np.array([[b, p] for b, row in enumerate(rows) for p in range(len(row))], np.int64)
        values = np.array([v for row in rows for v in row], np.int32)
        return [rng.standard_normal([8, 3, 6]).astype(np.float32), indices, values, np.array([3, 5], np.int64),
                np.array([8, 6, 7], np.int32)]

    specs = [tf.TensorSpec([8, 3, 6], tf.float32, name="logits"), tf.TensorSpec([None, 2], tf.int64, name="indices"),
             tf.TensorSpec([None], tf.int32, name="values"), tf.TensorSpec([2], tf.int64, name="dense_shape"),
             tf.TensorSpec([3], tf.int32, name="lengths")]
    function_case(out_dir, "ctc_loss_sparse", f, specs, [feeds()],
                  "frozen tf.function: CTCLoss with sparse labels (tf.compat.v1.nn.ctc_loss, time major, blank the "
                  "last of 6 classes): the loss and its gradient to the logits, preprocess_collapse_repeated, "
                  "ctc_merge_repeated=False, ignore_longer_outputs_than_inputs with sequences cut to 3 frames (an "
                  "entry whose label is longer gets 0), and tf.nn.ctc_loss with a SparseTensor",
                  tolerance={"rtol": 1e-4, "atol": 1e-5})


def case_ragged_ops(out_dir):
    @tf.function
    def f(text, starts, limits):
        words = tf.strings.split(text)
        sparse = words.to_sparse()
        nested = tf.RaggedTensor.from_nested_row_splits(tf.range(12.0), [[0, 2, 2, 3], [0, 3, 3, 12]])
        nested_sparse = nested.to_sparse()
        return {
            "split_sparse_indices": sparse.indices, "split_sparse_values": sparse.values,
            "split_sparse_shape": sparse.dense_shape,
            "nested_sparse_indices": nested_sparse.indices, "nested_sparse_values": nested_sparse.values,
            "nested_sparse_shape": nested_sparse.dense_shape,
            "range_of_lengths": tf.ragged.range(tf.strings.length(text)).to_tensor(-1),
            "range_float": tf.ragged.range(starts, limits, 0.75).to_tensor(),
            "range_int64_splits": tf.ragged.range(tf.constant([3, 0], tf.int64), 9, tf.constant([2, 4], tf.int64),
                                                  row_splits_dtype=tf.int32).row_splits,
            "gather_rows": tf.gather(words, [2, 0, 0]).to_tensor(""),
            "gather_2d_indices": tf.gather(words, [[1, 0], [2, 2]]).to_tensor(""),
            "gather_nested": tf.gather(nested, [2, 0]).to_tensor(),
            "concat_rows": tf.concat([words, words[::-1]], axis=1).to_tensor(""),
            "tile": tf.tile(words, [1, 2]).to_tensor(""),
        }

    feeds = [[np.array([b"the quick brown fox", b"", b"jumps over"]), np.array([0.5, -1.0, 2.0], np.float32),
              np.array([3.0, 1.0, 2.5], np.float32)]]
    specs = [tf.TensorSpec([None], tf.string, name="text"), tf.TensorSpec([3], tf.float32, name="starts"),
             tf.TensorSpec([3], tf.float32, name="limits")]
    function_case(out_dir, "ragged_ops", f, specs, feeds,
                  "frozen tf.function on split strings and a ragged-rank-2 tensor: RaggedTensor.to_sparse "
                  "(RaggedTensorToSparse), tf.ragged.range (int, float, int32 splits; RaggedRange), tf.gather of "
                  "ragged rows (with repeats, 2-D indices, nested; RaggedGather), tf.concat and tf.tile of ragged "
                  "rows")


def case_fft_nd_ops(out_dir):
    @tf.function
    def f(x, y, v):
        z = tf.complex(x, y)
        w = tf.complex(v, v * 0.5)
        spectrum = tf.signal.rfft2d(x)

        def parts(c):  # .npy expectations are real: real and imaginary parts stacked
            return tf.stack([tf.math.real(c), tf.math.imag(c)])

        return {
            "fft2d": parts(tf.signal.fft2d(z)),
            "ifft2d": parts(tf.signal.ifft2d(z)),
            "rfft2d": parts(spectrum),
            "rfft2d_cropped_padded": parts(tf.signal.rfft2d(x, fft_length=[3, 8])),
            "irfft2d": tf.signal.irfft2d(spectrum),
            "irfft2d_odd": tf.signal.irfft2d(spectrum, fft_length=[4, 5]),
            "irfft2d_padded": tf.signal.irfft2d(z[..., :3], fft_length=[6, 8]),
            "fft3d": parts(tf.signal.fft3d(w)),
            "ifft3d": parts(tf.signal.ifft3d(w)),
            "rfft3d": parts(tf.signal.rfft3d(v)),
            "irfft3d": tf.signal.irfft3d(tf.signal.rfft3d(v), fft_length=[2, 3, 4]),
            "fnet_mixing": tf.math.real(tf.signal.fft2d(tf.cast(x, tf.complex64))),
            "keras_fft2_real": keras.ops.fft2((x, y))[0],
        }

    rng = np.random.default_rng(43)

    def feeds():
        return [rng.standard_normal([2, 4, 6]).astype(np.float32), rng.standard_normal([2, 4, 6]).astype(np.float32),
                rng.standard_normal([2, 3, 4, 4]).astype(np.float32)]

    specs = [tf.TensorSpec([2, 4, 6], tf.float32, name="x"), tf.TensorSpec([2, 4, 6], tf.float32, name="y"),
             tf.TensorSpec([2, 3, 4, 4], tf.float32, name="v")]
    function_case(out_dir, "fft_nd_ops", f, specs, [feeds()],
                  "frozen tf.function: 2-D and 3-D spectra: fft2d/ifft2d, rfft2d (and with fft_length cropping "
                  "one axis and padding the other), irfft2d (round trip, odd length, padded bins), fft3d/ifft3d, "
                  "rfft3d/irfft3d, FNet's real part of fft2d, keras.ops.fft2", tolerance={"rtol": 1e-4, "atol": 1e-5})


def case_incomplete_gamma_beta_ops(out_dir):
    @tf.function
    def f(a, x, p, a64, x64):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([a, x, p])
            lower = tf.math.igamma(a, x)
            upper = tf.math.igammac(a, x[:, :1])  # broadcast over a's columns
            zeta = tf.math.zeta(a + 1.5, x)
            digamma = tf.math.digamma(x)
            beta = tf.math.betainc(a, a[::-1], p)
        outs = {
            "igamma": lower,
            "igammac_broadcast": upper,
            "igamma_grad_a": tape.gradient(lower, a),
            "igamma_grad_x": tape.gradient(lower, x),
            "igammac_grad_a": tape.gradient(upper, a),
            "zeta": zeta,
            "zeta_grad_q": tape.gradient(zeta, x),
            "polygamma_via_digamma_grad": tape.gradient(digamma, x),
            "polygamma": tf.math.polygamma(tf.constant([[0.0], [1.0], [2.0], [3.0]]), x[:4]),
            "betainc": beta,
            "betainc_grad_x": tape.gradient(beta, p),
            "random_gamma_grad": tf.raw_ops.RandomGammaGrad(alpha=a, sample=x),
            "igamma64": tf.math.igamma(a64, x64),
            "igammac64": tf.math.igammac(a64, x64),
            "betainc64": tf.math.betainc(a64, 2.5, tf.sigmoid(x64 - 1.0)),
            "zeta64": tf.math.zeta(a64 + 1.0, x64),
            "poisson_cdf": tf.math.igammac(tf.floor(x * 3.0) + 1.0, a),  # tfp's Poisson.cdf
            "student_t_tail": tf.math.betainc(a * 2.0, 0.5 * tf.ones_like(a), p),
        }
        del tape
        return outs

    rng = np.random.default_rng(47)

    def feeds():
        a = rng.uniform(0.2, 12.0, [6, 5]).astype(np.float32)
        x = rng.uniform(0.05, 15.0, [6, 5]).astype(np.float32)
        p = rng.uniform(0.02, 0.98, [6, 5]).astype(np.float32)
        return [a, x, p, a.astype(np.float64) * 3.0, x.astype(np.float64) * 2.0]

    specs = [tf.TensorSpec([6, 5], tf.float32, name="a"), tf.TensorSpec([6, 5], tf.float32, name="x"),
             tf.TensorSpec([6, 5], tf.float32, name="p"), tf.TensorSpec([6, 5], tf.float64, name="a64"),
             tf.TensorSpec([6, 5], tf.float64, name="x64")]
    function_case(out_dir, "incomplete_gamma_beta_ops", f, specs, [feeds(), feeds()],
                  "frozen tf.function: igamma/igammac (broadcast) and their gradients (IgammaGradA), zeta and its "
                  "gradient in q, polygamma (and as digamma's gradient), betainc and its gradient in x, "
                  "RandomGammaGrad, float64 forms, a Poisson CDF and a Student-t tail as distributions write them",
                  tolerance={"rtol": 2e-4, "atol": 1e-5})


def case_gamma_poisson_sampling_ops(out_dir):
    @tf.function
    def f(alpha, rate, alpha64):
        with tf.GradientTape() as tape:
            tape.watch(alpha)
            draws = tf.random.gamma([3], alpha, beta=2.0, seed=11)
            loss = tf.reduce_sum(draws * draws)
        return {
            "gamma": draws,
            "gamma_grad_alpha": tape.gradient(loss, alpha),  # RandomGammaGrad
            "gamma64": tf.random.gamma([2, 2], alpha64, seed=12, dtype=tf.float64),
            "stateless_gamma": tf.random.stateless_gamma([4, 5], [7, 8], alpha[0]),
            "poisson": tf.random.poisson([3], rate, seed=13),
            "poisson_int": tf.random.poisson([2], rate * 20.0, seed=14, dtype=tf.int32),
            "stateless_poisson": tf.random.stateless_poisson([4, 5], [9, 10], rate[1] * 8.0, dtype=tf.int64),
            "dirichlet_like": draws / tf.reduce_sum(draws, axis=-1, keepdims=True),
        }

    rng = np.random.default_rng(53)

    def feeds():
        return [rng.uniform(0.3, 6.0, [2, 5]).astype(np.float32), rng.uniform(0.5, 40.0, [2, 5]).astype(np.float32),
                rng.uniform(0.3, 6.0, [3]).astype(np.float64)]

    specs = [tf.TensorSpec([2, 5], tf.float32, name="alpha"), tf.TensorSpec([2, 5], tf.float32, name="rate"),
             tf.TensorSpec([3], tf.float64, name="alpha64")]
    function_case(out_dir, "gamma_poisson_sampling_ops", f, specs, [feeds(), feeds()],
                  "frozen tf.function: tf.random.gamma (float32 with beta, float64) and its reparameterized gradient "
                  "(RandomGammaGrad), stateless_gamma, tf.random.poisson (float32 and int32, rates both sides of 10), "
                  "stateless_poisson; seeded, so each run's draws are TensorFlow's", tolerance={"rtol": 1e-5, "atol": 1e-6})


def case_linalg_decompositions(out_dir):
    @tf.function
    def f(m, sq, sq64, ids):
        def projectors(vectors):  # each column's outer product: signs cancel
            return tf.einsum("...ik,...jk->...kij", vectors, vectors)

        s, u, v = tf.linalg.svd(m)
        _, u_full, v_full = tf.linalg.svd(m, full_matrices=True)
        sym = sq + tf.linalg.matrix_transpose(sq)
        e, vecs = tf.linalg.eigh(sym)
        lu, p = tf.linalg.lu(sq)
        lu64, p64 = tf.linalg.lu(sq64, output_idx_type=tf.int64)
        diff, diff_idx = tf.compat.v1.setdiff1d(ids, tf.constant([2, 5]))
        return {
            "svd_s": s,
            "svd_u_projectors": projectors(u),
            "svd_v_projectors": projectors(v),
            "svd_rebuilt": tf.matmul(u * s[..., None, :], v, adjoint_b=True),
            "svd_full_u_gram": tf.matmul(u_full, u_full, adjoint_b=True),
            "svd_full_v_gram": tf.matmul(v_full, v_full, adjoint_b=True),
            "svd_wide_s": tf.linalg.svd(tf.linalg.matrix_transpose(m), compute_uv=False),
            "norm2": tf.norm(m, ord=2, axis=[-2, -1]),
            "nuclear": tf.reduce_sum(tf.linalg.svd(m, compute_uv=False), axis=-1),
            "pinv": tf.linalg.pinv(m),
            "matrix_rank": tf.linalg.matrix_rank(tf.concat([m, m[..., :1]], axis=-1)),
            "eigh_values": e,
            "eigh_projectors": projectors(vecs),
            "eigvalsh64": tf.linalg.eigvalsh(sq64 + tf.linalg.matrix_transpose(sq64)),
            "lu": lu,
            "lu_p": p,
            "lu64": lu64,
            "lu64_p": p64,
            "lu_solve": tf.linalg.lu_solve(lu, p, sq),
            "lu_inverse": tf.linalg.lu_matrix_inverse(lu, p),
            "setdiff": diff,
            "setdiff_idx": diff_idx,
        }

    rng = np.random.default_rng(59)

    def feeds():
        return [rng.standard_normal([2, 5, 3]).astype(np.float32), rng.standard_normal([2, 4, 4]).astype(np.float32),
                rng.standard_normal([3, 3]), rng.integers(0, 7, [9]).astype(np.int32)]

    specs = [tf.TensorSpec([2, 5, 3], tf.float32, name="m"), tf.TensorSpec([2, 4, 4], tf.float32, name="sq"),
             tf.TensorSpec([3, 3], tf.float64, name="sq64"), tf.TensorSpec([9], tf.int32, name="ids")]
    function_case(out_dir, "linalg_decompositions", f, specs, [feeds(), feeds()],
                  "frozen tf.function: Svd (values; vectors as sign-free projectors; reduced, full and wide forms; "
                  "the 2-norm, nuclear norm, pinv and matrix_rank built on it), SelfAdjointEigV2 (eigh, eigvalsh), "
                  "Lu (packed factors and permutation, int32 and int64) with lu_solve and lu_matrix_inverse, setdiff1d",
                  tolerance={"rtol": 1e-4, "atol": 1e-5})


def case_sqrtm_and_tridiagonal(out_dir):
    @tf.function
    def f(feat_a, feat_b, diags, rhs, spd64):
        def covariance(x):
            centered = x - tf.reduce_mean(x, axis=0, keepdims=True)
            return tf.matmul(centered, centered, transpose_a=True) / tf.cast(tf.shape(x)[0] - 1, x.dtype)

        ca, cb = covariance(feat_a), covariance(feat_b)
        root = tf.linalg.sqrtm(tf.matmul(ca, cb))
        mean_gap = tf.reduce_sum(tf.square(tf.reduce_mean(feat_a, 0) - tf.reduce_mean(feat_b, 0)))
        dense = tf.linalg.diag(diags[1]) + tf.linalg.diag(diags[0, :-1], k=1) + tf.linalg.diag(diags[2, 1:], k=-1)
        return {
            "sqrtm_product": root,
            "fid": mean_gap + tf.linalg.trace(ca + cb - 2.0 * root),
            "sqrtm64": tf.linalg.sqrtm(tf.matmul(spd64, spd64, transpose_b=True)),
            "tridiagonal_compact": tf.linalg.tridiagonal_solve(diags, rhs),
            "tridiagonal_no_pivoting": tf.linalg.tridiagonal_solve(diags + tf.constant([[0.0], [8.0], [0.0]]), rhs,
                                                                    partial_pivoting=False),
            "tridiagonal_matrix_format": tf.linalg.tridiagonal_solve(dense, rhs, diagonals_format="matrix"),
            "tridiagonal_sequence_format": tf.linalg.tridiagonal_solve((diags[0], diags[1], diags[2]), rhs,
                                                                       diagonals_format="sequence"),
            "tridiagonal_vector_rhs": tf.linalg.tridiagonal_solve(diags, rhs[:, 0], transpose_rhs=True),
            "banded_lower": tf.linalg.banded_triangular_solve(diags + tf.constant([[4.0], [0.0], [0.0]]), rhs),
            "banded_upper_adjoint": tf.linalg.banded_triangular_solve(diags[1:] + tf.constant([[0.0], [4.0]]), rhs,
                                                                      lower=False, adjoint=True),
        }

    rng = np.random.default_rng(61)

    def feeds():
        return [rng.standard_normal([40, 4]).astype(np.float32), (rng.standard_normal([40, 4]) * 1.5 + 0.3).astype(np.float32),
                rng.standard_normal([3, 6]).astype(np.float32), rng.standard_normal([6, 2]).astype(np.float32),
                rng.standard_normal([3, 3])]

    specs = [tf.TensorSpec([40, 4], tf.float32, name="feat_a"), tf.TensorSpec([40, 4], tf.float32, name="feat_b"),
             tf.TensorSpec([3, 6], tf.float32, name="diags"), tf.TensorSpec([6, 2], tf.float32, name="rhs"),
             tf.TensorSpec([3, 3], tf.float64, name="spd64")]
    function_case(out_dir, "sqrtm_and_tridiagonal", f, specs, [feeds(), feeds()],
                  "frozen tf.function: MatrixSquareRoot (of a product of covariances, as the FID score computes it, "
                  "and of a float64 SPD matrix), TridiagonalSolve in compact, matrix and sequence formats, with and "
                  "without pivoting, with a vector right-hand side; BandedTriangularSolve lower and upper-adjoint", tolerance={"rtol": 2e-4, "atol": 2e-5})


def case_special_functions_scipy(out_dir):
    @tf.function
    def f(x, x64):
        pos, pos64 = tf.abs(x) * 4.0 + 1e-3, tf.abs(x64) * 4.0 + 1e-3
        special = tf.math.special
        outs = {}
        for name in ["bessel_i0", "bessel_i1", "bessel_j0", "bessel_j1", "dawsn"]:
            outs[name] = getattr(special, name)(x * 6.0)
            outs[name + "_64"] = getattr(special, name)(x64 * 6.0)
        for name in ["bessel_y0", "bessel_y1", "bessel_k0", "bessel_k1", "bessel_k0e", "bessel_k1e", "expint", "spence"]:
            outs[name] = getattr(special, name)(pos)
            outs[name + "_64"] = getattr(special, name)(pos64)
        return outs

    rng = np.random.default_rng(67)

    def feeds():
        x = rng.standard_normal([3, 7])
        return [x.astype(np.float32), x]

    specs = [tf.TensorSpec([3, 7], tf.float32, name="x"), tf.TensorSpec([3, 7], tf.float64, name="x64")]
    function_case(out_dir, "special_functions_scipy", f, specs, [feeds(), feeds()],
                  "frozen tf.function: tf.math.special's Bessel functions (I0, I1, J0, J1, Y0, Y1, K0, K1, K0e, K1e), "
                  "expint, spence and dawsn in float32 and float64", tolerance={"rtol": 1e-5, "atol": 1e-6})


def case_keras_mixed_float16(out_dir):
    keras.mixed_precision.set_global_policy("mixed_float16")
    L = keras.layers
    inp = keras.Input((16, 16, 3), name="image")
    x = L.Conv2D(8, 3, padding="same", name="conv1")(inp)
    x = L.BatchNormalization(name="bn1")(x)
    x = L.ReLU(name="relu")(x)
    x = L.DepthwiseConv2D(3, padding="same", name="dw")(x)
    x = L.MaxPooling2D(2, name="maxpool")(x)
    x = L.Conv2D(16, 3, strides=2, activation="swish", name="conv2")(x)
    x = L.GlobalAveragePooling2D(name="gap")(x)
    x = L.Dense(16, activation="gelu", name="hidden")(x)
    x = L.LayerNormalization(name="ln")(x)
    logits = L.Dense(5, name="logits")(x)
    probs = L.Activation("softmax", dtype="float32", name="probs")(logits)
    model = keras.Model(inp, [probs, logits], name="mixed_cnn")
    rng = np.random.default_rng(71)
    feeds = [[rng.uniform(0.0, 1.0, [2, 16, 16, 3]).astype(np.float32)]]
    keras_case(out_dir, "keras_mixed_float16", model, 171, tf.TensorSpec([None, 16, 16, 3], tf.float32, name="image"),
               feeds, "frozen keras 3 CNN under the mixed_float16 policy (float32 weights cast to float16 in the "
               "graph, float16 compute): Conv2D, BatchNormalization, ReLU, DepthwiseConv2D, MaxPool, strided "
               "Conv2D swish, GlobalAveragePooling2D, Dense gelu, LayerNormalization, Dense; float32 softmax "
               "and the float16 logits fetched",
               ["softmax probabilities [2,5] (float32)", "logits [2,5] (float16)"],
               tolerance={"rtol": 5e-3, "atol": 1e-3})


def case_keras_mixed_bfloat16(out_dir):
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    L = keras.layers
    inp = keras.Input((6, 16), name="tokens")
    att = L.MultiHeadAttention(2, 8, name="mha")(inp, inp)
    x = L.LayerNormalization(name="ln1")(L.Add(name="res1")([inp, att]))
    h = L.Dense(32, activation="relu", name="ffn1")(x)
    h = L.Dense(16, name="ffn2")(h)
    x = L.LayerNormalization(name="ln2")(L.Add(name="res2")([x, h]))
    out = L.Activation("linear", dtype="float32", name="out")(x)
    model = keras.Model(inp, out, name="mixed_block")
    rng = np.random.default_rng(72)
    feeds = [[rng.standard_normal([2, 6, 16]).astype(np.float32)]]
    keras_case(out_dir, "keras_mixed_bfloat16", model, 172, tf.TensorSpec([None, 6, 16], tf.float32, name="tokens"),
               feeds, "frozen keras 3 transformer block under the mixed_bfloat16 policy: MultiHeadAttention "
               "(Einsum, Softmax in bfloat16), Add, LayerNormalization, Dense relu, Dense; cast to float32 at the end",
               ["block output [2,6,16] (float32)"], tolerance={"rtol": 2e-2, "atol": 2e-2})


def case_narrow_dtype_ops(out_dir):
    from tensorflow.python.ops import gen_math_ops

    @tf.function
    def f(x, i):
        h, b = tf.cast(x, tf.float16), tf.cast(x, tf.bfloat16)
        i8, i16 = tf.cast(i, tf.int8), tf.cast(i, tf.int16)
        u16, u32 = tf.cast(i, tf.uint16), tf.cast(i, tf.uint32)
        return {
            "half_math": tf.tanh(h) * tf.exp(h * 0.5) + tf.sqrt(tf.abs(h)),
            "half_matmul": tf.matmul(tf.reshape(h, [3, 4]), tf.reshape(h, [4, 3])),
            "half_softmax": tf.nn.softmax(tf.reshape(h, [3, 4])),
            "half_sigmoid_as_f32": tf.cast(tf.sigmoid(h), tf.float32),
            "half_bits": tf.bitcast(h, tf.int16),
            "half_gather_concat": tf.concat([tf.gather(h, [0, 2]), h[:3], tf.reverse(h, [0])[:2]], 0),
            "bf16_ops_as_f32": tf.cast(tf.nn.relu(b) * b + 1.5, tf.float32),
            "bf16_truncated_bits": tf.bitcast(gen_math_ops.cast(x, tf.bfloat16, Truncate=True), tf.uint16),
            "int8_wrap": i8 * tf.constant(3, tf.int8) + tf.constant(100, tf.int8),
            "int8_row_max": tf.reduce_max(tf.reshape(i8, [3, 4]), axis=1),
            "int16_floordiv": tf.math.floordiv(i16 * 300, tf.constant(7, tf.int16)),
            "uint16_wrap": u16 * tf.constant(5000, tf.uint16),
            "uint32_wrap_as_i64": tf.cast(u32 * tf.constant(3000000000, tf.uint32), tf.int64),
            "small_int_compare": tf.cast(i8 > tf.constant(0, tf.int8), tf.int32) + tf.cast(u16 < 5, tf.int32),
            "f32_to_int8": tf.cast(x * 200.0, tf.int8),
        }

    rng = np.random.default_rng(73)

    def feeds():
        return [rng.standard_normal([12]).astype(np.float32) * 2.0, rng.integers(-300, 300, [12]).astype(np.int32)]

    specs = [tf.TensorSpec([12], tf.float32, name="x"), tf.TensorSpec([12], tf.int32, name="i")]
    function_case(out_dir, "narrow_dtype_ops", f, specs, [feeds(), feeds()],
                  "frozen tf.function on float16, bfloat16, int8, int16, uint16 and uint32: elementwise math, "
                  "MatMul, Softmax, Bitcast, gathers and slices, Cast with Truncate, wrapping integer "
                  "arithmetic, reductions and comparisons; outputs of the narrow dtypes fetched as they are",
                  tolerance={"rtol": 1e-3, "atol": 1e-3})


def case_quantize_dequantize_ops(out_dir):
    from tensorflow.python.ops import gen_array_ops

    @tf.function
    def f(x, w):
        q = tf.quantization
        with tf.GradientTape() as tape:
            tape.watch(w)
            wq = q.quantize_and_dequantize_v2(w, -1.0, 1.0, range_given=True, num_bits=4)
            loss = tf.reduce_sum(wq * x[:, :3])
        return {
            "v2_own_range": q.quantize_and_dequantize(x, 0.0, 0.0, range_given=False),
            "v2_given_half_up": q.quantize_and_dequantize(x, -1.5, 2.0, range_given=True, num_bits=5,
                                                          round_mode="HALF_UP", narrow_range=True),
            "v2_unsigned": q.quantize_and_dequantize(tf.abs(x), 0.0, 0.0, signed_input=False, num_bits=6),
            "v4_per_channel": q.quantize_and_dequantize_v2(x, [0.0] * 5, [0.0] * 5, num_bits=4, axis=1),
            "v3_given_per_channel": gen_array_ops.quantize_and_dequantize_v3(
                x, [-1.0, -0.5, 0.0, -2.0, -3.0], [1.0, 0.5, 1.0, 2.0, 3.0], 5, range_given=True, axis=1),
            "v4_float64": q.quantize_and_dequantize_v2(tf.cast(x, tf.float64), 0.0, 0.0, num_bits=7),
            "v4_grad": tape.gradient(loss, w),
        }

    rng = np.random.default_rng(74)

    def feeds():
        return [(rng.standard_normal([4, 5]) * 1.5).astype(np.float32),
                (rng.standard_normal([4, 3]) * 0.8).astype(np.float32)]

    specs = [tf.TensorSpec([4, 5], tf.float32, name="x"), tf.TensorSpec([4, 3], tf.float32, name="w")]
    function_case(out_dir, "quantize_dequantize_ops", f, specs, [feeds(), feeds()],
                  "frozen tf.function: tf.quantization.quantize_and_dequantize (QuantizeAndDequantizeV2: own "
                  "range, given range with HALF_UP and narrow range, unsigned), quantize_and_dequantize_v2 "
                  "(QuantizeAndDequantizeV4, per channel, float64) and its gradient "
                  "(QuantizeAndDequantizeV4Grad), QuantizeAndDequantizeV3 with a range per channel")


def case_set_ops(out_dir):
    @tf.function
    def f(a, b, logits, labels, words):
        sparse_b = tf.sparse.from_dense(b)  # zeros dropped
        sparse_labels = tf.sparse.from_dense(labels)
        top = tf.math.top_k(logits, k=3).indices
        hits = tf.sets.size(tf.sets.intersection(top, tf.cast(sparse_labels, tf.int32)))
        out = {
            "precision_at_3": tf.reduce_sum(hits) / (3 * tf.shape(logits)[0]),
            "hits_per_row": hits,
            "label_count": tf.sets.size(sparse_labels),
            "difference_words": tf.sparse.to_dense(tf.sets.difference(words, words[:, ::-1][:, :2]), default_value=""),
        }
        for name, op in [("intersection", tf.sets.intersection), ("union", tf.sets.union)]:
            for form, (x, y) in [("dense_dense", (a, b)), ("dense_sparse", (a, sparse_b)),
                                 ("sparse_sparse", (tf.sparse.from_dense(a), sparse_b))]:
                r = op(x, y)
                out[f"{name}_{form}_indices"] = r.indices
                out[f"{name}_{form}_values"] = r.values
                out[f"{name}_{form}_shape"] = r.dense_shape
        r = tf.sets.difference(b, a, aminusb=False)
        out["b_minus_a_dense"] = tf.sparse.to_dense(r, default_value=-1)
        r = tf.sets.difference(tf.cast(a, tf.int8), tf.cast(b, tf.int8))
        out["a_minus_b_int8"] = tf.sparse.to_dense(r, default_value=-1)
        return out

    rng = np.random.default_rng(75)

    def feeds():
        words = np.array([[b"cat", b"dog", b"cat", b"emu"], [b"ant", b"bee", b"ant", b"ant"],
                          [b"fox", b"gnu", b"hen", b"fox"]])
        return [rng.integers(0, 6, [3, 2, 5]).astype(np.int64), rng.integers(0, 6, [3, 2, 4]).astype(np.int64),
                rng.standard_normal([4, 7]).astype(np.float32), rng.integers(0, 7, [4, 3]).astype(np.int64), words]

    specs = [tf.TensorSpec([3, 2, 5], tf.int64, name="a"), tf.TensorSpec([3, 2, 4], tf.int64, name="b"),
             tf.TensorSpec([4, 7], tf.float32, name="logits"), tf.TensorSpec([4, 3], tf.int64, name="labels"),
             tf.TensorSpec([3, 4], tf.string, name="words")]
    function_case(out_dir, "set_ops", f, specs, [feeds(), feeds()],
                  "frozen tf.function: tf.sets intersection/union/difference (DenseToDenseSetOperation, "
                  "DenseToSparseSetOperation, SparseToSparseSetOperation) on rank-3 int64 sets, strings and int8, "
                  "tf.sets.size (SetSize), and precision@3 as tf.compat.v1.metrics.precision_at_k computes it")


def case_feature_crosses(out_dir):
    @tf.function
    def f(words, ids, cities):
        sparse_words = tf.sparse.from_dense(words)  # empty strings dropped
        sparse_ids = tf.sparse.from_dense(ids)  # zeros dropped
        crossed = tf.sparse.cross([sparse_words, sparse_ids, cities])
        hashed = tf.sparse.cross_hashed([sparse_words, cities], num_buckets=97)
        keyed = tf.compat.v1.sparse.cross_hashed([sparse_ids, ids, cities], num_buckets=0, hash_key=424242)
        import keras
        layer = keras.layers.HashedCrossing(num_bins=50)((cities[:, 0], ids[:, 1]))
        return {
            "cross_indices": crossed.indices, "cross_values": crossed.values, "cross_shape": crossed.dense_shape,
            "hashed_indices": hashed.indices, "hashed_values": hashed.values, "hashed_shape": hashed.dense_shape,
            "keyed_values": keyed.values, "keyed_shape": keyed.dense_shape,
            "keras_hashed_crossing": layer,
        }

    def feeds(seed):
        rng = np.random.default_rng(seed)
        vocab = np.array([b"", b"red", b"blue", b"green"])
        return [vocab[rng.integers(0, 4, [4, 3])], rng.integers(0, 4, [4, 2]).astype(np.int64),
                np.array([[b"paris"], [b"oslo"], [b"lima"], [b"rome"]])]

    specs = [tf.TensorSpec([4, 3], tf.string, name="words"), tf.TensorSpec([4, 2], tf.int64, name="ids"),
             tf.TensorSpec([4, 1], tf.string, name="cities")]
    function_case(out_dir, "feature_crosses", f, specs, [feeds(76), feeds(77)],
                  "frozen tf.function: tf.sparse.cross (SparseCrossV2) of sparse strings, sparse int64 and a dense "
                  "string column, tf.sparse.cross_hashed and tf.compat.v1.sparse.cross_hashed with a hash key "
                  "(SparseCross, FingerprintCat64 of Fingerprint64s), keras HashedCrossing")


def case_sparse_reduce_and_add_grad(out_dir):
    @tf.function
    def f(x, y, w):
        sx, sy = tf.sparse.from_dense(x), tf.sparse.from_dense(y)
        out = {}
        for name, axis, keep in [("rows", 1, False), ("last_keep", -1, True), ("outer", [0, 2], False),
                                 ("all", None, False)]:
            r = tf.sparse.reduce_sum(sx, axis=axis, keepdims=keep, output_is_sparse=True)
            out[f"sum_{name}_indices"], out[f"sum_{name}_values"], out[f"sum_{name}_shape"] = (
                r.indices, r.values, r.dense_shape)
        r = tf.sparse.reduce_max(sx, axis=2, output_is_sparse=True)
        out["max_indices"], out["max_values"], out["max_shape"] = r.indices, r.values, r.dense_shape
        with tf.GradientTape() as tape:
            tape.watch(w)
            a = tf.SparseTensor(sx.indices, sx.values * w[0], sx.dense_shape)
            b = tf.SparseTensor(sy.indices, sy.values * w[1], sy.dense_shape)
            total = tf.sparse.add(a, b, threshold=0.5)
            loss = tf.reduce_sum(total.values * total.values)
        out["add_grad"] = tape.gradient(loss, w)
        return out

    def feeds(seed):
        rng = np.random.default_rng(seed)
        mask = lambda shape: rng.random(shape) < 0.4
        x = np.where(mask([3, 4, 5]), rng.standard_normal([3, 4, 5]), 0).astype(np.float32)
        y = np.where(mask([3, 4, 5]), rng.standard_normal([3, 4, 5]), 0).astype(np.float32)
        return [x, y, np.array([1.5, -0.7], np.float32)]

    specs = [tf.TensorSpec([3, 4, 5], tf.float32, name="x"), tf.TensorSpec([3, 4, 5], tf.float32, name="y"),
             tf.TensorSpec([2], tf.float32, name="w")]
    function_case(out_dir, "sparse_reduce_and_add_grad", f, specs, [feeds(78), feeds(79)],
                  "frozen tf.function: tf.sparse.reduce_sum/reduce_max with output_is_sparse "
                  "(SparseReduceSumSparse, SparseReduceMaxSparse) over several axes with and without keepdims, and "
                  "the gradient of tf.sparse.add with a threshold (SparseAddGrad)")


def case_keras_mixed_float16_gradients(out_dir):
    keras.mixed_precision.set_global_policy("mixed_float16")
    L = keras.layers
    inp = keras.Input((8, 8, 2), name="image")
    x = L.Conv2D(4, 3, padding="same", activation="relu", name="conv")(inp)
    x = L.MaxPooling2D(2, name="pool")(x)
    x = L.Flatten(name="flat")(x)
    x = L.Dense(6, activation="tanh", name="hidden")(x)
    logits = L.Dense(3, name="logits", dtype="float32")(x)
    model = keras.Model(inp, logits, name="mixed_grad")
    set_weights(model, 180)

    @tf.function
    def f(image, labels):
        with tf.GradientTape() as tape:
            tape.watch(image)
            out = model(image, training=False)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, out))
        grads = tape.gradient(loss, [image] + model.trainable_weights)
        names = ["image"] + [w.path.replace("/", "_") for w in model.trainable_weights]
        return {"loss": loss, **{f"grad_{n}": g for n, g in zip(names, grads)}}

    rng = np.random.default_rng(80)
    feeds = [[rng.uniform(0, 1, [2, 8, 8, 2]).astype(np.float32), np.array([0, 2], np.int32)]]
    specs = [tf.TensorSpec([2, 8, 8, 2], tf.float32, name="image"), tf.TensorSpec([2], tf.int32, name="labels")]
    function_case(out_dir, "keras_mixed_float16_gradients", f, specs, feeds,
                  "frozen tf.function: the gradients of a keras 3 mixed_float16 CNN's loss with respect to its input "
                  "and weights (Conv2DBackpropInput/Filter, ReluGrad, MaxPoolGrad, TanhGrad, BiasAddGrad, MatMul in "
                  "float16; the float32 head and loss)", tolerance={"rtol": 2e-2, "atol": 2e-3})


def case_sampling_ops(out_dir):
    @tf.function
    def f(logits, logits64, x, words):
        masked = tf.where(tf.range(6) == 4, -np.inf, logits)
        return {
            "categorical": tf.random.categorical(masked, 7, seed=3),
            "categorical_int32": tf.random.categorical(logits * 3.0, 4, dtype=tf.int32, seed=4),
            "stateless_categorical": tf.random.stateless_categorical(logits, 5, seed=[1, 2]),
            "stateless_categorical_f64": tf.random.stateless_categorical(logits64, 6, seed=[-3, 9], dtype=tf.int32),
            "shuffled_range": tf.random.shuffle(tf.range(10), seed=5),
            "shuffled_rows": tf.random.shuffle(x, seed=6),
            "shuffled_words": tf.random.shuffle(words, seed=9),
            "orthogonal": tf.compat.v1.orthogonal_initializer(seed=2)([5, 3]),
        }

    rng = np.random.default_rng(37)

    def feeds():
        return [rng.standard_normal([3, 6]).astype(np.float32), rng.standard_normal([2, 3]),
                rng.standard_normal([5, 2]).astype(np.float32), np.array([b"a", b"bb", b"", b"dddd"])]

    specs = [tf.TensorSpec([3, 6], tf.float32, name="logits"), tf.TensorSpec([2, 3], tf.float64, name="logits64"),
             tf.TensorSpec([5, 2], tf.float32, name="x"), tf.TensorSpec([4], tf.string, name="words")]
    function_case(out_dir, "sampling_ops", f, specs, [feeds(), feeds()],
                  "frozen tf.function: seeded tf.random.categorical (Multinomial; a -inf class never drawn; int64 "
                  "and int32), tf.random.stateless_categorical of float32 and float64 logits, seeded "
                  "tf.random.shuffle (RandomShuffle) of a range, of rows and of strings, and the TF1 orthogonal "
                  "initializer (RandomStandardNormal through Qr); two steps, so the second draws what "
                  "TensorFlow's second run draws")


def case_ctc_greedy_decoder(out_dir):
    @tf.function
    def f(logits, lengths):
        log_probs = tf.nn.log_softmax(logits)
        (merged,), merged_score = tf.nn.ctc_greedy_decoder(log_probs, lengths, merge_repeated=True)
        (raw,), raw_score = tf.nn.ctc_greedy_decoder(log_probs, lengths, merge_repeated=False, blank_index=0)
        return {
            "merged_indices": merged.indices, "merged_values": merged.values, "merged_shape": merged.dense_shape,
            "merged_dense": tf.sparse.to_dense(merged, default_value=-1), "merged_score": merged_score,
            "raw_indices": raw.indices, "raw_values": raw.values, "raw_shape": raw.dense_shape,
            "raw_score": raw_score,
        }

    rng = np.random.default_rng(16)
    # Peaked logits, so paths repeat classes and cross blanks as a trained
    # OCR model's do.
    classes = rng.integers(0, 6, [12, 3])
    logits = rng.standard_normal([12, 3, 6]).astype(np.float32)
    logits[np.arange(12)[:, None], np.arange(3)[None, :], classes] += 4.0
    specs = [tf.TensorSpec([12, 3, 6], tf.float32, name="logits"), tf.TensorSpec([3], tf.int32, name="lengths")]
    function_case(out_dir, "ctc_greedy_decoder", f, specs,
                  [[logits, np.array([12, 7, 0], np.int32)], [logits[:, ::-1].copy(), np.array([5, 12, 9], np.int32)]],
                  "frozen tf.function: tf.nn.ctc_greedy_decoder on log-softmax outputs [time 12, batch 3, classes 6] "
                  "(an OCR/speech model's head): repeats merged with the last class blank, and not merged with "
                  "class 0 blank; decoded sparse tensors, densified with -1, and path scores; one sequence empty")


def case_uint8_images(out_dir):
    @tf.function
    def f(image):
        outs = {}
        scaled = tf.image.convert_image_dtype(image, tf.float32)
        outs["as_float"] = scaled
        outs["rescaled"] = tf.cast(image, tf.float32) * (1.0 / 127.5) - 1.0
        outs["resized_bilinear"] = tf.image.resize(image, [5, 6])
        outs["resized_nearest"] = tf.image.resize(image, [11, 3], method="nearest")
        outs["resized_bicubic"] = tf.image.resize(image, [4, 4], method="bicubic")
        outs["flipped"] = tf.image.flip_left_right(image)
        outs["cropped"] = tf.image.central_crop(image, 0.5)
        outs["transposed"] = tf.transpose(image, [0, 3, 1, 2])
        outs["stacked"] = tf.concat([image, tf.reverse(image, [1])], axis=-1)
        outs["gathered"] = tf.gather(tf.reshape(image, [-1]), [0, 5, 9, 400])
        outs["bright"] = tf.cast(image, tf.int32) > 200
        outs["equal"] = tf.equal(image, tf.constant(7, tf.uint8))
        outs["back_to_uint8"] = tf.image.convert_image_dtype(scaled * 0.5 + 0.3, tf.uint8, saturate=True)
        # 384 elements, a multiple of TensorFlow's 32-wide vector cast, which saturates; its scalar tail
        # (the last len % 32 elements) wraps instead, and ringflow saturates throughout.
        outs["saturated"] = tf.cast(tf.cast(image[:, :, :8], tf.float32) * 3.0 - 100.0, tf.uint8)
        outs["unique"] = tf.unique(tf.reshape(image[0, :2, :2, 0], [-1]))[0]
        return outs

    specs = [tf.TensorSpec([2, 8, 9, 3], tf.uint8, name="image")]
    rng = np.random.default_rng(23)
    image = rng.integers(0, 256, [2, 8, 9, 3]).astype(np.uint8)
    image[0, 0, 0, 0] = 7
    function_case(out_dir, "uint8_images", f, specs, [[image]],
                  "frozen tf.function on a fed uint8 [2,8,9,3] image, as image models take one: "
                  "convert_image_dtype both ways (Cast, saturating clip), Keras-style rescaling, ResizeBilinear, "
                  "ResizeNearestNeighbor (uint8 out) and ResizeBicubic on uint8, flip, central crop, Transpose, "
                  "ConcatV2, ReverseV2, GatherV2, Greater on int32, Equal on uint8, a float-to-uint8 Cast that "
                  "saturates (negative and past 255), Unique on uint8")


def case_stateless_random_ops(out_dir):
    @tf.function
    def f(x, seed, image):
        outs = {}
        outs["uniform"] = tf.random.stateless_uniform([3, 7], seed)
        outs["uniform_f64_range"] = tf.random.stateless_uniform([5], seed, minval=-2.0, maxval=3.0, dtype=tf.float64)
        outs["uniform_int"] = tf.random.stateless_uniform([9], seed, minval=-4, maxval=11, dtype=tf.int32)
        outs["uniform_int64"] = tf.random.stateless_uniform([3], seed, minval=0, maxval=2**40, dtype=tf.int64)
        outs["normal"] = tf.random.stateless_normal([2, 5], seed, mean=1.0, stddev=2.0)
        outs["truncated_normal"] = tf.random.stateless_truncated_normal([4, 3], seed)
        outs["v1_uniform"] = tf.raw_ops.StatelessRandomUniform(shape=[6], seed=seed, dtype=tf.float32)
        outs["v1_normal"] = tf.raw_ops.StatelessRandomNormal(shape=[2, 2], seed=seed, dtype=tf.float64)
        outs["v1_truncated_normal"] = tf.raw_ops.StatelessTruncatedNormal(shape=[5], seed=seed, dtype=tf.float32)
        # What Keras 3's Dropout(training=True) runs on TensorFlow, its seed drawn from a variable.
        outs["stateless_dropout"] = tf.nn.experimental.stateless_dropout(x, 0.4, seed)
        outs["stateless_flip"] = tf.image.stateless_random_flip_left_right(image, seed)
        outs["stateless_crop"] = tf.image.stateless_random_crop(image, [2, 4, 5, 3], seed)
        outs["stateless_brightness"] = tf.image.stateless_random_brightness(image, 0.3, seed)
        return outs

    specs = [tf.TensorSpec([4, 6], tf.float32, name="x"), tf.TensorSpec([2], tf.int32, name="seed"),
             tf.TensorSpec([2, 6, 7, 3], tf.float32, name="image")]
    rng = np.random.default_rng(24)
    feeds = [[rng.standard_normal([4, 6]).astype(np.float32), np.array(s, np.int32),
              rng.uniform(0.0, 1.0, [2, 6, 7, 3]).astype(np.float32)] for s in ([1, 2], [-7, 123456])]
    function_case(out_dir, "stateless_random_ops", f, specs, feeds,
                  "frozen tf.function of stateless random draws from a fed seed (two steps, seeds [1, 2] and "
                  "[-7, 123456]): StatelessRandomGetKeyCounter with StatelessRandomUniformV2 (float32, float64 in "
                  "a range), StatelessRandomUniformIntV2 (int32, int64), StatelessRandomNormalV2, "
                  "StatelessTruncatedNormalV2, the v1 StatelessRandomUniform/Normal/TruncatedNormal, "
                  "tf.nn.experimental.stateless_dropout (Keras 3's Dropout in training on TensorFlow), and tf.image.stateless_random_flip_left_right, _crop and _brightness")


def case_audio_spectrogram_ops(out_dir):
    @tf.function
    def f(signal):
        outs = {}
        stft = tf.signal.stft(signal, frame_length=64, frame_step=32, fft_length=64)
        magnitude = tf.abs(stft)
        outs["stft_magnitude"] = magnitude
        outs["stft_real"] = tf.math.real(stft)
        outs["stft_imag"] = tf.math.imag(stft)
        outs["stft_phase"] = tf.math.angle(stft)
        mel = tf.signal.linear_to_mel_weight_matrix(16, 33, 16000, 80.0, 7600.0)
        log_mel = tf.math.log(tf.tensordot(tf.square(magnitude), mel, 1) + 1e-6)
        outs["log_mel"] = log_mel
        outs["mfcc"] = tf.signal.mfccs_from_log_mel_spectrograms(log_mel)[..., :8]
        outs["rfft_padded"] = tf.abs(tf.signal.rfft(signal[:, :50], fft_length=[64]))
        outs["irfft_round_trip"] = tf.signal.irfft(tf.signal.rfft(signal[:, :40]))
        spectrum = tf.signal.fft(tf.complex(signal[:, :16], signal[:, 16:32]))
        outs["fft_real"] = tf.math.real(spectrum)
        outs["ifft_imag"] = tf.math.imag(tf.signal.ifft(tf.math.conj(spectrum)))
        return outs

    specs = [tf.TensorSpec([2, 512], tf.float32, name="signal")]
    rng = np.random.default_rng(25)
    t = np.arange(512) / 16000.0
    tones = np.stack([np.sin(2 * np.pi * 440 * t), 0.5 * np.sin(2 * np.pi * 3000 * t)])
    signal = (tones + 0.1 * rng.standard_normal([2, 512])).astype(np.float32)
    function_case(out_dir, "audio_spectrogram_ops", f, specs, [[signal]],
                  "frozen tf.function of an audio front-end on two 512-sample signals (tones and noise): "
                  "tf.signal.stft (frame 64, step 32; RFFT on frames), its magnitude (ComplexAbs), real and "
                  "imaginary parts and phase (Angle), a 16-bin log-mel spectrogram and its first 8 MFCCs, RFFT "
                  "zero-padded to 64, IRFFT of an RFFT, FFT of a Complex signal and IFFT of its Conj. atol 1e-5: "
                  "TensorFlow sums the transforms in float32, ringflow in float64, so bins near zero differ by "
                  "about 1e-6",
                  tolerance={"rtol": 1e-5, "atol": 1e-5})


def case_detection_ops(out_dir):
    @tf.function
    def f(image, boxes, scores):
        crop_boxes = tf.clip_by_value(boxes[:5], -0.2, 1.2)
        outs = {}
        outs["crop_bilinear"] = tf.image.crop_and_resize(image, crop_boxes, [0, 1, 1, 0, 1], [5, 4])
        outs["crop_nearest"] = tf.image.crop_and_resize(image, crop_boxes, [1, 0, 1, 0, 0], [3, 6], method="nearest",
                                                        extrapolation_value=-2.0)
        outs["nms_v2"] = tf.raw_ops.NonMaxSuppressionV2(boxes=boxes, scores=scores, max_output_size=6,
                                                        iou_threshold=0.4)
        outs["nms_v3"] = tf.image.non_max_suppression(boxes, scores, 8, iou_threshold=0.3, score_threshold=0.2)
        idx, valid = tf.image.non_max_suppression_padded(boxes, scores, 10, iou_threshold=0.5,
                                                          pad_to_max_output_size=True)
        outs["nms_v4_indices"], outs["nms_v4_valid"] = idx, valid
        sel, sel_scores = tf.image.non_max_suppression_with_scores(boxes, scores, 7, iou_threshold=1.0,
                                                                   score_threshold=0.1, soft_nms_sigma=0.5)
        outs["nms_v5_indices"], outs["nms_v5_scores"] = sel, sel_scores
        return outs

    specs = [tf.TensorSpec([2, 7, 9, 3], tf.float32, name="image"), tf.TensorSpec([12, 4], tf.float32, name="boxes"),
             tf.TensorSpec([12], tf.float32, name="scores")]
    rng = np.random.default_rng(14)
    corners = rng.uniform(0.0, 1.0, [12, 2])
    sizes = rng.uniform(0.1, 0.6, [12, 2])
    boxes = np.ascontiguousarray(np.concatenate([corners, corners + sizes], axis=1), dtype=np.float32)
    boxes[7] = boxes[6] + 0.02          # a near-duplicate
    boxes[9] = boxes[9][[2, 3, 0, 1]]   # corners given in the other order
    scores = rng.uniform(0.0, 1.0, [12]).astype(np.float32)
    scores[4] = scores[5]               # equal scores: the lower index first
    feeds = [[rng.standard_normal([2, 7, 9, 3]).astype(np.float32), boxes, scores]]
    function_case(out_dir, "detection_ops", f, specs, feeds,
                  "frozen tf.function of detection post-processing on 12 fed boxes ([y1,x1,y2,x2], one near-duplicate, "
                  "one with its corners swapped, two equal scores) and a [2,7,9,3] image: CropAndResize bilinear [5,4] "
                  "and nearest [3,6] with extrapolation -2 (boxes clipped to [-0.2,1.2], so some run off the image), "
                  "NonMaxSuppressionV2 (iou 0.4), V3 (iou 0.3, score threshold 0.2), non_max_suppression_padded to 10 "
                  "(a v1 while loop TensorFlow builds in Python, not NonMaxSuppressionV4), V5 soft-NMS (sigma 0.5, "
                  "score threshold 0.1)")


def case_color_and_lrn_ops(out_dir):
    @tf.function
    def f(image, features):
        hsv = tf.image.rgb_to_hsv(image)
        return [
            hsv,
            tf.image.hsv_to_rgb(tf.clip_by_value(hsv * [1.0, 0.5, 1.0] + [0.1, 0.0, 0.0], 0.0, 1.0)),
            tf.image.adjust_contrast(image, 1.7),
            tf.image.adjust_hue(image, 0.3),
            tf.image.adjust_hue(image, -0.85),
            tf.image.adjust_saturation(image, 0.4),
            tf.image.adjust_saturation(image, 3.0),
            tf.nn.local_response_normalization(features),
            tf.nn.local_response_normalization(features, depth_radius=2, bias=2.0, alpha=1e-2, beta=0.75),
        ]

    specs = [tf.TensorSpec([2, 5, 4, 3], tf.float32, name="image"),
             tf.TensorSpec([2, 3, 3, 16], tf.float32, name="features")]
    rng = np.random.default_rng(15)
    image = rng.uniform(0.0, 1.0, [2, 5, 4, 3]).astype(np.float32)
    image[0, 0, 0] = [0.5, 0.5, 0.5]   # grey: no hue, no saturation
    image[0, 0, 1] = [0.9, 0.9, 0.1]   # red and green tie for the maximum
    feeds = [[image, rng.standard_normal([2, 3, 3, 16]).astype(np.float32)]]
    names = ["RGBToHSV", "HSVToRGB of a shifted, desaturated HSV", "AdjustContrastv2 1.7", "AdjustHue 0.3",
             "AdjustHue -0.85", "AdjustSaturation 0.4", "AdjustSaturation 3 (clamped at 1)",
             "LRN defaults (radius 5, bias 1, alpha 1, beta 0.5)", "LRN radius 2, bias 2, alpha 0.01, beta 0.75"]
    function_case(out_dir, "color_and_lrn_ops", f, specs, feeds,
                  "frozen tf.function on an RGB batch in [0,1] (a grey pixel, a red-green tie) and 16-channel "
                  "features: " + "; ".join(names), names=names)


def case_nd_ops(out_dir):
    @tf.function
    def f(x, img, small):
        outs = {}
        outs["broadcast_to"] = tf.broadcast_to(x[:, :1], [2, 4, 5])
        outs["linspace"] = tf.linspace(x[0, :2], x[1, :2], 4)       # BroadcastArgs + BroadcastTo
        square = tf.reshape(x, [4, 5])[:, :4]
        outs["band_lower"] = tf.linalg.band_part(square, -1, 0)
        outs["band_tridiagonal"] = tf.linalg.band_part(square, 1, 1)
        outs["band_upper2"] = tf.linalg.band_part(square, 0, 2)
        outs["gather_nd_elements"] = tf.gather_nd(x, [[0, 1], [3, 4], [2, 0]])
        outs["gather_nd_rows"] = tf.gather_nd(img, [[[1, 2]], [[0, 0]]])
        outs["scatter_nd"] = tf.scatter_nd([[1], [3], [1]], x[:3], [5, 5])
        outs["tensor_scatter_update"] = tf.tensor_scatter_nd_update(x, [[2], [0]], x[1:3] * 10.0)
        outs["tensor_scatter_add"] = tf.tensor_scatter_nd_add(x, [[1, 1], [1, 1]], [1.5, 2.5])
        outs["tensor_scatter_sub"] = tf.tensor_scatter_nd_sub(x, [[3]], x[:1])
        outs["tensor_scatter_max"] = tf.tensor_scatter_nd_max(x, [[0, 0], [2, 3]], [0.0, 0.5])
        outs["tensor_scatter_min"] = tf.tensor_scatter_nd_min(x, [[0, 0], [2, 3]], [0.0, 0.5])
        outs["depth_to_space"] = tf.nn.depth_to_space(small, 2)
        outs["space_to_depth"] = tf.nn.space_to_depth(img, 2)
        outs["bilinear_half_pixel"] = tf.image.resize(img, [7, 5], method="bilinear")
        outs["bilinear_legacy"] = tf.compat.v1.image.resize_bilinear(img, [7, 9])
        outs["bilinear_corners"] = tf.compat.v1.image.resize_bilinear(img, [3, 9], align_corners=True)
        outs["nearest_half_pixel"] = tf.image.resize(img, [9, 3], method="nearest")
        outs["nearest_legacy"] = tf.compat.v1.image.resize_nearest_neighbor(img, [7, 9])
        outs["nearest_corners"] = tf.compat.v1.image.resize_nearest_neighbor(img, [5, 7], align_corners=True)
        return outs

    specs = [tf.TensorSpec([4, 5], tf.float32, name="x"), tf.TensorSpec([2, 4, 6, 3], tf.float32, name="img"),
             tf.TensorSpec([2, 3, 2, 8], tf.float32, name="small")]
    rng = np.random.default_rng(10)
    feeds = [[rng.standard_normal(s.shape.as_list()).astype(np.float32) for s in specs]]
    function_case(out_dir, "nd_ops", f, specs, feeds,
                  "frozen tf.function of ops that index by the innermost dimension, broadcast, band, move depth "
                  "and resize: BroadcastTo, tf.linspace (BroadcastArgs), MatrixBandPart (-1,0; 1,1; 0,2), GatherNd "
                  "(elements; rows of an image), ScatterNd (a duplicate index summed), TensorScatterUpdate/Add "
                  "(duplicate)/Sub/Max/Min, DepthToSpace and SpaceToDepth (block 2), ResizeBilinear "
                  "(tf.image.resize half-pixel; v1 legacy; v1 align_corners) and ResizeNearestNeighbor (the same "
                  "three conventions)")

def case_array_ops(out_dir):
    @tf.function
    def f(x, limit):
        outs = {}
        outs["slice_masks"] = x[..., 1:3, tf.newaxis, 2]        # ellipsis, new axis, shrink
        outs["slice_reverse"] = x[::-1]                           # negative stride, begin/end masks
        outs["slice_last"] = x[-1]                                # shrink, negative index
        outs["slice_step"] = x[1:, :-1:2]                         # end mask, begin mask, stride 2
        idx = tf.argmax(x, axis=-1, output_type=tf.int32)         # [4,6] in [0,5)
        outs["argmax_last"] = idx
        outs["argmax_first"] = tf.argmax(x, axis=0)               # int64 [6,5]
        outs["gather_axis0"] = tf.gather(x, [3, 0, 0, 2])
        outs["gather_batch"] = tf.gather(x, idx, axis=2, batch_dims=2)  # [4,6]
        outs["one_hot"] = tf.one_hot(idx, 5, on_value=2.0, off_value=-1.0, axis=1)  # [4,5,6]
        outs["cumsum_excl_rev"] = tf.math.cumsum(x, axis=1, exclusive=True, reverse=True)
        outs["cumsum"] = tf.math.cumsum(x, axis=-1)
        vals, inds = tf.math.top_k(x, k=3)
        outs["topk_values"] = vals
        outs["topk_indices"] = inds
        outs["range_int"] = tf.range(2, limit, 3)
        outs["range_float"] = tf.range(0.5, tf.cast(limit, tf.float32), 0.75)
        s0, s1, s2 = tf.split(x, 3, axis=1)
        outs["split_0"], outs["split_2"] = s0, s2
        outs["split_1"] = s1
        v0, v1, v2 = tf.split(x, [1, -1, 2], axis=-1)
        outs["splitv_0"], outs["splitv_1"], outs["splitv_2"] = v0, v1, v2
        u = tf.unstack(x, axis=1)
        outs["unstack_0"], outs["unstack_5"] = u[0], u[5]
        outs["where"] = tf.where(x > 0.8)
        outs["pad"] = tf.pad(x, [[0, 0], [1, 2], [0, 1]])
        outs["padv2"] = tf.pad(x, [[1, 0], [0, 0], [2, 2]], constant_values=-3.5)
        outs["mirror_reflect"] = tf.pad(x, [[0, 0], [2, 1], [1, 3]], mode="REFLECT")
        outs["mirror_symmetric"] = tf.pad(x, [[1, 1], [0, 2], [3, 0]], mode="SYMMETRIC")
        return outs

    frozen, gd = freeze(f, tf.TensorSpec([4, 6, 5], tf.float32, name="x"), tf.TensorSpec([], tf.int32, name="limit"))
    ins, outs = frozen_io(frozen)
    keys = sorted(f.get_concrete_function(tf.TensorSpec([4, 6, 5], tf.float32, name="x"),
                                          tf.TensorSpec([], tf.int32, name="limit")).structured_outputs)
    rng = np.random.default_rng(4)
    feeds = [[rng.standard_normal([4, 6, 5]).astype(np.float32), np.array(17, np.int32)],
             [rng.standard_normal([4, 6, 5]).astype(np.float32), np.array(3, np.int32)]]
    write_case(out_dir, "array_ops", gd, steps,
               "frozen tf.function of array ops on x [4,6,5] and a fed int limit: StridedSlice with every mask "
               "(x[..., 1:3, newaxis, 2], x[::-1], x[-1], x[1:, :-1:2]), GatherV2 (axis 0; axis 2 batch_dims 2), "
               "OneHot (on/off values, axis 1), Cumsum (exclusive+reverse; plain on axis -1), TopKV2, ArgMax "
               "(axis 0 int64, axis -1 int32), Range (int and float, fed limit), Split, SplitV (with -1), "
               "Unpack, Where (1-arg), Pad, PadV2, MirrorPad REFLECT and SYMMETRIC; two steps",
               outputs=dict(zip(outs, keys)), eager=eager)


def case_einsum_ops(out_dir):
    @tf.function
    def f(a, b, c, d, sq, q, k):
        return [
            tf.einsum("bij,bjk->bik", a, b),           # [2,3,5]
            tf.einsum("ij,jk", a[0], b[0]),            # implicit output -> ik
            tf.einsum("...ij,...jk->...ik", c, d),     # [2,1,3,4] x [5,4,2] -> [2,5,3,2]
            tf.einsum("ii->i", sq),                    # diagonal
            tf.einsum("ii", sq),                       # trace
            tf.einsum("ij->ji", a[1]),                 # transpose
            tf.einsum("i,j->ij", sq[0], sq[:, 1]),     # outer
            tf.einsum("bhqd,bhkd->bhqk", q, k),        # attention scores
            tf.einsum("abc->ac", a),                   # sum out b
        ]

    specs = [tf.TensorSpec([2, 3, 4], tf.float32, name="a"), tf.TensorSpec([2, 4, 5], tf.float32, name="b"),
             tf.TensorSpec([2, 1, 3, 4], tf.float32, name="c"), tf.TensorSpec([5, 4, 2], tf.float32, name="d"),
             tf.TensorSpec([4, 4], tf.float32, name="sq"), tf.TensorSpec([2, 2, 3, 4], tf.float32, name="q"),
             tf.TensorSpec([2, 2, 5, 4], tf.float32, name="k")]
    frozen, gd = freeze(f, *specs)
    ins, outs = frozen_io(frozen)
    rng = np.random.default_rng(5)
    feeds = [[rng.standard_normal(s.shape.as_list()).astype(np.float32) for s in specs]]
    steps, eager = fn_steps(frozen, ins, outs, feeds)
    eqs = ["bij,bjk->bik", "ij,jk (implicit)", "...ij,...jk->...ik broadcast [2,1,3,4]x[5,4,2]", "ii->i",
           "ii (trace)", "ij->ji", "i,j->ij", "bhqd,bhkd->bhqk", "abc->ac"]
    write_case(out_dir, "einsum_ops", gd, steps,
               "frozen tf.function of tf.einsum calls (Einsum op with the equation as written by tf.einsum): "
               + "; ".join(eqs), outputs=dict(zip(outs, eqs)), eager=eager)


def case_nn_ops(out_dir):
    rng = np.random.default_rng(6)
    k1 = tf.constant(rng.normal(0, 0.3, [3, 3, 3, 4]).astype(np.float32))
    k2 = tf.constant(rng.normal(0, 0.3, [3, 3, 4, 4]).astype(np.float32))
    kt = tf.constant(rng.normal(0, 0.3, [3, 3, 2, 4]).astype(np.float32))
    kd = tf.constant(rng.normal(0, 0.3, [3, 3, 4, 2]).astype(np.float32))
    scale = tf.constant(rng.uniform(0.7, 1.3, [4]).astype(np.float32))
    offset = tf.constant(rng.normal(0, 0.1, [4]).astype(np.float32))
    mean = tf.constant(rng.normal(0, 0.1, [4]).astype(np.float32))
    var = tf.constant(rng.uniform(0.5, 1.5, [4]).astype(np.float32))

    @tf.function
    def f(x):
        y = tf.nn.conv2d(x, k1, strides=1, padding=[[0, 0], [1, 2], [2, 1], [0, 0]])    # explicit paddings
        y, _, _ = tf.compat.v1.nn.fused_batch_norm(y, scale, offset, mean, var, epsilon=1e-3,
                                                   is_training=False)              # FusedBatchNormV3
        y = tf.nn.leaky_relu(y, alpha=0.1)
        z = tf.nn.conv2d(y, k2, strides=1, padding="SAME", dilations=2)           # dilations attr
        z = tf.nn.elu(z)
        t = tf.nn.conv2d_transpose(z, kt, output_shape=[2, 20, 20, 2], strides=2, padding="SAME")
        t = tf.nn.selu(t)
        dw = tf.nn.depthwise_conv2d(z, kd, strides=[1, 1, 1, 1], padding="VALID", dilations=[2, 2])
        dw = tf.nn.sigmoid(dw)
        p = tf.nn.max_pool2d(z, ksize=3, strides=2, padding="SAME")
        sp = tf.nn.softplus(tf.reduce_mean(p, axis=[1, 2]))
        ls = tf.nn.log_softmax(tf.reshape(dw, [2, -1]))
        return y, z, t, dw, p, sp, ls

    frozen, gd = freeze(f, tf.TensorSpec([2, 9, 9, 3], tf.float32, name="x"))
    ins, outs = frozen_io(frozen)
    feeds = [[rng.standard_normal([2, 9, 9, 3]).astype(np.float32)]]
    steps, eager = fn_steps(frozen, ins, outs, feeds)
    names = ["Conv2D explicit paddings [[0,0],[1,2],[2,1],[0,0]] + FusedBatchNormV3 (inference) + LeakyRelu",
             "Conv2D SAME dilations 2 + Elu", "Conv2DBackpropInput (conv2d_transpose stride 2 SAME) + Selu",
             "DepthwiseConv2dNative VALID dilations 2 + Sigmoid", "MaxPool 3x3 stride 2 SAME",
             "Softplus of Mean", "LogSoftmax"]
    write_case(out_dir, "nn_ops", gd, steps,
               "frozen tf.function of tf.nn ops that keras 3 does not emit: " + "; ".join(names),
               outputs=dict(zip(outs, names)), eager=eager)


# ----------------------------------------------------------------------------
# control flow
# ----------------------------------------------------------------------------

def build_loops(n, x):
    """A simple loop, a nested loop (inner bounded by maximum_iterations) and a
    matrix power loop carrying a [3,3] tensor and reading x from outside."""
    i, s = tf.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s + 1.0),
                         (tf.constant(0), tf.constant(0.0)), name="simple")

    def outer_body(i, acc):
        _, a = tf.while_loop(lambda j, a: j < i, lambda j, a: (j + 1, a + tf.cast(j + 1, tf.float32)),
                             (tf.constant(0), acc), maximum_iterations=3, name="inner")
        return i + 1, a * 0.5

    _, nested = tf.while_loop(lambda i, acc: i < n, outer_body, (tf.constant(0), tf.constant(1.0)), name="outer")
    _, power = tf.while_loop(lambda k, m: k < n, lambda k, m: (k + 1, tf.linalg.matmul(m, x)),
                             (tf.constant(0), tf.eye(3)), name="power")
    return i, s, nested, power


LOOP_OUTPUTS = ["simple loop counter i", "simple loop sum s (n * 1.0)",
                "nested loop: outer n times, inner min(i,3) times", "x^n by a loop of matmuls"]


def loop_feeds():
    rng = np.random.default_rng(7)
    x = (rng.standard_normal([3, 3]) * 0.6).astype(np.float32)
    return [[np.array(5, np.int32), x], [np.array(0, np.int32), x]]


def case_while_v2(out_dir):
    @tf.function
    def loops(n, x):
        return build_loops(n, x)

    cf = loops.get_concrete_function(tf.TensorSpec([], tf.int32, name="n"), tf.TensorSpec([3, 3], tf.float32, name="x"))
    gd = cf.graph.as_graph_def()
    ins, outs = [t.name for t in cf.inputs], [t.name for t in cf.outputs]
    steps, eager = fn_steps(cf, ins, outs, loop_feeds())
    write_case(out_dir, "while_v2", gd, steps,
               "control flow v2 in a tf.function, exported with its function library (not frozen, not inlined): "
               "StatelessWhile nodes whose cond/body are FunctionDefs in graph_def.library; a simple loop, a "
               "nested loop (the inner While inside the outer body function, with maximum_iterations) and a "
               "matrix-power loop carrying a [3,3] tensor; steps n=5 and n=0 (zero iterations)",
               outputs=dict(zip(outs, LOOP_OUTPUTS)), eager=eager)


def case_cond_v2(out_dir):
    @tf.function
    def f(pred, branch, x):
        y = tf.cond(pred, lambda: tf.square(x) + 1.0, lambda: tf.reduce_sum(x) * x)
        z = tf.switch_case(branch, [lambda: x * 2.0, lambda: x - 1.0, lambda: tf.sin(x),
                                    lambda: tf.reverse(x, [0])])
        return y, z

    cf = f.get_concrete_function(tf.TensorSpec([], tf.bool, name="pred"), tf.TensorSpec([], tf.int32, name="branch"),
                                 tf.TensorSpec([3], tf.float32, name="x"))
    gd = cf.graph.as_graph_def()
    ins, outs = [t.name for t in cf.inputs], [t.name for t in cf.outputs]
    x = np.array([0.5, -1.25, 2.0], np.float32)
    feeds = [[np.array(True), np.array(0, np.int32), x],
             [np.array(False), np.array(1, np.int32), x],
             [np.array(True), np.array(2, np.int32), x],
             [np.array(False), np.array(7, np.int32), x]]
    steps, eager = fn_steps(cf, ins, outs, feeds)
    write_case(out_dir, "cond_v2", gd, steps,
               "control flow v2 in a tf.function with its function library: tf.cond on a fed bool "
               "(StatelessIf, then/else branch functions) and tf.switch_case on a fed int32 (StatelessCase, "
               "4 branch functions; an out-of-range index runs the last branch). steps: (true,0), (false,1), "
               "(true,2), (false,7 -> default branch 3)",
               outputs=dict(zip(outs, ["cond: x^2+1 if pred else sum(x)*x",
                                       "switch_case: [2x, x-1, sin x, reverse x][branch]"])), eager=eager)


def case_function_call(out_dir):
    @tf.function
    def inner(x, w):
        return tf.nn.tanh(tf.linalg.matmul(x, w))

    @tf.function
    def middle(x, w):
        return inner(x, w) * 0.5 + 1.0

    w = tf.constant(np.linspace(-1.0, 1.0, 16, dtype=np.float32).reshape(4, 4))

    @tf.function
    def outer(x):
        return inner(x, w) + inner(x * 2.0, w) - middle(x, w)

    cf = outer.get_concrete_function(tf.TensorSpec([2, 4], tf.float32, name="x"))
    gd = cf.graph.as_graph_def()
    ins, outs = [t.name for t in cf.inputs], [t.name for t in cf.outputs]
    rng = np.random.default_rng(8)
    steps, eager = fn_steps(cf, ins, outs, [[rng.standard_normal([2, 4]).astype(np.float32)]])
    write_case(out_dir, "function_call", gd, steps,
               "a tf.function graph with its library, not inlined: outer calls inner twice and middle once, "
               "middle calls inner (PartitionedCall nodes in the graph and inside a library function)",
               outputs={outs[0]: "inner(x) + inner(2x) - middle(x)"}, eager=eager)


def case_function_call_stateful(out_dir):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [3, 2], name="x")
        v = tf1.Variable(np.array([1.0, -2.0], np.float32), name="acc", use_resource=True)

        @tf.function
        def scale(t):
            return t * 3.0 - 1.0

        @tf.function
        def accumulate(t):
            v.assign_add(tf.reduce_sum(scale(t), axis=0))
            return v.read_value() * 2.0

        tf.identity(accumulate(x), name="out")
        tf.identity(scale(x), name="plain")
        tf1.group(v.initializer, name="init")
    gd = g.as_graph_def()
    rng = np.random.default_rng(9)
    steps = [{"feeds": {}, "fetches": [], "targets": ["init"]}]
    for _ in range(3):
        steps.append({"feeds": {"x:0": rng.standard_normal([3, 2]).astype(np.float32)},
                      "fetches": ["out:0", "plain:0"], "targets": []})
    write_case(out_dir, "function_call_stateful", gd, steps,
               "tf.functions called from a tf.compat.v1 graph: accumulate() updates a resource variable "
               "(StatefulPartitionedCall taking the variable's handle as an input; AssignAddVariableOp and "
               "ReadVariableOp inside the library function) and calls scale() (PartitionedCall inside it); "
               "scale() is also called from the graph. init step, then three steps; the variable accumulates",
               outputs={"out:0": "2 * (acc after acc += sum(3x-1, axis 0))", "plain:0": "3x-1"})


def case_while_v1(out_dir):
    tf1.disable_control_flow_v2()
    g = tf.Graph()
    with g.as_default():
        n = tf1.placeholder(tf.int32, [], name="n")
        x = tf1.placeholder(tf.float32, [3, 3], name="x")
        names = ["count", "total", "nested_sum", "x_pow_n"]
        outs = [tf.identity(t, name=nm) for t, nm in zip(build_loops(n, x), names)]
    gd = g.as_graph_def()
    fetches = [t.name for t in outs]
    steps = [{"feeds": {"n:0": f[0], "x:0": f[1]}, "fetches": fetches, "targets": []} for f in loop_feeds()]
    write_case(out_dir, "while_v1", gd, steps,
               "control flow v1 (disable_control_flow_v2, tf.compat.v1 graph): the while_v2 loops as frames: "
               "Enter/Merge/Switch/LoopCond/NextIteration/Exit, a nested frame (inner loop with "
               "maximum_iterations) and a loop reading x through a constant Enter; steps n=5 and n=0 (zero "
               "iterations)", outputs=dict(zip(fetches, LOOP_OUTPUTS)))


def case_cond_v1(out_dir):
    tf1.disable_control_flow_v2()
    g = tf.Graph()
    with g.as_default():
        pred = tf1.placeholder(tf.bool, [], name="pred")
        k = tf1.placeholder(tf.int32, [], name="k")
        x = tf1.placeholder(tf.float32, [3], name="x")
        y = tf1.cond(pred, lambda: tf.square(x) + 1.0, lambda: tf.reduce_sum(x) * x, name="cond")
        nested = tf1.cond(pred,
                          lambda: tf1.cond(x[0] > 0.0, lambda: x * 10.0, lambda: -x, name="inner"),
                          lambda: tf.reverse(x, [0]), name="outer")
        picked = tf1.case([(tf.equal(k, 0), lambda: x * 2.0), (tf.equal(k, 1), lambda: x - 1.0)],
                          default=lambda: tf.sin(x), exclusive=False, name="case")
        fetch_t = [tf.identity(y, name="y"), tf.identity(nested, name="nested"), tf.identity(picked, name="picked")]
    gd = g.as_graph_def()
    fetches = [t.name for t in fetch_t]
    xa = np.array([0.5, -1.25, 2.0], np.float32)
    xb = np.array([-0.75, 3.0, 1.5], np.float32)
    feeds = [(True, 0, xa), (False, 1, xa), (True, 2, xb), (False, 5, xb)]
    steps = [{"feeds": {"pred:0": np.array(p), "k:0": np.array(kk, np.int32), "x:0": xx},
              "fetches": fetches, "targets": []} for p, kk, xx in feeds]
    write_case(out_dir, "cond_v1", gd, steps,
               "control flow v1 (disable_control_flow_v2, tf.compat.v1 graph): tf.compat.v1.cond (Switch/Merge "
               "on a fed bool), a cond nested in a branch (inner pred from x), and tf.compat.v1.case with two "
               "predicates and a default (a chain of conds). steps (pred,k,x): (T,0,xa) (F,1,xa) (T,2,xb) "
               "(F,5,xb): both branches of each cond, every case arm",
               outputs=dict(zip(fetches, ["x^2+1 if pred else sum(x)*x",
                                          "pred ? (x0>0 ? 10x : -x) : reverse(x)",
                                          "k==0: 2x, k==1: x-1, else sin x"])))


def build_two_task_loop(n, x):
    with tf.device(TASK1):
        w = tf.constant(np.linspace(-0.5, 0.5, 16, dtype=np.float32).reshape(4, 4), name="w")

    def body(i, s):
        with tf.device(TASK0):
            i2 = i + 1
        with tf.device(TASK1):
            s2 = tf.nn.tanh(tf.linalg.matmul(s, w) + x)
        return i2, s2

    with tf.device(TASK0):
        i, s = tf.while_loop(lambda i, s: i < n, body, (tf.constant(0), tf.zeros([2, 4])), name="loop")
        return tf.identity(i, name="i"), tf.identity(s, name="s")


def two_task_steps():
    rng = np.random.default_rng(10)
    x = rng.standard_normal([2, 4]).astype(np.float32)
    return [{"feeds": {"n:0": np.array(n, np.int32), "x:0": x}, "fetches": ["i:0", "s:0"], "targets": []}
            for n in (5, 0)]


def two_task_case(out_dir, name, v2, note):
    if not v2:
        tf1.disable_control_flow_v2()
    servers = two_task_servers()
    g = tf.Graph()
    with g.as_default():
        with tf.device(TASK0):
            n = tf1.placeholder(tf.int32, [], name="n")
            x = tf1.placeholder(tf.float32, [2, 4], name="x")
        build_two_task_loop(n, x)
    gd = g.as_graph_def()
    write_case(out_dir, name, gd, two_task_steps(), note, target=servers[0].target,
               outputs={"i:0": "loop counter (task 0)", "s:0": "s <- tanh(s @ w + x), n times (task 1)"})


def case_while_two_tasks(out_dir):
    two_task_case(out_dir, "while_two_tasks", False,
                  "control flow v1 loop across two tasks, run by TF's distributed runtime (2 in-process servers, "
                  "session on task 0): the counter and the loop's frame nodes on /job:worker/task:0, the body's "
                  "matmul/tanh (and w) on /job:worker/task:1, so the partitioner must build the loop's control "
                  "frame on both tasks; steps n=5 and n=0")


def case_while_v2_two_tasks(out_dir):
    two_task_case(out_dir, "while_v2_two_tasks", True,
                  "control flow v2 loop across two tasks: a While op on /job:worker/task:0 whose body function "
                  "pins the counter to task 0 and matmul/tanh to /job:worker/task:1 (devices inside the library "
                  "function); TF's session lowers it to Switch/Merge frames (_lower_using_switch_merge) before "
                  "partitioning. Run by 2 in-process servers, session on task 0; steps n=5 and n=0")


def build_nested_two_task_loops(n, m, x):
    """An outer loop on task 0 around an inner loop whose body spans both
    tasks, with a cond inside the inner body whose branches run on task 1."""
    with tf.device(TASK1):
        w = tf.constant(np.linspace(-0.4, 0.6, 16, dtype=np.float32).reshape(4, 4), name="w")

    def outer_body(i, acc):
        def inner_body(j, s):
            with tf.device(TASK0):
                j2 = j + 1
                odd = tf.equal(tf.math.floormod(j, 2), 1)
            with tf.device(TASK1):
                t = tf.linalg.matmul(s, w) + x
                s2 = tf1.cond(odd, lambda: tf.nn.tanh(t), lambda: t * 0.5, name="parity")
            return j2, s2

        with tf.device(TASK0):
            _, s = tf.while_loop(lambda j, s: j < m, inner_body, (tf.constant(0), acc), name="inner")
            return i + 1, s + tf.cast(i, tf.float32)

    with tf.device(TASK0):
        i, acc = tf.while_loop(lambda i, acc: i < n, outer_body, (tf.constant(0), tf.zeros([2, 4])),
                               name="outer")
        return tf.identity(i, name="i"), tf.identity(acc, name="acc")


def nested_two_task_case(out_dir, name, v2, note):
    if not v2:
        tf1.disable_control_flow_v2()
    servers = two_task_servers()
    g = tf.Graph()
    with g.as_default():
        with tf.device(TASK0):
            n = tf1.placeholder(tf.int32, [], name="n")
            m = tf1.placeholder(tf.int32, [], name="m")
            x = tf1.placeholder(tf.float32, [2, 4], name="x")
        build_nested_two_task_loops(n, m, x)
    gd = g.as_graph_def()
    rng = np.random.default_rng(11)
    x = rng.standard_normal([2, 4]).astype(np.float32)
    steps = [{"feeds": {"n:0": np.array(a, np.int32), "m:0": np.array(b, np.int32), "x:0": x},
              "fetches": ["i:0", "acc:0"], "targets": []} for a, b in ((3, 4), (2, 0), (0, 3), (1, 1))]
    write_case(out_dir, name, gd, steps, note, target=servers[0].target,
               outputs={"i:0": "outer counter (task 0)",
                        "acc:0": "per outer iteration: m inner steps of s <- (j odd ? tanh : 0.5*)(s @ w + x) "
                                 "on task 1, then + i"})


def case_while_nested_two_tasks(out_dir):
    nested_two_task_case(out_dir, "while_nested_two_tasks", False,
                         "control flow v1: an outer loop on /job:worker/task:0 around an inner loop whose "
                         "counter and predicate live on task 0 and whose body (matmul and a tf.compat.v1.cond "
                         "on the counter's parity) runs on /job:worker/task:1, so both loop frames span the "
                         "tasks and the cond's dead branch crosses inside the inner frame. Run by TF's "
                         "distributed runtime (2 in-process servers, session on task 0); steps (n,m): (3,4) "
                         "(2,0) (0,3) (1,1): zero-iteration inner and outer loops included")


def case_while_v2_nested_two_tasks(out_dir):
    nested_two_task_case(out_dir, "while_v2_nested_two_tasks", True,
                         "control flow v2: the nested loops of while_nested_two_tasks as While ops (and an If "
                         "in the inner body) whose body functions pin nodes to both tasks; TF lowers them to "
                         "frames before partitioning. Steps (n,m): (3,4) (2,0) (0,3) (1,1)")


def cond_two_task_case(out_dir, name, v2, note):
    if not v2:
        tf1.disable_control_flow_v2()
    servers = two_task_servers()
    g = tf.Graph()
    with g.as_default():
        with tf.device(TASK0):
            pred = tf1.placeholder(tf.bool, [], name="pred")
            x = tf1.placeholder(tf.float32, [3], name="x")

        def true_fn():
            with tf.device(TASK1):
                return tf.square(x) + 1.0

        def false_fn():
            with tf.device(TASK1):
                return tf.reduce_sum(x) * x

        with tf.device(TASK0):
            y = tf1.cond(pred, true_fn, false_fn, name="cond")
            z = tf.identity(y * 2.0, name="z")
    gd = g.as_graph_def()
    xa = np.array([0.5, -1.25, 2.0], np.float32)
    steps = [{"feeds": {"pred:0": np.array(p), "x:0": xa}, "fetches": ["z:0"], "targets": []}
             for p in (True, False, True)]
    write_case(out_dir, name, gd, steps, note, target=servers[0].target,
               outputs={"z:0": "2 * (pred ? x^2+1 : sum(x)*x), branches on task 1"})


def case_cond_two_tasks(out_dir):
    cond_two_task_case(out_dir, "cond_two_tasks", False,
                       "control flow v1 cond across two tasks: the predicate, Switch and Merge on "
                       "/job:worker/task:0, both branches on /job:worker/task:1, so the untaken branch's dead "
                       "value crosses the tasks. Run by TF's distributed runtime; steps pred = T, F, T")


def case_cond_v2_two_tasks(out_dir):
    cond_two_task_case(out_dir, "cond_v2_two_tasks", True,
                       "control flow v2 cond across two tasks: an If op on /job:worker/task:0 whose branch "
                       "functions pin their nodes to /job:worker/task:1; TF lowers it to Switch/Merge before "
                       "partitioning. Steps pred = T, F, T")


# ----------------------------------------------------------------------------

CASES = {name[len("case_"):]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}
ORDER = ["keras_cnn", "keras_embedding", "keras_attention", "keras_causal_attention", "keras_unet", "keras_conv3d", "keras_conv3d_transpose", "conv3d_gradients",
         "array_ops",
         "nd_ops", "sequence_and_segment_ops", "linalg_ops", "detection_ops",
         "color_and_lrn_ops", "math_ops", "special_and_counting_ops", "image_resampling_ops",
         "image_projective_ops", "image_decode_ops", "print_and_format_ops", "string_array_ops", "unicode_string_ops", "parse_example_ops",
         "sparse_ops", "feature_columns", "numerics_and_quantization_ops", "ctc_greedy_decoder", "sampling_ops", "ctc_loss_dense", "ctc_loss_sparse", "fft_nd_ops", "ragged_ops", "incomplete_gamma_beta_ops", "gamma_poisson_sampling_ops", "linalg_decompositions", "sqrtm_and_tridiagonal", "special_functions_scipy", "keras_mixed_float16", "keras_mixed_bfloat16", "narrow_dtype_ops", "quantize_dequantize_ops", "set_ops", "feature_crosses", "sparse_reduce_and_add_grad", "keras_mixed_float16_gradients",
         "uint8_images", "stateless_random_ops", "audio_spectrogram_ops", "einsum_ops", "nn_ops",
         "while_v2", "cond_v2", "function_call", "function_call_stateful", "while_v1", "cond_v1",
         "while_two_tasks", "while_v2_two_tasks", "while_nested_two_tasks", "while_v2_nested_two_tasks",
         "cond_two_tasks", "cond_v2_two_tasks"]
assert sorted(ORDER) == sorted(CASES), (ORDER, sorted(CASES))


def main(argv):
    if len(argv) >= 3 and argv[0] == "--one":
        _import_tf()
        CASES[argv[2]](argv[1])
        return 0
    out_dir = argv[0] if argv else os.path.join("tests", "fixtures", "tf-graphs")
    names = argv[1:] or ORDER
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print("unknown cases:", unknown, "known:", ORDER, file=sys.stderr)
        return 2
    os.makedirs(out_dir, exist_ok=True)
    failed = []
    for name in names:
        # One process per case: fresh function uids, fresh global control-flow mode.
        rc = subprocess.call([sys.executable, os.path.abspath(__file__), "--one", out_dir, name])
        if rc != 0:
            failed.append(name)
    if failed:
        print("FAILED:", failed, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
