"""Diagonals and bands of matrices (graph/ops/array_ops/matrix.py), and the other array ops of
graph/ops/array_ops/more.py: numpy, new arrays (inputs are never written)."""
from __future__ import annotations

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel


def _fn(op_type):
    def deco(fn):
        register_kernel(op_type, "CPU")(lambda attrs, _fn=fn: _fn)
        return fn
    return deco


def _scalar_int(v, op, what) -> int:
    a = np.asarray(v)
    if a.size != 1:
        raise InvalidArgumentError(f"{op}: {what} must be a scalar, got shape {list(a.shape)}")
    return int(a.reshape(-1)[0])


def _matrices(x, op, what="input"):
    if x.ndim < 2:
        raise InvalidArgumentError(f"{op}: {what} must be at least rank 2, got shape {list(x.shape)}")


@_fn("MatrixBandPart")
def matrix_band_part(x, num_lower, num_upper):
    x = np.asarray(x)
    _matrices(x, "MatrixBandPart")
    m, n = x.shape[-2:]
    lo = _scalar_int(num_lower, "MatrixBandPart", "num_lower")
    up = _scalar_int(num_upper, "MatrixBandPart", "num_upper")
    if lo > m:
        raise InvalidArgumentError(f"MatrixBandPart: num_lower must be negative or less or equal to number of rows "
                                   f"({m}) got: {lo}")
    if up > n:
        raise InvalidArgumentError(f"MatrixBandPart: num_upper must be negative or less or equal to number of "
                                   f"columns ({n}) got: {up}")
    i = np.arange(m)[:, None]
    j = np.arange(n)[None, :]
    keep = np.ones((m, n), bool)
    if lo >= 0:
        keep &= i - j <= lo
    if up >= 0:
        keep &= j - i <= up
    return np.where(keep, x, np.zeros((), x.dtype))


@_fn("MatrixDiag")
def matrix_diag(d):
    d = np.asarray(d)
    if d.ndim < 1:
        raise InvalidArgumentError(f"MatrixDiag: diagonal must be at least rank 1, got shape {list(d.shape)}")
    n = d.shape[-1]
    out = np.zeros(d.shape + (n,), d.dtype)
    idx = np.arange(n)
    out[..., idx, idx] = d
    return out


@_fn("MatrixDiagPart")
def matrix_diag_part(x):
    x = np.asarray(x)
    _matrices(x, "MatrixDiagPart")
    return np.diagonal(x, axis1=-2, axis2=-1).copy()


@_fn("MatrixSetDiag")
def matrix_set_diag(x, d):
    x, d = np.asarray(x), np.asarray(d)
    _matrices(x, "MatrixSetDiag")
    k = min(x.shape[-2:])
    if d.shape != x.shape[:-2] + (k,):
        raise InvalidArgumentError(f"MatrixSetDiag: diagonal must have shape {list(x.shape[:-2]) + [k]} for an "
                                   f"input of shape {list(x.shape)}, got {list(d.shape)}")
    out = x.copy()
    idx = np.arange(k)
    out[..., idx, idx] = d
    return out


@_fn("Diag")
def diag(d):
    d = np.asarray(d)
    if not 1 <= d.ndim <= 3:
        raise InvalidArgumentError(f"Diag: the input must have rank 1 to 3, got shape {list(d.shape)}")
    n = d.size
    out = np.zeros((n, n), d.dtype)
    out[np.arange(n), np.arange(n)] = d.reshape(-1)
    return out.reshape(d.shape + d.shape)


@_fn("DiagPart")
def diag_part(x):
    x = np.asarray(x)
    k = x.ndim // 2
    if x.ndim % 2 or not 2 <= x.ndim <= 6 or x.shape[:k] != x.shape[k:]:
        raise InvalidArgumentError(f"DiagPart: the input must have rank 2, 4 or 6 with equal halves, got shape "
                                   f"{list(x.shape)}")
    n = int(np.prod(x.shape[:k], dtype=np.int64))
    return x.reshape(n, n)[np.arange(n), np.arange(n)].reshape(x.shape[:k])


@_fn("LinSpace")
def lin_space(start, stop, num):
    n = _scalar_int(num, "LinSpace", "num")
    if n <= 0:
        raise InvalidArgumentError(f"LinSpace: Requires num > 0: {n}")
    start, stop = np.asarray(start), np.asarray(stop)
    dt = start.dtype
    if n == 1:
        return np.array([start], dt)
    # TF's kernel: start + step * i for i < num - 1, in the dtype, and the last value exactly stop.
    step = (stop - start) / dt.type(n - 1)
    out = np.empty(n, dt)
    out[:-1] = start + step * np.arange(n - 1, dtype=dt)
    out[-1] = stop
    return out


def _einsum(attrs):
    eq = attrs["equation"]

    def fn(*xs):
        try:
            return np.asarray(np.einsum(eq, *xs, optimize=len(xs) > 1))
        except ValueError as e:
            raise InvalidArgumentError(f"Einsum: {e} (equation '{eq}', input shapes "
                                       f"{[list(np.shape(x)) for x in xs]})") from None
    return fn


register_kernel("Einsum", "CPU")(_einsum)


@_fn("Roll")
def roll(x, shift, axis):
    x = np.asarray(x)
    s, a = np.asarray(shift).reshape(-1), np.asarray(axis).reshape(-1)
    if s.size != a.size:
        raise InvalidArgumentError(f"Roll: shift and axis must have the same size, got {s.size} and {a.size}")
    for v in a:
        if not -x.ndim <= v < x.ndim:
            raise InvalidArgumentError(f"Roll: axis {int(v)} is out of range for a tensor of rank {x.ndim}")
    if not s.size:
        return x.copy()
    return np.roll(x, tuple(int(v) for v in s), tuple(int(v) for v in a))


def _pads(paddings, x, op):
    p = np.asarray(paddings)
    if p.shape != (x.ndim, 2):
        raise InvalidArgumentError(f"{op}: paddings must have shape [{x.ndim}, 2] for an input of rank {x.ndim}, "
                                   f"got {list(p.shape)}")
    return [(int(a), int(b)) for a, b in p]


def _mirror_pad(attrs):
    mode = attrs["mode"]
    limit = 1 if mode == "REFLECT" else 0

    def fn(x, paddings):
        x = np.asarray(x)
        pads = _pads(paddings, x, "MirrorPad")
        for d, (a, b) in zip(x.shape, pads):
            if a < 0 or b < 0 or a > d - limit or b > d - limit:
                raise InvalidArgumentError(f"MirrorPad: paddings must be non-negative and no greater than the "
                                           f"dimension size{' minus 1' if limit else ''} in {mode} mode: "
                                           f"{a}, {b} for a dimension of {d}")
        return np.pad(x, pads, mode="reflect" if mode == "REFLECT" else "symmetric")
    return fn


def _mirror_pad_grad(attrs):
    mode = attrs["mode"]
    off = 1 if mode == "REFLECT" else 0

    def fn(grad, paddings):
        g = np.array(grad, copy=True)
        pads = _pads(paddings, g, "MirrorPadGrad")
        for axis, (a, b) in enumerate(pads):
            n = g.shape[axis] - a - b
            if n < 0:
                raise InvalidArgumentError(f"MirrorPadGrad: paddings {a}, {b} exceed the gradient's dimension "
                                           f"{g.shape[axis]}")
            g = np.moveaxis(g, axis, 0)
            core = g[a:a + n].copy()
            # left pad element k (k = 1..a from the edge) mirrors input index k - 1 + off
            for k in range(1, a + 1):
                core[k - 1 + off] += g[a - k]
            for k in range(1, b + 1):
                core[n - k - off] += g[a + n + k - 1]
            g = np.moveaxis(core, 0, axis)
        return np.ascontiguousarray(g) if g.ndim else g
    return fn


register_kernel("MirrorPad", "CPU")(_mirror_pad)
register_kernel("MirrorPadGrad", "CPU")(_mirror_pad_grad)
