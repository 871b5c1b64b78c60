"""tf.nn.raw_rnn against TensorFlow 2.21 (tests/fixtures/make_raw_rnn.py): the loop_fn protocol, emitted
TensorArrays, final state and loop state, and gradients."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from tests import tf_reference

RAW_RNN = tf_reference.load("raw_rnn.json")


@pytest.mark.parametrize("key", list(RAW_RNN["cases"]))
def test_raw_rnn_matches_tensorflow(key):
    tf_reference.check(RAW_RNN, key)


def test_raw_rnn_rejects_a_loop_fn_that_is_not_callable():
    with af.Graph().as_default():
        with pytest.raises(TypeError, match="loop_fn"):
            af.nn.raw_rnn(af.nn.rnn_cell.BasicRNNCell(3), None)


class _Cell:
    """tanh(x W + h U) with fixed weights, state a tuple (h, h) when `pair`."""
    output_size = 3

    def __init__(self, pair=False):
        rng = np.random.default_rng(4)
        self.w, self.u = rng.standard_normal((2, 3)) * 0.5, rng.standard_normal((3, 3)) * 0.5
        self.pair = pair
        self.state_size = (3, 3) if pair else 3

    def zero_state(self, batch_size, dtype):
        return af.zeros([batch_size, 3], dtype)

    def __call__(self, inputs, state, scope=None):
        h = state[0] if self.pair else state
        h = af.tanh(af.matmul(inputs, self.w) + af.matmul(h, self.u))
        return h, ((h, h * 2.0) if self.pair else h)


class _Saver:
    """A state saver over variables (the protocol of tf.contrib.training's SequenceQueueingStateSaver)."""

    def __init__(self, names):
        self.vars = {n: af.Variable(np.full((2, 3), 0.1 * (i + 1)), name=n) for i, n in enumerate(names)}

    def state(self, name):
        return self.vars[name].read_value()

    def save_state(self, name, value):
        return af.assign(self.vars[name], value)


def _numpy_rnn(cell, xs, h):
    outs = []
    for x in xs:
        h = np.tanh(x @ cell.w + h @ cell.u)
        outs.append(h)
    return outs, h


@pytest.mark.parametrize("pair", [False, True])
def test_static_state_saving_rnn_starts_from_and_saves_the_state(pair):
    xs = [np.random.default_rng(t).standard_normal((2, 2)) for t in range(3)]
    cell = _Cell(pair)
    names = ("h", "h2") if pair else "h"
    with af.Graph().as_default():
        saver = _Saver(names if pair else [names])
        outs, state = af.nn.static_state_saving_rnn(cell, [af.constant(x) for x in xs], saver, names)
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            got1, st1 = s.run([outs, state])
            got2 = s.run(outs)
            saved = s.run({n: v for n, v in saver.vars.items()})
    want1, h1 = _numpy_rnn(cell, xs, np.full((2, 3), 0.1))
    np.testing.assert_allclose(got1, want1, rtol=1e-12)
    np.testing.assert_allclose(st1[0] if pair else st1, h1, rtol=1e-12)
    want2, h2 = _numpy_rnn(cell, xs, h1)              # the second run starts from the saved state
    np.testing.assert_allclose(got2, want2, rtol=1e-12)
    np.testing.assert_allclose(saved["h"], h2, rtol=1e-12)
    if pair:
        np.testing.assert_allclose(saved["h2"], 2 * h2, rtol=1e-12)


def test_static_state_saving_rnn_checks_state_names():
    with af.Graph().as_default():
        with pytest.raises(ValueError, match="state_name"):
            af.nn.static_state_saving_rnn(_Cell(True), [af.constant(np.zeros((2, 2)))], _Saver(["h"]), "h")
