"""CPU kernels of grayscale morphological dilation (graph/ops/nn_morph_ops.py): Dilation2D,
Dilation2DBackpropInput, Dilation2DBackpropFilter. NHWC input, [fh, fw, depth] filter:
out[b, y, x, c] = max over (i, j) of in[b, y*sh + i*rh - top, x*sw + j*rw - left, c] + f[i, j, c],
positions outside the image never winning. The gradients go to the first maximizing (i, j) in
row-major order, as TF's kernels (a strict `>` scan). Numpy over the fh*fw offsets.
"""
from __future__ import annotations

import numpy as np

from actorflow.kernels.registry import register_kernel


class _Geometry:
    def __init__(self, attrs, op):
        self.op = op
        s, r = [int(v) for v in attrs["strides"]], [int(v) for v in attrs["rates"]]
        if len(s) != 4 or len(r) != 4 or s[0] != 1 or s[3] != 1 or r[0] != 1 or r[3] != 1:
            raise ValueError(f"{op}: strides and rates must be [1, h, w, 1], got {s} and {r}")
        self.strides, self.rates = (s[1], s[2]), (r[1], r[2])
        self.padding = attrs["padding"]

    def parts(self, x, f):
        x, f = np.asarray(x), np.asarray(f)
        if x.ndim != 4 or f.ndim != 3 or f.shape[2] != x.shape[3]:
            raise ValueError(f"{self.op}: input must be [batch, h, w, depth] and filter [fh, fw, depth], got shapes "
                             f"{x.shape} and {f.shape}")
        outs, pads = [], []
        for n, k, s, r in zip(x.shape[1:3], f.shape[:2], self.strides, self.rates):
            eff = (k - 1) * r + 1
            if self.padding == "SAME":
                o = -(-n // s)
                pads.append(max((o - 1) * s + eff - n, 0))
            else:
                if n < eff:
                    raise ValueError(f"{self.op}: the dilated filter ({eff}) is larger than the input ({n}) with "
                                     f"VALID padding")
                o = (n - eff) // s + 1
                pads.append(0)
            outs.append(o)
        low = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        before = [p // 2 for p in pads]
        # room for every window: pad the end up to (out - 1) * stride + eff
        after = [max((o - 1) * s + (k - 1) * r + 1 - n - b, 0)
                 for o, s, k, r, n, b in zip(outs, self.strides, f.shape[:2], self.rates, x.shape[1:3], before)]
        xp = np.pad(x, ((0, 0), (before[0], after[0]), (before[1], after[1]), (0, 0)), constant_values=low)
        return x, f, xp, outs, before

    def windows(self, f, outs):
        (sh, sw), (rh, rw) = self.strides, self.rates
        for i in range(f.shape[0]):
            for j in range(f.shape[1]):
                yield i, j, (slice(None), slice(i * rh, i * rh + (outs[0] - 1) * sh + 1, sh),
                             slice(j * rw, j * rw + (outs[1] - 1) * sw + 1, sw))

    def forward(self, x, f):
        x, f, xp, outs, before = self.parts(x, f)
        best = np.full((x.shape[0], *outs, x.shape[3]), -np.inf, np.result_type(x, f))
        arg = np.zeros(best.shape, np.int64)
        for i, j, sl in self.windows(f, outs):
            v = xp[sl] + f[i, j]
            better = v > best
            best = np.where(better, v, best)
            arg = np.where(better, i * f.shape[1] + j, arg)
        return x, f, xp, outs, before, best, arg


@register_kernel("Dilation2D", "CPU")
def dilation2d(attrs):
    """tf.raw_ops.Dilation2D."""
    geo = _Geometry(attrs, "Dilation2D")

    def fn(input, filter):  # noqa: A002 (TF's names)
        return geo.forward(input, filter)[5]
    return fn


def _grad(geo, op, out_backprop, outs, x):
    g = np.asarray(out_backprop)
    if g.shape != (x.shape[0], *outs, x.shape[3]):
        raise ValueError(f"{op}: out_backprop has shape {g.shape} but the output has shape "
                         f"{(x.shape[0], *outs, x.shape[3])}")
    return g


@register_kernel("Dilation2DBackpropInput", "CPU")
def dilation2d_backprop_input(attrs):
    """tf.raw_ops.Dilation2DBackpropInput: each output's gradient to the input element that won."""
    geo = _Geometry(attrs, "Dilation2DBackpropInput")

    def fn(input, filter, out_backprop):  # noqa: A002
        x, f, xp, outs, before, _, arg = geo.forward(input, filter)
        g = _grad(geo, "Dilation2DBackpropInput", out_backprop, outs, x)
        dxp = np.zeros(xp.shape, g.dtype)
        for i, j, sl in geo.windows(f, outs):
            dxp[sl] += np.where(arg == i * f.shape[1] + j, g, 0)
        return np.ascontiguousarray(dxp[:, before[0]:before[0] + x.shape[1], before[1]:before[1] + x.shape[2]])
    return fn


@register_kernel("Dilation2DBackpropFilter", "CPU")
def dilation2d_backprop_filter(attrs):
    """tf.raw_ops.Dilation2DBackpropFilter: each output's gradient to the filter tap that won."""
    geo = _Geometry(attrs, "Dilation2DBackpropFilter")

    def fn(input, filter, out_backprop):  # noqa: A002
        x, f, _, outs, _, _, arg = geo.forward(input, filter)
        g = _grad(geo, "Dilation2DBackpropFilter", out_backprop, outs, x)
        df = np.zeros(f.shape, g.dtype)
        for i in range(f.shape[0]):
            for j in range(f.shape[1]):
                df[i, j] = np.where(arg == i * f.shape[1] + j, g, 0).sum(axis=(0, 1, 2))
        return df
    return fn
