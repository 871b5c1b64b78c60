"""Winograd F(2x2, 5x5) convolution: the forward pass, the input gradient and the filter gradient of
a 5x5, stride-1, undilated float32 convolution with many channels (LeNet's second layer).

Each 2x2 block ("tile") of output pixels is computed from the 6x6 input patch under it with 36
multiplications per (input channel, output channel) pair instead of 100: the patch is transformed
(``V = B^T d B``), the filter too (``U = G g G^T``), the 36 transformed positions are multiplied
elementwise and summed over channels, which is 36 GEMMs ``V_e [tiles, C] @ U_e [C, O]``, and the
result transformed back (``Y = A^T M A``). The filter gradient is the dual, F(5x5, 2x2): a 2x2 tile
of the output gradient against the same 6x6 input patch gives a 5x5 filter contribution, and the sum
over tiles is the inner dimension of 36 GEMMs ``V_e.T [C, tiles] @ D_e [tiles, O]``; its input
transform is the same ``B^T d B``. The input gradient of a stride-1 convolution is the forward
convolution of the output gradient with the filter turned 180 degrees and its channels swapped.

The tiles go by in blocks whose transformed inputs and products (``[tiles, 36, 64]`` and
``[tiles, 36, O]``) stay in cache; the transforms are numba loops vectorised over channels, the
products GEMMs through `blas.cblas_gemm` (no per-call checks: 36 calls a block). A fused bias,
ReLU and a 2x2 max-pool run on each tile as it is transformed back: a 2x2 pool window is a tile.

On LeNet's second layer (batch 64, 14x14x32 -> 64, one core of the 2-core AMD EPYC VM, loaded):
forward 10.5 ms against 16.1 for im2col + GEMM, input gradient 10.1 against 15.5, filter gradient
10.3 against 15.9; the 36 GEMMs are about 70% of that (K = 32 or 64 is short for a GEMM), the
transforms the rest.

Interpolation points 0, 1, -1, 2, -2 and infinity (Lavin & Gray 2016). Rounding error is about 5x an
im2col GEMM's (relative RMS 2e-6 against 3e-7 on LeNet's second layer).
"""
from __future__ import annotations

import ctypes
import os

import numpy as np

from actorflow.kernels.cpu.blas import cblas_gemm
from actorflow.kernels.lazy_numba import import_numba

__all__ = ["usable", "forward_filter", "backprop_input_filter", "convolve", "filter_gradient_sums", "filter_gradient_of",
           "conv_forward", "conv_backprop_input", "conv_backprop_filter"]

# AF_CONV_WINOGRAD=0 turns the path off (A/B measurements, and a way out if its rounding matters).
ENABLED = os.environ.get("AF_CONV_WINOGRAD", "1") != "0"

# With fewer input or output channels than this, the GEMMs are too narrow to pay for the transforms
# (one core, 5x5 SAME on 28x28, batch 32, Winograd against im2col: 16 -> 16 channels 3.1-3.5 ms
# against 5.7-7.1; 8 -> 32 forward 3.6 against 5.2 but input gradient 5.6 against 5.2; 4 -> 64
# filter gradient 7.0 against 6.8). LeNet's first layer (1 -> 32) stays on im2col.
_MIN_CHANNELS = 16

# Tiles per block: the block's transformed inputs and products, 36 * (64 + O) floats a tile, stay
# in L2 (2.3 MiB at 128 tiles for O = 64; 256 tiles ran as fast, 392 and 512 slower).
_BLOCK_TILES = 128

_F32 = np.dtype(np.float32)
# At most this many channels go into a Winograd transform: winograd_loops._CP, the channel pitch of
# its transformed input tiles (not imported from there: that module imports numba).
_CP = 64

# Filter transforms. G: F(2, 5), a 5-tap filter to 6 points; G2: F(5, 2), a 2-tap output-gradient
# tile to 6 points; A2T: F(5, 2)'s output transform, 6 points to 5 filter taps.
_G = np.array([[1 / 4, 0, 0, 0, 0],
               [-1 / 6, -1 / 6, -1 / 6, -1 / 6, -1 / 6],
               [-1 / 6, 1 / 6, -1 / 6, 1 / 6, -1 / 6],
               [1 / 24, 1 / 12, 1 / 6, 1 / 3, 2 / 3],
               [1 / 24, -1 / 12, 1 / 6, -1 / 3, 2 / 3],
               [0, 0, 0, 0, 1]])
_G2 = np.array([[1 / 4, 0], [-1 / 6, -1 / 6], [-1 / 6, 1 / 6], [1 / 24, 1 / 12], [1 / 24, -1 / 12], [0, 1]])
_G2_F32 = _G2.astype(np.float32)
_A2T = np.array([[1, 1, 1, 1, 1, 0],
                 [0, 1, -1, 2, -2, 0],
                 [0, 1, 1, 4, 4, 0],
                 [0, 1, -1, 8, -8, 0],
                 [0, 1, 1, 16, 16, 1]], np.float64)


def usable(x_dtype, f_shape, sh, sw, dh, dw) -> bool:
    """Whether a convolution of this dtype, HWIO filter shape, strides and dilations runs here."""
    return (ENABLED and x_dtype == _F32 and tuple(f_shape[:2]) == (5, 5) and sh == sw == dh == dw == 1
            and _MIN_CHANNELS <= min(f_shape[2], f_shape[3]) and max(f_shape[2], f_shape[3]) <= _CP
            and cblas_gemm(_F32) is not None)


def _filter_transform(f):
    """U [36, C, O] = G f G^T of the HWIO 5x5 filter `f`, in float32."""
    c, o = f.shape[2], f.shape[3]
    return _sandwich(_G, f.astype(np.float64).reshape(5, 5, c * o)).astype(np.float32).reshape(36, c, o)


def _sandwich(m, x):
    """y[i, j] = sum over a, b of m[i, a] m[j, b] x[a, b], for x [r, r, K]: two GEMMs (einsum's
    three-operand loop took 1.2 ms on a 5x5x32x64 filter, this 0.05)."""
    n, r, k = m.shape[0], x.shape[0], x.shape[2]
    t = (m @ x.reshape(r, r * k)).reshape(n, r, k)                          # [i, b, K]
    t = np.ascontiguousarray(t.transpose(1, 0, 2)).reshape(r, n * k)        # [b, i, K]
    y = (m @ t).reshape(n, n, k)                                            # [j, i, K]
    return np.ascontiguousarray(y.transpose(1, 0, 2))


def _tile_grid(oh, ow, n):
    th, tw = (oh + 1) // 2, (ow + 1) // 2
    return th, tw, n * th * tw


_LOOPS: tuple | None = None
_NO_BIAS = np.zeros(1, _F32)                 # stand-ins for the driver's arrays that a filter gradient
_NO_POOL = np.zeros((1, 1, 1, 1), _F32)     # or an unpooled convolution does not use (never written)
# The floor that the output transform raises every value to: 0 for a fused ReLU, -inf for none.
_RELU_FLOOR, _NO_FLOOR = np.float32(0), np.float32(-np.inf)


def _loops():
    """winograd_loops (imported on first use: it imports numba), and the (address, ILP64?) of the
    cblas_sgemm its drivers call."""
    global _LOOPS
    if _LOOPS is None:
        import_numba()          # before winograd_loops imports numba itself
        from actorflow.kernels.cpu import winograd_loops
        gemm = cblas_gemm(_F32)
        _LOOPS = winograd_loops, ctypes.cast(gemm, ctypes.c_void_p).value, gemm.argtypes[3] is ctypes.c_int64
    return _LOOPS


def _work(co):
    """The transforms' work buffers for `co` output channels (see winograd_loops.run)."""
    return np.empty((2, 36 * _CP), _F32), np.empty((4, 6, co), _F32)


def forward_filter(f):
    """The transformed filter [36, C, O] that `convolve` takes for a Conv2D by the HWIO 5x5 `f`."""
    return _filter_transform(f)


def backprop_input_filter(f):
    """The transformed filter that `convolve` takes for Conv2DBackpropInput by `f`: `f` turned 180
    degrees with its channel axes swapped (the input gradient of a stride-1 convolution is the
    convolution of dy by that, padded by 4 - ph rows and 4 - pw columns)."""
    return _filter_transform(f[::-1, ::-1].transpose(0, 1, 3, 2))


def convolve(x, u, out, ph, pw, scratch, bias=None, relu=False, pooled=None):
    """out [N, OH, OW, O] = the stride-1 5x5 convolution of NHWC float32 `x` whose transformed filter
    is `u`, zero-padded by ph rows on top and pw columns on the left (+ bias, then ReLU; each 2x2
    tile's maximum into `pooled` [N, OH/2, OW/2, O] when given). Every pixel of `out` is written."""
    loops, fn, ilp64 = _loops()
    n, oh, ow, co = out.shape
    block = min(_BLOCK_TILES, _tile_grid(oh, ow, n)[2])
    v = scratch.get((block, 36, _CP), _F32, slot=2)
    m = scratch.get((block, 36, co), _F32, slot=3)
    bias = np.zeros(co, _F32) if bias is None else np.ascontiguousarray(bias, _F32)
    pool = pooled is not None
    loops.run(np.ascontiguousarray(x), out, u, ph, pw, bias, _RELU_FLOOR if relu else _NO_FLOOR,
              pooled if pool else _NO_POOL, pool, _G2_F32, False, v, m, *_work(co), block, fn, ilp64)


def conv_forward(x, f, out, ph, pw, scratch, bias=None, relu=False, pooled=None):
    """Conv2D of the NHWC float32 `x` by the HWIO 5x5 `f` into `out` (see convolve)."""
    convolve(x, forward_filter(f), out, ph, pw, scratch, bias, relu, pooled)


def conv_backprop_input(dy, f, dx, ph, pw, scratch):
    """Conv2DBackpropInput into `dx` [N, H, W, C] (every pixel written)."""
    convolve(dy, backprop_input_filter(f), dx, 4 - ph, 4 - pw, scratch)


def filter_gradient_sums(x, dy, ph, pw, scratch):
    """The filter gradient of NHWC `x` and `dy` in the transformed domain, [36, C, O] float32: sums
    of several batches' add up, and `filter_gradient_of` turns the total into the gradient."""
    loops, fn, ilp64 = _loops()
    x = np.ascontiguousarray(x)
    dy = np.ascontiguousarray(dy)
    n, oh, ow, co = dy.shape
    c = x.shape[3]
    block = min(_BLOCK_TILES, _tile_grid(oh, ow, n)[2])
    v = scratch.get((block, 36, _CP), _F32, slot=2)
    dv = scratch.get((block, 36, co), _F32, slot=3)
    acc = np.zeros((36, c, co), _F32)
    loops.run(x, dy, acc, ph, pw, _NO_BIAS, _NO_FLOOR, _NO_POOL, False, _G2_F32, True, v, dv, *_work(co), block, fn,
              ilp64)
    return acc


def filter_gradient_of(acc):
    """The [25 * C, O] float32 filter gradient (HWIO flattened) from filter_gradient_sums' [36, C, O]."""
    c, co = acc.shape[1], acc.shape[2]
    df = _sandwich(_A2T, acc.astype(np.float64).reshape(6, 6, c * co))     # [5, 5, C * O]
    return df.astype(np.float32).reshape(25 * c, co)


def conv_backprop_filter(x, dy, ph, pw, scratch):
    """Conv2DBackpropFilter of NHWC `x` and `dy` as a [25 * C, O] float32 matrix (HWIO flattened)."""
    return filter_gradient_of(filter_gradient_sums(x, dy, ph, pw, scratch))
