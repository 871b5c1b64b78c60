"""af.random.Generator in graph mode (tf.random.Generator): a state variable advanced by every
sampling op, reproducible from a seed; the global generator; split and make_seeds."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af

pytestmark = pytest.mark.usefixtures("graph")


def test_from_seed_is_reproducible_and_advances():
    g1 = af.random.Generator.from_seed(42)
    g2 = af.random.Generator.from_seed(42)
    a, b = g1.normal([3]), g2.normal([3])
    u = g1.uniform([1000], minval=2, maxval=5, dtype=af.int32)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        x1, y1 = sess.run([a, b])
        x2 = sess.run(a)
        ints = sess.run(u)
        state = sess.run(g1.state)
    np.testing.assert_array_equal(x1, y1)                 # same seed, same first draw
    assert not np.array_equal(x1, x2)                       # each run advances the counter
    assert set(ints.tolist()) == {2, 3, 4}
    assert state[1] == 3 and state[0] == af.random.create_rng_state(42, "philox")[0]


def test_reset_split_make_seeds_and_global():
    g = af.random.Generator.from_seed(1, alg=af.random.Algorithm.PHILOX)
    draw = g.uniform([4])
    reset = g.reset_from_seed(1)
    children = g.split(2)
    seeds = g.make_seeds(3)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        first = sess.run(draw)
        sess.run(reset)
        np.testing.assert_array_equal(sess.run(draw), first)
        c0, c1 = sess.run([children[0].state, children[1].state])
        assert c0[0] != c1[0] and c0[1] == c1[1] == 0
        assert sess.run(seeds).shape == (2, 3)
    gg = af.random.get_global_generator()
    assert af.random.get_global_generator() is gg
    af.random.set_global_generator(g)
    assert af.random.get_global_generator() is g
    with pytest.raises(TypeError):
        af.random.set_global_generator(3)
    with pytest.raises(ValueError, match="shape"):
        af.random.Generator(state=[1, 2, 3])
