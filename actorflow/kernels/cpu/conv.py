"""CPU kernels for Conv2D, _FusedConv2D (Conv2D + BiasAdd (+ Relu)), Conv2DBackpropInput and
Conv2DBackpropFilter.

A convolution is an im2col pass (a numba loop) followed by a GEMM (``blas.matmul``: MKL when
installed, else numpy's BLAS), done over cache-sized chunks of the batch; its input gradient is a
GEMM followed by a col2im scatter-add. numba has no float16 arithmetic, so half-precision
convolution runs in float32.
"""
from __future__ import annotations

import functools
import threading

import numpy as np
from numba import njit, uintp

from actorflow.kernels.cpu.bias import _fused_epilogue
from actorflow.kernels.cpu.blas import matmul as gemm
from actorflow.kernels.cpu.matmul import FusedPartError
from actorflow.kernels.cpu.window import (
    _FAST_FLOATS,
    _ConvGeometry,
    _from_nhwc,
    _half_via_float32,
    _shape_from_nhwc,
    _to_nhwc,
)
from actorflow.kernels.registry import register_kernel

# A convolution runs im2col + GEMM over chunks of the batch whose column buffer holds at most this
# many elements (8 MiB of float32). Measured on LeNet-sized layers, cache-sized chunks beat one
# GEMM over the whole batch by 20-30%: the columns are still in cache when BLAS reads them.
_MAX_COL_ELEMENTS = 1 << 21


# im2col/col2im index flat 1-D views of the NHWC image and of the [rows, kh*kw*C] column matrix,
# with offsets cast to unsigned: numba then skips its negative-index wraparound check on every
# element, and each contiguous run becomes a vectorised copy (2x faster than signed indexing).

@njit(cache=True, nogil=True)
def _im2col(x, n_img, h_in, w_in, c_in, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow, cols):
    row_len = kw * c_in
    k = kh * row_len
    uc = uintp(c_in)
    for n in range(n_img):
        for i in range(oh):
            for j in range(ow):
                o = ((n * oh + i) * ow + j) * k
                w0 = j * sw - pw
                # With no column dilation and the window inside the row, one filter row's patch is
                # a single contiguous run of kw*C input values.
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


@njit(cache=True, nogil=True)
def _col2im(cols, n_img, h_in, w_in, c_in, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow, dx):
    row_len = kw * c_in
    k = kh * row_len
    uc = uintp(c_in)
    for n in range(n_img):
        for i in range(oh):
            for j in range(ow):
                o = ((n * oh + i) * ow + j) * k
                w0 = j * sw - pw
                inside = dw == 1 and w0 >= 0 and w0 + kw <= w_in
                for a in range(kh):
                    h = i * sh - ph + a * dh
                    if h < 0 or h >= h_in:
                        continue
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


class _Scratch(threading.local):
    """A per-thread reusable buffer for im2col columns and their gradients.

    Column buffers are large (tens of MB) and short-lived; allocating one per call makes the OS map
    and fault in fresh pages every time, which costs as much as filling them. Kernels on one thread
    never overlap, and no kernel returns a view of this buffer, so one buffer per thread is enough.
    """

    limit_bytes = 64 << 20

    def __init__(self):
        self.buf = np.empty(0, np.uint8)

    def get(self, shape, dtype):
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        if nbytes > self.limit_bytes:
            return np.empty(shape, dtype)
        if self.buf.nbytes < nbytes:
            self.buf = np.empty(nbytes, np.uint8)
        return self.buf[:nbytes].view(dtype).reshape(shape)


_scratch = _Scratch()


def _batch_chunk(n, rows_per_image, k):
    """Images per im2col chunk, so one column buffer stays under _MAX_COL_ELEMENTS."""
    per_image = max(rows_per_image * k, 1)
    return max(1, min(n, _MAX_COL_ELEMENTS // per_image))


def _im2col_chunk(geo, x, kh, kw, oh, ow, ph, pw):
    """im2col of the NHWC images `x` into this thread's scratch buffer: [N*OH*OW, KH*KW*C]."""
    cols = _scratch.get((x.shape[0] * oh * ow, kh * kw * x.shape[3]), x.dtype)
    _im2col(x.reshape(-1), *x.shape, kh, kw, geo.sh, geo.sw, geo.dh, geo.dw, ph, pw, oh, ow,
            cols.reshape(-1))
    return cols


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


def _conv_forward(geo, x, f, out, oh, ow, ph, pw):
    """Conv2D of NHWC `x` into `out` [N, OH, OW, O], batch chunk by batch chunk."""
    n, _, _, c = x.shape
    kh, kw, _, co = f.shape
    f2 = f.reshape(kh * kw * c, co)
    step = _batch_chunk(n, oh * ow, kh * kw * c)
    for s in range(0, n, step):
        cols = _im2col_chunk(geo, x[s:s + step], kh, kw, oh, ow, ph, pw)
        gemm(cols, f2, out[s:s + step].reshape(-1, co))


def _batch_blocks(n: int, parts: int):
    """[(lo, hi), ...] image ranges of a batch split over `parts` threads, or None when too small."""
    if n < 2 * parts:
        return None
    bounds = [n * i // parts for i in range(parts + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


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
        return out, [functools.partial(_conv_forward, geo, x[lo:hi], f, out[lo:hi], oh, ow, ph, pw)
                     for lo, hi in blocks]
    return split


@register_kernel("Conv2D", "CPU", cost=_conv_cost, split=_conv2d_split)
def conv2d(attrs):
    """tf.raw_ops.Conv2D: NHWC input, HWIO filter, SAME/VALID padding, strides and dilations.

    im2col into a [N*OH*OW, KH*KW*C] buffer, then a GEMM with the filter viewed as [KH*KW*C, O]
    (per batch chunk, see _MAX_COL_ELEMENTS; a 1x1 stride-1 convolution skips im2col). NCHW is
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


# _FusedConv2D: Conv2D + BiasAdd (+ Relu), made by the fusion pass as grappler's remapper does:
# the bias and ReLU run on each batch chunk's output right after its GEMM.

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


def _fused_conv_block(geo, x, f, bias, out, oh, ow, ph, pw, relu):
    if geo.is_pointwise(f.shape, ph, pw):
        gemm(x.reshape(-1, x.shape[3]), f.reshape(f.shape[2], f.shape[3]), out.reshape(-1, f.shape[3]))
    else:
        _conv_forward(geo, x, f, out, oh, ow, ph, pw)
    _fused_epilogue(out.reshape(-1, out.shape[3]), bias, relu)


def _fused_conv_split(attrs):
    geo = _ConvGeometry(attrs, "Conv2D")
    relu = "Relu" in tuple(attrs.get("fused_ops", ()))

    def split(parts, input, filter, bias):
        x, f = np.asarray(input), np.asarray(filter)
        blocks = _batch_blocks(x.shape[0], parts) if x.ndim == 4 else None
        if blocks is None or not _conv_split_ok(geo, x, f):
            return None
        try:
            x, f, bias, oh, ow, ph, pw = _fused_conv_parts(attrs, geo, x, f, bias)
        except FusedPartError:
            return None
        out = np.empty((x.shape[0], oh, ow, f.shape[3]), x.dtype)
        bias = bias.astype(x.dtype, copy=False)
        return out, [functools.partial(_fused_conv_block, geo, x[lo:hi], f, bias, out[lo:hi], oh, ow, ph, pw, relu)
                     for lo, hi in blocks]
    return split


def _fused_conv_cost(input, filter, bias):
    return _conv_cost(input, filter)


@register_kernel("_FusedConv2D", "CPU", cost=_fused_conv_cost, split=_fused_conv_split)
def fused_conv2d(attrs):
    """Conv2D (NHWC) + bias, then ReLU when ``fused_ops`` is ("BiasAdd", "Relu")."""
    geo = _ConvGeometry(attrs, "Conv2D")
    relu = "Relu" in tuple(attrs.get("fused_ops", ()))

    def fn(input, filter, bias):
        x, f, bias, oh, ow, ph, pw = _fused_conv_parts(attrs, geo, input, filter, bias)
        dt = np.result_type(x.dtype, f.dtype)
        out = np.empty((x.shape[0], oh, ow, f.shape[3]), dt)
        _fused_conv_block(geo, x, f, bias.astype(dt, copy=False), out, oh, ow, ph, pw, relu)
        return out
    return _half_via_float32(fn)


def _conv_bp_input_cost(input_sizes, f, dy):
    fs = np.shape(f)
    return int(np.size(dy)) * (int(fs[0] * fs[1] * fs[2]) if len(fs) == 4 else 1)


def _conv_backprop_input(geo, dy, f, dx, oh, ow, ph, pw):
    """Conv2DBackpropInput of NHWC `dy` added into the zeroed NHWC `dx`, batch chunk by chunk."""
    n, _, _, c = dx.shape
    kh, kw, _, co = f.shape
    f2t = f.reshape(kh * kw * c, co).T
    step = _batch_chunk(n, oh * ow, kh * kw * c)
    for s in range(0, n, step):
        dys = dy[s:s + step].reshape(-1, co)
        dcols = gemm(dys, f2t, _scratch.get((dys.shape[0], f2t.shape[1]), dx.dtype))
        dxs = dx[s:s + step]
        _col2im(dcols.reshape(-1), *dxs.shape, kh, kw, geo.sh, geo.sw, geo.dh, geo.dw, ph, pw, oh, ow,
                dxs.reshape(-1))


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
        dx = np.zeros(sizes, dy.dtype)
        return dx, [functools.partial(_conv_backprop_input, geo, dy[lo:hi], f, dx[lo:hi], oh, ow, ph, pw)
                    for lo, hi in blocks]
    return split


@register_kernel("Conv2DBackpropInput", "CPU", cost=_conv_bp_input_cost, split=_conv_bp_input_split)
def conv2d_backprop_input(attrs):
    """tf.raw_ops.Conv2DBackpropInput: gradient of Conv2D with respect to its input.

    A GEMM ``dy [N*OH*OW, O] @ filter.T [O, KH*KW*C]`` gives per-patch gradients, which col2im
    scatter-adds back onto the input grid.
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


def _conv_backprop_filter_t(geo, x, dy, fshape, oh, ow, ph, pw):
    """The filter gradient of NHWC `x` and `dy`, transposed: [O, KH*KW*C]."""
    n, _, _, c = x.shape
    kh, kw, _, co = fshape
    step = _batch_chunk(n, oh * ow, kh * kw * c)
    # Computed as (dy.T @ cols).T: OpenBLAS is markedly faster with the long dimension as the
    # shared one on the right-hand side than with a transposed tall left operand.
    df_t = None
    for s in range(0, n, step):
        cols = _im2col_chunk(geo, x[s:s + step], kh, kw, oh, ow, ph, pw)
        part = gemm(dy[s:s + step].reshape(-1, co).T, cols)
        df_t = part if df_t is None else np.add(df_t, part, out=df_t)
    return df_t


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

        def block(i, lo, hi):
            partial_sums[i] = _conv_backprop_filter_t(geo, x[lo:hi], dy[lo:hi], fshape, oh, ow, ph, pw)

        def finish():
            total = partial_sums[0]
            for p in partial_sums[1:]:
                total += p
            return np.ascontiguousarray(total.T).reshape(fshape)
        return None, [functools.partial(block, i, lo, hi) for i, (lo, hi) in enumerate(blocks)], finish
    return split


@register_kernel("Conv2DBackpropFilter", "CPU", cost=_conv_bp_filter_cost, split=_conv_bp_filter_split)
def conv2d_backprop_filter(attrs):
    """tf.raw_ops.Conv2DBackpropFilter: gradient of Conv2D with respect to its filter.

    Re-runs im2col on the input and computes ``cols.T @ dy`` by GEMM, reshaped to HWIO.
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
        df_t = _conv_backprop_filter_t(geo, x, dy, fshape, oh, ow, ph, pw)
        return np.ascontiguousarray(df_t.T).reshape(fshape).astype(dtype, copy=False)
    return _half_via_float32(fn)
