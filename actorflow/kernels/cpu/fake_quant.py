"""CPU kernels of graph/ops/fake_quant_ops.py, in float32 as TF's functors compute:

    scale = (max - min) / (qmax - qmin);  inv = (qmax - qmin) / (max - min)
    zero point = clamp(round_half_away(qmin - min / scale), qmin, qmax)
    nudged [min, max] = ((qmin - zp) * scale, (qmax - zp) * scale)
    out = floor((clamp(x, nmin, nmax) - nmin) * inv - floor(-nmin * inv + 0.5) + 0.5) * scale

with qmin = 1 if narrow_range else 0 and qmax = 2^num_bits - 1.
"""
from __future__ import annotations

import numpy as np

from actorflow.kernels.registry import register_kernel

_F = np.float32


def _nudge(mn, mx, num_bits, narrow):
    qmin, qmax = (1 if narrow else 0), (1 << num_bits) - 1
    qminf, qmaxf = _F(qmin), _F(qmax)
    mn, mx = _F(mn), _F(mx)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scale = _F((mx - mn) / (qmaxf - qminf))
        inv = _F((qmaxf - qminf) / (mx - mn))
        zp_from_min = _F(qminf - mn / scale)
    if zp_from_min < qminf:
        zp = qmin
    elif zp_from_min > qmaxf:
        zp = qmax
    elif np.isnan(zp_from_min):
        zp = qmin
    else:
        zp = int(np.sign(zp_from_min) * np.floor(np.abs(zp_from_min) + _F(0.5)))   # std::round
    return _F((qminf - _F(zp)) * scale), _F((qmaxf - _F(zp)) * scale), scale, inv


def _quantize(x, mn, mx, num_bits, narrow):
    nmin, nmax, scale, inv = _nudge(mn, mx, num_bits, narrow)
    with np.errstate(invalid="ignore", over="ignore"):
        qzero = np.floor(-nmin * inv + _F(0.5)).astype(_F)
        shifted = np.minimum(np.maximum(x, nmin), nmax).astype(_F) - nmin
        return (np.floor(shifted * inv - qzero + _F(0.5)) * scale).astype(_F)


def _bits(attrs):
    return int(attrs.get("num_bits", 8)), bool(attrs.get("narrow_range", False))


@register_kernel("FakeQuantWithMinMaxArgs", "CPU")
def fake_quant_args_kernel(attrs):
    mn, mx = attrs["min"], attrs["max"]
    bits, narrow = _bits(attrs)
    return lambda x: _quantize(np.asarray(x, _F), mn, mx, bits, narrow)


@register_kernel("FakeQuantWithMinMaxArgsGradient", "CPU")
def fake_quant_args_grad_kernel(attrs):
    mn, mx = attrs["min"], attrs["max"]
    bits, narrow = _bits(attrs)

    def fn(g, x):
        nmin, nmax, _, _ = _nudge(mn, mx, bits, narrow)
        return np.where((x >= nmin) & (x <= nmax), g, _F(0)).astype(_F)
    return fn


@register_kernel("FakeQuantWithMinMaxVars", "CPU")
def fake_quant_vars_kernel(attrs):
    bits, narrow = _bits(attrs)
    return lambda x, mn, mx: _quantize(np.asarray(x, _F), float(mn), float(mx), bits, narrow)


@register_kernel("FakeQuantWithMinMaxVarsGradient", "CPU")
def fake_quant_vars_grad_kernel(attrs):
    bits, narrow = _bits(attrs)

    def fn(g, x, mn, mx):
        nmin, nmax, _, _ = _nudge(float(mn), float(mx), bits, narrow)
        g = np.asarray(g, _F)
        return (np.where((x >= nmin) & (x <= nmax), g, _F(0)).astype(_F),
                np.asarray(np.sum(np.where(x < nmin, g, _F(0)), dtype=_F), _F),
                np.asarray(np.sum(np.where(x > nmax, g, _F(0)), dtype=_F), _F))
    return fn


def _channels(x, mn, mx):
    x = np.asarray(x, _F)
    mn, mx = np.asarray(mn, _F).reshape(-1), np.asarray(mx, _F).reshape(-1)
    if x.ndim == 0 or x.shape[-1] != mn.size or mn.size != mx.size:
        raise ValueError(f"FakeQuantWithMinMaxVarsPerChannel: min and max must have one value per channel "
                         f"(the inputs' last dimension, {x.shape[-1] if x.ndim else 'none'}), got {mn.size} and "
                         f"{mx.size}")
    return x, mn, mx


@register_kernel("FakeQuantWithMinMaxVarsPerChannel", "CPU")
def fake_quant_channel_kernel(attrs):
    bits, narrow = _bits(attrs)

    def fn(x, mn, mx):
        x, mn, mx = _channels(x, mn, mx)
        out = np.empty_like(x)
        for c in range(mn.size):
            out[..., c] = _quantize(x[..., c], mn[c], mx[c], bits, narrow)
        return out
    return fn


@register_kernel("FakeQuantWithMinMaxVarsPerChannelGradient", "CPU")
def fake_quant_channel_grad_kernel(attrs):
    bits, narrow = _bits(attrs)

    def fn(g, x, mn, mx):
        x, mn, mx = _channels(x, mn, mx)
        g = np.asarray(g, _F)
        dx = np.empty_like(x)
        dmin, dmax = np.zeros(mn.size, _F), np.zeros(mn.size, _F)
        for c in range(mn.size):
            nmin, nmax, _, _ = _nudge(mn[c], mx[c], bits, narrow)
            xc, gc = x[..., c], g[..., c]
            dx[..., c] = np.where((xc >= nmin) & (xc <= nmax), gc, _F(0))
            dmin[c] = np.sum(np.where(xc < nmin, gc, _F(0)), dtype=_F)
            dmax[c] = np.sum(np.where(xc > nmax, gc, _F(0)), dtype=_F)
        return dx, dmin, dmax
    return fn
