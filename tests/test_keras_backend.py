"""af.keras.backend: sessions, variables, functions, the learning phase and the math wrappers."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from actorflow import keras
from actorflow.keras import backend as K


@pytest.fixture(autouse=True)
def _fresh():
    K.clear_session()
    yield
    K.clear_session()


def test_get_session_initializes_variables_and_values_round_trip():
    v = K.variable(np.arange(6).reshape(2, 3), name="v")
    w = af.Variable(af.ones([2]), name="plain")
    assert v in af.global_variables() and v.dtype.base_dtype == af.float32
    sess = K.get_session()
    assert K.get_session() is sess
    np.testing.assert_array_equal(K.get_value(v), np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(K.eval(w), [1, 1])
    K.set_value(v, np.ones((2, 3)))
    K.batch_set_value([(v, np.zeros((2, 3))), (w, [5, 6])])
    a, b = K.batch_get_value([v, w])
    np.testing.assert_array_equal(a, np.zeros((2, 3)))
    np.testing.assert_array_equal(b, [5, 6])
    with pytest.raises(ValueError, match="'v:0' has shape"):
        K.set_value(v, np.zeros(4))
    # a later variable is initialized by the next get_session; earlier values stay
    u = K.variable(3.0)
    assert K.get_value(u) == 3.0
    np.testing.assert_array_equal(K.get_value(w), [5, 6])


def test_get_session_uses_the_default_session():
    v = K.variable(1.0)
    with af.Session() as sess:
        assert K.get_session() is sess
        assert sess.run(v) == 1.0


def test_clear_session_resets_the_graph():
    g = af.get_default_graph()
    K.variable(1.0)
    K.get_session()
    K.clear_session()
    assert af.get_default_graph() is not g and not af.global_variables()


def test_function_learning_phase_and_updates():
    x = K.placeholder(shape=(None, 3))
    assert K.int_shape(x) == (None, 3) and K.ndim(x) == 2 and K.dtype(x) == "float32"
    phase = K.learning_phase()
    assert K.learning_phase() is phase and phase.dtype == af.bool
    y = K.in_train_phase(x * 2.0, x)
    counter = K.variable(0.0)
    f = K.function([x, phase], [y, K.sum(x)], updates=[(counter, counter + 1.0)])
    xv = np.ones((2, 3), np.float32)
    out, s = f([xv, True])
    np.testing.assert_array_equal(out, 2 * xv)
    assert s == 6.0
    out, _ = f([xv, False])
    np.testing.assert_array_equal(out, xv)
    assert K.get_value(counter) == 2.0
    with pytest.raises(ValueError, match="takes 2 inputs"):
        f([xv])
    K.set_learning_phase(1)
    assert K.learning_phase() == 1
    with pytest.raises(ValueError, match="0 or 1"):
        K.set_learning_phase(2)


def test_configuration():
    assert K.floatx() == "float32" and K.epsilon() == 1e-7 and K.image_data_format() == "channels_last"
    K.set_floatx("float64")
    try:
        assert K.variable(1.0).dtype.base_dtype == af.float64
    finally:
        K.set_floatx("float32")
    with pytest.raises(ValueError, match="floatx"):
        K.set_floatx("int8")


def test_math_wrappers_against_numpy():
    rng = np.random.RandomState(0)
    av = rng.rand(3, 4).astype(np.float32) + 0.1
    bv = rng.rand(4, 2).astype(np.float32)
    a, b = K.constant(av), K.constant(bv)
    checks = {
        "sum": (K.sum(a, axis=1), av.sum(1)), "mean": (K.mean(a, axis=0, keepdims=True), av.mean(0, keepdims=True)),
        "max": (K.max(a), av.max()), "min": (K.min(a, axis=-1), av.min(-1)), "prod": (K.prod(a, 1), av.prod(1)),
        "std": (K.std(a, 1), av.std(1)), "var": (K.var(a), av.var()),
        "square": (K.square(a), av ** 2), "sqrt": (K.sqrt(a - 0.5), np.sqrt(np.maximum(av - 0.5, 0))),
        "exp": (K.exp(a), np.exp(av)), "log": (K.log(a), np.log(av)), "abs": (K.abs(-a), av),
        "pow": (K.pow(a, 3.0), av ** 3), "clip": (K.clip(a, 0.3, 0.6), np.clip(av, 0.3, 0.6)),
        "dot": (K.dot(a, b), av @ bv), "dot3": (K.dot(K.reshape(a, (3, 1, 4)), b), (av @ bv)[:, None]),
        "concat": (K.concatenate([a, a], axis=0), np.concatenate([av, av])),
        "reshape": (K.reshape(a, (4, 3)), av.reshape(4, 3)), "transpose": (K.transpose(a), av.T),
        "permute": (K.permute_dimensions(K.reshape(a, (3, 2, 2)), (2, 0, 1)), av.reshape(3, 2, 2).transpose(2, 0, 1)),
        "expand": (K.expand_dims(a, 1), av[:, None]), "flatten": (K.flatten(a), av.ravel()),
        "batch_flatten": (K.batch_flatten(K.reshape(a, (3, 2, 2))), av),
        "relu": (K.relu(a - 0.5), np.maximum(av - 0.5, 0)),
        "relu_alpha": (K.relu(a - 0.5, alpha=0.1), np.where(av > 0.5, av - 0.5, 0.1 * (av - 0.5))),
        "softmax": (K.softmax(a), np.exp(av) / np.exp(av).sum(1, keepdims=True)),
        "sigmoid": (K.sigmoid(a), 1 / (1 + np.exp(-av))), "hard_sigmoid": (K.hard_sigmoid(a), 0.2 * av + 0.5),
        "tanh": (K.tanh(a), np.tanh(av)), "softplus": (K.softplus(a), np.log1p(np.exp(av))),
        "argmax": (K.argmax(a), av.argmax(-1)), "equal": (K.equal(a, a), np.ones((3, 4), bool)),
        "one_hot": (K.one_hot(K.constant([0, 2], dtype="int32"), 3), np.eye(3)[[0, 2]]),
        "repeat": (K.repeat(a, 2), np.repeat(av[:, None], 2, 1)),
        "stack": (K.stack([a, a]), np.stack([av, av])),
    }
    sess = K.get_session()
    got = sess.run({k: v[0] for k, v in checks.items()})
    for k, (_, ref) in checks.items():
        np.testing.assert_allclose(got[k], ref, rtol=1e-5, atol=1e-6, err_msg=k)


def test_crossentropies_against_numpy():
    rng = np.random.RandomState(1)
    p = rng.rand(5, 3).astype(np.float32)
    p /= p.sum(1, keepdims=True)
    labels = np.array([0, 2, 1, 1, 0])
    onehot = np.eye(3, dtype=np.float32)[labels]
    logits = rng.randn(5, 3).astype(np.float32)
    bp = rng.rand(5, 1).astype(np.float32)
    bt = (rng.rand(5, 1) > 0.5).astype(np.float32)
    sm = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    checks = {
        "cce": (K.categorical_crossentropy(K.constant(onehot), K.constant(p)), -np.log(p[range(5), labels])),
        "cce_logits": (K.categorical_crossentropy(K.constant(onehot), K.constant(logits), from_logits=True),
                       -np.log(sm[range(5), labels])),
        "scce": (K.sparse_categorical_crossentropy(K.constant(labels[:, None], dtype="int32"), K.constant(p)),
                 -np.log(p[range(5), labels])),
        "bce": (K.binary_crossentropy(K.constant(bt), K.constant(bp)),
                -(bt * np.log(bp) + (1 - bt) * np.log(1 - bp))),
    }
    got = K.get_session().run({k: v[0] for k, v in checks.items()})
    for k, (_, ref) in checks.items():
        np.testing.assert_allclose(got[k], ref, rtol=1e-4, atol=1e-5, err_msg=k)


def test_initializer_and_activation_lookups():
    assert isinstance(keras.initializers.get("glorot_uniform"), keras.initializers.GlorotUniform)
    rn = keras.initializers.get("RandomNormal")
    assert rn.stddev == 0.05
    ru = keras.initializers.RandomUniform()
    vals = K.get_session().run(ru([1000]))
    assert -0.05 <= vals.min() and vals.max() <= 0.05
    cfg = keras.initializers.serialize(keras.initializers.he_normal())
    assert cfg["class_name"] == "VarianceScaling" and cfg["config"]["scale"] == 2.0
    assert keras.initializers.deserialize(cfg).scale == 2.0
    with pytest.raises(ValueError, match="Unknown initializer"):
        keras.initializers.get("bogus")
    assert keras.activations.get(None) is keras.activations.linear
    assert keras.regularizers.get("l2").l2 == 0.01
    assert isinstance(keras.constraints.get("non_neg"), keras.constraints.NonNeg)


def test_learning_phase_first_asked_for_inside_a_loop_is_usable_outside():
    def body(i, acc):
        d = keras.layers.Dropout(0.5)(af.ones([4]))
        return i + 1, acc + af.reduce_sum(d)
    _, total = af.while_loop(lambda i, acc: i < 3, body, [af.constant(0), af.constant(0.0)])
    x = af.placeholder(af.float32, [None, 2])
    y = keras.layers.Dropout(0.5)(x)           # the same placeholder, made in the root frame
    sess = K.get_session()
    assert sess.run(total) == 12.0
    np.testing.assert_array_equal(sess.run(y, {x: np.ones((1, 2))}), np.ones((1, 2)))


def test_convolution_pooling_and_functional_wrappers():
    rng = np.random.RandomState(3)
    xv = rng.randn(1, 4, 4, 2).astype(np.float32)
    kv = rng.randn(3, 3, 2, 1).astype(np.float32)
    sv = rng.randn(1, 5, 2).astype(np.float32)
    k1 = rng.randn(2, 2, 1).astype(np.float32)
    x, k = K.constant(xv), K.constant(kv)
    outs = K.get_session().run({
        "conv": K.conv2d(x, k), "pool": K.pool2d(x, (2, 2), strides=(2, 2)),
        "avg": K.pool2d(x, (2, 2), strides=(2, 2), pool_mode="avg"),
        "causal": K.conv1d(K.constant(sv), K.constant(k1), padding="causal"),
        "map": K.map_fn(lambda r: r * 2.0, K.constant([1.0, 2.0])), "arange": K.arange(1, 7, 2),
        "foldl": K.foldl(lambda a, e: a + e, K.constant([1.0, 2.0, 3.0])),
        "pad": K.spatial_2d_padding(x), "tpad": K.temporal_padding(K.constant(sv), (1, 2)),
    })
    ref = np.array([[np.einsum("hwc,hwcf->f", xv[0, i:i + 3, j:j + 3], kv) for j in range(2)] for i in range(2)])
    np.testing.assert_allclose(outs["conv"][0], ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outs["pool"], xv.reshape(1, 2, 2, 2, 2, 2).max(axis=(2, 4)))
    np.testing.assert_allclose(outs["avg"], xv.reshape(1, 2, 2, 2, 2, 2).mean(axis=(2, 4)), rtol=1e-6)
    padded = np.pad(sv, [(0, 0), (1, 0), (0, 0)])
    causal = np.stack([np.einsum("kc,kcf->f", padded[0, t:t + 2], k1) for t in range(5)])
    np.testing.assert_allclose(outs["causal"][0], causal, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outs["map"], [2.0, 4.0])
    np.testing.assert_array_equal(outs["arange"], [1, 3, 5])
    assert outs["foldl"] == 6.0
    assert outs["pad"].shape == (1, 6, 6, 2) and outs["tpad"].shape == (1, 8, 2)
