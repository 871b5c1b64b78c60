"""CPU kernels for Softmax, LogSoftmax and the softmax cross-entropy ops: single fused numba loops
over rows (compiled lazily, cached on disk, GIL released), numpy for the dtypes numba lacks.
"""
from __future__ import annotations

import numpy as np

from actorflow.kernels.cpu.window import _FAST_FLOATS
from actorflow.kernels.lazy_numba import njit
from actorflow.kernels.registry import register_kernel


@njit(cache=True, nogil=True)
def _softmax_rows(x, out, log):
    rows, cols = x.shape
    for r in range(rows):
        m = x[r, 0]
        for c in range(1, cols):
            if x[r, c] > m:
                m = x[r, c]
        # Sum the exponentials in float64: a long row of float32 terms loses digits otherwise.
        s = 0.0
        for c in range(cols):
            e = np.exp(x[r, c] - m)
            out[r, c] = e
            s += e
        if log:
            lse = np.log(s)
            for c in range(cols):
                out[r, c] = (x[r, c] - m) - lse
        else:
            inv = 1.0 / s
            for c in range(cols):
                out[r, c] = out[r, c] * inv


@njit(cache=True, nogil=True)
def _xent_dense(x, labels, loss, back):
    rows, cols = x.shape
    for r in range(rows):
        m = x[r, 0]
        for c in range(1, cols):
            if x[r, c] > m:
                m = x[r, c]
        s = 0.0
        for c in range(cols):
            e = np.exp(x[r, c] - m)
            back[r, c] = e
            s += e
        lse = np.log(s)
        inv = 1.0 / s
        acc = 0.0
        for c in range(cols):
            lab = labels[r, c]
            # -sum(labels * log_softmax): written as lab*(lse - shifted) so it stays finite for
            # zero labels even when log_softmax is -inf.
            if lab != 0:
                acc += lab * (lse - (x[r, c] - m))
            back[r, c] = back[r, c] * inv - lab
        loss[r] = acc


@njit(cache=True, nogil=True)
def _xent_sparse(x, labels, loss, back):
    rows, cols = x.shape
    for r in range(rows):
        m = x[r, 0]
        for c in range(1, cols):
            if x[r, c] > m:
                m = x[r, c]
        s = 0.0
        for c in range(cols):
            e = np.exp(x[r, c] - m)
            back[r, c] = e
            s += e
        lse = np.log(s)
        inv = 1.0 / s
        for c in range(cols):
            back[r, c] = back[r, c] * inv
        lab = labels[r]
        loss[r] = lse - (x[r, lab] - m)
        back[r, lab] -= 1.0


def _as_rows(x):
    """(rows, last) contiguous view of x, the shape the fused softmax loops work on."""
    return np.ascontiguousarray(x).reshape(-1, x.shape[-1])


def _softmax_numpy(x, log):
    xf = x.astype(np.float32) if x.dtype.itemsize < 4 else x
    shifted = xf - np.max(xf, axis=-1, keepdims=True)
    if log:
        out = shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))
    else:
        e = np.exp(shifted)
        out = e / np.sum(e, axis=-1, keepdims=True)
    return out.astype(x.dtype, copy=False)


def _softmax_kernel(op_name, log):
    def fn(logits):
        x = np.asarray(logits)
        if x.ndim < 1:
            raise ValueError(f"{op_name}: logits must have rank >= 1, got a scalar")
        if x.dtype.kind != "f":
            raise TypeError(f"{op_name}: logits must be floating point, got {x.dtype}")
        if x.size == 0:
            return np.empty_like(x)
        if x.dtype not in _FAST_FLOATS:
            return _softmax_numpy(x, log)
        rows = _as_rows(x)
        out = np.empty_like(rows)
        _softmax_rows(rows, out, log)
        return out.reshape(x.shape)
    return fn


@register_kernel("Softmax", "CPU")
def softmax(attrs):
    """tf.raw_ops.Softmax over the last axis, as one numerically stable fused pass per row."""
    return _softmax_kernel("Softmax", False)


@register_kernel("LogSoftmax", "CPU")
def log_softmax(attrs):
    """tf.raw_ops.LogSoftmax over the last axis: ``x - max - log(sum(exp(x - max)))``."""
    return _softmax_kernel("LogSoftmax", True)


def _check_features(op_name, features):
    x = np.asarray(features)
    if x.ndim != 2:
        raise ValueError(f"{op_name}: features must be 2-D [batch, classes], got shape {x.shape}")
    if x.dtype.kind != "f":
        raise TypeError(f"{op_name}: features must be floating point, got {x.dtype}")
    return x


@register_kernel("SoftmaxCrossEntropyWithLogits", "CPU")
def softmax_cross_entropy_with_logits(attrs):
    """tf.raw_ops.SoftmaxCrossEntropyWithLogits: per-row loss and its gradient ``softmax - labels``.

    Labels broadcast against features (as in TF >= 1.13); the result stays in the features' dtype.
    """
    def fn(features, labels):
        x = _check_features("SoftmaxCrossEntropyWithLogits", features)
        lab = np.asarray(labels)
        try:
            lab = np.broadcast_to(lab, x.shape)
        except ValueError:
            raise ValueError(f"SoftmaxCrossEntropyWithLogits: labels of shape {lab.shape} do not match "
                             f"features of shape {x.shape}") from None
        if x.shape[1] == 0:
            return np.zeros(x.shape[0], x.dtype), np.empty_like(x)
        if x.dtype not in _FAST_FLOATS:
            xf, lf = x.astype(np.float32), lab.astype(np.float32)
            shifted = xf - xf.max(axis=1, keepdims=True)
            e = np.exp(shifted)
            s = e.sum(axis=1, keepdims=True)
            loss = np.sum(lf * (np.log(s) - shifted), axis=1)
            return loss.astype(x.dtype), (e / s - lf).astype(x.dtype)
        x = np.ascontiguousarray(x)
        lab = np.ascontiguousarray(lab, dtype=x.dtype)
        loss = np.empty(x.shape[0], x.dtype)
        back = np.empty_like(x)
        _xent_dense(x, lab, loss, back)
        return loss, back
    return fn


@register_kernel("SparseSoftmaxCrossEntropyWithLogits", "CPU")
def sparse_softmax_cross_entropy_with_logits(attrs):
    """tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits: loss ``-log softmax(x)[label]`` and its gradient.

    A label outside [0, classes) raises ValueError naming it (TF raises InvalidArgumentError).
    """
    def fn(features, labels):
        x = _check_features("SparseSoftmaxCrossEntropyWithLogits", features)
        lab = np.asarray(labels)
        if lab.shape != x.shape[:1]:
            raise ValueError(f"SparseSoftmaxCrossEntropyWithLogits: labels must have shape [{x.shape[0]}] "
                             f"to match features {x.shape}, got {lab.shape}")
        if lab.dtype.kind not in "iu":
            raise TypeError(f"SparseSoftmaxCrossEntropyWithLogits: labels must be integers, got {lab.dtype}")
        n_classes = x.shape[1]
        bad = np.flatnonzero((lab < 0) | (lab >= n_classes))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"SparseSoftmaxCrossEntropyWithLogits: received a label value of {int(lab[i])} "
                             f"(labels[{i}]) which is outside the valid range of [0, {n_classes})")
        if x.dtype not in _FAST_FLOATS:
            xf = x.astype(np.float32)
            shifted = xf - xf.max(axis=1, keepdims=True)
            e = np.exp(shifted)
            s = e.sum(axis=1, keepdims=True)
            rows = np.arange(x.shape[0])
            loss = np.log(s[:, 0]) - shifted[rows, lab]
            back = e / s
            back[rows, lab] -= 1.0
            return loss.astype(x.dtype), back.astype(x.dtype)
        x = np.ascontiguousarray(x)
        loss = np.empty(x.shape[0], x.dtype)
        back = np.empty_like(x)
        _xent_sparse(x, lab.astype(np.int64, copy=False), loss, back)
        return loss, back
    return fn
