"""Dense linear algebra (graph/ops/linalg_ops.py) against TensorFlow 2.21's values and gradients
(tests/fixtures/make_linalg.py: the same expressions, with `tf` bound to actorflow), against
finite differences where the fixture has no gradient, and its errors."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from tests import tf_reference
from tests.gradcheck import check_gradients

FIX = tf_reference.load("linalg.json")


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_and_gradients_match_tensorflow(expr):
    tf_reference.check(FIX, expr)


rng = np.random.default_rng(3)
A = rng.standard_normal((2, 4, 4)) + 4 * np.eye(4)
M = rng.standard_normal((2, 4, 4))
SPD = M @ np.swapaxes(M, -1, -2) + 4 * np.eye(4)


def _sym(x):
    return x + af.linalg.adjoint(x)


@pytest.mark.parametrize("build, inputs", [
    (lambda x: af.matrix_inverse(x), [A]),
    (lambda x: af.linalg.det(x), [A]),
    (lambda x: af.linalg.slogdet(x)[1], [A]),
    (lambda x: af.cholesky(_sym(x)), [SPD / 2]),
    (lambda x, b: af.matrix_solve(x, b, adjoint=True), [A, M[..., :2]]),
    (lambda x, b: af.matrix_triangular_solve(x, b, lower=False), [A, M[0, :, :3]]),
    (lambda x: af.linalg.eigh(_sym(x))[0], [SPD / 2]),
    (lambda x: af.svd(x, compute_uv=False), [A]),
    (lambda x: af.linalg.logdet(_sym(x)), [SPD / 2]),
    (lambda x: af.linalg.lstsq(x, x[..., :1], l2_regularizer=0.1), [M[:, :, :3]]),
    (lambda x: af.linalg.qr(x)[0] * af.sign(af.expand_dims(af.linalg.diag_part(af.linalg.qr(x)[1]), -2)),
     [A[0, :, :3]]),
])
def test_gradients_against_finite_differences(build, inputs):
    """Batches of 4x4 matrices, and symmetric inputs (where TF's gradient reads one triangle, x + x^T
    makes the function of every entry)."""
    got, want = check_gradients(build, inputs, rtol=1e-5, atol=1e-6)
    assert all(np.all(np.isfinite(g)) for g in got)


def test_reconstructions_and_numpy_agreement():
    with af.Graph().as_default():
        x = af.constant(A)
        e, v = af.self_adjoint_eig(af.constant(SPD))
        s, u, vv = af.svd(x[..., :3], full_matrices=True)
        q, r = af.qr(x)
        ls = af.matrix_solve_ls(x[..., :3], x[..., :1], fast=False)
        with af.Session() as sess:
            ev, vv_, sv, uv, vvv, qv, rv, lsv = sess.run([e, v, s, u, vv, q, r, ls])
    np.testing.assert_allclose(vv_ @ (ev[..., None] * np.swapaxes(vv_, -1, -2)), SPD, atol=1e-10)
    np.testing.assert_allclose(ev, np.linalg.eigvalsh(SPD), rtol=1e-12)
    assert uv.shape == (2, 4, 4) and vvv.shape == (2, 3, 3) and sv.shape == (2, 3)
    np.testing.assert_allclose(uv[..., :3] * sv[..., None, :] @ np.swapaxes(vvv, -1, -2), A[..., :3], atol=1e-10)
    np.testing.assert_allclose(qv @ rv, A, atol=1e-12)
    np.testing.assert_allclose(lsv, np.stack([np.linalg.lstsq(a[:, :3], a[:, :1], rcond=None)[0] for a in A]),
                               atol=1e-12)


def test_static_shapes_and_top_level_names():
    assert af.linalg.inv is af.matrix_inverse and af.linalg.eigh is af.self_adjoint_eig
    assert af.linalg.lstsq is af.matrix_solve_ls and af.linalg.norm is af.norm
    with af.Graph().as_default():
        x = af.placeholder(af.float64, [None, 5, 3])
        s, u, v = af.svd(x)
        assert s.shape.as_list() == [None, 3] and u.shape.as_list() == [None, 5, 3]
        assert v.shape.as_list() == [None, 3, 3]
        assert af.svd(x, full_matrices=True)[1].shape.as_list() == [None, 5, 5]
        sq = af.placeholder(af.float32, [2, 4, 4])
        assert af.matrix_determinant(sq).shape.as_list() == [2]
        assert af.linalg.triangular_solve(sq, af.ones([3, 1, 4, 2])).shape.as_list() == [3, 2, 4, 2]
        with pytest.raises(ValueError, match="square"):
            af.matrix_inverse(x)
        with pytest.raises(ValueError, match="float32 or float64"):
            af.cholesky(af.ones([2, 2], dtype=af.int32))
        with pytest.raises(ValueError, match="same number of rows"):
            af.matrix_solve(sq, af.ones([2, 3, 1]))


def test_singular_and_not_positive_definite_inputs_fail_naming_the_op():
    with af.Graph().as_default():
        p = af.placeholder(af.float64, [None, 2, 2], name="p")
        inv = af.matrix_inverse(p, name="my_inverse")
        chol = af.cholesky(p, name="my_cholesky")
        solve = af.matrix_solve(p, af.ones([1, 2, 1], af.float64), name="my_solve")
        det = af.matrix_determinant(p)
        sign, logabs = af.linalg.slogdet(p)
        with af.Session() as s:
            singular = np.array([[[1.0, 2.0], [2.0, 4.0]]])
            with pytest.raises(af.errors.InvalidArgumentError, match="Input is not invertible.") as e:
                s.run(inv, {p: singular})
            assert "my_inverse" in str(e.value)
            with pytest.raises(af.errors.InvalidArgumentError, match="Input matrix is not invertible.") as e:
                s.run(solve, {p: singular})
            assert "my_solve" in str(e.value)
            with pytest.raises(af.errors.InvalidArgumentError, match="Cholesky decomposition was not successful. "
                                                                      "The input might not be valid.") as e:
                s.run(chol, {p: -np.eye(2)[None]})
            assert "my_cholesky" in str(e.value)
            d, sg, la = s.run([det, sign, logabs], {p: singular})
            assert d.tolist() == [0.0] and sg.tolist() == [0.0] and la.tolist() == [-np.inf]
            # The session still works after a failed step.
            np.testing.assert_allclose(s.run(inv, {p: 2 * np.eye(2)[None]}), 0.5 * np.eye(2)[None])


def test_unsupported_gradients_are_errors():
    with af.Graph().as_default():
        x = af.constant(A[..., :3])
        with pytest.raises(ValueError, match="fast=False"):
            af.gradients(af.matrix_solve_ls(x, x[..., :1], fast=False), x)
        with pytest.raises(NotImplementedError, match="full_matrices is true"):
            af.gradients(af.qr(x, full_matrices=True)[1], x)
        y = af.constant(np.ones((5, 2)))
        with pytest.raises(NotImplementedError, match="abs\\(m - n\\) > 1"):
            af.gradients(af.svd(y, full_matrices=True)[1], y)


def test_shapes_known_only_at_run_time():
    """Gradients built for placeholders of unknown batch, rank or matrix size: Cholesky's identity,
    the adjoint of an unknown rank, and lstsq's cond between its over- and underdetermined forms."""
    with af.Graph().as_default():
        p = af.placeholder(af.float64, [None, 4, 4])
        gc = af.gradients(af.reduce_sum(af.cholesky(p) * af.constant(M[0])), p)[0]
        q = af.placeholder(af.float64, None)
        ge = af.gradients(af.reduce_sum(af.linalg.eigh(q)[0] * [1.0, 2.0, 3.0, 4.0]), q)[0]
        m = af.placeholder(af.float64, [None, None])
        b = af.placeholder(af.float64, [None, 1])
        x = af.linalg.lstsq(m, b)
        gm = af.gradients(af.reduce_sum(x), m)[0]
        with af.Session() as s:
            gcv, gev = s.run([gc, ge], {p: SPD, q: SPD})
            with af.Graph().as_default():
                c = af.constant(SPD)
                want_c = af.gradients(af.reduce_sum(af.cholesky(c) * af.constant(M[0])), c)[0]
                want_e = af.gradients(af.reduce_sum(af.linalg.eigh(c)[0] * [1.0, 2.0, 3.0, 4.0]), c)[0]
                with af.Session() as s2:
                    np.testing.assert_allclose(gcv, s2.run(want_c), rtol=1e-12)
                    np.testing.assert_allclose(gev, s2.run(want_e), rtol=1e-12)
            for shape in [(5, 3), (3, 5)]:
                a, rhs = rng.standard_normal(shape), rng.standard_normal((shape[0], 1))
                xv, gmv = s.run([x, gm], {m: a, b: rhs})
                np.testing.assert_allclose(xv, np.linalg.lstsq(a, rhs, rcond=None)[0], atol=1e-12)
                assert gmv.shape == shape


def test_tied_eigenvalues_and_singular_values_give_finite_gradients():
    """TF's guard: 1/(e_i - e_j) is broadened to (e_i - e_j)/((e_i - e_j)^2 + 1e-20), so the gradient
    through eigenvectors or singular vectors of the identity is finite rather than NaN."""
    with af.Graph().as_default():
        x = af.constant(np.eye(3))
        ge = af.gradients(af.reduce_sum(af.linalg.eigh(x)[1]), x)[0]
        gs = af.gradients(af.reduce_sum(af.svd(x)[1]), x)[0]
        with af.Session() as s:
            assert np.isfinite(s.run(ge)).all() and np.isfinite(s.run(gs)).all()


def test_singular_constant_fails_at_run_time_naming_the_op():
    with af.Graph().as_default():
        y = af.matrix_inverse(af.constant([[1.0, 2.0], [2.0, 4.0]]), name="const_inverse")
        with af.Session() as s:
            with pytest.raises(af.errors.InvalidArgumentError, match="Input is not invertible") as e:
                s.run(y)
            assert "const_inverse" in str(e.value)


@pytest.mark.parametrize("batch", [(), (12,)])          # one matrix: BLAS trsm; many small ones: substitution
@pytest.mark.parametrize("lower, adjoint", [(True, False), (True, True), (False, False), (False, True)])
def test_triangular_solve_reads_one_triangle_and_divides_by_zero_as_tf(batch, lower, adjoint):
    a = rng.standard_normal(batch + (5, 5)) + 5 * np.eye(5)
    b = rng.standard_normal(batch + (5, 2))
    tri = np.tril(a) if lower else np.triu(a)
    want = np.linalg.solve(np.swapaxes(tri, -1, -2) if adjoint else tri, b)
    with af.Graph().as_default():
        p = af.placeholder(af.float64, None)
        x = af.linalg.triangular_solve(p, af.constant(b), lower=lower, adjoint=adjoint)
        with af.Session() as s:
            np.testing.assert_allclose(s.run(x, {p: a}), want, rtol=1e-10, atol=1e-12)
            zero = a.copy()
            zero[..., 0, 0] = 0.0
            assert not np.isfinite(s.run(x, {p: zero})).all()
