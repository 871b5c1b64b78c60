"""map_fn, scan, foldl and foldr against TensorFlow 2.21's values and gradients
(tests/fixtures/make_functional.py), and the tensor lists under them."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from tests import tf_reference

FIX = tf_reference.load("functional.json")


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_and_gradients_match_tensorflow(expr):
    tf_reference.check(FIX, expr)


def test_map_fn_with_a_fed_length_and_training():
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, 3], name="x")
        w = af.Variable(np.ones(3, np.float32), name="w")
        y = af.map_fn(lambda r: af.reduce_sum(r * w), x)
        assert y.shape.as_list() == [None]
        loss = af.reduce_sum(af.square(y - 1.0))
        step = af.train.GradientDescentOptimizer(0.05).minimize(loss)
        feed = {x: np.random.RandomState(0).rand(5, 3).astype(np.float32)}
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            first = s.run(loss, feed)
            for _ in range(30):
                s.run(step, feed)
            assert s.run(loss, feed) < first * 0.1
            assert s.run(y, {x: np.zeros((0, 3), np.float32)}).shape == (0,)     # no elements


def test_errors_name_the_problem():
    with af.Graph().as_default():
        x = af.constant(np.ones((3, 2), np.float32))
        with pytest.raises(ValueError, match="structure"):
            af.map_fn(lambda r: (r, r), x)                   # two outputs, one dtype
        with pytest.raises(ValueError, match="rank >= 1"):
            af.map_fn(lambda r: r, af.constant(1.0))
        with pytest.raises(ValueError, match="same first dimension"):
            af.map_fn(lambda p: p[0], (x, af.ones([4])))
        with pytest.raises(TypeError, match="callable"):
            af.scan(None, x)
