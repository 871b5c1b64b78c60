"""NN ops (af.nn): graph-time inference and errors, numerics against numpy references, and
gradients against finite differences."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from actorflow.graph.ops import nn_ops
from tests.conftest import run
from tests.gradcheck import check_gradients

pytestmark = pytest.mark.usefixtures("graph")

RNG = np.random.default_rng(7)


def ph(dtype, shape=None, name=None):
    return af.placeholder(dtype, shape, name=name)


def rand(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------------------------------------
# numpy references
# ---------------------------------------------------------------------------------------------

def _pads(size, k, stride, dilation, padding):
    eff = (k - 1) * dilation + 1
    if padding == "VALID":
        return (size - eff) // stride + 1, 0, 0
    out = -(-size // stride)
    need = max((out - 1) * stride + eff - size, 0)
    return out, need // 2, need - need // 2


def np_conv2d(x, f, strides, padding, dilations=(1, 1)):
    n, h, w, c = x.shape
    kh, kw, _, co = f.shape
    (sh, sw), (dh, dw) = strides, dilations
    oh, ph0, ph1 = _pads(h, kh, sh, dh, padding)
    ow, pw0, pw1 = _pads(w, kw, sw, dw, padding)
    xp = np.pad(x, ((0, 0), (ph0, ph1), (pw0, pw1), (0, 0)))
    out = np.zeros((n, oh, ow, co), dtype=np.float64)
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                for b in range(kw):
                    out[:, i, j, :] += xp[:, i * sh + a * dh, j * sw + b * dw, :] @ f[a, b]
    return out


def np_pool(x, k, s, padding, kind):
    n, h, w, c = x.shape
    oh, ph0, ph1 = _pads(h, k[0], s[0], 1, padding)
    ow, pw0, pw1 = _pads(w, k[1], s[1], 1, padding)
    out = np.zeros((n, oh, ow, c))
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * s[0] - ph0, j * s[1] - pw0
            win = x[:, max(r0, 0):r0 + k[0], max(c0, 0):c0 + k[1], :]
            out[:, i, j, :] = win.max(axis=(1, 2)) if kind == "max" else win.mean(axis=(1, 2))
    return out


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_log_softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


# ---------------------------------------------------------------------------------------------
# The af.nn namespace
# ---------------------------------------------------------------------------------------------

def test_nn_namespace_exports():
    for name in ["relu", "relu6", "elu", "softplus", "leaky_relu", "sigmoid", "tanh", "softmax", "log_softmax",
                 "softmax_cross_entropy_with_logits", "softmax_cross_entropy_with_logits_v2",
                 "sparse_softmax_cross_entropy_with_logits", "bias_add", "conv2d", "max_pool2d", "max_pool",
                 "avg_pool2d", "avg_pool", "dropout", "moments", "batch_normalization", "l2_loss", "l2_normalize",
                 "embedding_lookup", "sigmoid_cross_entropy_with_logits", "xw_plus_b", "in_top_k"]:
        assert callable(getattr(af.nn, name)), name


# ---------------------------------------------------------------------------------------------
# Inference and build-time errors
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("strides,padding,dilations,want", [
    (1, "SAME", None, (None, 28, 28, 16)),
    (2, "SAME", None, (None, 14, 14, 16)),
    ([2, 3], "SAME", None, (None, 14, 10, 16)),
    ([1, 2, 2, 1], "VALID", None, (None, 12, 12, 16)),
    (1, "VALID", 2, (None, 20, 20, 16)),
    (3, "VALID", [2, 1], (None, 7, 8, 16)),
])
def test_conv2d_shape(strides, padding, dilations, want):
    x = ph(af.float32, [None, 28, 28, 3])
    f = ph(af.float32, [5, 5, 3, 16])
    y = af.nn.conv2d(x, f, strides=strides, padding=padding, dilations=dilations)
    assert y.shape.dims == want and y.dtype is af.float32
    assert y.op.type == "Conv2D" and len(y.op.get_attr("strides")) == 4


def test_conv2d_nchw_shape_and_v1_filter_keyword():
    x = ph(af.float32, [2, 3, 9, 9])
    y = af.nn.conv2d(x, filter=ph(af.float32, [3, 3, 3, 4]), strides=2, padding="SAME", data_format="NCHW")
    assert y.shape.dims == (2, 4, 5, 5)
    assert y.op.get_attr("strides") == (1, 1, 2, 2)


def test_conv2d_errors_name_the_op():
    x = ph(af.float32, [None, 28, 28, 3])
    with pytest.raises(ValueError, match=r"input depth 3.*in_channels 4.*op 'myconv'"):
        af.nn.conv2d(x, ph(af.float32, [5, 5, 4, 16]), strides=1, padding="SAME", name="myconv")
    with pytest.raises(ValueError, match="Negative dimension size"):
        af.nn.conv2d(ph(af.float32, [1, 4, 4, 3]), ph(af.float32, [5, 5, 3, 1]), strides=1, padding="VALID")
    with pytest.raises(ValueError, match="padding"):
        af.nn.conv2d(x, ph(af.float32, [5, 5, 3, 16]), strides=1, padding="FULL")
    with pytest.raises(ValueError, match="batch and depth"):
        af.nn.conv2d(x, ph(af.float32, [5, 5, 3, 16]), strides=[2, 1, 1, 1], padding="SAME")
    with pytest.raises(ValueError, match="rank 4"):
        af.nn.conv2d(ph(af.float32, [28, 28, 3]), ph(af.float32, [5, 5, 3, 16]), strides=1, padding="SAME")
    with pytest.raises(ValueError, match="filter"):
        af.nn.conv2d(x, ph(af.float64, [5, 5, 3, 16]), strides=1, padding="SAME")
    with pytest.raises(ValueError, match="exactly one"):
        af.nn.conv2d(x, strides=1, padding="SAME")


def test_pool_shapes_and_errors():
    x = ph(af.float32, [None, 7, 7, 5])
    assert af.nn.max_pool2d(x, 2, 2, "VALID").shape.dims == (None, 3, 3, 5)
    assert af.nn.max_pool(x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME").shape.dims == (None, 4, 4, 5)
    assert af.nn.avg_pool(value=x, ksize=[2, 3], strides=1, padding="VALID").shape.dims == (None, 6, 5, 5)
    assert af.nn.avg_pool2d(x, 3, 3, "SAME").op.type == "AvgPool"
    with pytest.raises(ValueError, match="batch and depth"):
        af.nn.max_pool2d(x, [2, 2, 2, 1], 1, "VALID")
    with pytest.raises(ValueError, match="Negative dimension"):
        af.nn.max_pool2d(x, 8, 1, "VALID")
    with pytest.raises(ValueError, match="floating"):
        af.nn.avg_pool2d(ph(af.int32, [1, 4, 4, 1]), 2, 2, "VALID")


def test_softmax_and_xent_shapes():
    logits = ph(af.float32, [None, 4, 10])
    assert af.nn.softmax(logits).shape.dims == (None, 4, 10)
    s1 = af.nn.softmax(logits, axis=1)
    assert s1.shape.dims == (None, 4, 10) and s1.op.type == "Transpose"
    assert af.nn.log_softmax(logits, dim=0).shape.dims == (None, 4, 10)
    loss = af.nn.softmax_cross_entropy_with_logits(labels=ph(af.float32, [None, 4, 10]), logits=logits)
    assert loss.shape.dims == (None, 4) and loss.dtype is af.float32
    sl = af.nn.sparse_softmax_cross_entropy_with_logits(labels=ph(af.int64, [None, 4]), logits=logits)
    assert sl.shape.dims == (None, 4)
    l2 = af.nn.softmax_cross_entropy_with_logits(labels=ph(af.float32, [8, 3]), logits=ph(af.float32, [8, 3]),
                                                 name="xent")
    assert l2.shape.dims == (8,) and l2.op.type == "SoftmaxCrossEntropyWithLogits" and l2.op.name == "xent"


def test_softmax_and_xent_errors():
    with pytest.raises(TypeError, match="floating"):
        af.nn.softmax(ph(af.int32, [2, 3]))
    with pytest.raises(ValueError, match="same shape"):
        af.nn.softmax_cross_entropy_with_logits(labels=ph(af.float32, [2, 4]), logits=ph(af.float32, [2, 3]))
    with pytest.raises(ValueError, match="Rank mismatch"):
        af.nn.sparse_softmax_cross_entropy_with_logits(labels=ph(af.int32, [2, 3]), logits=ph(af.float32, [2, 3]))
    with pytest.raises(TypeError, match="int32 or int64"):
        af.nn.sparse_softmax_cross_entropy_with_logits(labels=ph(af.float32, [2]), logits=ph(af.float32, [2, 3]))
    with pytest.raises(ValueError, match="labels"):
        af.nn.softmax_cross_entropy_with_logits(logits=ph(af.float32, [2, 3]))
    # The raw op insists on rank 2 and names itself.
    with pytest.raises(ValueError, match=r"rank 2.*SoftmaxCrossEntropyWithLogits"):
        nn_ops.SoftmaxCrossEntropyWithLogits(ph(af.float32, [2, 3, 4]), ph(af.float32, [2, 3, 4]))


def test_bias_add_inference():
    assert af.nn.bias_add(ph(af.float32, [None, 5, 5, 3]), ph(af.float32, [3])).shape.dims == (None, 5, 5, 3)
    assert af.nn.bias_add(ph(af.float32, [2, 3, 5, 5]), ph(af.float32, [3]),
                          data_format="NCHW").shape.dims == (2, 3, 5, 5)
    with pytest.raises(ValueError, match="bias has 4 elements but value has 3 channels"):
        af.nn.bias_add(ph(af.float32, [2, 3]), ph(af.float32, [4]))
    with pytest.raises(ValueError, match="at least rank 2"):
        af.nn.bias_add(ph(af.float32, [3]), ph(af.float32, [3]))


def test_dropout_argument_checks():
    x = ph(af.float32, [4, 5])
    with pytest.raises(ValueError, match="exactly one"):
        af.nn.dropout(x)
    with pytest.raises(ValueError, match="exactly one"):
        af.nn.dropout(x, keep_prob=0.5, rate=0.5)
    with pytest.raises(ValueError, match=r"range \(0, 1\]"):
        af.nn.dropout(x, keep_prob=0.0)
    with pytest.raises(ValueError, match=r"range \[0, 1\)"):
        af.nn.dropout(x, rate=1.0)
    assert af.nn.dropout(x, keep_prob=1.0) is x
    assert af.nn.dropout(x, rate=0) is x
    y = af.nn.dropout(x, 0.5)
    assert y.shape.dims == (4, 5) and y.dtype is af.float32
    assert any(op.type == "RandomUniform" for op in af.get_default_graph().get_operations())


def test_partitioned_embedding_lookup_structure():
    shards = []
    for i in range(2):
        with af.device(f"/job:ps/task:{i}"):
            shards.append(af.Variable(np.zeros((3, 2), np.float32), name=f"emb_{i}"))
    out = af.nn.embedding_lookup(shards, ph(af.int32, [None, 5]))
    assert out.shape.dims == (None, 5, 2)
    types = [op.type for op in af.get_default_graph().get_operations()]
    assert types.count("DynamicPartition") == 2 and "DynamicStitch" in types
    gathers = [op for op in af.get_default_graph().get_operations() if op.type == "GatherV2"]
    assert len(gathers) == 2
    for g, v in zip(gathers, shards):
        assert g.attrs["_class"] == (f"loc:@{v.op.name}",)
        assert g.device == v.device and "task:" in g.device


def test_embedding_lookup_errors():
    with pytest.raises(ValueError, match="partition strategy"):
        af.nn.embedding_lookup([af.constant(np.zeros((2, 2)))] * 2, [0], partition_strategy="range")
    with pytest.raises(TypeError, match="int32 or int64"):
        af.nn.embedding_lookup(af.constant(np.zeros((2, 2))), af.constant([0.0]))


# ---------------------------------------------------------------------------------------------
# Numerics
# ---------------------------------------------------------------------------------------------

def test_activations():
    x = np.array([[-7.0, -1.0, -0.0, 0.5, 3.0, 6.5, 40.0]], dtype=np.float32)
    r = run([af.nn.relu(x), af.nn.relu6(x), af.nn.elu(x), af.nn.softplus(x), af.nn.leaky_relu(x),
             af.nn.leaky_relu(x, alpha=2.0), af.nn.sigmoid(x), af.nn.tanh(x)])
    np.testing.assert_allclose(r[0], np.maximum(x, 0))
    np.testing.assert_allclose(r[1], np.clip(x, 0, 6))
    np.testing.assert_allclose(r[2], np.where(x < 0, np.expm1(x), x), rtol=1e-6)
    np.testing.assert_allclose(r[3], np.logaddexp(0, x), rtol=1e-6)
    np.testing.assert_allclose(r[4], np.where(x > 0, x, 0.2 * x), rtol=1e-6)
    np.testing.assert_allclose(r[5], np.where(x > 0, x, 2.0 * x), rtol=1e-6)
    np.testing.assert_allclose(r[6], 1 / (1 + np.exp(-x)), rtol=1e-6)
    np.testing.assert_allclose(r[7], np.tanh(x), rtol=1e-6)
    assert af.nn.relu6(af.constant([3, 9])).dtype is af.int32
    assert run(af.nn.leaky_relu(af.constant([-2, 3]))).tolist() == pytest.approx([-0.4, 3.0])


def test_softmax_log_softmax_numerics():
    x = rand(2, 3, 5) * 10
    out = run([af.nn.softmax(x), af.nn.softmax(x, axis=1), af.nn.log_softmax(x), af.nn.log_softmax(x, axis=0),
               af.nn.softmax(x, axis=-2)])
    np.testing.assert_allclose(out[0], np_softmax(x), rtol=1e-12)
    np.testing.assert_allclose(out[1], np_softmax(x, 1), rtol=1e-12)
    np.testing.assert_allclose(out[2], np_log_softmax(x), rtol=1e-12)
    np.testing.assert_allclose(out[3], np_log_softmax(x, 0), rtol=1e-12)
    np.testing.assert_allclose(out[4], np_softmax(x, 1), rtol=1e-12)


def test_softmax_cross_entropy_numerics():
    logits = rand(6, 4) * 5
    labels = np_softmax(rand(6, 4))
    want = -(labels * np_log_softmax(logits)).sum(-1)
    np.testing.assert_allclose(run(af.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)), want,
                               rtol=1e-12)
    # Rank 3, and a non-last class axis.
    l3, y3 = rand(2, 3, 4), np_softmax(rand(2, 3, 4))
    got = run([af.nn.softmax_cross_entropy_with_logits(labels=y3, logits=l3),
               af.nn.softmax_cross_entropy_with_logits(labels=y3, logits=l3, axis=1)])
    np.testing.assert_allclose(got[0], -(y3 * np_log_softmax(l3)).sum(-1), rtol=1e-12)
    np.testing.assert_allclose(got[1], -(y3 * np_log_softmax(l3, 1)).sum(1), rtol=1e-12)
    # Rank 3 with unknown batch: reshaped at run time.
    p = ph(af.float64, [None, 3, 4])
    q = ph(af.float64, [None, 3, 4])
    loss = af.nn.softmax_cross_entropy_with_logits(labels=q, logits=p)
    assert loss.shape.dims == (None, 3)
    np.testing.assert_allclose(run(loss, {p: l3, q: y3}), got[0], rtol=1e-12)


def test_sparse_softmax_cross_entropy_numerics():
    logits = rand(5, 7) * 3
    labels = np.array([0, 6, 3, 3, 1], dtype=np.int32)
    want = -np_log_softmax(logits)[np.arange(5), labels]
    np.testing.assert_allclose(run(af.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)),
                               want, rtol=1e-12)
    l3 = rand(2, 3, 4)
    y3 = np.array([[0, 1, 3], [2, 2, 0]], dtype=np.int64)
    lp, yp = ph(af.float64, [None, None, 4]), ph(af.int64, [None, None])
    got = run(af.nn.sparse_softmax_cross_entropy_with_logits(labels=yp, logits=lp), {lp: l3, yp: y3})
    want3 = -np.take_along_axis(np_log_softmax(l3), y3[..., None], -1)[..., 0]
    np.testing.assert_allclose(got, want3, rtol=1e-12)


def test_sigmoid_cross_entropy_is_stable():
    x = np.array([-1000.0, -20.0, -1.0, 0.0, 2.0, 30.0, 1000.0])
    z = np.array([0.0, 1.0, 0.3, 0.5, 1.0, 0.0, 1.0])
    got = run(af.nn.sigmoid_cross_entropy_with_logits(labels=z, logits=x))
    want = np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_bias_add_and_xw_plus_b():
    v = rand(2, 3, 4, 5)
    b = rand(5)
    np.testing.assert_allclose(run(af.nn.bias_add(v, b)), v + b)
    bc = rand(3)
    np.testing.assert_allclose(run(af.nn.bias_add(v, bc, data_format="NCHW")), v + bc[:, None, None])
    x, w, b2 = rand(4, 3), rand(3, 2), rand(2)
    np.testing.assert_allclose(run(af.nn.xw_plus_b(x, w, b2)), x @ w + b2, rtol=1e-12)


@pytest.mark.parametrize("strides,padding,dilations", [
    ((1, 1), "SAME", (1, 1)), ((2, 2), "SAME", (1, 1)), ((2, 2), "VALID", (1, 1)),
    ((1, 2), "VALID", (1, 1)), ((1, 1), "SAME", (2, 2)), ((1, 1), "VALID", (2, 1)),
])
def test_conv2d_numerics(strides, padding, dilations):
    x = rand(2, 7, 8, 3)
    f = rand(3, 2, 3, 4)
    got = run(af.nn.conv2d(x, f, strides=list(strides), padding=padding, dilations=list(dilations)))
    np.testing.assert_allclose(got, np_conv2d(x, f, strides, padding, dilations), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("k,s,padding", [((2, 2), (2, 2), "VALID"), ((3, 3), (2, 2), "SAME"),
                                         ((3, 2), (1, 2), "SAME"), ((2, 3), (3, 1), "VALID")])
def test_pool_numerics(k, s, padding):
    x = rand(2, 7, 6, 3)
    mp, ap = run([af.nn.max_pool2d(x, list(k), list(s), padding), af.nn.avg_pool2d(x, list(k), list(s), padding)])
    np.testing.assert_allclose(mp, np_pool(x, k, s, padding, "max"))
    np.testing.assert_allclose(ap, np_pool(x, k, s, padding, "avg"), rtol=1e-12)


def test_normalization_helpers():
    x = rand(4, 3, 5)
    mean, var = run(af.nn.moments(x, [0, 2]))
    np.testing.assert_allclose(mean, x.mean(axis=(0, 2)), rtol=1e-12)
    np.testing.assert_allclose(var, x.var(axis=(0, 2)), rtol=1e-12)
    mk, vk = af.nn.moments(af.constant(x), [0, 2], keep_dims=True)
    assert mk.shape.dims == (1, 3, 1) and vk.shape.dims == (1, 3, 1)
    m16, v16 = af.nn.moments(af.constant(x.astype(np.float16)), [0])
    assert m16.dtype is af.float16 and v16.dtype is af.float16
    m, v = x.mean(0), x.var(0)
    offset, scale = rand(3, 5), rand(3, 5)
    got = run([af.nn.batch_normalization(x, m, v, offset, scale, 1e-3),
               af.nn.batch_normalization(x, m, v, None, None, 1e-3)])
    np.testing.assert_allclose(got[0], (x - m) / np.sqrt(v + 1e-3) * scale + offset, rtol=1e-10)
    np.testing.assert_allclose(got[1], (x - m) / np.sqrt(v + 1e-3), rtol=1e-10)
    got = run([af.nn.l2_loss(x), af.nn.l2_normalize(x, axis=1), af.nn.l2_normalize(x),
               af.nn.l2_normalize(np.zeros(3))])
    assert got[0] == pytest.approx((x ** 2).sum() / 2, rel=1e-12)
    np.testing.assert_allclose(got[1], x / np.sqrt((x ** 2).sum(1, keepdims=True)), rtol=1e-12)
    np.testing.assert_allclose(got[2], x / np.sqrt((x ** 2).sum()), rtol=1e-12)
    np.testing.assert_array_equal(got[3], np.zeros(3))


def test_in_top_k():
    pred = np.array([[0.1, 0.5, 0.5, 0.2],      # a tie for first place
                     [0.4, 0.3, 0.2, 0.1],
                     [np.nan, 0.3, 0.2, 0.1],   # a non-finite row: False
                     [0.1, 0.2, 0.3, 0.4]], dtype=np.float32)
    targets = np.array([2, 2, 1, 7], dtype=np.int32)  # 7 is out of range: False
    got = run([af.nn.in_top_k(pred, targets, 1), af.nn.in_top_k(pred, targets, 3)])
    assert got[0].tolist() == [True, False, False, False]
    assert got[1].tolist() == [True, True, False, False]
    p = ph(af.float32, [None, None])
    t = ph(af.int64, [None])
    assert run(af.nn.in_top_k(p, t, 2), {p: pred[:2], t: [1, 3]}).tolist() == [True, False]


def test_embedding_lookup_single_and_variable():
    table = rand(6, 3)
    ids = np.array([[0, 5], [2, 2]], dtype=np.int32)
    np.testing.assert_allclose(run(af.nn.embedding_lookup(table, ids)), table[ids])
    v = af.Variable(table)
    out = af.nn.embedding_lookup(v, ids)
    assert out.shape.dims == (2, 2, 3)
    with af.Session() as sess:
        sess.run(v.initializer)
        np.testing.assert_allclose(sess.run(out), table[ids])


@pytest.mark.parametrize("strategy", ["mod", "div"])
@pytest.mark.parametrize("sizes", [(4, 3, 3), (3, 3), (5,)])
def test_partitioned_embedding_lookup(strategy, sizes):
    n, p = sum(sizes), len(sizes)
    table = rand(n, 2)
    if strategy == "mod":
        shards = [table[i::p] for i in range(p)]
    else:
        shards = np.split(table, np.cumsum(sizes)[:-1])
    assert [len(s) for s in shards] == list(sizes)
    ids = np.array([[n - 1, 0, 3], [1, 1, n // 2]], dtype=np.int64)
    out = af.nn.embedding_lookup([af.constant(s) for s in shards], ids, partition_strategy=strategy)
    assert out.shape.dims == (2, 3, 2)
    np.testing.assert_allclose(run(out), table[ids])
    # Shards of unknown size (div needs their sizes at run time) and ids of unknown shape.
    phs = [ph(af.float64, [None, 2]) for _ in shards]
    idp = ph(af.int64, None)
    out = af.nn.embedding_lookup(phs, idp, partition_strategy=strategy)
    feed = dict(zip(phs, shards))
    feed[idp] = ids[0]
    np.testing.assert_allclose(run(out, feed), table[ids[0]])


def test_embedding_lookup_max_norm():
    table = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]])
    got = run(af.nn.embedding_lookup([af.constant(table[0::2]), af.constant(table[1::2])], [0, 1, 2], max_norm=1.0))
    np.testing.assert_allclose(got, [[0.6, 0.8], [0.3, 0.4], [0.0, 0.0]], rtol=1e-12)


def test_dropout_statistics_and_scaling():
    x = np.ones((200, 500), dtype=np.float32) * 3
    for kwargs, keep in (({"keep_prob": 0.3}, 0.3), ({"rate": 0.75}, 0.25)):
        y = run(af.nn.dropout(x, seed=11, **kwargs))
        kept = y != 0
        # 100000 Bernoulli(keep) draws: the kept fraction is within 5 standard deviations.
        assert abs(kept.mean() - keep) < 5 * np.sqrt(keep * (1 - keep) / x.size)
        np.testing.assert_allclose(y[kept], 3 / keep, rtol=1e-6)


def test_dropout_keep_prob_placeholder():
    keep = ph(af.float32, [])
    x = np.full((100, 100), 2.0, dtype=np.float32)
    y = af.nn.dropout(x, keep_prob=keep)
    with af.Session() as sess:
        np.testing.assert_allclose(sess.run(y, {keep: 1.0}), x)
        half = sess.run(y, {keep: 0.5})
    assert set(np.unique(half).tolist()) == {0.0, 4.0}
    assert 0.4 < (half != 0).mean() < 0.6


def test_dropout_noise_shape_broadcasts():
    x = np.ones((50, 40), dtype=np.float32)
    y = run(af.nn.dropout(x, keep_prob=0.5, noise_shape=[1, 40], seed=3))
    assert (y == y[:1]).all()                       # every row is dropped the same way
    assert 0 < (y[0] != 0).sum() < 40


def test_dropout_seeded_reproducible_across_sessions():
    af.set_random_seed(5)
    y = af.nn.dropout(np.ones((30, 30), np.float32), keep_prob=0.5)
    first = run(y)
    second = run(y)
    np.testing.assert_array_equal(first, second)
    # Re-running in one session continues the stream: a fresh mask.
    with af.Session() as sess:
        a, b = sess.run(y), sess.run(y)
    assert not np.array_equal(a, b)


# ---------------------------------------------------------------------------------------------
# Gradients
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("strides,padding", [(1, "SAME"), (2, "SAME"), (2, "VALID"), ([1, 2], "VALID")])
def test_conv2d_gradients(strides, padding):
    x = rand(2, 5, 6, 3)
    f = rand(3, 3, 3, 2)
    hw = (strides, strides) if isinstance(strides, int) else tuple(strides)
    check_gradients(lambda a, b: af.nn.conv2d(a, b, strides=strides, padding=padding), [x, f],
                    grad_y=rand(*np_conv2d(x, f, hw, padding).shape))


def test_conv2d_dilated_gradients():
    check_gradients(lambda a, b: af.nn.conv2d(a, b, strides=1, padding="SAME", dilations=2),
                    [rand(1, 6, 5, 2), rand(2, 2, 2, 3)])


@pytest.mark.parametrize("k,s,padding", [(2, 2, "VALID"), (3, 2, "SAME"), ([2, 3], [1, 2], "SAME")])
def test_pool_gradients(k, s, padding):
    # Distinct values keep the max unique, so the finite differences see a smooth function.
    x = RNG.permutation(2 * 6 * 7 * 2).reshape(2, 6, 7, 2) / 10.0
    check_gradients(lambda a: af.nn.max_pool2d(a, k, s, padding), [x], eps=1e-4)
    check_gradients(lambda a: af.nn.avg_pool2d(a, k, s, padding), [x])


def test_softmax_gradients():
    x = rand(3, 5)
    w = rand(3, 5)
    check_gradients(af.nn.softmax, [x], grad_y=w)
    check_gradients(af.nn.log_softmax, [x], grad_y=w)
    check_gradients(lambda a: af.nn.softmax(a, axis=0), [x], grad_y=w)


def test_softmax_cross_entropy_gradients():
    logits, labels = rand(4, 5), np_softmax(rand(4, 5))
    check_gradients(lambda a, b: af.nn.softmax_cross_entropy_with_logits(labels=b, logits=a), [logits, labels],
                    grad_y=rand(4))
    check_gradients(lambda a, b: af.nn.softmax_cross_entropy_with_logits(labels=b, logits=a), [rand(2, 3, 4),
                    np_softmax(rand(2, 3, 4))], grad_y=rand(2, 3))


def test_sparse_softmax_cross_entropy_gradients():
    check_gradients(lambda a, b: af.nn.sparse_softmax_cross_entropy_with_logits(labels=b, logits=a),
                    [rand(4, 5), np.array([0, 4, 2, 2], dtype=np.int32)], grad_y=rand(4))
    check_gradients(lambda a, b: af.nn.sparse_softmax_cross_entropy_with_logits(labels=b, logits=a),
                    [rand(2, 3, 4), np.array([[0, 1, 3], [3, 3, 2]], dtype=np.int64)])


def test_cross_entropy_second_order():
    # d/dlogits of (d loss/d logits . w): differentiates through the backprop output.
    w = rand(3, 4)

    def dense(a, b):
        g = af.gradients(af.nn.softmax_cross_entropy_with_logits(labels=b, logits=a), a)[0]
        return g * w

    def sparse(a):
        g = af.gradients(af.nn.sparse_softmax_cross_entropy_with_logits(labels=[1, 0, 3], logits=a), a)[0]
        return g * w
    check_gradients(dense, [rand(3, 4), np_softmax(rand(3, 4))])
    check_gradients(sparse, [rand(3, 4)])


def test_other_gradients():
    x = rand(3, 4) * 3
    check_gradients(lambda a, b: af.nn.bias_add(a, b), [x, rand(4)], grad_y=rand(3, 4))
    check_gradients(lambda a, b: af.nn.bias_add(a, b, data_format="NCHW"), [rand(2, 3, 2, 2), rand(3)],
                    grad_y=rand(2, 3, 2, 2))
    check_gradients(af.nn.relu6, [np.array([[-1.0, 0.5, 3.0, 7.0]])])
    check_gradients(af.nn.elu, [x])
    check_gradients(af.nn.softplus, [x])
    check_gradients(af.nn.leaky_relu, [x])
    check_gradients(lambda a, b: af.nn.sigmoid_cross_entropy_with_logits(labels=b, logits=a), [x, rand(3, 4)])
    check_gradients(lambda a: af.nn.l2_normalize(a, axis=1), [x], grad_y=rand(3, 4))
    check_gradients(af.nn.l2_loss, [x])
    check_gradients(lambda a: af.nn.moments(a, [0])[1], [x], grad_y=rand(4))
    check_gradients(lambda a, m, v, o, s: af.nn.batch_normalization(a, m, v, o, s, 1e-3),
                    [x, rand(4), np.abs(rand(4)) + 0.5, rand(4), rand(4)], grad_y=rand(3, 4))


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_partitioned_embedding_lookup_gradients(strategy):
    ids = np.array([[0, 6, 3], [3, 1, 5]], dtype=np.int32)
    check_gradients(lambda a, b, i: af.nn.embedding_lookup([a, b], i, partition_strategy=strategy),
                    [rand(4, 2), rand(3, 2), ids], grad_y=rand(2, 3, 2))


def test_embedding_lookup_gradient_is_sparse():
    v = af.Variable(np.zeros((5, 2)))
    loss = af.reduce_sum(af.nn.embedding_lookup(v, [1, 3, 1]))
    g = af.gradients(loss, [v])[0]
    assert isinstance(g, af.IndexedSlices)


def test_dropout_gradient_is_the_scaled_mask():
    x = af.placeholder(af.float64, [40, 40])
    y = af.nn.dropout(x, keep_prob=0.25, seed=2)
    g = af.gradients(y, x)[0]
    with af.Session() as sess:
        vy, vg = sess.run([y, g], {x: np.ones((40, 40))})
    np.testing.assert_allclose(vg, vy)            # y = x * mask / keep, so dy/dx = mask / keep at x = 1
    assert set(np.unique(vg).tolist()) == {0.0, 4.0}


def test_moments_with_tensor_axes_needs_keepdims():
    x = af.constant(rand(3, 4))
    with pytest.raises(TypeError, match="keepdims"):
        af.nn.moments(x, af.constant([0]))
    mean, _ = af.nn.moments(x, af.constant([0]), keepdims=True)
    np.testing.assert_allclose(run(mean), run(x).mean(0, keepdims=True))


def test_softmax_cross_entropy_casts_labels_to_the_logits_dtype():
    """TF's v2 helper casts labels to the logits' dtype: float64 one-hot labels from numpy (as
    tf.data gives them) with float32 logits, as a public tf.data tutorial does, or int32 ones."""
    with af.Graph().as_default(), af.Session() as sess:
        logits = af.constant([[2.0, 1.0, 0.1]], dtype=af.float32)
        labels = af.constant(np.array([[1.0, 0.0, 0.0]]), dtype=af.float64)
        loss = af.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        assert loss.dtype == af.float32
        z = np.array([2.0, 1.0, 0.1])
        np.testing.assert_allclose(sess.run(loss), [np.log(np.exp(z).sum()) - 2.0], rtol=1e-6)
        # int32 one-hots too (TF 2.21 casts them; stanford cs20's 03_logistic_regression_mnist_sol)
        int_loss = af.nn.softmax_cross_entropy_with_logits(labels=af.constant([[1, 0, 0]]), logits=logits)
        np.testing.assert_allclose(sess.run(int_loss), sess.run(loss), rtol=1e-7)
        with pytest.raises(TypeError, match="cannot be cast to the dtype of logits"):
            af.nn.softmax_cross_entropy_with_logits(labels=af.constant([[b"a", b"b", b"c"]]), logits=logits)


def test_softmax_xent_flattens_and_broadcasts_labels_like_tensorflow():
    """Labels of another rank are flattened to [-1, classes] beside the logits, and a [1, k] label
    row broadcasts over the batch (TF >= 1.13); its gradient is summed back to its shape."""
    rng = np.random.RandomState(0)
    xv = rng.randn(3, 7).astype(np.float32)
    yv = np.eye(7, dtype=np.float32)[[1, 2, 3]]
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, 7])
        y = af.placeholder(af.float32, [None, 7])
        packed = af.nn.softmax_cross_entropy_with_logits_v2(logits=x, labels=af.stop_gradient([y]))
        row = af.constant(np.full((1, 7), 1 / 7, np.float32))
        bcast = af.nn.softmax_cross_entropy_with_logits_v2(logits=x, labels=row)
        g_row = af.gradients(af.reduce_sum(bcast), row)[0]
        assert packed.shape.as_list() == [None] and g_row.shape.as_list() == [1, 7]
        with af.Session() as s:
            pv, bv, gv = s.run([packed, bcast, g_row], {x: xv, y: yv})
    logp = xv - np.log(np.exp(xv).sum(1, keepdims=True))
    np.testing.assert_allclose(pv, -(yv * logp).sum(1), rtol=1e-5)
    np.testing.assert_allclose(bv, -(logp / 7).sum(1), rtol=1e-5)
    np.testing.assert_allclose(gv, -logp.sum(0, keepdims=True), rtol=1e-5)
