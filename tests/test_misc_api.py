"""Smaller TF-1.x APIs: tf.math reductions and counts, sampling ops, ensure_shape, reverse_sequence,
setdiff1d, unravel_index, qr, orthogonal_initializer, tuple, make_template, the variable reports."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af

X = np.array([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])


def _run(*ts, feed=None):
    with af.Session() as s:
        return s.run(list(ts), feed)


def test_math_reductions_norms_and_counts():
    with af.Graph().as_default():
        x = af.constant(X)
        got = _run(af.math.reduce_variance(x), af.math.reduce_std(x, 1), af.math.reduce_euclidean_norm(x, 0),
                   af.norm(x), af.norm(x, ord=1, axis=1), af.norm(x, ord=np.inf, axis=[0, 1]),
                   af.norm(x, ord=3, axis=0, keepdims=True))
        assert got[0] == pytest.approx(np.var(X))
        np.testing.assert_allclose(got[1], np.std(X, 1))
        np.testing.assert_allclose(got[2], np.linalg.norm(X, axis=0))
        assert got[3] == pytest.approx(np.linalg.norm(X))
        np.testing.assert_allclose(got[4], np.abs(X).sum(1))
        assert got[5] == pytest.approx(np.linalg.norm(X, np.inf))
        np.testing.assert_allclose(got[6], [np.cbrt((np.abs(X) ** 3).sum(0))])
        cm, bc, bw, rn, sc = _run(af.confusion_matrix([0, 1, 2, 1], [0, 2, 2, 1]), af.bincount([1, 1, 3, 0], minlength=6),
                                  af.bincount([1, 1, 3], weights=[0.5, 1.0, 2.0], maxlength=3, dtype=af.float32),
                                  af.math.reciprocal_no_nan(af.constant([0.0, 2.0])),
                                  af.saturate_cast(af.constant([300.0, -5.0, 7.5]), af.uint8))
        np.testing.assert_array_equal(cm, [[1, 0, 0], [0, 1, 1], [0, 0, 1]])
        np.testing.assert_array_equal(bc, [1, 2, 0, 1, 0, 0])
        np.testing.assert_array_equal(bw, [0.0, 1.5, 0.0])
        np.testing.assert_array_equal(rn, [0.0, 0.5])
        np.testing.assert_array_equal(sc, [255, 0, 7])
        (g,) = af.gradients(af.math.reduce_std(x), x)
        np.testing.assert_allclose(_run(g)[0], (X - X.mean()) / (X.size * np.std(X)))
        assert af.math.softmax is af.nn.softmax and af.math.divide_no_nan is af.div_no_nan


def test_sampling_is_seeded_and_distributed():
    with af.Graph().as_default():
        logits = af.constant(np.log([[0.7, 0.2, 0.1], [0.5, 0.5, 0.0]]))
        m = af.multinomial(logits, 20000, seed=3)
        assert m.shape.as_list() == [2, 20000] and m.dtype == af.int64
        c = af.random.categorical(af.constant([[0.0, -np.inf]]), 7, dtype=af.int32, seed=1)
        sh = af.random_shuffle(af.range(10), seed=5)
        mv, cv, s1 = _run(m, c, sh)
        np.testing.assert_allclose(np.bincount(mv[0], minlength=3) / 20000, [0.7, 0.2, 0.1], atol=0.015)
        assert (mv[1] != 2).all() and cv.tolist() == [[0] * 7] and cv.dtype == np.int32
        with af.Session() as sess:
            first, second = sess.run(sh).tolist(), sess.run(sh).tolist()
        assert sorted(s1.tolist()) == list(range(10)) and first != second    # a new permutation every run
        assert first == s1.tolist()                                  # the op's seed replays in a new session


def test_shape_and_sequence_utilities():
    with af.Graph().as_default():
        p = af.placeholder(af.float32, [None, None], name="p")
        e = af.ensure_shape(p, [None, 3])
        assert e.shape.as_list() == [None, 3]
        with pytest.raises(ValueError, match="not compatible"):
            af.ensure_shape(af.ones([2, 2]), [3, None])
        seqs = af.constant(np.arange(12).reshape(2, 6))
        rs = af.reverse_sequence(seqs, [3, 6], seq_axis=1, batch_axis=0)
        d, i = af.setdiff1d([1, 2, 3, 4, 6], [1, 6])
        u = af.unravel_index([1, 5, 7], [3, 3])
        q, r = af.linalg.qr(af.constant(X.T))
        with af.Session() as s:
            np.testing.assert_array_equal(s.run(e, {p: np.ones((2, 3))}), np.ones((2, 3)))
            with pytest.raises(af.errors.InvalidArgumentError, match=r"is not compatible with expected shape \[\?,3\]"):
                s.run(e, {p: np.ones((2, 2))})
            rv, dv, iv, uv, qv, rv2 = s.run([rs, d, i, u, q, r])
        np.testing.assert_array_equal(rv, [[2, 1, 0, 3, 4, 5], [11, 10, 9, 8, 7, 6]])
        assert dv.tolist() == [2, 3, 4] and iv.tolist() == [1, 2, 3]
        np.testing.assert_array_equal(uv, [[0, 1, 2], [1, 2, 1]])
        np.testing.assert_allclose(qv @ rv2, X.T, atol=1e-12)


def test_reverse_sequence_gradient_and_errors():
    with af.Graph().as_default():
        x = af.constant(np.arange(8.0).reshape(2, 4))
        y = af.reverse_sequence(x, [2, 4], seq_axis=1)
        (g,) = af.gradients(af.reduce_sum(y * np.arange(8.0).reshape(2, 4)), x)
        bad = af.reverse_sequence(x, af.placeholder(af.int64, [2], name="lens"), seq_axis=1)
        with af.Session() as s:
            np.testing.assert_array_equal(s.run(g), [[1, 0, 2, 3], [7, 6, 5, 4]])
            with pytest.raises(af.errors.InvalidArgumentError, match=r"seq_lens\(1\) > input.dims\(1\): 9 vs. 4"):
                s.run(bad, {"lens:0": [1, 9]})


def test_orthogonal_initializer_tuple_and_templates():
    with af.Graph().as_default():
        w = af.get_variable("w", [6, 4], initializer=af.orthogonal_initializer(gain=2.0, seed=1))
        v = af.get_variable("v", [3, 5], initializer=af.orthogonal_initializer(seed=2))
        a, b = af.tuple([af.constant(1.0), af.constant(2.0)])

        def net(x):
            k = af.get_variable("k", [2], initializer=af.ones_initializer())
            return x * k
        t = af.make_template("net", net)
        y1, y2 = t(af.constant([1.0, 2.0])), t(af.constant([3.0, 4.0]))
        t2 = af.make_template("net", net)
        t2(af.constant([0.0, 0.0]))
        assert [x.op.name for x in t.variables] == ["net/k"] and [x.op.name for x in t2.variables] == ["net_1/k"]
        with af.Session() as s:
            assert s.run(af.report_uninitialized_variables()).tolist() == [b"w", b"v", b"net/k", b"net_1/k"]
            with pytest.raises(af.errors.FailedPreconditionError, match="uninitialized"):
                s.run(af.assert_variables_initialized())
            s.run(af.global_variables_initializer())
            assert s.run(af.report_uninitialized_variables()).tolist() == []
            wv, vv = s.run([w, v])
            np.testing.assert_allclose(wv.T @ wv, 4.0 * np.eye(4), atol=1e-5)
            np.testing.assert_allclose(vv @ vv.T, np.eye(3), atol=1e-5)
            assert s.run([a, b, y1, y2]) == [1.0, 2.0, pytest.approx([1.0, 2.0]), pytest.approx([3.0, 4.0])]


def test_error_codes_and_saved_model_constants(tmp_path):
    assert af.errors.OK == 0 and af.errors.UNAUTHENTICATED == 16
    assert af.errors.exception_type_from_error_code(af.errors.OUT_OF_RANGE) is af.errors.OutOfRangeError
    assert af.errors.error_code_from_exception_type(af.errors.UnauthenticatedError) == 16
    with pytest.raises(KeyError):
        af.errors.exception_type_from_error_code(0)
    assert af.saved_model.PREDICT_INPUTS == "inputs" and af.saved_model.VARIABLES_DIRECTORY == "variables"
    assert not af.saved_model.contains_saved_model(str(tmp_path))
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None], name="x")
        with af.Session() as s:
            af.saved_model.simple_save(s, str(tmp_path / "m"), {"x": x}, {"y": x * 2.0})
    assert af.saved_model.contains_saved_model(str(tmp_path / "m"))


def test_gamma_poisson_and_stateless_samplers():
    with af.Graph().as_default():
        g = af.random.gamma([20000], [2.0, 5.0], seed=1)
        gb = af.random_gamma([20000], 3.0, beta=2.0, seed=2)
        p = af.random.poisson([1.0, 7.5], [20000], seed=3)
        assert g.shape.as_list() == [20000, 2] and p.shape.as_list() == [20000, 2]
        su = af.random.stateless_uniform([4], seed=[1, 2], minval=-1.0, maxval=1.0)
        st = af.random.stateless_truncated_normal([1000], seed=[1, 1])
        sc = af.random.stateless_categorical([[0.0, -np.inf]], 5, seed=[7, 7])
        other = af.random.stateless_uniform([4], seed=[1, 3], minval=-1.0, maxval=1.0)
        with af.Session() as s:
            gv, gbv, pv, a, tv, cv, ov = s.run([g, gb, p, su, st, sc, other])
            again = s.run(su)
        alpha = af.constant(2.0)
        # TF's implicit reparameterization gradient (RandomGammaGrad): E[d x / d alpha] = 1 per sample
        ga = af.gradients(af.reduce_sum(af.random.gamma([4000], alpha, seed=4)), alpha)[0]
        with af.Session() as s:
            assert abs(s.run(ga) / 4000 - 1.0) < 0.05
    np.testing.assert_allclose(gv.mean(0), [2.0, 5.0], rtol=0.03)
    assert abs(gbv.mean() - 1.5) < 0.03 and pv.dtype == np.float32
    np.testing.assert_allclose(pv.mean(0), [1.0, 7.5], rtol=0.03)
    assert np.array_equal(a, again) and not np.array_equal(a, ov) and (np.abs(a) <= 1).all()
    assert np.abs(tv).max() <= 2.0 and cv.tolist() == [[0] * 5]
    with af.Graph().as_default():                       # the same seed in another graph and session
        with af.Session() as s:
            np.testing.assert_array_equal(s.run(af.random.stateless_uniform([4], seed=[1, 2], minval=-1.0,
                                                                              maxval=1.0)), a)
