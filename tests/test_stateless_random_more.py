"""af.random's further stateless samplers (stateless_gamma / _poisson / _binomial /
_parameterized_truncated_normal / _multinomial, split, fold_in): functions of the seed alone, with
the distributions TF documents (moments checked; the bits are actorflow's Philox stream, not TF's)."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af

pytestmark = pytest.mark.usefixtures("graph")
N = 20000


def run(*fetches):
    with af.Session() as sess:
        return sess.run(list(fetches))


def test_same_seed_same_values_other_seed_other_values():
    a = af.random.stateless_gamma([N], seed=[1, 2], alpha=2.0)
    b = af.random.stateless_gamma([N], seed=[1, 2], alpha=2.0)
    c = af.random.stateless_gamma([N], seed=[1, 3], alpha=2.0)
    x, y, z = run(a, b, c)
    np.testing.assert_array_equal(x, y)
    assert not np.array_equal(x, z)
    assert x.dtype == np.float32 and a.shape.as_list() == [N]


def test_moments():
    gamma = af.random.stateless_gamma([N, 2], [3, 4], alpha=[1.0, 4.0], beta=2.0)
    pois = af.random.stateless_poisson([N], [5, 6], lam=3.5)
    binom = af.random.stateless_binomial([N, 2], [7, 8], counts=[10.0, 20.0], probs=0.25)
    tn = af.random.stateless_parameterized_truncated_normal([N], [9, 1], means=1.0, stddevs=2.0, minvals=0.0,
                                                            maxvals=3.0)
    g, p, b, t = run(gamma, pois, binom, tn)
    np.testing.assert_allclose(g.mean(axis=0), [0.5, 2.0], rtol=0.05)     # alpha / beta
    assert p.dtype == np.int32 and abs(p.mean() - 3.5) < 0.1 and abs(p.var() - 3.5) < 0.2
    assert b.dtype == np.int32
    np.testing.assert_allclose(b.mean(axis=0), [2.5, 5.0], rtol=0.05)
    assert t.min() >= 0.0 and t.max() <= 3.0
    # the mean of N(1, 2^2) truncated to [0, 3] (scipy.stats.truncnorm(-0.5, 1, loc=1, scale=2).mean() = 1.41326)
    assert abs(t.mean() - 1.4133) < 0.03


def test_split_and_fold_in_give_new_int_seeds():
    s = af.random.split([1, 2], num=3)
    f1 = af.random.fold_in([1, 2], 7)
    f2 = af.random.fold_in([1, 2], 8)
    seeds, a, b = run(s, f1, f2)
    assert seeds.shape == (3, 2) and seeds.dtype == np.int32 and len({tuple(r) for r in seeds}) == 3
    assert a[1] == 7 and b[1] == 8 and a[0] == b[0]
    again = run(af.random.split([1, 2], num=3))[0]
    np.testing.assert_array_equal(seeds, again)
    # a derived seed drives a sampler
    assert run(af.random.stateless_normal([2], seed=seeds[0]))[0].shape == (2,)


def test_stateless_multinomial_alias_and_errors():
    m = af.random.stateless_multinomial([[0.0, 50.0]], 5, seed=[1, 1], output_dtype=af.int32)
    assert run(m)[0].tolist() == [[1] * 5]
    with pytest.raises(af.errors.InvalidArgumentError, match="alpha must be positive"):
        run(af.random.stateless_gamma([2], [1, 1], alpha=-1.0))
    with pytest.raises(af.errors.InvalidArgumentError, match="does not broadcast"):
        run(af.random.stateless_poisson([2], [1, 1], lam=[1.0, 2.0, 3.0]))
