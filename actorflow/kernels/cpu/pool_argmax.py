"""CPU kernels for MaxPoolWithArgmax and MaxPoolGradWithArgmax (NHWC only, as in TF).

argmax holds, for each output, the flat index of the input element its maximum came from:
``(y * width + x) * channels + c``, with ``b * height * width * channels`` added when
`include_batch_in_index`. Ties go to the first pixel in row-major window order (TF's CPU kernel
replaces its running maximum only on a strictly greater value) and SAME padding is never a
candidate. The gradient adds each output's gradient at its argmax.
"""
from __future__ import annotations

import numpy as np

from actorflow.kernels.cpu.window import _PoolGeometry
from actorflow.kernels.lazy_numba import njit
from actorflow.kernels.registry import register_kernel


@njit(cache=True, nogil=True)
def _max_pool_argmax(x, kh, kw, sh, sw, ph, pw, with_batch, out, arg):
    """Row by row: the C channels of each window pixel against the output pixel's running maxima
    (selects, not branches, so the channel loop vectorises)."""
    n_img, h_in, w_in, c_in = x.shape
    _, oh, ow, _ = out.shape
    for n in range(n_img):
        base = n * h_in * w_in * c_in if with_batch else 0
        for i in range(oh):
            h0 = i * sh - ph
            hs, he = max(h0, 0), min(h0 + kh, h_in)
            for j in range(ow):
                w0 = j * sw - pw
                ws, we = max(w0, 0), min(w0 + kw, w_in)
                orow = out[n, i, j]
                arow = arg[n, i, j]
                xr = x[n, hs, ws]
                first = base + (hs * w_in + ws) * c_in
                for c in range(c_in):
                    orow[c] = xr[c]
                    arow[c] = first + c
                for h in range(hs, he):
                    for w in range(ws, we):
                        xr = x[n, h, w]
                        at = base + (h * w_in + w) * c_in
                        for c in range(c_in):
                            v = xr[c]
                            m = orow[c]
                            better = v > m
                            orow[c] = v if better else m
                            arow[c] = at + c if better else arow[c]


def _check_input(op, x):
    x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"{op}: input must be 4-D (NHWC), got shape {x.shape}")
    return x


@register_kernel("MaxPoolWithArgmax", "CPU")
def max_pool_with_argmax(attrs):
    """tf.raw_ops.MaxPoolWithArgmax: (max-pooled input, flat index of each maximum)."""
    geo = _PoolGeometry(attrs, "MaxPoolWithArgmax")
    if geo.fmt != "NHWC":
        raise ValueError("MaxPoolWithArgmax: only NHWC is supported")
    targ = np.dtype(attrs.get("Targmax", np.int64))
    with_batch = bool(attrs.get("include_batch_in_index", False))

    def fn(input):
        x = np.ascontiguousarray(_check_input("MaxPoolWithArgmax", input))
        oh, ow, ph, pw = geo.resolve(x.shape)
        shape = (x.shape[0], oh, ow, x.shape[3])
        if targ == np.int32 and x.size > np.iinfo(np.int32).max:
            raise ValueError(f"MaxPoolWithArgmax: input of {x.size} elements is too big for an int32 argmax")
        half = x.dtype == np.float16
        xx = x.astype(np.float32) if half else x
        out = np.empty(shape, xx.dtype)
        arg = np.empty(shape, np.int64)
        if out.size:
            _max_pool_argmax(xx, geo.kh, geo.kw, geo.sh, geo.sw, ph, pw, with_batch, out, arg)
        return (out.astype(np.float16) if half else out), arg.astype(targ, copy=False)
    return fn


@register_kernel("MaxPoolGradWithArgmax", "CPU")
def max_pool_grad_with_argmax(attrs):
    """tf.raw_ops.MaxPoolGradWithArgmax(input, grad, argmax): each gradient added at its argmax."""
    geo = _PoolGeometry(attrs, "MaxPoolGradWithArgmax")
    with_batch = bool(attrs.get("include_batch_in_index", False))

    def fn(input, grad, argmax):
        x = _check_input("MaxPoolGradWithArgmax", input)
        g, arg = np.asarray(grad), np.asarray(argmax)
        oh, ow, _, _ = geo.resolve(x.shape)
        want = (x.shape[0], oh, ow, x.shape[3])
        if g.shape != want or arg.shape != want:
            raise ValueError(f"MaxPoolGradWithArgmax: grad {g.shape} and argmax {arg.shape} must have the pooled "
                             f"shape {want} of input {x.shape}")
        per_image = x.size // max(x.shape[0], 1)
        raw = arg.reshape(x.shape[0], -1).astype(np.int64)
        limit = x.size if with_batch else per_image
        bad = (raw < 0) | (raw >= limit)
        if bad.any():
            b, k = np.argwhere(bad)[0]
            raise ValueError(f"MaxPoolGradWithArgmax: argmax {int(raw[b, k])} at output {int(k)} of image {int(b)} "
                             f"is out of range [0, {limit}) for input {x.shape}")
        idx = raw if with_batch else raw + (np.arange(x.shape[0], dtype=np.int64) * per_image)[:, None]
        dx = np.zeros(x.size, g.dtype)
        np.add.at(dx, idx.reshape(-1), g.reshape(-1))
        return dx.reshape(x.shape)
    return fn
