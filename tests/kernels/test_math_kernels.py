"""CPU math kernels (actorflow/kernels/cpu/math.py) against numpy references and TF semantics."""
from __future__ import annotations

import numpy as np
import pytest

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import get_kernel

FLOATS = (np.float16, np.float32, np.float64)
INTS = (np.int32, np.int64)


def kernel(op, **attrs):
    return get_kernel(op, "CPU").factory(attrs)


def run(op, *inputs, **attrs):
    return kernel(op, **attrs)(*inputs)


def tol(dt):
    return {np.dtype(np.float16): 2e-3, np.dtype(np.float32): 2e-6}.get(np.dtype(dt), 1e-12)


def assert_close(got, want, dtype):
    got_dt = np.asarray(got).dtype
    assert got_dt == np.dtype(dtype), f"dtype {got_dt}, expected {np.dtype(dtype)}"
    want = np.asarray(want)
    assert np.shape(got) == want.shape
    if np.dtype(dtype).kind == "f":
        np.testing.assert_allclose(np.asarray(got, np.float64), want.astype(np.float64),
                                   rtol=tol(dtype) * 4, atol=tol(dtype) * 4, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def sample(shape, dtype, rng, low=-3.0, high=3.0):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        return rng.integers(int(low), int(high) + 1, size=shape).astype(dt)
    return rng.uniform(low, high, size=shape).astype(dt)


SHAPES = [(), (0,), (5,), (2, 3, 4)]


# ----------------------------------------------------------------------------------------------
# Unary ops: computed in float64 as the reference, compared in the op's dtype.

def _sigmoid64(x):
    return 1.0 / (1.0 + np.exp(-x))


UNARY_FLOAT = {
    "Neg": (np.negative, -3, 3), "Exp": (np.exp, -3, 3), "Log": (np.log, 0.1, 5),
    "Log1p": (np.log1p, -0.5, 3), "Expm1": (np.expm1, -3, 3), "Sin": (np.sin, -3, 3),
    "Cos": (np.cos, -3, 3), "Sqrt": (np.sqrt, 0, 5), "Rsqrt": (lambda x: 1 / np.sqrt(x), 0.1, 5),
    "Square": (np.square, -3, 3), "Abs": (np.abs, -3, 3), "Sign": (np.sign, -3, 3),
    "Reciprocal": (np.reciprocal, 0.5, 3), "Floor": (np.floor, -3, 3), "Ceil": (np.ceil, -3, 3),
    "Round": (np.rint, -3, 3), "Relu": (lambda x: np.maximum(x, 0), -3, 3),
    "Relu6": (lambda x: np.clip(x, 0, 6), -8, 8),
    "Elu": (lambda x: np.where(x > 0, x, np.expm1(x)), -3, 3),
    "Softplus": (lambda x: np.log1p(np.exp(x)), -5, 5), "Sigmoid": (_sigmoid64, -8, 8),
    "Tanh": (np.tanh, -3, 3),
}


@pytest.mark.parametrize("op", sorted(UNARY_FLOAT))
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_unary_float_ops(op, dtype, shape):
    ref, lo, hi = UNARY_FLOAT[op]
    x = sample(shape, dtype, np.random.default_rng(0), lo, hi)
    got = run(op, x)
    # Floor/Ceil/Round are exact; they must be compared on the same float inputs.
    want = ref(x.astype(np.float64)).astype(dtype)
    assert_close(got, want, dtype)


@pytest.mark.parametrize("op", ["Neg", "Abs", "Sign", "Square", "Relu", "Relu6", "Round",
                                "Floor", "Ceil"])
@pytest.mark.parametrize("dtype", INTS)
def test_unary_int_ops_keep_dtype(op, dtype):
    x = np.array([-7, -1, 0, 1, 3, 9], dtype=dtype)
    ref = {"Neg": -x, "Abs": np.abs(x), "Sign": np.sign(x), "Square": x * x,
           "Relu": np.maximum(x, 0), "Relu6": np.clip(x, 0, 6), "Round": x, "Floor": x, "Ceil": x}[op]
    assert_close(run(op, x), ref, dtype)


def test_sign_of_zero_is_zero():
    assert run("Sign", np.float32(0.0)) == 0
    assert run("Sign", np.array(-0.0)) == 0
    assert run("Sign", np.int32(0)) == 0


def test_round_half_to_even():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5], np.float32)
    np.testing.assert_array_equal(run("Round", x), [-2, -2, -0, 0, 2, 2])


def test_logical_and_predicates():
    b = np.array([True, False])
    np.testing.assert_array_equal(run("LogicalNot", b), [False, True])
    x = np.array([1.0, np.nan, np.inf, -np.inf], np.float32)
    np.testing.assert_array_equal(run("IsNan", x), [False, True, False, False])
    np.testing.assert_array_equal(run("IsFinite", x), [True, False, False, False])
    assert run("IsNan", x).dtype == np.bool_


def test_activations_do_not_overflow():
    x = np.array([-1000.0, -100.0, 0.0, 100.0, 1000.0], np.float32)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        s = run("Sigmoid", x)
        e = run("Elu", x)
    np.testing.assert_allclose(s, [0, 0, 0.5, 1, 1])
    np.testing.assert_allclose(e, [-1, -1, 0, 100, 1000])
    np.testing.assert_allclose(run("Softplus", x), [0, 0, np.log(2), 100, 1000], rtol=1e-6, atol=1e-30)
    # float16 sigmoid keeps its small values instead of overflowing exp(-x) to 0.
    assert run("Sigmoid", np.float16(-14.0)) > 0


def test_unary_accepts_numpy_scalars():
    for op in ("Exp", "Rsqrt", "Relu", "Relu6", "Sigmoid", "Elu", "Softplus", "Round"):
        r = run(op, np.float32(0.5))
        assert np.asarray(r).dtype == np.float32 and np.ndim(r) == 0, op


def test_plain_ufuncs_are_registered_directly():
    # The runtime calls these straight into C: no Python wrapper frame.
    assert kernel("AddV2") is np.add
    assert kernel("Mul") is np.multiply
    assert kernel("Exp") is np.exp
    assert kernel("SelectV2") is np.where


# ----------------------------------------------------------------------------------------------
# Binary ops.

BROADCASTS = [((), ()), ((3,), ()), ((), (4,)), ((2, 3), (3,)), ((2, 1, 3), (4, 1)),
              ((0, 3), (3,)), ((2, 0), (1, 1))]

BINARY_ARITH = {
    "AddV2": np.add, "Sub": np.subtract, "Mul": np.multiply, "Maximum": np.maximum,
    "Minimum": np.minimum, "SquaredDifference": lambda x, y: (x - y) ** 2,
}


@pytest.mark.parametrize("op", sorted(BINARY_ARITH))
@pytest.mark.parametrize("dtype", FLOATS + INTS)
@pytest.mark.parametrize("shapes", BROADCASTS)
def test_binary_arithmetic(op, dtype, shapes):
    rng = np.random.default_rng(1)
    x, y = sample(shapes[0], dtype, rng), sample(shapes[1], dtype, rng)
    want = BINARY_ARITH[op](x.astype(np.float64), y.astype(np.float64)).astype(dtype)
    assert_close(run(op, x, y), want, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shapes", BROADCASTS)
def test_real_div_and_div_no_nan(dtype, shapes):
    rng = np.random.default_rng(2)
    x, y = sample(shapes[0], dtype, rng), sample(shapes[1], dtype, rng, 0.5, 3)
    assert_close(run("RealDiv", x, y), (x.astype(np.float64) / y).astype(dtype), dtype)
    assert_close(run("Div", x, y), (x.astype(np.float64) / y).astype(dtype), dtype)
    y0 = np.where(rng.random(y.shape) < 0.5, 0, y).astype(dtype)
    with np.errstate(all="ignore"):
        want = np.where(y0 == 0, 0, x.astype(np.float64) / y0).astype(dtype)
    assert_close(run("DivNoNan", x, y0), want, dtype)


def test_div_no_nan_zero_over_zero():
    np.testing.assert_array_equal(run("DivNoNan", np.array([0.0, 1.0, 6.0]), np.array([0.0, 0.0, 3.0])),
                                  [0.0, 0.0, 2.0])


@pytest.mark.parametrize("dtype", INTS)
def test_integer_division_floors(dtype):
    x = np.array([7, -7, 7, -7, 0], dtype)
    y = np.array([2, 2, -2, -2, 3], dtype)
    for op in ("FloorDiv", "Div"):
        assert_close(run(op, x, y), np.array([3, -4, -4, 3, 0]), dtype)
    assert_close(run("FloorMod", x, y), np.array([1, 1, -1, -1, 0]), dtype)


@pytest.mark.parametrize("op", ["FloorDiv", "FloorMod", "Div"])
def test_integer_division_by_zero_fails(op):
    with pytest.raises(InvalidArgumentError, match="division by zero"):
        run(op, np.array([1, 2], np.int32), np.array([1, 0], np.int32))
    with pytest.raises(InvalidArgumentError, match="division by zero"):
        run(op, np.int64(3), np.int64(0))


def test_float_floordiv_is_floor_of_quotient():
    # TF computes floor(x / y); numpy's floor_divide gives 9 here.
    assert run("FloorDiv", np.float32(1.0), np.float32(0.1)) == 10
    x = np.array([7.5, -7.5, 7.5, -7.5], np.float64)
    y = np.array([2.0, 2.0, -2.0, -2.0])
    np.testing.assert_array_equal(run("FloorDiv", x, y), [3, -4, -4, 3])
    np.testing.assert_array_equal(run("FloorMod", x, y), [1.5, 0.5, -0.5, -1.5])
    assert run("FloorDiv", np.float16(7), np.float16(2)).dtype == np.float16


def test_pow():
    r = run("Pow", np.array([2, 3, -2], np.int32), np.array([3, 2, 3], np.int32))
    assert r.dtype == np.int32
    np.testing.assert_array_equal(r, [8, 9, -8])
    with pytest.raises(ValueError, match="negative integer powers"):
        run("Pow", np.array([2], np.int32), np.array([-1], np.int32))
    assert_close(run("Pow", np.array([4.0, 9.0], np.float32), np.float32(0.5)), [2.0, 3.0], np.float32)


COMPARISONS = {"Equal": np.equal, "NotEqual": np.not_equal, "Less": np.less,
               "LessEqual": np.less_equal, "Greater": np.greater, "GreaterEqual": np.greater_equal}


@pytest.mark.parametrize("op", sorted(COMPARISONS))
@pytest.mark.parametrize("dtype", (np.float16, np.float32, np.int32, np.int64))
@pytest.mark.parametrize("shapes", BROADCASTS)
def test_comparisons(op, dtype, shapes):
    rng = np.random.default_rng(3)
    x, y = sample(shapes[0], dtype, rng, -2, 2), sample(shapes[1], dtype, rng, -2, 2)
    if dtype in FLOATS:
        x, y = np.round(x), np.round(y)  # so that Equal sees some equal pairs
    assert_close(run(op, x, y), COMPARISONS[op](x, y), np.bool_)


@pytest.mark.parametrize("op,ref", [("LogicalAnd", np.logical_and), ("LogicalOr", np.logical_or)])
def test_logical_binary(op, ref):
    x = np.array([[True, False], [True, True]])
    y = np.array([False, True])
    assert_close(run(op, x, y), ref(x, y), np.bool_)
    assert_close(run(op, np.bool_(True), np.bool_(False)), ref(True, False), np.bool_)


@pytest.mark.parametrize("op", ["AddV2", "Mul", "FloorDiv", "SquaredDifference", "RealDiv", "Less"])
def test_binary_costs_count_the_broadcast_output(op):
    cost = get_kernel(op, "CPU").cost
    assert cost(np.zeros((100, 1)), np.zeros((1, 50))) == 5000
    assert cost(np.zeros((7, 3)), np.float32(1)) == 21
    assert cost(np.zeros(()), np.zeros(())) == 1


# ----------------------------------------------------------------------------------------------
# Cast, SelectV2, AddN.

@pytest.mark.parametrize("src", FLOATS + INTS + (np.bool_,))
@pytest.mark.parametrize("dst", FLOATS + INTS + (np.bool_,))
def test_cast(src, dst):
    x = sample((2, 3), src, np.random.default_rng(4), -5, 5)
    got = run("Cast", x, DstT=np.dtype(dst))
    assert_close(got, x.astype(dst), dst)


def test_cast_semantics():
    # Float to int truncates toward zero; to bool is x != 0 (NaN is true).
    np.testing.assert_array_equal(run("Cast", np.array([-1.7, 1.7]), DstT=np.dtype(np.int32)), [-1, 1])
    np.testing.assert_array_equal(run("Cast", np.array([0.0, -0.0, 0.5, np.nan]), DstT=np.dtype(bool)),
                                  [False, False, True, True])
    x = np.arange(3, dtype=np.float32)
    assert run("Cast", x, DstT=np.dtype(np.float32)) is x
    assert run("Cast", np.float64(2.5), DstT=np.dtype(np.float16)).dtype == np.float16


@pytest.mark.parametrize("dtype", FLOATS + INTS + (np.bool_,))
def test_select_v2_broadcasts(dtype):
    rng = np.random.default_rng(5)
    c = rng.random((2, 1, 4)) < 0.5
    t = sample((3, 4), dtype, rng)
    e = sample((), dtype, rng)
    assert_close(run("SelectV2", c, t, e), np.where(c, t, e), dtype)


@pytest.mark.parametrize("dtype", FLOATS + INTS)
@pytest.mark.parametrize("n", [1, 2, 5])
def test_add_n(dtype, n):
    rng = np.random.default_rng(6)
    xs = [sample((3, 2), dtype, rng) for _ in range(n)]
    before = [x.copy() for x in xs]
    want = np.sum(np.stack([x.astype(np.float64) for x in xs]), axis=0).astype(dtype)
    assert_close(run("AddN", *xs, N=n), want, dtype)
    for x, b in zip(xs, before):
        np.testing.assert_array_equal(x, b)  # inputs untouched
    assert_close(run("AddN", *[np.asarray(x[0, 0]) for x in xs], N=n), want[0, 0], dtype)


# ----------------------------------------------------------------------------------------------
# Gradients of activations, against their definitions and against finite differences.

GRADS = {
    "ReluGrad": lambda g, f: g * (f > 0),
    "Relu6Grad": lambda g, f: g * ((f > 0) & (f < 6)),
    "SoftplusGrad": lambda g, f: g * _sigmoid64(f),
    "EluGrad": lambda g, y: np.where(y < 0, g * (y + 1), g),
    "SigmoidGrad": lambda y, dy: dy * y * (1 - y),
    "TanhGrad": lambda y, dy: dy * (1 - y * y),
    "RsqrtGrad": lambda y, dy: -0.5 * dy * y ** 3,
    "SqrtGrad": lambda y, dy: 0.5 * dy / y,
    "ReciprocalGrad": lambda y, dy: -dy * y * y,
}


@pytest.mark.parametrize("op", sorted(GRADS))
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_activation_grads(op, dtype, shape):
    rng = np.random.default_rng(7)
    a = sample(shape, dtype, rng, 0.2, 2) if op in ("SqrtGrad", "RsqrtGrad") else sample(shape, dtype, rng, -8, 8)
    b = sample(shape, dtype, rng)
    if op == "EluGrad":
        b = np.maximum(b, -0.99).astype(dtype)  # elu outputs are > -1
        a, b = a, b
    want = GRADS[op](a.astype(np.float64), b.astype(np.float64)).astype(dtype)
    assert_close(run(op, a, b), want, dtype)


def _fd(f, x, eps=1e-6):
    return (f(x + eps) - f(x - eps)) / (2 * eps)


@pytest.mark.parametrize("fwd,grad,lo,hi", [
    ("Sigmoid", "SigmoidGrad", -4, 4), ("Tanh", "TanhGrad", -2, 2), ("Sqrt", "SqrtGrad", 0.5, 3),
    ("Rsqrt", "RsqrtGrad", 0.5, 3), ("Reciprocal", "ReciprocalGrad", 0.5, 3)])
def test_output_based_grads_match_finite_differences(fwd, grad, lo, hi):
    x = np.random.default_rng(8).uniform(lo, hi, 20)
    dy = np.random.default_rng(9).uniform(-1, 1, 20)
    y = run(fwd, x)
    np.testing.assert_allclose(run(grad, y, dy), dy * _fd(lambda v: run(fwd, v), x), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("fwd,grad,use_output", [
    ("Relu", "ReluGrad", False), ("Relu6", "Relu6Grad", False), ("Softplus", "SoftplusGrad", False),
    ("Elu", "EluGrad", True)])
def test_feature_based_grads_match_finite_differences(fwd, grad, use_output):
    x = np.random.default_rng(10).uniform(-8, 8, 50)
    x = x[np.abs(x) > 1e-3]
    x = x[np.abs(x - 6) > 1e-3]
    g = np.random.default_rng(11).uniform(-1, 1, x.size)
    second = run(fwd, x) if use_output else x
    np.testing.assert_allclose(run(grad, g, second), g * _fd(lambda v: run(fwd, v), x), rtol=1e-6, atol=1e-8)


# ----------------------------------------------------------------------------------------------
# Reductions.

REDUCTIONS = {"Sum": np.sum, "Prod": np.prod, "Max": np.max, "Min": np.min, "Mean": np.mean}
AXES = [0, -1, [0], [1, 2], [-1, 0], [2, 0, 2], [0, 1, 2], np.array([1], np.int64)]


@pytest.mark.parametrize("op", sorted(REDUCTIONS))
@pytest.mark.parametrize("dtype", FLOATS + INTS)
@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("keep_dims", [False, True])
def test_reductions(op, dtype, axes, keep_dims):
    rng = np.random.default_rng(12)
    x = sample((2, 3, 4), dtype, rng, 1 if op == "Prod" else -5, 2 if op == "Prod" else 5)
    r = np.asarray(axes, np.int32) if not isinstance(axes, np.ndarray) else axes
    ax = tuple(sorted({a % 3 for a in np.atleast_1d(axes).tolist()}))
    if op == "Mean" and np.dtype(dtype).kind == "i":
        s = np.sum(x.astype(np.int64), axis=ax, keepdims=keep_dims)
        n = np.prod([x.shape[a] for a in ax])
        want = (np.sign(s) * (np.abs(s) // n)).astype(dtype)
    else:
        want = REDUCTIONS[op](x.astype(np.float64), axis=ax, keepdims=keep_dims).astype(dtype)
    assert_close(run(op, x, r, keep_dims=keep_dims), want, dtype)


@pytest.mark.parametrize("op", ["Sum", "Prod", "Max", "Min", "Mean", "All", "Any"])
def test_empty_reduction_indices_are_identity(op):
    x = np.arange(6, dtype=np.float32).reshape(2, 3) > 2 if op in ("All", "Any") else \
        np.arange(6, dtype=np.float32).reshape(2, 3)
    for keep in (False, True):
        assert run(op, x, np.zeros(0, np.int32), keep_dims=keep) is x
    s = np.float32(3) if op not in ("All", "Any") else np.bool_(True)
    assert run(op, s, np.zeros(0, np.int32)) is s


@pytest.mark.parametrize("op", ["Sum", "Max", "Mean", "All"])
def test_invalid_reduction_axis(op):
    x = np.ones((2, 3), bool if op == "All" else np.float32)
    with pytest.raises(InvalidArgumentError, match="Invalid reduction dimension"):
        run(op, x, np.int32(2))
    with pytest.raises(InvalidArgumentError, match="Invalid reduction dimension"):
        run(op, x, np.array([0, -3], np.int32))


def test_all_any():
    x = np.array([[True, False, True], [True, True, True]])
    np.testing.assert_array_equal(run("All", x, np.int32(1)), [False, True])
    np.testing.assert_array_equal(run("Any", x, np.int32(0), keep_dims=True), [[True, True, True]])
    e = np.zeros((0, 2), bool)
    np.testing.assert_array_equal(run("All", e, np.int32(0)), [True, True])
    np.testing.assert_array_equal(run("Any", e, np.int32(0)), [False, False])


def test_reductions_of_empty_tensors():
    e = np.zeros((0, 3), np.float32)
    np.testing.assert_array_equal(run("Sum", e, np.int32(0)), [0, 0, 0])
    np.testing.assert_array_equal(run("Prod", e, np.int32(0)), [1, 1, 1])
    np.testing.assert_array_equal(run("Max", e, np.int32(0)), [-np.inf] * 3)
    np.testing.assert_array_equal(run("Min", e, np.int32(0)), [np.inf] * 3)
    assert run("Max", np.zeros(0, np.int32), np.int32(0)) == np.iinfo(np.int32).min
    assert np.isnan(run("Mean", e, np.array([0, 1], np.int32)))
    assert run("Mean", np.zeros(0, np.int64), np.int32(0)) == 0
    assert run("Sum", e, np.int32(1)).shape == (0,)


def test_integer_reductions_keep_dtype_and_wrap():
    x = np.full(3, 2 ** 30, np.int32)
    r = run("Sum", x, np.int32(0))
    assert r.dtype == np.int32 and r == np.int32(-(2 ** 30))  # wraps like TF, no int64 promotion
    assert run("Prod", np.array([3, 4], np.int32), np.int32(0)).dtype == np.int32


def test_integer_mean_truncates_toward_zero():
    assert run("Mean", np.array([1, 2], np.int32), np.int32(0)) == 1
    assert run("Mean", np.array([-1, -2], np.int32), np.int32(0)) == -1
    r = run("Mean", np.array([[-7, 0], [7, 1]], np.int64), np.int32(1))
    assert r.dtype == np.int64
    np.testing.assert_array_equal(r, [-3, 4])
    # the count of 300 does not fit int8; the sum wraps in int8 as TF's does
    x = np.ones(300, np.int8)
    assert run("Mean", x, np.int32(0)) == 0  # sum wraps to 44; 44 // 300 == 0
    assert run("Mean", np.full(300, -1, np.int8), np.int32(0)) == 0


def test_float16_reductions_accumulate_in_float32():
    x = np.ones(4096, np.float16)
    assert run("Sum", x, np.int32(0)) == 4096  # float16 accumulation would stop at 2048
    assert run("Mean", x, np.int32(0)) == 1
    assert run("Sum", x, np.int32(0)).dtype == np.float16
    y = np.full(20, 1.5, np.float16)
    assert run("Prod", y, np.int32(0)).dtype == np.float16
    np.testing.assert_allclose(float(run("Prod", y, np.int32(0))), 1.5 ** 20, rtol=1e-3)


# ----------------------------------------------------------------------------------------------
# ArgMax / ArgMin.

@pytest.mark.parametrize("op,ref", [("ArgMax", np.argmax), ("ArgMin", np.argmin)])
@pytest.mark.parametrize("dtype", FLOATS + INTS)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_arg_reductions(op, ref, dtype, axis):
    x = sample((4, 5), dtype, np.random.default_rng(13), -100, 100)
    r = run(op, x, np.int32(axis))
    assert r.dtype == np.int64
    np.testing.assert_array_equal(r, ref(x, axis=axis))
    r32 = run(op, x, np.int64(axis), output_type=np.dtype(np.int32))
    assert r32.dtype == np.int32
    np.testing.assert_array_equal(r32, ref(x, axis=axis))


def test_arg_reduction_errors_and_ties():
    assert run("ArgMax", np.array([1, 3, 3]), np.int32(0)) == 1  # first of equal maxima
    with pytest.raises(InvalidArgumentError, match="empty"):
        run("ArgMax", np.zeros((0, 2)), np.int32(0))
    with pytest.raises(InvalidArgumentError, match="dimension"):
        run("ArgMin", np.zeros((2, 2)), np.int32(2))
    np.testing.assert_array_equal(run("ArgMax", np.zeros((0, 2)), np.int32(1)), np.zeros(0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(3,), (64, 65), (256, 1024)])
def test_relu_grad_matches_numpy_bit_for_bit(dtype, shape):
    # Large float buffers take the fused numba pass; NaN and -0.0 must come out as numpy's g * (f > 0).
    fn = get_kernel("ReluGrad", "CPU").factory({})
    rng = np.random.default_rng(3)
    g = rng.standard_normal(shape).astype(dtype)
    f = rng.standard_normal(shape).astype(dtype)
    g.reshape(-1)[::7] = np.nan
    g.reshape(-1)[1::9] = -0.0
    f.reshape(-1)[::11] = np.nan
    f.reshape(-1)[::13] = 0
    out = fn(g, f)
    want = np.multiply(g, f > 0)
    assert out.dtype == want.dtype and out.shape == want.shape
    np.testing.assert_array_equal(out, want)
    assert (np.signbit(out) == np.signbit(want)).all()
    # Non-contiguous and mixed inputs fall back to numpy with the same result.
    np.testing.assert_array_equal(fn(g.T, f.T), np.multiply(g.T, f.T > 0))
