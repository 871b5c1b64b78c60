"""CPU kernels for Conv2D, _FusedConv2D (Conv2D + BiasAdd (+ Relu)), Conv2DBackpropInput and
Conv2DBackpropFilter.

Each is an implicit GEMM: the column matrix of the input (one row of KH*KW*C input values per
output pixel) is packed by a numba loop one L2-sized block at a time, and each block goes straight
into a GEMM (``blas.matmul``: MKL's sequential SGEMM when installed, else numpy's BLAS) while it is
still in cache: Conv2D multiplies it by the filter (then adds the bias and applies ReLU to that block
of output, for _FusedConv2D), the filter gradient accumulates ``block.T @ dy`` inside the GEMM, and
the input gradient multiplies dy by the filter and scatters the result back onto the input grid
(col2im). On LeNet's second layer each kernel runs at 70-80% of the machine's peak SGEMM rate, as
fast as one GEMM of the whole column matrix. With few input channels (LeNet's first layer: one,
25-long columns) im2col reaches about half, its packing costing as much as its GEMM, and float32
forward convolutions and filter gradients run instead as a register-tiled direct convolution
(vector_loops.py, LLVM vector code emitted by numba intrinsics: numba's own loop vectoriser cannot
keep a tile of accumulators in registers, and a plain numba direct convolution ran at 12 GFLOP/s):
90-115 GFLOP/s there, against 50-60 for im2col (see benchmarks/conv_kernels.py).
numba has no float16 arithmetic, so half-precision convolution runs in float32.

5x5 stride-1 undilated float32 convolutions with enough channels (LeNet's second layer: 32 -> 64) run
as Winograd F(2x2, 5x5) instead (winograd.py): 2.8x fewer multiplications, 7 ms per kernel there
against 16 for the implicit GEMM on one core.
"""
from __future__ import annotations

import functools
import threading

import numpy as np

from actorflow.kernels.cpu import winograd
from actorflow.kernels.cpu.bias import _fused_epilogue
from actorflow.kernels.cpu.blas import matmul as gemm
from actorflow.kernels.cpu.matmul import FusedPartError
from actorflow.kernels.cpu.pooling import _max_pool, _max_pool_2x2
from actorflow.kernels.cpu.window import (
    _FAST_FLOATS,
    _batch_blocks,
    _ConvGeometry,
    _from_nhwc,
    _half_via_float32,
    _shape_from_nhwc,
    _to_nhwc,
)
from actorflow.kernels.lazy_numba import njit, uintp
from actorflow.kernels.registry import MAC_NS, register_kernel

# Every convolution here is a GEMM over the column matrix of its input: row (n, i, j) holds the
# KH*KW*C input values under output pixel (n, i, j)'s window. The matrix is never built whole: the
# rows go by in blocks of about _BLOCK_ELEMENTS values (1 MiB of float32, half this machine's L2),
# each block packed by a numba loop and consumed by a GEMM while it is still in cache, and a fused
# bias (+ ReLU) runs on each block of output right after its GEMM. (On LeNet's second layer, one
# core, batch 8: 121-137 GFLOP/s for the forward pass and both gradients, against 116-122 with the
# previous kernel's 8 MiB batch chunks; at batch 64, 256 KiB blocks were 10% slower than 1 MiB.)
_BLOCK_ELEMENTS = 1 << 18
# ... but where the filter matrix (K x O) is bigger than a block, each block's GEMM streams all of it
# (and a filter gradient reads and writes all of its own): blocks are then at least _WIDE_FILTER_ROWS
# rows, so that each pass over the filter serves that many. CapsNet's primary capsules (K = 9*9*256,
# O = 256, a 21 MB filter): 16-row blocks ran the forward GEMM at 57 GFLOP/s and the filter gradient
# at 72; 256-row blocks at 195 and 176.
_WIDE_FILTER_ROWS = 256


def _block_rows(rows: int, k: int, o: int) -> int:
    """Rows of one block of a convolution's column matrix ([rows, k], its GEMM's other side [k, o])."""
    block = max(16, min(rows, _BLOCK_ELEMENTS // max(k, 1)))
    if k * o > _BLOCK_ELEMENTS:
        block = max(block, min(rows, _WIDE_FILTER_ROWS))
    return block

# With few input channels a column row is made of runs of only KW*C values, and packing it row by
# row costs more than the GEMM. Below this many channels the block is packed K-major instead (one
# contiguous run of output pixels per filter tap, a vectorised copy when the stride is 1) and the
# GEMM reads it transposed: on LeNet's first layer (C=1) Conv2D ran 1.4-1.8x faster than with
# row-major blocks, and it and its filter gradient about 2x faster than the previous kernel.
_KMAJOR_MAX_CHANNELS = 4

# im2col/col2im index flat 1-D views of the NHWC image and of the column block, with offsets cast
# to unsigned: numba then skips its negative-index wraparound check on every element, and each
# contiguous run becomes a vectorised copy (2x faster than signed indexing).


def _window(in_shape, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow):
    """The geometry of one convolution as the int64 vector the numba loops take: input h, w, c,
    window kh, kw, strides, dilations, padding before (top, left), output oh, ow."""
    _, h, w, c = in_shape
    return np.array([h, w, c, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow], np.int64)


@njit(cache=True, nogil=True)
def _im2col_rows(x, g, r0, nr, cols):
    """Rows r0 .. r0+nr of the column matrix of the flat NHWC `x`, row-major into `cols`."""
    h_in, w_in, c_in, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow = (g[0], g[1], g[2], g[3], g[4], g[5], g[6],
                                                               g[7], g[8], g[9], g[10], g[11], g[12])
    row_len = kw * c_in
    k = kh * row_len
    uc = uintp(c_in)
    n = r0 // (oh * ow)
    i = (r0 - n * oh * ow) // ow
    j = r0 - (n * oh + i) * ow
    for r in range(nr):
        o = r * k
        w0 = j * sw - pw
        # With no column dilation and the window inside the row, one filter row's patch is a single
        # contiguous run of kw*C input values.
        inside = dw == 1 and w0 >= 0 and w0 + kw <= w_in
        for a in range(kh):
            h = i * sh - ph + a * dh
            dst = uintp(o + a * row_len)
            if h < 0 or h >= h_in:
                for t in range(uintp(row_len)):
                    cols[dst + t] = 0
            elif inside:
                src = uintp(((n * h_in + h) * w_in + w0) * c_in)
                for t in range(uintp(row_len)):
                    cols[dst + t] = x[src + t]
            else:
                for b in range(kw):
                    w = w0 + b * dw
                    d = dst + uintp(b * c_in)
                    if 0 <= w < w_in:
                        src = uintp(((n * h_in + h) * w_in + w) * c_in)
                        for c in range(uc):
                            cols[d + c] = x[src + c]
                    else:
                        for c in range(uc):
                            cols[d + c] = 0
        j += 1
        if j == ow:
            j = 0
            i += 1
            if i == oh:
                i = 0
                n += 1


@njit(cache=True, nogil=True)
def _im2col_kmajor(xpad, g, hp, wp, r0, nr, cols):
    """The same block as _im2col_rows, K-major (cols[k * nr + r] for filter tap k and row r), read
    from `xpad`, the flat input zero-padded to [N, hp, wp, C] with the padding before at (0, 0):
    every output row is then one run of strided reads, with no bounds to check."""
    c_in, kh, kw, sh, sw, dh, dw, oh, ow = g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[11], g[12]
    n0 = r0 // (oh * ow)
    i0 = (r0 - n0 * oh * ow) // ow
    j0 = r0 - (n0 * oh + i0) * ow
    step = uintp(sw * c_in)
    for a in range(kh):
        for b in range(kw):
            for c in range(c_in):
                dst = ((a * kw + b) * c_in + c) * nr
                n, i, j = n0, i0, j0
                r = 0
                while r < nr:                       # one run of output row i: pixels j .. j+run
                    run = uintp(min(ow - j, nr - r))
                    d = uintp(dst + r)
                    src = uintp(((n * hp + i * sh + a * dh) * wp + j * sw + b * dw) * c_in + c)
                    if step == 1:
                        for t in range(run):
                            cols[d + t] = xpad[src + t]
                    else:
                        for t in range(run):
                            cols[d + t] = xpad[src + t * step]
                    r += run
                    j = 0
                    i += 1
                    if i == oh:
                        i = 0
                        n += 1


@njit(cache=True, nogil=True)
def _col2im_rows(cols, g, r0, nr, dx):
    """Adds the row-major gradient block of rows r0 .. r0+nr of the column matrix onto the flat
    NHWC `dx`: the inverse scatter of _im2col_rows."""
    h_in, w_in, c_in, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow = (g[0], g[1], g[2], g[3], g[4], g[5], g[6],
                                                               g[7], g[8], g[9], g[10], g[11], g[12])
    row_len = kw * c_in
    k = kh * row_len
    uc = uintp(c_in)
    n = r0 // (oh * ow)
    i = (r0 - n * oh * ow) // ow
    j = r0 - (n * oh + i) * ow
    for r in range(nr):
        o = r * k
        w0 = j * sw - pw
        inside = dw == 1 and w0 >= 0 and w0 + kw <= w_in
        for a in range(kh):
            h = i * sh - ph + a * dh
            if 0 <= h < h_in:
                src = uintp(o + a * row_len)
                if inside:
                    dst = uintp(((n * h_in + h) * w_in + w0) * c_in)
                    for t in range(uintp(row_len)):
                        dx[dst + t] += cols[src + t]
                else:
                    for b in range(kw):
                        w = w0 + b * dw
                        if 0 <= w < w_in:
                            dst = uintp(((n * h_in + h) * w_in + w) * c_in)
                            s = src + uintp(b * c_in)
                            for c in range(uc):
                                dx[dst + c] += cols[s + c]
        j += 1
        if j == ow:
            j = 0
            i += 1
            if i == oh:
                i = 0
                n += 1


class _Scratch(threading.local):
    """A per-thread reusable buffer for column blocks.

    Allocating a block per call makes the OS map and fault in fresh pages every time, and a reused
    one stays in cache. Kernels on one thread never overlap, and no kernel returns a view of this
    buffer, so one buffer per thread is enough.
    """

    limit_bytes = 64 << 20

    def __init__(self):
        self.bufs = [np.empty(0, np.uint8) for _ in range(4)]

    def get(self, shape, dtype, slot=0):
        """A [shape] array of `dtype` over buffer `slot` (0: column blocks, 1: a padded input, 2 and
        3: Winograd's transformed tiles)."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        if nbytes > self.limit_bytes:
            return np.empty(shape, dtype)
        if self.bufs[slot].nbytes < nbytes:
            self.bufs[slot] = np.empty(nbytes, np.uint8)
        return self.bufs[slot][:nbytes].view(dtype).reshape(shape)


_scratch = _Scratch()


def _padded(x, g):
    """The NHWC `x` zero-padded (in this thread's scratch slot 1) to [N, hp, wp, C], the padding
    before at (0, 0) and enough after it for every window of the geometry `g` (see _window)."""
    n, h, w, c = x.shape
    kh, kw, sh, sw, dh, dw, ph, pw, oh, ow = (int(v) for v in g[3:])
    hp = max(h + ph, (oh - 1) * sh + (kh - 1) * dh + 1)
    wp = max(w + pw, (ow - 1) * sw + (kw - 1) * dw + 1)
    xpad = _scratch.get((n, hp, wp, c), x.dtype, slot=1)
    xpad.fill(0)
    xpad[:, ph:ph + h, pw:pw + w] = x
    return xpad


class _ColumnBlocks:
    """The column matrix of one convolution's input, handed out block by block as [rows, K] matrix
    views of this thread's scratch buffer (transposed views of a K-major block when the input has
    few channels)."""

    __slots__ = ("x", "g", "k", "rows", "block", "kmajor", "buf", "hp", "wp")

    def __init__(self, x, g, dtype, align=1, o=0):
        n, h, w, c = x.shape
        kh, kw, sh, sw, dh, dw, ph, pw, oh, ow = (int(v) for v in g[3:])
        self.g = g
        self.k = kh * kw * c
        self.rows = n * oh * ow
        self.block = _block_rows(self.rows, self.k, o)      # (o: the filter's output channels)
        if align > 1:           # whole bands of `align` rows per block (a fused max-pool's window rows)
            self.block = max(align, self.block // align * align)
        self.kmajor = c < _KMAJOR_MAX_CHANNELS
        if self.kmajor:
            # The padded input is small (few channels), and padding it once spares every run of
            # the packing loop its bounds checks.
            xpad = _padded(x, g)
            self.hp, self.wp = xpad.shape[1:3]
            self.x = xpad.reshape(-1)
        else:
            self.x = x.reshape(-1)
        self.buf = _scratch.get((self.block * self.k,), dtype)

    def __iter__(self):
        for r0 in range(0, self.rows, self.block):
            nr = min(self.block, self.rows - r0)
            cols = self.buf[:nr * self.k]
            if self.kmajor:
                _im2col_kmajor(self.x, self.g, self.hp, self.wp, r0, nr, cols)
                yield r0, nr, cols.reshape(self.k, nr).T
            else:
                _im2col_rows(self.x, self.g, r0, nr, cols)
                yield r0, nr, cols.reshape(nr, self.k)


def _conv_rows(x, g, f2, out2, bias=None, relu=False, pool=None):
    """``out2 = columns(x) @ f2`` ([N*OH*OW, K] @ [K, O]) block by block, each block's bias (+ ReLU)
    applied right after its GEMM when `bias` is given, and each block max-pooled into `pool`'s
    output when given (see _BandPool)."""
    align = pool.band if pool is not None else 1
    for r0, nr, cols in _ColumnBlocks(x, g, np.result_type(x.dtype, f2.dtype), align, f2.shape[1]):
        block = out2[r0:r0 + nr]
        gemm(cols, f2, block)
        if bias is not None:
            _fused_epilogue(block, bias, relu)
        if pool is not None:
            pool(block, r0, nr)


class _BandPool:
    """A max-pool whose windows tile the convolution's output (window == stride, no padding, the
    output's height and width multiples of it), run on each block of output rows right after its
    GEMM and epilogue, while the block is in cache: a block of whole bands of `kh` output rows pools
    into whole rows of the pooled output."""

    __slots__ = ("out", "kh", "kw", "ow", "co", "band")

    def __init__(self, out, kh, kw, ow, co):
        self.out = out.reshape(-1)          # the pooled [N, OH/kh, OW/kw, C], flat
        self.kh, self.kw, self.ow, self.co = kh, kw, ow, co
        self.band = kh * ow                 # conv output pixels per band

    def __call__(self, block, r0, nr):
        bands, pw = nr // self.band, self.ow // self.kw
        lo = r0 // self.band * pw * self.co
        out = self.out[lo:lo + bands * pw * self.co]
        if self.kh == self.kw == 2:
            _max_pool_2x2(block.reshape(-1), bands, 2, self.ow, self.co, 1, pw, out)
        else:
            _max_pool(block.reshape(-1), bands, self.kh, self.ow, self.co, self.kh, self.kw, self.kh, self.kw, 0, 0,
                      1, pw, out)


def _conv_input(op_name, what, x, fmt):
    x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"{op_name}: {what} must be 4-D ({fmt}), got shape {x.shape}")
    return np.ascontiguousarray(_to_nhwc(x, fmt))


def _check_filter(op_name, f):
    f = np.asarray(f)
    if f.ndim != 4:
        raise ValueError(f"{op_name}: filter must be 4-D [height, width, in_channels, out_channels], got {f.shape}")
    return f


def _conv_cost(x, f):
    # Output size is unknown without the attrs; stride 1 with SAME padding is the common case.
    fs = np.shape(f)
    return int(np.size(x)) * (int(fs[0] * fs[1] * fs[3]) if len(fs) == 4 else 1)


_DIRECT = None
_NO_POOL = np.zeros(1, np.float32)      # the direct forward kernel's pooled output when it pools nothing


def _direct():
    """vector_loops (imported on first use: it imports numba and llvmlite)."""
    global _DIRECT
    if _DIRECT is None:
        from actorflow.kernels.cpu import vector_loops
        _DIRECT = vector_loops
    return _DIRECT


def _direct_ok(geo, fshape, *arrays):
    """Whether the register-tiled direct convolution (vector_loops) runs this convolution: float32,
    fewer than _KMAJOR_MAX_CHANNELS input channels (where im2col makes a GEMM with a short K, LeNet's
    first layer: K=25), output channels a multiple of its 32-channel tile, no dilation. On LeNet's
    first layer, one core: forward (with bias, ReLU and 2x2 max-pool) and filter gradient ran at
    about 90 and 115 GFLOP/s, against 45-58 for im2col + GEMM (benchmarks/conv_kernels.py), and at
    184-191 and 182 with 16-lane tiles on a Zen 5 core. The
    input gradient stays im2col's: a first layer's input is rarely differentiated."""
    return (fshape[2] < _KMAJOR_MAX_CHANNELS and fshape[3] % _DIRECT_CHANNELS == 0 and geo.dh == geo.dw == 1
            and all(a.dtype == np.float32 for a in arrays))


_DIRECT_CHANNELS = 32       # vector_loops.TILE_CHANNELS (not imported from there: that module imports numba)


def _direct_forward(geo, x, f, out, oh, ow, ph, pw, bias, relu, pooled):
    """Conv2D of NHWC float32 `x` into `out` by vector_loops.forward, plus `bias` (None: none), ReLU
    when `relu`, and the 2x2 max-pool into `pooled` when it is not None; `oh` and `ow` even."""
    kh, kw, c, co = f.shape
    xpad = _padded(x, _window(x.shape, kh, kw, geo.sh, geo.sw, 1, 1, ph, pw, oh, ow))
    hp, wp = xpad.shape[1:3]
    b = np.zeros(co, np.float32) if bias is None else np.ascontiguousarray(bias, np.float32)
    _direct().forward(xpad.reshape(-1), hp, wp, c, np.ascontiguousarray(f).reshape(-1), kh, kw, geo.sh, geo.sw, b,
                      bool(relu), oh, ow, co, out.reshape(-1), _NO_POOL if pooled is None else pooled.reshape(-1),
                      pooled is not None)


def _direct_filter_grad(geo, x, dy, fshape, oh, ow, ph, pw):
    """The filter gradient [KH*KW*C, O] of NHWC float32 `x` and `dy` by vector_loops.filter_grad."""
    kh, kw, c, co = fshape
    xpad = _padded(x, _window(x.shape, kh, kw, geo.sh, geo.sw, 1, 1, ph, pw, oh, ow))
    hp, wp = xpad.shape[1:3]
    k = kh * kw * c
    taps = _direct().GRAD_TAPS
    toff = np.zeros(-(-k // taps) * taps, np.int64)     # dummy taps past the filter read offset 0
    toff[:k] = (np.arange(kh)[:, None] * (wp * c) + np.arange(kw * c)[None, :]).reshape(-1)
    dw = np.zeros((toff.shape[0], co), np.float32)
    _direct().filter_grad(xpad.reshape(-1), hp, wp, c, toff, geo.sh, geo.sw, np.ascontiguousarray(dy).reshape(-1),
                          oh, ow, co, dw.reshape(-1))
    return dw[:k]


def _conv_forward(geo, x, f, out, oh, ow, ph, pw, bias=None, relu=False, pool=None):
    """Conv2D of NHWC `x` into `out` [N, OH, OW, O] (then + bias, then ReLU, when bias is given;
    then max-pooled by `pool`, a _BandPool, when given)."""
    kh, kw, c, co = f.shape
    if pool is None and winograd.usable(x.dtype, f.shape, geo.sh, geo.sw, geo.dh, geo.dw) and out.dtype == x.dtype:
        winograd.conv_forward(x, f, out, ph, pw, _scratch, bias, relu)
        return
    if pool is None and oh % 2 == 0 and ow % 2 == 0 and _direct_ok(geo, f.shape, x, f, out):
        _direct_forward(geo, x, f, out, oh, ow, ph, pw, bias, relu, None)
        return
    g = _window(x.shape, kh, kw, geo.sh, geo.sw, geo.dh, geo.dw, ph, pw, oh, ow)
    _conv_rows(x, g, f.reshape(kh * kw * c, co), out.reshape(-1, co), bias, relu, pool)


def _conv_split_ok(geo, *arrays) -> bool:
    """Batch splitting handles NHWC float32/float64 arrays of one dtype (the common case)."""
    dt = arrays[0].dtype
    return geo.fmt == "NHWC" and dt in _FAST_FLOATS and all(a.ndim == 4 and a.dtype == dt for a in arrays)


def _conv_split_plan(geo, parts, batched, in_shape, fshape, *arrays):
    """(batch blocks, oh, ow, ph, pw) for splitting a convolution-family call over `parts`
    threads, or None when it should run whole (the kernel then reports any error)."""
    blocks = _batch_blocks(batched.shape[0], parts) if batched.ndim == 4 else None
    if blocks is None or len(in_shape) != 4 or len(fshape) != 4 or not _conv_split_ok(geo, *arrays):
        return None
    try:
        oh, ow, ph, pw = geo.resolve(in_shape, fshape)
    except ValueError:
        return None
    if geo.is_pointwise(fshape, ph, pw):
        return None
    return blocks, oh, ow, ph, pw


def _conv2d_split(attrs):
    """Batch blocks of a Conv2D: each thread runs im2col + GEMM on its images, into one output."""
    geo = _ConvGeometry(attrs, "Conv2D")

    def split(parts, input, filter):
        x, f = np.asarray(input), np.asarray(filter)
        plan = _conv_split_plan(geo, parts, x, x.shape, f.shape, x, f)
        if plan is None:
            return None
        blocks, oh, ow, ph, pw = plan
        x = np.ascontiguousarray(x)
        out = np.empty((x.shape[0], oh, ow, f.shape[3]), x.dtype)
        if _winograd_ok(geo, x, f.shape, f):
            u = winograd.forward_filter(f)          # once, for every block
            return out, [functools.partial(winograd.convolve, x[lo:hi], u, out[lo:hi], ph, pw, _scratch)
                         for lo, hi in blocks]
        return out, [functools.partial(_conv_forward, geo, x[lo:hi], f, out[lo:hi], oh, ow, ph, pw)
                     for lo, hi in blocks]
    return split


def _winograd_ok(geo, x, fshape, *others) -> bool:
    """Whether winograd.py runs this convolution (x and `others` float32 alike, see winograd.usable).
    Split kernels then transform the filter once and hand each block the transformed one: the blocks
    start at once on two threads, and Python-level work in them contends for the GIL."""
    return (winograd.usable(x.dtype, fshape, geo.sh, geo.sw, geo.dh, geo.dw)
            and all(a.dtype == x.dtype for a in others))


@register_kernel("Conv2D", "CPU", cost=_conv_cost, unit_ns=MAC_NS, split=_conv2d_split)
def conv2d(attrs):
    """tf.raw_ops.Conv2D: NHWC input, HWIO filter, SAME/VALID padding, strides and dilations.

    Blocks of the [N*OH*OW, KH*KW*C] column matrix times the filter viewed as [KH*KW*C, O] (see
    _BLOCK_ELEMENTS; a 1x1 stride-1 convolution is one GEMM on the input itself). NCHW is
    accepted by transposing to NHWC and back. On the pool, big convolutions split by batch.
    """
    geo = _ConvGeometry(attrs, "Conv2D")

    def fn(input, filter):
        x = _conv_input("Conv2D", "input", input, geo.fmt)
        f = _check_filter("Conv2D", filter)
        n, h, w, c = x.shape
        kh, kw, _, co = f.shape
        oh, ow, ph, pw = geo.resolve(x.shape, f.shape)
        if geo.is_pointwise(f.shape, ph, pw):
            out = np.matmul(x.reshape(-1, c), f.reshape(c, co)).reshape(n, oh, ow, co)
            return _from_nhwc(out, geo.fmt)
        out = np.empty((n, oh, ow, co), np.result_type(x.dtype, f.dtype))
        _conv_forward(geo, x, f, out, oh, ow, ph, pw)
        return _from_nhwc(out, geo.fmt)
    return _half_via_float32(fn)


# _FusedConv2D: Conv2D + BiasAdd (+ Relu) (+ MaxPool), made by the fusion pass as grappler's
# remapper does: the bias and ReLU run on each block of output right after its GEMM, and a max-pool
# whose windows tile the output pools each block while it is still in cache, as a second output.

def _fused_conv_parts(attrs, geo, input, filter, bias):
    """(x NHWC, f, bias, oh, ow, ph, pw), checked the way Conv2D and BiasAdd check them."""
    try:
        x = _conv_input("Conv2D", "input", input, geo.fmt)
        f = _check_filter("Conv2D", filter)
        oh, ow, ph, pw = geo.resolve(x.shape, f.shape)
    except ValueError as e:
        raise FusedPartError(0, e) from None
    bias = np.asarray(bias)
    co = f.shape[3]
    if bias.ndim != 1 or bias.shape[0] != co:
        raise FusedPartError(1, ValueError(f"BiasAdd: bias must be 1-D of size {co} (channel dim of value "
                                           f"{(x.shape[0], oh, ow, co)}, NHWC), got shape {bias.shape}"))
    return x, f, bias, oh, ow, ph, pw


def _fused_pool_window(attrs):
    """(kh, kw) of the fused max-pool (window == stride, NHWC), or None when there is none."""
    if "MaxPool" not in tuple(attrs.get("fused_ops", ())):
        return None
    k = tuple(int(v) for v in attrs["pool_ksize"])
    return k[1], k[2]


def _pooled(attrs, window, x, f, oh, ow, dtype):
    """The fused max-pool's output array [N, OH/kh, OW/kw, O], or None without one."""
    if window is None:
        return None
    kh, kw = window
    if oh % kh or ow % kw:
        raise FusedPartError(len(attrs["fused_ops"]), ValueError(
            f"MaxPool: a fused {kh}x{kw} pool needs a convolution output whose height and width are multiples of "
            f"it, got {oh}x{ow}"))
    return np.empty((x.shape[0], oh // kh, ow // kw, f.shape[3]), dtype)


def _fused_conv_block(geo, x, f, bias, out, oh, ow, ph, pw, relu, window=None, pooled=None):
    if (pooled is not None and window == (2, 2) and out.dtype == x.dtype
            and winograd.usable(x.dtype, f.shape, geo.sh, geo.sw, geo.dh, geo.dw)):
        winograd.conv_forward(x, f, out, ph, pw, _scratch, bias, relu, pooled)   # a 2x2 pool window is a tile
    elif pooled is not None and window == (2, 2) and _direct_ok(geo, f.shape, x, f, out, bias):
        _direct_forward(geo, x, f, out, oh, ow, ph, pw, bias, relu, pooled)     # so is one of its tiles
    elif pooled is not None:
        _conv_forward(geo, x, f, out, oh, ow, ph, pw, bias, relu, _BandPool(pooled, *window, ow, f.shape[3]))
    elif geo.is_pointwise(f.shape, ph, pw):
        out2 = out.reshape(-1, f.shape[3])
        gemm(x.reshape(-1, x.shape[3]), f.reshape(f.shape[2], f.shape[3]), out2)
        _fused_epilogue(out2, bias, relu)
    else:
        _conv_forward(geo, x, f, out, oh, ow, ph, pw, bias, relu)


def _fused_conv_split(attrs):
    geo = _ConvGeometry(attrs, "Conv2D")
    relu = "Relu" in tuple(attrs.get("fused_ops", ()))
    window = _fused_pool_window(attrs)

    def split(parts, input, filter, bias):
        x, f = np.asarray(input), np.asarray(filter)
        blocks = _batch_blocks(x.shape[0], parts) if x.ndim == 4 else None
        if blocks is None or not _conv_split_ok(geo, x, f):
            return None
        try:
            x, f, bias, oh, ow, ph, pw = _fused_conv_parts(attrs, geo, x, f, bias)
            pooled = _pooled(attrs, window, x, f, oh, ow, x.dtype)
        except FusedPartError:
            return None
        out = np.empty((x.shape[0], oh, ow, f.shape[3]), x.dtype)
        bias = bias.astype(x.dtype, copy=False)
        if _winograd_ok(geo, x, f.shape, f) and (pooled is None or window == (2, 2)):
            u = winograd.forward_filter(f)
            thunks = [functools.partial(winograd.convolve, x[lo:hi], u, out[lo:hi], ph, pw, _scratch, bias, relu,
                                        None if pooled is None else pooled[lo:hi])
                      for lo, hi in blocks]
        else:
            thunks = [functools.partial(_fused_conv_block, geo, x[lo:hi], f, bias, out[lo:hi], oh, ow, ph, pw, relu,
                                        window, None if pooled is None else pooled[lo:hi])
                      for lo, hi in blocks]
        if pooled is None:
            return out, thunks
        return None, thunks, lambda: (out, pooled)
    return split


def _fused_conv_cost(input, filter, bias):
    return _conv_cost(input, filter)


@register_kernel("_FusedConv2D", "CPU", cost=_fused_conv_cost, unit_ns=MAC_NS, split=_fused_conv_split)
def fused_conv2d(attrs):
    """Conv2D (NHWC) + bias, then ReLU when ``fused_ops`` is ("BiasAdd", "Relu"); with "MaxPool"
    last in ``fused_ops`` (window and stride ``pool_ksize``, tiling the output), the max-pool of
    that as a second output."""
    geo = _ConvGeometry(attrs, "Conv2D")
    relu = "Relu" in tuple(attrs.get("fused_ops", ()))
    window = _fused_pool_window(attrs)

    def fn(input, filter, bias):
        x, f, bias, oh, ow, ph, pw = _fused_conv_parts(attrs, geo, input, filter, bias)
        dt = np.result_type(x.dtype, f.dtype)
        pooled = _pooled(attrs, window, x, f, oh, ow, dt)
        out = np.empty((x.shape[0], oh, ow, f.shape[3]), dt)
        _fused_conv_block(geo, x, f, bias.astype(dt, copy=False), out, oh, ow, ph, pw, relu, window, pooled)
        return out if pooled is None else (out, pooled)
    return _half_via_float32(fn)


def _conv_bp_input_cost(input_sizes, f, dy):
    fs = np.shape(f)
    return int(np.size(dy)) * (int(fs[0] * fs[1] * fs[2]) if len(fs) == 4 else 1)


def _conv_backprop_input(geo, dy, f, dx, oh, ow, ph, pw):
    """Conv2DBackpropInput of NHWC `dy`, added into the zeroed NHWC `dx`: a GEMM per block of rows,
    ``dy @ filter.T``, whose per-window gradients col2im adds onto `dx` while they are in cache.
    (Stride-1 input gradients can also run as a forward convolution of `dy` with the filter turned
    180 degrees; on LeNet's second layer that was 15% slower, its GEMM being only C=32 wide.)"""
    n, h, w, c = dx.shape
    kh, kw, _, co = f.shape
    if winograd.usable(dy.dtype, f.shape, geo.sh, geo.sw, geo.dh, geo.dw) and dx.dtype == dy.dtype == f.dtype:
        winograd.conv_backprop_input(dy, f, dx, ph, pw, _scratch)
        return
    g = _window(dx.shape, kh, kw, geo.sh, geo.sw, geo.dh, geo.dw, ph, pw, oh, ow)
    f2t = f.reshape(kh * kw * c, co).T
    dy2 = dy.reshape(-1, co)
    rows = dy2.shape[0]
    block = _block_rows(rows, kh * kw * c, co)
    buf = _scratch.get((block, kh * kw * c), dx.dtype)
    for r0 in range(0, rows, block):
        nr = min(block, rows - r0)
        dcols = gemm(dy2[r0:r0 + nr], f2t, buf[:nr])
        _col2im_rows(dcols.reshape(-1), g, r0, nr, dx.reshape(-1))


def _conv_bp_input_split(attrs):
    """Batch blocks of a Conv2DBackpropInput: images do not share input gradients."""
    geo = _ConvGeometry(attrs, "Conv2DBackpropInput")

    def split(parts, input_sizes, filter, out_backprop):
        f, dy = np.asarray(filter), np.asarray(out_backprop)
        sizes = tuple(int(d) for d in np.asarray(input_sizes).reshape(-1))
        plan = _conv_split_plan(geo, parts, dy, sizes, f.shape, f, dy)
        if plan is None:
            return None
        blocks, oh, ow, ph, pw = plan
        if dy.shape != (sizes[0], oh, ow, f.shape[3]):
            return None
        dy = np.ascontiguousarray(dy)
        if _winograd_ok(geo, dy, f.shape, f):
            u = winograd.backprop_input_filter(f)
            dx = np.empty(sizes, dy.dtype)          # every pixel written
            kh, kw = f.shape[:2]
            return dx, [functools.partial(winograd.convolve, dy[lo:hi], u, dx[lo:hi], kh - 1 - ph, kw - 1 - pw,
                                          _scratch) for lo, hi in blocks]
        dx = np.zeros(sizes, dy.dtype)
        return dx, [functools.partial(_conv_backprop_input, geo, dy[lo:hi], f, dx[lo:hi], oh, ow, ph, pw)
                    for lo, hi in blocks]
    return split


@register_kernel("Conv2DBackpropInput", "CPU", cost=_conv_bp_input_cost, unit_ns=MAC_NS, split=_conv_bp_input_split)
def conv2d_backprop_input(attrs):
    """tf.raw_ops.Conv2DBackpropInput: gradient of Conv2D with respect to its input.

    A GEMM ``dy [N*OH*OW, O] @ filter.T [O, KH*KW*C]`` per block of rows gives per-window
    gradients, which col2im adds onto the input grid.
    """
    geo = _ConvGeometry(attrs, "Conv2DBackpropInput")

    def fn(input_sizes, filter, out_backprop):
        n, h, w, c = _shape_from_nhwc("Conv2DBackpropInput", input_sizes, geo.fmt)
        f = _check_filter("Conv2DBackpropInput", filter)
        dy = _conv_input("Conv2DBackpropInput", "out_backprop", out_backprop, geo.fmt)
        kh, kw, _, co = f.shape
        oh, ow, ph, pw = geo.resolve((n, h, w, c), f.shape)
        if dy.shape != (n, oh, ow, co):
            raise ValueError(f"Conv2DBackpropInput: out_backprop has shape {dy.shape} (NHWC) but input_sizes "
                             f"{(n, h, w, c)} and filter {f.shape} give an output of {(n, oh, ow, co)}")
        dtype = np.result_type(f.dtype, dy.dtype)
        if geo.is_pointwise(f.shape, ph, pw):
            f2t = f.reshape(c, co).T
            return _from_nhwc(np.matmul(dy.reshape(-1, co), f2t).reshape(n, h, w, c), geo.fmt)
        dx = np.zeros((n, h, w, c), dtype)
        _conv_backprop_input(geo, dy, f, dx, oh, ow, ph, pw)
        return _from_nhwc(dx, geo.fmt)
    return _half_via_float32(fn)


def _conv_bp_filter_cost(x, filter_sizes, dy):
    fs = np.asarray(filter_sizes).reshape(-1)
    return int(np.size(dy)) * (int(fs[0] * fs[1] * fs[2]) if fs.size == 4 else 1)


def _conv_backprop_filter(geo, x, dy, fshape, oh, ow, ph, pw):
    """The filter gradient of NHWC `x` and `dy` as [KH*KW*C, O]: ``columns(x).T @ dy``, summed
    block by block inside the GEMM (beta=1) into one small accumulator that stays in cache."""
    kh, kw, c, co = fshape
    dt = np.result_type(x.dtype, dy.dtype)
    if winograd.usable(x.dtype, fshape, geo.sh, geo.sw, geo.dh, geo.dw) and dy.dtype == x.dtype:
        return winograd.conv_backprop_filter(x, dy, ph, pw, _scratch)
    if _direct_ok(geo, fshape, x, dy):
        return _direct_filter_grad(geo, x, dy, fshape, oh, ow, ph, pw)
    g = _window(x.shape, kh, kw, geo.sh, geo.sw, geo.dh, geo.dw, ph, pw, oh, ow)
    df = np.zeros((kh * kw * c, co), dt)
    dy2 = dy.reshape(-1, co)
    for r0, nr, cols in _ColumnBlocks(x, g, dt, o=co):
        gemm(cols.T, dy2[r0:r0 + nr], df, beta=1.0)
    return df


def _conv_bp_filter_split(attrs):
    """Batch blocks of a Conv2DBackpropFilter: each thread sums its images' filter gradients, and
    the thread that finishes last adds the partial sums."""
    geo = _ConvGeometry(attrs, "Conv2DBackpropFilter")

    def split(parts, input, filter_sizes, out_backprop):
        x, dy = np.asarray(input), np.asarray(out_backprop)
        fshape = tuple(int(d) for d in np.asarray(filter_sizes).reshape(-1))
        plan = _conv_split_plan(geo, parts, x, x.shape, fshape, x, dy)
        if plan is None:
            return None
        blocks, oh, ow, ph, pw = plan
        if dy.shape != (x.shape[0], oh, ow, fshape[3]):
            return None
        x, dy = np.ascontiguousarray(x), np.ascontiguousarray(dy)
        partial_sums = [None] * len(blocks)
        wino = _winograd_ok(geo, x, fshape, dy)

        def block(i, lo, hi):
            if wino:        # sums in the transformed domain, transformed back once by finish()
                partial_sums[i] = winograd.filter_gradient_sums(x[lo:hi], dy[lo:hi], ph, pw, _scratch)
            else:
                partial_sums[i] = _conv_backprop_filter(geo, x[lo:hi], dy[lo:hi], fshape, oh, ow, ph, pw)

        def finish():
            total = partial_sums[0]
            for p in partial_sums[1:]:
                total += p
            if wino:
                total = winograd.filter_gradient_of(total)
            return total.reshape(fshape)
        return None, [functools.partial(block, i, lo, hi) for i, (lo, hi) in enumerate(blocks)], finish
    return split


@register_kernel("Conv2DBackpropFilter", "CPU", cost=_conv_bp_filter_cost, unit_ns=MAC_NS, split=_conv_bp_filter_split)
def conv2d_backprop_filter(attrs):
    """tf.raw_ops.Conv2DBackpropFilter: gradient of Conv2D with respect to its filter.

    ``columns(input).T @ dy`` by GEMM over blocks of the column matrix, reshaped to HWIO.
    """
    geo = _ConvGeometry(attrs, "Conv2DBackpropFilter")

    def fn(input, filter_sizes, out_backprop):
        x = _conv_input("Conv2DBackpropFilter", "input", input, geo.fmt)
        fshape = tuple(int(d) for d in np.asarray(filter_sizes).reshape(-1))
        if len(fshape) != 4:
            raise ValueError(f"Conv2DBackpropFilter: filter_sizes must have 4 entries, got {fshape}")
        dy = _conv_input("Conv2DBackpropFilter", "out_backprop", out_backprop, geo.fmt)
        n, h, w, c = x.shape
        kh, kw, _, co = fshape
        oh, ow, ph, pw = geo.resolve(x.shape, fshape)
        if dy.shape != (n, oh, ow, co):
            raise ValueError(f"Conv2DBackpropFilter: out_backprop has shape {dy.shape} (NHWC) but input "
                             f"{x.shape} and filter_sizes {fshape} give an output of {(n, oh, ow, co)}")
        dtype = np.result_type(x.dtype, dy.dtype)
        if geo.is_pointwise(fshape, ph, pw):
            df_t = np.matmul(dy.reshape(-1, co).T, x.reshape(-1, c))
            return np.ascontiguousarray(df_t.T).reshape(fshape).astype(dtype, copy=False)
        df = _conv_backprop_filter(geo, x, dy, fshape, oh, ow, ph, pw)
        return df.reshape(fshape).astype(dtype, copy=False)
    return _half_via_float32(fn)
