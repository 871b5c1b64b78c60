"""CPU kernel of ImageProjectiveTransformV2 (graph/ops/image_transform_ops.py): every output pixel's
input point computed at once per image, then a nearest or bilinear gather with zero fill."""
from __future__ import annotations

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel


def _read(img, y, x):
    """img[y, x, :] where (y, x) lies inside, else zeros; y, x integer arrays [h', w']."""
    h, w = img.shape[:2]
    inside = (y >= 0) & (y < h) & (x >= 0) & (x < w)
    vals = img[np.clip(y, 0, h - 1), np.clip(x, 0, w - 1)]
    return np.where(inside[..., None], vals, 0)


def _round_half_away(v):
    """std::round's rounding (halves away from zero, not numpy's to even), as integers."""
    return (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int64)


@register_kernel("ImageProjectiveTransformV2", "CPU")
def image_projective_transform(attrs):
    """tf.raw_ops.ImageProjectiveTransformV2 (fill_mode CONSTANT)."""
    interp = attrs.get("interpolation", "NEAREST")
    interp = interp.decode() if isinstance(interp, bytes) else interp

    def fn(images, transforms, output_shape):
        if images.ndim != 4:
            raise InvalidArgumentError(f"ImageProjectiveTransformV2: images must be rank 4, got shape "
                                       f"{list(images.shape)}")
        n = images.shape[0]
        t = np.asarray(transforms, np.float32)
        if t.ndim != 2 or t.shape[1] != 8 or t.shape[0] not in (1, n):
            raise InvalidArgumentError(f"ImageProjectiveTransformV2: transforms must be [1 or {n}, 8], got shape "
                                       f"{list(t.shape)}")
        oh, ow = (int(v) for v in np.asarray(output_shape).reshape(-1)[:2])
        if oh < 0 or ow < 0:
            raise InvalidArgumentError(f"ImageProjectiveTransformV2: output_shape must be non-negative, got "
                                       f"{[oh, ow]}")
        out = np.empty((n, oh, ow, images.shape[3]), images.dtype)
        ys, xs = np.meshgrid(np.arange(oh, dtype=np.float32), np.arange(ow, dtype=np.float32), indexing="ij")
        for b in range(n):
            a0, a1, a2, b0, b1, b2, c0, c1 = t[b if t.shape[0] > 1 else 0]
            k = c0 * xs + c1 * ys + np.float32(1)
            in_x = (a0 * xs + a1 * ys + a2) / k
            in_y = (b0 * xs + b1 * ys + b2) / k
            img = images[b]
            if interp == "NEAREST":
                out[b] = _read(img, _round_half_away(in_y), _round_half_away(in_x))
                continue
            y0, x0 = np.floor(in_y), np.floor(in_x)
            y0i, x0i = y0.astype(np.int64), x0.astype(np.int64)
            wy, wx = (in_y - y0)[..., None], (in_x - x0)[..., None]
            top = (1 - wx) * _read(img, y0i, x0i) + wx * _read(img, y0i, x0i + 1)
            bottom = (1 - wx) * _read(img, y0i + 1, x0i) + wx * _read(img, y0i + 1, x0i + 1)
            out[b] = ((1 - wy) * top + wy * bottom).astype(images.dtype)
        return out
    return fn
