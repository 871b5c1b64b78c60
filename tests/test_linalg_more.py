"""The tf.linalg composites of graph/ops/linalg_more_ops.py against TensorFlow 2.21's values and gradients
(tests/fixtures/make_linalg_more.py), and their shape errors."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from tests import tf_reference

FIX = tf_reference.load("linalg_more.json")


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_and_gradients_match_tensorflow(expr):
    tf_reference.check(FIX, expr)


def test_tridiagonal_formats_agree_and_bad_shapes_fail():
    rng = np.random.default_rng(0)
    d = rng.standard_normal((3, 5)) + np.array([[0.0], [4.0], [0.0]])
    dense = np.diag(d[1]) + np.diag(d[0, :-1], 1) + np.diag(d[2, 1:], -1)
    b = rng.standard_normal((5, 2))
    with af.Graph().as_default():
        outs = [af.linalg.tridiagonal_solve(d, b), af.linalg.tridiagonal_solve(dense, b, diagonals_format="matrix"),
                af.linalg.tridiagonal_matmul(d, b)]
        with af.Session() as s:
            x, xm, y = s.run(outs)
        np.testing.assert_allclose(x, np.linalg.solve(dense, b), rtol=1e-12)
        np.testing.assert_allclose(xm, x, rtol=1e-12)
        np.testing.assert_allclose(y, dense @ b, rtol=1e-12)
        with pytest.raises(ValueError, match="Expected 3 diagonals"):
            af.linalg.tridiagonal_solve(np.ones((4, 5)), b)
        with pytest.raises(ValueError, match="rank of rhs"):
            af.linalg.tridiagonal_solve(d, np.ones((1, 1, 5, 2)))
        with pytest.raises(ValueError, match="left-hand sided and right-hand sides"):
            af.linalg.tridiagonal_solve(d, np.ones((4, 2)))
        with pytest.raises(ValueError, match="Unrecognized diagonals_format"):
            af.linalg.tridiagonal_matmul(d, b, diagonals_format="banded")


def test_lu_errors_and_missing_gradient():
    with af.Graph().as_default():
        p = af.placeholder(af.float64, [2, 2])
        lu, perm = af.linalg.lu(p, name="my_lu")
        with pytest.raises(LookupError, match="Lu"):
            af.gradients(af.reduce_sum(lu), p)
        with af.Session() as s:
            with pytest.raises(af.errors.InvalidArgumentError, match="Input is not invertible.") as e:
                s.run(lu, {p: [[1.0, 2.0], [2.0, 4.0]]})
            assert "my_lu" in str(e.value)
            got, pv = s.run([lu, perm], {p: [[1.0, 2.0], [4.0, 3.0]]})
        np.testing.assert_allclose(got, [[4.0, 3.0], [0.25, 1.25]])
        assert pv.tolist() == [1, 0]
        with pytest.raises(ValueError, match="square"):
            af.linalg.expm(af.ones([2, 3], af.float64))


def test_expm_and_sqrtm_gradients_against_finite_differences():
    from tests.gradcheck import check_gradients
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 3, 3))
    m = rng.standard_normal((3, 3))
    check_gradients(lambda x: af.linalg.expm(x), [a], rtol=1e-5, atol=1e-6)
    check_gradients(lambda x: af.linalg.sqrtm(x), [m @ m.T + 3 * np.eye(3)], rtol=1e-5, atol=1e-6)


def test_sqrtm_without_a_real_root_is_nan():
    with af.Graph().as_default():
        r = af.linalg.sqrtm(af.constant([[-1.0, 0.0], [0.0, 4.0]], af.float64))
        with af.Session() as s:
            assert np.isnan(s.run(r)).any()


def test_eigh_tridiagonal_gradient_against_finite_differences():
    from tests.gradcheck import check_gradients
    alpha, beta = np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.5, 0.3, -0.2])
    check_gradients(lambda a, b: af.linalg.eigh_tridiagonal(a, b), [alpha, beta], rtol=1e-5, atol=1e-6)
    with af.Graph().as_default(), pytest.raises(ValueError, match="select"):
        af.linalg.eigh_tridiagonal(alpha, beta, select="x")
