"""GPU random ops on cuRAND through CuPy's generators.

Each op instance owns one `cupy.random.Generator` over a Philox bit generator keyed by the op's
(seed, seed2), so a seeded op gives the same stream in every session on the same device (the
streams differ from the CPU kernels'); with both seeds 0 the key comes from OS entropy. The
truncated normal inverts the normal CDF over [-2, 2] (one pass, no redraw loop, no host sync).
"""
from __future__ import annotations

import math
import os

import cupyx.scipy.special as special
import numpy as np

from actorflow.kernels.cpu.random import _float_dtype, _shape, uniform_int_args
from actorflow.kernels.gpu._common import cp
from actorflow.kernels.registry import register_kernel

_MASK63 = (1 << 63) - 1
_LO, _HI = 0.5 * (1 + math.erf(-2.0 / math.sqrt(2))), 0.5 * (1 + math.erf(2.0 / math.sqrt(2)))


def _generator(attrs):
    seed, seed2 = int(attrs.get("seed", 0) or 0), int(attrs.get("seed2", 0) or 0)
    if seed == 0 and seed2 == 0:
        key = int.from_bytes(os.urandom(8), "little") & _MASK63
    else:
        key = ((seed & 0xFFFFFFFF) << 31 ^ (seed2 & 0xFFFFFFFF)) & _MASK63
    return cp.random.Generator(cp.random.Philox4x3210(key))


def _draw(dtype, fn, dims):
    if dtype in (np.float32, np.float64):
        return fn(dims, dtype)
    return fn(dims, np.float32).astype(dtype)


@register_kernel("RandomStandardNormal", "GPU", releases_gil=False, host_inputs=(0,))
def random_standard_normal(attrs):
    gen, dtype = _generator(attrs), _float_dtype("RandomStandardNormal", attrs)

    def fn(shape):
        return _draw(dtype, lambda d, t: gen.standard_normal(d, dtype=t), _shape("RandomStandardNormal", shape))
    return fn


@register_kernel("RandomUniform", "GPU", releases_gil=False, host_inputs=(0,))
def random_uniform(attrs):
    gen, dtype = _generator(attrs), _float_dtype("RandomUniform", attrs)

    def fn(shape):
        out = _draw(dtype, lambda d, t: gen.random(d, dtype=t), _shape("RandomUniform", shape))
        if dtype.itemsize < 4:
            cp.minimum(out, np.nextafter(dtype.type(1), dtype.type(0)), out=out)
        return out
    return fn


@register_kernel("TruncatedNormal", "GPU", releases_gil=False, host_inputs=(0,))
def truncated_normal(attrs):
    gen, dtype = _generator(attrs), _float_dtype("TruncatedNormal", attrs)

    def fn(shape):
        dims = _shape("TruncatedNormal", shape)
        u = gen.uniform(_LO, _HI, dims)          # float64
        x = special.ndtri(u)
        cp.clip(x, -2.0, 2.0, out=x)
        return x.astype(dtype)
    return fn


@register_kernel("RandomUniformInt", "GPU", releases_gil=False, host_inputs=(0, 1, 2))
def random_uniform_int(attrs):
    gen = _generator(attrs)
    tout = attrs.get("Tout")

    def fn(shape, minval, maxval):
        dims, dtype, lo, hi = uniform_int_args(tout, shape, minval, maxval)
        if 0 in dims:
            return cp.empty(dims, dtype)
        return gen.integers(lo, hi, size=dims, dtype=dtype)
    return fn
