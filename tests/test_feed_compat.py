"""Feeds convert as TF 1.x's Session converts them (fixtures/feed_compat.json, made with TF 2.21 by
make_feed_compat.py), and the programs that rely on it run."""
import json
import pathlib

import numpy as np
import pytest

import actorflow as af

FIX = json.loads((pathlib.Path(__file__).parent / "fixtures" / "feed_compat.json").read_text())


def _build(value, how):
    return np.asarray(value, np.float64) if how == "float64_array" else value


@pytest.mark.parametrize("case", FIX["feeds"], ids=[f"{c['dtype']}-{c['how']}-{i}" for i, c in
                                                     enumerate(FIX["feeds"])])
def test_feed_conversion_matches_tf(case):
    g = af.Graph()
    with g.as_default():
        p = af.placeholder(case["dtype"], case["shape"], name="fed")
        out = af.identity(p)
        with af.Session() as sess:
            if "error" in case:
                err = {"TypeError": TypeError, "ValueError": ValueError}[case["error"]]
                with pytest.raises(err, match="fed") as e:
                    sess.run(out, {p: _build(case["input"], case["how"])})
                assert isinstance(e.value, af.errors.InvalidArgumentError)
            else:
                got = np.asarray(sess.run(out, {p: _build(case["input"], case["how"])}))
                assert got.dtype == np.dtype(case["dtype"])
                np.testing.assert_array_equal(got, np.asarray(case["value"], case["dtype"]))


def test_linear_regression_fed_python_floats_matches_tf():
    # The gradient of reduce_sum over a placeholder of unknown shape fed scalars used to fail in
    # FloorMod ("Integer division by zero") while normalizing the reduced axes of a rank-0 input.
    r = FIX["linreg"]
    n = len(r["train_X"])
    g = af.Graph()
    with g.as_default():
        X = af.placeholder("float")
        Y = af.placeholder("float")
        W = af.Variable(0.5, name="weight")
        b = af.Variable(0.1, name="bias")
        pred = af.add(af.multiply(X, W), b)
        cost = af.reduce_sum(af.pow(pred - Y, 2)) / (2 * n)
        opt = af.train.GradientDescentOptimizer(r["lr"]).minimize(cost)
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            for _ in range(r["epochs"]):
                for x, y in zip(r["train_X"], r["train_Y"]):
                    sess.run(opt, feed_dict={X: x, Y: y})
            c, w, bb = sess.run([cost, W, b], feed_dict={X: r["train_X"], Y: r["train_Y"]})
    np.testing.assert_allclose([c, w, bb], [r["cost"], r["W"], r["b"]], rtol=1e-5)


@pytest.mark.parametrize("reduce", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_prod"])
def test_reduction_gradients_of_scalars_fed_into_unknown_rank(reduce):
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32)
        y = getattr(af, reduce)(x * x)
        dx = af.gradients(y, x)[0]
        with af.Session() as sess:
            assert sess.run(dx, {x: 3.0}) == pytest.approx(6.0)
            np.testing.assert_allclose(sess.run(dx, {x: [[1.0, 2.0]]}).shape, (1, 2))


def test_integer_division_by_zero_still_fails():
    g = af.Graph()
    with g.as_default():
        a = af.placeholder(af.int32, [None])
        z = af.placeholder(af.int32, [None])
        with af.Session() as sess:
            with pytest.raises(af.errors.InvalidArgumentError, match="division by zero"):
                sess.run(af.floormod(a, z), {a: [1, 2], z: [1, 0]})
            assert sess.run(af.floormod(a, z), {a: np.zeros(0, np.int32), z: np.zeros(0, np.int32)}).size == 0
