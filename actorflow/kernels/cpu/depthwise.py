"""CPU kernels for DepthwiseConv2dNative and its two gradients, DepthwiseConv2dNativeBackpropInput
and DepthwiseConv2dNativeBackpropFilter.

A depthwise convolution has no reduction over input channels (each output channel c * M + m reads
input channel c only), so there is no GEMM to hand to BLAS: each kernel is one numba loop nest over
flat NHWC views, the channel and multiplier loops innermost (contiguous in the input, the output
and the filter). Strides, dilations and SAME/VALID padding follow TF (window.py's geometry); NCHW
is transposed to NHWC and back; float16 runs in float32 (numba has no half arithmetic).
"""
from __future__ import annotations

import numpy as np

from actorflow.kernels.cpu.window import (
    _ConvGeometry,
    _from_nhwc,
    _half_via_float32,
    _shape_from_nhwc,
    _to_nhwc,
)
from actorflow.kernels.lazy_numba import njit
from actorflow.kernels.registry import MAC_NS, register_kernel


@njit(cache=True, nogil=True)
def _dw_forward(x, f, g, out):
    """out[n, i, j, c*M + m] = sum over taps (a, b) of x[n, h, w, c] * f[a, b, c, m]."""
    n_img, h_in, w_in, c_in = x.shape
    kh, kw, _, mult = f.shape
    sh, sw, dh, dw, ph, pw, oh, ow = g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]
    for n in range(n_img):
        for i in range(oh):
            for j in range(ow):
                for k in range(c_in * mult):
                    out[n, i, j, k] = 0
                for a in range(kh):
                    h = i * sh - ph + a * dh
                    if h < 0 or h >= h_in:
                        continue
                    for b in range(kw):
                        w = j * sw - pw + b * dw
                        if w < 0 or w >= w_in:
                            continue
                        for c in range(c_in):
                            v = x[n, h, w, c]
                            for m in range(mult):
                                out[n, i, j, c * mult + m] += v * f[a, b, c, m]


@njit(cache=True, nogil=True)
def _dw_backprop_input(dy, f, g, dx):
    """dx[n, h, w, c] += dy[n, i, j, c*M + m] * f[a, b, c, m] over every window covering (h, w)."""
    n_img, h_in, w_in, c_in = dx.shape
    kh, kw, _, mult = f.shape
    sh, sw, dh, dw, ph, pw, oh, ow = g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]
    for n in range(n_img):
        for i in range(oh):
            for j in range(ow):
                for a in range(kh):
                    h = i * sh - ph + a * dh
                    if h < 0 or h >= h_in:
                        continue
                    for b in range(kw):
                        w = j * sw - pw + b * dw
                        if w < 0 or w >= w_in:
                            continue
                        for c in range(c_in):
                            acc = dx[n, h, w, c] * 0
                            for m in range(mult):
                                acc += dy[n, i, j, c * mult + m] * f[a, b, c, m]
                            dx[n, h, w, c] += acc


@njit(cache=True, nogil=True)
def _dw_backprop_filter(x, dy, g, df):
    """df[a, b, c, m] += x[n, h, w, c] * dy[n, i, j, c*M + m] over every image and output pixel."""
    n_img, h_in, w_in, c_in = x.shape
    kh, kw, _, mult = df.shape
    sh, sw, dh, dw, ph, pw, oh, ow = g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]
    for n in range(n_img):
        for i in range(oh):
            for j in range(ow):
                for a in range(kh):
                    h = i * sh - ph + a * dh
                    if h < 0 or h >= h_in:
                        continue
                    for b in range(kw):
                        w = j * sw - pw + b * dw
                        if w < 0 or w >= w_in:
                            continue
                        for c in range(c_in):
                            v = x[n, h, w, c]
                            for m in range(mult):
                                df[a, b, c, m] += v * dy[n, i, j, c * mult + m]


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


@register_kernel("DepthwiseConv2dNative", "CPU", cost=_cost, unit_ns=MAC_NS)
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
            _dw_forward(x, f.astype(out.dtype, copy=False), g, out)
        return _from_nhwc(out, geo.fmt)
    return _half_via_float32(fn)


@register_kernel("DepthwiseConv2dNativeBackpropInput", "CPU", cost=_bp_input_cost, unit_ns=MAC_NS)
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
            _dw_backprop_input(dy, f.astype(dx.dtype, copy=False), g, dx)
        return _from_nhwc(dx, geo.fmt)
    return _half_via_float32(fn)


@register_kernel("DepthwiseConv2dNativeBackpropFilter", "CPU", cost=_bp_filter_cost, unit_ns=MAC_NS)
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
            _dw_backprop_filter(x.astype(df.dtype, copy=False), dy.astype(df.dtype, copy=False), g, df)
        return df
    return _half_via_float32(fn)
