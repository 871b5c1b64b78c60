"""Checking actorflow against the expression fixtures TensorFlow 2.21 wrote (tests/fixtures/
tf_expressions.py): the same expressions with `tf` bound to actorflow; values (exactly for
integers, to float tolerance for floats), static shapes where known, and the gradients of
sum(cast(output, float64) * weights(shape)) with respect to every input, or their absence."""
from __future__ import annotations

import json
import pathlib

import numpy as np

import actorflow as af
from tests.fixtures.tf_expressions import decode, weights

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


def load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def tolerance(want: np.ndarray) -> dict:
    """float64: rtol 1e-10; lower precisions: rtol 1e-5, with an absolute floor of 1e-5 of the largest
    finite magnitude (sums of products cancel)."""
    if want.dtype in (np.float64, np.complex128):
        return {"rtol": 1e-10, "atol": 1e-12}
    finite = np.abs(want[np.isfinite(want)])  # (NaN and inf, an undefined statistic, compare exactly)
    scale = float(np.max(finite)) if finite.size else 0.0
    return {"rtol": 1e-5, "atol": 1e-5 * max(scale, 1e-30)}


def inputs(fix: dict) -> dict:
    dts = fix.get("input_dtypes", {})
    return {k: af.constant(decode(v, dts.get(k, "float64"))) for k, v in fix["inputs"].items()}


def _close(got, want, msg):
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, err_msg=msg, **tolerance(want))
    else:
        np.testing.assert_array_equal(got, want, err_msg=msg)


def check(fix: dict, key: str) -> None:
    """Asserts that actorflow computes case `key` of fixture `fix` as TensorFlow did."""
    case = fix["cases"][key]
    with af.Graph().as_default():
        env = {"tf": af, "np": np}
        env.update(inputs(fix))
        if fix.get("setup"):
            exec(fix["setup"], env)  # noqa: S102 (the fixture's own code)
        if "programs" in fix:
            exec(fix["programs"][key], env)  # noqa: S102 (the fixture's own programs)
            y = env["result"]
        else:
            y = eval(key, env)  # noqa: S307 (the fixture's own expressions)
        ys = list(y) if isinstance(y, (list, tuple)) else [y]
        with af.Session() as s:
            vals = s.run(ys)
            shapes = case.get("shapes", [None] * len(ys))
            for got, want, dt, t, shp in zip(vals, case["values"], case["dtypes"], ys, shapes):
                want = decode(want, dt) if shp is None else decode(want, dt).reshape(shp)
                assert np.asarray(got).dtype == want.dtype, f"{key}: dtype {np.asarray(got).dtype}, TF {want.dtype}"
                assert np.shape(got) == want.shape, f"{key}: shape {np.shape(got)}, TF {want.shape}"
                if t.shape.is_fully_defined():
                    assert tuple(t.shape.as_list()) == want.shape, f"{key}: static shape {t.shape}"
                else:
                    assert t.shape.is_compatible_with(af.TensorShape(list(want.shape))), f"{key}: {t.shape}"
                _close(got, want, key)
            terms = [af.reduce_sum(af.cast(t, af.float64) * weights(np.shape(v)))
                     for t, v in zip(ys, vals) if t.dtype.is_floating]
            if not terms:
                assert all(g is None for g in case["grads"].values()), key
                return
            srcs = [env[k] for k in fix["inputs"]]
            grads = af.gradients(af.add_n(terms), srcs)
            for (k, want), g in zip(case["grads"].items(), grads):
                if want is None:
                    assert g is None, f"{key}: TF has no gradient for {k}"
                    continue
                assert g is not None, f"{key}: no gradient for {k}"
                want = decode(want, fix.get("input_dtypes", {}).get(k, "float64"))
                got = s.run(af.convert_to_tensor(g))
                assert got.dtype == want.dtype, f"{key} d/d{k}: dtype {got.dtype}, TF {want.dtype}"
                _close(got, want, f"{key} d/d{k}")
