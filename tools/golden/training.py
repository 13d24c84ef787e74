"""Exports the training golden cases: TF1 graphs as `tf.compat.v1`
optimizers build them (tf.gradients plus the optimizer's apply ops), run by
TensorFlow for a few steps, each step's loss and the final variables saved
as the expected values.

Usage: python training.py FIXTURES_DIR [CASE...]   (needs tensorflow-cpu; tests
do not; with CASEs, only those are exported)

Cases:
- train_mlp_momentum_ref: ref variables (VariableV2), a two-layer MLP with
  ReLU, softmax cross-entropy on dense labels plus an L2 penalty, Nesterov
  momentum (ApplyMomentum; ReluGrad, BiasAddGrad, L2Loss in the gradient).
- train_embedding_adam_resource: resource variables, an embedding lookup
  (ResourceGather) averaged per example, tanh, sparse softmax cross-entropy,
  Adam: ResourceApplyAdam for the dense weights and, for the table, the
  sparse path (Unique, UnsortedSegmentSum, ResourceScatterAdd into m and v).
- train_sparse_embedding_adagrad_resource: resource variables, sparse ids
  (indices/values/dense_shape placeholders, shuffled, rows left empty,
  negative ids pruned) through safe_embedding_lookup_sparse with a
  weighted mean (gathers and SegmentSum), with sqrtn and with a plain
  mean (SparseFillEmptyRows, SparseReshape, SparseSegmentSqrtN/Mean),
  Adagrad: the gradient has
  SparseSegmentMeanGrad and SparseSegmentSqrtNGrad, the update
  ResourceSparseApplyAdagrad.
- train_cnn_momentum_resource: resource variables, a small CNN on 8x8
  images (Conv2D, FusedBatchNormV3 in training mode with moving averages
  through exponential_avg_factor, ReLU, MaxPool, a second Conv2D + BiasAdd,
  AvgPool, Mean over the spatial axes, Dense), softmax cross-entropy,
  momentum; the gradient has Conv2DBackpropInput/Filter,
  FusedBatchNormGradV3, MaxPoolGrad and AvgPoolGrad.
- train_optimizer_zoo_ref, train_optimizer_zoo_resource: one softmax model
  whose eight embedding tables and dense weights are trained, a pair each,
  by Adadelta, RMSProp, centered RMSProp, ProximalGradientDescent,
  ProximalAdagrad, AdagradDA, Ftrl and Ftrl with l2 shrinkage: each
  optimizer's dense and row (sparse) kernel, ref and resource forms; the
  resource case adds Keras 2's Adamax and Adam(amsgrad=True) (needs
  tf_keras).
- train_dense_sgd_ref, train_dense_adagrad_ref, train_dense_rmsprop_resource:
  a one-layer softmax regression under plain GradientDescent, Adagrad and
  RMSProp (ApplyGradientDescent, ApplyAdagrad, ResourceApplyRMSProp).
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_eager_execution()


def mlp_momentum_ref():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [8, 4], name="x")
        y = tf1.placeholder(tf.float32, [8, 3], name="labels")
        w1 = tf1.Variable(np.linspace(-0.5, 0.5, 24, dtype=np.float32).reshape(4, 6), name="w1", use_resource=False)
        b1 = tf1.Variable(np.zeros(6, np.float32), name="b1", use_resource=False)
        w2 = tf1.Variable(np.linspace(0.4, -0.4, 18, dtype=np.float32).reshape(6, 3), name="w2", use_resource=False)
        b2 = tf1.Variable(np.full(3, 0.1, np.float32), name="b2", use_resource=False)
        h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1), b1))
        logits = tf.nn.bias_add(tf.matmul(h, w2), b2)
        xent = tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits)
        loss = tf.identity(tf.reduce_mean(xent) + 0.01 * tf.nn.l2_loss(w1), name="loss")
        tf1.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True).minimize(loss, name="train")
        tf1.group(tf1.global_variables_initializer(), name="init")
    rng = np.random.default_rng(7)

    def feeds():
        labels = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 8)]
        return {"x:0": rng.standard_normal([8, 4]).astype(np.float32), "labels:0": labels}

    return g, feeds, ["w1:0", "b1:0", "w2:0", "b2:0"]


def embedding_adam_resource():
    g = tf.Graph()
    with g.as_default():
        ids = tf1.placeholder(tf.int64, [5, 2], name="ids")
        labels = tf1.placeholder(tf.int64, [5], name="labels")
        table = tf1.Variable(np.linspace(-1, 1, 40, dtype=np.float32).reshape(10, 4), name="table", use_resource=True)
        w = tf1.Variable(np.linspace(0.3, -0.3, 12, dtype=np.float32).reshape(4, 3), name="w", use_resource=True)
        b = tf1.Variable(np.zeros(3, np.float32), name="b", use_resource=True)
        e = tf.reduce_mean(tf.nn.embedding_lookup(table, ids), axis=1)
        logits = tf.matmul(tf.tanh(e), w) + b
        xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        tf.identity(tf.reduce_mean(xent), name="loss")
        tf1.train.AdamOptimizer(0.05).minimize(g.get_tensor_by_name("loss:0"), name="train")
        tf1.group(tf1.global_variables_initializer(), name="init")
        for v in (table, w, b):
            tf.identity(v.read_value(), name=v.op.name + "_value")
    rng = np.random.default_rng(11)

    def feeds():
        # Repeated ids within a batch exercise the deduplication.
        return {
            "ids:0": rng.integers(0, 6, [5, 2]).astype(np.int64),
            "labels:0": rng.integers(0, 3, 5).astype(np.int64),
        }

    return g, feeds, ["table_value:0", "w_value:0", "b_value:0"]


def sparse_embedding_adagrad_resource():
    g = tf.Graph()
    with g.as_default():
        indices = tf1.placeholder(tf.int64, [None, 2], name="indices")
        ids = tf1.placeholder(tf.int64, [None], name="ids")
        weights = tf1.placeholder(tf.float32, [None], name="weights")
        dense_shape = tf1.placeholder(tf.int64, [2], name="dense_shape")
        labels = tf1.placeholder(tf.int64, [None], name="labels")
        table = tf1.Variable(np.linspace(-1, 1, 48, dtype=np.float32).reshape(12, 4), name="table", use_resource=True)
        w = tf1.Variable(np.linspace(0.4, -0.4, 36, dtype=np.float32).reshape(12, 3), name="w", use_resource=True)
        b = tf1.Variable(np.zeros(3, np.float32), name="b", use_resource=True)
        sp_ids = tf.SparseTensor(indices, ids, dense_shape)
        sp_weights = tf.SparseTensor(indices, weights, dense_shape)
        mean = tf.nn.safe_embedding_lookup_sparse(table, sp_ids, sp_weights, combiner="mean")
        sqrtn = tf.nn.safe_embedding_lookup_sparse(table, sp_ids, None, combiner="sqrtn")
        plain_mean = tf.nn.safe_embedding_lookup_sparse(table, sp_ids, None, combiner="mean")
        logits = tf.matmul(tf.tanh(tf.concat([mean, sqrtn, plain_mean], 1)), w) + b
        xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        tf.identity(tf.reduce_mean(xent), name="loss")
        tf1.train.AdagradOptimizer(0.3).minimize(g.get_tensor_by_name("loss:0"), name="train")
        tf1.group(tf1.global_variables_initializer(), name="init")
        for v in (table, w, b):
            tf.identity(v.read_value(), name=v.op.name + "_value")
    rng = np.random.default_rng(12)

    def feeds():
        # Six examples with 0 to 3 features each (some rows empty, some ids
        # repeated or pruned as negative), entries shuffled.
        coords = [(r, c) for r in range(6) for c in sorted(rng.choice(4, rng.integers(0, 4), replace=False))]
        order = rng.permutation(len(coords))
        return {
            "indices:0": np.array([coords[i] for i in order], np.int64).reshape(-1, 2),
            "ids:0": rng.integers(-1, 12, len(coords)).astype(np.int64),
            "weights:0": rng.choice([0.5, 1.0, 2.0], len(coords)).astype(np.float32),
            "dense_shape:0": np.array([6, 4], np.int64),
            "labels:0": rng.integers(0, 3, 6).astype(np.int64),
        }

    return g, feeds, ["table_value:0", "w_value:0", "b_value:0"]


def cnn_momentum_resource():
    g = tf.Graph()
    rng_init = np.random.default_rng(3)

    def var(name, shape, scale=0.3, trainable=True):
        value = (rng_init.standard_normal(shape) * scale).astype(np.float32)
        return tf1.Variable(value, name=name, use_resource=True, trainable=trainable)

    with g.as_default():
        x = tf1.placeholder(tf.float32, [4, 8, 8, 3], name="x")
        y = tf1.placeholder(tf.float32, [4, 5], name="labels")
        w1 = var("conv1/w", [3, 3, 3, 4])
        gamma = tf1.Variable(np.linspace(0.8, 1.2, 4, dtype=np.float32), name="bn/gamma", use_resource=True)
        beta = tf1.Variable(np.linspace(-0.1, 0.1, 4, dtype=np.float32), name="bn/beta", use_resource=True)
        moving_mean = tf1.Variable(np.zeros(4, np.float32), name="bn/moving_mean", use_resource=True, trainable=False)
        moving_var = tf1.Variable(np.ones(4, np.float32), name="bn/moving_var", use_resource=True, trainable=False)
        w2 = var("conv2/w", [3, 3, 4, 6])
        b2 = tf1.Variable(np.full(6, 0.05, np.float32), name="conv2/b", use_resource=True)
        w3 = var("dense/w", [6, 5])
        b3 = tf1.Variable(np.zeros(5, np.float32), name="dense/b", use_resource=True)
        h = tf.nn.conv2d(x, w1, strides=1, padding="SAME")
        h, batch_mean, batch_var = tf1.nn.fused_batch_norm(
            h, gamma, beta, mean=moving_mean, variance=moving_var, epsilon=1e-3, is_training=True,
            exponential_avg_factor=0.1)
        h = tf.nn.relu(h)
        h = tf.nn.max_pool2d(h, ksize=3, strides=2, padding="SAME")  # [4, 4, 4, 4]
        h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(h, w2, strides=1, padding="SAME"), b2))
        h = tf.nn.avg_pool2d(h, ksize=2, strides=2, padding="VALID")  # [4, 2, 2, 6]
        h = tf.reduce_mean(h, axis=[1, 2])
        logits = tf.nn.bias_add(tf.matmul(h, w3), b3)
        xent = tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits)
        loss = tf.identity(tf.reduce_mean(xent), name="loss")
        step = tf1.train.MomentumOptimizer(0.1, 0.9).minimize(loss)
        averages = [moving_mean.assign(batch_mean), moving_var.assign(batch_var)]
        tf1.group(step, *averages, name="train")
        tf1.group(tf1.global_variables_initializer(), name="init")
        values = []
        for v in (w1, gamma, beta, moving_mean, moving_var, w2, b2, w3, b3):
            values.append(tf.identity(v.read_value(), name=v.op.name.replace("/", "_") + "_value").name)
    rng = np.random.default_rng(5)

    def feeds():
        labels = np.eye(5, dtype=np.float32)[rng.integers(0, 5, 4)]
        return {"x:0": rng.standard_normal([4, 8, 8, 3]).astype(np.float32), "labels:0": labels}

    return g, feeds, values


def dense_optimizer(optimizer, use_resource):
    def build():
        g = tf.Graph()
        with g.as_default():
            x = tf1.placeholder(tf.float32, [6, 4], name="x")
            labels = tf1.placeholder(tf.int32, [6], name="labels")
            w = tf1.Variable(np.linspace(-0.4, 0.4, 12, dtype=np.float32).reshape(4, 3), name="w",
                             use_resource=use_resource)
            b = tf1.Variable(np.array([0.1, 0.0, -0.1], np.float32), name="b", use_resource=use_resource)
            logits = tf.matmul(x, w) + b
            xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
            loss = tf.identity(tf.reduce_mean(xent), name="loss")
            optimizer().minimize(loss, name="train")
            tf1.group(tf1.global_variables_initializer(), name="init")
            values = [tf.identity(v.read_value() if use_resource else v, name=v.op.name + "_value").name for v in (w, b)]
        rng = np.random.default_rng(13)

        def feeds():
            return {
                "x:0": rng.standard_normal([6, 4]).astype(np.float32),
                "labels:0": rng.integers(0, 3, 6).astype(np.int32),
            }

        return g, feeds, values

    return build


def optimizer_zoo(use_resource):
    """Every tf.compat.v1 optimizer with a kernel of its own beyond the
    common ones, each training its own embedding table (the row update)
    and dense weights (the dense update) of one softmax model."""
    def build():
        g = tf.Graph()
        rng_init = np.random.default_rng(23)
        with g.as_default():
            x = tf1.placeholder(tf.float32, [6, 4], name="x")
            ids = tf1.placeholder(tf.int32, [6], name="ids")
            labels = tf1.placeholder(tf.int32, [6], name="labels")
            step = tf1.Variable(np.int64(1), name="da_step", use_resource=use_resource, trainable=False)
            optimizers = {
                "adadelta": lambda: tf1.train.AdadeltaOptimizer(1.0, rho=0.9, epsilon=1e-4),
                "rmsprop": lambda: tf1.train.RMSPropOptimizer(0.05, decay=0.9, momentum=0.5, epsilon=1e-4),
                "centered": lambda: tf1.train.RMSPropOptimizer(0.05, decay=0.9, momentum=0.5, epsilon=1e-4,
                                                               centered=True),
                "proximal_gd": lambda: tf1.train.ProximalGradientDescentOptimizer(
                    0.2, l1_regularization_strength=0.001, l2_regularization_strength=0.01),
                "proximal_adagrad": lambda: tf1.train.ProximalAdagradOptimizer(
                    0.2, l1_regularization_strength=0.001, l2_regularization_strength=0.01),
                "adagrad_da": lambda: tf1.train.AdagradDAOptimizer(
                    0.2, step, l1_regularization_strength=0.001, l2_regularization_strength=0.01),
                "ftrl": lambda: tf1.train.FtrlOptimizer(0.2, l1_regularization_strength=0.001,
                                                        l2_regularization_strength=0.01),
                "ftrl_v2": lambda: tf1.train.FtrlOptimizer(0.2, learning_rate_power=-0.7,
                                                           l1_regularization_strength=0.001,
                                                           l2_regularization_strength=0.01,
                                                           l2_shrinkage_regularization_strength=0.02),
            }
            if use_resource:
                # Keras 2's own kernels (tf_keras, its legacy optimizers in
                # graph mode); they need resource variables.
                import tf_keras
                keras = tf_keras.optimizers.legacy
                optimizers["keras_adamax"] = lambda: keras.Adamax(0.05)
                optimizers["keras_amsgrad"] = lambda: keras.Adam(0.05, amsgrad=True)
            logits = 0.0
            groups = {}
            for name in optimizers:
                table = tf1.Variable((rng_init.standard_normal([10, 4]) * 0.3).astype(np.float32),
                                     name=name + "/table", use_resource=use_resource)
                w = tf1.Variable((rng_init.standard_normal([4, 3]) * 0.3).astype(np.float32), name=name + "/w",
                                 use_resource=use_resource)
                logits = logits + tf.matmul(x + tf.gather(table, ids), w)
                groups[name] = [table, w]
            xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
            loss = tf.identity(tf.reduce_mean(xent), name="loss")
            updates = []
            for name, make in optimizers.items():
                if name.startswith("keras_"):
                    variables = groups[name]
                    updates.append(make().apply_gradients(zip(tf.gradients(loss, variables), variables)))
                    continue
                kwargs = {"global_step": step} if name == "adagrad_da" else {}
                updates.append(make().minimize(loss, var_list=groups[name], **kwargs))
            tf1.group(*updates, name="train")
            tf1.group(tf1.global_variables_initializer(), name="init")
            values = []
            for v in [v for pair in groups.values() for v in pair] + [step]:
                value = v.read_value() if use_resource else v
                values.append(tf.identity(value, name=v.op.name.replace("/", "_") + "_value").name)
        rng = np.random.default_rng(29)

        def feeds():
            return {
                "x:0": rng.standard_normal([6, 4]).astype(np.float32),
                "ids:0": np.array(rng.integers(0, 10, 6), np.int32),
                "labels:0": rng.integers(0, 3, 6).astype(np.int32),
            }

        return g, feeds, values

    return build


CASES = {
    "train_mlp_momentum_ref": (mlp_momentum_ref, "ref variables, MLP, softmax xent + L2, Nesterov momentum"),
    "train_embedding_adam_resource": (
        embedding_adam_resource,
        "resource variables, embedding lookup, sparse softmax xent, Adam (dense and sparse updates)",
    ),
    "train_sparse_embedding_adagrad_resource": (
        sparse_embedding_adagrad_resource,
        "resource variables, safe_embedding_lookup_sparse (mean with weights, sqrtn, mean) on shuffled sparse ids with "
        "empty rows and pruned ids, tanh, sparse softmax xent, Adagrad (SparseSegmentMeanGrad, "
        "SparseSegmentSqrtNGrad, ResourceSparseApplyAdagrad)",
    ),
    "train_cnn_momentum_resource": (
        cnn_momentum_resource,
        "resource variables, CNN: Conv2D, FusedBatchNormV3 (training, moving averages), ReLU, MaxPool, Conv2D + "
        "BiasAdd, AvgPool, Mean, Dense; softmax xent, momentum",
    ),
    "train_dense_sgd_ref": (
        dense_optimizer(lambda: tf1.train.GradientDescentOptimizer(0.5), False),
        "ref variables, softmax regression, plain gradient descent",
    ),
    "train_dense_adagrad_ref": (
        dense_optimizer(lambda: tf1.train.AdagradOptimizer(0.3, initial_accumulator_value=0.1), False),
        "ref variables, softmax regression, Adagrad",
    ),
    "train_optimizer_zoo_ref": (
        optimizer_zoo(False),
        "ref variables, one softmax model whose embedding table and dense weights are trained, a pair each, by "
        "Adadelta, RMSProp, centered RMSProp, ProximalGradientDescent, ProximalAdagrad, AdagradDA, Ftrl and Ftrl "
        "with l2 shrinkage and lr_power -0.7: the dense Apply* and row SparseApply* kernels of each",
    ),
    "train_optimizer_zoo_resource": (
        optimizer_zoo(True),
        "resource variables, the same model and optimizers, and Keras 2's Adamax and Adam(amsgrad=True) (tf_keras "
        "legacy optimizers in graph mode): the ResourceApply* and ResourceSparseApply* kernels",
    ),
    "train_dense_rmsprop_resource": (
        dense_optimizer(lambda: tf1.train.RMSPropOptimizer(0.05, decay=0.9, momentum=0.5, epsilon=1e-6), True),
        "resource variables, softmax regression, RMSProp with momentum",
    ),
}


def save(out_dir, name, value):
    np.save(os.path.join(out_dir, name), value)
    return name


def export(fixtures, case, build, note):
    out_dir = os.path.join(fixtures, case)
    os.makedirs(out_dir, exist_ok=True)
    g, feeds, finals = build()
    graph_def = g.as_graph_def()
    with open(os.path.join(out_dir, "graph.pb"), "wb") as f:
        f.write(graph_def.SerializeToString())
    with open(os.path.join(out_dir, "graph.pbtxt"), "w") as f:
        f.write(str(graph_def))
    steps = [{"feeds": {}, "fetches": {}, "targets": ["init"]}]
    with tf1.Session(graph=g) as sess:
        sess.run("init")
        for i in range(1, 4):
            feed = feeds()
            # The loss before this step's update, then the update, as two
            # steps (one step fetching both would race in TensorFlow).
            (loss,) = sess.run(["loss:0"], feed_dict=feed)
            sess.run("train", feed_dict=feed)
            fed = {key: save(out_dir, f"step{i}_feed_{key.replace(':', '_')}.npy", v) for key, v in feed.items()}
            expect = {"loss:0": save(out_dir, f"step{i}_expect_loss_0.npy", loss)}
            steps.append({"feeds": fed, "fetches": expect, "targets": []})
            steps.append({"feeds": fed, "fetches": {}, "targets": ["train"]})
        values = sess.run(finals)
        fetches = {}
        for key, value in zip(finals, values):
            fetches[key] = save(out_dir, f"step4_expect_{key.replace(':', '_')}.npy", value)
        steps.append({"feeds": {}, "fetches": fetches, "targets": []})
    meta = {
        "note": note,
        "steps": steps,
        "ops": sorted({n.op for n in graph_def.node}),
        "devices": [],
        "tensorflow": tf.__version__,
    }
    with open(os.path.join(out_dir, "case.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print("wrote", out_dir, "ops:", meta["ops"])


def main(fixtures, only=None):
    for case, (build, note) in CASES.items():
        if only and case not in only:
            continue
        export(fixtures, case, build, note)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
