"""af.contrib: tf.contrib's layers, rnn, seq2seq and framework names with TF 1.15's semantics.

Values are checked against numpy on the variables the layers created; variable names and
collections against what TF 1.15's contrib creates.
"""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from actorflow.contrib import framework as cf
from actorflow.contrib import layers as cl


@pytest.fixture(autouse=True)
def fresh_graph():
    af.reset_default_graph()
    af.set_random_seed(1234)          # initial values are the same every run: no flaky training checks
    yield


def _names(coll):
    return [v.op.name for v in af.get_collection(coll)]


def _run(fetches, feed=None):
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        return s.run(fetches, feed)


# ---------------------------------------------------------------------------------------------
# initializers and regularizers
# ---------------------------------------------------------------------------------------------

def test_xavier_uniform_limits_and_variance():
    w = af.get_variable("w", [200, 300], initializer=cl.xavier_initializer(seed=1))
    v = _run(w)
    limit = np.sqrt(6.0 / 500)
    assert np.abs(v).max() <= limit
    assert np.abs(v).max() > 0.95 * limit
    assert abs(v.std() - limit / np.sqrt(3)) < 0.03 * limit


def test_contrib_variance_scaling_is_not_core_variance_scaling():
    # contrib: factor 2, FAN_IN, truncated normal of stddev sqrt(1.3 * factor / n): the sample's
    # stddev is sqrt(factor / n) (core: scale 1 and stddev corrected by 0.8796).
    w = af.get_variable("w", [400, 500], initializer=cl.variance_scaling_initializer(seed=3))
    conv = af.get_variable("c", [3, 3, 40, 50], initializer=cl.variance_scaling_initializer(
        factor=1.0, mode="FAN_OUT", uniform=True, seed=4))
    xn = af.get_variable("x", [100, 300], initializer=cl.xavier_initializer(uniform=False, seed=5))
    v, c, x = _run([w, conv, xn])
    sd = np.sqrt(2.0 / 400)
    assert abs(v.std() - sd) < 0.02 * sd
    assert np.abs(v).max() <= 2 * np.sqrt(1.3) * sd + 1e-6
    limit = np.sqrt(3.0 / (3 * 3 * 50))
    assert np.abs(c).max() <= limit and np.abs(c).max() > 0.95 * limit
    assert abs(x.std() - np.sqrt(2.0 / 400)) < 0.04 * np.sqrt(2.0 / 400)


def test_initializer_argument_errors():
    with pytest.raises(TypeError, match="FAN_IN"):
        cl.variance_scaling_initializer(mode="fan_in")
    with pytest.raises(TypeError, match="non-floating"):
        cl.xavier_initializer(dtype=af.int32)


def test_regularizers_values():
    w = af.constant([[1.0, -2.0], [3.0, -4.0]])
    l1 = cl.l1_regularizer(0.5)(w)
    l2 = cl.l2_regularizer(0.1)(w)
    l12 = cl.l1_l2_regularizer(0.5, 0.1)(w)
    s = cl.sum_regularizer([cl.l1_regularizer(0.5), None, cl.l2_regularizer(0.1)])(w)
    assert cl.l2_regularizer(0.0)(w) is None
    assert cl.sum_regularizer([None]) is None
    a, b, c, d = _run([l1, l2, l12, s])
    np.testing.assert_allclose([a, b, c, d], [5.0, 1.5, 6.5, 6.5], rtol=1e-6)
    with pytest.raises(ValueError, match="integer"):
        cl.l2_regularizer(1)
    with pytest.raises(ValueError, match="less than 0"):
        cl.l1_regularizer(-0.1)


def test_apply_regularization_uses_weights_collection():
    w1 = af.Variable([[1.0, 2.0]], name="w1")
    w2 = af.Variable([3.0], name="w2")
    af.add_to_collection(af.GraphKeys.WEIGHTS, w1)
    af.add_to_collection(af.GraphKeys.WEIGHTS, w2)
    pen = cl.apply_regularization(cl.l2_regularizer(1.0))
    assert pen in af.get_collection(af.GraphKeys.REGULARIZATION_LOSSES)
    np.testing.assert_allclose(_run(pen), (1 + 4 + 9) / 2.0)
    af.reset_default_graph()
    with pytest.raises(ValueError, match="No weights"):
        cl.apply_regularization(cl.l2_regularizer(1.0))


# ---------------------------------------------------------------------------------------------
# fully_connected and convolutions
# ---------------------------------------------------------------------------------------------

def test_fully_connected_is_relu_dense_with_contrib_names():
    x = af.placeholder(af.float32, [None, 3])
    y = cl.fully_connected(x, 4, weights_regularizer=cl.l2_regularizer(0.01))
    y2 = cl.fully_connected(y, 2, activation_fn=None, variables_collections=["mine"], outputs_collections=["outs"])
    assert _names(af.GraphKeys.GLOBAL_VARIABLES) == ["fully_connected/weights", "fully_connected/biases",
                                                     "fully_connected_1/weights", "fully_connected_1/biases"]
    assert _names(af.GraphKeys.MODEL_VARIABLES) == _names(af.GraphKeys.GLOBAL_VARIABLES)
    assert _names(af.GraphKeys.TRAINABLE_VARIABLES) == _names(af.GraphKeys.GLOBAL_VARIABLES)
    assert _names("mine") == ["fully_connected_1/weights", "fully_connected_1/biases"]
    assert af.get_collection("outs") == [y2]
    assert len(af.get_collection(af.GraphKeys.REGULARIZATION_LOSSES)) == 1
    xv = np.random.RandomState(0).randn(5, 3).astype(np.float32)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        s.run(af.get_collection(af.GraphKeys.GLOBAL_VARIABLES)[1].assign([0.1, -0.2, 0.3, -0.4]))
        out, out2, w, b, w2, b2, reg = s.run([y, y2] + af.global_variables()
                                             + af.get_collection(af.GraphKeys.REGULARIZATION_LOSSES), {x: xv})
    np.testing.assert_allclose(out, np.maximum(xv @ w + b, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out2, out @ w2 + b2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(reg, 0.01 * (w ** 2).sum() / 2, rtol=1e-5)
    assert np.abs(w).max() <= np.sqrt(6.0 / 7)


def test_fully_connected_reuse_scope_normalizer_and_errors():
    x = af.placeholder(af.float32, [None, 3])
    a = cl.fully_connected(x, 4, scope="fc")
    b = cl.fully_connected(x, 4, scope="fc", reuse=True)
    n = cl.fully_connected(x, 4, normalizer_fn=cl.batch_norm, normalizer_params={"scale": True}, scope="bn_fc")
    assert _names(af.GraphKeys.GLOBAL_VARIABLES) == [
        "fc/weights", "fc/biases", "bn_fc/weights", "bn_fc/BatchNorm/beta", "bn_fc/BatchNorm/gamma",
        "bn_fc/BatchNorm/moving_mean", "bn_fc/BatchNorm/moving_variance"]
    xv = np.ones((2, 3), np.float32)
    av, bv, nv = _run([a, b, n], {x: xv})
    np.testing.assert_array_equal(av, bv)
    np.testing.assert_allclose(nv, 0.0, atol=1e-6)     # identical rows normalize to beta, then relu
    with pytest.raises(ValueError, match="min_ndim=2"):
        cl.fully_connected(af.placeholder(af.float32, [3]), 2)
    with pytest.raises(ValueError, match="num_outputs"):
        cl.fully_connected(x, 2.0)
    with pytest.raises(ValueError, match="already exists"):
        cl.fully_connected(x, 4, scope="fc")


def test_conv2d_pool_flatten_against_numpy():
    rng = np.random.RandomState(1)
    xv = rng.randn(2, 6, 6, 3).astype(np.float32)
    x = af.constant(xv)
    c = cl.conv2d(x, 4, [3, 3], padding="VALID", activation_fn=None)
    m = cl.max_pool2d(c, [2, 2])
    a = cl.avg_pool2d(c, 2, stride=2)
    f = cl.flatten(m)
    t = cl.conv2d_transpose(c, 2, 3, stride=2)
    assert _names(af.GraphKeys.MODEL_VARIABLES) == ["Conv/weights", "Conv/biases", "Conv2d_transpose/weights",
                                                    "Conv2d_transpose/biases"]
    assert m.op.name.startswith("MaxPool2D/") and a.op.name.startswith("AvgPool2D/")
    cv, mv, av, fv, tv, w = _run([c, m, a, f, t, af.global_variables()[0]])
    ref = np.zeros((2, 4, 4, 4), np.float32)
    for i in range(4):
        for j in range(4):
            ref[:, i, j, :] = np.tensordot(xv[:, i:i + 3, j:j + 3, :], w, axes=([1, 2, 3], [0, 1, 2]))
    np.testing.assert_allclose(cv, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mv, ref.reshape(2, 2, 2, 2, 2, 4).max(axis=(2, 4)), rtol=1e-5)
    np.testing.assert_allclose(av, ref.reshape(2, 2, 2, 2, 2, 4).mean(axis=(2, 4)), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(fv, mv.reshape(2, -1))
    assert tv.shape == (2, 8, 8, 2) and tv.min() >= 0
    with pytest.raises(ValueError, match="rank"):
        cl.conv2d(af.zeros([2, 3]), 4, 3)
    with pytest.raises(ValueError, match="at least 2"):
        cl.flatten(af.zeros([3]))
    with pytest.raises(ValueError, match="NCHW or NHWC"):
        cl.max_pool2d(c, 2, data_format="HWCN")


def test_convolution_1d_and_stack_repeat_scopes():
    x = af.zeros([2, 8, 3])
    y = cl.convolution(x, 5, 3)
    assert y.shape.as_list() == [2, 8, 5]
    z = cl.stack(af.zeros([2, 4]), cl.fully_connected, [8, 6], scope="fc")
    r = cl.repeat(af.zeros([2, 4, 4, 2]), 2, cl.conv2d, 2, [3, 3], scope="conv1")
    assert z.shape.as_list() == [2, 6] and r.shape.as_list() == [2, 4, 4, 2]
    names = _names(af.GraphKeys.GLOBAL_VARIABLES)
    assert names[2:] == ["fc/fc_1/weights", "fc/fc_1/biases", "fc/fc_2/weights", "fc/fc_2/biases",
                         "conv1/conv1_1/weights", "conv1/conv1_1/biases", "conv1/conv1_2/weights",
                         "conv1/conv1_2/biases"]


# ---------------------------------------------------------------------------------------------
# batch_norm, layer_norm, dropout, bias_add, one_hot_encoding, embed_sequence
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,fused,unbiased", [((6, 3), None, True), ((2, 3, 2, 3), None, True),
                                                  ((2, 3, 2, 3), False, False), ((4, 2, 3), None, False)])
def test_batch_norm_training_and_moving_averages(shape, fused, unbiased):
    xv = np.random.RandomState(2).randn(*shape).astype(np.float32) * 2 + 1
    x = af.constant(xv)
    y = cl.batch_norm(x, decay=0.9, fused=fused)
    assert _names(af.GraphKeys.GLOBAL_VARIABLES) == ["BatchNorm/beta", "BatchNorm/moving_mean",
                                                     "BatchNorm/moving_variance"]
    assert _names(af.GraphKeys.TRAINABLE_VARIABLES) == ["BatchNorm/beta"]
    updates = af.get_collection(af.GraphKeys.UPDATE_OPS)
    assert len(updates) == 2
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        out, _ = s.run([y, updates])
        mm, mv = s.run(af.global_variables()[1:])
    axes = tuple(range(len(shape) - 1))
    mean, var = xv.mean(axes), xv.var(axes)
    eps = 1e-3
    np.testing.assert_allclose(out, (xv - mean) / np.sqrt(var + eps), rtol=1e-4, atol=1e-4)
    n = xv.size / shape[-1]
    tracked = var * n / (n - 1) if unbiased else var
    np.testing.assert_allclose(mm, 0.1 * mean, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(mv, 0.9 + 0.1 * tracked, rtol=1e-4)


def test_batch_norm_inference_updates_none_and_errors():
    xv = np.random.RandomState(3).randn(5, 4).astype(np.float32)
    x = af.placeholder(af.float32, [None, 4])
    train = af.placeholder_with_default(True, [])
    y = cl.batch_norm(x, is_training=train, updates_collections=None, scale=True,
                      param_initializers={"gamma": af.constant_initializer(2.0)})
    assert af.get_collection(af.GraphKeys.UPDATE_OPS) == []
    y_inf = cl.batch_norm(x, is_training=False, scope="BatchNorm", reuse=True)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        out = s.run(y, {x: xv})
        mm = s.run(af.global_variables()[2])
        np.testing.assert_allclose(mm, 0.001 * xv.mean(0), rtol=1e-4, atol=1e-7)
        inf = s.run(y, {x: xv, train: False})
        inf2 = s.run(y_inf, {x: xv})
        mm, mv = s.run(af.global_variables()[2:])
    np.testing.assert_allclose(out, 2 * (xv - xv.mean(0)) / np.sqrt(xv.var(0) + 1e-3), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(inf, 2 * (xv - mm) / np.sqrt(mv + 1e-3), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(inf2, (xv - mm) / np.sqrt(mv + 1e-3), rtol=1e-4, atol=1e-4)
    with pytest.raises(NotImplementedError, match="renorm"):
        cl.batch_norm(x, renorm=True)
    with pytest.raises(ValueError, match="NCHW or NHWC"):
        cl.batch_norm(x, data_format="NC")


def test_layer_norm_against_numpy():
    xv = np.random.RandomState(4).randn(3, 4, 5).astype(np.float32)
    y = cl.layer_norm(af.constant(xv), variables_collections={"gamma": ["g"]})
    assert _names(af.GraphKeys.MODEL_VARIABLES) == ["LayerNorm/beta", "LayerNorm/gamma"]
    assert _names("g") == ["LayerNorm/gamma"]
    assert af.get_collection(af.GraphKeys.GLOBAL_VARIABLES)[0].shape.as_list() == [5]
    out = _run(y)
    m = xv.mean(axis=(1, 2), keepdims=True)
    v = xv.var(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(out, (xv - m) / np.sqrt(v + 1e-12), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="must be < rank"):
        cl.layer_norm(af.constant(xv), begin_norm_axis=3)


def test_dropout_bias_add_one_hot_embed_sequence():
    x = af.ones([200, 50])
    d = cl.dropout(x, keep_prob=0.8)
    d_off = cl.dropout(x, keep_prob=0.8, is_training=False)
    b = cl.bias_add(af.zeros([2, 3]), initializer=af.constant_initializer(0.5))
    oh = cl.one_hot_encoding(af.constant([0, 2]), 3)
    ids = af.constant([[1, 2], [0, 1]])
    e = cl.embed_sequence(ids, vocab_size=4, embed_dim=3)
    assert _names(af.GraphKeys.MODEL_VARIABLES) == ["BiasAdd/biases", "EmbedSequence/embeddings"]
    dv, dov, bv, ohv, ev, emb = _run([d, d_off, b, oh, e, af.global_variables()[1]])
    assert set(np.unique(dv)) <= {0.0, np.float32(1 / 0.8)}
    assert abs((dv > 0).mean() - 0.8) < 0.02
    np.testing.assert_array_equal(dov, 1.0)
    np.testing.assert_array_equal(bv, 0.5)
    np.testing.assert_array_equal(ohv, [[1, 0, 0], [0, 0, 1]])
    np.testing.assert_array_equal(ev, emb[[[1, 2], [0, 1]]])
    with pytest.raises(ValueError, match="vocab size"):
        cl.embed_sequence(ids)


# ---------------------------------------------------------------------------------------------
# optimize_loss: training works
# ---------------------------------------------------------------------------------------------

def _tiny_regression():
    rng = np.random.RandomState(5)
    xv = rng.randn(32, 4).astype(np.float32)
    yv = (xv @ rng.randn(4, 1) + 0.3).astype(np.float32)
    x = af.placeholder(af.float32, [None, 4])
    y = af.placeholder(af.float32, [None, 1])
    h = cl.fully_connected(x, 8, activation_fn=af.tanh)
    p = cl.fully_connected(h, 1, activation_fn=None)
    loss = af.reduce_mean(af.square(p - y))
    return x, y, xv, yv, loss


@pytest.mark.parametrize("opt", ["SGD", "Adam", "Adagrad", "Momentum", "RMSProp"])
def test_optimize_loss_trains(opt):
    x, y, xv, yv, loss = _tiny_regression()
    gs = af.train.get_or_create_global_step()
    train = cl.optimize_loss(loss, gs, learning_rate=0.05, optimizer=opt, clip_gradients=5.0)
    assert "OptimizeLoss/learning_rate" in _names(af.GraphKeys.GLOBAL_VARIABLES)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        first = s.run(loss, {x: xv, y: yv})
        for _ in range(30):
            s.run(train, {x: xv, y: yv})
        last = s.run(loss, {x: xv, y: yv})
        assert s.run(gs) == 30
    assert last < 0.7 * first


def test_optimize_loss_errors():
    x, y, xv, yv, loss = _tiny_regression()
    with pytest.raises(ValueError, match="Optimizer name should be one of"):
        cl.optimize_loss(loss, None, 0.1, "Adamax")
    with pytest.raises(ValueError, match="Learning rate should be 0d Tensor or float"):
        cl.optimize_loss(loss, None, 1, "SGD")
    with pytest.raises(ValueError, match="scalar"):
        cl.optimize_loss(af.zeros([2]), None, 0.1, "SGD")
    with pytest.raises(ValueError, match="Summaries should be one of"):
        cl.optimize_loss(loss, None, 0.1, "SGD", summaries=["nope"])


# ---------------------------------------------------------------------------------------------
# framework: arg_scope, variables
# ---------------------------------------------------------------------------------------------

def test_arg_scope_sets_layer_defaults_and_nests():
    x = af.zeros([2, 4, 4, 3])
    with cf.arg_scope([cl.conv2d, cl.fully_connected], activation_fn=None,
                      weights_regularizer=cl.l2_regularizer(0.1)) as outer:
        with cf.arg_scope([cl.conv2d], padding="VALID"):
            c = cl.conv2d(x, 2, 3)
        c2 = cl.conv2d(x, 2, 3)
        f = cl.fully_connected(af.zeros([2, 3]), 2, activation_fn=af.nn.sigmoid)
    with cf.arg_scope(outer):
        g = cl.fully_connected(af.zeros([2, 3]), 2)
    assert c.shape.as_list() == [2, 2, 2, 2] and c2.shape.as_list() == [2, 4, 4, 2]
    assert c.op.type == "BiasAdd" and f.op.type == "Sigmoid" and g.op.type == "BiasAdd"
    assert len(af.get_collection(af.GraphKeys.REGULARIZATION_LOSSES)) == 4
    assert cf.has_arg_scope(cl.batch_norm) and "is_training" in cf.arg_scoped_arguments(cl.batch_norm)
    with pytest.raises(ValueError, match="not decorated with @add_arg_scope"):
        with cf.arg_scope([af.nn.relu], name="x"):
            pass

    @cf.add_arg_scope
    def f2(a, b=1):
        return a + b
    with cf.arg_scope([f2], b=10):
        assert f2(1) == 11 and f2(1, b=2) == 3
    assert f2(1) == 2


def test_framework_variables_and_restore(tmp_path):
    with af.variable_scope("net"):
        cl.fully_connected(af.zeros([2, 3]), 4, scope="fc1")
        cl.fully_connected(af.zeros([2, 4]), 2, scope="logits")
    gs = cf.get_or_create_global_step()
    assert cf.get_global_step() is gs
    assert [v.op.name for v in cf.get_model_variables()] == ["net/fc1/weights", "net/fc1/biases",
                                                             "net/logits/weights", "net/logits/biases"]
    assert [v.op.name for v in cf.get_variables("net/fc1")] == ["net/fc1/weights", "net/fc1/biases"]
    assert [v.op.name for v in cf.get_variables_by_name("biases")] == ["net/fc1/biases", "net/logits/biases"]
    restore = cf.get_variables_to_restore(exclude=["net/logits", "global_step"])
    assert [v.op.name for v in restore] == ["net/fc1/weights", "net/fc1/biases"]
    assert cf.get_unique_variable("net/fc1/weights").op.name == "net/fc1/weights"
    path = str(tmp_path / "model.ckpt")
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        saved = s.run(restore)
        af.train.Saver().save(s, path)
    init_fn = cf.assign_from_checkpoint_fn(path, restore)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        init_fn(s)
        for a, b in zip(saved, s.run(restore)):
            np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------------------------
# rnn
# ---------------------------------------------------------------------------------------------

def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


def _np_lstm(xs, w, b, n, forget_bias=1.0, peep=None, clip=None):
    c = np.zeros((xs[0].shape[0], n), np.float32)
    h = np.zeros_like(c)
    outs = []
    for x in xs:
        i, j, f, o = np.split(np.concatenate([x, h], 1) @ w + b, 4, axis=1)
        if peep is None:
            c = c * _sigmoid(f + forget_bias) + _sigmoid(i) * np.tanh(j)
        else:
            wi, wf, wo = peep
            c = c * _sigmoid(f + forget_bias + wf * c) + _sigmoid(i + wi * c) * np.tanh(j)
        if clip is not None:
            c = np.clip(c, -clip, clip)
        h = np.tanh(c) * _sigmoid(o if peep is None else o + peep[2] * c)
        outs.append(h)
    return outs, c, h


def test_contrib_rnn_exports_the_core_cells():
    from actorflow.contrib import rnn as cr
    for name in ("BasicRNNCell", "BasicLSTMCell", "LSTMCell", "GRUCell", "MultiRNNCell", "DropoutWrapper",
                 "ResidualWrapper", "DeviceWrapper", "LSTMStateTuple", "RNNCell"):
        assert getattr(cr, name) is getattr(af.nn.rnn_cell, name)
    assert cr.static_rnn is af.nn.static_rnn and cr.static_bidirectional_rnn is af.nn.static_bidirectional_rnn
    assert af.contrib.rnn is cr


@pytest.mark.parametrize("peephole,clip", [(False, None), (True, 0.5)])
def test_lstm_block_cell_matches_numpy_and_lstm_cell_names(peephole, clip):
    from actorflow.contrib import rnn as cr
    rng = np.random.RandomState(6)
    xv = rng.randn(4, 3, 2).astype(np.float32)
    x = af.placeholder(af.float32, [4, 3, 2])
    cell = cr.LSTMBlockCell(5, use_peephole=peephole, cell_clip=clip)
    out, state = af.nn.dynamic_rnn(cell, x, dtype=af.float32)
    names = [v.op.name for v in af.global_variables()]
    expect = ["rnn/lstm_cell/kernel", "rnn/lstm_cell/bias"]
    if peephole:
        expect += ["rnn/lstm_cell/w_f_diag", "rnn/lstm_cell/w_i_diag", "rnn/lstm_cell/w_o_diag"]
    assert names == expect
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        s.run(af.global_variables()[1].assign(rng.randn(20).astype(np.float32)))
        ov, (cv, hv), *vs = s.run([out, state] + af.global_variables(), {x: xv})
    peep = (vs[3], vs[2], vs[4]) if peephole else None
    outs, c, h = _np_lstm([xv[:, t] for t in range(3)], vs[0], vs[1], 5, peep=peep, clip=clip)
    np.testing.assert_allclose(ov, np.stack(outs, 1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(cv, c, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(hv, h, rtol=1e-4, atol=1e-5)


def test_layer_norm_basic_lstm_cell_against_numpy():
    from actorflow.contrib import rnn as cr
    rng = np.random.RandomState(7)
    xv = rng.randn(3, 2).astype(np.float32)
    cell = cr.LayerNormBasicLSTMCell(4, norm_gain=1.5, norm_shift=0.1)
    c0 = rng.randn(3, 4).astype(np.float32)
    h0 = rng.randn(3, 4).astype(np.float32)
    out, (c1, h1) = cell(af.constant(xv), cr.LSTMStateTuple(af.constant(c0), af.constant(h0)))
    names = [v.op.name for v in af.global_variables()]
    assert names[0] == "layer_norm_basic_lstm_cell/kernel" and "layer_norm_basic_lstm_cell/state/beta" in names
    assert len(names) == 11
    ov, cv, kernel = _run([out, c1, af.global_variables()[0]])

    def ln(z):
        m, v = z.mean(1, keepdims=True), z.var(1, keepdims=True)
        return (z - m) / np.sqrt(v + 1e-12) * 1.5 + 0.1
    i, j, f, o = [ln(p) for p in np.split(np.concatenate([xv, h0], 1) @ kernel, 4, axis=1)]
    c = ln(c0 * _sigmoid(f + 1.0) + _sigmoid(i) * np.tanh(j))
    np.testing.assert_allclose(cv, c, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ov, np.tanh(c) * _sigmoid(o), rtol=1e-4, atol=1e-5)


def test_projection_wrappers_against_numpy():
    from actorflow.contrib import rnn as cr
    rng = np.random.RandomState(8)
    xs = [rng.randn(2, 3).astype(np.float32) for _ in range(3)]
    cell = cr.OutputProjectionWrapper(cr.InputProjectionWrapper(cr.BasicRNNCell(4), 5), 6)
    outs, state = cr.static_rnn(cell, [af.constant(x) for x in xs], dtype=af.float32)
    names = [v.op.name for v in af.global_variables()]
    assert sorted(names) == sorted([
        "rnn/output_projection_wrapper/kernel", "rnn/output_projection_wrapper/bias",
        "rnn/output_projection_wrapper/input_projection_wrapper/kernel",
        "rnn/output_projection_wrapper/input_projection_wrapper/bias",
        "rnn/output_projection_wrapper/input_projection_wrapper/basic_rnn_cell/kernel",
        "rnn/output_projection_wrapper/input_projection_wrapper/basic_rnn_cell/bias"])
    assert len(cell.variables) == 6
    ov, values = _run([outs, af.global_variables()])
    byname = dict(zip(names, values))
    p = "rnn/output_projection_wrapper/"
    h = np.zeros((2, 4), np.float32)
    for t, x in enumerate(xs):
        proj = x @ byname[p + "input_projection_wrapper/kernel"] + byname[p + "input_projection_wrapper/bias"]
        h = np.tanh(np.concatenate([proj, h], 1) @ byname[p + "input_projection_wrapper/basic_rnn_cell/kernel"]
                    + byname[p + "input_projection_wrapper/basic_rnn_cell/bias"])
        np.testing.assert_allclose(ov[t], h @ byname[p + "kernel"] + byname[p + "bias"], rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="output_size"):
        cr.OutputProjectionWrapper(cr.BasicRNNCell(2), 0)


def test_output_projection_wrapper_makes_its_variables_after_the_cells():
    # TF 1.x's wrapper builds its _Linear on the first call, after the cell has made its own
    # variables: under a graph seed the cell's kernel gets the first draw, as it would unwrapped.
    from actorflow.contrib import rnn as cr
    x = np.random.RandomState(3).randn(2, 5, 3).astype(np.float32)
    af.set_random_seed(7)
    cr_out, _ = af.nn.dynamic_rnn(cr.OutputProjectionWrapper(cr.BasicRNNCell(4), 2), af.constant(x),
                                  dtype=af.float32)
    p = "rnn/output_projection_wrapper/"
    assert [v.op.name for v in af.global_variables()] == [
        p + "basic_rnn_cell/kernel", p + "basic_rnn_cell/bias", p + "kernel", p + "bias"]
    wrapped = _run(af.global_variables()[0])
    af.reset_default_graph()
    af.set_random_seed(7)
    af.nn.dynamic_rnn(cr.BasicRNNCell(4), af.constant(x), dtype=af.float32)
    np.testing.assert_array_equal(wrapped, _run(af.global_variables()[0]))


def test_stack_bidirectional_dynamic_rnn_layers_and_training():
    from actorflow.contrib import rnn as cr
    rng = np.random.RandomState(9)
    xv = rng.randn(4, 5, 3).astype(np.float32)
    target = np.cumsum(xv[:, :, :1], axis=1)
    x = af.placeholder(af.float32, [4, 5, 3])
    lengths = af.constant([5, 3, 4, 2])
    out, sfw, sbw = cr.stack_bidirectional_dynamic_rnn([cr.LSTMBlockCell(4), cr.GRUBlockCell(3)],
                                                       [cr.LSTMBlockCell(4), cr.GRUBlockCell(3)], x,
                                                       sequence_length=lengths, dtype=af.float32)
    assert out.shape.as_list() == [4, 5, 6] and len(sfw) == 2 and len(sbw) == 2
    names = [v.op.name for v in af.global_variables()]
    assert names[0] == "stack_bidirectional_rnn/cell_0/bidirectional_rnn/fw/lstm_cell/kernel"
    assert "stack_bidirectional_rnn/cell_1/bidirectional_rnn/bw/gru_cell/candidate/bias" in names
    pred = cl.fully_connected(out, 1, activation_fn=None)
    mask = af.expand_dims(af.sequence_mask(lengths, 5, dtype=af.float32), -1)
    loss = af.reduce_sum(af.square(pred - target) * mask) / af.reduce_sum(mask)
    train = af.train.AdamOptimizer(0.05).minimize(loss)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        ov = s.run(out, {x: xv})
        first = s.run(loss, {x: xv})
        for _ in range(40):
            s.run(train, {x: xv})
        last = s.run(loss, {x: xv})
    np.testing.assert_array_equal(ov[3, 2:], 0.0)        # past its length a row's outputs are zero
    assert last < 0.5 * first
    with pytest.raises(ValueError, match="at least one bw cell"):
        cr.stack_bidirectional_dynamic_rnn([cr.GRUBlockCell(2)], [], x, dtype=af.float32)
    with pytest.raises(ValueError, match="same depth"):
        cr.stack_bidirectional_dynamic_rnn([cr.GRUBlockCell(2)], [cr.GRUBlockCell(2)] * 2, x, dtype=af.float32)


def test_stack_bidirectional_rnn_static_and_embedding_wrapper():
    from actorflow.contrib import rnn as cr
    ids = [af.constant([1, 3]), af.constant([2, 0])]
    cell = cr.EmbeddingWrapper(cr.GRUCell(3), embedding_classes=4, embedding_size=2)
    outs, state = cr.static_rnn(cell, ids, dtype=af.float32)
    assert [v.op.name for v in af.global_variables()][0] == "rnn/embedding_wrapper/embedding"
    emb = af.global_variables()[0]
    xs = [af.constant(np.random.RandomState(1).randn(2, 3).astype(np.float32)) for _ in range(3)]
    souts, sfw, sbw = cr.stack_bidirectional_rnn([cr.BasicRNNCell(2)], [cr.BasicRNNCell(2)], xs, dtype=af.float32)
    assert len(souts) == 3 and souts[0].shape.as_list() == [2, 4]
    ev, ov, so = _run([emb, outs, souts])
    assert np.abs(ev).max() <= np.sqrt(3) and ov[0].shape == (2, 3)


# ---------------------------------------------------------------------------------------------
# seq2seq and legacy_seq2seq
# ---------------------------------------------------------------------------------------------

def _np_xent(logits, targets):
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -np.take_along_axis(logp, targets[..., None], -1)[..., 0]


def _seq_data():
    rng = np.random.RandomState(10)
    logits = rng.randn(3, 4, 5).astype(np.float32)
    targets = rng.randint(0, 5, (3, 4)).astype(np.int32)
    weights = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [0.5, 1, 1, 1]], np.float32)
    weights[1] = 0      # an all-zero row: div_no_nan gives 0 there
    return logits, targets, weights


@pytest.mark.parametrize("flags", [
    dict(), dict(average_across_timesteps=False), dict(average_across_batch=False),
    dict(average_across_timesteps=False, average_across_batch=False),
    dict(average_across_timesteps=False, average_across_batch=False, sum_over_timesteps=True, sum_over_batch=True),
    dict(average_across_timesteps=False, average_across_batch=False, sum_over_timesteps=True),
    dict(average_across_timesteps=False, average_across_batch=False, sum_over_batch=True)])
def test_seq2seq_sequence_loss_against_numpy(flags):
    from actorflow.contrib import seq2seq
    logits, targets, weights = _seq_data()
    loss = seq2seq.sequence_loss(af.constant(logits), af.constant(targets), af.constant(weights), **flags)
    ce = _np_xent(logits, targets) * weights
    at = flags.get("average_across_timesteps", True)
    ab = flags.get("average_across_batch", True)
    st, sb = flags.get("sum_over_timesteps", False), flags.get("sum_over_batch", False)

    def div(a, b):
        return np.where(b == 0, 0.0, a / np.where(b == 0, 1, b))
    if at and ab:
        ref = ce.sum() / weights.sum()
    elif st and sb:
        ref = ce.sum() / np.count_nonzero(weights)
    elif at or ab:
        ax = 0 if ab else 1
        ref = div(ce.sum(ax), weights.sum(ax))
    elif st or sb:
        ax = 0 if sb else 1
        ref = div(ce.sum(ax), np.count_nonzero(weights, axis=ax))
    else:
        ref = ce
    np.testing.assert_allclose(_run(loss), ref, rtol=1e-5, atol=1e-6)


def test_seq2seq_sequence_loss_errors_and_custom_loss():
    from actorflow.contrib import seq2seq
    logits, targets, weights = _seq_data()
    with pytest.raises(ValueError, match="Logits must be"):
        seq2seq.sequence_loss(af.constant(logits[0]), af.constant(targets), af.constant(weights))
    with pytest.raises(ValueError, match="Targets must be"):
        seq2seq.sequence_loss(af.constant(logits), af.constant(targets[0]), af.constant(weights))
    with pytest.raises(ValueError, match="cannot be set to True at same time"):
        seq2seq.sequence_loss(af.constant(logits), af.constant(targets), af.constant(weights),
                              sum_over_timesteps=True)
    seen = {}

    def half(labels, logits):
        seen["shapes"] = (labels.shape.as_list(), logits.shape.as_list())
        return 0.5 * af.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    loss = seq2seq.sequence_loss(af.constant(logits), af.constant(targets), af.constant(weights),
                                 softmax_loss_function=half)
    assert seen["shapes"] == ([12], [12, 5])
    np.testing.assert_allclose(_run(loss), 0.5 * (_np_xent(logits, targets) * weights).sum() / weights.sum(),
                               rtol=1e-5)


def test_legacy_sequence_losses_against_numpy():
    from actorflow.contrib import legacy_seq2seq as ls
    logits, targets, weights = _seq_data()
    lg = [af.constant(logits[:, t]) for t in range(4)]
    tg = [af.constant(targets[:, t]) for t in range(4)]
    wt = [af.constant(weights[:, t]) for t in range(4)]
    by_ex = ls.sequence_loss_by_example(lg, tg, wt)
    by_ex_sum = ls.sequence_loss_by_example(lg, tg, wt, average_across_timesteps=False)
    total = ls.sequence_loss(lg, tg, wt)
    total_sum = ls.sequence_loss(lg, tg, wt, average_across_batch=False)
    ce = (_np_xent(logits, targets) * weights).sum(1)
    per = ce / (weights.sum(1) + 1e-12)
    a, b, c, d = _run([by_ex, by_ex_sum, total, total_sum])
    np.testing.assert_allclose(a, per, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b, ce, rtol=1e-5)
    np.testing.assert_allclose(c, per.sum() / 3, rtol=1e-5)
    np.testing.assert_allclose(d, per.sum(), rtol=1e-5)
    with pytest.raises(ValueError, match="must be the same"):
        ls.sequence_loss(lg, tg[:3], wt)


def test_rnn_decoder_loop_function_and_basic_seq2seq_trains():
    from actorflow.contrib import legacy_seq2seq as ls
    from actorflow.contrib import rnn as cr
    rng = np.random.RandomState(11)
    enc = [af.placeholder(af.float32, [8, 3]) for _ in range(4)]
    dec = [af.placeholder(af.float32, [8, 3]) for _ in range(3)]
    cell = cr.OutputProjectionWrapper(cr.GRUCell(6), 3)
    outs, state = ls.basic_rnn_seq2seq(enc, dec, cell)
    names = [v.op.name for v in af.global_variables()]
    assert "basic_rnn_seq2seq/rnn/output_projection_wrapper/gru_cell/gates/kernel" in names
    assert "basic_rnn_seq2seq/rnn_decoder/output_projection_wrapper/gru_cell/gates/kernel" in names
    assert len(names) == 12
    # Decode with the previous output fed back: one more set of ops, no new variables.
    with af.variable_scope("basic_rnn_seq2seq", reuse=True):
        fed, _ = ls.rnn_decoder(dec, state, cell, loop_function=lambda prev, i: prev)
    assert len(af.global_variables()) == 12
    xv = [rng.randn(8, 3).astype(np.float32) for _ in range(4)]
    feed = dict(zip(enc, xv))
    feed.update(zip(dec, [np.zeros((8, 3), np.float32)] + xv[:2]))
    loss = af.add_n([af.reduce_mean(af.square(o - af.constant(x))) for o, x in zip(outs, xv[:3])]) / 3
    train = af.train.AdamOptimizer(0.03).minimize(loss)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        fv = s.run(fed, feed)
        first = s.run(loss, feed)
        for _ in range(40):
            s.run(train, feed)
        last = s.run(loss, feed)
    assert len(fv) == 3 and fv[0].shape == (8, 3)
    assert last < 0.6 * first


def test_embedding_seq2seq_with_buckets_shares_variables():
    from actorflow.contrib import legacy_seq2seq as ls
    from actorflow.contrib import rnn as cr
    enc = [af.placeholder(af.int32, [None]) for _ in range(4)]
    dec = [af.placeholder(af.int32, [None]) for _ in range(3)]
    w = [af.ones([2]) for _ in range(3)]

    def s2s(e, d):
        return ls.embedding_rnn_seq2seq(e, d, cr.BasicLSTMCell(5), 7, 8, 4)
    outs, losses = ls.model_with_buckets(enc, dec, dec, w, [(2, 2), (4, 3)], s2s)
    names = [v.op.name for v in af.global_variables()]
    assert names == [
        "embedding_rnn_seq2seq/rnn/embedding_wrapper/embedding",
        "embedding_rnn_seq2seq/rnn/embedding_wrapper/basic_lstm_cell/kernel",
        "embedding_rnn_seq2seq/rnn/embedding_wrapper/basic_lstm_cell/bias",
        "embedding_rnn_seq2seq/embedding_rnn_decoder/embedding",
        "embedding_rnn_seq2seq/embedding_rnn_decoder/rnn_decoder/output_projection_wrapper/basic_lstm_cell/kernel",
        "embedding_rnn_seq2seq/embedding_rnn_decoder/rnn_decoder/output_projection_wrapper/basic_lstm_cell/bias",
        "embedding_rnn_seq2seq/embedding_rnn_decoder/rnn_decoder/output_projection_wrapper/kernel",
        "embedding_rnn_seq2seq/embedding_rnn_decoder/rnn_decoder/output_projection_wrapper/bias"]
    assert len(outs) == 2 and len(outs[0]) == 2 and outs[1][0].shape.as_list() == [None, 8]
    feed = {p: np.array([1, 2]) for p in enc + dec}
    lv = _run(losses, feed)
    assert all(np.isfinite(lv)) and all(v > 0 for v in lv)
    with pytest.raises(ValueError, match="last bucket"):
        ls.model_with_buckets(enc[:1], dec, dec, w, [(2, 2)], s2s)


# ---------------------------------------------------------------------------------------------
# training.bucket_by_sequence_length
# ---------------------------------------------------------------------------------------------

@pytest.mark.timeout(120)
@pytest.mark.parametrize("smaller", [True, False])
def test_bucket_by_sequence_length_batches_by_bucket(smaller):
    from actorflow.contrib import training
    lengths_v = [1, 5, 2, 7, 3, 6, 1, 4, 8, 2]
    i = af.train.range_input_producer(10, num_epochs=1, shuffle=False).dequeue()
    length = af.gather(af.constant(lengths_v), i)
    seq = af.fill(af.reshape(length, [1]), i + 1)
    lens, (s, idx) = training.bucket_by_sequence_length(length, [seq, i], batch_size=2, bucket_boundaries=[3, 6],
                                                        dynamic_pad=True, allow_smaller_final_batch=smaller)
    assert s.shape.as_list() == [None if smaller else 2, None]
    opts = af.RunOptions(timeout_in_ms=30000)
    got = []
    with af.Session() as sess:
        sess.run([af.global_variables_initializer(), af.local_variables_initializer()])
        coord = af.train.Coordinator()
        threads = af.train.start_queue_runners(sess, coord)
        with pytest.raises(af.errors.OutOfRangeError):
            while True:
                got.append(sess.run([lens, s, idx], options=opts))
        coord.request_stop()
        coord.join(threads)
    seen = []
    for lv, sv, iv in got:
        buckets = {int(np.searchsorted([3, 6], n, side="right")) for n in lv}
        assert len(buckets) == 1                       # one bucket per batch
        assert sv.shape == (len(lv), max(lv))          # padded to the longest example
        for n, row, k in zip(lv, sv, iv):
            assert n == lengths_v[k]
            np.testing.assert_array_equal(row, [k + 1] * n + [0] * (max(lv) - n))
        seen += list(iv)
    if smaller:
        assert sorted(seen) == list(range(10))
    else:
        assert all(len(g[0]) == 2 for g in got) and len(seen) == 8   # buckets of 4, 3 and 3 examples: two left over
    with pytest.raises(ValueError, match="increasing"):
        training.bucket_by_sequence_length(length, [seq], 2, [6, 3], dynamic_pad=True)
    with pytest.raises(ValueError, match="fully defined"):
        training.bucket_by_sequence_length(length, [seq], 2, [3, 6])


def test_slim_names_build_a_small_convnet():
    slim = af.contrib.slim
    assert slim.conv2d is cl.conv2d and slim.arg_scope is cf.arg_scope and slim.losses is af.losses
    images = af.placeholder(af.float32, [None, 8, 8, 1])
    labels = af.placeholder(af.int64, [None])
    with slim.arg_scope([slim.conv2d, slim.fully_connected], weights_regularizer=slim.l2_regularizer(1e-4),
                        normalizer_fn=slim.batch_norm, normalizer_params={"is_training": True, "decay": 0.9}):
        net = slim.conv2d(images, 4, [3, 3], scope="conv1")
        net = slim.max_pool2d(net, [2, 2], scope="pool1")
        net = slim.flatten(net)
        logits = slim.fully_connected(net, 3, activation_fn=None, normalizer_fn=None, scope="logits")
    slim.losses.sparse_softmax_cross_entropy(labels, logits)
    total = slim.losses.get_total_loss()
    train = cl.optimize_loss(total, slim.get_or_create_global_step(), 0.1, "Adam")
    assert [v.op.name for v in slim.get_model_variables()] == [
        "conv1/weights", "conv1/BatchNorm/beta", "conv1/BatchNorm/moving_mean", "conv1/BatchNorm/moving_variance",
        "logits/weights", "logits/biases"]
    rng = np.random.RandomState(12)
    xv = rng.randn(16, 8, 8, 1).astype(np.float32)
    yv = (xv.mean(axis=(1, 2, 3)) > 0).astype(np.int64)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        first = s.run(total, {images: xv, labels: yv})
        for _ in range(30):
            s.run(train, {images: xv, labels: yv})
        last = s.run(total, {images: xv, labels: yv})
        mm = s.run(af.global_variables("conv1/BatchNorm/moving_mean")[0])
    assert last < 0.5 * first
    assert np.abs(mm).sum() > 0          # optimize_loss ran the batch-norm updates


def test_attention_decoder_against_numpy():
    from actorflow.contrib import legacy_seq2seq as ls
    from actorflow.contrib import rnn as cr
    rng = np.random.RandomState(13)
    states = rng.randn(2, 5, 3).astype(np.float32)
    inputs = [rng.randn(2, 4).astype(np.float32) for _ in range(2)]
    h0 = rng.randn(2, 6).astype(np.float32)
    outs, state = ls.attention_decoder([af.constant(x) for x in inputs], af.constant(h0), af.constant(states),
                                       cr.BasicRNNCell(6), output_size=7)
    names = [v.op.name for v in af.global_variables()]
    assert names == ["attention_decoder/AttnW_0", "attention_decoder/AttnV_0", "attention_decoder/kernel",
                     "attention_decoder/bias", "attention_decoder/basic_rnn_cell/kernel",
                     "attention_decoder/basic_rnn_cell/bias", "attention_decoder/Attention_0/kernel",
                     "attention_decoder/Attention_0/bias", "attention_decoder/AttnOutputProjection/kernel",
                     "attention_decoder/AttnOutputProjection/bias"]
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        for v in af.global_variables():               # nonzero biases, so that each one is checked
            if v.op.name.endswith("bias"):
                s.run(v.assign(rng.randn(*v.shape.as_list()).astype(np.float32)))
        ov, sv, vals = s.run([outs, state, af.global_variables()])
    p = dict(zip(names, vals))
    keys = states @ p["attention_decoder/AttnW_0"][0, 0]
    h, attn = h0, np.zeros((2, 3), np.float32)
    for t, x in enumerate(inputs):
        xin = np.concatenate([x, attn], 1) @ p["attention_decoder/kernel"] + p["attention_decoder/bias"]
        h = np.tanh(np.concatenate([xin, h], 1) @ p["attention_decoder/basic_rnn_cell/kernel"]
                    + p["attention_decoder/basic_rnn_cell/bias"])
        q = h @ p["attention_decoder/Attention_0/kernel"] + p["attention_decoder/Attention_0/bias"]
        score = (p["attention_decoder/AttnV_0"] * np.tanh(keys + q[:, None, :])).sum(-1)
        w = np.exp(score - score.max(1, keepdims=True))
        w /= w.sum(1, keepdims=True)
        attn = (w[:, :, None] * states).sum(1)
        out = (np.concatenate([h, attn], 1) @ p["attention_decoder/AttnOutputProjection/kernel"]
               + p["attention_decoder/AttnOutputProjection/bias"])
        np.testing.assert_allclose(ov[t], out, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(sv, h, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="at least 1 input"):
        ls.attention_decoder([], af.constant(h0), af.constant(states), cr.BasicRNNCell(6))


def test_embedding_attention_seq2seq_trains_a_copy_task():
    from actorflow.contrib import legacy_seq2seq as ls
    from actorflow.contrib import rnn as cr
    rng = np.random.RandomState(14)
    seqs = rng.randint(2, 6, (16, 3))
    enc = [af.placeholder(af.int32, [None]) for _ in range(3)]
    dec = [af.placeholder(af.int32, [None]) for _ in range(3)]
    outs, _ = ls.embedding_attention_seq2seq(enc, dec, cr.GRUCell(16), 6, 6, 8, num_heads=2)
    names = [v.op.name for v in af.global_variables()]
    assert "embedding_attention_seq2seq/embedding_attention_decoder/attention_decoder/AttnW_1" in names
    loss = ls.sequence_loss(outs, dec[1:] + [af.zeros_like(dec[0])], [af.ones([16])] * 2 + [af.zeros([16])])
    train = af.train.AdamOptimizer(0.05).minimize(loss)
    feed = {p: seqs[:, k] for k, p in enumerate(enc)}
    feed.update({p: np.concatenate([np.ones((16, 1), int), seqs[:, :2]], 1)[:, k] for k, p in enumerate(dec)})
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        first = s.run(loss, feed)
        for _ in range(40):
            s.run(train, feed)
        last = s.run(loss, feed)
    assert last < 0.5 * first


def test_contrib_metrics_take_predictions_first():
    from actorflow.contrib import metrics as cm
    preds = af.placeholder(af.int64, [None])
    labels = af.placeholder(af.int64, [None])
    acc, acc_up = cm.streaming_accuracy(preds, labels)
    prec, prec_up = cm.streaming_precision(af.cast(preds, af.bool), af.cast(labels, af.bool))
    values, updates = cm.aggregate_metric_map({"mse": cm.streaming_mean_squared_error(
        af.cast(preds, af.float32), af.cast(labels, af.float32))})
    once = cm.accuracy(preds, labels, weights=af.constant([1.0, 0.0, 1.0, 1.0]))
    batches = [([1, 0, 1, 1], [1, 1, 1, 0]), ([0, 0, 1, 1], [0, 0, 1, 1])]
    with af.Session() as s:
        s.run(af.local_variables_initializer())
        for p, lab in batches:
            s.run([acc_up, prec_up, updates["mse"]], {preds: p, labels: lab})
        a, pr, mse = s.run([acc, prec, values["mse"]])
        o = s.run(once, {preds: [1, 0, 1, 1], labels: [1, 1, 1, 0]})
    p = np.concatenate([b[0] for b in batches])
    lab = np.concatenate([b[1] for b in batches])
    np.testing.assert_allclose(a, (p == lab).mean())
    np.testing.assert_allclose(pr, ((p == 1) & (lab == 1)).sum() / (p == 1).sum())
    np.testing.assert_allclose(mse, ((p - lab) ** 2).mean())
    np.testing.assert_allclose(o, 2 / 3)
    with pytest.raises(ValueError, match="should match"):
        cm.accuracy(preds, af.cast(labels, af.int32))


def test_assign_from_values_and_framework_aliases():
    with af.variable_scope("m"):
        w = af.get_variable("w", [2, 2])
        af.get_variable("w2", [3])
    fn = cf.assign_from_values_fn({"m/w": np.arange(4.0)})
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        fn(s)
        np.testing.assert_array_equal(s.run(w), [[0, 1], [2, 3]])
    with pytest.raises(ValueError, match="wasn't found"):
        cf.assign_from_values({"nope": np.zeros(1)})
    assert cf.nest.flatten((1, (2, 3))) == [1, 2, 3]
    assert cf.list_variables is af.train.list_variables


def test_hparams_parse_types_and_errors():
    from actorflow.contrib.training import HParams
    hp = HParams(learning_rate=0.1, num_layers=2, use_bn=False, act="relu", sizes=[64, 32])
    assert hp.learning_rate == 0.1 and "sizes" in hp and "nope" not in hp
    hp.parse("learning_rate=0.3, num_layers=4,use_bn=true,act=tanh,sizes=[8 16,4]")
    assert hp.values() == {"learning_rate": 0.3, "num_layers": 4, "use_bn": True, "act": "tanh",
                           "sizes": [8, 16, 4]}
    hp.set_hparam("learning_rate", 1)              # an int is a valid float
    assert hp.learning_rate == 1.0 and isinstance(hp.learning_rate, float)
    hp.parse_json('{"num_layers": 3}')
    assert hp.num_layers == 3 and HParams(**hp.values()).to_json(sort_keys=True) == hp.to_json(sort_keys=True)
    assert hp.get("nope", 5) == 5 and hp.get("act") == "tanh"
    for bad, msg in [("num_layers=1.5", "Could not parse"), ("nope=1", "Unknown hyperparameter"),
                     ("act=a,act=b", "Multiple assignments"), ("sizes[0]=[1]", "list to a list index"),
                     ("=3", "Malformed")]:
        with pytest.raises(ValueError, match=msg):
            hp.parse(bad)
    with pytest.raises(ValueError, match="Could not cast"):
        hp.set_hparam("num_layers", 2.5)
    with pytest.raises(ValueError, match="Must pass a list"):
        hp.set_hparam("sizes", 3)
    with pytest.raises(ValueError, match="reserved"):
        HParams(values=1)
    with pytest.raises(KeyError):
        hp.set_hparam("missing", 1)


def test_separable_conv2d_against_depthwise_then_pointwise():
    rng = np.random.RandomState(15)
    xv = rng.randn(2, 5, 5, 3).astype(np.float32)
    x = af.constant(xv)
    y = cl.separable_conv2d(x, 4, [3, 3], depth_multiplier=2, activation_fn=None, padding="VALID")
    d = cl.separable_conv2d(x, None, 3, activation_fn=None, padding="VALID")
    assert _names(af.GraphKeys.MODEL_VARIABLES) == [
        "SeparableConv2d/depthwise_weights", "SeparableConv2d/pointwise_weights", "SeparableConv2d/biases",
        "SeparableConv2d_1/depthwise_weights", "SeparableConv2d_1/biases"]
    yv, dv, dw, pw, b, dw1 = _run([y, d] + af.global_variables()[:3] + af.global_variables()[3:4])
    assert yv.shape == (2, 3, 3, 4) and dv.shape == (2, 3, 3, 3)
    dep = np.zeros((2, 3, 3, 3, 2), np.float32)
    for i in range(3):
        for j in range(3):
            dep[:, i, j] = np.einsum("bhwc,hwcm->bcm", xv[:, i:i + 3, j:j + 3], dw)
    ref = dep.reshape(2, 3, 3, 6) @ pw[0, 0] + b
    np.testing.assert_allclose(yv, ref, rtol=1e-4, atol=1e-5)
    dep1 = np.zeros((2, 3, 3, 3), np.float32)
    for i in range(3):
        for j in range(3):
            dep1[:, i, j] = np.einsum("bhwc,hwc->bc", xv[:, i:i + 3, j:j + 3], dw1[..., 0])
    np.testing.assert_allclose(dv, dep1, rtol=1e-4, atol=1e-5)


def test_lstm_block_fused_cell_matches_lstm_block_cell():
    from actorflow.contrib import rnn as cr
    rng = np.random.RandomState(16)
    xv = rng.randn(5, 3, 2).astype(np.float32)
    x = af.constant(xv)
    lengths = af.constant([5, 2, 4])
    fused = cr.LSTMBlockFusedCell(4, use_peephole=True, cell_clip=0.8)
    out, (c, h) = fused(x, dtype=af.float32, sequence_length=lengths)
    out2, (c2, h2) = fused(x, dtype=af.float32)                 # a second call reuses the variables
    names = [v.op.name for v in af.global_variables()]
    assert names == ["lstm_fused_cell/kernel", "lstm_fused_cell/bias", "lstm_fused_cell/w_f_diag",
                     "lstm_fused_cell/w_i_diag", "lstm_fused_cell/w_o_diag"]
    with af.variable_scope("ref"):
        ref_out, (rc, rh) = af.nn.dynamic_rnn(cr.LSTMBlockCell(4, use_peephole=True, cell_clip=0.8), x,
                                              sequence_length=lengths, dtype=af.float32, time_major=True)
    copies = [r.assign(v) for r, v in zip(af.global_variables()[5:], af.global_variables()[:5])]
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        s.run(copies)
        ov, cv, hv, o2v, rov, rcv, rhv = s.run([out, c, h, out2, ref_out, rc, rh])
    np.testing.assert_allclose(ov, rov, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cv, rcv, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(hv, rhv, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ov[2:, 1], 0.0)
    np.testing.assert_allclose(hv[1], ov[1, 1], rtol=1e-6)      # the final state is at the last valid step
    np.testing.assert_allclose(o2v[:2, 1], ov[:2, 1], rtol=1e-5)
    with pytest.raises(ValueError, match="3-D"):
        fused(af.zeros([3, 2]), dtype=af.float32)


def test_dynamic_decode_training_helper_matches_dynamic_rnn():
    from actorflow.contrib import rnn as cr
    from actorflow.contrib import seq2seq
    rng = np.random.RandomState(17)
    x = af.constant(rng.randn(3, 4, 2).astype(np.float32))
    lengths = af.constant([4, 2, 3])
    cell = cr.GRUCell(5)
    proj = af.layers.Dense(6)
    helper = seq2seq.TrainingHelper(x, lengths)
    decoder = seq2seq.BasicDecoder(cell, helper, cell.zero_state(3, af.float32), output_layer=proj)
    out, state, out_len = seq2seq.dynamic_decode(decoder, impute_finished=True)
    assert [v.op.name for v in af.global_variables()] == [
        "decoder/gru_cell/gates/kernel", "decoder/gru_cell/gates/bias", "decoder/gru_cell/candidate/kernel",
        "decoder/gru_cell/candidate/bias", "decoder/dense/kernel", "decoder/dense/bias"]
    with af.variable_scope("decoder", reuse=True):
        ref, ref_state = af.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=af.float32)
    loss = seq2seq.sequence_loss(out.rnn_output, af.zeros([3, 4], af.int32), af.sequence_mask(lengths, 4, af.float32))
    train = af.train.AdamOptimizer(0.1).minimize(loss)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        ov, sid, sv, lv, rv, rsv = s.run([out.rnn_output, out.sample_id, state, out_len, ref, ref_state])
        w, b = s.run(af.global_variables()[4:6])
        first = s.run(loss)
        for _ in range(20):
            s.run(train)
        last = s.run(loss)
    mask = np.arange(4)[None, :] < np.array([4, 2, 3])[:, None]
    np.testing.assert_allclose(ov, np.where(mask[..., None], rv @ w + b, 0.0), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(sid, np.where(mask, (rv @ w + b).argmax(-1), 0))
    np.testing.assert_allclose(sv, rsv, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(lv, [4, 2, 3])
    assert last < 0.5 * first


def test_dynamic_decode_greedy_reproduced_by_teacher_forcing():
    from actorflow.contrib import rnn as cr
    from actorflow.contrib import seq2seq
    emb = af.get_variable("emb", [6, 3])
    cell = cr.BasicLSTMCell(4)
    proj = af.layers.Dense(6)
    init = cell.zero_state(2, af.float32)
    greedy = seq2seq.BasicDecoder(cell, seq2seq.GreedyEmbeddingHelper(emb, af.fill([2], 1), 0), init,
                                  output_layer=proj)
    out, _, lengths = seq2seq.dynamic_decode(greedy, maximum_iterations=6, output_time_major=True)
    ids = out.sample_id                                                   # [time, batch]
    fed = af.concat([af.fill([1, 2], 1), ids[:-1]], 0)
    steps = af.fill([2], af.shape(ids)[0])
    forced = seq2seq.BasicDecoder(cell, seq2seq.TrainingHelper(af.nn.embedding_lookup(emb, fed), steps,
                                                               time_major=True), init, output_layer=proj)
    out2, _, _ = seq2seq.dynamic_decode(forced, output_time_major=True, scope="decoder")
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        s.run(af.global_variables()[0].assign(np.random.RandomState(18).randn(6, 3).astype(np.float32)))
        iv, ov, lv, o2v = s.run([ids, out.rnn_output, lengths, out2.rnn_output])
    assert iv.shape[0] <= 6
    np.testing.assert_array_equal(iv, ov.argmax(-1))
    np.testing.assert_allclose(ov, o2v, rtol=1e-4, atol=1e-5)
    for b in range(2):                      # a row ends at its first end token (0), or at 6 steps
        stop = list(iv[:, b]).index(0) + 1 if 0 in iv[:, b] else 6
        assert lv[b] == stop
    with pytest.raises(TypeError, match="Decoder"):
        seq2seq.dynamic_decode(object())


def test_attention_wrapper_luong_step_against_numpy():
    from actorflow.contrib import rnn as cr
    from actorflow.contrib import seq2seq
    rng = np.random.RandomState(19)
    mem_v = rng.randn(2, 5, 3).astype(np.float32)
    x_v = rng.randn(2, 2).astype(np.float32)
    mech = seq2seq.LuongAttention(4, af.constant(mem_v), memory_sequence_length=af.constant([5, 3]))
    cell = seq2seq.AttentionWrapper(cr.BasicRNNCell(4), mech, attention_layer_size=6)
    state0 = cell.zero_state(2, af.float32)
    out, state1 = cell(af.constant(x_v), state0)
    out2, state2 = cell(af.constant(x_v), state1)
    assert [v.op.name for v in af.global_variables()] == [
        "memory_layer/kernel", "attention_wrapper/basic_rnn_cell/kernel", "attention_wrapper/basic_rnn_cell/bias",
        "attention_wrapper/attention_layer/kernel"]
    assert cell.output_size == 6 and isinstance(state1, seq2seq.AttentionWrapperState)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        o1, o2, al2, t2, (wm, wc, bc, wa) = s.run([out, out2, state2.alignments, state2.time, af.global_variables()])
    keys = mem_v * (np.arange(5)[None, :, None] < np.array([5, 3])[:, None, None])
    values = keys.copy()
    keys = keys @ wm
    h, attn = np.zeros((2, 4), np.float32), np.zeros((2, 6), np.float32)
    for ref_out in (o1, o2):
        h = np.tanh(np.concatenate([x_v, attn, h], 1) @ wc + bc)
        score = np.einsum("bd,btd->bt", h, keys)
        score[1, 3:] = -np.inf
        w = np.exp(score - score.max(1, keepdims=True))
        w /= w.sum(1, keepdims=True)
        attn = np.concatenate([h, np.einsum("bt,btd->bd", w, values)], 1) @ wa
        np.testing.assert_allclose(ref_out, attn, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(al2, w, rtol=1e-4, atol=1e-6)
    assert t2 == 2 and np.all(al2[1, 3:] == 0)
    with pytest.raises(TypeError, match="AttentionWrapperState"):
        cell(af.constant(x_v), state0.cell_state)


def test_bahdanau_attention_decoder_trains():
    from actorflow.contrib import rnn as cr
    from actorflow.contrib import seq2seq
    rng = np.random.RandomState(20)
    src = rng.randn(8, 5, 3).astype(np.float32)
    target = src[:, ::-1, :1].copy()[:, :4]                       # read the memory backwards
    dec_in = np.concatenate([np.zeros((8, 1, 1), np.float32), target[:, :-1]], 1)
    mech = seq2seq.BahdanauAttention(8, af.constant(src), memory_sequence_length=af.fill([8], 5), normalize=True)
    cell = seq2seq.AttentionWrapper(cr.GRUCell(8), mech, attention_layer_size=8, alignment_history=True)
    dec = seq2seq.BasicDecoder(cell, seq2seq.TrainingHelper(af.constant(dec_in), af.fill([8], 4)),
                               cell.zero_state(8, af.float32), output_layer=af.layers.Dense(1))
    out, state, _ = seq2seq.dynamic_decode(dec, impute_finished=True)
    names = [v.op.name for v in af.global_variables()]
    assert "decoder/attention_wrapper/bahdanau_attention/query_layer/kernel" in names
    assert "decoder/attention_wrapper/bahdanau_attention/attention_v" in names
    history = state.alignment_history.stack()
    loss = af.reduce_mean(af.square(out.rnn_output - target))
    train = af.train.AdamOptimizer(0.03).minimize(loss)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        first, hv = s.run([loss, history])
        for _ in range(60):
            s.run(train)
        last = s.run(loss)
    assert hv.shape == (4, 8, 5)
    np.testing.assert_allclose(hv.sum(-1), 1.0, rtol=1e-5)
    assert last < 0.5 * first


def test_tile_batch_and_sample_embedding_helper():
    from actorflow.contrib import rnn as cr
    from actorflow.contrib import seq2seq
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    tiled = seq2seq.tile_batch((af.constant(a), af.constant([1, 2])), 3)
    assert tiled[0].shape.as_list() == [6, 3]
    emb = af.get_variable("emb", [5, 3])
    cell = cr.GRUCell(4)
    helper = seq2seq.SampleEmbeddingHelper(emb, af.fill([4], 1), 0, softmax_temperature=0.5, seed=3)
    out, _, lengths = seq2seq.dynamic_decode(seq2seq.BasicDecoder(cell, helper, cell.zero_state(4, af.float32),
                                                                  output_layer=af.layers.Dense(5)),
                                             maximum_iterations=7)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        tv, iv, lv = s.run([tiled, out.sample_id, lengths])
    np.testing.assert_array_equal(tv[0], np.repeat(a, 3, axis=0))
    np.testing.assert_array_equal(tv[1], [1, 1, 1, 2, 2, 2])
    assert iv.min() >= 0 and iv.max() < 5 and iv.shape[1] <= 7
    for b in range(4):
        row = list(iv[b, :lv[b]])
        assert (0 not in row[:-1]) and (row[-1] == 0 or lv[b] == 7)


def test_assign_from_checkpoint_and_filter_variables(tmp_path):
    with af.Graph().as_default():
        a = af.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="net/a")
        b = af.Variable([7.0], name="net/b")
        opt_slot = af.Variable([0.0], name="net/a/Adam")
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            path = af.train.Saver([a, b]).save(sess, str(tmp_path / "m.ckpt"))
    with af.Graph().as_default():
        a2 = af.Variable(np.zeros((2, 3), np.float32), name="net/a")
        b2 = af.Variable([0.0], name="net/b")
        extra = af.Variable([1.0], name="head/w")
        assert cf.filter_variables([a2, b2, extra], include_patterns=["net"], exclude_patterns=["/b"]) == [a2]
        assert cf.filter_variables([a2, extra], include_patterns=["w"], reg_search=False) == []
        with pytest.raises(ValueError, match=r"missing variable \[head/w\]"):
            cf.assign_from_checkpoint(path, [a2, b2, extra])
        op, feed = cf.assign_from_checkpoint(path, [a2, b2, extra], ignore_missing_vars=True)
        renamed_op, renamed_feed = cf.assign_from_checkpoint(path, {"net/b": extra})
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            sess.run(op, feed)
            sess.run(renamed_op, renamed_feed)
            np.testing.assert_array_equal(sess.run(a2), np.arange(6).reshape(2, 3))
            assert sess.run(b2).tolist() == [7.0] and sess.run(extra).tolist() == [7.0]
    assert opt_slot is not None


def test_slim_utils_end_points_and_checks():
    """slim.utils as slim's networks use it: outputs collected under their scopes' aliases and read back
    as the end-points dict, the dimension checks, the conditionals."""
    slim = af.contrib.slim
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [2, 8, 8, 3])
        with af.variable_scope("net"), slim.arg_scope([slim.conv2d], outputs_collections="net_end_points"):
            y = slim.conv2d(x, 4, [3, 3], scope="conv1")
            z = slim.conv2d(y, 5, [3, 3], scope="conv2")
        pooled = slim.utils.collect_named_outputs("net_end_points", "net/pool/", af.reduce_mean(z, [1, 2]))
        points = slim.utils.convert_collection_to_dict("net_end_points")
        assert list(points) == ["net/conv1", "net/conv2", "net/pool"] and points["net/pool"] is pooled
        assert slim.utils.gather_tensors_aliases([y, z]) == ["net/conv1", "net/conv2"]
        assert slim.utils.get_tensor_aliases(x) == ["Placeholder"]
        slim.utils.convert_collection_to_dict("net_end_points", clear_collection=True)
        assert af.get_collection("net_end_points") == []
        assert slim.utils.last_dimension(z.get_shape(), min_rank=4) == 5
        assert af.contrib.layers.utils.channel_dimension(x.shape, "NCHW") == 8
        with pytest.raises(ValueError, match="rank of shape must be at least 4"):
            slim.utils.last_dimension(af.TensorShape([3]), min_rank=4)
        with pytest.raises(ValueError, match="dimension -1 of shape must be known"):
            slim.utils.last_dimension(af.TensorShape([3, None]))
        assert slim.utils.two_element_tuple(3) == (3, 3) and slim.utils.two_element_tuple([2, 5]) == (2, 5)
        with pytest.raises(ValueError, match="2 elements"):
            slim.utils.two_element_tuple([1, 2, 3])
        assert slim.utils.n_positive_integers(3, 2) == (2, 2, 2)
        with pytest.raises(ValueError, match="3 positive integers"):
            slim.utils.n_positive_integers(3, [1, 0, 2])
        assert slim.utils.get_variable_collections({"weights": ["w"]}, "weights") == ["w"]
        assert slim.utils.static_cond(True, lambda: 1, lambda: 2) == 1
        assert slim.utils.smart_cond(af.constant(False), lambda: 1, lambda: 2) == 2
        flag = af.placeholder(af.bool, [])
        picked = slim.utils.smart_cond(flag, lambda: af.constant(1), lambda: af.constant(2))
        with af.Session() as sess:
            assert sess.run(picked, {flag: True}) == 1 and sess.run(picked, {flag: False}) == 2


def test_slim_learning_trains_with_update_ops_clipping_and_checkpoints(tmp_path):
    slim = af.contrib.slim
    rng = np.random.RandomState(0)
    xv = rng.randn(64, 4).astype(np.float32)

    def build():
        x = af.constant(xv)
        y = af.reduce_sum(x, 1, keepdims=True)
        net = slim.fully_connected(x, 8, normalizer_fn=slim.batch_norm, normalizer_params={"is_training": True},
                                   scope="fc1")
        pred = slim.fully_connected(net, 1, activation_fn=None, scope="fc2")
        return af.losses.mean_squared_error(y, pred)

    with af.Graph().as_default():
        af.set_random_seed(1)
        loss = build()
        train_op = slim.learning.create_train_op(loss, af.train.GradientDescentOptimizer(0.05),
                                                 clip_gradient_norm=1.0,
                                                 gradient_multipliers={"fc2/biases": 0.0})
        assert train_op in af.get_collection(af.GraphKeys.TRAIN_OP)
        first = None
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            mean0 = sess.run("fc1/BatchNorm/moving_mean:0")
            bias0 = sess.run("fc2/biases:0")
            first = sess.run(train_op)
            assert not np.allclose(sess.run("fc1/BatchNorm/moving_mean:0"), mean0)    # the update ops ran
            np.testing.assert_array_equal(sess.run("fc2/biases:0"), bias0)              # multiplier 0
            assert sess.run(af.train.get_global_step()) == 1
        final = slim.learning.train(train_op, str(tmp_path), number_of_steps=30, save_summaries_secs=0,
                                    save_interval_secs=0, log_every_n_steps=10)
    assert final < first
    assert af.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-30")
    with af.Graph().as_default():                      # a second run resumes at step 30, one step more
        loss = build()
        train_op = slim.learning.create_train_op(loss, af.train.GradientDescentOptimizer(0.05))
        slim.learning.train(train_op, str(tmp_path), number_of_steps=30, save_summaries_secs=0, save_interval_secs=0)
    assert af.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-31")
    with pytest.raises(ValueError, match="`gradient_multipliers` must be a dict"):
        slim.learning.multiply_gradients([], [1.0])


def test_slim_evaluation_once_and_in_a_loop(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing import event_accumulator as ea
    slim = af.contrib.slim
    xv = np.random.RandomState(0).randn(32, 3).astype(np.float32)

    def build():
        x = af.constant(xv)
        pred = slim.fully_connected(x, 1, activation_fn=None, scope="fc")
        loss = af.losses.mean_squared_error(af.reduce_sum(x, 1, keepdims=True), pred)
        return loss

    with af.Graph().as_default():
        loss = build()
        train_op = slim.learning.create_train_op(loss, af.train.GradientDescentOptimizer(0.1))
        slim.learning.train(train_op, str(tmp_path / "train"), number_of_steps=20, save_summaries_secs=0,
                            save_interval_secs=0)
    with af.Graph().as_default():
        af.train.get_or_create_global_step()
        loss = build()
        mean_loss, update = af.metrics.mean(loss)
        af.summary.scalar("eval_loss", mean_loss)
        ckpt = af.train.latest_checkpoint(str(tmp_path / "train"))
        got = slim.evaluation.evaluate_once("", ckpt, str(tmp_path / "eval"), num_evals=3, eval_op=update,
                                            final_op=mean_loss)
        looped = slim.evaluation.evaluation_loop("", str(tmp_path / "train"), str(tmp_path / "eval2"), num_evals=2,
                                                 eval_op=update, final_op=mean_loss, eval_interval_secs=0,
                                                 max_number_of_evaluations=1)
    with af.Graph().as_default(), af.Session() as sess:      # the loss of the restored weights, directly
        loss = build()
        af.train.Saver().restore(sess, ckpt)
        want = sess.run(loss)
    assert got == pytest.approx(want, rel=1e-5) and looped == pytest.approx(want, rel=1e-5)
    acc = ea.EventAccumulator(str(tmp_path / "eval"))
    acc.Reload()
    assert [(e.step, round(e.value, 5)) for e in acc.Scalars("eval_loss")] == [(20, round(float(want), 5))]


def test_slim_data_pipeline_reads_a_tfrecord_image_dataset(tmp_path):
    """slim's flowers/cifar pattern: TFRecords of PNG images and labels, a slim Dataset with a
    TFExampleDecoder, a DatasetDataProvider read through queues, then prefetch_queue."""
    import io

    from PIL import Image as PILImage
    slim = af.contrib.slim
    rng = np.random.RandomState(0)
    images = rng.randint(0, 256, (6, 4, 5, 3)).astype(np.uint8)
    path = str(tmp_path / "train-00000.tfrecord")
    with af.python_io.TFRecordWriter(path) as w:
        for i, img in enumerate(images):
            buf = io.BytesIO()
            PILImage.fromarray(img).save(buf, format="PNG")
            ex = af.train.Example(features=af.train.Features(feature={
                "image/encoded": af.train.Feature(bytes_list=af.train.BytesList(value=[buf.getvalue()])),
                "image/format": af.train.Feature(bytes_list=af.train.BytesList(value=[b"png"])),
                "image/class/label": af.train.Feature(int64_list=af.train.Int64List(value=[i])),
                "image/size": af.train.Feature(int64_list=af.train.Int64List(value=[4, 5, 3]))}))
            w.write(ex.SerializeToString())
    keys_to_features = {
        "image/encoded": af.FixedLenFeature((), af.string, default_value=""),
        "image/format": af.FixedLenFeature((), af.string, default_value="png"),
        "image/class/label": af.FixedLenFeature([], af.int64, default_value=0),
        "image/size": af.FixedLenFeature([3], af.int64)}
    items_to_handlers = {
        "image": slim.tfexample_decoder.Image(),
        "label": slim.tfexample_decoder.Tensor("image/class/label"),
        "shape": slim.tfexample_decoder.Tensor("image/size"),
        "label_x2": slim.tfexample_decoder.ItemHandlerCallback(["image/class/label"],
                                                               lambda d: d["image/class/label"] * 2)}
    decoder = slim.tfexample_decoder.TFExampleDecoder(keys_to_features, items_to_handlers)
    data = slim.dataset.Dataset(data_sources=str(tmp_path / "train-*"), reader=af.TFRecordReader, decoder=decoder,
                                num_samples=6, items_to_descriptions={}, num_classes=6)
    assert data.num_classes == 6
    provider = slim.dataset_data_provider.DatasetDataProvider(data, shuffle=False, num_epochs=1)
    assert provider.num_samples() == 6 and "record_key" in provider.list_items()
    image, label, doubled = provider.get(["image", "label", "label_x2"])
    assert image.shape.as_list() == [None, None, 3]
    queue = slim.prefetch_queue.prefetch_queue([af.reshape(image, [4, 5, 3]), label], capacity=4)
    img_q, label_q = queue.dequeue()
    with pytest.raises(ValueError, match="not provided"):
        provider.get(["mask"])
    with af.Session() as sess:
        sess.run([af.global_variables_initializer(), af.local_variables_initializer()])
        coord = af.train.Coordinator()
        threads = af.train.start_queue_runners(sess, coord)
        got = [sess.run([img_q, label_q]) for _ in range(6)]
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=5)
    for img, lab in got:
        np.testing.assert_array_equal(img, images[lab])
    assert sorted(int(lab) for _, lab in got) == list(range(6))
    with pytest.raises(ValueError, match="No data files found"):
        slim.parallel_reader.get_data_files(str(tmp_path / "nothing-*"))
    assert doubled is not None


def test_contrib_training_train_and_evaluate_once(tmp_path):
    xv = np.random.RandomState(0).randn(16, 2).astype(np.float32)
    with af.Graph().as_default():
        x = af.constant(xv)
        w = af.get_variable("w", [2, 1], initializer=af.zeros_initializer())
        loss = af.reduce_mean(af.square(af.matmul(x, w) - af.reduce_sum(x, 1, keepdims=True)))
        train_op = af.contrib.training.create_train_op(
            loss, af.train.GradientDescentOptimizer(0.2),
            transform_grads_fn=lambda gv: [(g * 0.5, v) for g, v in gv])
        last = af.contrib.training.train(train_op, str(tmp_path), hooks=[af.train.StopAtStepHook(num_steps=25)],
                                         save_checkpoint_secs=600, save_summaries_steps=None)
        assert last < 0.5
    with af.Graph().as_default():
        x = af.constant(xv)
        w = af.get_variable("w", [2, 1])
        af.train.get_or_create_global_step()
        mean_w, update = af.metrics.mean(w)
        hook = af.contrib.training.StopAfterNEvalsHook(4)
        got = af.contrib.training.evaluate_once(af.train.latest_checkpoint(str(tmp_path)), eval_ops=update,
                                                final_ops={"mean_w": mean_w, "steps": af.contrib.training.get_or_create_eval_step()},
                                                hooks=[hook])
        assert got["steps"] == 4
        assert af.contrib.training.wait_for_new_checkpoint(str(tmp_path), timeout=1) is not None
        assert af.contrib.training.wait_for_new_checkpoint(
            str(tmp_path), af.train.latest_checkpoint(str(tmp_path)), seconds_to_sleep=0.1, timeout=0.3) is None
    with af.Graph().as_default(), af.Session() as sess:
        v = af.get_variable("w", [2, 1])
        af.train.Saver().restore(sess, af.train.latest_checkpoint(str(tmp_path)))
        np.testing.assert_allclose(got["mean_w"], sess.run(v).mean(), rtol=1e-6)


def test_contrib_small_namespaces():
    with af.Graph().as_default():
        with af.name_scope("outer"):
            assert af.contrib.framework.get_name_scope() == "outer"
        proto = af.contrib.util.make_tensor_proto(np.array([[1, 2]], np.int32))
        np.testing.assert_array_equal(af.contrib.util.make_ndarray(proto), [[1, 2]])
        assert af.contrib.util.constant_value(af.shape(af.zeros([2, 3]))).tolist() == [2, 3]
        assert af.contrib.util.constant_value(af.constant(4) * 2) is None      # as TF: Mul is not folded here
        srt = af.contrib.framework.sort(af.constant([3, 1, 2]), direction="DESCENDING")
        u = af.contrib.stateless.stateless_random_uniform([3], seed=[1, 2])
        with af.contrib.compiler.jit.experimental_jit_scope():
            doubled = af.contrib.framework.py_func(lambda a: a * 2, [af.constant([1.0])], af.float32)
        frames = af.contrib.signal.frame(af.range(6), 2, 2)
        with af.Session() as sess:
            s, uv, d, f = sess.run([srt, u, doubled, frames])
        assert s.tolist() == [3, 2, 1] and uv.shape == (3,) and d.tolist() == [2.0]
        assert f.tolist() == [[0, 1], [2, 3], [4, 5]]


def test_contrib_layers_embedding_lookups():
    """tf.contrib.layers' embedding_ops: embedding_lookup_unique looks each distinct id up once and
    gathers back (ids of any shape); safe_embedding_lookup_sparse is nn's with combiner "mean" by
    default (ids < 0 dropped, an empty row zeros)."""
    table = np.arange(12.0, dtype=np.float32).reshape(6, 2)
    ids = np.array([[1, 3, 1], [5, 1, 0]], np.int32)
    g = af.Graph()
    with g.as_default():
        p = af.constant(table)
        unique = af.contrib.layers.embedding_lookup_unique(p, af.constant(ids))
        sp = af.SparseTensor([[0, 0], [0, 1], [1, 0], [2, 0]], af.constant([1, 3, -1, 5], af.int64), [4, 2])
        safe = af.contrib.layers.safe_embedding_lookup_sparse(p, sp)
        sqrtn = af.contrib.layers.safe_embedding_lookup_sparse(p, sp, combiner="sqrtn")
    with af.Session(graph=g) as s:
        u, m, q = s.run([unique, safe, sqrtn])
    assert u.shape == (2, 3, 2)
    np.testing.assert_array_equal(u, table[ids])
    np.testing.assert_allclose(m, [(table[1] + table[3]) / 2, [0, 0], table[5], [0, 0]])
    np.testing.assert_allclose(q, [(table[1] + table[3]) / np.sqrt(2), [0, 0], table[5], [0, 0]], rtol=1e-6)


def test_slim_model_analyzer_lists_variables_and_ops(capsys):
    """slim.model_analyzer as TF 1.15 prints it (the lines checked against tf_slim's)."""
    g = af.Graph()
    with g.as_default():
        af.Variable(af.zeros([3, 4]), name="w")
        af.Variable(af.zeros([4], af.float64), name="b")
        x = af.placeholder(af.float32, [None, 3], name="x")
        af.identity(x, name="y")
        ma = af.contrib.slim.model_analyzer
        assert ma.analyze_vars(af.global_variables(), print_info=True) == (16, 80)
        printed = capsys.readouterr().out.splitlines()
        assert printed == ["---------", "Variables: name (type shape) [size]", "---------",
                           "w:0 (float32_ref 3x4) [12, bytes: 48]", "b:0 (float64_ref 4) [4, bytes: 32]",
                           "Total size of variables: 16", "Total bytes of variables: 80"]
        total = ma.analyze_ops(g, print_info=True)
        lines = capsys.readouterr().out.splitlines()
    assert "x \t-> (float32 ?x3) [0]" in lines and "y \t-> (float32 ?x3) [0]" in lines
    assert total == sum(int(np.prod(t.shape.as_list())) for op in g.get_operations() for t in op.outputs
                        if t.shape.is_fully_defined())
