"""CPU kernels of the image ops (graph/ops/image_ops.py): ResizeBilinear, ResizeNearestNeighbor,
ResizeBicubic, ResizeArea, their gradients, and AdjustContrastv2.

Every resize is separable: each output row and column reads a few input rows and columns (taps)
with float32 weights, computed per axis exactly as TF's kernels compute them (float32 coordinates,
the same floor/ceil/round, bicubic's 1024-entry coefficient table), then applied by numba loops
(channels innermost, contiguous): the forward passes in float32 in TF's order of operations, the
gradients scatter-adding with the products in the precision TF forms them in, the sums in the
input's dtype.
"""
from __future__ import annotations

import functools

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.cpu.window import _batch_blocks
from actorflow.kernels.lazy_numba import njit
from actorflow.kernels.registry import register_kernel

_F32 = np.float32


def _check(op: str, images, size, attrs, what="input"):
    """TF's ImageResizerState checks; returns (batch, in_h, in_w, channels, out_h, out_w)."""
    images = np.asarray(images)
    if images.ndim != 4:
        raise InvalidArgumentError(f"{op}: {what} must be 4-dimensional, got shape {list(images.shape)}")
    size = np.asarray(size)
    if size.ndim != 1:
        raise InvalidArgumentError(f"{op}: size must be 1-dimensional, got shape {list(size.shape)}")
    if size.shape[0] != 2:
        raise InvalidArgumentError(f"{op}: size must have two elements, got {size.tolist()}")
    if attrs.get("half_pixel_centers", False) and attrs.get("align_corners", False):
        raise InvalidArgumentError(f"{op}: If half_pixel_centers is True, align_corners must be False.")
    out_h, out_w = int(size[0]), int(size[1])
    if out_h <= 0 or out_w <= 0:
        raise InvalidArgumentError(f"{op}: output dimensions must be positive, got [{out_h}, {out_w}]")
    b, h, w, c = images.shape
    if h <= 0 or w <= 0:
        raise InvalidArgumentError(f"{op}: {what} image must be of non-zero size, got shape {list(images.shape)}")
    return b, h, w, c, out_h, out_w


def _numba_ready(images):
    """`images` contiguous, half floats widened to float32 (numba has no CPU float16; every kernel
    computes in float32 anyway)."""
    x = np.asarray(images)
    return np.ascontiguousarray(x, _F32 if x.dtype == np.float16 else None)


def _scale(in_size: int, out_size: int, align_corners: bool):
    """TF's CalculateResizeScale, in float32."""
    if align_corners and out_size > 1:
        return _F32(in_size - 1) / _F32(out_size - 1)
    return _F32(in_size) / _F32(out_size)


def _coords(in_size, out_size, align_corners, half_pixel, nn=False):
    """The float32 input coordinate each output index samples (TF's HalfPixelScaler, its NN variant,
    or LegacyScaler)."""
    s = _scale(in_size, out_size, align_corners)
    i = np.arange(out_size, dtype=_F32)
    if half_pixel:
        return (i + _F32(0.5)) * s if nn else (i + _F32(0.5)) * s - _F32(0.5)
    return i * s


def bilinear_taps(in_size, out_size, align_corners, half_pixel):
    """(lower, upper, lerp) per output index: TF's compute_interpolation_weights."""
    x = _coords(in_size, out_size, align_corners, half_pixel)
    f = np.floor(x)
    lower = np.maximum(f, 0).astype(np.int64)
    upper = np.minimum(np.ceil(x).astype(np.int64), in_size - 1)
    return lower, upper, (x - f).astype(_F32)


def nearest_index(in_size, out_size, align_corners, half_pixel):
    """The input index each output index copies (TF's ResizeNearestNeighbor: roundf with
    align_corners, floorf otherwise; clamped)."""
    x = _coords(in_size, out_size, align_corners, half_pixel, nn=True)
    if align_corners:
        fl = np.floor(x)
        idx = np.where(x - fl >= _F32(0.5), fl + 1, fl)      # roundf: halves away from zero (x >= 0)
    else:
        idx = np.floor(x)
    idx = np.minimum(idx.astype(np.int64), in_size - 1)
    return np.maximum(idx, 0) if half_pixel else idx


_TABLE_SIZE = 1024


def _cubic_table(a: float):
    """TF's bicubic coefficient table (InitCoeffsTable): float32 entries computed in double."""
    t = np.empty((_TABLE_SIZE + 1) * 2, _F32)
    for i in range(_TABLE_SIZE + 1):
        x = float(_F32(i * 1.0 / _TABLE_SIZE))
        t[2 * i] = ((a + 2) * x - (a + 3)) * x * x + 1
        x = float(_F32(x + 1.0))
        t[2 * i + 1] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return t


_TABLES: dict = {}


def bicubic_taps(in_size, out_size, align_corners, half_pixel):
    """(indices [out, 4], weights [out, 4] float32): TF's GetWeightsAndIndices (Keys' a = -0.5 and
    out-of-image taps dropped and renormalized with half_pixel_centers; a = -0.75 and edge taps
    repeated otherwise)."""
    a = -0.5 if half_pixel else -0.75
    if a not in _TABLES:
        _TABLES[a] = _cubic_table(a)
    table = _TABLES[a]
    x = _coords(in_size, out_size, align_corners, half_pixel)
    loc = np.floor(x).astype(np.int64)
    delta = (x - loc.astype(_F32)).astype(_F32)
    off = np.rint(delta * _F32(_TABLE_SIZE)).astype(np.int64)
    w = np.stack([table[off * 2 + 1], table[off * 2], table[(_TABLE_SIZE - off) * 2],
                  table[(_TABLE_SIZE - off) * 2 + 1]], axis=1).astype(_F32)
    raw = loc[:, None] + np.arange(-1, 3)[None, :]
    idx = np.clip(raw, 0, in_size - 1)
    if half_pixel:
        w = np.where(idx == raw, w, _F32(0))
        total = w[:, 0] + w[:, 1] + w[:, 2] + w[:, 3]
        ok = np.abs(total) >= _F32(1000.0) * np.finfo(_F32).tiny
        inv = np.where(ok, _F32(1) / np.where(ok, total, _F32(1)), _F32(1)).astype(_F32)
        w = (w * inv[:, None]).astype(_F32)
    return idx, w


def area_weights(in_size, out_size, align_corners):
    """The [out, in] float32 matrix of ResizeArea's cell overlaps (TF's legacy area resize)."""
    s = _scale(in_size, out_size, align_corners)
    m = np.zeros((out_size, in_size), _F32)
    for y in range(out_size):
        lo, hi = _F32(y) * s, _F32(y + 1) * s
        for i in range(int(np.floor(lo)), int(np.ceil(hi))):
            if i < lo:
                v = s if i + 1 > hi else _F32(i + 1) - lo
            else:
                v = hi - _F32(i) if i + 1 > hi else _F32(1.0)
            m[y, min(max(i, 0), in_size - 1)] += v
    return m, s


def _resize_cost(images, size):
    n = np.asarray(size).reshape(-1)
    shape = np.shape(images)
    if len(shape) != 4 or n.size != 2:
        return 1
    return int(shape[0]) * int(n[0]) * int(n[1]) * int(shape[3]) * 4


@njit(cache=True, nogil=True)
def _bilinear(x, ylo, yhi, yl, xlo, xhi, xl, out):
    """TF's resize_image: lerp along x in the two rows, then along y, in float32."""
    nb, oh, ow, nc = out.shape
    for b in range(nb):
        for y in range(oh):
            y0, y1, fy = ylo[y], yhi[y], yl[y]
            for xx in range(ow):
                x0, x1, fx = xlo[xx], xhi[xx], xl[xx]
                for c in range(nc):
                    tl = np.float32(x[b, y0, x0, c])
                    tr = np.float32(x[b, y0, x1, c])
                    bl = np.float32(x[b, y1, x0, c])
                    br = np.float32(x[b, y1, x1, c])
                    top = tl + (tr - tl) * fx
                    bottom = bl + (br - bl) * fx
                    out[b, y, xx, c] = top + (bottom - top) * fy


@njit(cache=True, nogil=True)
def _nearest(x, yi, xi, out):
    nb, oh, ow, nc = out.shape
    for b in range(nb):
        for y in range(oh):
            sy = yi[y]
            for xx in range(ow):
                sx = xi[xx]
                for c in range(nc):
                    out[b, y, xx, c] = x[b, sy, sx, c]


@njit(cache=True, nogil=True)
def _taps(x, yi, yw, xi, xw, out):
    """out[b, y, x, c] = sum_j xw[x, j] * (sum_i yw[y, i] * x[b, yi[y, i], xi[x, j], c]) in float32:
    TF's bicubic order (columns interpolated along y first, then along x), as two passes; `x` is
    [b, h, w * c] (a row's pixels flat, so that the y pass runs over contiguous memory)."""
    nb, oh, ow, nc = out.shape
    n = x.shape[2]
    ky, kx = yi.shape[1], xi.shape[1]
    rows = np.empty(n, np.float32)
    for b in range(nb):
        for y in range(oh):
            src = x[b, yi[y, 0]]
            wy = yw[y, 0]
            for k in range(n):
                rows[k] = wy * np.float32(src[k])
            for i in range(1, ky):
                src = x[b, yi[y, i]]
                wy = yw[y, i]
                for k in range(n):
                    rows[k] += wy * np.float32(src[k])
            dst = out[b, y]
            for xx in range(ow):
                o = xi[xx, 0] * nc
                wx = xw[xx, 0]
                for c in range(nc):
                    dst[xx, c] = wx * rows[o + c]
                for j in range(1, kx):
                    o = xi[xx, j] * nc
                    wx = xw[xx, j]
                    for c in range(nc):
                        dst[xx, c] += wx * rows[o + c]


# Each resize kernel is a plan: checks and taps, the output allocated, and a `block(lo, hi)` that
# fills images lo..hi of it (images resize independently), so that a big call splits by batch over
# the pool's threads; `finish` (or None) turns the filled buffer into the op's output.

def _kernel(plan_of):
    """The whole call of a plan factory: every image in one block."""
    def factory(attrs):
        plan = plan_of(attrs)

        def run(*inputs):
            out, block, finish = plan(*inputs)
            if out.size:
                block(0, out.shape[0])
            return out if finish is None else finish(out)
        return run
    return factory


def _splitter(plan_of):
    """The `split` of a plan factory: batch blocks, or None (the call runs whole) when the batch is
    too small or the inputs are bad (the whole call raises their error)."""
    def make(attrs):
        try:
            plan = plan_of(attrs)
        except InvalidArgumentError:
            return lambda parts, *inputs: None

        def split(parts, *inputs):
            try:
                out, block, finish = plan(*inputs)
            except InvalidArgumentError:
                return None
            blocks = _batch_blocks(out.shape[0], parts) if out.size else None
            if blocks is None:
                return None
            thunks = [functools.partial(block, lo, hi) for lo, hi in blocks]
            return (out, thunks) if finish is None else (None, thunks, lambda: finish(out))
        return split
    return make


def _register(op_type, plan_of, cost):
    register_kernel(op_type, "CPU", cost=cost, split=_splitter(plan_of))(_kernel(plan_of))


def _corners(attrs):
    return bool(attrs.get("align_corners", False)), bool(attrs.get("half_pixel_centers", False))


def _bilinear_plan(attrs):
    align, half = _corners(attrs)

    def plan(images, size):
        b, h, w, c, oh, ow = _check("ResizeBilinear", images, size, attrs)
        x = _numba_ready(images)
        ytaps, xtaps = bilinear_taps(h, oh, align, half), bilinear_taps(w, ow, align, half)
        out = np.empty((b, oh, ow, c), _F32)
        return out, lambda lo, hi: _bilinear(x[lo:hi], *ytaps, *xtaps, out[lo:hi]), None
    return plan


def _nearest_plan(attrs):
    align, half = _corners(attrs)

    def plan(images, size):
        b, h, w, c, oh, ow = _check("ResizeNearestNeighbor", images, size, attrs)
        x = np.ascontiguousarray(images)
        out = np.empty((b, oh, ow, c), x.dtype)
        yi, xi = nearest_index(h, oh, align, half), nearest_index(w, ow, align, half)
        # half floats move as their bits (numba has no CPU float16): a copy is bitwise
        xs, outs = (x.view(np.uint16), out.view(np.uint16)) if x.dtype == np.float16 else (x, out)
        return out, lambda lo, hi: _nearest(xs[lo:hi], yi, xi, outs[lo:hi]), None
    return plan


def _taps_plan(images, ytaps, xtaps, b, c, scale=None):
    yi, yw = ytaps
    xi, xw = xtaps
    x = _numba_ready(images)
    x = x.reshape(x.shape[0], x.shape[1], -1)
    out = np.empty((b, len(yi), len(xi), c), _F32)

    def block(lo, hi):
        _taps(x[lo:hi], yi, yw, xi, xw, out[lo:hi])
        if scale is not None:
            out[lo:hi] *= scale
    return out, block, None


def _bicubic_plan(attrs):
    align, half = _corners(attrs)

    def plan(images, size):
        b, h, w, c, oh, ow = _check("ResizeBicubic", images, size, attrs)
        return _taps_plan(images, bicubic_taps(h, oh, align, half), bicubic_taps(w, ow, align, half), b, c)
    return plan


def area_taps(in_size, out_size, align_corners):
    """ResizeArea's overlaps as taps: (indices [out, k], weights [out, k] float32), rows padded with
    zero weights; and the scale."""
    m, s = area_weights(in_size, out_size, align_corners)
    k = max(int((m != 0).sum(1).max()), 1)
    idx = np.zeros((out_size, k), np.int64)
    wts = np.zeros((out_size, k), _F32)
    for y in range(out_size):
        nz = np.flatnonzero(m[y])
        idx[y, :len(nz)] = nz
        wts[y, :len(nz)] = m[y, nz]
    return (idx, wts), s


def _area_plan(attrs):
    align = bool(attrs.get("align_corners", False))

    def plan(images, size):
        b, h, w, c, oh, ow = _check("ResizeArea", images, size, attrs)
        ytaps, sy = area_taps(h, oh, align)
        xtaps, sx = area_taps(w, ow, align)
        return _taps_plan(images, ytaps, xtaps, b, c, _F32(1.0) / (sy * sx))
    return plan


_register("ResizeBilinear", _bilinear_plan, _resize_cost)
_register("ResizeNearestNeighbor", _nearest_plan, _resize_cost)
_register("ResizeBicubic", _bicubic_plan, lambda images, size: 4 * _resize_cost(images, size))
_register("ResizeArea", _area_plan, _resize_cost)


# -- gradients --------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _taps_grad(g, yi, yw, xi, xw, out):
    """out[b, yi[y, i], xi[x, j], c] += (g[b, y, x, c] * yw[y, i]) * xw[x, j]: the product in g's
    dtype, the sum in out's."""
    nb, rh, rw, nc = g.shape
    ky, kx = yi.shape[1], xi.shape[1]
    for b in range(nb):
        for y in range(rh):
            for i in range(ky):
                wy = yw[y, i]
                oy = yi[y, i]
                for x in range(rw):
                    for j in range(kx):
                        wx = xw[x, j]
                        ox = xi[x, j]
                        for c in range(nc):
                            out[b, oy, ox, c] += (g[b, y, x, c] * wy) * wx


def _grad_plan(op, grads, original, taps, product_in_output_dtype):
    grads = np.asarray(grads)
    original = np.asarray(original)
    if original.ndim != 4:
        raise InvalidArgumentError(f"{op}: original_image must be 4-dimensional, got shape {list(original.shape)}")
    if grads.ndim != 4 or grads.shape[0] != original.shape[0] or grads.shape[3] != original.shape[3]:
        raise InvalidArgumentError(f"{op}: grads (shape {list(grads.shape)}) and original_image (shape "
                                   f"{list(original.shape)}) must agree in batch and channels")
    b, h, w, c = original.shape
    yi, yw = taps(h, grads.shape[1])
    xi, xw = taps(w, grads.shape[2])
    acc = np.float64 if original.dtype == np.float64 else _F32
    out = np.zeros((b, h, w, c), acc)
    # TF's ResizeBilinearGrad multiplies in float32, ResizeBicubicGrad in the output's dtype.
    g = np.ascontiguousarray(grads, acc if product_in_output_dtype else _F32)

    def block(lo, hi):
        if grads.size:
            _taps_grad(g[lo:hi], yi, yw, xi, xw, out[lo:hi])
    dtype = original.dtype
    return out, block, (None if dtype == acc else lambda o: o.astype(dtype))


def _checked_corners(op, attrs):
    align, half = _corners(attrs)
    if half and align:
        raise InvalidArgumentError(f"{op}: If half_pixel_centers is True, align_corners must be False.")
    return align, half


def _bilinear_grad_plan(attrs):
    align, half = _checked_corners("ResizeBilinearGrad", attrs)

    def taps(in_size, out_size):
        lo, hi, lerp = bilinear_taps(in_size, out_size, align, half)
        return np.stack([lo, hi], 1), np.stack([_F32(1.0) - lerp, lerp], 1).astype(_F32)

    return lambda grads, original_image: _grad_plan("ResizeBilinearGrad", grads, original_image, taps, False)


def _bicubic_grad_plan(attrs):
    align, half = _checked_corners("ResizeBicubicGrad", attrs)
    return lambda grads, original_image: _grad_plan("ResizeBicubicGrad", grads, original_image,
                                                    lambda i, o: bicubic_taps(i, o, align, half), True)


@njit(cache=True, nogil=True)
def _nearest_grad(g, yi, xi, out):
    nb, rh, rw, nc = g.shape
    for b in range(nb):
        for y in range(rh):
            oy = yi[y]
            for xx in range(rw):
                ox = xi[xx]
                for c in range(nc):
                    out[b, oy, ox, c] += g[b, y, xx, c]


def _nearest_grad_plan(attrs):
    align, half = _corners(attrs)

    def plan(grads, size):
        b, rh, rw, c, h, w = _check("ResizeNearestNeighborGrad", grads, size, attrs, what="grads")
        dtype = np.asarray(grads).dtype
        g = _numba_ready(grads)             # half gradients sum in float32
        out = np.zeros((b, h, w, c), g.dtype)
        yi, xi = nearest_index(h, rh, align, half), nearest_index(w, rw, align, half)

        def block(lo, hi):
            if g.size:
                _nearest_grad(g[lo:hi], yi, xi, out[lo:hi])
        return out, block, (None if dtype == g.dtype else lambda o: o.astype(dtype))
    return plan


_register("ResizeBilinearGrad", _bilinear_grad_plan, lambda g, o: 4 * int(np.size(g)))
_register("ResizeBicubicGrad", _bicubic_grad_plan, lambda g, o: 16 * int(np.size(g)))
_register("ResizeNearestNeighborGrad", _nearest_grad_plan, lambda g, size: int(np.size(g)))


@register_kernel("AdjustContrastv2", "CPU")
def adjust_contrast_kernel(attrs):
    def adjust_contrast(images, contrast_factor):
        x = np.asarray(images)
        f = np.asarray(contrast_factor)
        if x.ndim < 3:
            raise InvalidArgumentError(f"AdjustContrastv2: input must be at least 3-D, got shape {list(x.shape)}")
        if f.ndim != 0:
            raise InvalidArgumentError(f"AdjustContrastv2: contrast_factor must be scalar: {list(f.shape)}")
        xf = x.astype(_F32, copy=False)
        mean = xf.mean(axis=(-3, -2), keepdims=True, dtype=np.float64).astype(_F32)
        out = (xf - mean) * _F32(f) + mean
        return np.ascontiguousarray(out.astype(x.dtype, copy=False))
    return adjust_contrast
