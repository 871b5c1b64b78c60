"""Intra-op splitting: every kernel with a splitter computes, block by block, what it computes whole
(MatMul by rows or columns, the fused MatMuls, the convolutions by batch), and the runtime runs the
blocks (and a splitter's finishing step) on its pool."""
import numpy as np
import pytest

import actorflow as af
from actorflow.kernels.registry import get_kernel
from tests.readers import run_beside_readers


@pytest.fixture(autouse=True)
def _split_small_products(monkeypatch):
    """These tests split products of a few rows: every product is worth splitting here."""
    from actorflow.kernels.cpu import matmul
    monkeypatch.setattr(matmul, "MIN_SPLIT_MACS", 0)


CONV = {"strides": (1, 1, 1, 1), "padding": "SAME", "data_format": "NHWC", "dilations": (1, 1, 1, 1)}


def _run_split(op, attrs, parts, *args):
    res = get_kernel(op).split(attrs)(parts, *args)
    if res is None:
        return None
    out, thunks = res[0], res[1]
    for t in reversed(thunks):          # any order: blocks are independent
        t()
    return res[2]() if len(res) == 3 else out


@pytest.mark.parametrize("m, n", [(300, 40), (64, 500), (64, 100)])
@pytest.mark.parametrize("ta", [False, True])
def test_matmul_splits_by_rows_or_columns(m, n, ta):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, 70)).astype(np.float32)
    b = rng.standard_normal((70, n)).astype(np.float32)
    a_in = a.T.copy() if ta else a
    attrs = {"transpose_a": ta}
    split = _run_split("MatMul", attrs, 2, a_in, b)
    if m < 128 and n < 128:
        assert split is None                     # too small to be worth it
        return
    np.testing.assert_allclose(split, a @ b, rtol=1e-5, atol=1e-4)
    bias = rng.standard_normal(n).astype(np.float32)
    fused = {"transpose_a": ta, "fused_ops": ("BiasAdd", "Relu")}
    np.testing.assert_allclose(_run_split("_FusedMatMul", fused, 2, a_in, b, bias),
                               np.maximum(a @ b + bias, 0), rtol=1e-5, atol=1e-4)
    var = rng.standard_normal((m, n)).astype(np.float32)
    v = var.copy()
    out = _run_split("_MatMulApplyGradientDescent", {"transpose_a": True}, 2, v, np.float32(0.1), a.T.copy(), b)
    assert out is v
    np.testing.assert_allclose(v, var - 0.1 * (a @ b), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, fshape, padding", [((7, 12, 12, 3), (5, 5, 3, 8), "SAME"),
                                                    ((6, 9, 11, 4), (3, 2, 4, 5), "VALID")])
def test_convolutions_split_by_batch(dtype, shape, fshape, padding):
    rng = np.random.default_rng(1)
    attrs = dict(CONV, padding=padding)
    x = rng.standard_normal(shape).astype(dtype)
    f = rng.standard_normal(fshape).astype(dtype)
    y = get_kernel("Conv2D").factory(attrs)(x, f)
    dy = rng.standard_normal(y.shape).astype(dtype)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    for parts in (2, 3):
        np.testing.assert_allclose(_run_split("Conv2D", attrs, parts, x, f), y, rtol=tol, atol=tol)
        sizes = np.array(shape, np.int32)
        np.testing.assert_allclose(_run_split("Conv2DBackpropInput", attrs, parts, sizes, f, dy),
                                   get_kernel("Conv2DBackpropInput").factory(attrs)(sizes, f, dy), rtol=tol, atol=tol)
        fsizes = np.array(fshape, np.int32)
        np.testing.assert_allclose(_run_split("Conv2DBackpropFilter", attrs, parts, x, fsizes, dy),
                                   get_kernel("Conv2DBackpropFilter").factory(attrs)(x, fsizes, dy),
                                   rtol=tol, atol=tol * 10)


def test_convolutions_do_not_split_what_they_cannot():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 8, 8, 2)).astype(np.float32)
    f = rng.standard_normal((3, 3, 2, 4)).astype(np.float32)
    assert get_kernel("Conv2D").split(CONV)(2, x, f) is None                          # batch of 3
    nchw = dict(CONV, data_format="NCHW")
    assert get_kernel("Conv2D").split(nchw)(2, np.ones((8, 2, 8, 8), np.float32), f) is None
    assert get_kernel("Conv2D").split(CONV)(2, np.ones((8, 8, 8, 2), np.float16), f.astype(np.float16)) is None
    bad = rng.standard_normal((3, 3, 5, 4)).astype(np.float32)                       # depth mismatch
    assert get_kernel("Conv2D").split(CONV)(2, np.ones((8, 8, 8, 2), np.float32), bad) is None


def test_a_split_convnet_step_trains_like_the_unsplit_kernels():
    """End to end through the runtime (blocks on the pool, the filter gradient's finishing step)."""
    rng = np.random.default_rng(3)
    xs = rng.random((32, 12, 12, 1), dtype=np.float32)
    ys = rng.integers(0, 10, 32)
    f0 = (rng.standard_normal((5, 5, 1, 16)) * 0.2).astype(np.float32)
    w0 = (rng.standard_normal((12 * 12 * 16, 10)) * 0.05).astype(np.float32)
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, 12, 12, 1])
        y = af.placeholder(af.int64, [None])
        h = af.layers.conv2d(x, 16, 5, padding="same", activation=af.nn.relu,
                             kernel_initializer=af.constant_initializer(f0))
        logits = af.layers.dense(af.layers.flatten(h), 10, kernel_initializer=af.constant_initializer(w0))
        loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        grads = af.gradients(loss, af.trainable_variables())
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            got = sess.run(grads, {x: xs, y: ys})
    # The same gradients from the kernels called whole, one after the other.
    conv = get_kernel("Conv2D").factory(CONV)
    z = conv(xs, f0) + 0.0
    hz = np.maximum(z, 0)
    lg = hz.reshape(32, -1) @ w0
    p = np.exp(lg - lg.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(32), ys] -= 1
    d = p / 32
    dw0 = hz.reshape(32, -1).T @ d
    dz = (d @ w0.T).reshape(z.shape) * (z > 0)
    df0 = get_kernel("Conv2DBackpropFilter").factory(CONV)(xs, np.array(f0.shape, np.int32), dz)
    np.testing.assert_allclose(got[0], df0, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[2], dw0, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pooling_relu_grad_and_bias_grad_split(dtype):
    rng = np.random.default_rng(4)
    pool = {"ksize": (1, 2, 2, 1), "strides": (1, 2, 2, 1), "padding": "VALID", "data_format": "NHWC"}
    x = rng.standard_normal((9, 12, 10, 16)).astype(dtype)
    y = get_kernel("MaxPool").factory(pool)(x)
    np.testing.assert_array_equal(_run_split("MaxPool", pool, 2, x), y)
    g = rng.standard_normal(y.shape).astype(dtype)
    np.testing.assert_array_equal(_run_split("MaxPoolGrad", pool, 3, x, y, g),
                                  get_kernel("MaxPoolGrad").factory(pool)(x, y, g))

    big = rng.standard_normal((64, 28, 28, 8)).astype(dtype)
    feats = rng.standard_normal(big.shape).astype(dtype)
    feats.reshape(-1)[:3] = (0.0, -0.0, np.nan)
    whole = get_kernel("ReluGrad").factory({})(big, feats)
    np.testing.assert_array_equal(whole, np.multiply(big, feats > 0))
    np.testing.assert_array_equal(_run_split("ReluGrad", {}, 2, big, feats), whole)

    tol = 1e-4 if dtype == np.float32 else 1e-12
    want = big.astype(np.float64).sum(axis=(0, 1, 2))
    got = get_kernel("BiasAddGrad").factory({})(big)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 100)
    np.testing.assert_array_equal(got, big.reshape(-1, 8).sum(axis=0))      # numpy's own order
    np.testing.assert_allclose(_run_split("BiasAddGrad", {}, 2, big), want, rtol=tol, atol=tol * 100)
    assert get_kernel("BiasAddGrad").split({"data_format": "NCHW"})(2, big) is None


def test_gemm_blocks_split_the_bigger_operand(monkeypatch):
    from actorflow.kernels.cpu.matmul import gemm_blocks
    monkeypatch.undo()                  # the real MIN_SPLIT_MACS
    assert gemm_blocks(256, 1024, 784, 2) == ("cols", [(0, 512), (512, 1024)])     # x @ W: W is bigger
    assert gemm_blocks(1024, 1024, 256, 2)[0] == "rows"                              # h.T @ d: a tie
    assert gemm_blocks(3136, 1024, 64, 2)[0] == "rows"                               # flat.T @ d
    assert gemm_blocks(64, 1024, 3136, 2)[0] == "cols"                               # rows too few
    assert gemm_blocks(1024, 100, 5000, 2)[0] == "rows"                              # columns too few
    assert gemm_blocks(100, 100, 100, 2) is None
    assert gemm_blocks(256, 10, 1024, 2) is None                                     # under MIN_SPLIT_MACS a thread
    assert gemm_blocks(256, 1024, 10, 2) is None
    assert gemm_blocks(1024, 10, 256, 2) is None
    assert gemm_blocks(256, 64, 1024, 2)[0] == "rows"                                # 8.4M each: worth it


@pytest.mark.parametrize("op, slots, scalars", [
    ("ApplyGradientDescent", 0, (0.1,)),
    ("ApplyMomentum", 1, (0.1, "g", 0.9)),
    ("ApplyAdagrad", 1, (0.1, "g")),
    ("ApplyRMSProp", 2, (0.01, 0.9, 0.5, 1e-7, "g")),
    ("ApplyCenteredRMSProp", 3, (0.01, 0.9, 0.5, 1e-7, "g")),
    ("ApplyAdam", 2, (0.9, 0.999, 0.01, 0.9, 0.999, 1e-7, "g")),
])
def test_dense_updates_split_into_flat_blocks(op, slots, scalars):
    rng = np.random.default_rng(5)
    shape = (400, 700)
    var = rng.standard_normal(shape).astype(np.float32)
    slot_vals = [np.abs(rng.standard_normal(shape)).astype(np.float32) + 0.1 for _ in range(slots)]
    grad = rng.standard_normal(shape).astype(np.float32)

    def inputs(v, s):
        rest = [grad if x == "g" else np.float32(x) for x in scalars]
        if op == "ApplyGradientDescent":
            return [v, rest[0], grad]
        return [v, *s, *rest]
    whole_v, whole_s = var.copy(), [x.copy() for x in slot_vals]
    get_kernel(op).factory({})(*inputs(whole_v, whole_s))
    split_v, split_s = var.copy(), [x.copy() for x in slot_vals]
    out = _run_split(op, {}, 3, *inputs(split_v, split_s))
    assert out is split_v
    np.testing.assert_array_equal(split_v, whole_v)          # the same loop on slices: bit for bit
    for a, b in zip(split_s, whole_s):
        np.testing.assert_array_equal(a, b)
    small = np.ones((10, 10), np.float32)
    assert get_kernel(op).split({})(2, *inputs(small, [np.ones((10, 10), np.float32)] * slots)) is None


def test_a_big_adam_update_runs_on_the_pool_and_reads_stay_consistent():
    n = 600
    with af.Graph().as_default():
        v = af.Variable(np.zeros((n, n), np.float32), name="v")
        grad = af.ones([n, n]) * 0.5
        step = af.train.AdamOptimizer(0.01).apply_gradients([(grad, v)])
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            torn, reads, final = run_beside_readers(sess, v, step, 30)
    assert not torn, torn[:3]
    assert reads > 0
    np.testing.assert_allclose(final, np.full((n, n), -0.3), rtol=1e-3)    # 30 steps of lr for a constant grad
