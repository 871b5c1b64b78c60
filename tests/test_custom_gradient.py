"""Gradient registration: af.custom_gradient, af.RegisterGradient with Graph.gradient_override_map,
af.NotDifferentiable, and identity_n."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af


def test_custom_gradient_replaces_the_functions_gradient():
    with af.Graph().as_default():
        @af.custom_gradient
        def log1pexp(x):
            e = af.exp(x)

            def grad(dy):
                return dy * (1 - 1 / (1 + e))
            return af.log(1 + e), grad
        x = af.constant([0.0, 100.0, -2.0], af.float32)
        y = log1pexp(x)
        (g,) = af.gradients(af.reduce_sum(y * [1.0, 2.0, 3.0]), x)
        (plain,) = af.gradients(af.reduce_sum(af.log(1 + af.exp(x))), x)
        with af.Session() as s:
            yv, gv, pv = s.run([y, g, plain])
    np.testing.assert_allclose(yv[[0, 2]], np.log1p(np.exp([0.0, -2.0])), rtol=1e-6)
    np.testing.assert_allclose(gv, [0.5, 2.0, 3.0 / (1 + np.exp(2.0))], rtol=1e-6)
    assert np.isnan(pv[1])                       # the reason for the custom gradient


def test_custom_gradient_with_two_inputs_and_two_outputs():
    with af.Graph().as_default():
        @af.custom_gradient
        def f(a, b):
            def grad(da, db):
                return da * 10.0 + db, da - db * 10.0
            return (a * b, a + b), grad
        a, b = af.constant(2.0), af.constant(3.0)
        p, q = f(a, b)
        ga, gb = af.gradients(p * 1.0 + q * 2.0, [a, b])
        with af.Session() as s:
            assert s.run([p, q, ga, gb]) == [6.0, 5.0, 12.0, -19.0]
        with pytest.raises(ValueError, match="returned 1 gradients for 2 inputs"):
            @af.custom_gradient
            def bad(a, b):
                return a * b, lambda dy: dy
            af.gradients(bad(a, b), [a, b])


def test_gradient_override_map_and_register_gradient():
    with af.Graph().as_default() as g:
        @af.RegisterGradient("TestClipped")
        def _clipped(op, grad):
            return [af.clip_by_value(grad, -0.5, 0.5) * 2.0 * op.inputs[0]]
        x = af.constant([1.0, -3.0])
        with g.gradient_override_map({"Square": "TestClipped"}):
            y = af.square(x)
        z = af.square(x)                           # outside the map: the usual gradient
        gy, gz = af.gradients(af.reduce_sum(y), x)[0], af.gradients(af.reduce_sum(z), x)[0]
        with g.gradient_override_map({"Square": "TestNobodyRegistered"}):
            w = af.square(x, name="unregistered")
        with af.Session() as s:
            np.testing.assert_array_equal(s.run(gy), [1.0, -3.0])
            np.testing.assert_array_equal(s.run(gz), [2.0, -6.0])
        with pytest.raises(LookupError, match="'unregistered'.*'TestNobodyRegistered' is not registered"):
            af.gradients(w, x)
        with pytest.raises(KeyError, match="Registering two gradient with name 'TestClipped'"):
            af.RegisterGradient("TestClipped")(_clipped)
        with pytest.raises(KeyError, match="'Square'"):
            af.RegisterGradient("Square")(_clipped)          # an op type that has one


def test_not_differentiable_and_identity_n():
    with af.Graph().as_default():
        af.NotDifferentiable("TestOpWithoutGradient")          # not an op type yet: accepted
        a, b = af.constant(1.0), af.constant([2, 3])
        ia, ib = af.identity_n([a, b])
        assert ia.dtype == af.float32 and ib.dtype == af.int32 and ib.shape.as_list() == [2]
        (g,) = af.gradients(ia * 5.0, a)
        with af.Session() as s:
            assert s.run([ia, g]) == [1.0, 5.0]
            np.testing.assert_array_equal(s.run(ib), [2, 3])
