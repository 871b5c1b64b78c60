"""Matrix functions and LU (graph/ops/linalg_more_ops.py) through scipy.linalg: expm (scaling and squaring,
Pade 13), sqrtm (Schur), lu_factor (LAPACK getrf, partial pivoting as TF's Eigen PartialPivLU).
float32 inputs are computed in float64 and rounded back."""
from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.cpu.linalg import _cube_cost, _matrices
from actorflow.kernels.registry import MAC_NS, register_kernel


def _each(x, fn):
    """fn over every innermost matrix of x."""
    flat = x.reshape((-1,) + x.shape[-2:])
    return [fn(m) for m in flat]


@register_kernel("MatrixExponential", "CPU", cost=_cube_cost, unit_ns=MAC_NS)
def _matrix_exponential(attrs):
    def fn(x):
        x = _matrices(x, "MatrixExponential")
        if x.shape[-1] == 0:
            return x.copy()
        out = np.stack(_each(x.astype(np.float64), scipy.linalg.expm)) if x.size else x.astype(np.float64)
        return out.reshape(x.shape).astype(x.dtype)
    return fn


def _sqrtm(m):
    r = scipy.linalg.sqrtm(m)
    if np.iscomplexobj(r):
        # A real square root exists only when the imaginary part is rounding error.
        r = np.where(np.abs(r.imag) <= 1e-10 * max(1.0, float(np.max(np.abs(r)))), r.real, np.nan)
    return r


@register_kernel("MatrixSquareRoot", "CPU", cost=_cube_cost, unit_ns=MAC_NS)
def _matrix_square_root(attrs):
    def fn(x):
        x = _matrices(x, "MatrixSquareRoot")
        if x.size == 0:
            return x.copy()
        out = np.stack(_each(x.astype(np.float64), _sqrtm))
        return out.reshape(x.shape).astype(x.dtype)
    return fn


def _lu(m):
    with warnings.catch_warnings():      # a singular matrix is reported as TF's error below
        warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
        lu, piv = scipy.linalg.lu_factor(m, check_finite=False)
    if np.any(np.diag(lu) == 0):
        raise InvalidArgumentError("Input is not invertible.")
    perm = np.arange(m.shape[0])
    for i, p in enumerate(piv):        # LAPACK's row swaps, applied in order, as one permutation
        perm[i], perm[p] = perm[p], perm[i]
    return lu, perm


@register_kernel("Lu", "CPU", cost=_cube_cost, unit_ns=MAC_NS)
def _lu_kernel(attrs):
    idx = np.dtype(attrs.get("output_idx_type", np.int32))

    def fn(x):
        x = _matrices(x, "Lu")
        n = x.shape[-1]
        if x.size == 0:
            return x.copy(), np.zeros(x.shape[:-1], idx)
        pairs = _each(x, _lu)
        lu = np.stack([p[0] for p in pairs]).reshape(x.shape).astype(x.dtype)
        perm = np.stack([p[1] for p in pairs]).reshape(x.shape[:-2] + (n,)).astype(idx)
        return lu, perm
    return fn
