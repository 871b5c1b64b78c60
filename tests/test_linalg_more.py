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
