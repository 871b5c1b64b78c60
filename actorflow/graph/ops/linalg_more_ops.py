"""The rest of tf.linalg's dense functions, as TF builds them (tensorflow/python/ops/linalg/linalg_impl.py):
composites over the ops of linalg_ops.py and array_ops (normalize, matvec, matrix_rank, pinv,
tridiagonal_matmul, tridiagonal_solve, lu_solve, lu_reconstruct, lu_matrix_inverse), whose gradients
are those of their parts; and three ops with CPU kernels (kernels/cpu/linalg_more.py): MatrixExponential
(expm, differentiated by the block-matrix identity), MatrixSquareRoot (sqrtm, TF's Kronecker-product
gradient) and Lu (no gradient, as in TF).

Works on the innermost two dimensions, batched over the leading ones, float32 and float64 (actorflow
has no complex dtypes). The tridiagonal functions need a statically known rank.
"""
from __future__ import annotations

import collections

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.op_def import define_op
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.array_ops._args import _op_scope
from actorflow.graph.ops.linalg_ops import _infer_same, adjoint, matrix_solve, matrix_triangular_solve, svd
from actorflow.graph.ops.math_more_ops import norm
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["normalize", "matvec", "matrix_rank", "pinv", "tridiagonal_matmul", "tridiagonal_solve", "expm", "sqrtm",
           "lu", "lu_solve", "lu_reconstruct", "lu_matrix_inverse", "eigh_tridiagonal"]


def normalize(tensor, ord="euclidean", axis=None, name=None):  # noqa: A002 (TF's name)
    """(tensor / norm, norm), the norm kept with its reduced dimensions (tf.linalg.normalize)."""
    with _op_scope(name, "normalize"):
        x = convert_to_tensor(tensor, name="tensor")
        n = math_ops.cast(norm(x, ord=ord, axis=axis, keepdims=True), x.dtype)
        return x / n, n


def matvec(a, b, transpose_a=False, adjoint_a=False, a_is_sparse=False, b_is_sparse=False, name=None):
    """a @ b for a batch of matrices a [..., M, N] and vectors b [..., N] (tf.linalg.matvec); the
    sparsity hints are accepted and ignored."""
    with _op_scope(name, "MatVec"):
        a = convert_to_tensor(a, name="a")
        b = convert_to_tensor(b, dtype=a.dtype, name="b")
        out = math_ops.matmul(a, array_ops.expand_dims(b, -1), transpose_a=transpose_a, adjoint_a=adjoint_a)
        return array_ops.squeeze(out, axis=[-1])


def _eps(dtype):
    return float(np.finfo(dtype.as_numpy_dtype).eps)


def matrix_rank(a, tol=None, validate_args=False, name=None):
    """The number of singular values above `tol` of each innermost matrix, int32 (tf.linalg.matrix_rank);
    by default tol = max(singular values) * max(M, N) * eps, as TF."""
    with _op_scope(name, "matrix_rank"):
        a = convert_to_tensor(a, name="a")
        s = svd(a, compute_uv=False)
        if tol is None:
            m, n = a.shape.dims[-2:] if a.shape.ndims else (None, None)
            if m is not None and n is not None:
                size = float(max(m, n))
            else:
                size = math_ops.cast(math_ops.reduce_max(array_ops.shape(a)[-2:]), a.dtype)
            tol = size * _eps(a.dtype) * math_ops.reduce_max(s, axis=-1, keepdims=True)
        else:
            tol = convert_to_tensor(tol, dtype=a.dtype, name="tol")
        return math_ops.reduce_sum(math_ops.cast(s > tol, dtypes.int32), axis=-1)


def pinv(a, rcond=None, validate_args=False, name=None):
    """The Moore-Penrose pseudo-inverse of each innermost matrix through its SVD, dropping singular values
    at or below rcond * max(singular values) (tf.linalg.pinv; default rcond 10 * max(M, N) * eps)."""
    with _op_scope(name, "pinv"):
        a = convert_to_tensor(a, name="a")
        if a.dtype not in (dtypes.float32, dtypes.float64):
            raise ValueError(f"pinv: a must be float32 or float64, got {a.dtype.name} ('{a.name}')")
        if rcond is None:
            m, n = a.shape.dims[-2:] if a.shape.ndims else (None, None)
            if m is not None and n is not None:
                size = float(max(m, n))
            else:
                size = math_ops.cast(math_ops.reduce_max(array_ops.shape(a)[-2:]), a.dtype)
            rcond = 10.0 * size * _eps(a.dtype)
        rcond = convert_to_tensor(rcond, dtype=a.dtype, name="rcond")
        s, u, v = svd(a, full_matrices=False, compute_uv=True)
        cutoff = rcond * math_ops.reduce_max(s, axis=-1)
        s = math_ops.where_v2(s > array_ops.expand_dims(cutoff, -1), s, np.array(np.inf, a.dtype.as_numpy_dtype))
        return math_ops.matmul(v / array_ops.expand_dims(s, -2), u, adjoint_b=True)


# ---------------------------------------------------------------------------------------------
# Tridiagonal systems
# ---------------------------------------------------------------------------------------------

def _pad_last(x, before, after, axis=-1):
    r = x.shape.ndims
    pads = [[0, 0] for _ in range(r)]
    pads[axis % r] = [before, after]
    return array_ops.pad(x, pads)


def _three_diagonals(diagonals, fmt, what):
    """(superdiag, maindiag, subdiag), each [..., M] (superdiag's last and subdiag's first entry unused)."""
    if fmt == "compact":
        d = convert_to_tensor(diagonals, name="diagonals")
        if d.shape.ndims is None:
            raise ValueError(f"{what}: diagonals must have a known rank")
        if d.shape.ndims < 2:
            raise ValueError(f"Expected diagonals to have rank at least 2, got {d.shape.ndims}")
        if d.shape.dims[-2] is not None and d.shape.dims[-2] != 3:
            raise ValueError(f"Expected 3 diagonals got {d.shape.dims[-2]}")
        return d[..., 0, :], d[..., 1, :], d[..., 2, :]
    if fmt == "sequence":
        if not isinstance(diagonals, (tuple, list)) or len(diagonals) != 3:
            raise ValueError("Expected diagonals to be a sequence of length 3.")
        sup, main, sub = (convert_to_tensor(t, name=n) for t, n in zip(diagonals, ("superdiag", "maindiag",
                                                                                    "subdiag")))
        m = main.shape.dims[-1] if main.shape.ndims else None

        def pad(t, label, before, after):
            n = t.shape.dims[-1] if t.shape.ndims else None
            if not n or n == m:
                return t
            if m is not None and n == m - 1:
                return _pad_last(t, before, after)
            raise ValueError(f"Expected {label} to be have length {m} or {m - 1 if m else None}, got {n}.")
        return pad(sup, "superdiagonal", 0, 1), main, pad(sub, "subdiagonal", 1, 0)
    if fmt == "matrix":
        x = convert_to_tensor(diagonals, name="diagonals")
        if x.shape.ndims is None or x.shape.ndims < 2:
            raise ValueError(f"{what}: diagonals must be a batch of matrices, got shape {x.shape}")
        m1, m2 = x.shape.dims[-1], x.shape.dims[-2]
        if m1 and m2 and m1 != m2:
            raise ValueError(f"Expected last two dimensions of diagonals to be same, got {m1} and {m2}")
        main = array_ops.matrix_diag_part(x)
        sup = _pad_last(array_ops.matrix_diag_part(x[..., :-1, 1:]), 0, 1)
        sub = _pad_last(array_ops.matrix_diag_part(x[..., 1:, :-1]), 1, 0)
        return sup, main, sub
    raise ValueError(f"Unrecognized diagonals_format: {fmt}")


def _shift(x, up):
    """x [..., M, K] moved one row: up gives row i = x[i + 1] (zero last row), else x[i - 1]."""
    if up:
        return _pad_last(x[..., 1:, :], 0, 1, axis=-2)
    return _pad_last(x[..., :-1, :], 1, 0, axis=-2)


def tridiagonal_matmul(diagonals, rhs, diagonals_format="compact", name=None):
    """A @ rhs for tridiagonal A [..., M, M] given by its three diagonals and rhs [..., M, N]
    (tf.linalg.tridiagonal_matmul): y[i] = sub[i] x[i-1] + main[i] x[i] + super[i] x[i+1];
    `diagonals_format` 'compact' ([..., 3, M]: super, main, sub), 'sequence' or 'matrix', as TF."""
    with _op_scope(name, "tridiagonal_matmul"):
        sup, main, sub = _three_diagonals(diagonals, diagonals_format, "tridiagonal_matmul")
        x = convert_to_tensor(rhs, dtype=main.dtype, name="rhs")
        if x.shape.ndims is None or x.shape.ndims < 2:
            raise ValueError(f"tridiagonal_matmul: rhs must be a batch of matrices [..., M, N], got {x.shape}")

        def col(d):
            return array_ops.expand_dims(d, -1)
        return col(main) * x + col(sup) * _shift(x, True) + col(sub) * _shift(x, False)


def _dense_tridiagonal(sup, main, sub):
    return (array_ops.matrix_diag(main)
            + _pad_last(_pad_last(array_ops.matrix_diag(sup[..., :-1]), 0, 1, axis=-2), 1, 0)
            + _pad_last(_pad_last(array_ops.matrix_diag(sub[..., 1:]), 1, 0, axis=-2), 0, 1))


def tridiagonal_solve(diagonals, rhs, diagonals_format="compact", transpose_rhs=False, conjugate_rhs=False,
                      name=None, partial_pivoting=True, perturb_singular=False):
    """X with A X = rhs for tridiagonal A given by its diagonals (tf.linalg.tridiagonal_solve), rhs
    [..., M] or [..., M, K]; `diagonals_format` as tridiagonal_matmul. Differs from TF: solved as the
    dense system (matrix_solve, O(M^3) rather than O(M)), with LU's partial pivoting whatever
    `partial_pivoting` says (the solution is the same); a singular matrix fails the step, and
    perturb_singular is not supported."""
    if perturb_singular and not partial_pivoting:
        raise ValueError("partial_pivoting must be True if perturb_singular is.")
    if perturb_singular:
        raise NotImplementedError("tridiagonal_solve: perturb_singular=True is not supported by actorflow")
    with _op_scope(name, "tridiagonal_solve"):
        sup, main, sub = _three_diagonals(diagonals, diagonals_format, "tridiagonal_solve")
        b = convert_to_tensor(rhs, dtype=main.dtype, name="rhs")
        dr, br = main.shape.ndims + 1, b.shape.ndims
        if br is None:
            raise ValueError("tridiagonal_solve: rhs must have a known rank")
        if br != dr and br != dr - 1:
            raise ValueError(f"Expected the rank of rhs to be {dr - 1} or {dr}, got {br}")
        if not main.shape[:-1].is_compatible_with(b.shape[:dr - 2]):
            raise ValueError(f"Batch shapes {main.shape[:-1]} and {b.shape[:dr - 2]} are incompatible")
        vector = br == dr - 1
        if vector:
            b = array_ops.expand_dims(b, -1)
        elif transpose_rhs:
            b = adjoint(b)
        m, k = main.shape.dims[-1], b.shape.dims[-2]
        if m is not None and k is not None and m != k:
            raise ValueError(f"Expected number of left-hand sided and right-hand sides to be equal, got {m} and {k}")
        x = matrix_solve(_dense_tridiagonal(sup, main, sub), b)
        return array_ops.squeeze(x, axis=[-1]) if vector else x


# ---------------------------------------------------------------------------------------------
# Matrix functions and the LU factorization
# ---------------------------------------------------------------------------------------------

def _infer_lu(inputs, attrs):
    [(dt, shape)] = _infer_same(inputs, attrs)
    idx = attrs.get("output_idx_type", dtypes.int32)
    return [(dt, shape), (dtypes.as_dtype(idx), TensorShape(None) if shape.ndims is None else shape[:-1])]


MatrixExponential = define_op("MatrixExponential", _infer_same)
MatrixSquareRoot = define_op("MatrixSquareRoot", _infer_same)
Lu = define_op("Lu", _infer_lu)


def _static_order(x, what):
    n = x.shape.dims[-1] if x.shape.ndims else None
    if n is None:
        raise ValueError(f"the gradient of {what} needs a statically known matrix size, '{x.name}' has {x.shape}")
    return n


@MatrixExponential.gradient
def _matrix_exponential_grad(op, grad):
    # d expm(A)[E] is the upper right block of expm([[A, E], [0, A]]); the adjoint map takes G to the
    # upper right block of expm([[A^T, G], [0, A^T]]).
    a = op.inputs[0]
    n = _static_order(a, "expm")
    at = adjoint(a)
    g = convert_to_tensor(grad)
    top = array_ops.concat([at, g], -1)
    bottom = array_ops.concat([array_ops.zeros_like(at), at], -1)
    big = MatrixExponential(array_ops.concat([top, bottom], -2))
    return [big[..., :n, n:]]


def _kron(b1, b2):
    """Kronecker products of two batches of square matrices [..., n, n] -> [..., n*n, n*n]."""
    n = _static_order(b1, "sqrtm")
    prod = (array_ops.expand_dims(array_ops.expand_dims(b1, -1), -3)
            * array_ops.expand_dims(array_ops.expand_dims(b2, -3), -2))
    return array_ops.reshape(prod, array_ops.concat([array_ops.shape(prod)[:-4], [n * n, n * n]], 0))


@MatrixSquareRoot.gradient
def _matrix_square_root_grad(op, grad):
    # TF's: R dR + dR R = dA, solved for the adjoint as one (n^2 x n^2) linear system.
    r = op.outputs[0]
    n = _static_order(r, "sqrtm")
    eye = array_ops.eye(n, dtype=r.dtype) + array_ops.zeros_like(r)
    ksum = _kron(eye, adjoint(r)) + _kron(r, eye)
    batch = array_ops.shape(r)[:-2]
    vec_da = array_ops.reshape(adjoint(convert_to_tensor(grad)), array_ops.concat([batch, [n * n, 1]], 0))
    vec = matrix_solve(ksum, vec_da)
    return [adjoint(array_ops.reshape(vec, array_ops.shape(r)))]


def expm(input, name=None):  # noqa: A002 (TF's name)
    """exp of each innermost square matrix (tf.linalg.expm): scaling and squaring with a Pade
    approximant (scipy's, where TF has its own Pade 3/5/7/9/13 choice; the two agree to rounding).
    float32 is computed in float64 and rounded. The gradient is exact: the block-matrix identity."""
    with _op_scope(name, "matrix_exponential") as sc:
        return sc.op(MatrixExponential, convert_to_tensor(input, name="input"))


def sqrtm(input, name=None):  # noqa: A002 (TF's name)
    """The principal square root of each innermost square matrix (tf.linalg.sqrtm,
    tf.matrix_square_root), by the Schur method; where no real square root exists (a negative real
    eigenvalue) the result is NaN. float32 is computed in float64 and rounded."""
    with _op_scope(name, "MatrixSquareRoot") as sc:
        return sc.op(MatrixSquareRoot, convert_to_tensor(input, name="input"))


LuResult = collections.namedtuple("Lu", ["lu", "p"])


def lu(input, output_idx_type=dtypes.int32, name=None):  # noqa: A002 (TF's name)
    """LU factorization with partial pivoting of each innermost square matrix (tf.linalg.lu): (lu, p)
    with lu holding L (unit diagonal, below) and U (on and above the diagonal), and p the row
    permutation with input[..., p, :] = L U. A singular matrix fails the step ("Input is not
    invertible."); no gradient (af.gradients raises LookupError, as TF)."""
    with _op_scope(name, "Lu") as sc:
        return LuResult(*sc.op(Lu, convert_to_tensor(input, name="input"),
                               output_idx_type=dtypes.as_dtype(output_idx_type)))


def _lower_unit(lower_upper):
    return array_ops.matrix_set_diag(array_ops.matrix_band_part(lower_upper, -1, 0),
                                     array_ops.ones_like(array_ops.matrix_diag_part(lower_upper)))


def _perm_matrix(perm, dtype):
    """P with P[..., i, perm[i]] = 1, so P @ x = x[perm] (a matmul where TF gathers: the same values)."""
    perm = convert_to_tensor(perm, name="perm")
    if perm.dtype not in (dtypes.int32, dtypes.int64):
        raise ValueError(f"perm must be int32 or int64, got {perm.dtype.name} ('{perm.name}')")
    return array_ops.one_hot(perm, array_ops.shape(perm)[-1], dtype=dtype)


def lu_reconstruct(lower_upper, perm, validate_args=False, name=None):
    """The matrix whose lu() is (lower_upper, perm): L U with its rows put back (tf.linalg.lu_reconstruct)."""
    with _op_scope(name, "lu_reconstruct"):
        lu_ = convert_to_tensor(lower_upper, name="lower_upper")
        x = math_ops.matmul(_lower_unit(lu_), array_ops.matrix_band_part(lu_, 0, -1))
        return math_ops.matmul(_perm_matrix(perm, lu_.dtype), x, transpose_a=True)


def lu_solve(lower_upper, perm, rhs, validate_args=False, name=None):
    """X with A X = rhs given lu(A) = (lower_upper, perm) (tf.linalg.lu_solve); batch dimensions
    broadcast."""
    with _op_scope(name, "lu_solve"):
        lu_ = convert_to_tensor(lower_upper, name="lower_upper")
        rhs = convert_to_tensor(rhs, dtype=lu_.dtype, name="rhs")
        permuted = math_ops.matmul(_perm_matrix(perm, lu_.dtype), rhs)
        y = matrix_triangular_solve(_lower_unit(lu_), permuted, lower=True)
        return matrix_triangular_solve(lu_, y, lower=False)


def lu_matrix_inverse(lower_upper, perm, validate_args=False, name=None):
    """The inverse of A given lu(A) = (lower_upper, perm) (tf.linalg.lu_matrix_inverse)."""
    with _op_scope(name, "lu_matrix_inverse"):
        lu_ = convert_to_tensor(lower_upper, name="lower_upper")
        s = array_ops.shape(lu_)
        return lu_solve(lu_, perm, array_ops.eye(s[-1], batch_shape=s[:-2], dtype=lu_.dtype))


def eigh_tridiagonal(alpha, beta, eigvals_only=True, select="a", select_range=None, tol=None, name=None):
    """Eigenvalues (ascending), and with eigvals_only=False eigenvectors (columns), of the symmetric
    tridiagonal matrix with diagonal alpha [n] and off-diagonal beta [n-1] (tf.linalg.eigh_tridiagonal).
    select 'a' (all), 'i' (indices select_range[0]..select_range[1], inclusive) or 'v' (eigenvalues in
    (select_range[0], select_range[1]]). Differs from TF: computed by the dense symmetric
    eigensolver (self_adjoint_eig) rather than bisection and inverse iteration, so `tol` is ignored,
    eigenvectors' signs may differ, and the gradient is the exact eigenvalue derivative; real inputs only."""
    from actorflow.graph.ops.array_ops import boolean_mask
    from actorflow.graph.ops.linalg_ops import self_adjoint_eig
    if select not in ("a", "i", "v"):
        raise ValueError(f"select must be one of 'a', 'i' or 'v', got {select!r}")
    if select != "a" and select_range is None:
        raise ValueError(f"select={select!r} needs a select_range")
    with _op_scope(name, "eigh_tridiagonal"):
        alpha = convert_to_tensor(alpha, name="alpha")
        beta = convert_to_tensor(beta, dtype=alpha.dtype, name="beta")
        if alpha.shape.ndims not in (None, 1) or beta.shape.ndims not in (None, 1):
            raise ValueError(f"alpha and beta must be vectors, got shapes {alpha.shape} and {beta.shape}")
        zero = array_ops.zeros_like(alpha[:1])
        dense = _dense_tridiagonal(array_ops.concat([beta, zero], 0), alpha, array_ops.concat([zero, beta], 0))
        e, v = self_adjoint_eig(dense)
        if select == "i":
            lo, hi = select_range
            e, v = e[lo:hi + 1], v[:, lo:hi + 1]
        elif select == "v":
            lo, hi = (convert_to_tensor(t, dtype=alpha.dtype) for t in select_range)
            keep = math_ops.logical_and(e > lo, e <= hi)
            e = boolean_mask(e, keep)
            v = adjoint(boolean_mask(adjoint(v), keep))
        return e if eigvals_only else (e, v)
