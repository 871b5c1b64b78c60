"""af.layers (tf.compat.v1.layers): variable names and sharing, numerics against numpy, the
training switch, batch-norm moving averages through UPDATE_OPS, and end-to-end training."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
import actorflow.train as train
from actorflow import layers
from actorflow.graph import initializers as init
from actorflow.graph.variable_scope import AUTO_REUSE, variable_scope

pytestmark = pytest.mark.usefixtures("graph")

RNG = np.random.default_rng(5)


def var_names():
    return [v.op.name for v in af.global_variables()]


def init_and_run(fetches, feed=None):
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        return sess.run(fetches, feed)


def values_of(names):
    g = af.get_default_graph()
    return [g.get_tensor_by_name(n + ":0") for n in names]


# ---------------------------------------------------------------------------------------------
# dense
# ---------------------------------------------------------------------------------------------

def test_dense_names_and_shapes():
    x = af.placeholder(af.float32, [None, 5])
    h = layers.dense(x, 4, activation=af.nn.relu)
    y = layers.dense(h, 3, use_bias=False)
    named = layers.dense(x, 2, name="head")
    assert var_names() == ["dense/kernel", "dense/bias", "dense_1/kernel", "head/kernel", "head/bias"]
    assert h.shape.as_list() == [None, 4] and y.shape.as_list() == [None, 3]
    assert h.op.name == "dense/Relu" and named.op.name.startswith("head/")
    k = af.global_variables()[0]
    assert k.shape.as_list() == [5, 4] and k.trainable


def test_dense_numerics_and_reuse():
    xv = RNG.standard_normal((4, 3))
    x = af.constant(xv)
    y = layers.dense(x, 2, activation=af.nn.relu, bias_initializer=init.constant_initializer(0.5), name="fc")
    y2 = layers.dense(x, 2, name="fc", reuse=True)        # shares fc/kernel and fc/bias
    assert var_names() == ["fc/kernel", "fc/bias"]
    with variable_scope("auto", reuse=AUTO_REUSE):
        a1 = layers.dense(x, 2, name="d")
    with variable_scope("auto", reuse=AUTO_REUSE):
        a2 = layers.dense(x, 2, name="d")
    assert var_names() == ["fc/kernel", "fc/bias", "auto/d/kernel", "auto/d/bias"]
    yv, y2v, a1v, a2v, k, b = init_and_run([y, y2, a1, a2] + values_of(["fc/kernel", "fc/bias"]))
    np.testing.assert_allclose(b, [0.5, 0.5])
    np.testing.assert_allclose(y2v, xv @ k + b, rtol=1e-12)
    np.testing.assert_allclose(yv, np.maximum(xv @ k + b, 0), rtol=1e-12)
    np.testing.assert_allclose(a1v, a2v)
    assert np.abs(k).max() <= np.sqrt(6 / 5)               # glorot_uniform for a [3, 2] kernel


def test_dense_on_rank3_inputs():
    xv = RNG.standard_normal((2, 5, 3)).astype(np.float32)
    x = af.placeholder(af.float32, [None, 5, 3])
    y = layers.dense(x, 4)
    assert y.shape.as_list() == [None, 5, 4]
    yv, k, b = init_and_run([y] + values_of(["dense/kernel", "dense/bias"]), {x: xv})
    np.testing.assert_allclose(yv, xv @ k + b, rtol=1e-5, atol=1e-6)


def test_dense_errors():
    with pytest.raises(ValueError, match="last dimension of the inputs to `Dense` should be defined"):
        layers.dense(af.placeholder(af.float32, [None, None]), 3)
    with pytest.raises(ValueError, match="min_ndim=2"):
        layers.dense(af.placeholder(af.float32, [3]), 3)
    with pytest.raises(TypeError, match="floating-point"):
        layers.dense(af.placeholder(af.int32, [2, 3]), 3)
    layers.dense(af.placeholder(af.float32, [None, 3]), 2, name="fc")
    with pytest.raises(ValueError, match="Variable fc/kernel already exists"):
        layers.dense(af.placeholder(af.float32, [None, 3]), 2, name="fc")


def test_dense_regularizers():
    x = af.placeholder(af.float32, [None, 3])
    layers.dense(x, 2, kernel_regularizer=lambda w: af.reduce_sum(af.square(w)),
                 activity_regularizer=lambda y: af.reduce_sum(y))
    assert len(af.get_collection(af.GraphKeys.REGULARIZATION_LOSSES)) == 2


# ---------------------------------------------------------------------------------------------
# conv2d, pooling, flatten
# ---------------------------------------------------------------------------------------------

def _conv_ref(x, k, stride, pad):
    kh, kw = k.shape[:2]
    if pad == "same":
        ph, pw = kh - 1, kw - 1
        x = np.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)))
    n, h, w, _ = x.shape
    oh, ow = (h - kh) // stride + 1, (w - kw) // stride + 1
    out = np.zeros((n, oh, ow, k.shape[3]))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :]
            out[:, i, j, :] = np.tensordot(patch, k, axes=([1, 2, 3], [0, 1, 2]))
    return out


@pytest.mark.parametrize("padding,stride", [("valid", 1), ("same", 1), ("same", 2), ("VALID", 2)])
def test_conv2d_numerics(padding, stride):
    xv = RNG.standard_normal((2, 7, 6, 3))
    x = af.constant(xv)
    y = layers.conv2d(x, 4, (3, 2), strides=stride, padding=padding)
    assert var_names() == ["conv2d/kernel", "conv2d/bias"]
    yv, k, b = init_and_run([y] + values_of(["conv2d/kernel", "conv2d/bias"]))
    assert k.shape == (3, 2, 3, 4)
    np.testing.assert_allclose(yv, _conv_ref(xv, k, stride, padding.lower()) + b, rtol=1e-10, atol=1e-12)


def test_conv_pool_flatten_shapes_and_names():
    x = af.placeholder(af.float32, [None, 28, 28, 1])
    c1 = layers.conv2d(x, 8, 5, padding="same", activation=af.nn.relu)
    p1 = layers.max_pooling2d(c1, 2, 2)
    c2 = layers.conv2d(p1, 16, 3)
    p2 = layers.average_pooling2d(c2, (2, 2), (2, 2), padding="same")
    f = layers.flatten(p2)
    assert c1.shape.as_list() == [None, 28, 28, 8]
    assert p1.shape.as_list() == [None, 14, 14, 8]
    assert c2.shape.as_list() == [None, 12, 12, 16]
    assert p2.shape.as_list() == [None, 6, 6, 16]
    assert f.shape.as_list() == [None, 576]
    assert var_names() == ["conv2d/kernel", "conv2d/bias", "conv2d_1/kernel", "conv2d_1/bias"]
    assert p1.op.name.startswith("max_pooling2d/") and p2.op.name.startswith("average_pooling2d/")


def test_pooling_numerics_and_flatten():
    xv = RNG.standard_normal((2, 4, 6, 3))
    x = af.constant(xv)
    mp = layers.max_pooling2d(x, 2, 2)
    ap = layers.average_pooling2d(x, 2, (2, 3))
    fl = layers.flatten(x)
    fu = layers.flatten(af.placeholder(af.float64, [None, None, 3]))
    assert fu.shape.ndims == 2
    mpv, apv, flv = init_and_run([mp, ap, fl])
    np.testing.assert_allclose(mpv, xv.reshape(2, 2, 2, 3, 2, 3).max(axis=(2, 4)))
    want_avg = np.stack([xv[:, :, j * 3:j * 3 + 2, :] for j in range(2)], axis=2)   # [2, 4, 2, 2, 3]
    want_avg = want_avg.reshape(2, 2, 2, 2, 2, 3).mean(axis=(2, 4))
    np.testing.assert_allclose(apv, want_avg)
    np.testing.assert_allclose(flv, xv.reshape(2, -1))


def test_layer_argument_errors():
    x = af.placeholder(af.float32, [None, 8, 8, 3])
    with pytest.raises(ValueError, match="padding"):
        layers.conv2d(x, 2, 3, padding="full")
    with pytest.raises(ValueError, match="kernel_size"):
        layers.conv2d(x, 2, (3, 3, 3))
    with pytest.raises(ValueError, match="ndim=4"):
        layers.conv2d(af.placeholder(af.float32, [8, 3]), 2, 3)


# ---------------------------------------------------------------------------------------------
# dropout
# ---------------------------------------------------------------------------------------------

def test_dropout_static_training_flag():
    xv = np.ones((200, 50), np.float32)
    x = af.constant(xv)
    off = layers.dropout(x, 0.3)
    on = layers.dropout(x, 0.3, training=True, seed=1)
    offv, onv = init_and_run([off, on])
    np.testing.assert_array_equal(offv, xv)
    kept = onv != 0
    assert abs(kept.mean() - 0.7) < 0.02
    np.testing.assert_allclose(onv[kept], 1 / 0.7, rtol=1e-6)


def test_dropout_training_tensor():
    x = af.constant(np.ones((100, 100), np.float32))
    training = af.placeholder(af.bool, [])
    y = layers.dropout(x, rate=0.5, training=training)
    with af.Session() as sess:
        np.testing.assert_array_equal(sess.run(y, {training: False}), np.ones((100, 100)))
        on = sess.run(y, {training: True})
    assert abs((on == 0).mean() - 0.5) < 0.03
    g, = af.gradients(af.reduce_sum(y), x)
    with af.Session() as sess:
        np.testing.assert_array_equal(sess.run(g, {training: False}), np.ones((100, 100)))



def test_dropout_training_tensor_draws_only_when_training():
    # TF selects with a tf.cond: a run with training=False draws no mask, so the masks a session's
    # training runs see do not depend on the evaluations between them (ageron/handson-ml's
    # chapter 11 evaluates after each epoch of dropout training).
    af.set_random_seed(42)
    x = af.constant(np.ones((50, 40), np.float32))
    training = af.placeholder_with_default(False, shape=(), name="training")
    y = layers.dropout(x, rate=0.5, training=training)
    with af.Session() as sess:
        plain = [sess.run(y, {training: True}) for _ in range(2)]
    with af.Session() as sess:
        first = sess.run(y, {training: True})
        np.testing.assert_array_equal(sess.run(y), np.ones((50, 40)))
        second = sess.run(y, {training: True})
    np.testing.assert_array_equal(first, plain[0])
    np.testing.assert_array_equal(second, plain[1])
    assert not np.array_equal(plain[0], plain[1])

# ---------------------------------------------------------------------------------------------
# batch normalization
# ---------------------------------------------------------------------------------------------

def test_batch_norm_training_and_moving_averages():
    xv = RNG.standard_normal((16, 3)) * [1.0, 2.0, 3.0] + [0.5, -1.0, 2.0]
    x = af.constant(xv)
    y = layers.batch_normalization(x, momentum=0.9, epsilon=1e-3, training=True)
    assert var_names() == ["batch_normalization/gamma", "batch_normalization/beta",
                           "batch_normalization/moving_mean", "batch_normalization/moving_variance"]
    assert {v.op.name for v in af.trainable_variables()} == {"batch_normalization/gamma", "batch_normalization/beta"}
    updates = af.get_collection(af.GraphKeys.UPDATE_OPS)
    assert len(updates) == 2
    mm, mv = values_of(["batch_normalization/moving_mean", "batch_normalization/moving_variance"])
    mean, var = xv.mean(0), xv.var(0)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        yv = sess.run(y)
        np.testing.assert_allclose(yv, (xv - mean) / np.sqrt(var + 1e-3), rtol=1e-10)
        np.testing.assert_allclose(sess.run(mm), np.zeros(3))        # only the update ops move them
        sess.run(updates)
        sess.run(updates)
        want_mm = mean * (1 - 0.9 ** 2)
        want_mv = 0.9 ** 2 + var * (1 - 0.9 ** 2)
        np.testing.assert_allclose(sess.run([mm, mv]), [want_mm, want_mv], rtol=1e-10)


def test_batch_norm_inference_and_reuse():
    xv = RNG.standard_normal((5, 4, 4, 2))
    x = af.constant(xv)
    with variable_scope("net"):
        layers.batch_normalization(x, training=True, name="bn")
    with variable_scope("net", reuse=True):
        y = layers.batch_normalization(x, training=False, name="bn", epsilon=0.01)
    assert len(af.global_variables()) == 4
    assert len(af.get_collection(af.GraphKeys.UPDATE_OPS)) == 2      # inference adds no updates
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        mm, mv, gamma, beta = values_of(["net/bn/moving_mean", "net/bn/moving_variance", "net/bn/gamma",
                                         "net/bn/beta"])
        sess.run([af.assign(v, val) for v, val in zip(
            (mm, mv, gamma, beta),
            [np.array([1.0, -1.0]), np.array([4.0, 0.25]), np.array([2.0, 3.0]), np.array([0.1, 0.2])])])
        yv = sess.run(y)
    want = (xv - [1.0, -1.0]) / np.sqrt(np.array([4.0, 0.25]) + 0.01) * [2.0, 3.0] + [0.1, 0.2]
    np.testing.assert_allclose(yv, want, rtol=1e-10)


def test_batch_norm_channel_axis_1_and_training_tensor():
    xv = RNG.standard_normal((6, 3, 2, 2))
    x = af.constant(xv)
    training = af.placeholder(af.bool, [])
    y = layers.batch_normalization(x, axis=1, training=training, center=False, scale=False)
    assert var_names() == ["batch_normalization/moving_mean", "batch_normalization/moving_variance"]
    updates = af.get_collection(af.GraphKeys.UPDATE_OPS)
    mm = values_of(["batch_normalization/moving_mean"])[0]
    mean = xv.mean(axis=(0, 2, 3))
    var = xv.var(axis=(0, 2, 3))
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        yt, _ = sess.run([y, updates], {training: True})
        np.testing.assert_allclose(yt, (xv - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-3),
                                   rtol=1e-10)
        np.testing.assert_allclose(sess.run(mm), mean * 0.01, rtol=1e-10)
        yi, _ = sess.run([y, updates], {training: False})
        mv = 0.99 + 0.01 * var
        np.testing.assert_allclose(yi, (xv - mean[None, :, None, None] * 0.01) / np.sqrt(mv[None, :, None, None] + 1e-3),
                                   rtol=1e-10)
        np.testing.assert_allclose(sess.run(mm), mean * 0.01, rtol=1e-10)    # not training: no change


# ---------------------------------------------------------------------------------------------
# end to end
# ---------------------------------------------------------------------------------------------

def test_small_network_trains():
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((64, 4)).astype(np.float32)
    yv = (xv @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32) + 0.3).astype(np.float32)
    x = af.placeholder(af.float32, [None, 4])
    y = af.placeholder(af.float32, [None, 1])
    h = layers.dense(x, 16, activation=af.nn.relu, kernel_initializer=init.glorot_uniform_initializer(seed=1))
    out = layers.dense(h, 1, kernel_initializer=init.glorot_uniform_initializer(seed=2))
    loss = af.reduce_mean(af.square(af.subtract(out, y)))
    gs = train.get_or_create_global_step()
    step = train.AdamOptimizer(0.05).minimize(loss, global_step=gs)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        first = sess.run(loss, {x: xv, y: yv})
        for _ in range(150):
            sess.run(step, {x: xv, y: yv})
        last = sess.run(loss, {x: xv, y: yv})
        assert train.global_step(sess, gs) == 150
    assert last < first * 0.05
