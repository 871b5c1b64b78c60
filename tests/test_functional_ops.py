"""map_fn, scan, foldl and foldr against TensorFlow 2.21's values and gradients
(tests/fixtures/make_functional.py), and the tensor lists under them."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import actorflow as af

FIX = json.loads((pathlib.Path(__file__).parent / "fixtures" / "functional.json").read_text())


def _weights(shape):
    n = int(np.prod(shape))
    return (np.arange(n, dtype=np.float64).reshape(shape) % 5 - 2.0) * 0.75


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_and_gradients_match_tensorflow(expr):
    case = FIX["cases"][expr]
    with af.Graph().as_default():
        env = {"tf": af}
        env.update({k: af.constant(np.array(v, np.float64)) for k, v in FIX["inputs"].items()})
        y = eval(expr, env)  # noqa: S307 (the fixture's own expressions)
        ys = list(y) if isinstance(y, (list, tuple)) else [y]
        with af.Session() as s:
            vals = s.run(ys)
            for got, want, dt, t in zip(vals, case["values"], case["dtypes"], ys):
                want = np.array(want, dtype=dt)
                assert np.asarray(got).dtype == want.dtype and np.shape(got) == want.shape, expr
                assert t.shape.is_compatible_with(af.TensorShape(list(want.shape))), f"{expr}: {t.shape}"
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=expr)
            terms = [af.reduce_sum(t * _weights(np.shape(v))) for t, v in zip(ys, vals) if t.dtype.is_floating]
            if not terms:
                return
            srcs = [env[k] for k in FIX["inputs"]]
            grads = af.gradients(af.add_n(terms), srcs)
            for (k, want), g in zip(case["grads"].items(), grads):
                if want is None:
                    assert g is None, f"{expr}: TF has no gradient for {k}"
                    continue
                assert g is not None, f"{expr}: no gradient for {k}"
                np.testing.assert_allclose(s.run(af.convert_to_tensor(g)), np.array(want), rtol=1e-10, atol=1e-12,
                                           err_msg=f"{expr} d/d{k}")


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
