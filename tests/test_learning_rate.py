"""Learning-rate schedules (af.train.*_decay, piecewise_constant) against their formulas at
several global steps, and their argument errors."""
from __future__ import annotations

import math

import numpy as np
import pytest

import actorflow as af
import actorflow.train as train
from actorflow.graph.variable_scope import variable_scope

pytestmark = pytest.mark.usefixtures("graph")

STEPS = [0, 1, 5, 10, 11, 25, 100, 1000]


def values(make):
    """Evaluates the schedule built by make(global_step) at every step of STEPS."""
    step = af.placeholder(af.int64, [], name="step")
    lr = make(step)
    with af.Session() as sess:
        return lr, [float(sess.run(lr, {step: s})) for s in STEPS]


def check(make, formula, rtol=1e-6):
    lr, got = values(make)
    np.testing.assert_allclose(got, [formula(s) for s in STEPS], rtol=rtol, atol=1e-12)
    return lr


@pytest.mark.parametrize("staircase", [False, True])
def test_exponential_decay(staircase):
    def formula(s):
        p = math.floor(s / 10) if staircase else s / 10
        return 0.1 * 0.5 ** p
    lr = check(lambda gs: train.exponential_decay(0.1, gs, 10, 0.5, staircase=staircase), formula)
    assert lr.dtype is af.float32 and lr.shape.ndims == 0
    assert lr.op.name == "ExponentialDecay"


def test_exponential_decay_float64_and_tensor_arguments():
    lr0 = af.constant(0.3, dtype=af.float64)
    lr = check(lambda gs: train.exponential_decay(lr0, gs, af.constant(4), af.constant(0.9, dtype=af.float64)),
               lambda s: 0.3 * 0.9 ** (s / 4), rtol=1e-12)
    assert lr.dtype is af.float64


@pytest.mark.parametrize("staircase", [False, True])
def test_natural_exp_and_inverse_time_decay(staircase):
    def p(s):
        return math.floor(s / 7) if staircase else s / 7
    check(lambda gs: train.natural_exp_decay(0.2, gs, 7, 0.3, staircase=staircase),
          lambda s: 0.2 * math.exp(-0.3 * p(s)))
    check(lambda gs: train.inverse_time_decay(0.2, gs, 7, 0.3, staircase=staircase),
          lambda s: 0.2 / (1 + 0.3 * p(s)))


@pytest.mark.parametrize("power", [1.0, 0.5, 2.0])
def test_polynomial_decay(power):
    def formula(s):
        s = min(s, 20)
        return (0.1 - 0.001) * (1 - s / 20) ** power + 0.001
    check(lambda gs: train.polynomial_decay(0.1, gs, 20, end_learning_rate=0.001, power=power), formula)


def test_polynomial_decay_cycle():
    def formula(s):
        steps = 20 * (1 if s == 0 else math.ceil(s / 20))
        return (0.1 - 0.01) * (1 - s / steps) ** 2 + 0.01
    check(lambda gs: train.polynomial_decay(0.1, gs, 20, 0.01, power=2.0, cycle=True), formula)


def test_cosine_decay():
    def formula(s):
        s = min(s, 50)
        return 0.4 * ((1 - 0.1) * 0.5 * (1 + math.cos(math.pi * s / 50)) + 0.1)
    check(lambda gs: train.cosine_decay(0.4, gs, 50, alpha=0.1), formula)


def test_piecewise_constant():
    def formula(s):
        if s <= 5:
            return 1.0
        if s <= 25:
            return 0.5
        return 0.1
    lr = check(lambda gs: train.piecewise_constant(gs, [5, 25], [1.0, 0.5, 0.1]), formula)
    assert lr.dtype is af.float32


def test_piecewise_constant_single_value_and_float_x():
    x = af.placeholder(af.float32, [])
    one = train.piecewise_constant(x, [], [0.7])
    lr = train.piecewise_constant(x, [0.5, 1.5], [1, 2, 3])
    with af.Session() as sess:
        assert [int(sess.run(lr, {x: v})) for v in (0.0, 0.5, 0.6, 1.5, 9.0)] == [1, 1, 2, 2, 3]
        assert float(sess.run(one, {x: 3.0})) == pytest.approx(0.7)


def test_schedule_errors():
    gs = af.placeholder(af.int64, [])
    with pytest.raises(ValueError, match="global_step is required for exponential_decay"):
        train.exponential_decay(0.1, None, 10, 0.5)
    with pytest.raises(ValueError, match="global_step is required for polynomial_decay"):
        train.polynomial_decay(0.1, None, 10)
    with pytest.raises(ValueError, match="length of boundaries should be 1 less"):
        train.piecewise_constant(gs, [1, 2], [0.1, 0.2])
    with pytest.raises(ValueError, match="must have the same dtype as x"):
        train.piecewise_constant(gs, [af.constant(1.5)], [0.1, 0.2])
    with pytest.raises(ValueError, match="same dtype"):
        train.piecewise_constant(gs, [1], [0.1, af.constant(2.0, dtype=af.float64)])


def test_schedule_with_global_step_variable():
    gs = train.get_or_create_global_step()
    assert train.get_or_create_global_step() is gs and train.get_global_step() is gs
    with pytest.raises(ValueError, match='"global_step" already exists'):
        train.create_global_step()
    lr = train.exponential_decay(1.0, gs, 1, 0.5)
    inc = af.assign_add(gs, 1)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        got = []
        for _ in range(3):
            got.append(float(sess.run(lr)))
            sess.run(inc)
    assert got == [1.0, 0.5, 0.25]


def test_global_step_lookup_and_checks():
    assert train.get_global_step() is None
    v = af.Variable(np.int64(0), name="global_step")
    assert train.get_global_step() is v._ref()          # found by name, as in TF
    g = af.Graph()
    with g.as_default():
        with variable_scope("inside"):
            gs = train.create_global_step()
        assert gs.op.name == "global_step"
        assert gs in af.global_variables() and gs not in af.trainable_variables()
    with pytest.raises(TypeError, match="integer type"):
        train.assert_global_step(af.constant(1.0))
    with pytest.raises(TypeError, match="not scalar"):
        train.assert_global_step(af.constant([1, 2]))
    with pytest.raises(TypeError, match="Variable or Tensor"):
        train.assert_global_step(3)
