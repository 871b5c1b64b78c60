"""tf.contrib.distributions' multivariate normals against scipy.stats and the closed-form KL."""
import numpy as np
import pytest
from scipy.stats import multivariate_normal

import actorflow as af

D = af.contrib.distributions


def _kl(m_a, c_a, m_b, c_b):
    k = len(m_a)
    inv = np.linalg.inv(c_b)
    d = m_b - m_a
    return 0.5 * (np.trace(inv @ c_a) + d @ inv @ d - k + np.log(np.linalg.det(c_b) / np.linalg.det(c_a)))


def _tril(rng, k):
    a = np.tril(rng.normal(size=(k, k)))
    a[np.diag_indices(k)] = np.abs(a[np.diag_indices(k)]) + 0.5
    return a


def test_tril_full_covariance_and_diag_match_scipy():
    rng = np.random.default_rng(0)
    k = 3
    locs = rng.normal(size=(2, k))
    tril = np.stack([_tril(rng, k) for _ in range(2)])
    diag = rng.uniform(0.5, 2.0, (2, k))
    x = rng.normal(size=(4, 2, k))
    dists = {"tril": (D.MultivariateNormalTriL(locs, tril), [t @ t.T for t in tril]),
             "full": (D.MultivariateNormalFullCovariance(locs, np.stack([t @ t.T for t in tril])),
                      [t @ t.T for t in tril]),
             "diag": (D.MultivariateNormalDiag(locs, diag), [np.diag(d ** 2) for d in diag])}
    with af.Session() as s:
        for name, (d, covs) in dists.items():
            assert d.batch_shape.as_list() == [2] and d.event_shape.as_list() == [k]
            lp, ent, mean, cov, var = s.run([d.log_prob(x), d.entropy(), d.mean(), d.covariance(), d.variance()])
            for b in range(2):
                ref = multivariate_normal(locs[b], covs[b])
                np.testing.assert_allclose(lp[:, b], ref.logpdf(x[:, b]), rtol=1e-10, err_msg=name)
                np.testing.assert_allclose(ent[b], ref.entropy(), rtol=1e-10, err_msg=name)
                np.testing.assert_allclose(cov[b], covs[b], rtol=1e-10, err_msg=name)
                np.testing.assert_allclose(var[b], np.diag(covs[b]), rtol=1e-10, err_msg=name)
            np.testing.assert_allclose(mean, locs)


@pytest.mark.parametrize("kind", ["diag", "tril"])
def test_kl_divergence_closed_form(kind):
    rng = np.random.default_rng(1)
    k = 4
    m_a, m_b = rng.normal(size=k), rng.normal(size=k)
    if kind == "diag":
        s_a, s_b = rng.uniform(0.5, 2, k), rng.uniform(0.5, 2, k)
        a, b = D.MultivariateNormalDiag(m_a, s_a), D.MultivariateNormalDiag(m_b, s_b)
        c_a, c_b = np.diag(s_a ** 2), np.diag(s_b ** 2)
    else:
        t_a, t_b = _tril(rng, k), _tril(rng, k)
        a, b = D.MultivariateNormalTriL(m_a, t_a), D.MultivariateNormalDiag(m_b, np.diag(t_b))
        c_a, c_b = t_a @ t_a.T, np.diag(np.diag(t_b) ** 2)
    kl = af.Session().run(D.kl_divergence(a, b))
    np.testing.assert_allclose(kl, _kl(m_a, c_a, m_b, c_b), rtol=1e-10)


def test_samples_are_reparameterized_and_have_the_right_moments():
    loc = af.Variable(np.array([1.0, -1.0]), name="loc")
    scale = af.Variable(np.array([[1.5, 0.0], [0.6, 0.4]]), name="scale")
    d = D.MultivariateNormalTriL(loc, scale)
    x = d.sample(20000, seed=3)
    g_loc, g_scale = af.gradients(af.reduce_mean(af.reduce_sum(x, -1)), [loc, scale])
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        xs, gl, gs = s.run([x, g_loc, g_scale])
    assert xs.shape == (20000, 2)
    np.testing.assert_allclose(xs.mean(0), [1.0, -1.0], atol=0.05)
    np.testing.assert_allclose(np.cov(xs.T), [[2.25, 0.9], [0.9, 0.52]], atol=0.08)
    np.testing.assert_allclose(gl, [1.0, 1.0])
    assert gs[0, 1] == 0.0 and abs(gs[0, 0]) < 0.05             # d mean(eps)/d scale ~ 0; upper triangle unused


def test_vae_style_kl_to_standard_normal_and_errors():
    mu = af.placeholder(af.float32, [None, 3])
    sigma = af.placeholder(af.float32, [None, 3])
    q = D.MultivariateNormalDiag(mu, sigma)
    p = D.MultivariateNormalDiag(af.zeros([3]), af.ones([3]))
    kl = D.kl_divergence(q, p)
    m = np.array([[0.5, -1.0, 0.0]], np.float32)
    s_ = np.array([[1.0, 0.5, 2.0]], np.float32)
    got = af.Session().run(kl, {mu: m, sigma: s_})
    want = 0.5 * np.sum(s_ ** 2 + m ** 2 - 1 - np.log(s_ ** 2), -1)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    with pytest.raises(ValueError, match="event size"):
        D.MultivariateNormalDiag(af.placeholder(af.float32, [None, None]), af.placeholder(af.float32, [None, None]))
    with pytest.raises(ValueError, match="exactly one"):
        D.MultivariateNormalLinearOperator([0.0])
