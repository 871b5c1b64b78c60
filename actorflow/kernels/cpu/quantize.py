"""CPU kernels of QuantizeV2 and Dequantize (graph/ops/quantize_ops.py), in TF's float32 steps."""
from __future__ import annotations

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel

_F = np.float32
_FLT_MAX = np.finfo(np.float32).max


def _round_away(v):
    return np.where(v < 0, -np.floor(-v + _F(0.5)), np.floor(v + _F(0.5))).astype(_F)


def _adjusted_range(in_min, in_max, emr):
    in_min, in_max = _F(in_min), _F(in_max)
    if in_max < in_min:
        raise InvalidArgumentError("QuantizeV2: input_max_range must be larger than input_min_range.")
    min_range = min(_F(0), in_min)
    eps = _F(max(_F(1), max(abs(in_min), abs(in_max))) * _F(emr))
    max_range = max(_F(0), max(in_max, _F(min_range + eps)))
    return min_range, max_range


def _quantize(x, in_min, in_max, qtype, mode, round_mode, narrow, emr):
    info = np.iinfo(qtype)
    min_range, max_range = _adjusted_range(in_min, in_max, emr)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if mode == "MIN_COMBINED":
            scale = _F((float(info.max) - float(info.min)) / float(_F(max_range - min_range)))
            shifted = (np.minimum(np.maximum(x, min_range), max_range).astype(_F) - min_range) * scale
            if info.min < 0:
                half = _F((float(info.max) - float(info.min) + 1) / 2.0)
                q = _round_away((shifted - half).astype(_F))
            else:
                q = np.trunc((shifted + _F(0.5)).astype(_F))
        elif mode == "MIN_FIRST":
            steps = float(1 << (8 * np.dtype(qtype).itemsize))
            span = _F(max_range - min_range)
            range_scale = _F(0) if max_range == min_range else _F((steps - 1.0) / float(span))
            min_scaled = _F(_round_away(_F(min_range * range_scale)))
            lowest = _F(info.min)
            lower, upper = max(_F(info.min), _F(-2.147483648e9)), min(_F(info.max), _F(2.147483520e9))
            q = _round_away((x * range_scale).astype(_F)) - _F(min_scaled - lowest)
            q = np.minimum(np.maximum(q, lower), upper)
        else:                                                           # SCALED
            min_out, max_out = info.min + (1 if narrow else 0), info.max
            from_min = _F(min_out / min_range) if min_out * min_range > 0 else _FLT_MAX
            from_max = _F(max_out / max_range) if max_out * max_range > 0 else _FLT_MAX
            scale = min(from_min, from_max)
            min_range, max_range = _F(min_out / scale), _F(max_out / scale)
            v = (np.minimum(np.maximum(x, min_range), max_range) * scale).astype(_F)
            q = np.rint(v) if round_mode == "HALF_TO_EVEN" else _round_away(v)
    return q.astype(np.int64).astype(qtype), _F(min_range), _F(max_range)


def _dequantize(x, min_range, max_range, qtype, mode, narrow):
    info = np.iinfo(qtype)
    min_range, max_range = _F(min_range), _F(max_range)
    xf = x.astype(_F)
    if mode == "MIN_COMBINED":
        scale = _F(_F(max_range - min_range) / _F(_F(info.max) - _F(info.min)))
        if info.min < 0:
            half = _F((float(info.max) - float(info.min) + 1) / 2.0)
            return ((xf + half) * scale + min_range).astype(_F)
        return (xf * scale + min_range).astype(_F)
    if mode == "MIN_FIRST":
        steps = float(1 << (8 * np.dtype(qtype).itemsize))
        range_scale = _F(float(_F(max_range - min_range)) / (steps - 1.0))
        rounded = min_range if max_range == min_range else _F(_round_away(_F(min_range / range_scale)) * range_scale)
        return (_F(rounded - _F(_F(info.min) * range_scale)) + xf * range_scale).astype(_F)
    min_out, max_out = info.min + (1 if narrow else 0), info.max
    if info.min == 0:
        scale = _F(max_range / _F(max_out))
    else:
        scale = max(_F(min_range / _F(min_out)), _F(max_range / _F(max_out)))
    return (xf * scale).astype(_F)


def _slices(x, axis):
    x = np.asarray(x)
    if axis == -1:
        yield (Ellipsis,), 0
        return
    if not 0 <= axis < x.ndim:
        raise InvalidArgumentError(f"axis {axis} is out of range for input of rank {x.ndim}")
    for i in range(x.shape[axis]):
        yield (slice(None),) * axis + (i,), i


def _ranges(mn, mx, x, axis):
    mn, mx = np.asarray(mn, _F).reshape(-1), np.asarray(mx, _F).reshape(-1)
    n = 1 if axis == -1 else np.shape(x)[axis]
    if mn.size != n or mx.size != n:
        raise InvalidArgumentError(f"expected {n} min and max values, got {mn.size} and {mx.size}")
    return mn, mx


@register_kernel("QuantizeV2", "CPU")
def quantize_kernel(attrs):
    qtype = np.dtype(attrs["T"])
    mode, rm = attrs.get("mode", "MIN_COMBINED"), attrs.get("round_mode", "HALF_AWAY_FROM_ZERO")
    narrow, axis, emr = bool(attrs.get("narrow_range", False)), int(attrs.get("axis", -1)), \
        float(attrs.get("ensure_minimum_range", 0.01))

    def fn(x, mn, mx):
        x = np.asarray(x, _F)
        mins, maxs = _ranges(mn, mx, x, axis)
        out = np.empty(x.shape, qtype)
        out_min, out_max = np.empty(mins.size, _F), np.empty(mins.size, _F)
        for idx, i in _slices(x, axis):
            out[idx], out_min[i], out_max[i] = _quantize(x[idx], mins[i], maxs[i], qtype, mode, rm, narrow, emr)
        if axis == -1:
            return out, out_min[0], out_max[0]
        return out, out_min, out_max
    return fn


@register_kernel("Dequantize", "CPU")
def dequantize_kernel(attrs):
    mode, narrow, axis = attrs.get("mode", "MIN_COMBINED"), bool(attrs.get("narrow_range", False)), \
        int(attrs.get("axis", -1))

    def fn(x, mn, mx):
        x = np.asarray(x)
        mins, maxs = _ranges(mn, mx, x, axis)
        out = np.empty(x.shape, _F)
        for idx, i in _slices(x, axis):
            out[idx] = _dequantize(x[idx], mins[i], maxs[i], x.dtype, mode, narrow)
        return out
    return fn
