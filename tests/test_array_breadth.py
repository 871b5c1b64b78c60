"""Array ops added for TF-1.x programs, against TensorFlow 2.21's values and gradients
(tests/fixtures/make_array_breadth.py): the same expressions, with `tf` bound to actorflow."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from tests import tf_reference

FIX = tf_reference.load("array_breadth.json")


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_and_gradients_match_tensorflow(expr):
    tf_reference.check(FIX, expr)


def test_bad_input_is_named():
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [None, None], name="x")
        with pytest.raises(ValueError, match="minus 1 in REFLECT mode"):
            af.pad(af.ones([2, 2]), [[2, 0], [0, 0]], "REFLECT")
        with pytest.raises(ValueError, match="invalid subscripts"):
            af.einsum("ij,j2->i", x, x)
        with pytest.raises(ValueError, match="2 inputs, but 1 tensors"):
            af.einsum("ij,jk->ik", x)
        with pytest.raises(ValueError, match="out of range"):
            af.roll(af.ones([2]), 1, 3)
        band = af.matrix_band_part(x, 5, 0, name="band")
        rolled = af.roll(x, [1, 2], af.placeholder(af.int32, [2], name="axes"), name="rolled")
        with af.Session() as s:
            with pytest.raises(af.errors.InvalidArgumentError, match=r"num_lower must be negative or less or equal "
                                                                      r"to number of rows \(2\) got: 5") as e:
                s.run(band, {x: np.ones((2, 3))})
            assert "band" in str(e.value)
            with pytest.raises(af.errors.InvalidArgumentError, match="axis 7 is out of range"):
                s.run(rolled, {x: np.ones((2, 3)), "axes:0": [0, 7]})


def test_eye_and_sequence_mask_with_tensor_sizes():
    with af.Graph().as_default():
        n = af.placeholder(af.int32, [], name="n")
        lengths = af.placeholder(af.int64, [None], name="lengths")
        e = af.eye(n, batch_shape=[2], dtype=af.float64)
        m = af.sequence_mask(lengths, n)
        with af.Session() as s:
            ev, mv = s.run([e, m], {n: 3, lengths: [0, 2, 5]})
    np.testing.assert_array_equal(ev, np.broadcast_to(np.eye(3), (2, 3, 3)))
    np.testing.assert_array_equal(mv, np.arange(3)[None, :] < np.array([0, 2, 5])[:, None])
