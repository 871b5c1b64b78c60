"""af.distributions (TF 1.x's tf.distributions) against TensorFlow 2.21's values and gradients
(tests/fixtures/make_distributions.py); sample shapes, seeded determinism, sample moments within
statistical tolerance, reparameterization gradients, batch/event shapes, KL registration, and the
validate_args / allow_nan_stats errors."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from tests import tf_reference
from tests.fixtures.tf_expressions import decode

FIX = tf_reference.load("distributions.json")
tfd = af.distributions


@pytest.mark.parametrize("key", [k for k in FIX["programs"] if k != "random_gamma_grad"])
def test_values_and_gradients_match_tensorflow(key):
    tf_reference.check(FIX, key)


def test_random_gamma_grad_matches_tensorflow():
    from actorflow.graph.ops.random_more_ops import random_gamma_grad
    case = FIX["cases"]["random_gamma_grad"]
    want = decode(case["values"][0], case["dtypes"][0])
    conc2, rate2 = (decode(FIX["inputs"][k], "float64") for k in ("conc2", "rate2"))
    with af.Graph().as_default(), af.Session() as s:
        got = s.run(random_gamma_grad(conc2, rate2 * 2.0))
    np.testing.assert_allclose(got, want, rtol=1e-8)


def _all():
    """One distribution of each class, float32, batch shape [2] (event [3] for the vector ones)."""
    return {
        "Normal": tfd.Normal([0.0, 1.0], [1.0, 2.0]),
        "Laplace": tfd.Laplace([0.0, 1.0], [1.0, 0.5]),
        "Uniform": tfd.Uniform([0.0, -1.0], [1.0, 3.0]),
        "StudentT": tfd.StudentT([5.0, 9.0], [0.0, 1.0], [1.0, 2.0]),
        "Gamma": tfd.Gamma([2.0, 0.7], [1.5, 1.0]),
        "Exponential": tfd.Exponential([1.0, 2.0]),
        "Beta": tfd.Beta([2.0, 0.5], [1.5, 0.8]),
        "Bernoulli": tfd.Bernoulli(probs=[0.3, 0.8]),
        "Categorical": tfd.Categorical(logits=[[0.0, 1.0, 2.0], [1.0, 1.0, -1.0]]),
        "Dirichlet": tfd.Dirichlet([[1.0, 2.0, 3.0], [0.5, 0.5, 2.0]]),
        "Multinomial": tfd.Multinomial([4.0, 7.0], probs=[[0.2, 0.3, 0.5], [0.6, 0.4, 0.0]]),
        "DirichletMultinomial": tfd.DirichletMultinomial(6.0, [[1.0, 2.0, 3.0], [2.0, 2.0, 0.5]]),
    }


VECTOR = {"Dirichlet", "Multinomial", "DirichletMultinomial"}


def test_sample_shapes_static_and_run():
    with af.Graph().as_default():
        dists = _all()
        samples = {k: d.sample([4, 5], seed=3) for k, d in dists.items()}
        scalar_shape = {k: d.sample(seed=1) for k, d in dists.items()}
        with af.Session() as s:
            got, got1 = s.run([samples, scalar_shape])
        for k, d in dists.items():
            event = [3] if k in VECTOR else []
            assert d.batch_shape.as_list() == [2] and d.event_shape.as_list() == event, k
            assert samples[k].shape.as_list() == [4, 5, 2] + event, k
            assert got[k].shape == (4, 5, 2) + tuple(event), k
            assert got1[k].shape == (2,) + tuple(event), k
            assert got[k].dtype == d.dtype.as_numpy_dtype, k


def test_batch_shape_broadcasts_parameters():
    with af.Graph().as_default():
        n = tfd.Normal(np.zeros([3, 1]), np.ones([4]))
        assert n.batch_shape.as_list() == [3, 4] and n.event_shape.as_list() == []
        st = tfd.StudentT(3.0, np.zeros([2, 1, 1]), np.ones([5]))
        assert st.batch_shape.as_list() == [2, 1, 5]
        loc = af.placeholder(af.float32, [None, 2])
        d = tfd.Normal(loc, 1.0)
        assert d.batch_shape.as_list() == [None, 2]
        c = tfd.Categorical(logits=af.placeholder(af.float32, [None, 7]))
        assert c.batch_shape.as_list() == [None] and c.event_shape.as_list() == []
        x = d.sample(3, seed=1)
        assert x.shape.as_list() == [3, None, 2]
        with af.Session() as s:
            bs, es, xs, scalar, notscalar = s.run(
                [d.batch_shape_tensor(), d.event_shape_tensor(), x, tfd.Normal(0.0, 1.0).is_scalar_batch(),
                 d.is_scalar_batch()], {loc: np.zeros([5, 2])})
        assert bs.tolist() == [5, 2] and es.tolist() == [] and xs.shape == (3, 5, 2)
        assert bool(scalar) and not bool(notscalar)
        assert n.dtype == af.float64 and tfd.Normal(0.0, 1.0).dtype == af.float32


def test_seeded_samples_are_deterministic():
    def draw(seed, graph_seed=7):
        with af.Graph().as_default():
            af.set_random_seed(graph_seed)
            d = _all()
            with af.Session() as s:
                return s.run({k: v.sample(6, seed=seed) for k, v in d.items()})
    a, b, c = draw(11), draw(11), draw(12)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert any(not np.array_equal(a[k], c[k]) for k in a)
    for k in ("Normal", "Gamma", "Beta", "Dirichlet", "StudentT"):
        assert not np.array_equal(a[k], c[k]), k


# (mean, variance) of each distribution of _all(), per batch member, from the closed forms
def _moments():
    beta_a, beta_b = np.array([2.0, 0.5]), np.array([1.5, 0.8])
    alpha = np.array([[1.0, 2.0, 3.0], [0.5, 0.5, 2.0]])
    a0 = alpha.sum(-1, keepdims=True)
    dm_alpha = np.array([[1.0, 2.0, 3.0], [2.0, 2.0, 0.5]])
    dm0 = dm_alpha.sum(-1, keepdims=True)
    pm = np.array([[0.2, 0.3, 0.5], [0.6, 0.4, 0.0]])
    nm = np.array([[4.0], [7.0]])
    logits = np.array([[0.0, 1.0, 2.0], [1.0, 1.0, -1.0]])
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    cat_mean = (probs * np.arange(3)).sum(-1)
    cat_var = (probs * np.arange(3) ** 2).sum(-1) - cat_mean ** 2
    return {
        "Normal": ([0.0, 1.0], [1.0, 4.0]),
        "Laplace": ([0.0, 1.0], [2.0, 0.5]),
        "Uniform": ([0.5, 1.0], [1 / 12, 16 / 12]),
        "StudentT": ([0.0, 1.0], [5 / 3, 4 * 9 / 7]),
        "Gamma": ([2 / 1.5, 0.7], [2 / 1.5 ** 2, 0.7]),
        "Exponential": ([1.0, 0.5], [1.0, 0.25]),
        "Beta": (beta_a / (beta_a + beta_b),
                 beta_a * beta_b / ((beta_a + beta_b) ** 2 * (beta_a + beta_b + 1))),
        "Bernoulli": ([0.3, 0.8], [0.21, 0.16]),
        "Categorical": (cat_mean, cat_var),
        "Dirichlet": (alpha / a0, alpha / a0 * (1 - alpha / a0) / (a0 + 1)),
        "Multinomial": (nm * pm, nm * pm * (1 - pm)),
        "DirichletMultinomial": (6 * dm_alpha / dm0,
                                 6 * dm_alpha / dm0 * (1 - dm_alpha / dm0) * (6 + dm0) / (1 + dm0)),
    }


def test_sample_moments_within_statistical_tolerance():
    n = 20000
    with af.Graph().as_default():
        af.set_random_seed(1)
        d = _all()
        with af.Session() as s:
            got = s.run({k: v.sample(n, seed=5) for k, v in d.items()})
    for k, (mean, var) in _moments().items():
        x = got[k].astype(np.float64)
        mean, var = np.asarray(mean, np.float64), np.asarray(var, np.float64)
        # 5 standard errors of the sample mean; the variance within 10% (+ a floor for zero variances)
        np.testing.assert_allclose(x.mean(0), mean, atol=5 * np.sqrt(var / n).max() + 1e-9, err_msg=k)
        np.testing.assert_allclose(x.var(0), var, rtol=0.1, atol=1e-6, err_msg=k)
    # a Multinomial's rows sum to total_count, a Dirichlet's to 1
    np.testing.assert_allclose(got["Multinomial"].sum(-1), np.broadcast_to([4.0, 7.0], (n, 2)))
    np.testing.assert_allclose(got["Dirichlet"].sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(np.unique(got["Bernoulli"]), [0, 1])


def test_reparameterization_types():
    with af.Graph().as_default():
        d = _all()
        full = {"Normal", "Laplace", "Uniform", "StudentT", "Gamma", "Exponential", "Beta", "Dirichlet"}
        for k, v in d.items():
            want = tfd.FULLY_REPARAMETERIZED if k in full else tfd.NOT_REPARAMETERIZED
            assert v.reparameterization_type == want, k
        assert tfd.FULLY_REPARAMETERIZED != tfd.NOT_REPARAMETERIZED
        assert repr(tfd.FULLY_REPARAMETERIZED) == "<Reparameterization Type: FULLY_REPARAMETERIZED>"


def test_reparameterized_sample_gradients():
    """d E[sample] / d parameter from the samples' gradients equals the derivative of the closed-form
    mean (within statistical tolerance); Normal's are exact: d x / d scale = (x - loc) / scale."""
    n = 20000
    with af.Graph().as_default():
        af.set_random_seed(3)
        loc, scale = af.constant([0.5, -1.0], af.float64), af.constant([2.0, 0.5], af.float64)
        x = tfd.Normal(loc, scale).sample(n, seed=1)
        g_loc, g_scale = af.gradients(af.reduce_sum(x), [loc, scale])
        g_scale_each = af.gradients(x, scale)[0]
        c, r = af.constant([0.6, 3.0], af.float64), af.constant([2.0, 0.5], af.float64)
        gm = af.reduce_mean(tfd.Gamma(c, r).sample(n, seed=2), 0)
        g_gamma = [af.gradients(gm[i], [c, r]) for i in range(2)]
        a, b = af.constant(2.0, af.float64), af.constant(3.0, af.float64)
        g_beta = af.gradients(af.reduce_mean(tfd.Beta(a, b).sample(n, seed=3)), [a, b])
        alpha = af.constant([1.0, 2.0, 3.0], af.float64)
        g_dir = af.gradients(af.reduce_mean(tfd.Dirichlet(alpha).sample(n, seed=4), 0)[0], alpha)[0]
        low, high = af.constant(1.0, af.float64), af.constant(4.0, af.float64)
        g_unif = af.gradients(af.reduce_mean(tfd.Uniform(low, high).sample(n, seed=5)), [low, high])
        lam = af.constant(2.0, af.float64)
        g_exp = af.gradients(af.reduce_mean(tfd.Exponential(lam).sample(n, seed=6)), lam)[0]
        lap_scale = af.constant(1.5, af.float64)
        xl = tfd.Laplace(0.0 * lap_scale, lap_scale).sample(n, seed=7)
        g_lap = af.gradients(af.reduce_sum(xl), lap_scale)[0]
        with af.Session() as s:
            (xv, gl, gs, gse, gg, gb, gd, gu, ge, xlv, glap) = s.run(
                [x, g_loc, g_scale, g_scale_each, g_gamma, g_beta, g_dir, g_unif, g_exp, xl, g_lap])
    np.testing.assert_allclose(gl, [n, n])
    np.testing.assert_allclose(gs, ((xv - [0.5, -1.0]) / [2.0, 0.5]).sum(0), rtol=1e-10)
    np.testing.assert_allclose(gse, gs, rtol=1e-10)
    np.testing.assert_allclose(glap, (xlv / 1.5).sum(), rtol=1e-10)
    # Gamma mean c / r: d/dc = 1/r, d/dr = -c/r^2
    np.testing.assert_allclose([gg[0][0][0], gg[1][0][1]], [1 / 2.0, 1 / 0.5], rtol=0.05)
    np.testing.assert_allclose([gg[0][1][0], gg[1][1][1]], [-0.6 / 4.0, -3.0 / 0.25], rtol=0.05)
    # Beta mean a / (a + b): d/da = b / (a+b)^2, d/db = -a / (a+b)^2
    np.testing.assert_allclose(gb, [3.0 / 25, -2.0 / 25], rtol=0.05)
    # Dirichlet mean of the first component a1 / sum(a): gradient [(a0 - a1), -a1, -a1] / a0^2
    np.testing.assert_allclose(gd, np.array([5.0, -1.0, -1.0]) / 36, rtol=0.05, atol=2e-3)
    np.testing.assert_allclose(gu, [0.5, 0.5], rtol=0.05)
    np.testing.assert_allclose(ge, -1 / 4.0, rtol=0.05)


def test_not_reparameterized_samples_have_no_gradient():
    with af.Graph().as_default():
        p = af.constant([0.3, 0.6])
        logits = af.constant([[0.0, 1.0]])
        assert af.gradients(af.reduce_sum(af.cast(tfd.Bernoulli(probs=p).sample(3), af.float32)), p) == [None]
        assert af.gradients(af.reduce_sum(af.cast(tfd.Categorical(logits=logits).sample(3), af.float32)),
                            logits) == [None]


def test_kl_registration_and_lookup():
    with af.Graph().as_default():
        class MyNormal(tfd.Normal):
            pass

        kl = tfd.kl_divergence(MyNormal(0.0, 1.0), tfd.Normal(1.0, 2.0))   # the parent's KL
        assert tfd.Normal(0.0, 1.0).kl_divergence(tfd.Normal(0.0, 1.0)).shape.as_list() == []
        with pytest.raises(NotImplementedError, match="No KL.*Normal.*Bernoulli"):
            tfd.kl_divergence(tfd.Normal(0.0, 1.0), tfd.Bernoulli(probs=0.5))

        @tfd.RegisterKL(MyNormal, tfd.Normal)
        def _kl(a, b, name=None):
            return af.constant(-7.0)

        with pytest.raises(ValueError, match="already been registered"):
            tfd.RegisterKL(MyNormal, tfd.Normal)(_kl)
        mine = tfd.kl_divergence(MyNormal(0.0, 1.0), tfd.Normal(1.0, 2.0))
        with af.Session() as s:
            kv, mv = s.run([kl, mine])
        np.testing.assert_allclose(kv, np.log(2.0) + (1 + 1) / 8 - 0.5, rtol=1e-6)
        assert mv == -7.0


def test_parameters_copy_and_name():
    with af.Graph().as_default():
        d = tfd.Normal(loc=1.0, scale=2.0, name="policy")
        assert d.parameters == {"loc": 1.0, "scale": 2.0, "validate_args": False, "allow_nan_stats": True,
                                "name": "policy"}
        assert d.name == "policy/" and d.log_prob(0.0).name.startswith("policy/log_prob/")
        e = d.copy(scale=5.0)
        assert isinstance(e, tfd.Normal) and e.parameters["scale"] == 5.0 and e.parameters["loc"] == 1.0
        assert "batch_shape=()" in repr(d)
        with af.Session() as s:
            assert s.run(e.stddev()) == 5.0
        assert tfd.Normal.param_static_shapes([3])["loc"].as_list() == [3]
        assert isinstance(d, tfd.Distribution)
        # Python numbers take the dtype of the tensor or variable parameters
        v = af.Variable(np.zeros(2))
        assert tfd.Normal(v, 1.0).dtype == af.float64 and tfd.Gamma(2.0, v + 1.0).dtype == af.float64
        assert tfd.Beta(1.0, 2.0).dtype == af.float32 and tfd.Uniform().dtype == af.float32


def test_validate_args_errors_name_the_distribution():
    with af.Graph().as_default():
        scale = af.placeholder(af.float32, [2])
        probs = af.placeholder(af.float32, [3])
        conc = af.placeholder(af.float32, [3])
        cases = [
            (tfd.Normal(0.0, scale, validate_args=True, name="pi").sample(seed=1), {scale: [1.0, -1.0]},
             r"pi: scale must be positive"),
            (tfd.Laplace(0.0, scale, validate_args=True).stddev(), {scale: [0.0, 1.0]}, r"Laplace: scale must be positive"),
            (tfd.Uniform(scale, 1.0, validate_args=True).mean(), {scale: [0.0, 2.0]},
             r"Uniform: uniform not defined when low >= high"),
            (tfd.Gamma(conc, 1.0, validate_args=True).mean(), {conc: [1.0, -2.0, 1.0]},
             r"Gamma: concentration must be positive"),
            (tfd.Gamma(1.0, conc, validate_args=True).log_prob(1.0), {conc: [1.0, 0.0, 1.0]},
             r"Gamma: rate must be positive"),
            (tfd.Beta(conc, 1.0, validate_args=True).mean(), {conc: [1.0, -2.0, 1.0]},
             r"Beta: Concentration parameter must be positive"),
            (tfd.StudentT(conc, 0.0, 1.0, validate_args=True).mode(), {conc: [1.0, -2.0, 1.0]},
             r"StudentT: df must be positive"),
            (tfd.Bernoulli(probs=probs, validate_args=True).mean(), {probs: [0.5, 1.5, 0.1]},
             r"Bernoulli: probs has components greater than 1"),
            (tfd.Categorical(probs=probs, validate_args=True).entropy(), {probs: [0.5, 0.6, 0.1]},
             r"Categorical: probs does not sum to 1"),
            (tfd.Dirichlet(conc, validate_args=True).mean(), {conc: [1.0, 0.0, 2.0]},
             r"Dirichlet: Concentration parameter must be positive"),
            (tfd.Bernoulli(probs=0.5, validate_args=True).log_prob(probs), {probs: [0.0, 2.0, 1.0]},
             r"Bernoulli: Elements cannot exceed 1"),
            (tfd.Beta(2.0, 2.0, validate_args=True).log_prob(probs), {probs: [0.5, 1.5, 0.1]},
             r"Beta: sample must be less than `1`"),
            (tfd.Dirichlet([1.0, 2.0, 3.0], validate_args=True).log_prob(probs), {probs: [0.5, 0.6, 0.1]},
             r"Dirichlet: sample last-dimension must sum to `1`"),
            (tfd.Multinomial(3.0, probs=[0.5, 0.5], validate_args=True).log_prob(scale), {scale: [1.0, 1.0]},
             r"Multinomial: counts must sum to `self.total_count`"),
            (tfd.Multinomial(3.0, probs=[0.5, 0.5], validate_args=True).log_prob(scale), {scale: [1.5, 1.5]},
             r"Multinomial: 'counts' cannot contain fractional components"),
        ]
        with af.Session() as s:
            for t, feed, msg in cases:
                # (a second distribution of a name gets the scope Gamma_1, as in TF)
                owner, rest = msg.split(":", 1)
                with pytest.raises(af.errors.InvalidArgumentError, match=owner + r"(_\d+)?:" + rest):
                    s.run(t, feed)
            # valid values pass
            assert s.run(tfd.Normal(0.0, scale, validate_args=True).stddev(), {scale: [1.0, 2.0]}).tolist() == [1, 2]
        # known-bad constants fail while the graph is built, as TF's static checks do
        with pytest.raises(af.errors.InvalidArgumentError, match=r"Normal(_\d+)?: scale must be positive"):
            tfd.Normal(0.0, -1.0, validate_args=True)
        with pytest.raises(ValueError, match=r"Categorical(_\d+)?: a categorical-distribution parameter must have at least 2"):
            tfd.Categorical(logits=[[1.0]], validate_args=True)
        with pytest.raises(ValueError, match=r"Bernoulli(_\d+)?: Must pass probs or logits, but not both"):
            tfd.Bernoulli(logits=1.0, probs=0.5)
        with pytest.raises(TypeError, match=r"Normal(_\d+)?: parameters must have the same floating dtype, got .*float64.*float32"):
            tfd.Normal(af.constant(0.0, af.float64), af.constant(1.0))


def test_allow_nan_stats_false_raises_for_undefined_statistics():
    with af.Graph().as_default():
        df = af.placeholder(af.float32, [2])
        conc = af.placeholder(af.float32, [2])
        with af.Session() as s:
            nan_var = s.run(tfd.StudentT(df, 0.0, 1.0).variance(), {df: [0.5, 1.5]})
            assert np.isnan(nan_var[0]) and np.isinf(nan_var[1])
            strict = tfd.StudentT(df, 0.0, 1.0, allow_nan_stats=False, name="strict")
            with pytest.raises(af.errors.InvalidArgumentError, match="strict: variance not defined for components of df <= 1"):
                s.run(strict.variance(), {df: [0.5, 3.0]})
            with pytest.raises(af.errors.InvalidArgumentError, match="strict: mean not defined for components of df <= 1"):
                s.run(strict.mean(), {df: [0.5, 3.0]})
            np.testing.assert_allclose(s.run(strict.variance(), {df: [3.0, 1.5]}), [3.0, np.inf])
            with pytest.raises(af.errors.InvalidArgumentError, match="Gamma: mode not defined when any concentration <= 1"):
                s.run(tfd.Gamma(conc, 1.0, allow_nan_stats=False).mode(), {conc: [0.5, 3.0]})
            with pytest.raises(af.errors.InvalidArgumentError, match="Beta: Mode undefined for concentration1 <= 1"):
                s.run(tfd.Beta(conc, 2.0, allow_nan_stats=False).mode(), {conc: [0.5, 3.0]})
            with pytest.raises(af.errors.InvalidArgumentError, match="Dirichlet: Mode undefined when any concentration <= 1"):
                s.run(tfd.Dirichlet(conc, allow_nan_stats=False).mode(), {conc: [0.5, 3.0]})
            assert np.isnan(s.run(tfd.Gamma(conc, 1.0).mode(), {conc: [0.5, 3.0]})[0])
            # a NaN KL with allow_nan_stats=False fails the step, naming both distributions
            a = tfd.Normal(0.0, conc, name="a", allow_nan_stats=False)
            b = tfd.Normal(0.0, 1.0, name="b")
            with pytest.raises(af.errors.InvalidArgumentError, match="KL calculation between a/ and b/ returned NaN"):
                s.run(a.kl_divergence(b), {conc: [np.nan, 1.0]})


def test_vae_and_policy_gradient_patterns():
    """The programs these serve: a VAE's reparameterized sample and KL to a standard normal, and a
    policy gradient's log_prob of sampled actions, trained by an optimizer."""
    with af.Graph().as_default():
        af.set_random_seed(0)
        mu = af.Variable([0.5, -0.5])
        log_sigma = af.Variable([0.0, 0.0])
        q = tfd.Normal(mu, af.exp(log_sigma))
        z = q.sample(64)
        kl = af.reduce_sum(tfd.kl_divergence(q, tfd.Normal(0.0, 1.0)))
        loss = af.reduce_mean(af.reduce_sum(af.square(z - 2.0), -1)) + kl
        logits = af.Variable([[0.0, 0.0, 0.0]])
        pi = tfd.Categorical(logits=logits)
        a = pi.sample(32)
        reward = af.cast(af.equal(a, 2), af.float32)
        pg_loss = -af.reduce_mean(pi.log_prob(a) * af.stop_gradient(reward)) - 0.01 * af.reduce_mean(pi.entropy())
        train = af.train.GradientDescentOptimizer(0.1).minimize(loss + pg_loss)
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            for _ in range(200):
                s.run(train)
            m, lg = s.run([mu, logits])
    # the optimum of E(z - 2)^2 + KL(q || N(0, 1)) has mu = 4/3
    np.testing.assert_allclose(m, [4 / 3, 4 / 3], atol=0.15)
    assert lg[0, 2] > lg[0, 0] and lg[0, 2] > lg[0, 1]
