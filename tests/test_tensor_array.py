"""af.TensorArray: TF-1.x TensorArray programs against TensorFlow 2.21's values and gradients
(tests/fixtures/make_tensor_array.py), and its errors."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import actorflow as af

FIX = json.loads((pathlib.Path(__file__).parent / "fixtures" / "tensor_array.json").read_text())


def _weights(shape):
    n = int(np.prod(shape))
    return (np.arange(n, dtype=np.float64).reshape(shape) % 5 - 2.0) * 0.75


@pytest.mark.parametrize("name", list(FIX["programs"]))
def test_programs_match_tensorflow(name):
    case = FIX["cases"][name]
    with af.Graph().as_default():
        env = {"tf": af}
        env.update({k: af.constant(np.array(v, np.float64)) for k, v in FIX["inputs"].items()})
        exec(FIX["programs"][name], env)  # noqa: S102 (the fixture's own programs)
        ys = env["result"] if isinstance(env["result"], list) else [env["result"]]
        with af.Session() as s:
            vals = s.run(ys)
            for got, want, dt in zip(vals, case["values"], case["dtypes"]):
                want = np.array(want, dtype=dt)
                assert np.asarray(got).dtype == want.dtype and np.shape(got) == want.shape, name
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=name)
            terms = [af.reduce_sum(t * _weights(np.shape(v))) for t, v in zip(ys, vals) if t.dtype.is_floating]
            grads = af.gradients(af.add_n(terms), [env[k] for k in FIX["inputs"]])
            for (k, want), g in zip(case["grads"].items(), grads):
                if want is None:
                    assert g is None, f"{name}: TF has no gradient for {k}"
                else:
                    np.testing.assert_allclose(s.run(af.convert_to_tensor(g)), np.array(want), rtol=1e-10,
                                               atol=1e-12, err_msg=f"{name} d/d{k}")


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
