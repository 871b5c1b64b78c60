"""Helpers that generated JIT code calls: reductions over the rows of a 2-D view, softmax and
cross-entropy (the kernels' own fused loops), all numba functions compiled once and cached."""
from __future__ import annotations

import numpy as np
from numba import njit

from actorflow.kernels.cpu.softmax import _softmax_rows, _xent_dense

__all__ = ["row_sum", "row_prod", "row_max", "row_min", "row_all", "row_any", "softmax", "xent"]


@njit(nogil=True, cache=True)
def row_sum(x, out):
    rows, cols = x.shape
    for r in range(rows):
        acc = out[r]
        for c in range(cols):
            acc += x[r, c]
        out[r] = acc
    return out


@njit(nogil=True, cache=True)
def row_prod(x, out):
    rows, cols = x.shape
    for r in range(rows):
        acc = out[r]
        for c in range(cols):
            acc *= x[r, c]
        out[r] = acc
    return out


@njit(nogil=True, cache=True)
def row_max(x, out):
    rows, cols = x.shape
    for r in range(rows):
        acc = out[r]
        for c in range(cols):
            v = x[r, c]
            if v > acc or v != v:
                acc = v
        out[r] = acc
    return out


@njit(nogil=True, cache=True)
def row_min(x, out):
    rows, cols = x.shape
    for r in range(rows):
        acc = out[r]
        for c in range(cols):
            v = x[r, c]
            if v < acc or v != v:
                acc = v
        out[r] = acc
    return out


@njit(nogil=True, cache=True)
def row_all(x, out):
    rows, cols = x.shape
    for r in range(rows):
        acc = True
        for c in range(cols):
            acc = acc and x[r, c]
        out[r] = acc
    return out


@njit(nogil=True, cache=True)
def row_any(x, out):
    rows, cols = x.shape
    for r in range(rows):
        acc = False
        for c in range(cols):
            acc = acc or x[r, c]
        out[r] = acc
    return out


@njit(nogil=True, cache=True)
def softmax(x, log):
    rows = np.ascontiguousarray(x).reshape((-1, x.shape[-1]))
    out = np.empty_like(rows)
    if rows.size:
        _softmax_rows(rows, out, log)
    return out.reshape(x.shape)


@njit(nogil=True, cache=True)
def xent(x, labels):
    xc = np.ascontiguousarray(x)
    lab = np.ascontiguousarray(labels)
    loss = np.empty(x.shape[0], x.dtype)
    back = np.empty_like(xc)
    _xent_dense(xc, lab, loss, back)
    return loss, back
