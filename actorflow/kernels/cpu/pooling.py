"""CPU kernels for MaxPool, MaxPoolGrad (and _FusedMaxPoolGrad: with ReluGrad and BiasAddGrad), AvgPool
and AvgPoolGrad: single numba loops over flat NHWC views (compiled lazily, cached on disk, GIL
released). numba has no float16 arithmetic, so half-precision pooling runs in float32.
"""
from __future__ import annotations

import functools

import numpy as np

from actorflow.kernels.cpu.matmul import FusedPartError
from actorflow.kernels.cpu.window import (
    _FAST_FLOATS,
    _batch_blocks,
    _from_nhwc,
    _half_via_float32,
    _PoolGeometry,
    _shape_from_nhwc,
    _to_nhwc,
)
from actorflow.kernels.lazy_numba import njit, uintp
from actorflow.kernels.registry import register_kernel

# Pooling kernels work on flat views of NHWC arrays, one output pixel at a time with the channel
# loop innermost (contiguous), and unsigned offsets for the same reason as im2col.

@njit(cache=True, nogil=True)
def _max_pool(x, n_img, h_in, w_in, c_in, kh, kw, sh, sw, ph, pw, oh, ow, out):
    uc = uintp(c_in)
    for n in range(n_img):
        for i in range(oh):
            h0 = i * sh - ph
            hs, he = max(h0, 0), min(h0 + kh, h_in)
            for j in range(ow):
                w0 = j * sw - pw
                ws, we = max(w0, 0), min(w0 + kw, w_in)
                o = uintp(((n * oh + i) * ow + j) * c_in)
                # Padding is never a candidate (TF pads max-pool with -inf), so seed the window
                # with its first real pixel rather than a sentinel.
                first = uintp(((n * h_in + hs) * w_in + ws) * c_in)
                for c in range(uc):
                    out[o + c] = x[first + c]
                for h in range(hs, he):
                    for w in range(ws, we):
                        src = uintp(((n * h_in + h) * w_in + w) * c_in)
                        for c in range(uc):
                            v = x[src + c]
                            m = out[o + c]
                            out[o + c] = v if v > m else m      # a select, not a branch: vectorises


@njit(cache=True, nogil=True)
def _max_pool_grad(x, grad, n_img, h_in, w_in, c_in, kh, kw, sh, sw, ph, pw, oh, ow, dx):
    uc = uintp(c_in)
    best = np.empty(c_in, x.dtype)
    arg = np.empty(c_in, np.uintp)
    for n in range(n_img):
        for i in range(oh):
            h0 = i * sh - ph
            hs, he = max(h0, 0), min(h0 + kh, h_in)
            for j in range(ow):
                w0 = j * sw - pw
                ws, we = max(w0, 0), min(w0 + kw, w_in)
                first = uintp(((n * h_in + hs) * w_in + ws) * c_in)
                for c in range(uc):
                    best[c] = x[first + c]
                    arg[c] = first
                # Strict '>' keeps the first maximum in row-major window order, as TF does.
                for h in range(hs, he):
                    for w in range(ws, we):
                        src = uintp(((n * h_in + h) * w_in + w) * c_in)
                        for c in range(uc):
                            v = x[src + c]
                            if v > best[c]:
                                best[c] = v
                                arg[c] = src
                o = uintp(((n * oh + i) * ow + j) * c_in)
                for c in range(uc):
                    dx[arg[c] + c] += grad[o + c]


@njit(inline="always")
def _window_argmax(x, n, h_in, w_in, c_in, hs, he, ws, we, best, arg):
    """For each of the c_in channels of image n, the position (row-major within the clipped window
    [hs, he) x [ws, we)) of the window's first maximum into arg[c], the maximum into best[c]: strict
    '>' keeps the first maximum, as TF does. Selects, not conditional stores, in the channel loop."""
    uc = uintp(c_in)
    first = uintp(((n * h_in + hs) * w_in + ws) * c_in)
    for c in range(uc):
        best[c] = x[first + c]
        arg[c] = 0
    k = 0
    for h in range(hs, he):
        for w in range(ws, we):
            src = uintp(((n * h_in + h) * w_in + w) * c_in)
            for c in range(uc):
                v = x[src + c]
                b = best[c]
                up = v > b
                best[c] = v if up else b
                arg[c] = k if up else arg[c]
            k += 1


@njit(cache=True, nogil=True)
def _max_pool_grad_tiled(x, grad, n_img, h_in, w_in, c_in, kh, kw, sh, sw, ph, pw, oh, ow, dx):
    """_max_pool_grad for windows that tile the input (stride == window, so every real pixel lies
    in exactly one window): each element of `dx` is written once, with its gradient or 0, so `dx`
    needs no zeroing pass and no read-modify-write (1.15-1.25x faster than zeroing and adding, on
    LeNet's 2x2 pools). The channel loops use selects, not conditional stores."""
    uc = uintp(c_in)
    best = np.empty(c_in, x.dtype)
    arg = np.empty(c_in, np.int64)
    for n in range(n_img):
        for i in range(oh):
            h0 = i * sh - ph
            hs, he = max(h0, 0), min(h0 + kh, h_in)
            for j in range(ow):
                w0 = j * sw - pw
                ws, we = max(w0, 0), min(w0 + kw, w_in)
                _window_argmax(x, n, h_in, w_in, c_in, hs, he, ws, we, best, arg)
                o = uintp(((n * oh + i) * ow + j) * c_in)
                k = 0
                for h in range(hs, he):
                    for w in range(ws, we):
                        dst = uintp(((n * h_in + h) * w_in + w) * c_in)
                        for c in range(uc):
                            dx[dst + c] = grad[o + c] if arg[c] == k else 0
                        k += 1


@njit(cache=True, nogil=True)
def _max_pool_grad_relu_tiled(x, grad, n_img, h_in, w_in, c_in, kh, kw, sh, sw, ph, pw, oh, ow, dx, db):
    """_max_pool_grad_tiled followed by ReluGrad with `x` as its features (the pool's input is a
    ReLU's output), in the same pass: dx = MaxPoolGrad * (x > 0), as ReluGrad writes it (``g`` where
    x > 0, else ``g * 0``); and, when `db` has C entries, the channel sums of dx (BiasAddGrad) added
    into `db` as each window is written. The max-pool's argmax is taken exactly as in
    _max_pool_grad_tiled."""
    uc = uintp(c_in)
    with_db = db.shape[0] == c_in
    zero = x.dtype.type(0)
    best = np.empty(c_in, x.dtype)
    arg = np.empty(c_in, np.int64)
    for n in range(n_img):
        for i in range(oh):
            h0 = i * sh - ph
            hs, he = max(h0, 0), min(h0 + kh, h_in)
            for j in range(ow):
                w0 = j * sw - pw
                ws, we = max(w0, 0), min(w0 + kw, w_in)
                _window_argmax(x, n, h_in, w_in, c_in, hs, he, ws, we, best, arg)
                o = uintp(((n * oh + i) * ow + j) * c_in)
                k = 0
                for h in range(hs, he):
                    for w in range(ws, we):
                        dst = uintp(((n * h_in + h) * w_in + w) * c_in)
                        for c in range(uc):
                            g = grad[o + c] if arg[c] == k else zero
                            v = g if x[dst + c] > zero else g * zero
                            dx[dst + c] = v
                            if with_db:
                                db[c] += v
                        k += 1


@njit(cache=True, nogil=True)
def _max_pool_2x2(x, n_img, h_in, w_in, c_in, oh, ow, out):
    """_max_pool for 2x2 windows with stride 2 that cover the input exactly (h_in == 2*oh,
    w_in == 2*ow): the four candidates of each channel are compared in registers and the channel
    loop is the only loop (vectorised): 2-3.4x faster than _max_pool on LeNet's two pools (thread
    CPU time, alternating). Offsets are all unsigned, as in the other loops."""
    uc = uintp(c_in)
    row = uintp(w_in) * uc
    pix = uc + uc                           # two input pixels: one window's width
    for r in range(uintp(n_img) * uintp(oh)):
        top = r * (row + row)               # first input row of output row r (over all images)
        o = r * uintp(ow) * uc
        for j in range(uintp(ow)):
            a = top + j * pix
            d = o + j * uc
            for c in range(uc):
                m = x[a + c]
                v = x[a + uc + c]
                m = v if v > m else m
                v = x[a + row + c]
                m = v if v > m else m
                v = x[a + row + uc + c]
                out[d + c] = v if v > m else m


@njit(cache=True, nogil=True)
def _relu_grad_channel_sums(dx, x, c_in, db):
    """In place: dx = ReluGrad(dx, x) over flat NHWC arrays, and (when `db` has C entries) the
    channel sums of the result added into `db`."""
    uc = uintp(c_in)
    with_db = db.shape[0] == c_in
    zero = x.dtype.type(0)
    for p in range(uintp(dx.shape[0]) // uc):
        o = p * uc
        for c in range(uc):
            g = dx[o + c]
            v = g if x[o + c] > zero else g * zero
            dx[o + c] = v
            if with_db:
                db[c] += v


@njit(cache=True, nogil=True)
def _avg_pool(x, n_img, h_in, w_in, c_in, kh, kw, sh, sw, ph, pw, oh, ow, out):
    uc = uintp(c_in)
    for n in range(n_img):
        for i in range(oh):
            h0 = i * sh - ph
            hs, he = max(h0, 0), min(h0 + kh, h_in)
            for j in range(ow):
                w0 = j * sw - pw
                ws, we = max(w0, 0), min(w0 + kw, w_in)
                o = uintp(((n * oh + i) * ow + j) * c_in)
                for c in range(uc):
                    out[o + c] = 0
                for h in range(hs, he):
                    for w in range(ws, we):
                        src = uintp(((n * h_in + h) * w_in + w) * c_in)
                        for c in range(uc):
                            out[o + c] += x[src + c]
                # TF averages over the real pixels only: padding is excluded from the count.
                inv = 1.0 / ((he - hs) * (we - ws))
                for c in range(uc):
                    out[o + c] = out[o + c] * inv


@njit(cache=True, nogil=True)
def _avg_pool_grad(grad, n_img, h_in, w_in, c_in, kh, kw, sh, sw, ph, pw, oh, ow, dx):
    uc = uintp(c_in)
    for n in range(n_img):
        for i in range(oh):
            h0 = i * sh - ph
            hs, he = max(h0, 0), min(h0 + kh, h_in)
            for j in range(ow):
                w0 = j * sw - pw
                ws, we = max(w0, 0), min(w0 + kw, w_in)
                o = uintp(((n * oh + i) * ow + j) * c_in)
                inv = 1.0 / ((he - hs) * (we - ws))
                for h in range(hs, he):
                    for w in range(ws, we):
                        dst = uintp(((n * h_in + h) * w_in + w) * c_in)
                        for c in range(uc):
                            dx[dst + c] += grad[o + c] * inv


def _max_pool_grad_into(x, g, geo, ph, pw, oh, ow):
    """MaxPoolGrad of NHWC `x` and pooled gradient `g` as a new array (the tiled kernel when the
    windows tile the input, else a zeroed array the general kernel adds into)."""
    dx = np.empty(x.shape, g.dtype) if _tiles(geo, x.shape, ph, pw, oh, ow) else np.zeros(x.shape, g.dtype)
    _max_pool_grad_block(geo, x, g, dx, ph, pw, oh, ow)
    return dx


def _tiles(geo, shape, ph, pw, oh, ow):
    """Whether the pooling windows tile the NHWC input: stride == window, and the last window reaches
    the last row and column (VALID padding can leave a remainder no window reads)."""
    return (geo.kh == geo.sh and geo.kw == geo.sw and oh * geo.sh - ph >= shape[1]
            and ow * geo.sw - pw >= shape[2])


def _exact_2x2(geo, shape, ph, pw, oh, ow):
    """Whether the pool is 2x2 with stride 2 and covers the NHWC input exactly (no padding, nothing
    left over): the case of _max_pool_2x2. (A 2x2 gradient kernel written the same way ran 2.5x
    slower than _max_pool_grad_tiled: numba's loop vectoriser gives up on a loop that stores to four
    offsets of one array.)"""
    return (geo.kh == geo.kw == geo.sh == geo.sw == 2 and ph == pw == 0 and shape[1] == 2 * oh
            and shape[2] == 2 * ow)


def _max_pool_into(geo, x, out, ph, pw, oh, ow):
    """MaxPool of NHWC `x` into `out`."""
    if _exact_2x2(geo, x.shape, ph, pw, oh, ow):
        _max_pool_2x2(x.reshape(-1), *x.shape, oh, ow, out.reshape(-1))
    else:
        _max_pool(x.reshape(-1), *geo.args(x.shape, ph, pw, oh, ow), out.reshape(-1))


_VECTOR = None
_NO_SUMS = np.zeros(0, np.float32)


def _vector_2x2(geo, x, g, dx, ph, pw, oh, ow):
    """Whether vector_loops.max_pool_grad_2x2 runs this gradient: an exact 2x2 pool (_exact_2x2) of
    float32 NHWC arrays, channels a multiple of 8. On LeNet's first pool (64x28x28x32, one core) it and
    its fused ReLU/BiasAddGrad form ran 4-5x faster than _max_pool_grad_relu_tiled, whose channel
    loop stores to four offsets of `dx` and so is not vectorised."""
    return (g.size > 0 and _exact_2x2(geo, x.shape, ph, pw, oh, ow) and x.shape[3] % 8 == 0
            and x.dtype == g.dtype == dx.dtype == np.float32)


def _max_pool_grad_2x2(x, g, dx, relu, db):
    """vector_loops.max_pool_grad_2x2 (imported on first use: it imports numba and llvmlite) on NHWC
    arrays: `dx` gets the gradient (times the ReLU mask of `x` when `relu`), and `db` its channel sums
    added when it has C entries."""
    global _VECTOR
    if _VECTOR is None:
        from actorflow.kernels.cpu import vector_loops
        _VECTOR = vector_loops
    n, oh, ow, c = g.shape
    _VECTOR.max_pool_grad_2x2(x.reshape(-1), g.reshape(-1), n * oh, ow, c, relu, db, dx.reshape(-1))


def _max_pool_grad_block(geo, x, g, dx, ph, pw, oh, ow):
    """MaxPoolGrad of NHWC `x` and `g` into `dx` (zeroed unless the windows tile the input)."""
    if not g.size:
        dx.fill(0)
        return
    if _vector_2x2(geo, x, g, dx, ph, pw, oh, ow):
        _max_pool_grad_2x2(x, g, dx, False, _NO_SUMS)
        return
    (_max_pool_grad_tiled if _tiles(geo, x.shape, ph, pw, oh, ow) else _max_pool_grad)(
        x.reshape(-1), g.reshape(-1), *geo.args(x.shape, ph, pw, oh, ow), dx.reshape(-1))


def _pool_input(op_name, x, fmt):
    x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"{op_name}: input must be 4-D ({fmt}), got shape {x.shape}")
    return np.ascontiguousarray(_to_nhwc(x, fmt))


def _check_grad_shape(op_name, g, want):
    if g.shape != tuple(want):
        raise ValueError(f"{op_name}: grad has shape {g.shape} (NHWC) but the pooled output has shape {tuple(want)}")


def _pool_split(op_name, with_grad):
    """Batch blocks of MaxPool (with_grad False) or MaxPoolGrad: images pool independently."""
    def make(attrs):
        geo = _PoolGeometry(attrs, op_name)

        def split(parts, *inputs):
            x = np.asarray(inputs[0])
            g = np.asarray(inputs[-1]) if with_grad else x
            blocks = _batch_blocks(x.shape[0], parts) if x.ndim == 4 else None
            if (blocks is None or geo.fmt != "NHWC" or x.dtype not in _FAST_FLOATS or g.dtype != x.dtype
                    or g.ndim != 4):
                return None
            try:
                oh, ow, ph, pw = geo.resolve(x.shape)
            except ValueError:
                return None
            pooled = (x.shape[0], oh, ow, x.shape[3])
            if with_grad and g.shape != pooled:
                return None
            x, g = np.ascontiguousarray(x), np.ascontiguousarray(g)
            if not with_grad:
                out = np.empty(pooled, x.dtype)
            elif _tiles(geo, x.shape, ph, pw, oh, ow):
                out = np.empty(x.shape, x.dtype)        # the tiled kernel writes every element
            else:
                out = np.zeros(x.shape, x.dtype)

            def block(lo, hi):
                xb = x[lo:hi]
                if with_grad:
                    _max_pool_grad_block(geo, xb, g[lo:hi], out[lo:hi], ph, pw, oh, ow)
                else:
                    _max_pool_into(geo, xb, out[lo:hi], ph, pw, oh, ow)
            return out, [functools.partial(block, lo, hi) for lo, hi in blocks]
        return split
    return make


@register_kernel("MaxPool", "CPU", split=_pool_split("MaxPool", False))
def max_pool(attrs):
    """tf.raw_ops.MaxPool (NHWC; NCHW via transposes). SAME padding never wins the max."""
    geo = _PoolGeometry(attrs, "MaxPool")

    def fn(input):
        x = _pool_input("MaxPool", input, geo.fmt)
        oh, ow, ph, pw = geo.resolve(x.shape)
        out = np.empty((x.shape[0], oh, ow, x.shape[3]), x.dtype)
        if out.size:
            _max_pool_into(geo, x, out, ph, pw, oh, ow)
        return _from_nhwc(out, geo.fmt)
    return _half_via_float32(fn)


@register_kernel("MaxPoolGrad", "CPU", split=_pool_split("MaxPoolGrad", True))
def max_pool_grad(attrs):
    """tf.raw_ops.MaxPoolGrad: routes each output gradient to the first maximum of its window.

    The maximum is recomputed from orig_input (orig_output is accepted for signature parity), and
    ties go to the first pixel in row-major window order, as in TF's CPU kernel.
    """
    geo = _PoolGeometry(attrs, "MaxPoolGrad")

    def fn(orig_input, orig_output, grad):
        x = _pool_input("MaxPoolGrad", orig_input, geo.fmt)
        g = _pool_input("MaxPoolGrad", grad, geo.fmt)
        oh, ow, ph, pw = geo.resolve(x.shape)
        _check_grad_shape("MaxPoolGrad", g, (x.shape[0], oh, ow, x.shape[3]))
        return _from_nhwc(_max_pool_grad_into(x, g, geo, ph, pw, oh, ow), geo.fmt)
    return _half_via_float32(fn)


@register_kernel("AvgPool", "CPU")
def avg_pool(attrs):
    """tf.raw_ops.AvgPool: window means over real pixels (SAME padding is not counted)."""
    geo = _PoolGeometry(attrs, "AvgPool")

    def fn(value):
        x = _pool_input("AvgPool", value, geo.fmt)
        if x.dtype.kind != "f":
            raise TypeError(f"AvgPool: value must be floating point, got {x.dtype}")
        oh, ow, ph, pw = geo.resolve(x.shape)
        out = np.empty((x.shape[0], oh, ow, x.shape[3]), x.dtype)
        if out.size:
            _avg_pool(x.reshape(-1), *geo.args(x.shape, ph, pw, oh, ow), out.reshape(-1))
        return _from_nhwc(out, geo.fmt)
    return _half_via_float32(fn)


@register_kernel("AvgPoolGrad", "CPU")
def avg_pool_grad(attrs):
    """tf.raw_ops.AvgPoolGrad: spreads each output gradient evenly over its window's real pixels."""
    geo = _PoolGeometry(attrs, "AvgPoolGrad")

    def fn(orig_input_shape, grad):
        shape = _shape_from_nhwc("AvgPoolGrad", orig_input_shape, geo.fmt)
        g = _pool_input("AvgPoolGrad", grad, geo.fmt)
        oh, ow, ph, pw = geo.resolve(shape)
        _check_grad_shape("AvgPoolGrad", g, (shape[0], oh, ow, shape[3]))
        dx = np.zeros(shape, g.dtype)
        if g.size:
            _avg_pool_grad(g.reshape(-1), *geo.args(shape, ph, pw, oh, ow), dx.reshape(-1))
        return _from_nhwc(dx, geo.fmt)
    return _half_via_float32(fn)


# _FusedMaxPoolGrad: MaxPoolGrad -> ReluGrad (whose features are the pool's input, the ReLU output
# that was pooled) [-> BiasAddGrad of the result], made by the fusion pass. One pass over the
# activations instead of three: the ReLU mask is applied as each window's gradient is written, and
# the bias gradient summed from it while it is in cache (second output).

def _fused_pool_grad_block(geo, x, g, dx, db, ph, pw, oh, ow):
    """dx = ReluGrad(MaxPoolGrad(x, g), x) into `dx` (NHWC) and its channel sums added into `db`
    (an empty `db`: no sums)."""
    if _vector_2x2(geo, x, g, dx, ph, pw, oh, ow) and db.dtype == np.float32:
        _max_pool_grad_2x2(x, g, dx, True, db)
        return
    if _tiles(geo, x.shape, ph, pw, oh, ow) and g.size:
        _max_pool_grad_relu_tiled(x.reshape(-1), g.reshape(-1), *geo.args(x.shape, ph, pw, oh, ow),
                                  dx.reshape(-1), db)
        return
    dx.fill(0)
    if g.size:
        _max_pool_grad(x.reshape(-1), g.reshape(-1), *geo.args(x.shape, ph, pw, oh, ow), dx.reshape(-1))
    if x.size:
        _relu_grad_channel_sums(dx.reshape(-1), x.reshape(-1), x.shape[3], db)


def _fused_pool_grad_parts(geo, orig_input, grad):
    """(x, g, oh, ow, ph, pw) checked as MaxPoolGrad (part 0) checks them."""
    try:
        x = _pool_input("MaxPoolGrad", orig_input, geo.fmt)
        g = _pool_input("MaxPoolGrad", grad, geo.fmt)
        oh, ow, ph, pw = geo.resolve(x.shape)
        _check_grad_shape("MaxPoolGrad", g, (x.shape[0], oh, ow, x.shape[3]))
        if x.dtype != g.dtype or x.dtype not in _FAST_FLOATS:
            raise TypeError(f"MaxPoolGrad: orig_input ({x.dtype}) and grad ({g.dtype}) must both be float32 or "
                            "float64 in a fused max-pool gradient")
    except (ValueError, TypeError) as e:
        raise FusedPartError(0, e) from None
    return x, g, oh, ow, ph, pw


def _fused_pool_grad_split(attrs):
    """Batch blocks: each thread writes its images' gradients and sums its own bias partials."""
    geo = _PoolGeometry(attrs, "MaxPoolGrad")
    with_db = "BiasAddGrad" in tuple(attrs.get("fused_ops", ()))

    def split(parts, orig_input, orig_output, grad):
        x = np.asarray(orig_input)
        blocks = _batch_blocks(x.shape[0], parts) if x.ndim == 4 else None
        if blocks is None or geo.fmt != "NHWC":
            return None
        try:
            x, g, oh, ow, ph, pw = _fused_pool_grad_parts(geo, x, grad)
        except Exception:  # noqa: BLE001 - the whole kernel reports it
            return None
        dx = np.empty(x.shape, x.dtype)
        sums = np.zeros((len(blocks), x.shape[3] if with_db else 0), x.dtype)

        def block(i, lo, hi):
            _fused_pool_grad_block(geo, x[lo:hi], g[lo:hi], dx[lo:hi], sums[i], ph, pw, oh, ow)

        def finish():
            if not with_db:
                return dx
            return dx, sums.sum(axis=0, dtype=x.dtype)
        return None, [functools.partial(block, i, lo, hi) for i, (lo, hi) in enumerate(blocks)], finish
    return split


def _fused_pool_grad_cost(orig_input, orig_output, grad):
    return 2 * int(np.size(orig_input))


@register_kernel("_FusedMaxPoolGrad", "CPU", cost=_fused_pool_grad_cost, split=_fused_pool_grad_split)
def fused_max_pool_grad(attrs):
    """MaxPoolGrad, then ReluGrad with the pool's input as features, then (when ``fused_ops`` is
    ("ReluGrad", "BiasAddGrad")) BiasAddGrad of that as a second output; NHWC float32/float64."""
    geo = _PoolGeometry(attrs, "MaxPoolGrad")
    with_db = "BiasAddGrad" in tuple(attrs.get("fused_ops", ()))

    def fn(orig_input, orig_output, grad):
        x, g, oh, ow, ph, pw = _fused_pool_grad_parts(geo, orig_input, grad)
        dx = np.empty(x.shape, x.dtype)
        db = np.zeros(x.shape[3] if with_db else 0, x.dtype)
        _fused_pool_grad_block(geo, x, g, dx, db, ph, pw, oh, ow)
        return (dx, db) if with_db else dx
    return fn
