"""The Winograd F(2x2, 5x5) convolution path (kernels/cpu/winograd.py) against float64 numpy references,
through the registered CPU kernels that dispatch to it (and the fallback they take when it does not apply)."""
import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from actorflow.kernels.cpu import winograd
from actorflow.kernels.registry import get_kernel


def kernel(op, **attrs):
    return get_kernel(op, "CPU").factory(attrs)


def conv_attrs(padding, **extra):
    return dict({"strides": (1, 1, 1, 1), "padding": padding, "data_format": "NHWC", "dilations": (1, 1, 1, 1)},
                **extra)


def _pads(h, w, padding):
    if padding == "VALID":
        return (0, 0), (0, 0)
    return (2, 2), (2, 2)            # SAME, stride 1, 5x5: 2 before and 2 after


def ref_conv(x, f, padding):
    ph, pw = _pads(x.shape[1], x.shape[2], padding)
    xp = np.pad(x.astype(np.float64), ((0, 0), ph, pw, (0, 0)))
    win = sliding_window_view(xp, (5, 5), axis=(1, 2))                  # N, OH, OW, C, 5, 5
    return np.einsum("nhwcab,abco->nhwo", win, f.astype(np.float64), optimize=True)


def ref_backprops(x, f, dy, padding):
    """(dx, df) in float64: the adjoints of ref_conv."""
    ph, pw = _pads(x.shape[1], x.shape[2], padding)
    xp = np.pad(x.astype(np.float64), ((0, 0), ph, pw, (0, 0)))
    win = sliding_window_view(xp, (5, 5), axis=(1, 2))
    df = np.einsum("nhwcab,nhwo->abco", win, dy.astype(np.float64), optimize=True)
    dxp = np.zeros_like(xp)
    oh, ow = dy.shape[1:3]
    for a in range(5):
        for b in range(5):
            dxp[:, a:a + oh, b:b + ow] += np.einsum("nhwo,co->nhwc", dy.astype(np.float64), f[a, b].astype(np.float64))
    dx = dxp[:, ph[0]:ph[0] + x.shape[1], pw[0]:pw[0] + x.shape[2]]
    return dx, df


def _close(got, ref):
    scale = max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=2e-5 * scale)


@pytest.fixture
def calls(monkeypatch):
    """Counts the Winograd kernels that ran (the dispatch must actually reach them)."""
    seen = {"convolve": 0, "filter": 0}
    for name, key in (("convolve", "convolve"), ("filter_gradient_sums", "filter")):
        fn = getattr(winograd, name)

        def counted(*a, _fn=fn, _key=key, **k):
            seen[_key] += 1
            return _fn(*a, **k)
        monkeypatch.setattr(winograd, name, counted)
    return seen


# batch, height, width, in channels, out channels, padding: odd sizes leave partial tiles at the edges
CASES = [(2, 14, 14, 32, 64, "SAME"), (3, 13, 11, 16, 16, "SAME"), (2, 9, 10, 64, 16, "VALID"),
         (1, 7, 7, 20, 48, "SAME"), (5, 6, 5, 16, 17, "VALID")]


@pytest.mark.parametrize("n, h, w, c, o, padding", CASES)
def test_winograd_convolutions_match_float64_reference(calls, n, h, w, c, o, padding):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((n, h, w, c)).astype(np.float32)
    f = (rng.standard_normal((5, 5, c, o)) * 0.1).astype(np.float32)
    attrs = conv_attrs(padding)
    ref = ref_conv(x, f, padding)
    _close(kernel("Conv2D", **attrs)(x, f), ref)
    dy = rng.standard_normal(ref.shape).astype(np.float32)
    rdx, rdf = ref_backprops(x, f, dy, padding)
    dx = kernel("Conv2DBackpropInput", **attrs)(np.array(x.shape, np.int32), f, dy)
    df = kernel("Conv2DBackpropFilter", **attrs)(x, np.array(f.shape, np.int32), dy)
    assert dx.dtype == df.dtype == np.float32 and df.shape == f.shape
    _close(dx, rdx)
    _close(df, rdf)
    assert calls == {"convolve": 2, "filter": 1}        # the forward pass and the input gradient


@pytest.mark.parametrize("pool", [False, True])
def test_fused_conv_bias_relu_and_pool_on_winograd_tiles(calls, pool):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 10, 14, 24)).astype(np.float32)
    f = (rng.standard_normal((5, 5, 24, 40)) * 0.1).astype(np.float32)
    bias = rng.standard_normal(40).astype(np.float32)
    ops = ("BiasAdd", "Relu", "MaxPool") if pool else ("BiasAdd", "Relu")
    attrs = conv_attrs("SAME", fused_ops=ops, pool_ksize=(1, 2, 2, 1))
    got = kernel("_FusedConv2D", **attrs)(x, f, bias)
    ref = np.maximum(ref_conv(x, f, "SAME") + bias, 0)
    if pool:
        out, pooled = got
        _close(out, ref)
        _close(pooled, ref.reshape(3, 5, 2, 7, 2, 40).max(axis=(2, 4)))
    else:
        _close(got, ref)
    assert calls["convolve"] == 1


def test_winograd_split_by_batch_matches_whole(calls):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 14, 14, 32)).astype(np.float32)
    f = (rng.standard_normal((5, 5, 32, 64)) * 0.1).astype(np.float32)
    dy = rng.standard_normal((6, 14, 14, 64)).astype(np.float32)
    attrs = conv_attrs("SAME")

    def run_split(op, *args, attrs=attrs):
        res = get_kernel(op).split(attrs)(2, *args)
        for t in res[1]:
            t()
        return res[2]() if len(res) == 3 else res[0]
    ref = ref_conv(x, f, "SAME")
    _close(run_split("Conv2D", x, f), ref)
    rdx, rdf = ref_backprops(x, f, dy, "SAME")
    _close(run_split("Conv2DBackpropInput", np.array(x.shape, np.int32), f, dy), rdx)
    _close(run_split("Conv2DBackpropFilter", x, np.array(f.shape, np.int32), dy), rdf)
    bias = rng.standard_normal(64).astype(np.float32)
    fused = conv_attrs("SAME", fused_ops=("BiasAdd", "Relu", "MaxPool"), pool_ksize=(1, 2, 2, 1))
    out, pooled = run_split("_FusedConv2D", x, f, bias, attrs=fused)
    relu = np.maximum(ref + bias, 0)
    _close(out, relu)
    _close(pooled, relu.reshape(6, 7, 2, 7, 2, 64).max(axis=(2, 4)))
    assert calls == {"convolve": 6, "filter": 2}        # two blocks each


def test_winograd_is_not_used_where_it_does_not_apply(calls, monkeypatch):
    """Too few or too many channels, other filter sizes, strides, dilations and dtypes go to im2col,
    and so does everything when the path is turned off (AF_CONV_WINOGRAD=0)."""
    f32 = np.dtype(np.float32)
    assert winograd.usable(f32, (5, 5, 32, 64), 1, 1, 1, 1)
    assert not winograd.usable(f32, (5, 5, 1, 32), 1, 1, 1, 1)          # LeNet's first layer
    assert not winograd.usable(f32, (5, 5, 8, 64), 1, 1, 1, 1)
    assert not winograd.usable(f32, (5, 5, 128, 64), 1, 1, 1, 1)        # more channels than the pitch
    assert not winograd.usable(f32, (3, 3, 32, 64), 1, 1, 1, 1)
    assert not winograd.usable(f32, (5, 5, 32, 64), 2, 2, 1, 1)
    assert not winograd.usable(f32, (5, 5, 32, 64), 1, 1, 2, 2)
    assert not winograd.usable(np.dtype(np.float64), (5, 5, 32, 64), 1, 1, 1, 1)
    from actorflow.kernels.cpu import winograd_loops
    assert winograd._CP == winograd_loops._CP                           # the channel limit is the loops' pitch
    monkeypatch.setattr(winograd, "ENABLED", False)
    assert not winograd.usable(f32, (5, 5, 32, 64), 1, 1, 1, 1)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 8, 8, 32)).astype(np.float32)
    f = (rng.standard_normal((5, 5, 32, 64)) * 0.1).astype(np.float32)
    _close(kernel("Conv2D", **conv_attrs("SAME"))(x, f), ref_conv(x, f, "SAME"))
    assert calls["convolve"] == 0
