"""CPU neural-network kernels against straightforward numpy reference loops."""
import numpy as np
import pytest

from actorflow.kernels.registry import get_kernel


def kernel(op, **attrs):
    return get_kernel(op, "CPU").factory(attrs)


def cost(op, *inputs):
    return get_kernel(op, "CPU").cost(*inputs)


rng = np.random.default_rng(1234)


def randn(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# ----------------------------------------------------------------------------------------------
# MatMul, BatchMatMulV2
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul_transposes(ta, tb):
    a, b = randn(5, 7), randn(7, 3)
    a_in = np.ascontiguousarray(a.T) if ta else a
    b_in = np.ascontiguousarray(b.T) if tb else b
    out = kernel("MatMul", transpose_a=ta, transpose_b=tb)(a_in, b_in)
    assert out.dtype == np.float32 and out.shape == (5, 3)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    assert cost("MatMul", a_in, b_in) == 16 * 16 * 16      # dimensions under a register block count as 16


def test_matmul_cost_is_multiply_adds_with_narrow_dimensions_padded():
    assert cost("MatMul", np.zeros((256, 1024)), np.zeros((1024, 512))) == 256 * 1024 * 512
    assert cost("MatMul", np.zeros((256, 1024)), np.zeros((1024, 10))) == 256 * 1024 * 16
    assert cost("MatMul", np.zeros((1024, 256)), np.zeros((256, 10))) == 1024 * 256 * 16     # transpose_a
    assert cost("MatMul", np.zeros((256, 10)), np.zeros((1024, 10))) == 256 * 16 * 1024      # transpose_b


def test_matmul_shape_error_names_op():
    with pytest.raises(ValueError, match="MatMul"):
        kernel("MatMul")(randn(2, 3), randn(4, 5))


def test_batch_matmul_broadcast_and_adjoint():
    x, y = randn(2, 1, 3, 4), randn(5, 4, 6)
    out = kernel("BatchMatMulV2")(x, y)
    assert out.shape == (2, 5, 3, 6)
    np.testing.assert_allclose(out, np.einsum("abij,bjk->abik", x, y), rtol=1e-5, atol=1e-5)
    c = (randn(3, 4, 2) + 1j * randn(3, 4, 2)).astype(np.complex64)
    d = (randn(3, 5, 4) + 1j * randn(3, 5, 4)).astype(np.complex64)
    out = kernel("BatchMatMulV2", adj_x=True, adj_y=True)(c, d)
    ref = np.conj(np.swapaxes(c, -1, -2)) @ np.conj(np.swapaxes(d, -1, -2))
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    assert cost("BatchMatMulV2", x, y) == 10 * 3 * 4 * 6


# ----------------------------------------------------------------------------------------------
# Softmax family
# ----------------------------------------------------------------------------------------------

def ref_log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_softmax_and_log_softmax(dtype):
    x = (randn(4, 3, 11) * 5).astype(dtype)
    x[0, 0, 0] = 80  # large logits must not overflow
    sm, lsm = kernel("Softmax")(x), kernel("LogSoftmax")(x)
    assert sm.dtype == dtype and lsm.dtype == dtype and sm.shape == x.shape
    tol = 1e-3 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(sm, np.exp(ref_log_softmax(x)), rtol=tol, atol=tol)
    np.testing.assert_allclose(lsm, ref_log_softmax(x), rtol=tol, atol=tol * 10)


def test_softmax_vector_and_empty():
    v = randn(7)
    np.testing.assert_allclose(kernel("Softmax")(v), np.exp(ref_log_softmax(v)), rtol=1e-5)
    assert kernel("LogSoftmax")(np.zeros((0, 3), np.float32)).shape == (0, 3)


def test_softmax_extreme_logits_stay_finite():
    x = np.array([[1000.0, 0.0, -1000.0], [-1e30, -1e30, -1e30]], np.float32)
    sm = kernel("Softmax")(x)
    assert np.all(np.isfinite(sm))
    np.testing.assert_allclose(sm[0], [1, 0, 0], atol=1e-7)
    np.testing.assert_allclose(sm[1], [1 / 3] * 3, rtol=1e-6)


def test_softmax_cross_entropy_with_logits():
    x = randn(6, 5) * 3
    x[0, 1] = 500
    labels = rng.random((6, 5)).astype(np.float32)
    labels /= labels.sum(axis=1, keepdims=True)
    loss, back = kernel("SoftmaxCrossEntropyWithLogits")(x, labels)
    assert loss.dtype == np.float32 and loss.shape == (6,) and back.shape == (6, 5)
    lsm = ref_log_softmax(x)
    np.testing.assert_allclose(loss, -(labels * lsm).sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(back, np.exp(lsm) - labels, rtol=1e-5, atol=1e-6)
    assert np.all(np.isfinite(loss))


def test_sparse_softmax_cross_entropy_with_logits():
    x = randn(7, 4) * 4
    x[3, 2] = -400
    for ldtype in (np.int32, np.int64):
        labels = np.array([0, 3, 1, 2, 2, 0, 1], ldtype)
        loss, back = kernel("SparseSoftmaxCrossEntropyWithLogits")(x, labels)
        assert loss.dtype == np.float32 and back.dtype == np.float32
        lsm = ref_log_softmax(x)
        rows = np.arange(7)
        np.testing.assert_allclose(loss, -lsm[rows, labels], rtol=1e-5, atol=1e-5)
        onehot = np.eye(4)[labels]
        np.testing.assert_allclose(back, np.exp(lsm) - onehot, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bad", [-1, 4, 17])
def test_sparse_xent_rejects_out_of_range_labels(bad):
    labels = np.array([0, bad, 1], np.int64)
    with pytest.raises(ValueError, match=rf"label value of {bad}.*\[0, 4\)"):
        kernel("SparseSoftmaxCrossEntropyWithLogits")(randn(3, 4), labels)


# ----------------------------------------------------------------------------------------------
# BiasAdd, BiasAddGrad
# ----------------------------------------------------------------------------------------------

def test_bias_add_and_grad_nhwc_nchw():
    x, b = randn(2, 3, 4, 5), randn(5)
    np.testing.assert_allclose(kernel("BiasAdd", data_format="NHWC")(x, b), x + b)
    np.testing.assert_allclose(kernel("BiasAddGrad", data_format="NHWC")(x), x.sum(axis=(0, 1, 2)), rtol=1e-5)
    xc, bc = randn(2, 5, 3, 4), randn(5)
    np.testing.assert_allclose(kernel("BiasAdd", data_format="NCHW")(xc, bc), xc + bc[:, None, None])
    np.testing.assert_allclose(kernel("BiasAddGrad", data_format="NCHW")(xc), xc.sum(axis=(0, 2, 3)), rtol=1e-5)
    g = randn(8, 3)
    assert kernel("BiasAddGrad")(g).dtype == np.float32
    with pytest.raises(ValueError, match="BiasAdd"):
        kernel("BiasAdd")(x, randn(4))


# ----------------------------------------------------------------------------------------------
# Convolution: naive reference loops
# ----------------------------------------------------------------------------------------------

def tf_pads(size, k, stride, dilation, padding):
    """Output size and (before, after) padding, as TensorFlow computes them."""
    eff = (k - 1) * dilation + 1
    if padding == "VALID":
        return (size - eff) // stride + 1, (0, 0)
    out = -(-size // stride)
    total = max((out - 1) * stride + eff - size, 0)
    return out, (total // 2, total - total // 2)


def ref_conv(x, f, stride, padding, dilation=(1, 1)):
    n, h, w, c = x.shape
    kh, kw, _, co = f.shape
    oh, (pt, pb) = tf_pads(h, kh, stride[0], dilation[0], padding)
    ow, (pl, pr) = tf_pads(w, kw, stride[1], dilation[1], padding)
    xp = np.pad(x.astype(np.float64), ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    out = np.zeros((n, oh, ow, co))
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                for b in range(kw):
                    patch = xp[:, i * stride[0] + a * dilation[0], j * stride[1] + b * dilation[1], :]
                    out[:, i, j, :] += patch @ f[a, b]
    return out


def ref_conv_backprop(x, f, dy, stride, padding, dilation=(1, 1)):
    """(dx, df) by accumulating every output position's contribution in the padded frame."""
    n, h, w, c = x.shape
    kh, kw, _, co = f.shape
    oh, (pt, pb) = tf_pads(h, kh, stride[0], dilation[0], padding)
    ow, (pl, pr) = tf_pads(w, kw, stride[1], dilation[1], padding)
    xp = np.pad(x.astype(np.float64), ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    dxp = np.zeros_like(xp)
    df = np.zeros(f.shape)
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                for b in range(kw):
                    hh, ww = i * stride[0] + a * dilation[0], j * stride[1] + b * dilation[1]
                    dxp[:, hh, ww, :] += dy[:, i, j, :] @ f[a, b].T
                    df[a, b] += xp[:, hh, ww, :].T @ dy[:, i, j, :]
    return dxp[:, pt:pt + h, pl:pl + w, :], df


CONV_CASES = [
    # (input NHWC, filter HWIO, strides, padding, dilations)
    ((2, 7, 9, 3), (3, 3, 3, 4), (1, 1), "SAME", (1, 1)),
    ((2, 7, 9, 3), (3, 3, 3, 4), (2, 2), "SAME", (1, 1)),
    ((1, 8, 8, 2), (3, 3, 2, 2), (2, 2), "SAME", (1, 1)),   # even size: extra pad goes after
    ((2, 5, 6, 1), (5, 5, 1, 3), (1, 1), "SAME", (1, 1)),
    ((2, 9, 7, 2), (3, 2, 2, 5), (2, 1), "VALID", (1, 1)),
    ((1, 11, 10, 2), (3, 3, 2, 3), (1, 1), "SAME", (2, 2)),
    ((1, 11, 10, 2), (3, 3, 2, 3), (2, 2), "VALID", (2, 1)),
    ((3, 4, 5, 6), (1, 1, 6, 2), (1, 1), "SAME", (1, 1)),    # pointwise: no im2col
    # Four or more channels pack the columns row-major, fewer K-major (see conv._KMAJOR_MAX_CHANNELS).
    ((2, 7, 9, 5), (3, 3, 5, 4), (2, 2), "SAME", (1, 1)),
    ((1, 9, 8, 6), (3, 2, 6, 3), (1, 2), "VALID", (2, 1)),
    ((2, 10, 7, 1), (5, 3, 1, 4), (2, 3), "SAME", (1, 1)),   # K-major with a strided (non-contiguous) run
    ((3, 6, 6, 4), (6, 6, 4, 2), (1, 1), "VALID", (1, 1)),   # window as big as the input: one pixel out
    ((2, 5, 5, 4), (1, 1, 4, 3), (2, 2), "VALID", (1, 1)),
]


def conv_attrs(strides, padding, dilations):
    return dict(strides=(1, *strides, 1), padding=padding, data_format="NHWC", dilations=(1, *dilations, 1))


@pytest.mark.parametrize("xs,fs,strides,padding,dilations", CONV_CASES)
def test_conv2d_matches_reference(xs, fs, strides, padding, dilations):
    x, f = randn(*xs), randn(*fs)
    out = kernel("Conv2D", **conv_attrs(strides, padding, dilations))(x, f)
    ref = ref_conv(x, f, strides, padding, dilations)
    assert out.dtype == np.float32 and out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs,fs,strides,padding,dilations", CONV_CASES)
def test_conv2d_backprops_match_reference(xs, fs, strides, padding, dilations):
    x, f = randn(*xs), randn(*fs)
    attrs = conv_attrs(strides, padding, dilations)
    dy = randn(*ref_conv(x, f, strides, padding, dilations).shape)
    dx = kernel("Conv2DBackpropInput", **attrs)(np.array(xs, np.int32), f, dy)
    df = kernel("Conv2DBackpropFilter", **attrs)(x, np.array(fs, np.int32), dy)
    rdx, rdf = ref_conv_backprop(x, f, dy, strides, padding, dilations)
    assert dx.shape == xs and df.shape == fs and dx.dtype == np.float32 and df.dtype == np.float32
    np.testing.assert_allclose(dx, rdx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(df, rdf, rtol=1e-4, atol=1e-4)


def test_conv2d_same_stride2_known_answer():
    # TF puts the odd padding pixel after: a 4x4 input, 3x3 window, stride 2 reads rows/cols 0-2, 2-4.
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    f = np.ones((3, 3, 1, 1), np.float32)
    out = kernel("Conv2D", **conv_attrs((2, 2), "SAME", (1, 1)))(x, f)
    np.testing.assert_array_equal(out[0, :, :, 0], [[45, 39], [66, 50]])


def test_conv2d_batch_chunking_gives_same_result(monkeypatch):
    from actorflow.kernels.cpu import conv
    x, f = randn(5, 9, 8, 3), randn(3, 3, 3, 4)
    attrs = conv_attrs((1, 1), "SAME", (1, 1))
    dy = randn(5, 9, 8, 4)
    whole = (kernel("Conv2D", **attrs)(x, f), kernel("Conv2DBackpropInput", **attrs)(np.array(x.shape), f, dy),
             kernel("Conv2DBackpropFilter", **attrs)(x, np.array(f.shape), dy))
    monkeypatch.setattr(conv, "_BLOCK_ELEMENTS", 27 * 20)  # 20-row blocks: they straddle images and rows
    chunked = (kernel("Conv2D", **attrs)(x, f), kernel("Conv2DBackpropInput", **attrs)(np.array(x.shape), f, dy),
               kernel("Conv2DBackpropFilter", **attrs)(x, np.array(f.shape), dy))
    for a, b in zip(whole, chunked):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", ["rows", "kmajor"])
@pytest.mark.parametrize("xs,fs,strides,padding,dilations", CONV_CASES[:4] + CONV_CASES[9:])
def test_conv_kernels_any_layout_and_block_size(monkeypatch, layout, xs, fs, strides, padding, dilations):
    """Both ways of packing the columns, with blocks of 7 rows (they end mid-row and mid-image),
    for Conv2D, _FusedConv2D (+ ReLU), and both gradients, in float32 and float64."""
    from actorflow.kernels.cpu import conv
    monkeypatch.setattr(conv, "_KMAJOR_MAX_CHANNELS", 1 << 30 if layout == "kmajor" else 0)
    monkeypatch.setattr(conv, "_BLOCK_ELEMENTS", 7 * fs[0] * fs[1] * fs[2])
    attrs = conv_attrs(strides, padding, dilations)
    for dtype, tol in ((np.float32, 1e-4), (np.float64, 1e-10)):
        x, f, bias = randn(*xs, dtype=dtype), randn(*fs, dtype=dtype), randn(fs[3], dtype=dtype)
        ref = ref_conv(x, f, strides, padding, dilations)
        out = kernel("Conv2D", **attrs)(x, f)
        assert out.dtype == dtype
        np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)
        fused = kernel("_FusedConv2D", fused_ops=("BiasAdd", "Relu"), **attrs)(x, f, bias)
        np.testing.assert_allclose(fused, np.maximum(ref + bias, 0), rtol=tol, atol=tol)
        fused = kernel("_FusedConv2D", fused_ops=("BiasAdd",), **attrs)(x, f, bias)
        np.testing.assert_allclose(fused, ref + bias, rtol=tol, atol=tol)
        dy = randn(*ref.shape, dtype=dtype)
        rdx, rdf = ref_conv_backprop(x, f, dy, strides, padding, dilations)
        np.testing.assert_allclose(kernel("Conv2DBackpropInput", **attrs)(np.array(xs, np.int32), f, dy), rdx,
                                   rtol=tol, atol=tol)
        df = kernel("Conv2DBackpropFilter", **attrs)(x, np.array(fs, np.int32), dy)
        assert df.dtype == dtype and df.shape == fs
        np.testing.assert_allclose(df, rdf, rtol=tol, atol=tol)


def test_conv2d_lenet_shapes_match_reference():
    """LeNet's layers (batch 4): 28x28x1 -> 5x5x32 SAME, and 14x14x32 -> 5x5x64 SAME, whose blocks
    cover several images each."""
    attrs = conv_attrs((1, 1), "SAME", (1, 1))
    for xs, fs in (((4, 28, 28, 1), (5, 5, 1, 32)), ((4, 14, 14, 32), (5, 5, 32, 64))):
        x, f = randn(*xs), randn(*fs)
        ref = ref_conv(x, f, (1, 1), "SAME")
        np.testing.assert_allclose(kernel("Conv2D", **attrs)(x, f), ref, rtol=1e-4, atol=1e-3)
        dy = randn(*ref.shape)
        rdx, rdf = ref_conv_backprop(x, f, dy, (1, 1), "SAME")
        np.testing.assert_allclose(kernel("Conv2DBackpropInput", **attrs)(np.array(xs), f, dy), rdx,
                                   rtol=1e-4, atol=1e-3)
        # The second layer's filter gradient runs as Winograd F(5x5, 2x2), whose rounding error scales
        # with the largest gradient entry (sums of 784 unit-variance products here), not with each one.
        np.testing.assert_allclose(kernel("Conv2DBackpropFilter", **attrs)(x, np.array(fs), dy), rdf,
                                   rtol=1e-4, atol=max(1e-3, 2e-5 * float(np.abs(rdf).max())))


def test_conv2d_nchw_matches_nhwc():
    x, f = randn(2, 7, 6, 3), randn(3, 3, 3, 4)
    nhwc = kernel("Conv2D", **conv_attrs((2, 2), "SAME", (1, 1)))(x, f)
    nchw = kernel("Conv2D", strides=(1, 1, 2, 2), padding="SAME", data_format="NCHW",
                  dilations=(1, 1, 1, 1))(x.transpose(0, 3, 1, 2), f)
    np.testing.assert_allclose(nchw, nhwc.transpose(0, 3, 1, 2), rtol=1e-5, atol=1e-5)


def test_conv2d_errors_name_the_op():
    with pytest.raises(ValueError, match="Conv2D: input depth 3"):
        kernel("Conv2D", **conv_attrs((1, 1), "SAME", (1, 1)))(randn(1, 4, 4, 3), randn(3, 3, 2, 1))
    with pytest.raises(ValueError, match="Conv2D: filter 5x5"):
        kernel("Conv2D", **conv_attrs((1, 1), "VALID", (1, 1)))(randn(1, 4, 4, 1), randn(5, 5, 1, 1))
    with pytest.raises(ValueError, match="Conv2DBackpropInput: out_backprop"):
        kernel("Conv2DBackpropInput", **conv_attrs((1, 1), "SAME", (1, 1)))(
            np.array([1, 4, 4, 1]), randn(3, 3, 1, 2), randn(1, 3, 3, 2))


def test_conv_costs_are_multiply_adds():
    x, f = randn(2, 8, 8, 3), randn(3, 3, 3, 4)
    assert cost("Conv2D", x, f) == 2 * 8 * 8 * 3 * 3 * 3 * 4
    dy = randn(2, 8, 8, 4)
    assert cost("Conv2DBackpropInput", np.array(x.shape), f, dy) == 2 * 8 * 8 * 4 * 27
    assert cost("Conv2DBackpropFilter", x, np.array(f.shape), dy) == 2 * 8 * 8 * 4 * 27


# ----------------------------------------------------------------------------------------------
# Pooling: naive reference loops
# ----------------------------------------------------------------------------------------------

def windows(h, w, k, s, padding):
    """Yields (i, j, rows, cols) for every output pixel: its window clipped to the real input."""
    oh, (pt, _) = tf_pads(h, k[0], s[0], 1, padding)
    ow, (pl, _) = tf_pads(w, k[1], s[1], 1, padding)
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * s[0] - pt, j * s[1] - pl
            yield i, j, range(max(h0, 0), min(h0 + k[0], h)), range(max(w0, 0), min(w0 + k[1], w))


def ref_pool(x, k, s, padding, kind):
    n, h, w, c = x.shape
    oh, _ = tf_pads(h, k[0], s[0], 1, padding)
    ow, _ = tf_pads(w, k[1], s[1], 1, padding)
    out = np.zeros((n, oh, ow, c))
    for i, j, rows, cols in windows(h, w, k, s, padding):
        patch = x[:, rows.start:rows.stop, cols.start:cols.stop, :].astype(np.float64)
        out[:, i, j, :] = patch.max(axis=(1, 2)) if kind == "max" else patch.mean(axis=(1, 2))
    return out


def ref_max_pool_grad(x, g, k, s, padding):
    n, h, w, c = x.shape
    dx = np.zeros(x.shape)
    for i, j, rows, cols in windows(h, w, k, s, padding):
        for b in range(n):
            for ch in range(c):
                best, arg = None, None
                for r in rows:  # first maximum in row-major window order
                    for q in cols:
                        if best is None or x[b, r, q, ch] > best:
                            best, arg = x[b, r, q, ch], (r, q)
                dx[b, arg[0], arg[1], ch] += g[b, i, j, ch]
    return dx


def ref_avg_pool_grad(shape, g, k, s, padding):
    n, h, w, c = shape
    dx = np.zeros(shape)
    for i, j, rows, cols in windows(h, w, k, s, padding):
        dx[:, rows.start:rows.stop, cols.start:cols.stop, :] += (g[:, i, j, :] / (len(rows) * len(cols)))[:, None, None, :]
    return dx


POOL_CASES = [
    # (input, ksize, strides, padding)
    ((2, 7, 9, 3), (2, 2), (2, 2), "SAME"),
    ((2, 7, 9, 3), (3, 3), (2, 2), "SAME"),    # overlapping windows, odd sizes
    ((1, 8, 8, 2), (3, 3), (2, 2), "SAME"),
    ((2, 6, 5, 4), (3, 2), (1, 2), "VALID"),
    ((1, 5, 5, 1), (5, 5), (1, 1), "SAME"),
    ((2, 28, 28, 3), (2, 2), (2, 2), "VALID"),
    # Windows that tile the input (ksize == strides) take MaxPoolGrad's write-once kernel.
    ((2, 7, 8, 3), (3, 3), (3, 3), "SAME"),
    ((1, 7, 9, 2), (2, 3), (2, 3), "VALID"),     # ksize == strides, but row 6 is in no window
    ((2, 6, 9, 2), (2, 3), (2, 3), "VALID"),
    ((3, 5, 5, 33), (2, 2), (2, 2), "SAME"),
]


def test_max_pool_grad_leaves_no_pixel_unwritten():
    """Every pixel no window reads gets a zero gradient, whatever the memory held before."""
    for _ in range(3):
        np.full(10_000, np.nan, np.float32)     # leaves NaNs in freed memory a new array may reuse
        x = randn(4, 7, 9, 3)
        attrs = pool_attrs((2, 3), (2, 3), "VALID")
        out = kernel("MaxPool", **attrs)(x)
        dx = kernel("MaxPoolGrad", **attrs)(x, out, randn(*out.shape))
        assert np.all(dx[:, 6] == 0) and np.isfinite(dx).all()


def pool_attrs(k, s, padding):
    return dict(ksize=(1, *k, 1), strides=(1, *s, 1), padding=padding, data_format="NHWC")


@pytest.mark.parametrize("xs,k,s,padding", POOL_CASES)
def test_max_pool_and_grad(xs, k, s, padding):
    x = randn(*xs)
    attrs = pool_attrs(k, s, padding)
    out = kernel("MaxPool", **attrs)(x)
    np.testing.assert_array_equal(out, ref_pool(x, k, s, padding, "max").astype(np.float32))
    g = randn(*out.shape)
    dx = kernel("MaxPoolGrad", **attrs)(x, out, g)
    assert dx.shape == x.shape and dx.dtype == np.float32
    np.testing.assert_allclose(dx, ref_max_pool_grad(x, g, k, s, padding), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("xs,k,s,padding", POOL_CASES)
def test_avg_pool_and_grad(xs, k, s, padding):
    x = randn(*xs)
    attrs = pool_attrs(k, s, padding)
    out = kernel("AvgPool", **attrs)(x)
    np.testing.assert_allclose(out, ref_pool(x, k, s, padding, "avg"), rtol=1e-5, atol=1e-6)
    g = randn(*out.shape)
    dx = kernel("AvgPoolGrad", **attrs)(np.array(xs, np.int32), g)
    assert dx.shape == x.shape and dx.dtype == np.float32
    np.testing.assert_allclose(dx, ref_avg_pool_grad(xs, g, k, s, padding), rtol=1e-5, atol=1e-6)
    # AvgPoolGrad is the adjoint of AvgPool.
    np.testing.assert_allclose(np.sum(out * g, dtype=np.float64), np.sum(x * dx, dtype=np.float64), rtol=1e-4)


def test_max_pool_grad_ties_go_to_first_max():
    x = np.zeros((1, 4, 4, 1), np.float32)
    x[0, 1, 1, 0] = x[0, 1, 2, 0] = x[0, 2, 1, 0] = 5.0
    attrs = pool_attrs((3, 3), (1, 1), "VALID")
    out = kernel("MaxPool", **attrs)(x)
    dx = kernel("MaxPoolGrad", **attrs)(x, out, np.ones_like(out))
    # Every window holds all three 5s; the first in row-major order, (1, 1), takes all four grads.
    assert dx[0, 1, 1, 0] == 4 and dx.sum() == 4
    flat = np.full((1, 3, 3, 2), -np.inf, np.float32)
    dflat = kernel("MaxPoolGrad", **pool_attrs((2, 2), (1, 1), "SAME"))(flat, flat, np.ones((1, 3, 3, 2), np.float32))
    assert dflat.sum() == 18 and np.all(np.isfinite(dflat))


def test_tiled_max_pool_grad_ties_and_infinities_go_to_first_max():
    attrs = pool_attrs((2, 2), (2, 2), "VALID")
    x = np.zeros((1, 4, 4, 2), np.float32)
    x[0, 0, 1, 0] = x[0, 1, 0, 0] = 3.0                      # window (0, 0), channel 0: a tie
    x[0, 2:, 2:, 1] = -np.inf                               # window (1, 1), channel 1: all -inf
    out = kernel("MaxPool", **attrs)(x)
    dx = kernel("MaxPoolGrad", **attrs)(x, out, np.full(out.shape, 2.0, np.float32))
    assert dx[0, 0, 1, 0] == 2 and dx[0, 1, 0, 0] == 0
    assert dx[0, 2, 2, 1] == 2 and dx[0, 2:, 2:, 1].sum() == 2
    assert dx.sum() == 2 * out.size


def test_max_pool_same_padding_never_wins():
    x = -np.abs(randn(1, 5, 5, 2)) - 1  # all negative: a zero pad would win if it were a candidate
    out = kernel("MaxPool", **pool_attrs((3, 3), (2, 2), "SAME"))(x)
    assert np.all(out < 0)


def test_half_precision_conv_and_pool_run_in_float32():
    x, f = randn(2, 6, 5, 3), randn(3, 3, 3, 2)
    attrs = conv_attrs((2, 2), "SAME", (1, 1))
    out = kernel("Conv2D", **attrs)(x.astype(np.float16), f.astype(np.float16))
    assert out.dtype == np.float16
    ref = ref_conv(x.astype(np.float16), f.astype(np.float16).astype(np.float64), (2, 2), "SAME")
    np.testing.assert_allclose(out, ref, rtol=1e-2, atol=1e-2)
    dx = kernel("Conv2DBackpropInput", **attrs)(np.array(x.shape, np.int32), f.astype(np.float16),
                                                out.astype(np.float16))
    assert dx.dtype == np.float16 and dx.shape == x.shape
    pooled = kernel("MaxPool", **pool_attrs((2, 2), (2, 2), "SAME"))(x.astype(np.float16))
    assert pooled.dtype == np.float16
    np.testing.assert_array_equal(pooled, ref_pool(x.astype(np.float16), (2, 2), (2, 2), "SAME", "max"))


def test_pool_nchw_matches_nhwc():
    x = randn(2, 7, 6, 3)
    nhwc = kernel("AvgPool", **pool_attrs((3, 3), (2, 2), "SAME"))(x)
    nchw = kernel("AvgPool", ksize=(1, 1, 3, 3), strides=(1, 1, 2, 2), padding="SAME",
                  data_format="NCHW")(x.transpose(0, 3, 1, 2))
    np.testing.assert_allclose(nchw, nhwc.transpose(0, 3, 1, 2), rtol=1e-6)
