"""CPU kernels for DepthwiseConv2dNative and its two gradients, DepthwiseConv2dNativeBackpropInput
and DepthwiseConv2dNativeBackpropFilter.

A depthwise convolution has no reduction over input channels (each output channel c * M + m reads
input channel c only), so there is no GEMM to hand to BLAS: each kernel is one numba loop nest over
flat NHWC views, the channel and multiplier loops innermost (contiguous in the input, the output
and the filter). Strides, dilations and SAME/VALID padding follow TF (window.py's geometry); NCHW
is transposed to NHWC and back; float16 runs in float32 (numba has no half arithmetic).
"""
from __future__ import annotations

import functools

import numpy as np

from actorflow.kernels.cpu.window import (
    _FAST_FLOATS,
    _batch_blocks,
    _ConvGeometry,
    _from_nhwc,
    _half_via_float32,
    _shape_from_nhwc,
    _to_nhwc,
)
from actorflow.kernels.lazy_numba import njit
from actorflow.kernels.registry import MAC_NS, register_kernel

# Each loop works on rows: the C input channels of one pixel (x[n, h, w]), the C*M output channels
# of one output pixel, and the C*M weights of one filter tap (the filter viewed as [kh, kw, C*M]).
# All are contiguous 1-D views, so the innermost loop vectorises; a multiplier of 1 (the common
# case, MobileNet's) has its own loop without the multiplier's inner loop of one iteration.

@njit(cache=True, nogil=True)
def _dw_forward(x, f2, mult, g, out):
    """out[n, i, j, c*M + m] = sum over taps (a, b) of x[n, h, w, c] * f[a, b, c, m]."""
    n_img, h_in, w_in, c_in = x.shape
    kh, kw = f2.shape[0], f2.shape[1]
    sh, sw, dh, dw, ph, pw, oh, ow = g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]
    for n in range(n_img):
        for i in range(oh):
            for j in range(ow):
                o = out[n, i, j]
                for k in range(o.shape[0]):
                    o[k] = 0
                for a in range(kh):
                    h = i * sh - ph + a * dh
                    if h < 0 or h >= h_in:
                        continue
                    for b in range(kw):
                        w = j * sw - pw + b * dw
                        if w < 0 or w >= w_in:
                            continue
                        xr = x[n, h, w]
                        fr = f2[a, b]
                        if mult == 1:
                            for c in range(c_in):
                                o[c] += xr[c] * fr[c]
                        else:
                            for c in range(c_in):
                                v = xr[c]
                                for m in range(mult):
                                    o[c * mult + m] += v * fr[c * mult + m]


@njit(cache=True, nogil=True)
def _dw_backprop_input(dy, f2, mult, g, dx):
    """dx[n, h, w, c] += dy[n, i, j, c*M + m] * f[a, b, c, m] over every window covering (h, w)."""
    n_img, h_in, w_in, c_in = dx.shape
    kh, kw = f2.shape[0], f2.shape[1]
    sh, sw, dh, dw, ph, pw, oh, ow = g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]
    for n in range(n_img):
        for i in range(oh):
            for j in range(ow):
                dyr = dy[n, i, j]
                for a in range(kh):
                    h = i * sh - ph + a * dh
                    if h < 0 or h >= h_in:
                        continue
                    for b in range(kw):
                        w = j * sw - pw + b * dw
                        if w < 0 or w >= w_in:
                            continue
                        dxr = dx[n, h, w]
                        fr = f2[a, b]
                        if mult == 1:
                            for c in range(c_in):
                                dxr[c] += dyr[c] * fr[c]
                        else:
                            for c in range(c_in):
                                acc = dxr[c] * 0
                                for m in range(mult):
                                    acc += dyr[c * mult + m] * fr[c * mult + m]
                                dxr[c] += acc


@njit(cache=True, nogil=True)
def _dw_backprop_filter(x, dy, mult, g, df2):
    """df[a, b, c, m] += x[n, h, w, c] * dy[n, i, j, c*M + m] over every image and output pixel."""
    n_img, h_in, w_in, c_in = x.shape
    kh, kw = df2.shape[0], df2.shape[1]
    sh, sw, dh, dw, ph, pw, oh, ow = g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]
    for n in range(n_img):
        for i in range(oh):
            for j in range(ow):
                dyr = dy[n, i, j]
                for a in range(kh):
                    h = i * sh - ph + a * dh
                    if h < 0 or h >= h_in:
                        continue
                    for b in range(kw):
                        w = j * sw - pw + b * dw
                        if w < 0 or w >= w_in:
                            continue
                        xr = x[n, h, w]
                        dfr = df2[a, b]
                        if mult == 1:
                            for c in range(c_in):
                                dfr[c] += xr[c] * dyr[c]
                        else:
                            for c in range(c_in):
                                v = xr[c]
                                for m in range(mult):
                                    dfr[c * mult + m] += v * dyr[c * mult + m]


def _flat_filter(f, dtype):
    """The [kh, kw, C, M] filter as a contiguous [kh, kw, C*M] array of `dtype`."""
    return np.ascontiguousarray(f, dtype=dtype).reshape(f.shape[0], f.shape[1], -1)


def _geometry(geo, x_shape, f_shape):
    """(oh, ow, int64 geometry vector) of a depthwise convolution of an NHWC input shape and a
    [kh, kw, C, M] filter shape."""
    if len(f_shape) != 4:
        raise ValueError(f"{geo.op}: filter must be 4-D [height, width, in_channels, channel_multiplier], "
                         f"got shape {tuple(f_shape)}")
    if x_shape[3] != f_shape[2]:
        raise ValueError(f"{geo.op}: input depth {x_shape[3]} does not match the filter's in_channels {f_shape[2]} "
                         f"(input {tuple(x_shape)} NHWC, filter {tuple(f_shape)})")
    oh, ow, ph, pw = geo.resolve(x_shape, (f_shape[0], f_shape[1], f_shape[2], f_shape[2] * f_shape[3]))
    return oh, ow, np.array([geo.sh, geo.sw, geo.dh, geo.dw, ph, pw, oh, ow], np.int64)


def _image(op, what, x, fmt):
    x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"{op}: {what} must be 4-D ({fmt}), got shape {x.shape}")
    return np.ascontiguousarray(_to_nhwc(x, fmt))


def _check_dy(op, dy, want):
    if dy.shape != want:
        raise ValueError(f"{op}: out_backprop has shape {dy.shape} (NHWC) but the forward output is {want}")


def _cost(x, f):
    fs = np.shape(f)
    return int(np.size(x)) * (int(fs[0] * fs[1] * fs[3]) if len(fs) == 4 else 1)


def _bp_input_cost(sizes, f, dy):
    fs = np.shape(f)
    return int(np.size(dy)) * (int(fs[0] * fs[1]) if len(fs) == 4 else 1)


def _bp_filter_cost(x, sizes, dy):
    fs = np.asarray(sizes).reshape(-1)
    return int(np.size(dy)) * (int(fs[0] * fs[1]) if fs.size == 4 else 1)


# Splits for the kernel pool: images are independent in the forward pass and the input gradient
# (each block writes its own images), and the filter gradient sums per-block partial gradients.
# NHWC float32/float64 with one dtype only; anything else (and every error) runs whole.

def _split_plan(geo, parts, x_shape, f_shape, dtypes, dy_shape=None):
    """(batch blocks, geometry vector, output shape), or None to run the call whole."""
    if geo.fmt != "NHWC" or len(x_shape) != 4 or len(f_shape) != 4 or len(set(dtypes)) != 1 \
            or dtypes[0] not in _FAST_FLOATS:
        return None
    blocks = _batch_blocks(x_shape[0], parts)
    if blocks is None:
        return None
    try:
        oh, ow, g = _geometry(geo, tuple(x_shape), tuple(f_shape))
    except ValueError:
        return None
    want = (x_shape[0], oh, ow, x_shape[3] * f_shape[3])
    if dy_shape is not None and tuple(dy_shape) != want:
        return None
    return blocks, g, want


def _forward_split(attrs):
    geo = _ConvGeometry(attrs, "DepthwiseConv2dNative")

    def split(parts, input, filter):
        x, f = np.asarray(input), np.asarray(filter)
        plan = _split_plan(geo, parts, x.shape, f.shape, (x.dtype, f.dtype))
        if plan is None:
            return None
        blocks, g, shape = plan
        x = np.ascontiguousarray(x)
        out = np.empty(shape, x.dtype)
        f2 = _flat_filter(f, x.dtype)
        return out, [functools.partial(_dw_forward, x[lo:hi], f2, f.shape[3], g, out[lo:hi]) for lo, hi in blocks]
    return split


def _bp_input_split(attrs):
    geo = _ConvGeometry(attrs, "DepthwiseConv2dNativeBackpropInput")

    def split(parts, input_sizes, filter, out_backprop):
        f, dy = np.asarray(filter), np.asarray(out_backprop)
        sizes = tuple(int(d) for d in np.asarray(input_sizes).reshape(-1))
        plan = _split_plan(geo, parts, sizes, f.shape, (f.dtype, dy.dtype), dy.shape)
        if plan is None:
            return None
        blocks, g, _ = plan
        dy = np.ascontiguousarray(dy)
        dx = np.zeros(sizes, dy.dtype)
        f2 = _flat_filter(f, dy.dtype)
        return dx, [functools.partial(_dw_backprop_input, dy[lo:hi], f2, f.shape[3], g, dx[lo:hi])
                    for lo, hi in blocks]
    return split


def _bp_filter_split(attrs):
    geo = _ConvGeometry(attrs, "DepthwiseConv2dNativeBackpropFilter")

    def split(parts, input, filter_sizes, out_backprop):
        x, dy = np.asarray(input), np.asarray(out_backprop)
        fshape = tuple(int(d) for d in np.asarray(filter_sizes).reshape(-1))
        plan = _split_plan(geo, parts, x.shape, fshape, (x.dtype, dy.dtype), dy.shape)
        if plan is None:
            return None
        blocks, g, _ = plan
        x, dy = np.ascontiguousarray(x), np.ascontiguousarray(dy)
        sums = [np.zeros((fshape[0], fshape[1], fshape[2] * fshape[3]), x.dtype) for _ in blocks]

        def finish():
            total = sums[0]
            for p in sums[1:]:
                total += p
            return total.reshape(fshape)
        return None, [functools.partial(_dw_backprop_filter, x[lo:hi], dy[lo:hi], fshape[3], g, sums[k])
                      for k, (lo, hi) in enumerate(blocks)], finish
    return split


@register_kernel("DepthwiseConv2dNative", "CPU", cost=_cost, unit_ns=MAC_NS, split=_forward_split)
def depthwise_conv2d_native(attrs):
    """tf.raw_ops.DepthwiseConv2dNative: input [N, H, W, C] (or NCHW), filter [kh, kw, C, M],
    output channel c * M + m the convolution of input channel c with filter [:, :, c, m]."""
    geo = _ConvGeometry(attrs, "DepthwiseConv2dNative")

    def fn(input, filter):
        x = _image(geo.op, "input", input, geo.fmt)
        f = np.ascontiguousarray(filter)
        oh, ow, g = _geometry(geo, x.shape, f.shape)
        out = np.empty((x.shape[0], oh, ow, x.shape[3] * f.shape[3]), np.result_type(x.dtype, f.dtype))
        if out.size:
            _dw_forward(x.astype(out.dtype, copy=False), _flat_filter(f, out.dtype), f.shape[3], g, out)
        return _from_nhwc(out, geo.fmt)
    return _half_via_float32(fn)


@register_kernel("DepthwiseConv2dNativeBackpropInput", "CPU", cost=_bp_input_cost, unit_ns=MAC_NS,
                 split=_bp_input_split)
def depthwise_conv2d_native_backprop_input(attrs):
    """tf.raw_ops.DepthwiseConv2dNativeBackpropInput: the gradient of DepthwiseConv2dNative with
    respect to its input, of shape `input_sizes`."""
    geo = _ConvGeometry(attrs, "DepthwiseConv2dNativeBackpropInput")

    def fn(input_sizes, filter, out_backprop):
        shape = _shape_from_nhwc(geo.op, input_sizes, geo.fmt)
        f = np.ascontiguousarray(filter)
        dy = _image(geo.op, "out_backprop", out_backprop, geo.fmt)
        oh, ow, g = _geometry(geo, shape, f.shape)
        _check_dy(geo.op, dy, (shape[0], oh, ow, shape[3] * f.shape[3]))
        dx = np.zeros(shape, np.result_type(f.dtype, dy.dtype))
        if dy.size:
            _dw_backprop_input(dy.astype(dx.dtype, copy=False), _flat_filter(f, dx.dtype), f.shape[3], g, dx)
        return _from_nhwc(dx, geo.fmt)
    return _half_via_float32(fn)


@register_kernel("DepthwiseConv2dNativeBackpropFilter", "CPU", cost=_bp_filter_cost, unit_ns=MAC_NS,
                 split=_bp_filter_split)
def depthwise_conv2d_native_backprop_filter(attrs):
    """tf.raw_ops.DepthwiseConv2dNativeBackpropFilter: the gradient of DepthwiseConv2dNative with
    respect to its filter, of shape `filter_sizes`."""
    geo = _ConvGeometry(attrs, "DepthwiseConv2dNativeBackpropFilter")

    def fn(input, filter_sizes, out_backprop):
        x = _image(geo.op, "input", input, geo.fmt)
        fshape = tuple(int(d) for d in np.asarray(filter_sizes).reshape(-1))
        dy = _image(geo.op, "out_backprop", out_backprop, geo.fmt)
        oh, ow, g = _geometry(geo, x.shape, fshape)
        _check_dy(geo.op, dy, (x.shape[0], oh, ow, x.shape[3] * fshape[3]))
        df = np.zeros(fshape, np.result_type(x.dtype, dy.dtype))
        if dy.size:
            _dw_backprop_filter(x.astype(df.dtype, copy=False), dy.astype(df.dtype, copy=False), fshape[3], g,
                                df.reshape(fshape[0], fshape[1], -1))
        return df
    return _half_via_float32(fn)
