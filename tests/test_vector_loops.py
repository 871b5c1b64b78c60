"""The kernels of kernels/cpu/vector_loops.py: the register-tiled direct convolution, which runs float32
convolutions with few input channels (LeNet's first layer): Conv2D, _FusedConv2D (+ ReLU, + 2x2
max-pool) and Conv2DBackpropFilter against the same kernels in float64 (im2col + GEMM), whole and split
by batch; and the 2x2 max-pool gradient (alone and with ReluGrad and BiasAddGrad) against numpy. Also
the im2col path's blocks where the filter is wide (conv._block_rows), with the same float64 check."""
import numpy as np
import pytest

from actorflow.kernels.cpu import conv
from actorflow.kernels.registry import get_kernel

CASES = [  # (input NHWC, filter HWIO, stride, padding)
    ((4, 28, 28, 1), (5, 5, 1, 32), 1, "SAME"),      # LeNet's first layer
    ((4, 10, 12, 3), (3, 3, 3, 64), 1, "VALID"),     # 8x10 output, 2 channel tiles
    ((5, 11, 9, 2), (3, 2, 2, 32), 2, "SAME"),       # strided: 6x5 output (odd: forward runs im2col)
    ((4, 6, 7, 1), (1, 4, 1, 32), 1, "SAME"),        # 1x4 filter: 4 taps, padded to the tap tile
]


def _attrs(stride, padding, **extra):
    return dict({"strides": (1, stride, stride, 1), "padding": padding, "data_format": "NHWC",
                 "dilations": (1, 1, 1, 1)}, **extra)


def _k(op, attrs):
    return get_kernel(op, "CPU").factory(attrs)


@pytest.fixture
def direct_calls(monkeypatch):
    """Counts the calls of the direct forward kernel and filter gradient, so that a test knows they ran."""
    calls = {"forward": 0, "filter": 0}
    fwd, grad = conv._direct_forward, conv._direct_filter_grad

    def counted_fwd(*a, **k):
        calls["forward"] += 1
        return fwd(*a, **k)

    def counted_grad(*a, **k):
        calls["filter"] += 1
        return grad(*a, **k)
    monkeypatch.setattr(conv, "_direct_forward", counted_fwd)
    monkeypatch.setattr(conv, "_direct_filter_grad", counted_grad)
    return calls


def _data(xshape, fshape, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xshape)
    f = rng.standard_normal(fshape) * 0.2
    b = rng.standard_normal(fshape[3]) * 0.5
    return x, f, b


@pytest.mark.parametrize("xshape,fshape,stride,padding", CASES)
def test_direct_forward_matches_float64(direct_calls, xshape, fshape, stride, padding):
    x, f, b = _data(xshape, fshape)
    attrs = _attrs(stride, padding)
    want = _k("Conv2D", attrs)(x, f)
    want_fused = _k("_FusedConv2D", dict(attrs, fused_ops=("BiasAdd", "Relu")))(x, f, b)
    x32, f32, b32 = (a.astype(np.float32) for a in (x, f, b))
    got = _k("Conv2D", attrs)(x32, f32)
    got_fused = _k("_FusedConv2D", dict(attrs, fused_ops=("BiasAdd", "Relu")))(x32, f32, b32)
    assert got.dtype == got_fused.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_fused, want_fused, rtol=1e-5, atol=1e-5)
    assert (got_fused >= 0).all()
    even = want.shape[1] % 2 == 0 and want.shape[2] % 2 == 0
    assert direct_calls["forward"] == (2 if even else 0)


@pytest.mark.parametrize("xshape,fshape,stride,padding", CASES[:2])
def test_direct_forward_with_max_pool_and_split(direct_calls, xshape, fshape, stride, padding):
    x, f, b = _data(xshape, fshape, seed=1)
    attrs = _attrs(stride, padding, fused_ops=("BiasAdd", "Relu", "MaxPool"), pool_ksize=(1, 2, 2, 1))
    z64, p64 = _k("_FusedConv2D", attrs)(x, f, b)
    x32, f32, b32 = (a.astype(np.float32) for a in (x, f, b))
    kdef = get_kernel("_FusedConv2D", "CPU")
    got = [kdef.factory(attrs)(x32, f32, b32)]
    _, thunks, finish = kdef.split(attrs)(2, x32, f32, b32)
    for t in thunks:
        t()
    got.append(finish())
    pool = _k("MaxPool", {"ksize": (1, 2, 2, 1), "strides": (1, 2, 2, 1), "padding": "VALID", "data_format": "NHWC"})
    for z, p in got:
        np.testing.assert_allclose(z, z64, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(p, pool(z))       # exactly the pool of the output it returns
        np.testing.assert_allclose(p, p64, rtol=1e-5, atol=1e-5)
    assert direct_calls["forward"] == 1 + len(thunks)


@pytest.mark.parametrize("xshape,fshape,stride,padding", CASES)
def test_direct_filter_gradient_matches_float64(direct_calls, xshape, fshape, stride, padding):
    x, f, _ = _data(xshape, fshape, seed=2)
    attrs = _attrs(stride, padding)
    dy = np.random.default_rng(3).standard_normal(_k("Conv2D", attrs)(x, f).shape)
    sizes = np.array(fshape, np.int32)
    want = _k("Conv2DBackpropFilter", attrs)(x, sizes, dy)
    x32, dy32 = x.astype(np.float32), dy.astype(np.float32)
    got = _k("Conv2DBackpropFilter", attrs)(x32, sizes, dy32)
    assert got.dtype == np.float32 and got.shape == fshape
    scale = np.abs(want).max()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale)
    _, thunks, finish = get_kernel("Conv2DBackpropFilter", "CPU").split(attrs)(2, x32, sizes, dy32)
    for t in thunks:
        t()
    np.testing.assert_allclose(finish(), want, rtol=1e-4, atol=1e-5 * scale)
    assert direct_calls["filter"] == 1 + len(thunks)


def test_direct_kernels_leave_what_they_do_not_fit_to_im2col(direct_calls):
    """float64, 4+ input channels, output channels not a multiple of 32, dilation: no direct kernel."""
    rng = np.random.default_rng(4)
    for dtype, fshape, dil in ((np.float64, (3, 3, 1, 32), 1), (np.float32, (3, 3, 4, 32), 1),
                               (np.float32, (3, 3, 1, 16), 1), (np.float32, (3, 3, 1, 32), 2)):
        attrs = dict(_attrs(1, "SAME"), dilations=(1, dil, dil, 1))
        x = rng.standard_normal((2, 8, 8, fshape[2])).astype(dtype)
        y = _k("Conv2D", attrs)(x, rng.standard_normal(fshape).astype(dtype))
        _k("Conv2DBackpropFilter", attrs)(x, np.array(fshape, np.int32), y)
    assert direct_calls == {"forward": 0, "filter": 0}


def _np_max_pool_grad_2x2(x, g):
    """MaxPoolGrad of a 2x2 stride-2 pool covering `x` exactly: g to each window's first maximum."""
    n, h, w, c = x.shape
    win = x.reshape(n, h // 2, 2, w // 2, 2, c).transpose(0, 1, 3, 5, 2, 4).reshape(n, h // 2, w // 2, c, 4)
    first = np.argmax(win, axis=-1)             # the first maximum in row-major window order
    d = np.where(np.arange(4) == first[..., None], g[..., None], 0).astype(x.dtype)
    return d.reshape(n, h // 2, w // 2, c, 2, 2).transpose(0, 1, 4, 2, 5, 3).reshape(x.shape)


@pytest.mark.parametrize("shape", [(4, 28, 28, 32), (3, 6, 4, 16)])
def test_vector_max_pool_gradient_matches_numpy(shape):
    rng = np.random.default_rng(5)
    x = np.maximum(np.round(rng.standard_normal(shape) * 2) / 2, 0).astype(np.float32)   # ReLU output: ties
    attrs = {"ksize": (1, 2, 2, 1), "strides": (1, 2, 2, 1), "padding": "VALID", "data_format": "NHWC"}
    y = _k("MaxPool", attrs)(x)
    g = rng.standard_normal(y.shape).astype(np.float32)
    g.reshape(-1)[::7] = np.nan                 # ReluGrad writes g * 0 where x <= 0: NaN stays NaN there
    want = _np_max_pool_grad_2x2(x, g)
    np.testing.assert_array_equal(_k("MaxPoolGrad", attrs)(x, y, g), want)
    want_relu = np.where(x > 0, want, want * 0)
    dx, db = _k("_FusedMaxPoolGrad", dict(attrs, fused_ops=("ReluGrad", "BiasAddGrad")))(x, y, g)
    np.testing.assert_array_equal(dx, want_relu)
    np.testing.assert_allclose(db, want_relu.astype(np.float64).sum(axis=(0, 1, 2)), rtol=1e-5, atol=1e-5)
    assert dx.dtype == db.dtype == np.float32


def test_both_tile_widths():
    """The convolution tiles come in 8 and 16 lanes (kernels/cpu/vector_loops.py: 16 on AVX-512 CPUs);
    this module's tests run again, in a subprocess, with the width this process did not take. Without
    AVX-512, LLVM splits the 16-lane vectors in two: slower, the same results."""
    import os
    import subprocess
    import sys

    from actorflow.kernels.cpu import vector_loops
    other = 8 if vector_loops._TW == 16 else 16
    env = dict(os.environ, AF_CONV_LANES=str(other))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k", "not both_tile"],
                         capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "passed" in out.stdout


def test_im2col_blocks_of_a_wide_filter_match_float64():
    """A filter matrix bigger than one column block (K x O = 2304 x 128) takes blocks of 256 rows
    (conv._block_rows): the forward pass, the input gradient and the filter gradient over several
    blocks and a partial one against the same kernels in float64."""
    from actorflow.kernels.cpu import conv as conv_mod
    assert conv_mod._block_rows(600, 2304, 128) == 256 and conv_mod._block_rows(600, 800, 64) == 327
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 14, 14, 256)).astype(np.float32)       # 588 output rows: 256, 256, 76
    f = (rng.standard_normal((3, 3, 256, 128)) * 0.05).astype(np.float32)
    attrs = _attrs(1, "SAME")
    y = _k("Conv2D", attrs)(x, f)
    y64 = _k("Conv2D", attrs)(x.astype(np.float64), f.astype(np.float64))
    np.testing.assert_allclose(y, y64, rtol=1e-4, atol=1e-4)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    sizes = np.array(x.shape, np.int32)
    dx = _k("Conv2DBackpropInput", attrs)(sizes, f, dy)
    dx64 = _k("Conv2DBackpropInput", attrs)(sizes, f.astype(np.float64), dy.astype(np.float64))
    np.testing.assert_allclose(dx, dx64, rtol=1e-4, atol=1e-4)
    df = _k("Conv2DBackpropFilter", attrs)(x, np.array(f.shape, np.int32), dy)
    df64 = _k("Conv2DBackpropFilter", attrs)(x.astype(np.float64), np.array(f.shape, np.int32), dy.astype(np.float64))
    np.testing.assert_allclose(df, df64, rtol=1e-4, atol=1e-3)
