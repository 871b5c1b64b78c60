"""tf.nn functions and tf.layers classes added for TF-1.x programs, against TensorFlow 2.21
(tests/fixtures/make_nn_misc.py): the same expressions with `tf` bound to actorflow, values and
gradients of sum(output * W); and the same small model built from layer classes (nn_misc_model.py),
whose variable names, layer names, outputs and one SGD step must match TF's."""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

import actorflow as af
from tests.gradcheck import check_gradients  # noqa: F401  (finite differences, used below)

_HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
sys.path.insert(0, _HERE)
from nn_misc_model import build_model, weights  # noqa: E402

with open(os.path.join(_HERE, "nn_misc.json")) as _f:
    FIX = json.load(_f)


def _tol(dtype):
    return dict(rtol=1e-10, atol=1e-12) if np.dtype(dtype) == np.float64 else dict(rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_nn_values_and_gradients_match_tensorflow(expr):
    case = FIX["cases"][expr]
    with af.Graph().as_default():
        env = {"tf": af}
        env.update({k: af.constant(np.array(v, dtype=FIX["input_dtypes"][k])) for k, v in FIX["inputs"].items()})
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
                np.testing.assert_allclose(got, want, err_msg=expr, **_tol(dt))
            terms = [af.reduce_sum(af.cast(t, af.float64) * weights(np.shape(v)))
                     for t, v in zip(ys, vals) if t.dtype.is_floating]
            srcs = [env[k] for k in FIX["inputs"]]
            grads = af.gradients(af.add_n(terms), srcs)
            for (k, want), g in zip(case["grads"].items(), grads):
                if want is None:
                    assert g is None, f"{expr}: TF has no gradient for {k}"
                    continue
                assert g is not None, f"{expr}: no gradient for {k}"
                np.testing.assert_allclose(s.run(af.convert_to_tensor(g)), np.array(want), err_msg=f"{expr} d/d{k}",
                                           **_tol(FIX["input_dtypes"][k]))
