"""Exports SavedModel golden cases: each a directory under OUT_DIR holding a
SavedModel as TensorFlow writes it (saved_model.pb, variables/, assets/)
and case.json: its steps, each a signature with its inputs (key -> .npy)
and the outputs TensorFlow's own loader gave (key -> .npy), called in
order on one loaded model.

    /root/tfvenv/bin/python tools/golden/export_saved_models.py OUT_DIR [CASE...]
    /root/tfvenv/bin/python tools/golden/export_saved_models.py --time CASE_DIR [CALLS]

`--time` loads a case's SavedModel with TensorFlow and prints the p50 and
p99 of calling its signature on the case's inputs (after 300 untimed
calls), TensorFlow's side of `ringflow bench graph CASE_DIR`.

Each model's weights are set to seeded random values before it is saved,
so a case passes only if the variables really are restored.
"""
import json, os, shutil, sys

import numpy as np
import tensorflow as tf
import keras

rng = np.random.default_rng(7)


def randomize(model):
    model.set_weights([rng.standard_normal(w.shape).astype(w.dtype) * 0.5 for w in model.get_weights()])


def write_case(out, name, note, inputs, signature="serving_default", tags=("serve",)):
    """Loads the saved model back with TensorFlow, runs `signature` on `inputs`
    and writes case.json with what it returned."""
    write_steps_case(out, name, note, [(signature, inputs)], tags)


def write_steps_case(out, name, note, calls, tags=("serve",)):
    """As write_case, for several signature calls made in order on one
    loaded model (a training signature's updates carry to the next)."""
    case_dir = os.path.join(out, name)
    loaded = tf.saved_model.load(case_dir, tags=list(tags))
    case = {"note": note, "tags": list(tags), "steps": []}
    for i, (signature, inputs) in enumerate(calls):
        got = loaded.signatures[signature](**{k: tf.constant(v) for k, v in inputs.items()})
        prefix = "" if len(calls) == 1 else f"step{i}_"
        step = {"signature": signature, "inputs": {}, "outputs": {}}
        for k, v in inputs.items():
            np.save(os.path.join(case_dir, f"{prefix}input_{k}.npy"), v)
            step["inputs"][k] = f"{prefix}input_{k}.npy"
        for k, v in got.items():
            v = v.numpy()
            # Strings as fixed-width bytes, which .npy readers take.
            np.save(os.path.join(case_dir, f"{prefix}expect_{k}.npy"), v.astype(bytes) if v.dtype.kind == "O" else v)
            step["outputs"][k] = f"{prefix}expect_{k}.npy"
        case["steps"].append(step)
    with open(os.path.join(case_dir, "case.json"), "w") as f:
        json.dump(case, f, indent=1, sort_keys=True)


def keras_mlp_export(out, name):
    inp = keras.Input((4,), name="x")
    h = keras.layers.Dense(8, activation="relu")(inp)
    y = keras.layers.Dense(3, activation="softmax")(h)
    model = keras.Model(inp, y)
    randomize(model)
    model.export(os.path.join(out, name))
    write_case(out, name, "keras 3 model.export(): Dense relu, Dense softmax; variables restored from variables/",
               {"x": rng.standard_normal((3, 4)).astype(np.float32)})


def keras_cnn_export(out, name):
    inp = keras.Input((12, 12, 3), name="image")
    h = keras.layers.Conv2D(6, 3, padding="same")(inp)
    h = keras.layers.BatchNormalization()(h)
    h = keras.layers.ReLU()(h)
    h = keras.layers.MaxPooling2D()(h)
    h = keras.layers.Conv2D(8, 3, strides=2)(h)
    h = keras.layers.GlobalAveragePooling2D()(h)
    y = keras.layers.Dense(5)(h)
    model = keras.Model(inp, y)
    randomize(model)
    # Batch-norm variance must stay positive.
    bn = model.layers[2]
    bn.moving_variance.assign(np.abs(bn.moving_variance.numpy()) + 0.5)
    model.export(os.path.join(out, name))
    write_case(out, name, "keras 3 model.export() of a CNN: Conv2D, BatchNormalization (moving statistics "
               "restored), ReLU, MaxPool, strided Conv2D, global average pooling, Dense",
               {"image": rng.standard_normal((2, 12, 12, 3)).astype(np.float32)})


class Scaler(tf.Module):
    def __init__(self):
        self.w = tf.Variable(rng.standard_normal((3, 2)).astype(np.float32), name="w")
        self.offset = tf.Variable(np.int64(40), name="offset")

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="features")])
    def project(self, features):
        return {"projected": tf.matmul(features, self.w), "norm": tf.norm(features, axis=1)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int64, name="ids"),
                                  tf.TensorSpec([], tf.int64, name="step")])
    def shift(self, ids, step):
        return {"shifted": ids + self.offset * step}


def tf_module_signatures(out, name):
    module = Scaler()
    path = os.path.join(out, name)
    tf.saved_model.save(module, path, signatures={"project": module.project, "shift": module.shift})
    write_steps_case(out, name, "tf.saved_model.save of a tf.Module with two signatures, neither the default: "
                     "'project' (float input, two outputs), then 'shift' (int64 ids and a scalar step)",
                     [("project", {"features": rng.standard_normal((4, 3)).astype(np.float32)}),
                      ("shift", {"ids": np.array([1, -5, 7], np.int64), "step": np.array(3, np.int64)})])


def tf1_builder(out, name):
    path = os.path.join(out, name)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        w = tf.compat.v1.get_variable("w", initializer=rng.standard_normal((2, 2)).astype(np.float32))
        b = tf.compat.v1.get_variable("b", initializer=np.float32([0.5, -1.0]))
        y = tf.nn.sigmoid(tf.matmul(x, w) + b, name="y")
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            # Changed after initialisation: only a restore brings these back.
            sess.run(w.assign(w * 3.0))
            builder = tf.compat.v1.saved_model.Builder(path)
            sig = tf.compat.v1.saved_model.predict_signature_def({"x": x}, {"y": y})
            builder.add_meta_graph_and_variables(
                sess, ["serve"], signature_def_map={"serving_default": sig},
                main_op=tf.compat.v1.tables_initializer())
            builder.save()
    write_case(out, name, "TF1 SavedModelBuilder (graph mode, tf.compat.v1 variables, save/restore_all "
               "restore op, main_op), predict signature",
               {"x": rng.standard_normal((3, 2)).astype(np.float32)})


def keras_text_export(out, name):
    """Text in, ids and buckets out: TextVectorization (lowercase, strip
    punctuation, split on whitespace, vocabulary lookup in a mutable table
    restored from the checkpoint, padded and cut to 6 tokens), an
    Embedding over those ids, Hashing (FarmHash buckets) and StringLookup
    (a HashTable its init op fills)."""
    vec = keras.layers.TextVectorization(max_tokens=20, output_sequence_length=6)
    vec.adapt(["The cat sat on the mat.", "A dog, a cat!", "Dogs and cats; mats and hats?"])
    text = keras.Input((), dtype="string", name="text")
    ids = vec(text)
    pooled = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(20, 4)(ids))
    hashed = keras.layers.Hashing(num_bins=7)(text)
    salted = keras.layers.Hashing(num_bins=11, salt=[3, 5])(text)
    looked = keras.layers.StringLookup(vocabulary=["a", "b", "the cat sat"])(text)
    model = keras.Model(text, {"pooled": pooled, "hashed": hashed, "salted": salted, "looked": looked, "ids": ids})
    emb = [layer for layer in model.layers if isinstance(layer, keras.layers.Embedding)][0]
    emb.embeddings.assign(rng.standard_normal(emb.embeddings.shape).astype(np.float32))
    model.export(os.path.join(out, name))
    texts = np.array([b"The CAT sat, on a mat!", b"b", b"", b"  dogs   and unseen words here too", b"the cat sat"],
                     dtype="S")
    what = " ".join(keras_text_export.__doc__.split(":", 1)[1].split())
    write_case(out, name, "keras 3 model.export() of text preprocessing: " + what, {"text": texts})


class Vocab(tf.Module):
    def __init__(self, path):
        by_line = tf.lookup.TextFileInitializer(path, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE,
                                                tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER)
        self.table = tf.lookup.StaticHashTable(by_line, -1)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="words")])
    def lookup(self, words):
        return {"ids": self.table.lookup(words), "size": self.table.size()}


def tf_module_vocab_file(out, name):
    """A table filled from a vocabulary file: the file becomes an asset,
    its path a placeholder the init op is fed."""
    vocab = os.path.join(out, "vocab.txt")
    with open(vocab, "w") as f:
        f.write("the\ncat\nsat\non\nmat\n")
    module = Vocab(vocab)
    tf.saved_model.save(module, os.path.join(out, name), signatures={"serving_default": module.lookup})
    os.remove(vocab)
    words = np.array([b"cat", b"dog", b"mat", b"the"], dtype="S")
    write_case(out, name, "tf.saved_model.save of a tf.Module whose StaticHashTable reads a vocabulary file "
               "(TextFileInitializer: whole line -> line number): the file saved as an asset, the init op fed "
               "its path", {"words": words})


def keras_recurrent_export(out, name):
    inp = keras.Input((7, 3), name="seq")
    h = keras.layers.LSTM(5, return_sequences=True)(inp)
    h = keras.layers.Bidirectional(keras.layers.GRU(4))(h)
    model = keras.Model(inp, keras.layers.Dense(2)(h))
    randomize(model)
    model.export(os.path.join(out, name))
    write_case(out, name, "keras 3 model.export() of LSTM (sequences) then a Bidirectional GRU, Dense: "
               "While loops in the function library, with default attrs stripped",
               {"seq": rng.standard_normal((2, 7, 3)).astype(np.float32)})


def keras_transformer_export(out, name):
    inp = keras.Input((6, 8), name="tokens")
    attended = keras.layers.MultiHeadAttention(2, 4)(inp, inp)
    h = keras.layers.LayerNormalization()(inp + attended)
    ff = keras.layers.Dense(8)(keras.layers.Dense(16, activation="gelu")(h))
    h = keras.layers.LayerNormalization()(h + ff)
    model = keras.Model(inp, keras.layers.GlobalAveragePooling1D()(h))
    randomize(model)
    model.export(os.path.join(out, name))
    write_case(out, name, "keras 3 model.export() of a transformer encoder block: MultiHeadAttention, "
               "LayerNormalization, GELU feed-forward, pooling",
               {"tokens": rng.standard_normal((2, 6, 8)).astype(np.float32)})


def keras_categorical_export(out, name):
    ids = keras.Input((), dtype="int64", name="ids")
    looked = keras.layers.IntegerLookup(vocabulary=[3, 7, 11])(ids)
    hashed = keras.layers.Hashing(num_bins=5)(ids)
    bucket = keras.layers.Discretization(bin_boundaries=[0.0, 5.0])(keras.ops.cast(ids, "float32"))
    onehot = keras.layers.CategoryEncoding(num_tokens=4, output_mode="one_hot")(looked)
    model = keras.Model(ids, {"looked": looked, "hashed": hashed, "bucket": bucket, "onehot": onehot})
    model.export(os.path.join(out, name))
    write_case(out, name, "keras 3 model.export() of integer features: IntegerLookup (an int64-keyed "
               "HashTable), Hashing of integers (AsString, then FarmHash buckets), Discretization, "
               "CategoryEncoding one-hot", {"ids": np.array([3, 4, 11, -2, 7], np.int64)})


class Trainer(tf.Module):
    def __init__(self):
        self.w = tf.Variable(rng.standard_normal((3, 1)).astype(np.float32), name="w")
        self.b = tf.Variable(np.zeros(1, np.float32), name="b")
        self.velocity = tf.Variable(np.zeros((3, 1), np.float32), name="velocity")

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x"),
                                  tf.TensorSpec([None, 1], tf.float32, name="y")])
    def train(self, x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, self.w) + self.b - y))
        grad_w, grad_b = tape.gradient(loss, [self.w, self.b])
        self.velocity.assign(0.9 * self.velocity + grad_w)
        self.w.assign_sub(0.1 * self.velocity)
        self.b.assign_sub(0.1 * grad_b)
        return {"loss": loss}

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def predict(self, x):
        return {"y": tf.matmul(x, self.w) + self.b}


def tf_module_training(out, name):
    module = Trainer()
    tf.saved_model.save(module, os.path.join(out, name), signatures={"train": module.train, "predict": module.predict})
    x = rng.standard_normal((4, 3)).astype(np.float32)
    y = rng.standard_normal((4, 1)).astype(np.float32)
    write_steps_case(out, name, "tf.saved_model.save of a tf.Module with a 'train' signature (GradientTape, "
                     "momentum by hand: the gradient graph in the function library, variables assigned) called "
                     "three times, then 'predict' with the trained weights",
                     [("train", {"x": x, "y": y})] * 3 + [("predict", {"x": x})])


def keras_text_bags_export(out, name):
    corpus = ["The cat sat on the mat.", "A dog, a cat!", "Dogs and cats; mats and hats?"]
    text = keras.Input((), dtype="string", name="text")
    outputs = {}
    for key, options in [("bigram_ids", dict(max_tokens=30, ngrams=2, output_sequence_length=8)),
                         ("multi_hot", dict(max_tokens=20, output_mode="multi_hot")),
                         ("counts", dict(max_tokens=20, output_mode="count")),
                         ("tf_idf", dict(max_tokens=20, output_mode="tf_idf"))]:
        layer = keras.layers.TextVectorization(**options)
        layer.adapt(corpus)
        outputs[key] = layer(text)
    keras.Model(text, outputs).export(os.path.join(out, name))
    texts = np.array([b"the cat sat on the cat", b"dogs and hats", b"", b"a mat a mat a"], dtype="S")
    write_case(out, name, "keras 3 model.export() of TextVectorization's other outputs: unigrams and bigrams "
               "(StringNGrams) as padded ids, multi-hot, counts and tf-idf (RaggedBincount)", {"text": texts})


def keras_augment_text_export(out, name):
    """Keras preprocessing and augmentation layers as exported for
    inference (the random layers' transforms stay in the graph behind a
    training switch), and TextVectorization splitting characters."""
    image = keras.Input((20, 20, 3), name="image")
    h = keras.layers.Rescaling(1 / 255.0)(image)
    h = keras.layers.Resizing(16, 16)(h)
    h = keras.layers.CenterCrop(12, 12)(h)
    h = keras.layers.Normalization(mean=[0.5, 0.4, 0.3], variance=[0.1, 0.2, 0.3])(h)
    h = keras.layers.RandomFlip()(h)
    h = keras.layers.RandomRotation(0.2)(h)
    h = keras.layers.RandomZoom(0.1)(h)
    h = keras.layers.RandomTranslation(0.1, 0.1)(h)
    h = keras.layers.Conv2D(4, 3)(h)
    pooled = keras.layers.GlobalAveragePooling2D()(h)
    text = keras.Input((), dtype="string", name="text")
    chars = keras.layers.TextVectorization(max_tokens=40, split="character", output_sequence_length=12)
    chars.adapt(["The cat sat on the mat.", "caf\u00e9 na\u00efve \u00fcber"])
    model = keras.Model({"image": image, "text": text}, {"pooled": pooled, "chars": chars(text)})
    randomize(model)
    model.export(os.path.join(out, name))
    texts = np.array([t.encode() for t in ["the cat", "caf\u00e9 \u00fcber alles", "", "zzz!"]], dtype="S")
    write_case(out, name, "keras 3 model.export() of image preprocessing and augmentation (Rescaling, Resizing, "
               "CenterCrop, Normalization; RandomFlip, RandomRotation, RandomZoom, RandomTranslation, whose "
               "ImageProjectiveTransformV3 stays in the graph) and TextVectorization(split='character') "
               "(UnicodeDecode, UnicodeEncode)",
               {"image": rng.uniform(0, 255, (2, 20, 20, 3)).astype(np.float32), "text": texts})


def example_bytes(**features):
    """A serialized tf.train.Example: bytes values as a bytes list, floats as a
    float list, anything else as an int64 list."""
    feature = {}
    for key, value in features.items():
        if isinstance(value[0], bytes):
            feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=value))
        elif isinstance(value[0], float):
            feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=value))
        else:
            feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=value))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def tf_module_parse_example(out, name):
    """A model fed serialized tf.train.Examples, as Estimator-style serving
    input receivers feed one: ParseExampleV2 inside the signature's
    function, its list outputs named by arg in the function body."""
    class Scorer(tf.Module):
        def __init__(self):
            self.w = tf.Variable(rng.standard_normal((3, 2)).astype(np.float32))

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
        def predict(self, examples):
            parsed = tf.io.parse_example(examples, {
                "x": tf.io.FixedLenFeature([3], tf.float32, default_value=[0.0, 0.0, 0.0]),
                "kind": tf.io.FixedLenFeature([], tf.string, default_value="?"),
                "tags": tf.io.VarLenFeature(tf.int64),
            })
            tags = tf.sparse.to_dense(parsed["tags"])
            return {"scores": tf.matmul(parsed["x"], self.w), "kind": parsed["kind"],
                    "tag_sum": tf.reduce_sum(tags, axis=1)}

    module = Scorer()
    tf.saved_model.save(module, os.path.join(out, name), signatures={"serving_default": module.predict})

    examples = np.array([example_bytes(x=[1.0, 2.0, 3.0], kind=[b"a"], tags=[4, 5]), example_bytes(tags=[1]),
                         example_bytes(x=[0.5, -1.0, 0.25], kind=[b"b"])], dtype="S")
    write_case(out, name, "tf.saved_model.save of a tf.Module fed serialized tf.train.Examples: ParseExampleV2 "
               "(dense float32 [3] and string features with defaults, a sparse int64 feature) inside the "
               "signature's function, then a matmul with a restored variable", {"examples": examples})


def tf1_classify_regress(out, name):
    """A TF1 SavedModelBuilder model with TensorFlow Serving's classify and
    regress signatures over serialized tf.train.Examples (what Estimator
    exports were): a softmax classifier with string class labels, a
    scores-only classifier, a regressor, and a predict signature on the
    same input. The last step feeds each example with a context Example's
    bytes in front, as TensorFlow Serving's Classify does for
    ExampleListWithContext; examples.json holds step 0's examples and that
    context as TensorFlow Serving's REST API takes them."""
    path = os.path.join(out, name)
    graph = tf.Graph()
    with graph.as_default():
        serialized = tf.compat.v1.placeholder(tf.string, [None], name="tf_example")
        parsed = tf.io.parse_example(serialized, {
            "x": tf.io.FixedLenFeature([3], tf.float32, default_value=[0.0, 0.0, 0.0]),
            "weight": tf.io.FixedLenFeature([], tf.int64, default_value=1),
            "kind": tf.io.FixedLenFeature([], tf.string, default_value="?"),
        })
        w = tf.compat.v1.get_variable("w", initializer=rng.standard_normal((3, 3)).astype(np.float32))
        b = tf.compat.v1.get_variable("b", initializer=np.float32([0.1, -0.2, 0.3]))
        logits = tf.matmul(parsed["x"], w) + b
        scores = tf.nn.softmax(logits, name="scores")
        batch = tf.shape(serialized)[0]
        classes = tf.tile(tf.constant([[b"cat", b"dog", b"bird"]]), [batch, 1], name="classes")
        kind_bonus = tf.cast(tf.equal(parsed["kind"], "big"), tf.float32)
        value = tf.reduce_sum(parsed["x"], axis=1) * tf.cast(parsed["weight"], tf.float32) + kind_bonus
        regression = tf.expand_dims(value, 1, name="regression")
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            builder = tf.compat.v1.saved_model.Builder(path)
            sigs = {
                "serving_default": tf.compat.v1.saved_model.classification_signature_def(serialized, classes, scores),
                "scores_only": tf.compat.v1.saved_model.classification_signature_def(serialized, None, scores),
                "regress": tf.compat.v1.saved_model.regression_signature_def(serialized, regression),
                "predict": tf.compat.v1.saved_model.predict_signature_def({"inputs": serialized}, {"scores": scores}),
            }
            builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map=sigs)
            builder.save()

    rows = [{"x": [1.0, 2.0, 3.0], "kind": [b"big"]}, {"x": [0.5, -1.5, 0.25], "weight": [3]},
            {"weight": [2], "kind": [b"small"]}]
    examples = np.array([example_bytes(**row) for row in rows], dtype="S")
    context = {"weight": [5], "kind": [b"big"]}
    # Serialized messages concatenate as a merge: each example's own
    # features after the context's win.
    with_context = np.array([example_bytes(**context) + example_bytes(**row) for row in rows], dtype="S")
    calls = [("serving_default", {"inputs": examples}), ("scores_only", {"inputs": examples}),
             ("regress", {"inputs": examples}), ("predict", {"inputs": examples}),
             ("serving_default", {"inputs": with_context}), ("regress", {"inputs": with_context})]
    write_steps_case(out, name, "TF1 SavedModelBuilder with TensorFlow Serving's classify and regress signatures "
                     "over serialized tf.train.Examples (ParseExample with float, int64 and string defaults), a "
                     "scores-only classifier, a predict signature; the last two steps put a context Example in "
                     "front of each", calls)

    def json_row(row):
        return {k: [v.decode() if isinstance(v, bytes) else v for v in vs] if len(vs) > 1
                else (vs[0].decode() if isinstance(vs[0], bytes) else vs[0]) for k, vs in row.items()}
    with open(os.path.join(path, "examples.json"), "w") as f:
        json.dump({"examples": [json_row(r) for r in rows], "context": json_row(context)}, f, indent=1)


def keras_image_bytes_export(out, name):
    """An image classifier served on JPEG bytes, the usual TensorFlow Serving
    image signature: keras.export.ExportArchive with an endpoint that
    tf.map_fn's DecodeJpeg, convert_image_dtype and a resize over a batch of
    strings (a while loop over string TensorLists), then the model."""
    inp = keras.Input((24, 24, 3))
    x = keras.layers.Conv2D(4, 3, activation="relu")(inp)
    x = keras.layers.GlobalAveragePooling2D()(x)
    model = keras.Model(inp, keras.layers.Dense(3, activation="softmax")(x))
    randomize(model)

    def serve(image_bytes):
        def one(b):
            img = tf.image.convert_image_dtype(tf.io.decode_jpeg(b, channels=3), tf.float32)
            return tf.image.resize(img, [24, 24])
        images = tf.map_fn(one, image_bytes, fn_output_signature=tf.float32)
        return {"probs": model(images, training=False)}

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(name="serving_default", fn=serve,
                         input_signature=[tf.TensorSpec([None], tf.string, name="image_bytes")])
    archive.write_out(os.path.join(out, name))

    def picture(h, w):
        return np.clip(np.cumsum(rng.standard_normal((h, w, 3)), 1) * 8 + 128, 0, 255).astype(np.uint8)
    jpegs = np.array([tf.io.encode_jpeg(picture(30, 40)).numpy(),
                      tf.io.encode_jpeg(picture(20, 25), chroma_downsampling=False).numpy(),
                      tf.io.encode_jpeg(picture(24, 24)[:, :, :1]).numpy()], dtype="S")
    write_case(out, name, "keras 3 ExportArchive of a CNN served on JPEG bytes: tf.map_fn of DecodeJpeg, "
               "convert_image_dtype and a resize over a batch of strings, then the model", {"image_bytes": jpegs})


CASES = [keras_mlp_export, keras_cnn_export, tf_module_signatures, tf1_builder, keras_text_export, tf_module_vocab_file,
         keras_recurrent_export, keras_transformer_export, keras_categorical_export, tf_module_training,
         keras_text_bags_export, keras_augment_text_export, tf_module_parse_example,
         tf1_classify_regress, keras_image_bytes_export]

def time_case(case_dir, calls):
    import time
    with open(os.path.join(case_dir, "case.json")) as f:
        case = json.load(f)
    step = case["steps"][0]
    fn = tf.saved_model.load(case_dir, tags=case["tags"]).signatures[step["signature"]]
    inputs = {k: tf.constant(np.load(os.path.join(case_dir, v))) for k, v in step["inputs"].items()}
    for _ in range(300):
        fn(**inputs)
    took = []
    for _ in range(calls):
        start = time.perf_counter()
        fn(**inputs)
        took.append(time.perf_counter() - start)
    took = np.array(took) * 1e6
    print(f"{case_dir}: TensorFlow {tf.__version__}, {calls} calls: "
          f"p50 {np.percentile(took, 50):.1f} us, p99 {np.percentile(took, 99):.1f} us")


if __name__ == "__main__":
    if sys.argv[1] == "--time":
        time_case(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 3000)
        sys.exit(0)
    out = sys.argv[1]
    wanted = set(sys.argv[2:])
    for case in CASES:
        if wanted and case.__name__ not in wanted:
            continue
        path = os.path.join(out, case.__name__)
        shutil.rmtree(path, ignore_errors=True)
        case(out, case.__name__)
        print("wrote", path)
