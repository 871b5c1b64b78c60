"""Dense linear algebra: MatrixInverse, MatrixDeterminant, LogMatrixDeterminant, Cholesky, MatrixSolve,
MatrixTriangularSolve, SelfAdjointEigV2, Svd, MatrixSolveLs, and the gradient of Qr (defined in
misc_ops), with TF's gradients (tensorflow/python/ops/linalg_grad.py); and the composites TF builds
from them: cholesky_solve, logdet, matrix_solve_ls (fast=True), self_adjoint_eigvals.

Every op works on the innermost two dimensions, batched over the leading ones, for float32 and
float64 (actorflow has no complex dtypes, so an adjoint is a transpose). The public names are
gathered in actorflow/linalg.py (tf.linalg.*) and actorflow/__init__.py (the TF 1.x top-level ones).
"""
from __future__ import annotations

import collections

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.array_ops._args import _op_scope
from actorflow.graph.ops.infer import broadcast_shapes
from actorflow.graph.ops.misc_ops import Qr
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["matrix_inverse", "matrix_determinant", "log_matrix_determinant", "cholesky", "cholesky_solve",
           "matrix_solve", "matrix_triangular_solve", "logdet", "self_adjoint_eig", "self_adjoint_eigvals", "svd",
           "matrix_solve_ls", "adjoint"]

_FLOATS = (dtypes.float32, dtypes.float64)


# ---------------------------------------------------------------------------------------------
# Shape and dtype inference
# ---------------------------------------------------------------------------------------------

def _matrix(x, what="input", square=False):
    """The dims of a float32/float64 tensor of rank >= 2 (None when the rank is unknown)."""
    if x.dtype not in _FLOATS:
        raise InferenceError(f"{what} must be float32 or float64, got {x.dtype.name} ('{x.name}')")
    d = None if x.shape.dims is None else list(x.shape.dims)
    if d is None:
        return None
    if len(d) < 2:
        raise InferenceError(f"{what} must have rank >= 2, but '{x.name}' has shape {x.shape}")
    if square and d[-1] is not None and d[-2] is not None and d[-1] != d[-2]:
        raise InferenceError(f"{what} must be a batch of square matrices, but '{x.name}' has shape {x.shape}")
    return d


def _merge(a, b):
    return b if a is None else a


def _infer_same(inputs, attrs):
    _matrix(inputs[0], square=True)
    return [(inputs[0].dtype, inputs[0].shape)]


def _infer_det(inputs, attrs):
    d = _matrix(inputs[0], square=True)
    return [(inputs[0].dtype, TensorShape(None if d is None else d[:-2]))]


def _infer_slogdet(inputs, attrs):
    (out,) = _infer_det(inputs, attrs)
    return [out, out]


def _rhs(matrix, rhs):
    """Checks a (matrix, rhs) pair: same dtype, rhs of rank >= 2 with as many rows as the matrix."""
    dm = _matrix(matrix, "matrix", square=True)
    if rhs.dtype is not matrix.dtype:
        raise InferenceError(f"rhs must have the matrix's dtype {matrix.dtype.name}, got {rhs.dtype.name}")
    dr = _matrix(rhs, "rhs")
    if dm is not None and dr is not None and dm[-1] is not None and dr[-2] is not None and dm[-1] != dr[-2]:
        raise InferenceError(f"Input matrix and right-hand side must have the same number of rows: matrix "
                             f"{matrix.shape}, rhs {rhs.shape}")
    return dm, dr


def _infer_solve(inputs, attrs):
    matrix, rhs = inputs
    dm, dr = _rhs(matrix, rhs)
    if dm is None or dr is None:
        return [(matrix.dtype, TensorShape(None))]
    bm, br = TensorShape(dm[:-2]), TensorShape(dr[:-2])
    if not bm.is_compatible_with(br):
        raise InferenceError(f"matrix {matrix.shape} and rhs {rhs.shape} must have the same batch dimensions")
    return [(matrix.dtype, bm.merge_with(br).concatenate([_merge(dm[-1], dr[-2]), dr[-1]]))]


def _infer_triangular_solve(inputs, attrs):
    matrix, rhs = inputs
    dm, dr = _rhs(matrix, rhs)
    if dm is None or dr is None:
        return [(matrix.dtype, TensorShape(None))]
    try:
        batch = broadcast_shapes(TensorShape(dm[:-2]), TensorShape(dr[:-2]))
    except InferenceError:
        raise InferenceError(f"batch dimensions of matrix {matrix.shape} and rhs {rhs.shape} do not broadcast") \
            from None
    return [(matrix.dtype, batch.concatenate([_merge(dm[-1], dr[-2]), dr[-1]]))]


def _infer_eig(inputs, attrs):
    x = inputs[0]
    d = _matrix(x, square=True)
    if d is None:
        e = v = TensorShape(None)
    else:
        n = _merge(d[-1], d[-2])
        e, v = TensorShape(d[:-2] + [n]), TensorShape(d[:-2] + [n, n])
    return [(x.dtype, e), (x.dtype, v if attrs.get("compute_v", True) else TensorShape([0]))]


def _infer_svd(inputs, attrs):
    x = inputs[0]
    d = _matrix(x)
    compute_uv, full = attrs.get("compute_uv", True), attrs.get("full_matrices", False)
    if d is None:
        s = u = v = TensorShape(None)
    else:
        m, n = d[-2], d[-1]
        p = None if m is None or n is None else min(m, n)
        s = TensorShape(d[:-2] + [p])
        u = TensorShape(d[:-2] + [m, m if full else p])
        v = TensorShape(d[:-2] + [n, n if full else p])
    if not compute_uv:
        u = v = TensorShape([0])     # TF's empty outputs
    return [(x.dtype, s), (x.dtype, u), (x.dtype, v)]


def _infer_solve_ls(inputs, attrs):
    matrix, rhs, l2 = inputs
    dm = _matrix(matrix, "matrix")
    if rhs.dtype is not matrix.dtype:
        raise InferenceError(f"rhs must have the matrix's dtype {matrix.dtype.name}, got {rhs.dtype.name}")
    dr = _matrix(rhs, "rhs")
    if l2.dtype is not dtypes.float64 or l2.shape.ndims not in (None, 0):
        raise InferenceError(f"l2_regularizer must be a float64 scalar, got {l2.dtype.name} {l2.shape}")
    if dm is None or dr is None:
        return [(matrix.dtype, TensorShape(None))]
    if dm[-2] is not None and dr[-2] is not None and dm[-2] != dr[-2]:
        raise InferenceError(f"Input matrix and right-hand side must have the same number of rows: matrix "
                             f"{matrix.shape}, rhs {rhs.shape}")
    return [(matrix.dtype, TensorShape(dm[:-2]).merge_with(TensorShape(dr[:-2])).concatenate([dm[-1], dr[-1]]))]


MatrixInverse = define_op("MatrixInverse", _infer_same)
MatrixDeterminant = define_op("MatrixDeterminant", _infer_det)
LogMatrixDeterminant = define_op("LogMatrixDeterminant", _infer_slogdet)
Cholesky = define_op("Cholesky", _infer_same)
MatrixSolve = define_op("MatrixSolve", _infer_solve)
MatrixTriangularSolve = define_op("MatrixTriangularSolve", _infer_triangular_solve)
SelfAdjointEigV2 = define_op("SelfAdjointEigV2", _infer_eig)
Svd = define_op("Svd", _infer_svd)
MatrixSolveLs = define_op("MatrixSolveLs", _infer_solve_ls)


# ---------------------------------------------------------------------------------------------
# Helpers for the gradients
# ---------------------------------------------------------------------------------------------

def adjoint(matrix, name=None):
    """Swaps the innermost two dimensions (tf.linalg.adjoint; actorflow has no complex dtypes, so no
    conjugation). Works for an unknown rank too."""
    with _op_scope(name, "adjoint") as sc:
        x = convert_to_tensor(matrix, name="matrix")
        r = x.shape.ndims
        if r is not None:
            if r < 2:
                raise ValueError(f"adjoint needs a tensor of rank >= 2, got shape {x.shape} ('{x.name}')")
            return array_ops.transpose(x, list(range(r - 2)) + [r - 1, r - 2], name=sc.name)
        r = array_ops.rank(x)
        perm = array_ops.concat([array_ops.range(r - 2), array_ops.stack([r - 1, r - 2])], 0)
        return array_ops.transpose(x, perm, name=sc.name)


def _matmul(a, b, adjoint_a=False, adjoint_b=False):
    return math_ops.matmul(a, b, adjoint_a=adjoint_a, adjoint_b=adjoint_b)


def _or_zeros(grad, like):
    """An output's gradient, zeros where no path reaches it (TF fills those in for multi-output ops)."""
    return array_ops.zeros_like(like) if grad is None else convert_to_tensor(grad)


def _expand2(x):
    """[...] -> [..., 1, 1]: a per-matrix scalar that broadcasts over its matrix."""
    return array_ops.expand_dims(array_ops.expand_dims(x, -1), -1)


def _eye_like(x):
    """A batch of identities of x's shape [..., n, n]."""
    if x.shape.is_fully_defined():
        d = x.shape.as_list()
        return array_ops.eye(d[-1], batch_shape=d[:-2], dtype=x.dtype)
    s = array_ops.shape(x)
    return array_ops.eye(s[-1], batch_shape=s[:-2], dtype=x.dtype)


def _safe_reciprocal(x, epsilon=1e-20):
    """x / (x^2 + epsilon): TF's Lorentz-broadened 1/x, finite where eigenvalues or singular values tie."""
    return x / (x * x + epsilon)


def _static_batch_equal(a, b):
    return a.shape.is_fully_defined() and b.shape.is_fully_defined() and a.shape.dims[:-2] == b.shape.dims[:-2]


# ---------------------------------------------------------------------------------------------
# Gradients (TF's linalg_grad.py)
# ---------------------------------------------------------------------------------------------

@MatrixInverse.gradient
def _matrix_inverse_grad(op, grad):
    ainv = op.outputs[0]
    adj = bool(op.attrs.get("adjoint", False))
    return [-_matmul(ainv, _matmul(grad, ainv, adjoint_a=adj, adjoint_b=not adj), adjoint_a=not adj)]


@MatrixDeterminant.gradient
def _matrix_determinant_grad(op, grad):
    a, c = op.inputs[0], op.outputs[0]
    return [_expand2(grad * c) * matrix_inverse(a, adjoint=True)]


@LogMatrixDeterminant.gradient
def _log_matrix_determinant_grad(op, _, grad_b):
    if grad_b is None:
        return [None]
    return [_expand2(convert_to_tensor(grad_b)) * matrix_inverse(op.inputs[0], adjoint=True)]


@Cholesky.gradient
def _cholesky_grad(op, grad):
    # l^{-H} ((l^H grad) * (tril(ones) - eye / 2)) l^{-1}, symmetrized.
    l = op.outputs[0]  # noqa: E741 (TF's name)
    l_inverse = matrix_triangular_solve(l, _eye_like(l))
    middle = _matmul(l, grad, adjoint_a=True)
    middle = array_ops.matrix_set_diag(middle, 0.5 * array_ops.matrix_diag_part(middle))
    middle = array_ops.matrix_band_part(middle, -1, 0)
    grad_a = _matmul(_matmul(l_inverse, middle, adjoint_a=True), l_inverse)
    grad_a += adjoint(grad_a)
    return [grad_a * 0.5]


@MatrixSolve.gradient
def _matrix_solve_grad(op, grad):
    a = op.inputs[0]
    adj = bool(op.attrs.get("adjoint", False))
    c = op.outputs[0]
    grad_b = matrix_solve(a, grad, adjoint=not adj)
    grad_a = -_matmul(c, grad_b, adjoint_b=True) if adj else -_matmul(grad_b, c, adjoint_b=True)
    return [grad_a, grad_b]


@MatrixTriangularSolve.gradient
def _matrix_triangular_solve_grad(op, grad):
    a, b = op.inputs
    adj, lower = bool(op.attrs.get("adjoint", False)), bool(op.attrs.get("lower", True))
    c = op.outputs[0]
    grad_b = matrix_triangular_solve(a, grad, lower=lower, adjoint=not adj)
    grad_a = -_matmul(c, grad_b, adjoint_b=True) if adj else -_matmul(grad_b, c, adjoint_b=True)
    grad_a = array_ops.matrix_band_part(grad_a, -1, 0) if lower else array_ops.matrix_band_part(grad_a, 0, -1)
    if _static_batch_equal(a, b):
        return [grad_a, grad_b]
    # Broadcast batch dimensions: the matrix dimensions agree, so only those are summed.
    return [math_ops.reduce_to_shape(grad_a, a), math_ops.reduce_to_shape(grad_b, b)]


@SelfAdjointEigV2.gradient
def _self_adjoint_eig_v2_grad(op, grad_e, grad_v):
    e = op.outputs[0]
    grad_e = _or_zeros(grad_e, e)
    if op.attrs.get("compute_v", True):
        v = op.outputs[1]
        grad_v = _or_zeros(grad_v, v)
        # f[i, j] = 1 / (e_j - e_i) off the diagonal, 0 on it: infinite gradients where eigenvalues tie,
        # which the broadening keeps finite (TF's guard).
        f = array_ops.matrix_set_diag(
            _safe_reciprocal(array_ops.expand_dims(e, -2) - array_ops.expand_dims(e, -1)),
            array_ops.zeros_like(e))
        grad_a = _matmul(v, _matmul(array_ops.matrix_diag(grad_e) + f * _matmul(v, grad_v, adjoint_a=True),
                                    v, adjoint_b=True))
    else:
        _, v = self_adjoint_eig(op.inputs[0])
        grad_a = _matmul(v, _matmul(array_ops.matrix_diag(grad_e), v, adjoint_b=True))
    # The op reads only the lower triangle of its input: symmetrize and keep that triangle.
    grad_a = array_ops.matrix_band_part(grad_a + adjoint(grad_a), -1, 0)
    return [array_ops.matrix_set_diag(grad_a, 0.5 * array_ops.matrix_diag_part(grad_a))]


@Svd.gradient
def _svd_grad(op, grad_s, grad_u, grad_v):
    a = op.inputs[0]
    grad_s = _or_zeros(grad_s, op.outputs[0])
    grad_s_mat = array_ops.matrix_diag(grad_s)
    if not op.attrs.get("compute_uv", True):
        _, u, v = svd(a, compute_uv=True)
        return [_matmul(u, _matmul(grad_s_mat, v, adjoint_b=True))]
    full_matrices = bool(op.attrs.get("full_matrices", False))
    s, u, v = op.outputs
    grad_u, grad_v = _or_zeros(grad_u, u), _or_zeros(grad_v, v)
    d = a.shape.dims
    m = None if d is None else d[-2]
    n = None if d is None else d[-1]
    if m is None or n is None:
        raise NotImplementedError("SVD gradient has not been implemented for input with unknown inner matrix "
                                  f"shape: '{a.name}' has shape {a.shape}")
    use_adjoint = m > n
    if use_adjoint:
        # The gradient for a^H = v s^T u^H, transposed at the end.
        m, n = n, m
        u, v = v, u
        grad_u, grad_v = grad_v, grad_u
    if full_matrices and abs(m - n) > 1:
        raise NotImplementedError(f"svd gradient is not implemented for abs(m - n) > 1 when full_matrices is True. "
                                  f"Received: m={m} and n={n} from op input '{a.name}' with shape {a.shape}.")
    s_mat = array_ops.matrix_diag(s)
    s2 = s * s
    f = array_ops.matrix_set_diag(
        _safe_reciprocal(array_ops.expand_dims(s2, -2) - array_ops.expand_dims(s2, -1)), array_ops.zeros_like(s))
    s_inv_mat = array_ops.matrix_diag(_safe_reciprocal(s))
    v1 = v[..., :, :m]
    grad_v1 = grad_v[..., :, :m]
    f_u = f * _matmul(u, grad_u, adjoint_a=True)
    f_v = f * _matmul(v1, grad_v1, adjoint_a=True)
    term1_nouv = grad_s_mat + _matmul(f_u + adjoint(f_u), s_mat) + _matmul(s_mat, f_v + adjoint(f_v))
    grad_a = _matmul(u, _matmul(term1_nouv, v1, adjoint_b=True))
    if m != n:
        gv1t = adjoint(grad_v1)
        term2_nous = gv1t - _matmul(_matmul(gv1t, v1), v1, adjoint_b=True)
        if full_matrices:
            v2 = v[..., :, m:n]
            grad_v2 = grad_v[..., :, m:n]
            term2_nous -= _matmul(_matmul(v1, grad_v2, adjoint_a=True), v2, adjoint_b=True)
        grad_a = grad_a + _matmul(_matmul(u, s_inv_mat), term2_nous)
    if use_adjoint:
        grad_a = adjoint(grad_a)
    grad_a.set_shape(a.shape)
    return [grad_a]


@MatrixSolveLs.gradient
def _matrix_solve_ls_grad(op, grad):
    # Only the fast=False op is ever built (fast=True is a composite, differentiated through its parts),
    # and TF defines no gradient for it.
    raise ValueError(f"Gradient not defined for fast=False (op '{op.name}', MatrixSolveLs)")


def _triangular_solve_right(x, r):
    """x @ inv(r)^H for an upper-triangular r."""
    return adjoint(matrix_triangular_solve(r, adjoint(x), lower=False, adjoint=False))


def _qr_grad_square_and_deep(q, r, dq, dr):
    qdq = _matmul(q, dq, adjoint_a=True)
    qdq_ = qdq - adjoint(qdq)
    rdr = _matmul(r, dr, adjoint_b=True)
    rdr_ = rdr - adjoint(rdr)
    tril = array_ops.matrix_band_part(qdq_ + rdr_, -1, 0)
    grad_a = _matmul(q, dr + _triangular_solve_right(tril, r))
    grad_b = _triangular_solve_right(dq - _matmul(q, qdq), r)
    return grad_a + grad_b


@Qr.gradient
def _qr_grad(op, dq, dr):
    """TF's _QrGrad (https://arxiv.org/abs/2009.10071): the square and tall cases with
    full_matrices=False, and the wide case, reduced to the square one."""
    if dq is None and dr is None:
        return [None]
    q, r = op.outputs
    dq, dr = _or_zeros(dq, q), _or_zeros(dr, r)
    if r.shape.ndims is None or r.shape.dims[-2] is None or r.shape.dims[-1] is None:
        raise NotImplementedError(f"QrGrad not implemented with dynamic shapes. Received r.shape: {r.shape} "
                                  f"(op '{op.name}')")
    rows, cols = r.shape.dims[-2], r.shape.dims[-1]
    if rows > cols and q.shape.dims[-2] == q.shape.dims[-1]:
        raise NotImplementedError(f"QrGrad not implemented when nrows > ncols and full_matrices is true. Received "
                                  f"r.shape={r.shape} with nrows={rows}and ncols={cols} (op '{op.name}').")
    num_rows = q.shape.dims[-2]
    if num_rows is None:
        raise NotImplementedError(f"QrGrad not implemented with dynamic shapes. Received q.shape: {q.shape} "
                                  f"(op '{op.name}')")
    if num_rows >= cols:
        return [_qr_grad_square_and_deep(q, r, dq, dr)]
    # Wide: a = [x, y], r = [u, v]; reduce to the square case.
    a = op.inputs[0]
    y = a[..., :, num_rows:]
    u = r[..., :, :num_rows]
    dv = dr[..., :, num_rows:]
    du = dr[..., :, :num_rows]
    dy = _matmul(q, dv)
    dx = _qr_grad_square_and_deep(q, u, dq + _matmul(y, dv, adjoint_b=True), du)
    return [array_ops.concat([dx, dy], -1)]


# ---------------------------------------------------------------------------------------------
# Public wrappers
# ---------------------------------------------------------------------------------------------

def matrix_inverse(input, adjoint=False, name=None):  # noqa: A002  (TF's names)
    """The inverse of each innermost square matrix, or of its adjoint (tf.linalg.inv, tf.matrix_inverse).
    A singular matrix (an exact zero pivot) fails the step: "Input is not invertible."."""
    with _op_scope(name, "MatrixInverse") as sc:
        return sc.op(MatrixInverse, convert_to_tensor(input, name="input"), adjoint=bool(adjoint))


def matrix_determinant(input, name=None):  # noqa: A002
    """The determinant of each innermost square matrix: [..., M, M] -> [...] (tf.linalg.det,
    tf.matrix_determinant)."""
    with _op_scope(name, "MatrixDeterminant") as sc:
        return sc.op(MatrixDeterminant, convert_to_tensor(input, name="input"))


SlogdetResult = collections.namedtuple("LogMatrixDeterminant", ["sign", "log_abs_determinant"])


def log_matrix_determinant(input, name=None):  # noqa: A002
    """(sign, log|det|) of each innermost square matrix (tf.linalg.slogdet): a singular matrix gives
    (0, -inf). Returns a namedtuple, as TF's generated op does."""
    with _op_scope(name, "LogMatrixDeterminant") as sc:
        return SlogdetResult(*sc.op(LogMatrixDeterminant, convert_to_tensor(input, name="input")))


def cholesky(input, name=None):  # noqa: A002
    """The lower-triangular Cholesky factor L (L L^T = input) of each innermost symmetric positive
    definite matrix, reading only its lower triangle (tf.linalg.cholesky, tf.cholesky). A matrix that
    is not positive definite fails the step with TF 1.x's "Cholesky decomposition was not successful.
    The input might not be valid." (TF 2.21's CPU kernel returns NaNs instead)."""
    with _op_scope(name, "Cholesky") as sc:
        return sc.op(Cholesky, convert_to_tensor(input, name="input"))


def cholesky_solve(chol, rhs, name=None):
    """X with A X = rhs, given the Cholesky factor `chol` of A (tf.linalg.cholesky_solve): two
    triangular solves, as TF builds it."""
    with _op_scope(name, "cholesky_solve"):
        chol = convert_to_tensor(chol, name="chol")
        rhs = convert_to_tensor(rhs, dtype=chol.dtype, name="rhs")
        y = MatrixTriangularSolve(chol, rhs, lower=True, adjoint=False)
        return MatrixTriangularSolve(chol, y, lower=True, adjoint=True)


def matrix_solve(matrix, rhs, adjoint=False, name=None):
    """X with matrix X = rhs (or adjoint(matrix) X = rhs), per innermost matrix; the batch dimensions of
    matrix and rhs must be equal (tf.linalg.solve, tf.matrix_solve). A singular matrix fails the step:
    "Input matrix is not invertible."."""
    with _op_scope(name, "MatrixSolve") as sc:
        m = convert_to_tensor(matrix, name="matrix")
        return sc.op(MatrixSolve, m, convert_to_tensor(rhs, dtype=m.dtype, name="rhs"), adjoint=bool(adjoint))


def matrix_triangular_solve(matrix, rhs, lower=True, adjoint=False, name=None):
    """X with matrix X = rhs (or adjoint(matrix) X = rhs) for triangular matrices, reading only the
    `lower` (or upper) triangle; batch dimensions broadcast (tf.linalg.triangular_solve,
    tf.matrix_triangular_solve). A zero on the diagonal gives infinities and NaNs, as in TF."""
    with _op_scope(name, "triangular_solve"):
        m = convert_to_tensor(matrix, name="matrix")
        return MatrixTriangularSolve(m, convert_to_tensor(rhs, dtype=m.dtype, name="rhs"), lower=bool(lower),
                                     adjoint=bool(adjoint), name="MatrixTriangularSolve")


def logdet(matrix, name=None):
    """log det of each innermost Hermitian positive definite matrix, 2 * sum(log(diag(cholesky)))
    (tf.linalg.logdet)."""
    with _op_scope(name, "logdet"):
        chol = Cholesky(convert_to_tensor(matrix, name="matrix"))
        return 2.0 * math_ops.reduce_sum(math_ops.log(array_ops.matrix_diag_part(chol)), axis=[-1])


def self_adjoint_eig(tensor, name=None):
    """(e, v): the eigenvalues, ascending, and the eigenvectors (columns) of each innermost symmetric
    matrix, reading only its lower triangle (tf.linalg.eigh, tf.self_adjoint_eig). Eigenvectors are
    defined up to sign, which may differ from TF's."""
    with _op_scope(name, "self_adjoint_eig"):
        e, v = SelfAdjointEigV2(convert_to_tensor(tensor, name="tensor"), compute_v=True)
        return e, v


def self_adjoint_eigvals(tensor, name=None):
    """The eigenvalues, ascending, of each innermost symmetric matrix (tf.linalg.eigvalsh,
    tf.self_adjoint_eigvals)."""
    with _op_scope(name, "self_adjoint_eigenvalues"):
        e, _ = SelfAdjointEigV2(convert_to_tensor(tensor, name="tensor"), compute_v=False)
        return e


def svd(tensor, full_matrices=False, compute_uv=True, name=None):
    """The singular value decomposition a = u diag(s) v^T of each innermost matrix (tf.linalg.svd,
    tf.svd): (s, u, v), s descending, or s alone when compute_uv is False. Note TF's order and its v,
    not numpy's (u, s, vh). Singular vectors are defined up to sign, which may differ from TF's."""
    with _op_scope(name, "svd"):
        s, u, v = Svd(convert_to_tensor(tensor, name="tensor"), compute_uv=bool(compute_uv),
                      full_matrices=bool(full_matrices))
        return (s, u, v) if compute_uv else s


def _regularized_gramian_cholesky(matrix, l2_regularizer, first_kind):
    """cholesky(A^T A + l2 I) (first kind) or cholesky(A A^T + l2 I) (TF's _RegularizedGramianCholesky)."""
    gramian = _matmul(matrix, matrix, adjoint_a=first_kind, adjoint_b=not first_kind)
    if isinstance(l2_regularizer, Tensor) or l2_regularizer != 0:
        d = matrix.shape.dims
        small = None if d is None else d[-1 if first_kind else -2]
        if d is not None and small is not None and all(b is not None for b in d[:-2]):
            identity = array_ops.eye(small, batch_shape=list(d[:-2]), dtype=matrix.dtype)
        else:
            s = array_ops.shape(matrix)
            identity = array_ops.eye(s[-1] if first_kind else s[-2], batch_shape=s[:-2], dtype=matrix.dtype)
        gramian += math_ops.cast(l2_regularizer, matrix.dtype) * identity
    return Cholesky(gramian)


def matrix_solve_ls(matrix, rhs, l2_regularizer=0.0, fast=True, name=None):
    """The least-squares solutions X of matrix X = rhs, per innermost matrix (tf.linalg.lstsq,
    tf.matrix_solve_ls). fast=True (TF's default): the regularized normal equations through a
    Cholesky factorization, built from ops as TF's composite is, so it has TF's gradient (a cond
    between the two forms when the matrix dimensions are known only at run time). fast=False: an
    orthogonal decomposition (numpy.linalg.lstsq; l2_regularizer ignored, as in TF), no gradient."""
    with _op_scope(name, "matrix_solve_ls"):
        matrix = convert_to_tensor(matrix, name="matrix")
        rhs = convert_to_tensor(rhs, dtype=matrix.dtype, name="rhs")
        if not fast:
            return MatrixSolveLs(matrix, rhs, convert_to_tensor(l2_regularizer, dtype=dtypes.float64,
                                                                name="l2_regularizer"), fast=False,
                                 name="MatrixSolveLs")
        d = matrix.shape.dims
        if d is not None and len(d) >= 2 and d[-1] is not None and d[-2] is not None:
            return _solve_ls_fast(matrix, rhs, l2_regularizer, d[-2] >= d[-1])
        # Matrix dimensions known only at run time: both branches, as TF's cond.
        from actorflow.graph.control_flow import cond
        s = array_ops.shape(matrix)
        return cond(s[-2] >= s[-1], lambda: _solve_ls_fast(matrix, rhs, l2_regularizer, True),
                    lambda: _solve_ls_fast(matrix, rhs, l2_regularizer, False))


def _solve_ls_fast(matrix, rhs, l2_regularizer, overdetermined):
    """TF's composite: (A^T A + l2 I)^-1 A^T rhs (overdetermined), or A^T (A A^T + l2 I)^-1 rhs."""
    if overdetermined:
        chol = _regularized_gramian_cholesky(matrix, l2_regularizer, first_kind=True)
        return cholesky_solve(chol, _matmul(matrix, rhs, adjoint_a=True))
    chol = _regularized_gramian_cholesky(matrix, l2_regularizer, first_kind=False)
    return _matmul(matrix, cholesky_solve(chol, rhs), adjoint_a=True)
