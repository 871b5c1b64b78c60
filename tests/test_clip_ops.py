"""Clipping (clip_by_value, clip_by_norm, global_norm, clip_by_global_norm): numerics against
numpy, sparse and None entries, non-finite norms, and gradients against finite differences."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from actorflow.graph.ops.clip_ops import (
    clip_by_average_norm,
    clip_by_global_norm,
    clip_by_norm,
    clip_by_value,
    global_norm,
)
from tests.conftest import run
from tests.gradcheck import check_gradients

pytestmark = pytest.mark.usefixtures("graph")

RNG = np.random.default_rng(3)


def test_clip_by_value():
    xv = RNG.standard_normal((3, 4))
    x = af.constant(xv)
    lo = af.constant(np.full((1, 4), -0.5))
    y, y2 = run([clip_by_value(x, -0.3, 0.4), clip_by_value(x, lo, 0.1)])
    np.testing.assert_allclose(y, np.clip(xv, -0.3, 0.4))
    np.testing.assert_allclose(y2, np.clip(xv, -0.5, 0.1))
    assert clip_by_value(x, -1.0, 1.0, name="clipped").op.name == "clipped"
    with pytest.raises(ValueError, match="change the shape"):
        clip_by_value(af.constant(np.ones(3)), af.constant(np.zeros((2, 3))), 1.0)
    with pytest.raises(TypeError, match="dtype"):
        clip_by_value(x, af.constant(0.0, dtype=af.float32), 1.0)


def test_clip_by_value_indexed_slices_stay_sparse():
    s = af.IndexedSlices(af.constant(np.array([[3.0, -3.0]])), af.constant([2]), af.constant([4, 2]))
    out = clip_by_value(s, -1.0, 1.0)
    assert isinstance(out, af.IndexedSlices) and out.indices is s.indices
    np.testing.assert_allclose(run(out.values), [[1.0, -1.0]])


def test_clip_by_norm():
    xv = np.array([[3.0, 4.0], [0.3, 0.4]])
    x = af.constant(xv)
    whole, rows, zero, big = run([clip_by_norm(x, 2.0), clip_by_norm(x, 2.0, axes=[1]),
                                  clip_by_norm(af.constant(np.zeros(3)), 1.0), clip_by_norm(x, 100.0)])
    np.testing.assert_allclose(whole, xv * 2.0 / np.linalg.norm(xv))
    np.testing.assert_allclose(rows, [[1.2, 1.6], [0.3, 0.4]])
    np.testing.assert_array_equal(zero, np.zeros(3))
    np.testing.assert_allclose(big, xv)


def test_global_norm_skips_none_and_reads_slices():
    a = RNG.standard_normal((2, 3))
    b = RNG.standard_normal(4)
    vals = RNG.standard_normal((2, 3))
    s = af.IndexedSlices(af.constant(vals), af.constant([0, 5]), af.constant([8, 3]))
    n = run(global_norm([af.constant(a), None, af.constant(b), s]))
    np.testing.assert_allclose(n, np.sqrt((a ** 2).sum() + (b ** 2).sum() + (vals ** 2).sum()))
    with pytest.raises(TypeError, match="t_list should be a sequence"):
        global_norm(af.constant(a))


def test_clip_by_global_norm():
    a = RNG.standard_normal((3, 2)) * 3
    b = RNG.standard_normal(5) * 3
    vals = RNG.standard_normal((2, 2))
    s = af.IndexedSlices(af.constant(vals), af.constant([1, 3]), af.constant([4, 2]))
    clipped, norm = clip_by_global_norm([af.constant(a), None, s, af.constant(b)], 2.0)
    assert clipped[1] is None
    assert isinstance(clipped[2], af.IndexedSlices) and clipped[2].indices is s.indices
    ca, cs, cb, n = run([clipped[0], clipped[2].values, clipped[3], norm])
    want_n = np.sqrt((a ** 2).sum() + (b ** 2).sum() + (vals ** 2).sum())
    np.testing.assert_allclose(n, want_n)
    scale = 2.0 / want_n
    np.testing.assert_allclose(ca, a * scale)
    np.testing.assert_allclose(cs, vals * scale)
    np.testing.assert_allclose(cb, b * scale)
    # Below the threshold nothing changes.
    (small,), _ = clip_by_global_norm([af.constant(a)], 1e6)
    np.testing.assert_allclose(run(small), a)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_clip_by_global_norm_use_norm_and_non_finite():
    a = af.constant(np.array([1.0, 2.0]))
    (c,), n = clip_by_global_norm([a], 1.0, use_norm=af.constant(4.0, dtype=af.float64))
    np.testing.assert_allclose(run(c), [0.25, 0.5])
    (inf_c,), _ = clip_by_global_norm([af.constant(np.array([np.inf, 1.0]))], 1.0)
    assert np.all(np.isnan(run(inf_c)))
    with pytest.raises(TypeError, match="t_list should be a sequence"):
        clip_by_global_norm(a, 1.0)


def test_clip_by_average_norm():
    xv = np.array([3.0, 4.0])
    y = run(clip_by_average_norm(af.constant(xv), 1.0))
    np.testing.assert_allclose(y, xv * 1.0 / max(5.0 / 2, 1.0))


def test_clip_gradients():
    x = RNG.standard_normal((3, 4))
    check_gradients(lambda t: clip_by_norm(t, 1.5), [x])
    check_gradients(lambda t: clip_by_norm(t, 0.5, axes=[0]), [x])
    check_gradients(lambda t: clip_by_value(t, -0.4, 0.6), [x])
    check_gradients(lambda t, u: af.add(af.reduce_sum(clip_by_global_norm([t, u], 1.0)[0][0]),
                                        af.reduce_sum(af.square(clip_by_global_norm([t, u], 1.0)[0][1]))),
                    [x, RNG.standard_normal(2)])


def test_clip_by_norm_gradient_is_finite_at_zero():
    x = af.placeholder(af.float64, [3])
    g, = af.gradients(af.reduce_sum(clip_by_norm(x, 1.0)), x)
    np.testing.assert_array_equal(run(g, {x: np.zeros(3)}), np.ones(3))
