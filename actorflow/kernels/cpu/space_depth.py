"""CPU kernels for SpaceToDepth and DepthToSpace: a reshape, a transpose and a copy each.

NHWC: SpaceToDepth moves the block_size x block_size block of pixels at (i, j) to the channels of
output pixel (i, j), output channel (dy * b + dx) * C + c; DepthToSpace undoes it. NCHW is the
same rearrangement with the channel axis second (transposed to NHWC and back).
"""
from __future__ import annotations

import numpy as np

from actorflow.kernels.cpu.window import _data_format, _from_nhwc, _to_nhwc
from actorflow.kernels.registry import register_kernel


def _block(attrs, op):
    b = int(attrs.get("block_size", 0))
    if b < 2:
        raise ValueError(f"{op}: block_size must be at least 2, got {b}")
    return b


def _image(op, x, fmt):
    x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"{op}: input must be 4-D ({fmt}), got shape {x.shape}")
    return _to_nhwc(x, fmt)


@register_kernel("SpaceToDepth", "CPU")
def space_to_depth(attrs):
    """tf.raw_ops.SpaceToDepth: [N, H, W, C] -> [N, H/b, W/b, b*b*C] (NHWC)."""
    b = _block(attrs, "SpaceToDepth")
    fmt = _data_format(attrs, "SpaceToDepth")

    def fn(input):
        x = _image("SpaceToDepth", input, fmt)
        n, h, w, c = x.shape
        if h % b or w % b:
            raise ValueError(f"SpaceToDepth: image height {h} and width {w} must be divisible by block_size {b} "
                             f"(input shape {np.shape(input)}, {fmt})")
        out = x.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5).reshape(n, h // b, w // b, b * b * c)
        return _from_nhwc(np.ascontiguousarray(out), fmt)
    return fn


@register_kernel("DepthToSpace", "CPU")
def depth_to_space(attrs):
    """tf.raw_ops.DepthToSpace: [N, H, W, b*b*C] -> [N, H*b, W*b, C] (NHWC)."""
    b = _block(attrs, "DepthToSpace")
    fmt = _data_format(attrs, "DepthToSpace")

    def fn(input):
        x = _image("DepthToSpace", input, fmt)
        n, h, w, c = x.shape
        if c % (b * b):
            raise ValueError(f"DepthToSpace: input depth {c} must be divisible by block_size * block_size = {b * b} "
                             f"(input shape {np.shape(input)}, {fmt})")
        co = c // (b * b)
        out = x.reshape(n, h, w, b, b, co).transpose(0, 1, 3, 2, 4, 5).reshape(n, h * b, w * b, co)
        return _from_nhwc(np.ascontiguousarray(out), fmt)
    return fn
