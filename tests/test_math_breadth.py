"""The trigonometric, hyperbolic, error and gamma functions (tf.math.tan ... digamma, atan2,
polygamma): values and gradients against TensorFlow 2.21 (tests/fixtures/math_breadth.json,
written by make_math_breadth.py), including the inf and NaN TF gives at domain boundaries;
dtypes, broadcasting and dtype errors; the GPU kernels against the CPU ones."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import actorflow as af
from actorflow.scheduler.devices import gpu_count
from tests.conftest import run
from tests.gradcheck import check_gradients

pytestmark = pytest.mark.usefixtures("graph")

with open(os.path.join(os.path.dirname(__file__), "fixtures", "math_breadth.json")) as f:
    FIXTURE = json.load(f)
CASES = FIXTURE["cases"]
UNARY = ["tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "lgamma",
         "digamma"]
RTOL = {"float32": 1e-5, "float64": 1e-6}


def _case_id(c):
    shapes = "x".join(str(np.asarray(v).shape) for v in c["inputs"])
    return f"{c['op']}-{c['dtype']}-{shapes}"


def assert_like_tf(actual, expected, dtype, what):
    """Equal to TF's values within rtol for `dtype`, with inf and NaN exactly where TF has them."""
    expected = np.asarray(expected, dtype=dtype)
    actual = np.asarray(actual)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype}, TF gives {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, TF gives {expected.shape}"
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected), err_msg=f"{what}: NaN positions")
    np.testing.assert_array_equal(np.isposinf(actual), np.isposinf(expected), err_msg=f"{what}: +inf positions")
    np.testing.assert_array_equal(np.isneginf(actual), np.isneginf(expected), err_msg=f"{what}: -inf positions")
    finite = np.isfinite(expected)
    # atol: TF's CPU kernels flush subnormal results to zero (exp(-100) in float32), numpy keeps them.
    np.testing.assert_allclose(actual[finite], expected[finite], rtol=RTOL[dtype], atol=np.finfo(dtype).tiny,
                               err_msg=what)


def test_fixture_covers_every_function():
    assert {c["op"] for c in CASES} == set(UNARY) | {"atan2", "polygamma"}
    assert {c["dtype"] for c in CASES} == {"float32", "float64"}


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_values_and_gradients_match_tensorflow(case):
    dtype = case["dtype"]
    xs = [af.constant(np.asarray(v, dtype)) for v in case["inputs"]]
    y = getattr(af.math, case["op"])(*xs)
    dy = af.constant(np.asarray(case["upstream"], dtype))
    grads = af.gradients(y, xs, grad_ys=dy)
    wanted = [g for g in grads if g is not None]
    value, *gvals = run([y] + wanted)
    assert_like_tf(value, case["value"], dtype, f"{case['op']} value")
    gvals = iter(gvals)
    for i, (g, expected) in enumerate(zip(grads, case["grads"])):
        if expected is None:
            assert g is None, f"{case['op']}: TF has no gradient for input {i}"
            continue
        assert g is not None, f"{case['op']}: no gradient for input {i}"
        assert_like_tf(next(gvals), expected, dtype, f"{case['op']} gradient of input {i}")


@pytest.mark.parametrize("name", UNARY)
def test_top_level_and_math_names_agree(name):
    assert getattr(af, name) is getattr(af.math, name)


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_unary_keeps_dtype_and_shape(name, dtype):
    x = np.full((2, 3), 0.5 if name != "acosh" else 1.5, dtype)
    y = getattr(af, name)(af.constant(x))
    assert y.dtype is af.as_dtype(dtype) and y.shape.as_list() == [2, 3]
    out = run(y)
    assert out.dtype == dtype and out.shape == (2, 3)
    ref = run(getattr(af, name)(af.constant(x.astype(np.float64))))
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=2e-3 if dtype == np.float16 else 1e-5)


@pytest.mark.parametrize("name", UNARY + ["atan2", "polygamma"])
def test_integer_input_raises_type_error_naming_the_op(name):
    fn = getattr(af, name)
    args = [af.constant([1, 2])] * (2 if name in ("atan2", "polygamma") else 1)
    with pytest.raises(TypeError) as e:
        fn(*args)
    op_type = {"lgamma": "Lgamma", "digamma": "Digamma", "atan2": "Atan2", "polygamma": "Polygamma",
               "erfc": "Erfc"}.get(name, name.capitalize())
    assert op_type in str(e.value) and "int32" in str(e.value)


def test_python_numbers_become_float32():
    y = af.atan2(1.0, -1.0)
    assert y.dtype is af.float32
    np.testing.assert_allclose(run(y), np.float32(3 * np.pi / 4), rtol=1e-6)
    assert af.erf(0.5).dtype is af.float32


def test_atan2_broadcasts_and_its_gradient_sums_back():
    rng = np.random.default_rng(7)
    y0 = rng.uniform(-2, 2, (4, 1, 3))
    x0 = rng.uniform(0.5, 2, (5, 1)) * np.where(rng.random((5, 1)) < 0.5, -1, 1)
    y, x = af.constant(y0), af.constant(x0)
    z = af.atan2(y, x)
    assert z.shape.as_list() == [4, 5, 3]
    np.testing.assert_allclose(run(z), np.arctan2(y0, x0), rtol=1e-12)
    gy, gx = af.gradients(z, [y, x])
    assert gy.shape.as_list() == [4, 1, 3] and gx.shape.as_list() == [5, 1]
    check_gradients(lambda a, b: af.atan2(a, b), [y0, x0])


def test_atan2_dtype_mismatch_raises():
    with pytest.raises(TypeError, match="Atan2"):
        af.atan2(af.constant([1.0], af.float32), af.constant([1.0], af.float64))


@pytest.mark.parametrize("name,lo,hi", [("tan", -1.2, 1.2), ("asin", -0.9, 0.9), ("acos", -0.9, 0.9),
                                        ("atan", -3, 3), ("sinh", -3, 3), ("cosh", -3, 3), ("asinh", -3, 3),
                                        ("acosh", 1.1, 4), ("atanh", -0.9, 0.9), ("erf", -2, 2), ("erfc", -2, 2),
                                        ("lgamma", 0.2, 6), ("digamma", 0.2, 6)])
def test_gradients_match_finite_differences(name, lo, hi):
    x = np.random.default_rng(3).uniform(lo, hi, (3, 4))
    check_gradients(getattr(af, name), [x])


def test_second_derivative_of_lgamma_is_trigamma():
    x0 = np.array([0.5, 1.0, 2.5, 10.0])
    x = af.constant(x0)
    (g1,) = af.gradients(af.lgamma(x), [x])
    (g2,) = af.gradients(g1, [x])
    (g3,) = af.gradients(g2, [x])
    # trigamma(1) = pi**2 / 6; tetragamma(1) = -2 zeta(3)
    v1, v2, v3 = run([g1, g2, g3])
    np.testing.assert_allclose(v2[1], np.pi ** 2 / 6, rtol=1e-12)
    np.testing.assert_allclose(v3[1], -2 * 1.2020569031595942, rtol=1e-12)
    np.testing.assert_allclose(v1[1], -0.5772156649015329, rtol=1e-12)


@pytest.mark.skipif(gpu_count() == 0, reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("name", UNARY + ["atan2", "polygamma"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_kernels_agree_with_cpu(name, dtype):
    rng = np.random.default_rng(11)
    lo, hi = {"acosh": (1.1, 4.0), "asin": (-0.9, 0.9), "acos": (-0.9, 0.9), "atanh": (-0.9, 0.9),
              "lgamma": (0.1, 6.0), "digamma": (0.1, 6.0)}.get(name, (-2.0, 2.0))
    x0 = rng.uniform(lo, hi, (64, 33)).astype(dtype)
    if name in ("lgamma", "digamma"):       # poles, and negative values away from them
        x0[0, :6] = [0.0, -1.0, -2.0, 1.0, -2.5, -1.5]
    a0 = np.floor(rng.uniform(0, 4, (64, 1))).astype(dtype)
    a0[0] = 1.5
    args = [a0, np.abs(x0) + 0.1] if name == "polygamma" else [x0, x0.T.copy()[:33, :1].T] if name == "atan2" else [x0]
    outs = {}
    for device in ("/cpu:0", "/gpu:0"):
        g = af.Graph()
        with g.as_default(), af.device(device):
            ts = [af.constant(v) for v in args]
            y = getattr(af, name)(*ts)
            grads = [t for t in af.gradients(y, ts) if t is not None]
            with af.Session(graph=g) as s:
                outs[device] = s.run([y] + grads)
    for c, gp in zip(outs["/cpu:0"], outs["/gpu:0"]):
        gp = gp.get() if hasattr(gp, "get") else np.asarray(gp)
        assert gp.dtype == c.dtype
        np.testing.assert_allclose(gp, c, rtol=1e-4 if dtype == np.float32 else 1e-10, equal_nan=True)


# -- the numba JIT -----------------------------------------------------------------------------
JIT_OPS = ["tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "lgamma"]


def _jit_config(on: bool):
    oo, rc = af.OptimizerOptions, af.RewriterConfig
    return af.ConfigProto(graph_options=af.GraphOptions(
        optimizer_options=oo(global_jit_level=oo.ON_1 if on else oo.OFF),
        rewrite_options=rc(constant_folding=rc.OFF, arithmetic_optimization=rc.OFF)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_jit_clusters_compute_what_the_kernels_compute(dtype, monkeypatch):
    """Each function inside a compiled cluster (two ops and more: x * 1 feeds it), on the fixture's
    inputs, edge values included; and atan2 of a broadcast pair. Digamma is not compiled."""
    from actorflow.scheduler.jit import jit_pass
    from actorflow.scheduler.plan import make_plan
    monkeypatch.setenv("AF_JIT_MIN_CLUSTER_SIZE", "2")
    g = af.Graph()
    feed, fetches = {}, []
    with g.as_default():
        for name in JIT_OPS:
            xs = np.asarray(next(c for c in CASES if c["op"] == name)["inputs"][0], dtype)
            x = af.placeholder(dtype, xs.shape, name=f"x_{name}")
            feed[x] = xs
            fetches.append(getattr(af, name)(x * 1.0) + 0.0)
        y = af.placeholder(dtype, [2, 3], name="y")
        x = af.placeholder(dtype, [3], name="x")
        feed[y] = np.array([[1.0, -2.0, 0.0], [-0.0, 0.25, -1.5]], dtype)
        feed[x] = np.array([2.0, -1.0, -0.0], dtype)
        fetches.append(af.atan2(y * 1.0, x) - 0.0)
    types = [op.type for op in jit_pass(make_plan(g, list(feed), fetches, [])).ops]
    assert "_JitCluster" in types
    assert not {"Tan", "Erf", "Lgamma", "Atan2"} & set(types), "an op stayed out of the clusters"
    outs = {}
    for on in (True, False):
        with af.Session(graph=g, config=_jit_config(on)) as s:
            outs[on] = s.run(fetches, feed)
    for name, a, b in zip(JIT_OPS + ["atan2"], outs[True], outs[False]):
        assert a.dtype == b.dtype == dtype, name
        assert_like_tf(a, b, np.dtype(dtype).name, f"{name} compiled")
