"""The tf.linalg.LinearOperator classes (graph/ops/linear_operator.py) against TensorFlow 2.21's values and gradients
(tests/fixtures/make_linear_operator.py), and their shape errors."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from tests import tf_reference

FIX = tf_reference.load("linear_operator.json")


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_and_gradients_match_tensorflow(expr):
    tf_reference.check(FIX, expr)



def test_shapes_hints_and_errors():
    L = af.linalg
    with af.Graph().as_default():
        full = L.LinearOperatorFullMatrix(np.ones((2, 3, 4)))
        assert full.shape.as_list() == [2, 3, 4] and full.batch_shape.as_list() == [2]
        assert full.domain_dimension == 4 and full.range_dimension == 3 and full.tensor_rank == 3
        assert full.is_square is False and full.adjoint().shape.as_list() == [2, 4, 3]
        with pytest.raises(NotImplementedError, match="non-square"):
            full.determinant()
        with pytest.raises(ValueError, match="non square"):
            full.inverse()
        diag = L.LinearOperatorDiag(np.array([1.0, 2.0]), is_positive_definite=True)
        assert diag.is_self_adjoint and diag.is_non_singular and diag.is_square
        assert isinstance(diag.inverse(), L.LinearOperatorDiag) and diag.adjoint() is diag
        assert isinstance(L.LinearOperatorFullMatrix(np.eye(2)).matmul(diag), L.LinearOperatorComposition)
        with pytest.raises(ValueError, match="positive definite matrix is always non-singular"):
            L.LinearOperatorFullMatrix(np.eye(2), is_positive_definite=True, is_non_singular=False)
        with pytest.raises(ValueError, match="Cholesky"):
            L.LinearOperatorFullMatrix(np.eye(2)).cholesky()
        zeros = L.LinearOperatorZeros(2)
        with pytest.raises(NotImplementedError, match="singular"):
            zeros.solve(np.ones((2, 1), np.float32))
        with pytest.raises(ValueError, match="singular"):
            zeros.inverse()
        ident = L.LinearOperatorIdentity(3, batch_shape=[2])
        assert ident.inverse() is ident and ident.shape.as_list() == [2, 3, 3]
        with af.Session() as s:
            got = s.run(ident.matmul(np.ones((3, 1), np.float32)))
        assert got.shape == (2, 3, 1)
