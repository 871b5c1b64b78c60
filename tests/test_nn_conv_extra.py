"""conv2d_backprop_filter and the *_v2 backprops, depthwise_conv2d_backprop_*, conv1d_transpose,
conv_transpose, atrous_conv2d_transpose, max_pool_v2 / avg_pool_v2, pool and with_space_to_batch
against TensorFlow 2.21's values and gradients (tests/fixtures/make_nn_conv_extra.py), plus
argument errors."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from tests import tf_reference

FIX = tf_reference.load("nn_conv_extra.json")
PROGRAMS = tf_reference.load("nn_conv_extra_programs.json")


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_and_gradients_match_tensorflow(expr):
    tf_reference.check(FIX, expr)


@pytest.mark.parametrize("key", list(PROGRAMS["cases"]))
def test_with_space_to_batch_matches_tensorflow(key):
    tf_reference.check(PROGRAMS, key)


def test_v2_backprops_equal_the_v1_ops():
    """TF has no CPU kernel of Conv2DBackprop{Filter,Input}V2: they are the v1 ops given the tensors."""
    rng = np.random.default_rng(3)
    with af.Graph().as_default():
        x = af.constant(rng.standard_normal((2, 5, 6, 3)))
        f = af.constant(rng.standard_normal((3, 2, 3, 4)))
        dy = af.nn.conv2d(x, f, [1, 2, 1, 1], "SAME")
        a = af.conv2d_backprop_filter_v2(x, f, dy, [1, 2, 1, 1], "SAME")
        b = af.nn.conv2d_backprop_filter(x, [3, 2, 3, 4], dy, [1, 2, 1, 1], "SAME")
        c = af.conv2d_backprop_input_v2(x, f, dy, [1, 2, 1, 1], "SAME")
        d = af.nn.conv2d_backprop_input([2, 5, 6, 3], f, dy, [1, 2, 1, 1], "SAME")
        assert a.shape.as_list() == [3, 2, 3, 4] and c.shape.as_list() == [2, 5, 6, 3]
        with af.Session() as s:
            av, bv, cv, dv = s.run([a, b, c, d])
        np.testing.assert_array_equal(av, bv)
        np.testing.assert_array_equal(cv, dv)


def test_argument_errors():
    with af.Graph().as_default():
        img = af.constant(np.zeros((1, 6, 6, 2), np.float32))
        with pytest.raises(ValueError, match="SAME"):
            af.nn.pool(img, [2, 2], "MAX", "SAME", dilation_rate=[2, 2])
        with pytest.raises(ValueError, match="strides > 1"):
            af.nn.pool(img, [2, 2], "AVG", "VALID", dilation_rate=[2, 2], strides=[2, 2])
        with pytest.raises(ValueError, match="pooling_type"):
            af.nn.pool(img, [2, 2], "MIN", "VALID")
        with pytest.raises(ValueError, match="rank 3, 4 or 5"):
            af.nn.max_pool_v2(af.constant(np.zeros((2, 3))), 2, 2, "VALID")
        with pytest.raises(ValueError, match="rate"):
            af.nn.atrous_conv2d_transpose(img, af.constant(np.zeros((2, 2, 1, 2), np.float32)), [1, 6, 6, 1], 0,
                                          "SAME")
        with pytest.raises(ValueError, match="filter_shape"):
            af.nn.with_space_to_batch(img, [2, 2], "SAME", lambda x, n, p: x)
