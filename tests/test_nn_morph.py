"""tf.nn.dilation2d / erosion2d against TensorFlow 2.21's values and gradients
(tests/fixtures/make_nn_morph.py), including ties (the first maximizing tap wins), plus errors."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from tests import tf_reference

FIX = tf_reference.load("nn_morph.json")


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_and_gradients_match_tensorflow(expr):
    tf_reference.check(FIX, expr)


def test_errors_name_the_problem():
    with af.Graph().as_default():
        img = af.constant(np.zeros((1, 4, 4, 2), np.float32))
        with pytest.raises(Exception, match="depth"):
            af.nn.dilation2d(img, af.constant(np.zeros((2, 2, 3), np.float32)), [1, 1, 1, 1], [1, 1, 1, 1], "SAME")
        with pytest.raises(Exception, match="Negative dimension"):
            af.nn.dilation2d(img, af.constant(np.zeros((3, 3, 2), np.float32)), [1, 1, 1, 1], [1, 2, 2, 1], "VALID")
        with pytest.raises(ValueError, match="exactly one"):
            af.nn.dilation2d(img, strides=[1, 1, 1, 1], rates=[1, 1, 1, 1], padding="SAME")
