"""CPU kernels of the colour-space ops (graph/ops/image_ops.py): RGBToHSV, HSVToRGB, AdjustHue and
AdjustSaturation, vectorized over pixels with TF's formulas (colorspace_op.h, adjust_hue_op.cc,
adjust_saturation_op.cc), branch for branch, in the images' float type (AdjustHue and
AdjustSaturation in float32, as TF)."""
from __future__ import annotations

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel


def _rgb(op, images):
    x = np.asarray(images)
    if x.ndim < 1 or x.shape[-1] != 3:
        raise InvalidArgumentError(f"{op}: input must have 3 channels but input only has "
                                   f"{x.shape[-1] if x.ndim else 0} channels.")
    return x[..., 0], x[..., 1], x[..., 2], x


def _rgb_to_hsv(r, g, b):
    """colorspace_op.h's RGBToHSV (and adjust_saturation_op.cc's rgb_to_hsv)."""
    v = np.maximum(np.maximum(r, g), b)
    rng = v - np.minimum(np.minimum(r, g), b)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(v > 0, rng / v, 0).astype(r.dtype)
        norm = (1 / (6 * rng)).astype(r.dtype)
        h = np.where(r == v, norm * (g - b),
                     np.where(g == v, norm * (b - r) + r.dtype.type(2.0 / 6.0), norm * (r - g) + r.dtype.type(4.0 / 6.0)))
    h = np.where(rng > 0, h, 0).astype(r.dtype)
    h = np.where(h < 0, h + 1, h).astype(r.dtype)
    return h, s, v


@register_kernel("RGBToHSV", "CPU")
def rgb_to_hsv_kernel(attrs):
    def fn(images):
        r, g, b, x = _rgb("RGBToHSV", images)
        return np.stack(_rgb_to_hsv(r, g, b), -1).astype(x.dtype)
    return fn


@register_kernel("HSVToRGB", "CPU")
def hsv_to_rgb_kernel(attrs):
    def fn(images):
        h, s, v, x = _rgb("HSVToRGB", images)
        t = x.dtype.type
        dh = h * t(6)
        dr = np.clip(np.abs(dh - t(3)) - t(1), 0, 1)
        dg = np.clip(-np.abs(dh - t(2)) + t(2), 0, 1)
        db = np.clip(-np.abs(dh - t(4)) + t(2), 0, 1)
        one_minus_s = t(1) - s
        return np.stack([(one_minus_s + s * d) * v for d in (dr, dg, db)], -1).astype(x.dtype)
    return fn


def _hsv_to_rgb_sat(h, s, v):
    """adjust_saturation_op.cc's hsv_to_rgb (the sextant of h * 6, truncated)."""
    f = np.float32
    c = s * v
    m = v - c
    dh = h * f(6)
    cat = dh.astype(np.int32)
    fmodu = np.mod(dh, f(2)).astype(f)
    fmodu = np.where(fmodu <= 0, fmodu + f(2), fmodu)
    x = c * (f(1) - np.abs(fmodu - f(1)))
    z = np.zeros_like(c)
    table = [(c, x, z), (x, c, z), (z, c, x), (z, x, c), (x, z, c), (c, z, x)]
    out = []
    for ch in range(3):
        val = z
        for k, row in enumerate(table):
            val = np.where(cat == k, row[ch], val)
        out.append(val + m)
    return out


@register_kernel("AdjustSaturation", "CPU")
def adjust_saturation_kernel(attrs):
    def fn(images, scale):
        r, g, b, x = _rgb("AdjustSaturation", images)
        if np.ndim(scale) != 0:
            raise InvalidArgumentError(f"AdjustSaturation: scale must be scalar: {list(np.shape(scale))}")
        f = np.float32
        h, s, v = _rgb_to_hsv(r.astype(f), g.astype(f), b.astype(f))
        s = np.minimum(f(1), np.maximum(f(0), s * f(scale)))
        return np.stack(_hsv_to_rgb_sat(h, s, v), -1).astype(x.dtype)
    return fn


@register_kernel("AdjustHue", "CPU")
def adjust_hue_kernel(attrs):
    def fn(images, delta):
        r, g, b, x = _rgb("AdjustHue", images)
        if np.ndim(delta) != 0:
            raise InvalidArgumentError(f"AdjustHue: delta must be scalar: {list(np.shape(delta))}")
        f = np.float32
        r, g, b = r.astype(f), g.astype(f), b.astype(f)
        # adjust_hue_op.cc's rgb_to_hv_range: the sextant by the order of the channels
        conds = [(r >= g) & (g >= b), (g >= r) & (r >= b), (g >= b) & (b >= r), (b >= g) & (g >= r),
                 (b >= r) & (r >= g)]
        orders = [(r, g, b), (g, r, b), (g, b, r), (b, g, r), (b, r, g), (r, b, g)]
        cat = np.select(conds, [0, 1, 2, 3, 4], 5)
        vmax = np.select(conds, [o[0] for o in orders[:5]], orders[5][0])
        vmid = np.select(conds, [o[1] for o in orders[:5]], orders[5][1])
        vmin = np.select(conds, [o[2] for o in orders[:5]], orders[5][2])
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = (vmid - vmin) / (vmax - vmin)
        inc = (cat & 1) == 0
        h = np.where(vmax == vmin, f(0), cat + np.where(inc, ratio, f(1) - ratio)).astype(f)
        h = h + f(delta) * f(6)
        h = np.mod(h, f(6)).astype(f)
        h = np.where(h >= 6, h - f(6), h)
        # hv_range_to_rgb
        hc = h.astype(np.int32)
        ratio = h - hc
        ratio = np.where((hc & 1) == 0, ratio, f(1) - ratio)
        vmid = vmin + ratio * (vmax - vmin)
        table = [(vmax, vmid, vmin), (vmid, vmax, vmin), (vmin, vmax, vmid), (vmin, vmid, vmax), (vmid, vmin, vmax),
                 (vmax, vmin, vmid)]
        out = [np.select([hc == k for k in range(5)], [t[ch] for t in table[:5]], table[5][ch]) for ch in range(3)]
        return np.stack(out, -1).astype(x.dtype)
    return fn
