"""tf.keras masking in af.keras: Embedding(mask_zero), Masking, the recurrent layers and wrappers
that honour a mask, the layers that carry or drop it, and the masked loss and metrics of a
compiled model; against tf_keras 2.21 in graph mode (tests/fixtures/keras_masking.json, written by
tests/fixtures/make_keras_masking.py)."""
from __future__ import annotations

import importlib.util
import json
import os

import numpy as np
import pytest

import actorflow as af
from actorflow import keras
from actorflow.keras import backend as K

L = keras.layers
with open(os.path.join(os.path.dirname(__file__), "fixtures", "keras_masking.json")) as _f:
    REF = json.load(_f)
_spec = importlib.util.spec_from_file_location("keras_cases", os.path.join(os.path.dirname(__file__), "fixtures",
                                                                           "keras_cases.py"))
_CASES = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_CASES)


@pytest.fixture(autouse=True)
def _fresh():
    K.clear_session()
    yield
    K.clear_session()


def _build(spec):
    def make(cls, kwargs):
        kwargs = dict(kwargs)
        if "layer" in kwargs:
            kwargs["layer"] = make(*kwargs["layer"])
        if "input_shape" in kwargs:
            kwargs["input_shape"] = tuple(kwargs["input_shape"])
        return getattr(L, cls)(**kwargs)
    return keras.Sequential([make(cls, kw) for cls, kw in spec])


def _f32(v):
    return np.asarray(v, np.float32)


@pytest.mark.parametrize("name", sorted(REF["layers"]))
def test_masked_model_matches_tf_keras(name):
    case = REF["layers"][name]
    model = _build(case["layers"])
    model.set_weights([_f32(w) for w in case["weights"]])
    x = np.asarray(case["x"])
    got = model.predict(x.astype(np.int32) if x.dtype.kind == "i" else x.astype(np.float32))
    np.testing.assert_allclose(got, _f32(case["output"]), rtol=1e-5, atol=1e-6, err_msg=name)


def test_masked_steps_keep_state_and_repeat_output():
    """A masked step outputs the previous step's output (zeros before the first unmasked one), and
    the last output is the last unmasked step's, wherever the padding is."""
    ids = np.array([[0, 3, 0, 4, 0]], np.int32)
    inp = keras.Input((5,), dtype="int32")
    emb = L.Embedding(6, 2, mask_zero=True)(inp)
    seq = L.LSTM(3, return_sequences=True)(emb)
    last = L.LSTM(3)(emb)
    model = keras.Model(inp, [seq, last])
    model.layers[3].set_weights(model.layers[2].get_weights())      # the same LSTM weights
    s, h = model.predict(ids)
    np.testing.assert_array_equal(s[0, 0], 0.0)
    np.testing.assert_array_equal(s[0, 2], s[0, 1])
    np.testing.assert_array_equal(s[0, 4], s[0, 3])
    np.testing.assert_allclose(h[0], s[0, 3], rtol=1e-6)
    # the same sequence without the padding gives the same last output
    unpadded = keras.Model(inp, last)
    h2 = unpadded.predict(np.array([[3, 4, 0, 0, 0]], np.int32))
    np.testing.assert_allclose(h2[0], h[0], rtol=1e-5, atol=1e-7)


def test_mask_propagation_and_dropping():
    inp = keras.Input((4,), dtype="int32")
    e = L.Embedding(5, 3, mask_zero=True)(inp)
    assert getattr(e, "_keras_mask", None) is not None
    d = L.Dense(2)(e)                           # carries it
    assert d._keras_mask is e._keras_mask
    f = L.Flatten()(e)                          # drops it (TF 1.x graph-mode Keras: no error)
    assert getattr(f, "_keras_mask", None) is None
    r = L.LSTM(2)(e)                            # consumes it
    assert getattr(r, "_keras_mask", None) is None
    rs = L.LSTM(2, return_sequences=True)(e)
    assert rs._keras_mask is e._keras_mask
    mask = K.get_session().run(e._keras_mask, {inp: np.array([[1, 0, 2, 0]])})
    np.testing.assert_array_equal(mask, [[True, False, True, False]])
    plain = L.Embedding(5, 3)(inp)
    assert getattr(plain, "_keras_mask", None) is None


def test_merge_and_concatenate_masks():
    inp = keras.Input((3,), dtype="int32")
    a = L.Embedding(5, 2, mask_zero=True)(inp)
    b = L.Embedding(5, 2)(inp)                  # unmasked
    c = L.Embedding(5, 2, mask_zero=True)(L.Lambda(lambda t: 4 - t)(inp))
    added = L.Add()([a, c])
    cat = L.Concatenate()([a, b])
    sess = K.get_session()
    sess.run(af.global_variables_initializer())
    ids = np.array([[0, 1, 4]])
    m_add, m_cat = sess.run([added._keras_mask, cat._keras_mask], {inp: ids})
    np.testing.assert_array_equal(m_add, [[False, True, False]])     # a and c
    np.testing.assert_array_equal(m_cat, [[False, True, True]])      # a's, b's all true
    assert getattr(L.Dot(axes=-1)([a, c]), "_keras_mask", None) is None


def test_explicit_mask_argument_and_lambda_mask():
    x = af.placeholder(af.float32, [None, 3, 2])
    m = af.placeholder(af.bool, [None, 3])
    out = L.SimpleRNN(2, return_sequences=True)(x, mask=m)
    assert out._keras_mask is m
    lam = L.Lambda(lambda t: t * 2.0, mask=lambda t, mask: af.logical_not(mask))(out)
    sess = K.get_session()
    sess.run(af.global_variables_initializer())
    xs = np.ones((1, 3, 2), np.float32)
    o, lm = sess.run([out, lam._keras_mask], {x: xs, m: [[True, False, True]]})
    np.testing.assert_array_equal(o[0, 1], o[0, 0])
    np.testing.assert_array_equal(lm, [[False, True, False]])


def test_softmax_with_mask():
    x = af.constant([[1.0, 2.0, 3.0]])
    y = L.Softmax()(x, mask=af.constant([[True, False, True]]))
    got = K.get_session().run(y)
    e = np.exp([1.0, 3.0] - np.max([1.0, 3.0]))
    np.testing.assert_allclose(got, [[e[0] / e.sum(), 0.0, e[1] / e.sum()]], rtol=1e-6)


def test_return_state_masks():
    inp = keras.Input((4,), dtype="int32")
    e = L.Embedding(5, 3, mask_zero=True)(inp)
    out, h, c = L.LSTM(2, return_sequences=True, return_state=True)(e)
    assert out._keras_mask is e._keras_mask
    assert getattr(h, "_keras_mask", None) is None and getattr(c, "_keras_mask", None) is None


def _tagger():
    case = REF["training"]
    model = _build(case["layers"])
    model.set_weights([_f32(w) for w in case["weights"]])
    model.compile(keras.optimizers.SGD(0.5), "sparse_categorical_crossentropy", metrics=["accuracy"])
    return case, model


def test_masked_loss_and_metrics_match_tf_keras():
    """The loss of a masked sequence output is the mean over the unmasked steps, and the accuracy
    counts only them, accumulated over the batches."""
    case, model = _tagger()
    ids = np.asarray(REF["ids"], np.int32)
    y = np.asarray(case["y"], np.int32)
    np.testing.assert_allclose(model.evaluate(ids, y, batch_size=2, verbose=0), case["evaluate"], rtol=1e-5)
    np.testing.assert_allclose(
        model.evaluate(ids, y, sample_weight=_f32(case["sample_weight"]), batch_size=2, verbose=0),
        case["evaluate_weighted"], rtol=1e-5)


def test_masked_training_step_matches_tf_keras():
    case, model = _tagger()
    ids = np.asarray(REF["ids"], np.int32)
    y = np.asarray(case["y"], np.int32)
    np.testing.assert_allclose(model.train_on_batch(ids, y), case["train_on_batch"], rtol=1e-5)
    for got, want in zip(model.get_weights(), case["weights_after"]):
        np.testing.assert_allclose(got, _f32(want), rtol=1e-4, atol=1e-6)


def test_sample_weight_reduction_matches_tf_keras():
    """Sample-weighted loss: the weighted sum over the batch size (tf.keras's SUM_OVER_BATCH_SIZE)."""
    case = REF["sample_weight"]
    model = keras.Sequential([L.Dense(1, input_shape=(2,), kernel_initializer="ones", use_bias=False)])
    model.compile("sgd", "mse")
    x, y = _f32(case["x"]), _f32(case["y"])
    np.testing.assert_allclose(model.evaluate(x, y, verbose=0), case["evaluate"], rtol=1e-6)
    np.testing.assert_allclose(model.evaluate(x, y, sample_weight=_f32(case["sample_weight"]), verbose=0),
                               case["evaluate_weighted"], rtol=1e-6)


def test_mask_in_functional_model_replay():
    """A functional model called on new inputs recomputes its masks from them."""
    inp = keras.Input((4,), dtype="int32")
    out = L.LSTM(2)(L.Embedding(5, 3, mask_zero=True)(inp))
    model = keras.Model(inp, out)
    other = keras.Input((4,), dtype="int32")
    again = model(other)
    sess = K.get_session()
    ids = np.array([[1, 2, 0, 0]])
    a = sess.run(out, {inp: ids})
    b = sess.run(again, {other: ids})
    np.testing.assert_array_equal(a, b)
    c = sess.run(again, {other: np.array([[1, 2, 0, 3]])})
    assert not np.allclose(a, c)


def test_masking_layer_config_round_trip():
    layer = L.Masking(mask_value=-1.0)
    assert layer.get_config()["mask_value"] == -1.0
    emb = L.Embedding(5, 2, mask_zero=True)
    assert L.Embedding.from_config(emb.get_config()).mask_zero


# -- stateful recurrent layers -----------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(REF["stateful"]))
def test_stateful_rnn_matches_tf_keras(name):
    """A stateful layer starts each batch from the state the previous one left (predict, evaluate
    and training steps alike) until reset_states()."""
    case = REF["stateful"][name]
    model = _build(case["layers"])
    model.set_weights([_f32(w) for w in case["weights"]])
    x1, x2 = _f32(case["x1"]), _f32(case["x2"])
    tol = dict(rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.predict(x1, batch_size=2), _f32(case["first"]), **tol)
    np.testing.assert_allclose(model.predict(x2, batch_size=2), _f32(case["second"]), **tol)
    model.reset_states()
    np.testing.assert_allclose(model.predict(x2, batch_size=2), _f32(case["after_reset"]), **tol)
    model.compile(keras.optimizers.SGD(0.1), "mse")
    model.reset_states()
    np.testing.assert_allclose(model.train_on_batch(x1, _f32(case["y"])), case["train_on_batch"], rtol=1e-5)
    np.testing.assert_allclose(model.predict(x2, batch_size=2), _f32(case["after_train"]), rtol=1e-4, atol=1e-5)
    for got, want in zip(model.get_weights(), case["weights_after"]):
        np.testing.assert_allclose(got, _f32(want), rtol=1e-4, atol=1e-6)


def test_stateful_needs_a_batch_size_and_reset_states_checks():
    with pytest.raises(ValueError, match="stateful, it needs to know its batch size"):
        keras.Sequential([L.LSTM(2, stateful=True, input_shape=(3, 2))])
    layer = L.LSTM(2, stateful=True, batch_input_shape=(1, 3, 2))
    model = keras.Sequential([layer])
    assert len(layer.states) == 2 and layer.weights == model.weights and len(model.get_weights()) == 3
    layer.reset_states([np.ones((1, 2), np.float32), np.zeros((1, 2), np.float32)])
    np.testing.assert_array_equal(K.get_value(layer.states[0]), [[1.0, 1.0]])
    with pytest.raises(ValueError, match="expects 2 states"):
        layer.reset_states([np.ones((1, 2), np.float32)])
    with pytest.raises(ValueError, match="incompatible"):
        layer.reset_states([np.ones((2, 2), np.float32)] * 2)
    with pytest.raises(AttributeError, match="must be stateful"):
        L.LSTM(2).reset_states()


def test_time_major_layer():
    x = np.random.RandomState(0).randn(2, 4, 3).astype(np.float32)
    ph = af.placeholder(af.float32, [None, 4, 3])
    ph_t = af.placeholder(af.float32, [4, None, 3])
    batch_major = L.GRU(2, return_sequences=True)
    time_major = L.GRU(2, return_sequences=True, time_major=True)
    a, b = batch_major(ph), time_major(ph_t)
    time_major.set_weights(batch_major.get_weights())
    ra, rb = K.get_session().run([a, b], {ph: x, ph_t: x.transpose(1, 0, 2)})
    np.testing.assert_allclose(rb.transpose(1, 0, 2), ra, rtol=1e-6)


# -- class weights and per-step sample weights --------------------------------------------------

@pytest.mark.parametrize("name", ["sparse", "onehot", "with_sample_weight"])
def test_class_weight_matches_tf_keras(name):
    ref = REF["class_weight"]
    case = ref[name]
    x, y = _f32(ref["x"]), np.asarray(ref["y"], np.int32)
    target = np.eye(3, dtype=np.float32)[y] if name == "onehot" else y
    cw = {int(k): v for k, v in ref["class_weight"].items()}
    model = keras.Sequential([L.Dense(3, activation="softmax", input_shape=(4,))])
    model.set_weights([_f32(w) for w in case["weights"]])
    model.compile(keras.optimizers.SGD(0.5), case["loss"])
    kw = {"sample_weight": _f32(ref["sample_weight"])} if name == "with_sample_weight" else {}
    np.testing.assert_allclose(model.train_on_batch(x, target, class_weight=cw, **kw), case["train_on_batch"],
                               rtol=1e-5)
    for got, want in zip(model.get_weights(), case["weights_after"]):
        np.testing.assert_allclose(got, _f32(want), rtol=1e-5, atol=1e-6)


def test_class_weight_errors_and_fit():
    model = keras.Sequential([L.Dense(2, activation="softmax", input_shape=(2,))])
    model.compile("sgd", "sparse_categorical_crossentropy")
    x, y = np.ones((4, 2), np.float32), np.array([0, 1, 1, 0])
    with pytest.raises(ValueError, match=r"classes \{1\} exist in the data but not in `class_weight`"):
        model.fit(x, y, class_weight={0: 1.0}, verbose=0)
    hist = model.fit(x, y, class_weight={0: 1.0, 1: 3.0}, epochs=2, verbose=0)
    assert len(hist.history["loss"]) == 2 and isinstance(hist.history["loss"][0], float)
    with pytest.raises(ValueError, match="sample_weight_mode=\"temporal\" in compile"):
        model.fit(x, y, sample_weight=np.ones((4, 3)), verbose=0)


def test_temporal_sample_weights_match_tf_keras():
    case = REF["temporal"]
    model = _build(REF["training"]["layers"])
    model.set_weights([_f32(w) for w in case["weights"]])
    model.compile(keras.optimizers.SGD(0.5), "sparse_categorical_crossentropy", sample_weight_mode="temporal")
    ids, y, sw = np.asarray(REF["ids"], np.int32), np.asarray(case["y"], np.int32), _f32(case["sample_weight"])
    np.testing.assert_allclose(model.evaluate(ids, y, sample_weight=sw, batch_size=2, verbose=0), case["evaluate"],
                               rtol=1e-5)
    np.testing.assert_allclose(model.train_on_batch(ids, y, sample_weight=sw), case["train_on_batch"], rtol=1e-5)
    for got, want in zip(model.get_weights(), case["weights_after"]):
        np.testing.assert_allclose(got, _f32(want), rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="2D sample_weight"):
        model.evaluate(ids, y, sample_weight=np.ones(3, np.float32), verbose=0)
    with pytest.raises(ValueError, match="should be None or \"temporal\""):
        model.compile("sgd", "mse", sample_weight_mode="stepwise")


def test_weighted_metrics_match_tf_keras():
    case = REF["weighted_metrics"]
    model = _build(REF["training"]["layers"])
    model.set_weights([_f32(w) for w in case["weights"]])
    model.compile("sgd", "sparse_categorical_crossentropy", metrics=["accuracy"],
                  weighted_metrics=["accuracy", "sparse_categorical_crossentropy"])
    assert model.metrics_names == case["metrics_names"]
    ids, y = np.asarray(REF["ids"], np.int32), np.asarray(case["y"], np.int32)
    np.testing.assert_allclose(model.evaluate(ids, y, sample_weight=_f32(case["sample_weight"]), batch_size=2,
                                              verbose=0), case["evaluate"], rtol=1e-5)
    np.testing.assert_allclose(model.evaluate(ids, y, batch_size=2, verbose=0), case["evaluate_unweighted"],
                               rtol=1e-5)


# -- tf.data Datasets in fit, evaluate and predict ------------------------------------------------

@pytest.mark.parametrize("name", ["finite", "repeated"])
def test_fit_on_datasets_matches_tf_keras(name):
    """A finite data set: each epoch runs to its end (and validates on it); a repeated one:
    steps_per_epoch batches an epoch, the iterator going on across epochs. Losses over the steps
    are their plain mean, as tf.keras's step-counting loops give."""
    ref = REF["datasets"]
    case = ref[name]
    x, y = _f32(ref["x"]), np.asarray(ref["y"], np.int64)
    model = keras.Sequential([L.Dense(3, activation="softmax", input_shape=(3,))])
    model.set_weights([_f32(w) for w in case["weights"]])
    model.compile(keras.optimizers.SGD(0.3), "sparse_categorical_crossentropy", metrics=["accuracy"])
    ds = af.data.Dataset.from_tensor_slices((x, y)).batch(3)
    if name == "finite":
        hist = model.fit(ds, epochs=2, verbose=0, validation_data=ds)
    else:
        hist = model.fit(ds.repeat(), epochs=2, steps_per_epoch=2, verbose=0)
    assert sorted(hist.history) == sorted(case["history"])
    for k, v in case["history"].items():
        np.testing.assert_allclose(hist.history[k], v, rtol=1e-5, err_msg=k)
    for got, want in zip(model.get_weights(), case["weights_after"]):
        np.testing.assert_allclose(got, _f32(want), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.evaluate(ds, verbose=0), case["evaluate"], rtol=1e-5)
    np.testing.assert_allclose(model.predict(ds), _f32(case["predict"]), rtol=1e-5, atol=1e-6)


def test_dataset_input_errors_and_iterators():
    model = keras.Sequential([L.Dense(2, activation="softmax", input_shape=(2,))])
    model.compile("sgd", "sparse_categorical_crossentropy")
    x, y = np.ones((4, 2), np.float32), np.array([0, 1, 1, 0])
    ds = af.data.Dataset.from_tensor_slices((x, y)).batch(2)
    with pytest.raises(ValueError, match="infinitely repeating dataset, you must specify the `steps_per_epoch`"):
        model.fit(ds.repeat(), epochs=1, verbose=0)
    with pytest.raises(ValueError, match="`batch_size` argument must not be specified"):
        model.fit(ds, batch_size=2, verbose=0)
    # fewer batches than steps_per_epoch * epochs: training stops when the data ends
    hist = model.fit(ds, epochs=3, steps_per_epoch=2, verbose=0)
    assert len(hist.history["loss"]) == 1
    # an iterator the program made is read as it stands
    it = af.data.make_initializable_iterator(ds.repeat())
    K.get_session().run(it.initializer)
    assert len(model.fit(it, epochs=2, steps_per_epoch=3, verbose=0).history["loss"]) == 2
    assert model.predict(ds.map(lambda a, b: a)).shape == (4, 2)


# -- user-defined and stacked recurrent cells -------------------------------------------------------

MinimalRNNCell = _CASES.minimal_rnn_cell(keras)
CUSTOM_CELLS = _CASES.custom_cells(keras)


@pytest.mark.parametrize("name", sorted(CUSTOM_CELLS))
def test_rnn_over_custom_and_stacked_cells_matches_tf_keras(name):
    case = REF["custom_cells"][name]
    inp = keras.Input((4, 5))
    model = keras.Model(inp, CUSTOM_CELLS[name]()(inp))
    assert len(model.get_weights()) == len(case["weights"])
    model.set_weights([_f32(w) for w in case["weights"]])
    got = model.predict(_f32(case["x"]))
    got = got if isinstance(got, list) else [got]
    for g, want in zip(got, case["outputs"]):
        np.testing.assert_allclose(g, _f32(want), rtol=1e-5, atol=1e-6, err_msg=name)


def test_custom_cell_under_a_mask_and_training():
    case = REF["custom_cells"]["masked_minimal"]
    model = keras.Sequential([L.Embedding(8, 5, mask_zero=True, input_length=5), L.RNN(MinimalRNNCell(2))])
    model.set_weights([_f32(w) for w in case["weights"]])
    np.testing.assert_allclose(model.predict(np.asarray(case["x"], np.int32)), _f32(case["outputs"][0]),
                               rtol=1e-5, atol=1e-6)
    model.compile("sgd", "mse")
    before = model.get_weights()
    model.fit(np.asarray(case["x"], np.int32), np.ones((3, 2), np.float32), epochs=1, verbose=0)
    assert all(not np.allclose(a, b) for a, b in zip(before[1:], model.get_weights()[1:]))   # the cell trains


def test_invalid_cells_are_refused():
    with pytest.raises(ValueError, match="should have a `call` method and a `state_size` attribute"):
        L.RNN(object())
    with pytest.raises(ValueError, match="All cells must have a `call` method"):
        L.StackedRNNCells([L.LSTMCell(2), object()])


# -- attention layers ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", _CASES.ATTENTION_CASES)
def test_attention_layers_match_tf_keras(name):
    ref = REF["attention"]
    case = ref[name]
    model = _CASES.attention_model(keras, name)
    model.set_weights([_f32(w) for w in case["weights"]])
    got = model.predict([np.asarray(ref["q"], np.int32), np.asarray(ref["v"], np.int32)])
    got = got if isinstance(got, list) else [got]
    assert len(got) == len(case["outputs"])
    for g, want in zip(got, case["outputs"]):
        np.testing.assert_allclose(g, _f32(want), rtol=1e-5, atol=1e-6, err_msg=name)


def test_attention_mask_and_argument_checks():
    q = keras.Input((4, 3))
    with pytest.raises(ValueError, match="inputs list of length 2 or 3"):
        L.Attention()([q])
    with pytest.raises(ValueError, match="must be a list, namely \\[query_mask, value_mask\\]"):
        L.Attention()([q, q], mask=af.ones([1, 4], dtype=af.bool))
    qi = keras.Input((4,), dtype="int32")
    e = L.Embedding(5, 3, mask_zero=True)(qi)
    out = L.Attention()([e, e])
    assert out._keras_mask is e._keras_mask                 # the query's mask


# -- feature columns as a Keras layer -----------------------------------------------------------------

def test_dense_features_match_tf_keras():
    """Numeric, bucketized, embedding and indicator columns through DenseFeatures: TF's variable
    names, predictions, and an SGD step's loss and weights (the embedding table trains)."""
    case = REF["dense_features"]
    model = _CASES.dense_features_model(keras, af.feature_column)
    assert [w.name for w in model.weights] == case["names"]
    K.get_session().run(af.tables_initializer())
    model.set_weights([_f32(w) for w in case["weights"]])
    feats = {k: np.asarray(v, np.int64 if k == "c" else object if k == "d" else np.float32)
             for k, v in case["features"].items()}
    np.testing.assert_allclose(model.predict(feats), _f32(case["predict"]), rtol=1e-5, atol=1e-6)
    model.compile(keras.optimizers.SGD(0.1), "mse")
    np.testing.assert_allclose(model.train_on_batch(feats, np.ones((3, 2), np.float32)), case["train_on_batch"],
                               rtol=1e-5)
    for got, want in zip(model.get_weights(), case["weights_after"]):
        np.testing.assert_allclose(got, _f32(want), rtol=1e-5, atol=1e-6)


def test_dense_features_needs_a_dict_and_dense_columns():
    fc = af.feature_column
    with pytest.raises(ValueError, match="You can wrap a categorical column"):
        L.DenseFeatures([fc.categorical_column_with_identity("c", 3)])
    layer = L.DenseFeatures([fc.numeric_column("a")])
    with pytest.raises(ValueError, match="We expected a dictionary here"):
        layer(af.placeholder(af.float32, [None, 1]))
