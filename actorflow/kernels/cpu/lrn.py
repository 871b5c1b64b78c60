"""CPU kernels for LRN (local response normalization across channels) and LRNGrad, in numpy.

    norm[..., d] = bias + alpha * sum(x[..., d - r : d + r + 1] ** 2)       (r = depth_radius)
    LRN:      y = x * norm ** -beta
    LRNGrad:  dx[k] = dy[k] * norm[k] ** -beta - 2 * alpha * beta * x[k] * sum_{|j - k| <= r} dy[j] * y[j] / norm[j]

which is TF's LRNGrad formula (the exact derivative, norm recomputed from the input image). The
window sums are 2r + 1 shifted adds along the contiguous last axis (no cumulative sum: its
cancellation would cost precision); float16 runs in float32.
"""
from __future__ import annotations

import numpy as np

from actorflow.kernels.registry import register_kernel


def _params(attrs, op):
    r = int(attrs.get("depth_radius", 5))
    if r < 0:
        raise ValueError(f"{op}: depth_radius must be non-negative, got {r}")
    return r, float(attrs.get("bias", 1.0)), float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 0.5))


def _window_sum(a, r):
    """sum(a[..., d - r : d + r + 1]) for every d of the last axis (clipped at its ends)."""
    out = a.copy()
    for k in range(1, min(r, a.shape[-1] - 1) + 1):
        out[..., k:] += a[..., :-k]
        out[..., :-k] += a[..., k:]
    return out


def _image(op, what, x):
    x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"{op}: {what} must be 4-D, got shape {x.shape}")
    if x.dtype.kind != "f":
        raise TypeError(f"{op}: {what} must be floating point, got {x.dtype}")
    return x.astype(np.float32) if x.dtype == np.float16 else x


def _norm(x, r, bias, alpha):
    return bias + alpha * _window_sum(x * x, r)


def _pow_neg(norm, beta):
    # TF's special cases, which are also the cheapest.
    if beta == 1.0:
        return 1.0 / norm
    if beta == 0.5:
        return 1.0 / np.sqrt(norm)
    return np.exp(np.log(norm) * -beta)


@register_kernel("LRN", "CPU", cost=lambda x: 8 * int(np.size(x)))
def lrn(attrs):
    """tf.raw_ops.LRN: x / (bias + alpha * window sum of x**2 over the last axis) ** beta."""
    r, bias, alpha, beta = _params(attrs, "LRN")

    def fn(input):
        dtype = np.asarray(input).dtype
        x = _image("LRN", "input", input)
        return (x * _pow_neg(_norm(x, r, x.dtype.type(bias), x.dtype.type(alpha)), beta)).astype(dtype, copy=False)
    return fn


@register_kernel("LRNGrad", "CPU", cost=lambda dy, x, y: 12 * int(np.size(x)))
def lrn_grad(attrs):
    """tf.raw_ops.LRNGrad(input_grads, input_image, output_image): the gradient of LRN."""
    r, bias, alpha, beta = _params(attrs, "LRNGrad")

    def fn(input_grads, input_image, output_image):
        dtype = np.asarray(input_grads).dtype
        dy = _image("LRNGrad", "input_grads", input_grads)
        x = _image("LRNGrad", "input_image", input_image)
        y = _image("LRNGrad", "output_image", output_image)
        if not dy.shape == x.shape == y.shape:
            raise ValueError(f"LRNGrad: input_grads {dy.shape}, input_image {x.shape} and output_image {y.shape} "
                             f"must have the same shape")
        norm = _norm(x, r, x.dtype.type(bias), x.dtype.type(alpha))
        dx = dy * _pow_neg(norm, beta) - x.dtype.type(2 * alpha * beta) * x * _window_sum(dy * y / norm, r)
        return dx.astype(dtype, copy=False)
    return fn
