"""CPU kernels for BiasAdd and BiasAddGrad (and _FusedReluGrad: ReluGrad with BiasAddGrad), and the bias (+ ReLU) epilogue of the fused MatMul and
Conv2D kernels, which runs on each block of output right after its GEMM while it is still in cache.
"""
from __future__ import annotations

import functools

import numpy as np

from actorflow.kernels.cpu.math import relu_grad
from actorflow.kernels.cpu.window import _FAST_FLOATS, _data_format
from actorflow.kernels.lazy_numba import njit
from actorflow.kernels.registry import register_kernel


@njit(cache=True, nogil=True)
def _bias_relu_rows(out, bias, relu, zero):
    rows, cols = out.shape
    for i in range(rows):
        for j in range(cols):
            v = out[i, j] + bias[j]
            if relu and v <= zero:        # NaN stays NaN, -0.0 becomes 0.0, as np.maximum(x, 0)
                v = zero
            out[i, j] = v


@njit(cache=True, nogil=True)
def _bias_relu_block(out, bias, r0, r1, c0, c1, relu, zero):
    # Whole C-contiguous arrays with bounds, each row's part taken as a slice and indexed from 0:
    # numba vectorises that; a strided column-block view (generic layout) ran 4x slower.
    b = bias[c0:c1]
    for i in range(r0, r1):
        o = out[i, c0:c1]
        for j in range(o.shape[0]):
            v = o[j] + b[j]
            if relu and v <= zero:      # NaN stays NaN, -0.0 becomes 0.0, as np.maximum(x, 0)
                v = zero
            o[j] = v


def fused_epilogue_block(out, bias, rows, cols, relu):
    """Bias (+ ReLU) on block out[rows[0]:rows[1], cols[0]:cols[1]] of a GEMM's output, `bias`
    being the whole channel vector (the epilogue of one block of a split fused GEMM)."""
    if (out.dtype in _FAST_FLOATS and out.flags.c_contiguous and bias.dtype == out.dtype
            and bias.flags.c_contiguous):
        _bias_relu_block(out, bias, rows[0], rows[1], cols[0], cols[1], relu, out.dtype.type(0))
    else:
        _fused_epilogue(out[rows[0]:rows[1], cols[0]:cols[1]], bias[cols[0]:cols[1]], relu)


def _fused_epilogue(out, bias, relu):
    if out.dtype in _FAST_FLOATS and out.strides[1] == out.itemsize and bias.dtype == out.dtype:
        _bias_relu_rows(out, bias, relu, out.dtype.type(0))
    else:
        out += bias
        if relu:
            np.maximum(out, 0, out=out)


@register_kernel("BiasAdd", "CPU")
def bias_add(attrs):
    """tf.raw_ops.BiasAdd: adds a 1-D bias along the channel axis (last for NHWC, 1 for NCHW)."""
    fmt = _data_format(attrs, "BiasAdd")

    def fn(value, bias):
        value, bias = np.asarray(value), np.asarray(bias)
        if value.ndim < 2:
            raise ValueError(f"BiasAdd: value must have rank >= 2, got shape {value.shape}")
        axis = 1 if fmt == "NCHW" else value.ndim - 1
        if bias.ndim != 1 or bias.shape[0] != value.shape[axis]:
            raise ValueError(f"BiasAdd: bias must be 1-D of size {value.shape[axis]} (channel dim of value "
                             f"{value.shape}, {fmt}), got shape {bias.shape}")
        if axis != value.ndim - 1:
            bias = bias.reshape((-1,) + (1,) * (value.ndim - 2))
        return np.add(value, bias, dtype=value.dtype)
    return fn


@njit(cache=True, nogil=True)
def _column_sums(g, out):
    """out[j] += sum_i g[i, j], row after row (numpy's order for an axis-0 sum)."""
    rows, cols = g.shape
    for i in range(rows):
        for j in range(cols):
            out[j] += g[i, j]


def _bias_grad_rows(g):
    """(g as [rows, channels], True when the numba loop applies) for an NHWC out_backprop."""
    g2 = np.ascontiguousarray(g).reshape(-1, g.shape[-1])
    return g2, g2.dtype in _FAST_FLOATS


def _bias_add_grad_split(attrs):
    """Row blocks of an NHWC BiasAddGrad: each thread sums its rows, the last adds the partials."""
    fmt = _data_format(attrs, "BiasAddGrad")

    def split(parts, out_backprop):
        g = np.asarray(out_backprop)
        if fmt != "NHWC" or g.ndim < 2:
            return None
        g2, fast = _bias_grad_rows(g)
        if not fast or g2.shape[0] < 256 * parts:
            return None
        bounds = [g2.shape[0] * i // parts for i in range(parts + 1)]
        sums = np.zeros((parts, g2.shape[1]), g2.dtype)
        thunks = [functools.partial(_column_sums, g2[lo:hi], sums[i])
                  for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:]))]
        return None, thunks, lambda: sums.sum(axis=0, dtype=g2.dtype)
    return split


def _bias_add_grad_cost(out_backprop):
    return int(np.size(out_backprop))


@register_kernel("BiasAddGrad", "CPU", cost=_bias_add_grad_cost, split=_bias_add_grad_split)
def bias_add_grad(attrs):
    """tf.raw_ops.BiasAddGrad: sums out_backprop over every axis but the channel axis."""
    fmt = _data_format(attrs, "BiasAddGrad")

    def fn(out_backprop):
        g = np.asarray(out_backprop)
        if g.ndim < 2:
            raise ValueError(f"BiasAddGrad: out_backprop must have rank >= 2, got shape {g.shape}")
        if fmt == "NCHW":
            axes = (0,) + tuple(range(2, g.ndim))
            return np.sum(g, axis=axes, dtype=g.dtype)
        g2, fast = _bias_grad_rows(g)
        if fast:
            out = np.zeros(g2.shape[1], g2.dtype)
            _column_sums(g2, out)
            return out
        # Collapsing to [rows, channels] makes numpy add whole rows at a time (vectorised).
        return np.sum(g2, axis=0, dtype=g.dtype)
    return fn


# _FusedReluGrad: ReluGrad -> BiasAddGrad of its result (made by the fusion pass): the backward pass
# of relu(bias_add(x, b)) writes the masked gradient and sums it per channel in one pass.

@njit(cache=True, nogil=True)
def _relu_grad_column_sums(g, f, out, sums):
    """out = ReluGrad(g, f) over [rows, C] matrices (``g`` where f > 0, else ``g * 0``, as the
    ReluGrad kernel writes it), and its column sums added into `sums`, row after row."""
    rows, cols = g.shape
    zero = g.dtype.type(0)
    for i in range(rows):
        for j in range(cols):
            v = g[i, j]
            v = v if f[i, j] > zero else v * zero
            out[i, j] = v
            sums[j] += v


def _fused_relu_grad_parts(gradients, features):
    """(g, f) as contiguous [rows, C] matrices of one float dtype, or None when the call needs the
    plain numpy path (other dtypes, shapes that differ: ReluGrad's own check reports those)."""
    g, f = np.asarray(gradients), np.asarray(features)
    if g.shape != f.shape or g.dtype != f.dtype or g.dtype not in _FAST_FLOATS or g.ndim < 2:
        return None
    return np.ascontiguousarray(g).reshape(-1, g.shape[-1]), np.ascontiguousarray(f).reshape(-1, g.shape[-1])


def _fused_relu_grad_split(attrs):
    """Row blocks: each thread masks its rows and sums its own partial bias gradient."""
    def split(parts, gradients, features):
        mats = _fused_relu_grad_parts(gradients, features)
        if mats is None or mats[0].shape[0] < 256 * parts:
            return None
        g2, f2 = mats
        out = np.empty(np.shape(gradients), g2.dtype)
        out2 = out.reshape(g2.shape)
        sums = np.zeros((parts, g2.shape[1]), g2.dtype)
        bounds = [g2.shape[0] * i // parts for i in range(parts + 1)]
        thunks = [functools.partial(_relu_grad_column_sums, g2[lo:hi], f2[lo:hi], out2[lo:hi], sums[i])
                  for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:]))]
        return None, thunks, lambda: (out, sums.sum(axis=0, dtype=g2.dtype))
    return split


def _fused_relu_grad_cost(gradients, features):
    return 2 * int(np.size(gradients))


@register_kernel("_FusedReluGrad", "CPU", cost=_fused_relu_grad_cost, split=_fused_relu_grad_split)
def fused_relu_grad(attrs):
    """ReluGrad, and BiasAddGrad (NHWC: channels last) of its result as a second output."""
    def fn(gradients, features):
        mats = _fused_relu_grad_parts(gradients, features)
        if mats is None:            # what the two kernels do on their numpy paths
            dz = relu_grad(np.asarray(gradients), np.asarray(features))
            if dz.ndim < 2:
                raise ValueError(f"BiasAddGrad: out_backprop must have rank >= 2, got shape {dz.shape}")
            return dz, np.sum(dz.reshape(-1, dz.shape[-1]), axis=0, dtype=dz.dtype)
        g2, f2 = mats
        out = np.empty(np.shape(gradients), g2.dtype)
        sums = np.zeros(g2.shape[1], g2.dtype)
        _relu_grad_column_sums(g2, f2, out.reshape(g2.shape), sums)
        return out, sums
    return fn
