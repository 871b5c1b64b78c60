"""tf.contrib.crf against brute force: every tag sequence enumerated for the scores, the log
partition function and Viterbi; the log-likelihood's gradients against finite differences of the
enumeration."""
import itertools

import numpy as np
import pytest

import actorflow as af

crf = af.contrib.crf


def _score(u, tags, trans):
    return sum(u[t, y] for t, y in enumerate(tags)) + sum(trans[a, b] for a, b in zip(tags, tags[1:]))


def _brute(u, n, trans):
    """(log partition, best sequence, best score) over sequences of the first n steps."""
    if n == 0:
        return 0.0, [], 0.0
    seqs = list(itertools.product(range(u.shape[1]), repeat=n))
    scores = np.array([_score(u, s, trans) for s in seqs])
    m = scores.max()
    return m + np.log(np.exp(scores - m).sum()), list(seqs[int(np.argmax(scores))]), m


def _problem(seed, batch=4, time=4, tags=3):
    rng = np.random.default_rng(seed)
    u = rng.normal(size=(batch, time, tags))
    trans = rng.normal(size=(tags, tags))
    y = rng.integers(0, tags, (batch, time)).astype(np.int32)
    return u, trans, y


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log_likelihood_matches_enumeration(dtype):
    u, trans, y = _problem(0)
    lengths = np.array([4, 3, 1, 0], np.int32)
    ll, tp = crf.crf_log_likelihood(u.astype(dtype), y, lengths, af.constant(trans.astype(dtype)))
    score = crf.crf_sequence_score(u.astype(dtype), y, lengths, trans.astype(dtype))
    norm = crf.crf_log_norm(u.astype(dtype), lengths, trans.astype(dtype))
    ll_v, score_v, norm_v = af.Session().run([ll, score, norm])
    for b, n in enumerate(lengths):
        logz = _brute(u[b], n, trans)[0]
        want_score = _score(u[b], list(y[b, :n]), trans) if n else 0.0
        tol = 1e-5 if dtype == np.float32 else 1e-10
        np.testing.assert_allclose(score_v[b], want_score, rtol=tol, atol=tol)
        np.testing.assert_allclose(norm_v[b], logz, rtol=tol, atol=tol)
        np.testing.assert_allclose(ll_v[b], want_score - logz, rtol=tol, atol=tol)
    assert ll_v.dtype == dtype


def test_single_step_inputs():
    u, trans, y = _problem(1, time=1)
    lengths = np.array([1, 1, 0, 1], np.int32)
    ll, _ = crf.crf_log_likelihood(u, y, lengths, trans)
    tags, best = crf.crf_decode(u, trans, lengths)
    ll_v, tags_v, best_v = af.Session().run([ll, tags, best])
    for b, n in enumerate(lengths):
        logz = _brute(u[b], n, trans)[0]
        np.testing.assert_allclose(ll_v[b], (u[b, 0, y[b, 0]] - logz) if n else 0.0, rtol=1e-10)
    np.testing.assert_array_equal(tags_v[:, 0], np.argmax(u[:, 0], 1))
    np.testing.assert_allclose(best_v, u[:, 0].max(1))


def test_transitions_variable_is_created_and_trained():
    u, trans, y = _problem(2)
    lengths = np.array([4, 4, 2, 3], np.int32)
    x = af.placeholder(af.float64, [None, 4, 3])
    with af.variable_scope("crf_layer"):
        ll, tp = crf.crf_log_likelihood(x, y, lengths)
    assert tp.name == "crf_layer/transitions:0" or tp.op.name.startswith("crf_layer/transitions")
    loss = -af.reduce_mean(ll)
    step = af.train.GradientDescentOptimizer(0.5).minimize(loss)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        first = s.run(loss, {x: u})
        for _ in range(30):
            s.run(step, {x: u})
        assert s.run(loss, {x: u}) < first - 0.1


def test_gradients_match_finite_differences():
    u, trans, y = _problem(3, batch=2, time=3)
    lengths = np.array([3, 2], np.int32)
    x = af.constant(u)
    t = af.constant(trans)
    ll, _ = crf.crf_log_likelihood(x, y, lengths, t)
    gx, gt = af.gradients(af.reduce_sum(ll), [x, t])
    gx_v, gt_v = af.Session().run([gx, gt])

    def f(uu, tt):
        return sum(_score(uu[b], list(y[b, :n]), tt) - _brute(uu[b], n, tt)[0] for b, n in enumerate(lengths))
    eps = 1e-6
    for idx in np.ndindex(u.shape):
        d = np.zeros_like(u)
        d[idx] = eps
        np.testing.assert_allclose(gx_v[idx], (f(u + d, trans) - f(u - d, trans)) / (2 * eps), atol=1e-6)
    for idx in np.ndindex(trans.shape):
        d = np.zeros_like(trans)
        d[idx] = eps
        np.testing.assert_allclose(gt_v[idx], (f(u, trans + d) - f(u, trans - d)) / (2 * eps), atol=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_decode_matches_enumeration_and_numpy_viterbi(seed):
    u, trans, _ = _problem(seed, batch=5, time=5, tags=4)
    lengths = np.array([5, 4, 2, 1, 3], np.int32)
    tags, best = crf.crf_decode(af.constant(u), af.constant(trans), lengths)
    tags_v, best_v = af.Session().run([tags, best])
    assert tags_v.dtype == np.int32 and tags_v.shape == (5, 5)
    for b, n in enumerate(lengths):
        _, seq, m = _brute(u[b], n, trans)
        assert list(tags_v[b, :n]) == seq
        assert list(tags_v[b, n:]) == [0] * (5 - n)
        np.testing.assert_allclose(best_v[b], m, rtol=1e-10)
        path, score = crf.viterbi_decode(u[b, :n], trans)
        assert path == seq
        np.testing.assert_allclose(score, m, rtol=1e-10)


def test_multitag_score_and_dynamic_time():
    u, trans, y = _problem(4)
    lengths = np.array([4, 2, 3, 1], np.int32)
    bitmap = np.zeros(u.shape, bool)
    bitmap[np.arange(4)[:, None], np.arange(4)[None, :], y] = True     # one allowed tag: the plain score
    x = af.placeholder(af.float64, [None, None, 3])
    multi = crf.crf_multitag_sequence_score(x, bitmap, lengths, trans)
    plain = crf.crf_sequence_score(x, y, lengths, trans)
    tags, _ = crf.crf_decode(x, trans, lengths)
    with af.Session() as s:
        m, p, _ = s.run([multi, plain, tags], {x: u})
    np.testing.assert_allclose(m, p, rtol=1e-10)


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="viterbi_decode"):
        crf.viterbi_decode(np.zeros((3, 2)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="number of tags"):
        crf.crf_log_likelihood(af.placeholder(af.float32, [2, 3, None]), np.zeros((2, 3), np.int32), [3, 3])
