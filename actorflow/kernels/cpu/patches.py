"""CPU kernels for ExtractImagePatches and ExtractVolumePatches: zero padding, then one strided
slice per window position, copied into its place in the output's depth.

The output depth is ordered (window position row-major, then channel): out[..., w * C + c] for
window position w, as TF's kernel writes it.
"""
from __future__ import annotations

import itertools

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel


def _patches(op, x, k, s, r, padding):
    x = np.asarray(x)
    n = len(k)
    if x.ndim != n + 2:
        raise InvalidArgumentError(f"{op}: input must be {n + 2}-D, got shape {list(x.shape)}")
    spatial = x.shape[1:-1]
    eff = [(kk - 1) * rr + 1 for kk, rr in zip(k, r)]
    if padding == "SAME":
        out = [-(-d // ss) for d, ss in zip(spatial, s)]
        total = [max((o - 1) * ss + e - d, 0) for o, ss, e, d in zip(out, s, eff, spatial)]
        pads = [(t // 2, t - t // 2) for t in total]
    else:
        out = [max(0, -(-(d - e + 1) // ss)) for d, e, ss in zip(spatial, eff, s)]
        pads = [(0, 0)] * n
    if any(pads[i] != (0, 0) for i in range(n)):
        x = np.pad(x, [(0, 0)] + pads + [(0, 0)])
    c = x.shape[-1]
    result = np.empty((x.shape[0], *out, int(np.prod(k)), c), x.dtype)
    if result.size == 0:
        return result.reshape(x.shape[0], *out, int(np.prod(k)) * c)
    for w, pos in enumerate(itertools.product(*(range(kk) for kk in k))):
        index = (slice(None),) + tuple(slice(p * rr, p * rr + (o - 1) * ss + 1, ss)
                                       for p, rr, o, ss in zip(pos, r, out, s))
        result[..., w, :] = x[index]
    return result.reshape(x.shape[0], *out, int(np.prod(k)) * c)


def _cost(x):
    return int(np.size(x))


def _sizes(attrs, key, default=None):
    v = attrs.get(key, default)
    return [int(a) for a in list(v)[1:-1]]


@register_kernel("ExtractImagePatches", "CPU", cost=_cost)
def extract_image_patches(attrs):
    """tf.raw_ops.ExtractImagePatches."""
    k, s, r = _sizes(attrs, "ksizes"), _sizes(attrs, "strides"), _sizes(attrs, "rates", [1, 1, 1, 1])
    padding = attrs["padding"]
    return lambda images: _patches("ExtractImagePatches", images, k, s, r, padding)


@register_kernel("ExtractVolumePatches", "CPU", cost=_cost)
def extract_volume_patches(attrs):
    """tf.raw_ops.ExtractVolumePatches."""
    k, s = _sizes(attrs, "ksizes"), _sizes(attrs, "strides")
    padding = attrs["padding"]
    return lambda input: _patches("ExtractVolumePatches", input, k, s, [1, 1, 1], padding)
