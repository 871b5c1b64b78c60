"""af.TensorArray: TF-1.x TensorArray programs against TensorFlow 2.21's values and gradients
(tests/fixtures/make_tensor_array.py), and its errors."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from tests import tf_reference

FIX = tf_reference.load("tensor_array.json")


@pytest.mark.parametrize("name", list(FIX["programs"]))
def test_programs_match_tensorflow(name):
    tf_reference.check(FIX, name)


def test_shapes_are_inferred_from_writes_and_checked():
    with af.Graph().as_default():
        ta = af.TensorArray(af.float32, size=2)
        ta = ta.write(0, af.zeros([4, 2]))
        assert ta.element_shape.as_list() == [4, 2] and ta.stack().shape.as_list() == [None, 4, 2]
        with pytest.raises(ValueError, match="Inconsistent shapes"):
            ta.write(1, af.zeros([3]))
        with pytest.raises(TypeError, match="dtype is float32"):
            ta.write(1, af.zeros([4, 2], af.int32))
        with pytest.raises(ValueError, match="Size must be provided"):
            af.TensorArray(af.float32)


def test_run_time_errors_name_the_op():
    with af.Graph().as_default():
        i = af.placeholder(af.int32, [], name="i")
        ta = af.TensorArray(af.float32, size=2).write(0, [1.0])
        with af.Session() as s:
            with pytest.raises(af.errors.InvalidArgumentError, match="Trying to access element 5 in a list with 2"):
                s.run(ta.read(i), {i: 5})
            with pytest.raises(af.errors.InvalidArgumentError, match="element 1 was never set"):
                s.run(af.TensorArray(af.float32, size=2).write(0, af.placeholder_with_default([1.0], [None]))
                      .stack())
            np.testing.assert_array_equal(s.run(ta.read(i), {i: 0}), [1.0])
