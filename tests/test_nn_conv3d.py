"""tf.nn's 3-D convolution and pooling (conv3d, conv3d_transpose, conv3d backprop functions,
max_pool3d, avg_pool3d) against TensorFlow 2.21's values and gradients (tests/fixtures/
make_nn_conv3d.py), plus shape errors that name the op."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from tests import tf_reference

FIX = tf_reference.load("nn_conv3d.json")
PROGRAMS = tf_reference.load("nn_conv3d_programs.json")


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_and_gradients_match_tensorflow(expr):
    tf_reference.check(FIX, expr)


@pytest.mark.parametrize("key", list(PROGRAMS["cases"]))
def test_second_order_gradients_match_tensorflow(key):
    tf_reference.check(PROGRAMS, key)


def test_bad_shapes_are_errors_naming_the_op():
    x = af.constant(np.zeros((1, 4, 4, 4, 3)))
    with pytest.raises(Exception, match="in_channels"):
        af.nn.conv3d(x, af.constant(np.zeros((2, 2, 2, 2, 4))), [1, 1, 1, 1, 1], "SAME")
    with pytest.raises(Exception, match="5"):
        af.nn.conv3d(af.constant(np.zeros((1, 4, 4, 3))), af.constant(np.zeros((2, 2, 2, 3, 4))), 1, "SAME")
    with pytest.raises(ValueError, match="padding"):
        af.nn.max_pool3d(x, 2, 2, "FULL")
    with pytest.raises(Exception, match="Negative dimension"):
        af.nn.avg_pool3d(x, 5, 1, "VALID")
    dy = af.constant(np.zeros((1, 3, 3, 3, 4)))
    with pytest.raises(Exception, match="out_backprop"):
        af.nn.conv3d_transpose(dy, af.constant(np.zeros((2, 2, 2, 3, 4))), [1, 5, 5, 5, 3], [1, 1, 1, 1, 1],
                               "VALID")


def test_kernel_rejects_a_runtime_shape_mismatch_naming_the_op():
    with af.Graph().as_default():
        sizes = af.placeholder(af.int32, [5])
        y = af.nn.conv3d_transpose(af.constant(np.zeros((1, 3, 3, 3, 4))), af.constant(np.zeros((2, 2, 2, 3, 4))),
                                   sizes, [1, 1, 1, 1, 1], "VALID")
        with af.Session() as s, pytest.raises(Exception, match="Conv3DBackpropInputV2"):
            s.run(y, {sizes: [1, 5, 5, 5, 3]})
