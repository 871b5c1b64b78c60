"""tf.nn.raw_rnn against TensorFlow 2.21 (tests/fixtures/make_raw_rnn.py): the loop_fn protocol, emitted
TensorArrays, final state and loop state, and gradients."""
from __future__ import annotations

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
