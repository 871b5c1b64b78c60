"""Dense linear algebra (graph/ops/linalg_ops.py): numpy.linalg's batched LAPACK calls, and BLAS trsm
through scipy for triangular solves (which, as TF's, divide by a zero diagonal rather than fail).
Failures carry TF's messages; the runtime adds the op's name."""
from __future__ import annotations

import numpy as np
from scipy.linalg import blas

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import MAC_NS, register_kernel

_NOT_PD = "Cholesky decomposition was not successful. The input might not be valid."


def _cube_cost(x, *rest):
    """Multiply-adds of an O(n^3) factorization of every innermost matrix."""
    x = np.asarray(x)
    n = x.shape[-1] if x.ndim >= 2 else 1
    m = x.shape[-2] if x.ndim >= 2 else 1
    k = np.asarray(rest[0]).shape[-1] if rest and np.ndim(rest[0]) >= 2 else 0
    return int(np.prod(x.shape[:-2], dtype=np.int64)) * (m * n * min(m, n) + m * n * k) + 1


def _matrices(x, op, square=True, what="input"):
    x = np.asarray(x)
    if x.ndim < 2:
        raise InvalidArgumentError(f"{op}: {what} must have rank >= 2, got shape {list(x.shape)}")
    if square and x.shape[-1] != x.shape[-2]:
        raise InvalidArgumentError(f"{op}: {what} must be a batch of square matrices, got shape {list(x.shape)}")
    if x.dtype not in (np.float32, np.float64):
        raise InvalidArgumentError(f"{op}: {what} must be float32 or float64, got {x.dtype}")
    return x


def _rhs(a, b, op):
    b = np.asarray(b)
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise InvalidArgumentError(f"{op}: Input matrix and right-hand side must have the same number of rows: "
                                   f"matrix {list(a.shape)}, rhs {list(b.shape)}")
    return b


def _t(x):
    return np.swapaxes(x, -1, -2)


@register_kernel("MatrixInverse", "CPU", cost=_cube_cost, unit_ns=MAC_NS)
def _matrix_inverse(attrs):
    adjoint = bool(attrs.get("adjoint", False))

    def fn(x):
        x = _matrices(x, "MatrixInverse")
        try:
            out = np.linalg.inv(x)
        except np.linalg.LinAlgError:
            raise InvalidArgumentError("Input is not invertible.") from None
        return (_t(out) if adjoint else out).astype(x.dtype, copy=False)
    return fn


@register_kernel("MatrixDeterminant", "CPU", cost=_cube_cost, unit_ns=MAC_NS)
def _matrix_determinant(attrs):
    def fn(x):
        x = _matrices(x, "MatrixDeterminant")
        return np.asarray(np.linalg.det(x), dtype=x.dtype)
    return fn


@register_kernel("LogMatrixDeterminant", "CPU", cost=_cube_cost, unit_ns=MAC_NS)
def _log_matrix_determinant(attrs):
    def fn(x):
        x = _matrices(x, "LogMatrixDeterminant")
        sign, logabs = np.linalg.slogdet(x)
        return np.asarray(sign, dtype=x.dtype), np.asarray(logabs, dtype=x.dtype)
    return fn


def _cholesky(x):
    """numpy's factor reads only the lower triangle, as TF's does."""
    try:
        return np.linalg.cholesky(x)
    except np.linalg.LinAlgError:
        raise InvalidArgumentError(_NOT_PD) from None


@register_kernel("Cholesky", "CPU", cost=_cube_cost, unit_ns=MAC_NS)
def _cholesky_kernel(attrs):
    def fn(x):
        x = _matrices(x, "Cholesky")
        return _cholesky(x).astype(x.dtype, copy=False)
    return fn


@register_kernel("MatrixSolve", "CPU", cost=_cube_cost, unit_ns=MAC_NS)
def _matrix_solve(attrs):
    adjoint = bool(attrs.get("adjoint", False))

    def fn(a, b):
        a = _matrices(a, "MatrixSolve", what="matrix")
        b = _rhs(a, b, "MatrixSolve")
        if a.shape[:-2] != b.shape[:-2]:
            raise InvalidArgumentError(f"MatrixSolve: matrix and rhs must have the same batch dimensions: "
                                       f"matrix {list(a.shape)}, rhs {list(b.shape)}")
        try:
            return np.linalg.solve(_t(a) if adjoint else a, b).astype(a.dtype, copy=False)
        except np.linalg.LinAlgError:
            raise InvalidArgumentError("Input matrix is not invertible.") from None
    return fn


def _substitute(a, b, lower, trans):
    """Many small triangular solves at once: forward (or back) substitution over the rows, each step
    one numpy call for the whole batch; as trsm, no pivoting and no check of the diagonal."""
    t = _t(a) if trans else a
    forward = lower != trans
    x = np.empty(b.shape, dtype=a.dtype)
    n = a.shape[-1]
    for i in (range(n) if forward else range(n - 1, -1, -1)):
        done = slice(0, i) if forward else slice(i + 1, n)
        acc = b[..., i, :] - np.matmul(t[..., i:i + 1, done], x[..., done, :])[..., 0, :]
        x[..., i, :] = acc / t[..., i, i, None]
    return x


def _trsm(a, b, lower, trans):
    """Batched triangular solves (a and b already broadcast to one batch shape)."""
    count = int(np.prod(a.shape[:-2], dtype=np.int64))
    if count > 8 and a.shape[-1] <= 32:
        return _substitute(a, b, lower, trans)      # a Python loop over rows, not over matrices
    f = blas.get_blas_funcs("trsm", (a, b))
    out = np.empty(b.shape, dtype=a.dtype)
    fa = a.reshape((-1,) + a.shape[-2:])
    fb = b.reshape((-1,) + b.shape[-2:])
    fo = out.reshape((-1,) + b.shape[-2:])
    for i in range(fa.shape[0]):
        fo[i] = f(1.0, fa[i], fb[i], side=0, lower=int(lower), trans_a=int(trans), diag=0)
    return out


@register_kernel("MatrixTriangularSolve", "CPU", cost=_cube_cost, unit_ns=MAC_NS)
def _matrix_triangular_solve(attrs):
    lower, adjoint = bool(attrs.get("lower", True)), bool(attrs.get("adjoint", False))

    def fn(a, b):
        a = _matrices(a, "MatrixTriangularSolve", what="matrix")
        b = _rhs(a, b, "MatrixTriangularSolve")
        try:
            batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            raise InvalidArgumentError(f"MatrixTriangularSolve: batch dimensions of matrix {list(a.shape)} and rhs "
                                       f"{list(b.shape)} do not broadcast") from None
        a = np.broadcast_to(a, batch + a.shape[-2:])
        b = np.broadcast_to(b.astype(a.dtype, copy=False), batch + b.shape[-2:])
        if 0 in b.shape:
            return np.zeros(b.shape, dtype=a.dtype)
        with np.errstate(divide="ignore", invalid="ignore"):
            return _trsm(a, b, lower, adjoint)
    return fn


@register_kernel("SelfAdjointEigV2", "CPU", cost=_cube_cost, unit_ns=MAC_NS)
def _self_adjoint_eig(attrs):
    compute_v = bool(attrs.get("compute_v", True))

    def fn(x):
        x = _matrices(x, "SelfAdjointEigV2")
        try:
            if not compute_v:
                return np.linalg.eigvalsh(x, UPLO="L").astype(x.dtype, copy=False), np.zeros((0,), x.dtype)
            e, v = np.linalg.eigh(x, UPLO="L")
        except np.linalg.LinAlgError:
            raise InvalidArgumentError("Self-adjoint eigen decomposition was not successful. The input might "
                                       "not be valid.") from None
        return e.astype(x.dtype, copy=False), v.astype(x.dtype, copy=False)
    return fn


@register_kernel("Svd", "CPU", cost=_cube_cost, unit_ns=MAC_NS)
def _svd(attrs):
    compute_uv, full = bool(attrs.get("compute_uv", True)), bool(attrs.get("full_matrices", False))

    def fn(x):
        x = _matrices(x, "Svd", square=False)
        try:
            if not compute_uv:
                empty = np.zeros((0,), x.dtype)
                return np.linalg.svd(x, compute_uv=False).astype(x.dtype, copy=False), empty, empty
            u, s, vh = np.linalg.svd(x, full_matrices=full)
        except np.linalg.LinAlgError:
            raise InvalidArgumentError("SVD decomposition was not successful. The input might not be valid.") \
                from None
        return s.astype(x.dtype, copy=False), u.astype(x.dtype, copy=False), np.ascontiguousarray(_t(vh)).astype(
            x.dtype, copy=False)
    return fn


@register_kernel("MatrixSolveLs", "CPU", cost=_cube_cost, unit_ns=MAC_NS)
def _matrix_solve_ls(attrs):
    fast = bool(attrs.get("fast", True))

    def fn(a, b, l2):
        a = _matrices(a, "MatrixSolveLs", square=False, what="matrix")
        b = np.asarray(b)
        if b.ndim < 2 or b.shape[-2] != a.shape[-2] or b.shape[:-2] != a.shape[:-2]:
            raise InvalidArgumentError(f"MatrixSolveLs: Input matrix and right-hand side must have the same number "
                                       f"of rows and batch dimensions: matrix {list(a.shape)}, rhs {list(b.shape)}")
        lam = float(np.asarray(l2).reshape(-1)[0])
        m, n = a.shape[-2:]
        if fast:
            # The regularized normal equations of the first (m >= n) or second kind, as TF's fast path.
            if m >= n:
                chol = _cholesky(_t(a) @ a + lam * np.eye(n, dtype=a.dtype))
                y = _trsm(chol, _t(a) @ b, True, False)
                return _trsm(chol, y, True, True).astype(a.dtype, copy=False)
            chol = _cholesky(a @ _t(a) + lam * np.eye(m, dtype=a.dtype))
            y = _trsm(chol, b, True, False)
            return (_t(a) @ _trsm(chol, y, True, True)).astype(a.dtype, copy=False)
        out = np.empty(a.shape[:-2] + (n, b.shape[-1]), dtype=a.dtype)
        fa, fb = a.reshape((-1, m, n)), b.reshape((-1, m, b.shape[-1]))
        fo = out.reshape((-1, n, b.shape[-1]))
        for i in range(fa.shape[0]):
            fo[i] = np.linalg.lstsq(fa[i], fb[i], rcond=None)[0]
        return out
    return fn
