"""Array ops added for TF-1.x programs, against TensorFlow 2.21's values and gradients
(tests/fixtures/make_array_breadth.py): the same expressions, with `tf` bound to actorflow."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import actorflow as af

FIX = json.loads((pathlib.Path(__file__).parent / "fixtures" / "array_breadth.json").read_text())


def _weights(shape):
    n = int(np.prod(shape))
    return (np.arange(n, dtype=np.float64).reshape(shape) % 7 - 3.0) * 0.5


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_and_gradients_match_tensorflow(expr):
    case = FIX["cases"][expr]
    with af.Graph().as_default():
        env = {"tf": af}
        env.update({k: af.constant(np.array(v, np.float64)) for k, v in FIX["inputs"].items()})
        y = eval(expr, env)  # noqa: S307 (the fixture's own expressions)
        ys = y if isinstance(y, list) else [y]
        with af.Session() as s:
            vals = s.run(ys)
            for got, want, dt, t in zip(vals, case["values"], case["dtypes"], ys):
                want = np.array(want, dtype=dt)
                assert np.asarray(got).dtype == want.dtype, expr
                assert np.shape(got) == want.shape, expr
                if t.shape.is_fully_defined():
                    assert tuple(t.shape.as_list()) == want.shape, f"{expr}: static shape {t.shape}"
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=expr)
            terms = [af.reduce_sum(af.cast(t, af.float64) * _weights(np.shape(v)))
                     for t, v in zip(ys, vals) if t.dtype.is_floating]
            if not terms:
                return
            srcs = [env[k] for k in FIX["inputs"]]
            grads = af.gradients(af.add_n(terms), srcs)
            for (k, want), g in zip(case["grads"].items(), grads):
                if want is None:
                    assert g is None, f"{expr}: TF has no gradient for {k}"
                    continue
                assert g is not None, f"{expr}: no gradient for {k}"
                np.testing.assert_allclose(s.run(af.convert_to_tensor(g)), np.array(want), rtol=1e-10, atol=1e-12,
                                           err_msg=f"{expr} d/d{k}")


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
