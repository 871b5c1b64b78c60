"""CPU kernels of the bit ops (graph/ops/bitwise_ops.py): numpy's, with TF's clamped shifts."""
from __future__ import annotations

import numpy as np

from actorflow.kernels.registry import register_kernel

register_kernel("BitwiseAnd", "CPU")(lambda attrs: np.bitwise_and)
register_kernel("BitwiseOr", "CPU")(lambda attrs: np.bitwise_or)
register_kernel("BitwiseXor", "CPU")(lambda attrs: np.bitwise_xor)
register_kernel("Invert", "CPU")(lambda attrs: np.invert)


def _clamp(x, y):
    x = np.asarray(x)
    bits = x.dtype.itemsize * 8
    return x, np.clip(np.asarray(y), 0, bits - 1).astype(x.dtype)


@register_kernel("LeftShift", "CPU")
def left_shift_kernel(attrs):
    """x << clamp(y, 0, bits - 1), wrapping: computed on the unsigned type of the same width."""
    def fn(x, y):
        x, y = _clamp(x, y)
        u = np.dtype(f"u{x.dtype.itemsize}")
        return np.asarray(np.left_shift(x.astype(u), y.astype(u)), dtype=u).astype(x.dtype)
    return fn


@register_kernel("RightShift", "CPU")
def right_shift_kernel(attrs):
    """x >> clamp(y, 0, bits - 1), sign-filling for signed types."""
    def fn(x, y):
        x, y = _clamp(x, y)
        return np.right_shift(x, y)
    return fn


@register_kernel("Bitcast", "CPU")
def bitcast_kernel(attrs):
    """The input's bytes viewed as the `type` dtype (a copy only when the input is not contiguous)."""
    out = np.dtype(attrs["type"])

    def fn(x):
        x = np.asarray(x)
        if not x.flags.c_contiguous:
            x = np.array(x, order="C")          # (ascontiguousarray would make a scalar a vector)
        a, b = x.dtype.itemsize, out.itemsize
        if a == b:
            return x.view(out)
        if a > b:
            return x.reshape(x.shape + (1,)).view(out).reshape(x.shape + (a // b,))
        if x.ndim == 0 or x.shape[-1] != b // a:
            raise ValueError(f"Bitcast: the last dimension must be {b // a} to bitcast {x.dtype} to {out}, "
                             f"got shape {list(x.shape)}")
        return x.view(out).reshape(x.shape[:-1])
    return fn
