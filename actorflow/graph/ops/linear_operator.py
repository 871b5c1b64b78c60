"""tf.linalg's LinearOperator family: Python classes over the dense ops, TF's API (shape, matmul, matvec,
solve, solvevec, determinant, log_abs_determinant, to_dense, diag_part, trace, adjoint, inverse,
cholesky, the is_* hints).

The base class computes everything from `to_dense()` (matrix_solve, slogdet, ...); a subclass
overrides what its structure makes cheaper or exact (a diagonal's solve is a division, a triangular
one a triangular solve, a permutation's determinant its sign). Real dtypes only: an adjoint is a
transpose. Differs from TF: batch shapes of an operator and its argument must be equal or broadcast
as the dense op does (matmul broadcasts; matrix_solve needs equal batch shapes), no assert_* methods,
and no Circulant operators (no FFT).
"""
from __future__ import annotations

import collections

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.linalg_more_ops import _dense_tridiagonal, _three_diagonals, tridiagonal_matmul
from actorflow.graph.ops.linalg_ops import (
    adjoint,
    cholesky,
    log_matrix_determinant,
    matrix_determinant,
    matrix_solve,
    matrix_triangular_solve,
)
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["LinearOperator", "LinearOperatorFullMatrix", "LinearOperatorDiag", "LinearOperatorIdentity",
           "LinearOperatorScaledIdentity", "LinearOperatorLowerTriangular", "LinearOperatorComposition",
           "LinearOperatorAdjoint", "LinearOperatorInversion", "LinearOperatorBlockDiag", "LinearOperatorKronecker",
           "LinearOperatorLowRankUpdate", "LinearOperatorZeros", "LinearOperatorPermutation",
           "LinearOperatorHouseholder", "LinearOperatorToeplitz", "LinearOperatorTridiag",
           "LinearOperatorBlockLowerTriangular", "conjugate_gradient"]


def _swap(x, adjoint_arg):
    return adjoint(x) if adjoint_arg else x


def _batch_matmul_shape(batch, x):
    """x broadcast to carry the operator's batch dimensions (TF's operators broadcast their argument)."""
    if not batch.is_fully_defined() or not batch.dims or x.shape.ndims is None:
        return x
    target = TensorShape(list(batch.dims) + list(x.shape.dims[-2:])) if x.shape.ndims >= 2 else None
    if target is None or not x.shape.is_fully_defined() or x.shape.as_list() == target.as_list():
        return x
    from actorflow.graph.ops.infer import broadcast_shapes
    full = broadcast_shapes(TensorShape(list(batch.dims)), TensorShape(list(x.shape.dims[:-2])))
    return array_ops.broadcast_to(x, full.as_list() + x.shape.as_list()[-2:])


class LinearOperator:
    """A [batch of] M x N linear operator (tf.linalg.LinearOperator). Subclasses define `_to_dense` (and
    `_shape` when it is cheaper than the dense matrix's) and override the rest where their structure
    helps."""

    def __init__(self, dtype, graph_parents=None, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None, name=None, parameters=None):
        if is_positive_definite:
            if is_non_singular is False:
                raise ValueError("A positive definite matrix is always non-singular.")
            is_non_singular = True
        if is_non_singular and is_square is False:
            raise ValueError("A non-singular matrix is always square.")
        if is_non_singular:
            is_square = True
        if is_self_adjoint and is_square is False:
            raise ValueError("A self-adjoint matrix is always square.")
        if is_self_adjoint:
            is_square = True
        self._dtype = dtypes.as_dtype(dtype) if dtype is not None else None
        self._is_non_singular = is_non_singular
        self._is_self_adjoint = is_self_adjoint
        self._is_positive_definite = is_positive_definite
        self._is_square_set = is_square
        self._name = name or type(self).__name__
        self._parameters = dict(parameters or {})

    # -- properties ---------------------------------------------------------------------------
    @property
    def name(self):
        return self._name

    @property
    def parameters(self):
        return dict(self._parameters)

    @property
    def dtype(self):
        return self._dtype

    @property
    def is_non_singular(self):
        return self._is_non_singular

    @property
    def is_self_adjoint(self):
        return self._is_self_adjoint

    @property
    def is_positive_definite(self):
        return self._is_positive_definite

    @property
    def is_square(self):
        if self._is_square_set is not None:
            return self._is_square_set
        m, n = self.shape.dims[-2:] if self.shape.ndims else (None, None)
        return None if m is None or n is None else m == n

    def _shape(self):
        return self.to_dense().shape

    @property
    def shape(self):
        """TensorShape batch_shape + [M, N]."""
        return self._shape()

    @property
    def batch_shape(self):
        s = self.shape
        return TensorShape(None) if s.ndims is None else TensorShape(s.dims[:-2])

    @property
    def tensor_rank(self):
        return self.shape.ndims

    @property
    def domain_dimension(self):
        return None if self.shape.ndims is None else self.shape.dims[-1]

    @property
    def range_dimension(self):
        return None if self.shape.ndims is None else self.shape.dims[-2]

    def shape_tensor(self, name="shape_tensor"):
        return array_ops.shape(self.to_dense())

    def batch_shape_tensor(self, name="batch_shape_tensor"):
        return self.shape_tensor()[:-2]

    def domain_dimension_tensor(self, name="domain_dimension_tensor"):
        return self.shape_tensor()[-1]

    def range_dimension_tensor(self, name="range_dimension_tensor"):
        return self.shape_tensor()[-2]

    def tensor_rank_tensor(self, name="tensor_rank_tensor"):
        return array_ops.size(self.shape_tensor())

    # -- the operations -----------------------------------------------------------------------
    def to_dense(self, name="to_dense"):
        """The operator as a dense [batch] matrix."""
        return self._to_dense()

    def _to_dense(self):
        raise NotImplementedError(f"{type(self).__name__} defines no _to_dense")

    def matmul(self, x, adjoint=False, adjoint_arg=False, name="matmul"):
        """A x (or A^H x; x^H with adjoint_arg). `x` may be another LinearOperator: their composition."""
        if isinstance(x, LinearOperator):
            left = self.adjoint() if adjoint else self
            right = x.adjoint() if adjoint_arg else x
            return LinearOperatorComposition([left, right])
        x = convert_to_tensor(x, dtype=self.dtype, name="x")
        return self._matmul(x, adjoint, adjoint_arg)

    def _matmul(self, x, adjoint, adjoint_arg):
        return math_ops.matmul(self.to_dense(), _swap(x, adjoint_arg), adjoint_a=adjoint)

    def __matmul__(self, other):
        return self.matmul(other)

    def matvec(self, x, adjoint=False, name="matvec"):
        x = convert_to_tensor(x, dtype=self.dtype, name="x")
        return array_ops.squeeze(self.matmul(array_ops.expand_dims(x, -1), adjoint=adjoint), axis=[-1])

    def _check_square(self, what):
        if self.is_square is False:
            raise NotImplementedError(f"{what} is not defined for a non-square operator ({self.name}).")

    def _check_invertible(self, what):
        self._check_square(what)
        if self.is_non_singular is False:
            raise NotImplementedError(f"Exact {what} not implemented for an operator that is expected to be "
                                      f"singular ({self.name}).")

    def solve(self, rhs, adjoint=False, adjoint_arg=False, name="solve"):
        """X with A X = rhs (A^H X = rhs with adjoint)."""
        self._check_invertible("solve")
        if isinstance(rhs, LinearOperator):
            left = self.adjoint() if adjoint else self
            right = rhs.adjoint() if adjoint_arg else rhs
            return LinearOperatorComposition([left.inverse(), right])
        rhs = convert_to_tensor(rhs, dtype=self.dtype, name="rhs")
        return self._solve(rhs, adjoint, adjoint_arg)

    def _solve(self, rhs, adjoint, adjoint_arg):
        dense = self.to_dense()
        rhs = _swap(rhs, adjoint_arg)
        if dense.shape.ndims != rhs.shape.ndims or dense.shape.dims[:-2] != rhs.shape.dims[:-2]:
            dense, rhs = _broadcast_batch(dense, rhs)
        return matrix_solve(dense, rhs, adjoint=adjoint)

    def solvevec(self, rhs, adjoint=False, name="solve"):
        rhs = convert_to_tensor(rhs, dtype=self.dtype, name="rhs")
        return array_ops.squeeze(self.solve(array_ops.expand_dims(rhs, -1), adjoint=adjoint), axis=[-1])

    def determinant(self, name="det"):
        self._check_square("Determinant")
        return self._determinant()

    def _determinant(self):
        return matrix_determinant(self.to_dense())

    def log_abs_determinant(self, name="log_abs_det"):
        self._check_square("Determinant")
        return self._log_abs_determinant()

    def _log_abs_determinant(self):
        return log_matrix_determinant(self.to_dense())[1]

    def diag_part(self, name="diag_part"):
        return self._diag_part()

    def _diag_part(self):
        return array_ops.matrix_diag_part(self.to_dense())

    def trace(self, name="trace"):
        return math_ops.reduce_sum(self.diag_part(), axis=-1)

    def add_to_tensor(self, x, name="add_to_tensor"):
        return self.to_dense() + convert_to_tensor(x, dtype=self.dtype, name="x")

    def eigvals(self, name="eigvals"):
        if not self.is_self_adjoint:
            raise NotImplementedError("Only self-adjoint matrices are supported.")
        from actorflow.graph.ops.linalg_ops import self_adjoint_eigvals
        return self_adjoint_eigvals(self.to_dense())

    def adjoint(self, name=None):
        if self.is_self_adjoint is True:
            return self
        return LinearOperatorAdjoint(self)

    H = property(adjoint)

    def inverse(self, name=None):
        if self.is_square is False:
            raise ValueError("Cannot take the Inverse: This operator represents a non square matrix.")
        if self.is_non_singular is False:
            raise ValueError("Cannot take the Inverse: This operator represents a singular matrix.")
        return LinearOperatorInversion(self)

    def cholesky(self, name=None):
        if not self.is_positive_definite or not self.is_self_adjoint:
            raise ValueError("Cannot take the Cholesky decomposition: Not a positive definite self adjoint matrix.")
        return self._cholesky()

    def _cholesky(self):
        return LinearOperatorLowerTriangular(cholesky(self.to_dense()), is_non_singular=True,
                                             is_self_adjoint=False, is_square=True)

    def __repr__(self):
        return f"<{type(self).__name__} '{self.name}' shape={self.shape} dtype={self.dtype.name}>"


def _broadcast_batch(a, b):
    """a [..., M, N] and b [..., N, K] with their batch dimensions broadcast against each other."""
    ones_a = array_ops.zeros_like(b[..., :1, :1])
    ones_b = array_ops.zeros_like(a[..., :1, :1])
    return a + ones_a, b + ones_b


def _hint(value, default):
    return default if value is None else value


class LinearOperatorFullMatrix(LinearOperator):
    """A [batch of] dense matrices (tf.linalg.LinearOperatorFullMatrix)."""

    def __init__(self, matrix, is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=None, name="LinearOperatorFullMatrix"):
        self._matrix = convert_to_tensor(matrix, name="matrix")
        if self._matrix.shape.ndims is not None and self._matrix.shape.ndims < 2:
            raise ValueError(f"matrix must have rank >= 2, got shape {self._matrix.shape}")
        super().__init__(self._matrix.dtype, None, is_non_singular, is_self_adjoint, is_positive_definite,
                         is_square, name, {"matrix": matrix})

    def _to_dense(self):
        return self._matrix

    def _shape(self):
        return self._matrix.shape


class LinearOperatorDiag(LinearOperator):
    """diag(d) for d [..., N] (tf.linalg.LinearOperatorDiag)."""

    def __init__(self, diag, is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=None, name="LinearOperatorDiag"):
        self._diag = convert_to_tensor(diag, name="diag")
        if self._diag.shape.ndims is not None and self._diag.shape.ndims < 1:
            raise ValueError(f"diag must have rank >= 1, got shape {self._diag.shape}")
        if is_square is False:
            raise ValueError("Only square diagonal operators currently supported.")
        if is_self_adjoint is False:
            raise ValueError("A real diagonal operator is always self adjoint.")
        super().__init__(self._diag.dtype, None, is_non_singular, True, is_positive_definite, True, name,
                         {"diag": diag})

    @property
    def diag(self):
        return self._diag

    def _shape(self):
        d = self._diag.shape
        return TensorShape(None) if d.ndims is None else d.concatenate([d.dims[-1]])

    def _to_dense(self):
        return array_ops.matrix_diag(self._diag)

    def _matmul(self, x, adjoint, adjoint_arg):
        return array_ops.expand_dims(self._diag, -1) * _swap(x, adjoint_arg)

    def _solve(self, rhs, adjoint, adjoint_arg):
        return _swap(rhs, adjoint_arg) / array_ops.expand_dims(self._diag, -1)

    def _determinant(self):
        return math_ops.reduce_prod(self._diag, axis=[-1])

    def _log_abs_determinant(self):
        return math_ops.reduce_sum(math_ops.log(math_ops.abs(self._diag)), axis=[-1])

    def _diag_part(self):
        return self._diag

    def _cholesky(self):
        return LinearOperatorDiag(math_ops.sqrt(self._diag), is_non_singular=True, is_positive_definite=True)

    def inverse(self, name=None):
        super().inverse()
        return LinearOperatorDiag(1.0 / self._diag, is_non_singular=self.is_non_singular,
                                  is_positive_definite=self.is_positive_definite)


def _eye_shape(num_rows, batch_shape):
    n = int(num_rows)
    if n < 0:
        raise ValueError(f"num_rows must be non-negative, got {num_rows}")
    b = [] if batch_shape is None else [int(d) for d in batch_shape]
    return n, b


class LinearOperatorIdentity(LinearOperator):
    """The [batch of] N x N identity (tf.linalg.LinearOperatorIdentity); num_rows and batch_shape must
    be Python integers here."""

    def __init__(self, num_rows, batch_shape=None, dtype=None, is_non_singular=True, is_self_adjoint=True,
                 is_positive_definite=True, is_square=True, assert_proper_shapes=False,
                 name="LinearOperatorIdentity"):
        if not (is_non_singular and is_self_adjoint and is_positive_definite and is_square):
            raise ValueError("An identity operator is always non-singular, self-adjoint, positive definite "
                             "and square.")
        self._n, self._batch = _eye_shape(num_rows, batch_shape)
        super().__init__(dtype or dtypes.float32, None, True, True, True, True, name,
                         {"num_rows": num_rows, "batch_shape": batch_shape})

    def _shape(self):
        return TensorShape(self._batch + [self._n, self._n])

    def _to_dense(self):
        return array_ops.eye(self._n, batch_shape=self._batch or None, dtype=self.dtype)

    def _matmul(self, x, adjoint, adjoint_arg):
        return _batch_matmul_shape(self.batch_shape, _swap(x, adjoint_arg))

    def _solve(self, rhs, adjoint, adjoint_arg):
        return self._matmul(rhs, adjoint, adjoint_arg)

    def _determinant(self):
        return array_ops.ones(self._batch, dtype=self.dtype)

    def _log_abs_determinant(self):
        return array_ops.zeros(self._batch, dtype=self.dtype)

    def _diag_part(self):
        return array_ops.ones(self._batch + [self._n], dtype=self.dtype)

    def _cholesky(self):
        return self

    def inverse(self, name=None):
        return self


class LinearOperatorScaledIdentity(LinearOperator):
    """multiplier * I, with multiplier's shape the batch shape (tf.linalg.LinearOperatorScaledIdentity)."""

    def __init__(self, num_rows, multiplier, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=True, assert_proper_shapes=False,
                 name="LinearOperatorScaledIdentity"):
        if is_square is False:
            raise ValueError("A ScaledIdentity operator is always square.")
        self._multiplier = convert_to_tensor(multiplier, name="multiplier")
        self._n, _ = _eye_shape(num_rows, None)
        super().__init__(self._multiplier.dtype, None, is_non_singular, _hint(is_self_adjoint, True),
                         is_positive_definite, True, name, {"num_rows": num_rows, "multiplier": multiplier})

    @property
    def multiplier(self):
        return self._multiplier

    def _m2(self):
        return array_ops.expand_dims(array_ops.expand_dims(self._multiplier, -1), -1)

    def _shape(self):
        return self._multiplier.shape.concatenate([self._n, self._n])

    def _to_dense(self):
        return self._m2() * array_ops.eye(self._n, dtype=self.dtype)

    def _matmul(self, x, adjoint, adjoint_arg):
        return self._m2() * _swap(x, adjoint_arg)

    def _solve(self, rhs, adjoint, adjoint_arg):
        return _swap(rhs, adjoint_arg) / self._m2()

    def _determinant(self):
        return self._multiplier ** self._n

    def _log_abs_determinant(self):
        return self._n * math_ops.log(math_ops.abs(self._multiplier))

    def _diag_part(self):
        return array_ops.expand_dims(self._multiplier, -1) * array_ops.ones([self._n], dtype=self.dtype)

    def _cholesky(self):
        return LinearOperatorScaledIdentity(self._n, math_ops.sqrt(self._multiplier), is_non_singular=True,
                                            is_positive_definite=True)


class LinearOperatorLowerTriangular(LinearOperator):
    """The lower triangle of a [batch of] square matrices; the rest is ignored
    (tf.linalg.LinearOperatorLowerTriangular)."""

    def __init__(self, tril, is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=None, name="LinearOperatorLowerTriangular"):
        if is_square is False:
            raise ValueError("Only square lower triangular operators supported at this time.")
        self._tril = array_ops.matrix_band_part(convert_to_tensor(tril, name="tril"), -1, 0)
        super().__init__(self._tril.dtype, None, is_non_singular, is_self_adjoint, is_positive_definite, True,
                         name, {"tril": tril})

    def _shape(self):
        return self._tril.shape

    def _to_dense(self):
        return self._tril

    def _solve(self, rhs, adjoint, adjoint_arg):
        return matrix_triangular_solve(self._tril, _swap(rhs, adjoint_arg), lower=True, adjoint=adjoint)

    def _determinant(self):
        return math_ops.reduce_prod(array_ops.matrix_diag_part(self._tril), axis=[-1])

    def _log_abs_determinant(self):
        return math_ops.reduce_sum(math_ops.log(math_ops.abs(array_ops.matrix_diag_part(self._tril))), axis=[-1])


class LinearOperatorComposition(LinearOperator):
    """A1 A2 ... An (tf.linalg.LinearOperatorComposition): matmul applies them right to left; solve
    left to right through their inverses; the determinant is the product of theirs."""

    def __init__(self, operators, is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=None, name=None):
        operators = list(operators)
        if not operators:
            raise ValueError("Expected a non-empty list of operators.")
        dts = {op.dtype for op in operators}
        if len(dts) > 1:
            raise TypeError(f"Expected all operators to have the same dtype, got {sorted(d.name for d in dts)}")
        if all(op.is_non_singular for op in operators):
            if is_non_singular is False:
                raise ValueError("The composition of non-singular operators is always non-singular.")
            is_non_singular = True
        self._operators = operators
        super().__init__(operators[0].dtype, None, is_non_singular, is_self_adjoint, is_positive_definite,
                         is_square, name or "_o_".join(op.name for op in operators), {"operators": operators})

    @property
    def operators(self):
        return list(self._operators)

    def _shape(self):
        first, last = self._operators[0].shape, self._operators[-1].shape
        if first.ndims is None or last.ndims is None:
            return TensorShape(None)
        from actorflow.graph.ops.infer import broadcast_shapes
        batch = TensorShape([])
        for op in self._operators:
            batch = broadcast_shapes(batch, op.batch_shape)
        return batch.concatenate([first.dims[-2], last.dims[-1]])

    def _to_dense(self):
        out = self._operators[-1].to_dense()
        for op in reversed(self._operators[:-1]):
            out = op.matmul(out)
        return out

    def _matmul(self, x, adjoint, adjoint_arg):
        ops = list(reversed(self._operators)) if adjoint else self._operators
        out = ops[-1].matmul(x, adjoint=adjoint, adjoint_arg=adjoint_arg)
        for op in reversed(ops[:-1]):
            out = op.matmul(out, adjoint=adjoint)
        return out

    def _solve(self, rhs, adjoint, adjoint_arg):
        ops = list(reversed(self._operators)) if adjoint else self._operators
        out = ops[0].solve(rhs, adjoint=adjoint, adjoint_arg=adjoint_arg)
        for op in ops[1:]:
            out = op.solve(out, adjoint=adjoint)
        return out

    def _determinant(self):
        if all(op.is_square for op in self._operators):
            out = self._operators[0].determinant()
            for op in self._operators[1:]:
                out = out * op.determinant()
            return out
        return super()._determinant()

    def _log_abs_determinant(self):
        if all(op.is_square for op in self._operators):
            out = self._operators[0].log_abs_determinant()
            for op in self._operators[1:]:
                out = out + op.log_abs_determinant()
            return out
        return super()._log_abs_determinant()


class LinearOperatorAdjoint(LinearOperator):
    """The adjoint (here: transpose) of an operator (tf.linalg.LinearOperatorAdjoint)."""

    def __init__(self, operator, is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=None, name=None):
        self._operator = operator
        super().__init__(operator.dtype, None, _hint(is_non_singular, operator.is_non_singular),
                         _hint(is_self_adjoint, operator.is_self_adjoint),
                         _hint(is_positive_definite, operator.is_positive_definite),
                         _hint(is_square, operator.is_square), name or operator.name + "_adjoint",
                         {"operator": operator})

    @property
    def operator(self):
        return self._operator

    def _shape(self):
        s = self._operator.shape
        return s if s.ndims is None else TensorShape(list(s.dims[:-2]) + [s.dims[-1], s.dims[-2]])

    def _to_dense(self):
        return adjoint(self._operator.to_dense())

    def _matmul(self, x, adjoint_, adjoint_arg):
        return self._operator.matmul(x, adjoint=not adjoint_, adjoint_arg=adjoint_arg)

    def _solve(self, rhs, adjoint_, adjoint_arg):
        return self._operator.solve(rhs, adjoint=not adjoint_, adjoint_arg=adjoint_arg)

    def _determinant(self):
        return self._operator.determinant()

    def _log_abs_determinant(self):
        return self._operator.log_abs_determinant()

    def _diag_part(self):
        return self._operator.diag_part()

    def adjoint(self, name=None):
        return self._operator


class LinearOperatorInversion(LinearOperator):
    """The inverse of a non-singular square operator (tf.linalg.LinearOperatorInversion): its matmul is
    the operator's solve and its solve the operator's matmul."""

    def __init__(self, operator, is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=None, name=None):
        if operator.is_non_singular is False or is_non_singular is False:
            raise ValueError(f"operator and the supplied hints must be non-singular, got operator "
                             f"{operator.name}")
        if operator.is_square is False or is_square is False:
            raise ValueError(f"operator and the supplied hints must be square, got operator {operator.name}")
        self._operator = operator
        super().__init__(operator.dtype, None, _hint(is_non_singular, operator.is_non_singular),
                         _hint(is_self_adjoint, operator.is_self_adjoint),
                         _hint(is_positive_definite, operator.is_positive_definite), True,
                         name or operator.name + "_inv", {"operator": operator})

    @property
    def operator(self):
        return self._operator

    def _shape(self):
        return self._operator.shape

    def _to_dense(self):
        d = self._operator.to_dense()
        from actorflow.graph.ops.linalg_ops import matrix_inverse
        return matrix_inverse(d)

    def _matmul(self, x, adjoint_, adjoint_arg):
        return self._operator.solve(x, adjoint=adjoint_, adjoint_arg=adjoint_arg)

    def _solve(self, rhs, adjoint_, adjoint_arg):
        return self._operator.matmul(rhs, adjoint=adjoint_, adjoint_arg=adjoint_arg)

    def _determinant(self):
        return 1.0 / self._operator.determinant()

    def _log_abs_determinant(self):
        return -self._operator.log_abs_determinant()

    def inverse(self, name=None):
        return self._operator


def _static_dims(op, what):
    s = op.shape
    if s.ndims is None or s.dims[-1] is None or s.dims[-2] is None:
        raise ValueError(f"{what} needs operators of statically known size, {op.name} has shape {s}")
    return s.dims[-2], s.dims[-1]


class LinearOperatorBlockDiag(LinearOperator):
    """A block-diagonal operator of square blocks (tf.linalg.LinearOperatorBlockDiag); the blocks' sizes
    must be known statically here."""

    def __init__(self, operators, is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=True, name=None):
        operators = list(operators)
        if not operators:
            raise ValueError("Expected a non-empty list of operators.")
        for op in operators:
            if op.is_square is False:
                raise ValueError(f"LinearOperatorBlockDiag needs square blocks, {op.name} is not")
        if all(op.is_non_singular for op in operators):
            is_non_singular = _hint(is_non_singular, True)
        if all(op.is_self_adjoint for op in operators):
            is_self_adjoint = _hint(is_self_adjoint, True)
        if all(op.is_positive_definite for op in operators):
            is_positive_definite = _hint(is_positive_definite, True)
        self._operators = operators
        self._sizes = [_static_dims(op, "LinearOperatorBlockDiag")[0] for op in operators]
        super().__init__(operators[0].dtype, None, is_non_singular, is_self_adjoint, is_positive_definite, True,
                         name or "_ds_".join(op.name for op in operators), {"operators": operators})

    @property
    def operators(self):
        return list(self._operators)

    def _shape(self):
        from actorflow.graph.ops.infer import broadcast_shapes
        batch = TensorShape([])
        for op in self._operators:
            batch = broadcast_shapes(batch, op.batch_shape)
        n = sum(self._sizes)
        return batch.concatenate([n, n])

    def _to_dense(self):
        n = sum(self._sizes)
        rows, start = [], 0
        batch = self.batch_shape.as_list()
        for op, k in zip(self._operators, self._sizes):
            d = op.to_dense()
            if batch and d.shape.as_list()[:-2] != batch:
                d = array_ops.broadcast_to(d, batch + [k, k])
            pads = [[0, 0]] * len(batch) + [[0, 0], [start, n - start - k]]
            rows.append(array_ops.pad(d, pads))
            start += k
        return array_ops.concat(rows, -2)

    def _determinant(self):
        out = self._operators[0].determinant()
        for op in self._operators[1:]:
            out = out * op.determinant()
        return out

    def _log_abs_determinant(self):
        out = self._operators[0].log_abs_determinant()
        for op in self._operators[1:]:
            out = out + op.log_abs_determinant()
        return out


class LinearOperatorBlockLowerTriangular(LinearOperator):
    """A block lower-triangular operator from rows of operators [[A11], [A21, A22], ...], the diagonal
    blocks square (tf.linalg.LinearOperatorBlockLowerTriangular); sizes known statically here. The
    determinant is the product of the diagonal blocks'; solves go through the dense matrix."""

    def __init__(self, operators, is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=None, name="LinearOperatorBlockLowerTriangular"):
        rows = [list(r) for r in operators]
        if not rows:
            raise ValueError("Expected a non-empty list of operators.")
        for i, row in enumerate(rows):
            if len(row) != i + 1:
                raise ValueError(f"Argument `operators[{i}]` must contain `{i + 1}` blocks, got {len(row)}.")
        diag = [row[-1] for row in rows]
        for op in diag:
            if op.is_square is False:
                raise ValueError(f"The diagonal operators must be square, {op.name} is not.")
        if all(op.is_non_singular for op in diag):
            is_non_singular = _hint(is_non_singular, True)
        self._rows = rows
        self._sizes = [_static_dims(op, "LinearOperatorBlockLowerTriangular")[0] for op in diag]
        for i, row in enumerate(rows):
            for j, op in enumerate(row):
                if _static_dims(op, "LinearOperatorBlockLowerTriangular") != (self._sizes[i], self._sizes[j]):
                    raise ValueError(f"operators[{i}][{j}] ({op.name}) has shape {op.shape}, expected "
                                     f"[..., {self._sizes[i]}, {self._sizes[j]}]")
        super().__init__(diag[0].dtype, None, is_non_singular, is_self_adjoint, is_positive_definite, True, name,
                         {"operators": operators})

    @property
    def operators(self):
        return [list(r) for r in self._rows]

    def _shape(self):
        from actorflow.graph.ops.infer import broadcast_shapes
        batch = TensorShape([])
        for row in self._rows:
            for op in row:
                batch = broadcast_shapes(batch, op.batch_shape)
        n = sum(self._sizes)
        return batch.concatenate([n, n])

    def _to_dense(self):
        batch = self.batch_shape.as_list()
        n = sum(self._sizes)
        out = []
        for i, row in enumerate(self._rows):
            blocks = []
            for op in row:
                d = op.to_dense()
                if batch and d.shape.as_list()[:-2] != batch:
                    d = array_ops.broadcast_to(d, batch + d.shape.as_list()[-2:])
                blocks.append(d)
            rest = n - sum(self._sizes[:i + 1])
            if rest:
                blocks.append(array_ops.zeros(batch + [self._sizes[i], rest], dtype=self.dtype))
            out.append(array_ops.concat(blocks, -1))
        return array_ops.concat(out, -2)

    def _determinant(self):
        out = self._rows[0][-1].determinant()
        for row in self._rows[1:]:
            out = out * row[-1].determinant()
        return out

    def _log_abs_determinant(self):
        out = self._rows[0][-1].log_abs_determinant()
        for row in self._rows[1:]:
            out = out + row[-1].log_abs_determinant()
        return out


class LinearOperatorKronecker(LinearOperator):
    """The Kronecker product A1 x A2 x ... (tf.linalg.LinearOperatorKronecker); sizes known statically."""

    def __init__(self, operators, is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=None, name=None):
        operators = list(operators)
        if not operators:
            raise ValueError("Expected a non-empty list of operators.")
        if all(op.is_non_singular for op in operators):
            is_non_singular = _hint(is_non_singular, True)
        if all(op.is_self_adjoint for op in operators):
            is_self_adjoint = _hint(is_self_adjoint, True)
        self._operators = operators
        self._dims = [_static_dims(op, "LinearOperatorKronecker") for op in operators]
        super().__init__(operators[0].dtype, None, is_non_singular, is_self_adjoint, is_positive_definite,
                         is_square, name or "_x_".join(op.name for op in operators), {"operators": operators})

    @property
    def operators(self):
        return list(self._operators)

    def _shape(self):
        from actorflow.graph.ops.infer import broadcast_shapes
        batch = TensorShape([])
        for op in self._operators:
            batch = broadcast_shapes(batch, op.batch_shape)
        return batch.concatenate([int(np.prod([d[0] for d in self._dims])), int(np.prod([d[1] for d in self._dims]))])

    def _to_dense(self):
        out, (m, n) = self._operators[0].to_dense(), self._dims[0]
        for op, (p, q) in zip(self._operators[1:], self._dims[1:]):
            b = op.to_dense()
            prod = (array_ops.expand_dims(array_ops.expand_dims(out, -1), -3)
                    * array_ops.expand_dims(array_ops.expand_dims(b, -3), -2))
            m, n = m * p, n * q
            out = array_ops.reshape(prod, array_ops.concat([array_ops.shape(prod)[:-4], [m, n]], 0))
        return out

    def _determinant(self):
        if not all(d[0] == d[1] for d in self._dims):
            return super()._determinant()
        total = int(np.prod([d[0] for d in self._dims]))
        out = None
        for op, (k, _) in zip(self._operators, self._dims):
            term = op.determinant() ** (total // k)
            out = term if out is None else out * term
        return out

    def _log_abs_determinant(self):
        if not all(d[0] == d[1] for d in self._dims):
            return super()._log_abs_determinant()
        total = int(np.prod([d[0] for d in self._dims]))
        out = None
        for op, (k, _) in zip(self._operators, self._dims):
            term = float(total // k) * op.log_abs_determinant()
            out = term if out is None else out + term
        return out


class LinearOperatorLowRankUpdate(LinearOperator):
    """base + U diag(d) V^T (tf.linalg.LinearOperatorLowRankUpdate); V defaults to U and d to ones.
    Solves and determinants go through the dense matrix here, where TF uses the Woodbury identity and
    the matrix determinant lemma (the same values to rounding)."""

    def __init__(self, base_operator, u, diag_update=None, v=None, is_diag_update_positive=None,
                 is_non_singular=None, is_self_adjoint=None, is_positive_definite=None, is_square=None,
                 name="LinearOperatorLowRankUpdate"):
        self._base = base_operator
        self._u = convert_to_tensor(u, dtype=base_operator.dtype, name="u")
        self._v = self._u if v is None else convert_to_tensor(v, dtype=base_operator.dtype, name="v")
        self._d = None if diag_update is None else convert_to_tensor(diag_update, dtype=base_operator.dtype,
                                                                      name="diag_update")
        if v is None and base_operator.is_self_adjoint:
            is_self_adjoint = _hint(is_self_adjoint, True)
        if (v is None and base_operator.is_positive_definite and (diag_update is None or is_diag_update_positive)):
            is_positive_definite = _hint(is_positive_definite, True)
        super().__init__(base_operator.dtype, None, is_non_singular, is_self_adjoint, is_positive_definite,
                         is_square, name, {"base_operator": base_operator, "u": u, "diag_update": diag_update,
                                           "v": v})

    @property
    def base_operator(self):
        return self._base

    @property
    def u(self):
        return self._u

    @property
    def v(self):
        return self._v

    @property
    def diag_update(self):
        return self._d

    def _shape(self):
        return self._base.shape

    def _to_dense(self):
        ud = self._u if self._d is None else self._u * array_ops.expand_dims(self._d, -2)
        return self._base.to_dense() + math_ops.matmul(ud, self._v, adjoint_b=True)


class LinearOperatorZeros(LinearOperator):
    """The [batch of] M x N zero matrix (tf.linalg.LinearOperatorZeros); sizes are Python integers here."""

    def __init__(self, num_rows, num_columns=None, batch_shape=None, dtype=None, is_non_singular=False,
                 is_self_adjoint=True, is_positive_definite=False, is_square=True, assert_proper_shapes=False,
                 name="LinearOperatorZeros"):
        if is_non_singular or is_positive_definite:
            raise ValueError("A zero operator is always singular and never positive definite.")
        self._m, self._batch = _eye_shape(num_rows, batch_shape)
        self._n = self._m if num_columns is None else int(num_columns)
        square = self._m == self._n
        if is_square and not square:
            raise ValueError(f"LinearOperatorZeros initialized as is_square=True, but got num_rows({self._m}) != "
                             f"num_columns({self._n})")
        super().__init__(dtype or dtypes.float32, None, False, is_self_adjoint, False, is_square,
                         name, {"num_rows": num_rows, "num_columns": num_columns, "batch_shape": batch_shape})

    def _shape(self):
        return TensorShape(self._batch + [self._m, self._n])

    def _to_dense(self):
        return array_ops.zeros(self._batch + [self._m, self._n], dtype=self.dtype)

    def _matmul(self, x, adjoint, adjoint_arg):
        x = _batch_matmul_shape(self.batch_shape, _swap(x, adjoint_arg))
        rows = self._n if adjoint else self._m
        return array_ops.zeros_like(x[..., :1, :]) + array_ops.zeros([rows, 1], dtype=self.dtype)

    def _determinant(self):
        return array_ops.zeros(self._batch, dtype=self.dtype)

    def _log_abs_determinant(self):
        return math_ops.log(self._determinant())

    def _diag_part(self):
        return array_ops.zeros(self._batch + [min(self._m, self._n)], dtype=self.dtype)


class LinearOperatorPermutation(LinearOperator):
    """The permutation matrix with A[..., i, perm[i]] = 1, so A x = x[perm]
    (tf.linalg.LinearOperatorPermutation)."""

    def __init__(self, perm, dtype=dtypes.float32, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None, name="LinearOperatorPermutation"):
        self._perm = convert_to_tensor(perm, name="perm")
        if self._perm.dtype not in (dtypes.int32, dtypes.int64):
            raise TypeError(f"perm must be int32 or int64, got {self._perm.dtype.name}")
        if is_non_singular is False:
            raise ValueError("A Permutation operator is always non-singular.")
        if is_square is False:
            raise ValueError("A Permutation operator is always square.")
        super().__init__(dtype, None, True, is_self_adjoint, is_positive_definite, True, name, {"perm": perm})

    @property
    def perm(self):
        return self._perm

    def _shape(self):
        p = self._perm.shape
        return TensorShape(None) if p.ndims is None else p.concatenate([p.dims[-1]])

    def _to_dense(self):
        return array_ops.one_hot(self._perm, array_ops.shape(self._perm)[-1], dtype=self.dtype)

    def _solve(self, rhs, adjoint, adjoint_arg):
        return self._matmul(rhs, not adjoint, adjoint_arg)

    def _determinant(self):
        # The sign of the permutation: (-1)^(n - number of cycles), from the dense matrix's determinant
        # (exact: a permutation matrix's LU has no rounding).
        return math_ops.sign(matrix_determinant(self.to_dense()))

    def _log_abs_determinant(self):
        return array_ops.zeros_like(math_ops.cast(self._perm[..., 0], self.dtype))


class LinearOperatorHouseholder(LinearOperator):
    """I - 2 v v^T / (v^T v), the reflection through the hyperplane orthogonal to v
    (tf.linalg.LinearOperatorHouseholder): self-adjoint, its own inverse, determinant -1."""

    def __init__(self, reflection_axis, is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=None, name="LinearOperatorHouseholder"):
        self._v = convert_to_tensor(reflection_axis, name="reflection_axis")
        if is_self_adjoint is False:
            raise ValueError("A Householder operator is always self adjoint.")
        if is_non_singular is False:
            raise ValueError("A Householder operator is always non-singular.")
        if is_positive_definite is True:
            raise ValueError("A Householder operator is always indefinite.")
        if is_square is False:
            raise ValueError("A Householder operator is always square.")
        super().__init__(self._v.dtype, None, True, True, is_positive_definite, True, name,
                         {"reflection_axis": reflection_axis})

    @property
    def reflection_axis(self):
        return self._v

    def _shape(self):
        p = self._v.shape
        return TensorShape(None) if p.ndims is None else p.concatenate([p.dims[-1]])

    def _unit(self):
        return self._v / math_ops.sqrt(math_ops.reduce_sum(self._v * self._v, axis=-1, keepdims=True))

    def _to_dense(self):
        u = array_ops.expand_dims(self._unit(), -1)
        n = array_ops.shape(self._v)[-1]
        return array_ops.eye(n, dtype=self.dtype) - 2.0 * math_ops.matmul(u, u, adjoint_b=True)

    def _matmul(self, x, adjoint, adjoint_arg):
        x = _swap(x, adjoint_arg)
        u = array_ops.expand_dims(self._unit(), -1)
        return x - 2.0 * u * math_ops.reduce_sum(u * x, axis=-2, keepdims=True)

    def _solve(self, rhs, adjoint, adjoint_arg):
        return self._matmul(rhs, adjoint, adjoint_arg)

    def _determinant(self):
        return -array_ops.ones_like(self._v[..., 0])

    def _log_abs_determinant(self):
        return array_ops.zeros_like(self._v[..., 0])

    def inverse(self, name=None):
        return self


class LinearOperatorToeplitz(LinearOperator):
    """The Toeplitz matrix with first column `col` and first row `row` (row[0] is ignored: col[0] is the
    diagonal) (tf.linalg.LinearOperatorToeplitz); the size must be known statically here."""

    def __init__(self, col, row, is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=None, name="LinearOperatorToeplitz"):
        self._col = convert_to_tensor(col, name="col")
        self._row = convert_to_tensor(row, dtype=self._col.dtype, name="row")
        if is_square is False:
            raise ValueError("Only square Toeplitz operators currently supported.")
        n = self._col.shape.dims[-1] if self._col.shape.ndims else None
        if n is None:
            raise ValueError(f"LinearOperatorToeplitz needs a statically known size, col has {self._col.shape}")
        self._n = n
        super().__init__(self._col.dtype, None, is_non_singular, is_self_adjoint, is_positive_definite, True, name,
                         {"col": col, "row": row})

    @property
    def col(self):
        return self._col

    @property
    def row(self):
        return self._row

    def _shape(self):
        from actorflow.graph.ops.infer import broadcast_shapes
        batch = broadcast_shapes(self._col.shape[:-1], self._row.shape[:-1])
        return batch.concatenate([self._n, self._n])

    def _to_dense(self):
        n = self._n
        # v = [row[n-1], ..., row[1], col[0], ..., col[n-1]]; A[i, j] = v[n - 1 + i - j].
        col, row = _broadcast_batch(array_ops.expand_dims(self._col, -1), array_ops.expand_dims(self._row, -1))
        col, row = col[..., 0], row[..., 0]
        v = array_ops.concat([row[..., ::-1][..., :-1], col], -1)
        idx = (n - 1) + np.arange(n)[:, None] - np.arange(n)[None, :]
        return array_ops.gather(v, idx.astype(np.int32), axis=v.shape.ndims - 1)


class LinearOperatorTridiag(LinearOperator):
    """A tridiagonal operator from its diagonals (tf.linalg.LinearOperatorTridiag), in
    tridiagonal_matmul's formats ('compact' [..., 3, N], 'sequence', 'matrix')."""

    def __init__(self, diagonals, diagonals_format="compact", is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None, name="LinearOperatorTridiag"):
        if diagonals_format not in ("compact", "sequence", "matrix"):
            raise ValueError(f"Diagonals Format must be one of compact, matrix, sequence, got {diagonals_format}")
        if is_square is False:
            raise ValueError("Only square tridiagonal operators supported.")
        self._diagonals = diagonals
        self._format = diagonals_format
        self._three = _three_diagonals(diagonals, diagonals_format, "LinearOperatorTridiag")
        super().__init__(self._three[1].dtype, None, is_non_singular, is_self_adjoint, is_positive_definite, True,
                         name, {"diagonals": diagonals, "diagonals_format": diagonals_format})

    @property
    def diagonals(self):
        return self._diagonals

    @property
    def diagonals_format(self):
        return self._format

    def _shape(self):
        m = self._three[1].shape
        return TensorShape(None) if m.ndims is None else m.concatenate([m.dims[-1]])

    def _to_dense(self):
        return _dense_tridiagonal(*self._three)

    def _matmul(self, x, adjoint, adjoint_arg):
        sup, main, sub = self._three
        if adjoint:       # the transpose swaps the off-diagonals, shifted by one
            sup, sub = (_shift_vec(sub, up=True), _shift_vec(sup, up=False))
        return tridiagonal_matmul(array_ops.stack([sup, main, sub], -2), _swap(x, adjoint_arg))

    def _diag_part(self):
        return self._three[1]


def _shift_vec(d, up):
    """d [..., N] moved by one: up gives d[i + 1] (0 last), else d[i - 1] (0 first)."""
    r = d.shape.ndims
    if up:
        return array_ops.pad(d[..., 1:], [[0, 0]] * (r - 1) + [[0, 1]])
    return array_ops.pad(d[..., :-1], [[0, 0]] * (r - 1) + [[1, 0]])


CGState = collections.namedtuple("CGState", ["i", "x", "r", "p", "gamma"])


def conjugate_gradient(operator, rhs, preconditioner=None, x=None, tol=1e-5, max_iter=20,
                       name="conjugate_gradient"):
    """Solves operator x = rhs for a self-adjoint positive definite operator by (preconditioned)
    conjugate gradients, stopping after max_iter steps or when every residual's norm is at most
    tol * |rhs| (tf.linalg.experimental.conjugate_gradient). Returns CGState(i, x, r, p, gamma)."""
    from actorflow.graph.control_flow import while_loop
    from actorflow.graph.ops.constant import constant
    from actorflow.graph.ops.math_more_ops import norm
    if not (operator.is_self_adjoint and operator.is_positive_definite):
        raise ValueError("Expected a self-adjoint, positive definite operator.")

    def dot(a, b):
        return math_ops.reduce_sum(a * b, axis=-1)

    def cond(i, x, r, p, gamma):
        return math_ops.logical_and(i < max_iter, math_ops.reduce_any(norm(r, axis=-1) > tol_))

    def body(i, x, r, p, gamma):
        z = operator.matvec(p)
        alpha = gamma / dot(p, z)
        x = x + array_ops.expand_dims(alpha, -1) * p
        r = r - array_ops.expand_dims(alpha, -1) * z
        q = r if preconditioner is None else preconditioner.matvec(r)
        new_gamma = dot(r, q)
        p = q + array_ops.expand_dims(new_gamma / gamma, -1) * p
        return i + 1, x, r, p, new_gamma

    rhs = convert_to_tensor(rhs, dtype=operator.dtype, name="rhs")
    batch = operator.batch_shape
    if preconditioner is not None:
        from actorflow.graph.ops.infer import broadcast_shapes
        batch = broadcast_shapes(batch, preconditioner.batch_shape)
    r0 = _batch_matmul_shape(batch, array_ops.expand_dims(rhs, -1))[..., 0]
    tol_ = tol * norm(r0, axis=-1)
    if x is None:
        x = array_ops.zeros_like(r0)
    else:
        x = convert_to_tensor(x, dtype=operator.dtype, name="x")
        r0 = rhs - operator.matvec(x)
    p0 = r0 if preconditioner is None else preconditioner.matvec(r0)
    out = while_loop(cond, body, [constant(0, dtype=dtypes.int32), x, r0, p0, dot(r0, p0)], name=name)
    return CGState(*out)
