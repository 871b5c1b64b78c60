"""Math ops: graph-time inference and errors, numerics against numpy, gradients against finite
differences, and the TF-1.x operator overloads."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import actorflow as af
from actorflow.graph.op_def import get_op_def
from actorflow.graph.ops import math_ops
from actorflow.kernels.registry import has_kernel
from tests.conftest import run
from tests.gradcheck import check_gradients

pytestmark = pytest.mark.usefixtures("graph")

RNG = np.random.default_rng(1234)


def _available(*op_types, kernels=True) -> bool:
    """Whether these op types (array ops come from a module written in parallel) and, with
    `kernels`, their CPU kernels exist, so that tests relying on them can run."""
    if importlib.util.find_spec("actorflow.graph.ops.array_ops") is not None:
        import actorflow.graph.ops.array_ops  # noqa: F401
    for t in op_types:
        try:
            get_op_def(t)
        except LookupError:
            return False
        if kernels and not has_kernel(t):
            return False
    return True


def needs(*op_types):
    return pytest.mark.skipif(not _available(*op_types), reason=f"needs op types/kernels {op_types}")


# Gradient functions of reductions reshape and broadcast the output gradient.
needs_reshape = needs("Reshape", "BroadcastTo", "Shape")
needs_dynamic = needs("Reshape", "BroadcastTo", "Shape", "BroadcastGradientArgs", "PlaceholderWithDefault",
                      "Size", "Fill", "Range", "Rank", "DynamicStitch")


def ph(dtype, shape=None, name=None):
    return af.placeholder(dtype, shape, name=name)


# ---------------------------------------------------------------------------------------------
# Inference: shapes, dtypes, errors
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sa,sb,expect", [
    ([None, 3], [3], [None, 3]),
    ([None, 1], [1, 4], [None, 4]),
    ([2, None], [None], [2, None]),
    ([5, 1, 3], [4, 1], [5, 4, 3]),
    ([], [2, 2], [2, 2]),
    ([None], [1], [None]),
])
def test_binary_broadcast_shapes(sa, sb, expect):
    for fn in (af.add, af.subtract, af.multiply, af.maximum, af.pow, af.squared_difference):
        out = fn(ph(af.float32, sa), ph(af.float32, sb))
        assert out.shape.as_list() == expect
        assert out.dtype is af.float32
    assert af.less(ph(af.float32, sa), ph(af.float32, sb)).shape.as_list() == expect


def test_binary_unknown_rank_gives_unknown_shape():
    out = af.add(ph(af.float32), ph(af.float32, [2, 3]))
    assert out.shape.ndims is None


def test_binary_shape_mismatch_names_op_and_shapes():
    with pytest.raises(ValueError) as e:
        af.add(ph(af.float32, [2, 3]), ph(af.float32, [4]), name="my_add")
    msg = str(e.value)
    assert "my_add" in msg and "AddV2" in msg and "(2, 3)" in msg and "(4,)" in msg


def test_binary_dtype_mismatch_is_type_error_naming_both():
    x, y = ph(af.float32, [2]), ph(af.float64, [2])
    for fn, op_type in ((af.add, "AddV2"), (af.multiply, "Mul"), (af.equal, "Equal"), (af.maximum, "Maximum")):
        with pytest.raises(TypeError) as e:
            fn(x, y)
        msg = str(e.value)
        assert "float32" in msg and "float64" in msg and op_type in msg
    # It is also a ValueError, like every inference error.
    with pytest.raises(ValueError):
        af.subtract(x, y)


def test_python_scalars_adopt_tensor_dtype():
    x64 = ph(af.float64, [3])
    i32 = ph(af.int32, [3])
    assert (x64 + 1.5).dtype is af.float64
    assert (1.5 * x64).dtype is af.float64
    assert af.maximum(0, x64).dtype is af.float64
    assert (i32 + 2).dtype is af.int32
    assert (i32 * np.int64(2)).dtype is af.int32
    assert (x64 + np.array([1, 2, 3], dtype=np.float32)).dtype is af.float64
    with pytest.raises(TypeError):
        i32 + 1.5


def test_float_only_ops_reject_integers_and_take_python_numbers_as_float32():
    with pytest.raises(TypeError) as e:
        af.exp(ph(af.int32, [2]))
    assert "Exp" in str(e.value) and "int32" in str(e.value)
    assert af.exp(1).dtype is af.float32
    assert af.sqrt([1.0, 4.0]).dtype is af.float32
    with pytest.raises(TypeError):
        af.floor(ph(af.int64, []))


def test_logical_ops_need_bool():
    b = ph(af.bool, [2])
    assert af.logical_and(b, b).dtype is af.bool
    assert af.logical_xor(b, True).dtype is af.bool
    with pytest.raises(TypeError) as e:
        af.logical_or(ph(af.float32, [2]), ph(af.float32, [2]))
    assert "LogicalOr" in str(e.value)
    with pytest.raises(TypeError):
        af.logical_not(ph(af.int32, [2]))


def test_comparison_and_predicate_dtypes():
    x = ph(af.float32, [None, 2])
    for fn in (af.equal, af.not_equal, af.less, af.less_equal, af.greater, af.greater_equal):
        out = fn(x, 1.0)
        assert out.dtype is af.bool and out.shape.as_list() == [None, 2]
    assert af.is_nan(x).dtype is af.bool
    assert af.is_finite(x).shape.as_list() == [None, 2]
    assert af.equal(ph(af.bool, [2]), True).dtype is af.bool


def test_truediv_casts_integers_like_tf():
    assert af.truediv(ph(af.int32, [2]), 2).dtype is af.float64
    assert af.truediv(ph(af.int64, [2]), 2).dtype is af.float64
    assert af.truediv(ph(af.int8, [2]), 2).dtype is af.float32
    assert (ph(af.float32, [2]) / 2).dtype is af.float32
    assert af.divide(ph(af.int32, [2]), ph(af.int32, [2])).op.type == "RealDiv"
    with pytest.raises(TypeError):
        af.truediv(ph(af.int32, [2]), ph(af.float32, [2]))
    assert af.div(ph(af.int32, [2]), 2).op.type == "FloorDiv"
    assert af.div(ph(af.float32, [2]), 2.0).op.type == "RealDiv"


def test_cast():
    x = ph(af.float32, [None, 4])
    y = af.cast(x, af.int32)
    assert y.op.type == "Cast" and y.dtype is af.int32 and y.shape.as_list() == [None, 4]
    assert y.op.get_attr("DstT") is af.int32
    assert af.cast(x, af.float32) is x
    assert af.cast(x, "float64").dtype is af.float64
    assert af.to_float(ph(af.int32, [])).dtype is af.float32
    assert af.to_double(x).dtype is af.float64
    assert af.to_int32(x).dtype is af.int32
    assert af.to_int64(x).dtype is af.int64
    assert af.to_float(ph(af.int32, [])).op.name.startswith("ToFloat")


@pytest.mark.parametrize("shape,kw,expect", [
    ([2, 3, 4], {}, []),
    ([2, 3, 4], {"axis": 1}, [2, 4]),
    ([2, 3, 4], {"axis": -1}, [2, 3]),
    ([2, 3, 4], {"axis": [0, 2]}, [3]),
    ([2, 3, 4], {"axis": [0, 2], "keepdims": True}, [1, 3, 1]),
    ([2, 3, 4], {"reduction_indices": 1, "keep_dims": True}, [2, 1, 4]),
    ([None, 3], {"axis": 0}, [3]),
    ([None, 3], {"axis": 1}, [None]),
    ([None, 3], {}, []),
    ([2, 3], {"axis": []}, [2, 3]),
    (None, {}, []),
    (None, {"axis": 1}, None),
])
def test_reduction_shapes(shape, kw, expect):
    if shape is None and "axis" not in kw and not _available("Range", "Rank", kernels=False):
        pytest.skip("axis=None on an unknown rank needs the Range and Rank ops")
    x = ph(af.float32, shape)
    for fn in (af.reduce_sum, af.reduce_mean, af.reduce_max, af.reduce_min, af.reduce_prod,
               af.reduce_logsumexp):
        out = fn(x, **kw)
        assert out.dtype is af.float32
        assert (out.shape.ndims is None) if expect is None else (out.shape.as_list() == expect), fn.__name__
    b = ph(af.bool, shape)
    out = af.reduce_any(b, **kw)
    assert out.dtype is af.bool
    assert (out.shape.ndims is None) if expect is None else (out.shape.as_list() == expect)


def test_reduction_op_and_attrs():
    x = ph(af.float32, [2, 3])
    s = af.reduce_sum(x, 1, keepdims=True)
    assert s.op.type == "Sum" and s.op.get_attr("keep_dims") is True
    assert s.op.inputs[1].dtype is af.int32
    for fn, t in ((af.reduce_mean, "Mean"), (af.reduce_max, "Max"), (af.reduce_min, "Min"),
                  (af.reduce_prod, "Prod")):
        assert fn(x).op.type == t
    b = ph(af.bool, [2])
    assert af.reduce_all(b).op.type == "All" and af.reduce_any(b).op.type == "Any"


def test_reduction_errors():
    x = ph(af.float32, [2, 3])
    with pytest.raises(ValueError) as e:
        af.reduce_sum(x, 2, name="bad_sum")
    assert "bad_sum" in str(e.value) and "Sum" in str(e.value) and "2" in str(e.value)
    with pytest.raises(ValueError, match="duplicate"):
        af.reduce_sum(x, [1, -1])
    with pytest.raises(ValueError, match="both"):
        af.reduce_sum(x, axis=0, reduction_indices=0)
    with pytest.raises(ValueError, match="both"):
        af.reduce_sum(x, keepdims=True, keep_dims=True)
    with pytest.raises(TypeError):
        af.reduce_all(x)
    with pytest.raises(TypeError):
        af.reduce_sum(ph(af.bool, [2]))


def test_reduction_with_dynamic_axis():
    x = ph(af.float32, [2, None, 4])
    axis = ph(af.int32, [])
    assert af.reduce_sum(x, axis).shape.as_list() == [None, None]
    assert af.reduce_sum(x, axis, keepdims=True).shape.as_list() == [None, None, None]
    assert af.reduce_sum(x, ph(af.int32, [None])).shape.ndims is None


def test_count_nonzero_shape_and_dtype():
    x = ph(af.float32, [2, 3])
    c = af.count_nonzero(x, axis=1)
    assert c.dtype is af.int64 and c.shape.as_list() == [2]
    assert af.count_nonzero(x, dtype=af.int32).dtype is af.int32
    assert af.count_nonzero(input=ph(af.bool, [4])).shape.as_list() == []


def test_argmax_argmin():
    x = ph(af.float32, [2, None, 4])
    a = af.argmax(x, 1)
    assert a.op.type == "ArgMax" and a.dtype is af.int64 and a.shape.as_list() == [2, 4]
    assert af.argmin(x, axis=-1, output_type=af.int32).dtype is af.int32
    assert af.argmax(x).shape.as_list() == [None, 4]            # TF 1.x: axis defaults to 0
    assert af.argmax(x, dimension=2).shape.as_list() == [2, None]
    with pytest.raises(ValueError, match="both"):
        af.argmax(x, axis=1, dimension=1)
    with pytest.raises(ValueError, match="ArgMax"):
        af.argmax(x, 3)
    with pytest.raises(TypeError):
        af.argmax(x, 0, output_type=af.float32)


def test_matmul_inference():
    a, b = ph(af.float32, [None, 3]), ph(af.float32, [3, 5])
    y = af.matmul(a, b)
    assert y.op.type == "MatMul" and y.shape.as_list() == [None, 5]
    assert af.matmul(b, a, transpose_a=True, transpose_b=True).shape.as_list() == [5, None]
    assert af.matmul(a, ph(af.float32, [5, 3]), adjoint_b=True).op.get_attr("transpose_b") is True
    assert (a @ b).op.type == "MatMul"
    with pytest.raises(ValueError) as e:
        af.matmul(ph(af.float32, [2, 3]), ph(af.float32, [4, 5]), name="mm")
    msg = str(e.value)
    assert "mm" in msg and "(2, 3)" in msg and "(4, 5)" in msg
    with pytest.raises(TypeError):
        af.matmul(ph(af.float32, [2, 3]), ph(af.float64, [3, 5]))
    with pytest.raises(ValueError):
        af.matmul(ph(af.float32, [3]), ph(af.float32, [3, 5]))
    with pytest.raises(ValueError, match="transpose_a"):
        af.matmul(a, b, transpose_a=True, adjoint_a=True)


def test_batch_matmul_inference():
    x, y = ph(af.float32, [7, 1, 2, 3]), ph(af.float32, [5, 3, 4])
    z = af.matmul(x, y)
    assert z.op.type == "BatchMatMulV2" and z.shape.as_list() == [7, 5, 2, 4]
    z = af.matmul(x, ph(af.float32, [5, 4, 3]), transpose_b=True)
    assert z.op.get_attr("adj_y") is True and z.shape.as_list() == [7, 5, 2, 4]
    assert af.matmul(ph(af.float32, [None, 2, 3]), ph(af.float32, [3, 4])).shape.as_list() == [None, 2, 4]
    with pytest.raises(ValueError) as e:
        af.matmul(x, ph(af.float32, [5, 4, 4]))
    assert "(7, 1, 2, 3)" in str(e.value) and "(5, 4, 4)" in str(e.value)
    with pytest.raises(ValueError, match="broadcast"):
        af.matmul(ph(af.float32, [3, 2, 2]), ph(af.float32, [4, 2, 2]))


def test_where_and_select():
    c = ph(af.bool, [None, 3])
    x = ph(af.float32, [None, 3])
    out = af.where(c, x, 0.0)
    assert out.op.type == "SelectV2" and out.shape.as_list() == [None, 3] and out.dtype is af.float32
    assert af.where_v2(ph(af.bool, [3]), x, x).shape.as_list() == [None, 3]
    coords = af.where(c)     # one argument: the coordinates of the true elements (op Where)
    assert coords.op.type == "Where" and coords.shape.as_list() == [None, 2] and coords.dtype is af.int64
    with pytest.raises(TypeError):
        af.where(x, x, x)
    with pytest.raises(TypeError):
        af.where(c, x, ph(af.float64, [3]))


def test_add_n():
    xs = [ph(af.float32, [None, 3]), ph(af.float32, [2, None]), ph(af.float32, [2, 3])]
    s = af.add_n(xs)
    assert s.op.type == "AddN" and s.op.get_attr("N") == 3 and s.shape.as_list() == [2, 3]
    assert af.add_n([xs[0]]) is xs[0]
    assert af.accumulate_n(xs).op.type == "AddN"
    with pytest.raises(ValueError, match="shape"):
        af.add_n([ph(af.float32, [2]), ph(af.float32, [3])])
    with pytest.raises(TypeError):
        af.add_n([ph(af.float32, [2]), ph(af.float64, [2])])
    with pytest.raises(ValueError):
        af.add_n([])


def test_scalar_mul():
    x = ph(af.float64, [2])
    assert af.scalar_mul(2, x).dtype is af.float64
    with pytest.raises(ValueError, match="scalar"):
        af.scalar_mul(af.constant([1.0, 2.0], dtype=af.float64), x)
    sl = af.IndexedSlices(ph(af.float32, [2, 3]), ph(af.int32, [2]), af.constant([5, 3]))
    out = af.scalar_mul(3.0, sl)
    assert isinstance(out, af.IndexedSlices) and out.indices is sl.indices


def test_grad_ops_inference():
    y, dy = ph(af.float32, [None, 3]), ph(af.float32, [2, None])
    for fn in (math_ops.sigmoid_grad, math_ops.tanh_grad, math_ops.rsqrt_grad, math_ops.sqrt_grad,
               math_ops.reciprocal_grad, math_ops.relu_grad, math_ops.relu6_grad, math_ops.elu_grad,
               math_ops.softplus_grad):
        out = fn(y, dy)
        assert out.shape.as_list() == [2, 3] and out.dtype is af.float32
    with pytest.raises(ValueError, match="ReluGrad"):
        math_ops.relu_grad(ph(af.float32, [2]), ph(af.float32, [3]))
    assert math_ops.Relu(y).op.type == "Relu"


def test_public_names_are_exported():
    for name in math_ops.__all__:
        assert getattr(af, name) is getattr(math_ops, name), name
    assert "relu_grad" not in math_ops.__all__ and "reduce_to_shape" not in math_ops.__all__


# ---------------------------------------------------------------------------------------------
# Operator overloads
# ---------------------------------------------------------------------------------------------

def test_operator_overloads_build_the_right_ops():
    x, y = ph(af.float32, [2]), ph(af.float32, [2])
    b = ph(af.bool, [2])
    cases = {
        "AddV2": [x + y, x + 1, 1 + x], "Sub": [x - y, 1 - x], "Mul": [x * y, 2 * x],
        "RealDiv": [x / y, 1 / x], "FloorDiv": [x // y, 3 // x], "FloorMod": [x % y, 3 % x],
        "Pow": [x ** y, 2 ** x], "Neg": [-x], "Abs": [abs(x)], "Less": [x < y, 1 > x],
        "LessEqual": [x <= y], "Greater": [x > y], "GreaterEqual": [x >= 1],
        "LogicalNot": [~b], "LogicalAnd": [b & b, True & b], "LogicalOr": [b | b, False | b],
    }
    for op_type, tensors in cases.items():
        for t in tensors:
            assert t.op.type == op_type
    assert (b ^ b).dtype is af.bool
    assert (x + 1).name.startswith("add") and (x * 2).name.startswith("mul")
    assert (x - 1).name.startswith("sub") and (x / 2).name.startswith("truediv")
    # The reflected form keeps the operand order: 1 - x is Sub(1, x).
    t = 1 - x
    assert t.op.inputs[1] is x and t.op.inputs[0].op.type == "Const"
    m = ph(af.float32, [2, 2])
    assert (np.eye(2, dtype=np.float32) @ m).op.type == "MatMul"


def test_eq_and_ne_stay_identity():
    x = ph(af.float32, [2])
    y = x + 0
    assert (x == x) is True and (x == y) is False and (x != y) is True
    assert {x: 1, y: 2}[x] == 1


def test_getitem_delegates_to_slice_helper(monkeypatch):
    import sys
    import types
    calls = []
    fake = types.ModuleType("actorflow.graph.ops.array_ops")
    fake._slice_helper = lambda t, key: calls.append((t, key)) or "sliced"
    monkeypatch.setitem(sys.modules, "actorflow.graph.ops.array_ops", fake)
    x = ph(af.float32, [3, 4])
    assert x[1:, 2] == "sliced"
    assert calls == [(x, (slice(1, None), 2))]


# ---------------------------------------------------------------------------------------------
# Numerics against numpy
# ---------------------------------------------------------------------------------------------

def _positive(shape):
    return RNG.uniform(0.5, 2.0, shape)


_UNARY = [
    (af.negative, np.negative, None), (af.exp, np.exp, None), (af.log, np.log, _positive),
    (af.log1p, np.log1p, _positive), (af.expm1, np.expm1, None), (af.sin, np.sin, None),
    (af.cos, np.cos, None), (af.sqrt, np.sqrt, _positive), (af.rsqrt, lambda v: 1 / np.sqrt(v), _positive),
    (af.square, np.square, None), (af.abs, np.abs, None), (af.sign, np.sign, None),
    (af.reciprocal, np.reciprocal, _positive), (af.floor, np.floor, None), (af.ceil, np.ceil, None),
    (af.round, np.round, None), (af.sigmoid, lambda v: 1 / (1 + np.exp(-v)), None), (af.tanh, np.tanh, None),
    (math_ops.Relu, lambda v: np.maximum(v, 0), None),
]


@pytest.mark.parametrize("fn,ref,gen", _UNARY, ids=[f[0].__name__ if hasattr(f[0], "__name__") else "Relu" for f in _UNARY])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary_numerics(fn, ref, gen, dtype):
    v = (gen((3, 4)) if gen else RNG.standard_normal((3, 4)) * 3).astype(dtype)
    x = ph(af.as_dtype(dtype), [None, 4])
    out = run(fn(x), {x: v})
    assert out.dtype == dtype
    np.testing.assert_allclose(out, ref(v), rtol=1e-6 if dtype == np.float32 else 1e-12, atol=1e-7)


def test_round_is_half_to_even_and_keeps_integers():
    v = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.4, 0.6])
    np.testing.assert_array_equal(run(af.round(af.constant(v))), [-2, -2, -0, 0, 2, 2, 0, 1])
    i = af.constant([1, 2])
    assert af.round(i) is i


_BINARY = [
    (af.add, np.add), (af.subtract, np.subtract), (af.multiply, np.multiply), (af.truediv, np.true_divide),
    (af.realdiv, np.true_divide),
    # TF's float FloorDiv is floor(x / y); numpy's floor_divide corrects the quotient's rounding
    # (1.0 // 0.1 is 9 there, 10 in TF), so the reference is TF's formula.
    (af.floordiv, lambda a, b: np.floor(a / b)), (af.floormod, np.mod),
    (af.maximum, np.maximum), (af.minimum, np.minimum),
    (af.squared_difference, lambda a, b: (a - b) ** 2), (af.equal, np.equal), (af.not_equal, np.not_equal),
    (af.less, np.less), (af.less_equal, np.less_equal), (af.greater, np.greater),
    (af.greater_equal, np.greater_equal),
]


@pytest.mark.parametrize("fn,ref", _BINARY, ids=[f[0].__name__ for f in _BINARY])
def test_binary_numerics_with_broadcasting(fn, ref):
    a = np.round(RNG.standard_normal((2, 3)) * 4, 1)
    b = np.round(RNG.standard_normal((3,)) * 4, 1) + 0.05     # no zeros, a few ties with a avoided
    b[0] = a[1, 0]                                             # one tie for the comparisons
    x, y = ph(af.float64, [None, 3]), ph(af.float64, [3])
    np.testing.assert_allclose(run(fn(x, y), {x: a, y: b}), ref(a, b), rtol=1e-12)


def test_integer_arithmetic_semantics():
    a = np.array([7, -7, 7, -7], dtype=np.int32)
    b = np.array([2, 2, -2, -2], dtype=np.int32)
    x, y = af.constant(a), af.constant(b)
    fd, fm, td, d = run([x // y, x % y, x / y, af.div(x, y)])
    np.testing.assert_array_equal(fd, np.floor_divide(a, b))
    np.testing.assert_array_equal(fm, np.mod(a, b))            # sign of the divisor, like Python
    assert td.dtype == np.float64
    np.testing.assert_allclose(td, a / b)
    np.testing.assert_array_equal(d, np.floor_divide(a, b))


def test_pow_div_no_nan_and_predicates():
    a = np.array([1.0, 2.0, 3.0, -2.0])
    b = np.array([2.0, 0.0, 0.5, 3.0])
    x, y = af.constant(a), af.constant(b)
    p, dnn, nan, fin = run([x ** y, af.div_no_nan(x, y), af.is_nan(af.log(x)), af.is_finite(x / y)])
    np.testing.assert_allclose(p, a ** b)
    np.testing.assert_allclose(dnn, [0.5, 0.0, 6.0, -2 / 3])
    np.testing.assert_array_equal(nan, [False, False, False, True])
    np.testing.assert_array_equal(fin, [True, False, True, True])


def test_logical_numerics():
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    x, y = af.constant(a), af.constant(b)
    out = run([x & y, x | y, x ^ y, ~x, af.logical_xor(x, y)])
    for o, r in zip(out, [a & b, a | b, a ^ b, ~a, a ^ b]):
        np.testing.assert_array_equal(o, r)


def test_cast_numerics():
    v = np.array([-1.7, -0.5, 0.0, 2.9])
    x = af.constant(v)
    i, f, b = run([af.cast(x, af.int32), af.cast(x, af.float32), af.cast(x, af.bool)])
    np.testing.assert_array_equal(i, [-1, 0, 0, 2])                    # truncation toward zero
    assert i.dtype == np.int32 and f.dtype == np.float32 and b.dtype == np.bool_
    np.testing.assert_array_equal(b, [True, True, False, True])


@pytest.mark.parametrize("fn,ref", [
    (af.reduce_sum, np.sum), (af.reduce_mean, np.mean), (af.reduce_max, np.max),
    (af.reduce_min, np.min), (af.reduce_prod, np.prod),
])
@pytest.mark.parametrize("axis,keep", [(None, False), (0, False), (1, True), ([0, 2], False),
                                       (-1, True), ([], False)])
def test_reduction_numerics(fn, ref, axis, keep):
    v = RNG.standard_normal((2, 3, 4))
    x = ph(af.float64, [None, 3, 4])
    out = run(fn(x, axis, keepdims=keep), {x: v})
    np_axis = tuple(axis) if isinstance(axis, list) else axis
    np.testing.assert_allclose(out, ref(v, axis=np_axis, keepdims=keep), rtol=1e-12)


def test_reduction_tensor_axis_and_bool_reductions():
    v = RNG.standard_normal((3, 4))
    x, ax = ph(af.float64, [3, 4]), ph(af.int32, [])
    np.testing.assert_allclose(run(af.reduce_sum(x, ax), {x: v, ax: 1}), v.sum(1))
    b = np.array([[True, False], [True, True]])
    t = af.constant(b)
    out = run([af.reduce_all(t), af.reduce_all(t, 1), af.reduce_any(t, 0), af.reduce_any(~t)])
    for o, r in zip(out, [False, [False, True], [True, True], True]):
        np.testing.assert_array_equal(o, r)


@needs("Range", "Rank")
def test_reduction_of_unknown_rank_over_all_axes():
    v = RNG.standard_normal((2, 3))
    x = ph(af.float64)
    s = af.reduce_sum(x)
    assert s.shape.as_list() == []
    np.testing.assert_allclose(run(s, {x: v}), v.sum())


def test_count_nonzero_numerics():
    v = np.array([[0.0, 1.0, 2.0], [0.0, 0.0, -3.0]])
    out = run([af.count_nonzero(af.constant(v)), af.count_nonzero(af.constant(v), axis=1, keepdims=True),
               af.count_nonzero(af.constant(v != 0), dtype=af.int32)])
    assert out[0] == 3 and out[0].dtype == np.int64
    np.testing.assert_array_equal(out[1], [[2], [1]])
    assert out[2] == 3 and out[2].dtype == np.int32


@needs("StopGradient")
def test_reduce_logsumexp_numerics_and_stability():
    v = np.array([[1.0, 2.0, 3.0], [1000.0, 1000.0, -np.inf]])
    x = ph(af.float64, [2, 3])
    out, kept = run([af.reduce_logsumexp(x, 1), af.reduce_logsumexp(x, 1, keepdims=True)], {x: v})
    expect = [np.log(np.exp(v[0]).sum()), 1000.0 + np.log(2.0)]
    np.testing.assert_allclose(out, expect, rtol=1e-12)
    np.testing.assert_allclose(kept, np.reshape(expect, (2, 1)), rtol=1e-12)
    inf = run(af.reduce_logsumexp(af.constant([-np.inf, -np.inf])))
    assert inf == -np.inf


def test_argmax_argmin_numerics():
    v = RNG.standard_normal((3, 5))
    x = ph(af.float64, [None, 5])
    a0, a1, m1 = run([af.argmax(x, 0), af.argmax(x, 1, output_type=af.int32), af.argmin(x, -1)], {x: v})
    np.testing.assert_array_equal(a0, v.argmax(0))
    np.testing.assert_array_equal(a1, v.argmax(1))
    assert a0.dtype == np.int64 and a1.dtype == np.int32
    np.testing.assert_array_equal(m1, v.argmin(1))


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_numerics(ta, tb):
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 5))
    av, bv = (a.T.copy() if ta else a), (b.T.copy() if tb else b)
    x, y = af.constant(av), af.constant(bv)
    np.testing.assert_allclose(run(af.matmul(x, y, transpose_a=ta, transpose_b=tb)), a @ b, rtol=1e-12)


def test_batch_matmul_numerics_with_broadcast_and_adjoint():
    a, b = RNG.standard_normal((2, 1, 3, 4)), RNG.standard_normal((5, 4, 2))
    out = run(af.matmul(af.constant(a), af.constant(b)))
    np.testing.assert_allclose(out, np.matmul(a, b), rtol=1e-12)
    out = run(af.matmul(af.constant(np.swapaxes(a, -1, -2)), af.constant(b), adjoint_a=True))
    np.testing.assert_allclose(out, np.matmul(a, b), rtol=1e-12)


def test_select_add_n_scalar_mul_numerics():
    c = np.array([[True, False, True], [False, False, True]])
    t, e = RNG.standard_normal((2, 3)), RNG.standard_normal((3,))
    out = run(af.where_v2(af.constant(c), af.constant(t), af.constant(e)))
    np.testing.assert_allclose(out, np.where(c, t, e))
    xs = [RNG.standard_normal((2, 2)) for _ in range(3)]
    np.testing.assert_allclose(run(af.add_n([af.constant(v) for v in xs])), sum(xs))
    np.testing.assert_allclose(run(af.scalar_mul(3, af.constant(xs[0]))), 3 * xs[0])


@needs("Reshape")
def test_where_vector_condition_selects_rows_like_tf1():
    c = np.array([True, False])
    t, e = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))
    out = run(af.where(af.constant(c), af.constant(t), af.constant(e)))
    np.testing.assert_allclose(out, np.where(c[:, None], t, e))


# ---------------------------------------------------------------------------------------------
# Gradients against finite differences
# ---------------------------------------------------------------------------------------------

def gradcheck(build, *inputs, wrt=None, **kw):
    """check_gradients with a random output weighting: sums with all-ones weights would hide
    mistakes that only permute or mis-broadcast a gradient."""
    inputs = [np.asarray(v) for v in inputs]
    g = af.Graph()
    with g.as_default():
        phs = [af.placeholder(af.as_dtype(v.dtype), v.shape) for v in inputs]
        y = build(*phs)
        if y.shape.is_fully_defined():
            shape = y.shape.as_list()
        else:
            with af.Session(graph=g) as sess:
                shape = np.shape(sess.run(y, dict(zip(phs, inputs))))
    grad_y = RNG.standard_normal(shape)
    return check_gradients(build, inputs, grad_y=grad_y, wrt=wrt, **kw)


@pytest.mark.parametrize("fn,gen", [(f, g) for f, _, g in _UNARY if f not in (af.sign, af.floor, af.ceil, af.round)],
                         ids=[f.__name__ if hasattr(f, "__name__") else "Relu" for f, _, g in _UNARY
                              if f not in (af.sign, af.floor, af.ceil, af.round)])
def test_unary_gradients(fn, gen):
    v = gen((2, 3)) if gen else RNG.standard_normal((2, 3))
    v[np.abs(v) < 0.05] = 0.3          # away from the kinks of abs and relu
    gradcheck(fn, v)


@pytest.mark.parametrize("fn", [af.sign, af.floor, af.ceil, af.round, af.is_nan, af.argmax,
                                lambda x: af.less(x, 0.0), lambda x: af.cast(x, af.int32),
                                lambda x: af.floordiv(x, 2.0)])
def test_non_differentiable_ops_pass_no_gradient(fn):
    x = ph(af.float64, [3])
    y = af.cast(fn(x), af.float64)
    # Only the direct `* x` path carries a gradient: d(y * x)/dx = y.
    (g,) = af.gradients(y * x, x, grad_ys=af.constant(np.ones(3)))
    gv, yv = run([g, y], {x: np.array([-1.5, 0.2, 2.7])})
    np.testing.assert_allclose(gv, yv)
    if fn(x).dtype.is_floating:
        assert af.gradients(fn(x), x, grad_ys=af.constant(np.ones(3)))[0] is None


_BINARY_GRAD = [
    (af.add, None), (af.subtract, None), (af.multiply, None), (af.truediv, "nonzero"),
    (af.realdiv, "nonzero"), (af.div_no_nan, "nonzero"), (af.maximum, None), (af.minimum, None),
    (af.squared_difference, None), (af.floormod, "positive"), (af.pow, "positive"),
]


@pytest.mark.parametrize("fn,domain", _BINARY_GRAD, ids=[f.__name__ for f, _ in _BINARY_GRAD])
@pytest.mark.parametrize("sa,sb", [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 2))])
def test_binary_gradients_with_broadcasting(fn, domain, sa, sb):
    a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)
    if domain == "nonzero":
        b = np.sign(b) * (np.abs(b) + 0.5)
    elif domain == "positive":
        a, b = np.abs(a) + 0.5, np.abs(b) + 0.5
    gradcheck(fn, a, b)


def test_pow_gradient_for_negative_base_and_zero_base():
    a = np.array([-2.0, -0.5, 1.5])
    b = np.array([3.0, 2.0, 2.0])
    gradcheck(af.pow, a, b, wrt=[0])
    x, y = ph(af.float64, [3]), ph(af.float64, [3])
    gx, gy = af.gradients(af.pow(x, y), [x, y], grad_ys=af.constant(np.ones(3)))
    gxv, gyv = run([gx, gy], {x: np.array([0.0, -2.0, 2.0]), y: np.array([2.0, 2.0, 2.0])})
    np.testing.assert_allclose(gxv, [0.0, -4.0, 4.0])
    np.testing.assert_allclose(gyv, [0.0, 0.0, 4.0 * np.log(2.0)])    # 0 where x <= 0, like TF


def test_maximum_gradient_goes_to_x_on_ties():
    x, y = ph(af.float64, [3]), ph(af.float64, [3])
    gx, gy = af.gradients(af.maximum(x, y), [x, y], grad_ys=af.constant(np.ones(3)))
    gxv, gyv = run([gx, gy], {x: np.array([1.0, 2.0, 3.0]), y: np.array([1.0, 5.0, 0.0])})
    np.testing.assert_array_equal(gxv, [1, 0, 1])
    np.testing.assert_array_equal(gyv, [0, 1, 0])


def test_select_and_add_n_gradients():
    c = np.array([[True, False, True], [False, True, True]])

    def select(t, e):
        return af.where_v2(af.constant(c), t, e)
    gradcheck(select, RNG.standard_normal((2, 3)), RNG.standard_normal((2, 1)))
    gradcheck(select, RNG.standard_normal((3,)), RNG.standard_normal(()))
    gradcheck(lambda a, b, d: af.add_n([a, b * b, d]), *[RNG.standard_normal((2, 2)) for _ in range(3)])


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_gradients(ta, tb):
    a = RNG.standard_normal((4, 3) if ta else (3, 4))
    b = RNG.standard_normal((5, 4) if tb else (4, 5))
    gradcheck(lambda x, y: af.matmul(x, y, transpose_a=ta, transpose_b=tb), a, b)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_batch_matmul_gradients_with_broadcast(ta, tb):
    a = RNG.standard_normal((2, 1, 4, 3) if ta else (2, 1, 3, 4))
    b = RNG.standard_normal((3, 2, 4) if tb else (3, 4, 2))
    gradcheck(lambda x, y: af.matmul(x, y, adjoint_a=ta, adjoint_b=tb), a, b)


def test_cast_gradient_between_floats_only():
    x = ph(af.float64, [3])
    y = af.cast(x, af.float32)
    (g,) = af.gradients(y, x, grad_ys=af.constant([1.0, 2.0, 3.0], dtype=af.float32))
    assert g.dtype is af.float64
    np.testing.assert_allclose(run(g, {x: np.zeros(3)}), [1, 2, 3])
    z = af.cast(af.cast(x, af.int32), af.float64)
    assert af.gradients(z, x, grad_ys=af.constant(np.ones(3)))[0] is None


def test_integer_inputs_get_no_gradient():
    i = ph(af.int32, [3])
    y = af.cast(i * 2 + i, af.float64)
    assert af.gradients(y, i, grad_ys=af.constant(np.ones(3)))[0] is None
    mm = af.matmul(af.constant([[1, 2]]), af.constant([[3], [4]]))
    assert get_op_def("MatMul").grad_fn(mm.op, af.constant([[1]])) == [None, None]


def test_second_derivatives_through_grad_ops():
    def second(fn):
        def build(x):
            (g,) = af.gradients(fn(x), x, grad_ys=af.constant(np.ones(x.shape.as_list())))
            return g
        return build
    v = RNG.uniform(0.5, 2.0, (2, 3))
    for fn in (af.sigmoid, af.tanh, af.sqrt, af.rsqrt, af.reciprocal, lambda x: af.exp(x) * af.sin(x)):
        gradcheck(second(fn), v, rtol=1e-4, atol=1e-6)
    # relu's second derivative is zero away from the kink; the gradient of ReluGrad w.r.t. its
    # incoming gradient is checked directly.
    gradcheck(lambda g, f: math_ops.relu_grad(g, f), RNG.standard_normal((2, 3)), v - 1.25, wrt=[0])


def test_grad_op_gradients():
    y = RNG.uniform(0.2, 0.8, (2, 3))
    dy = RNG.standard_normal((2, 3))
    for fn in (math_ops.sigmoid_grad, math_ops.tanh_grad, math_ops.rsqrt_grad, math_ops.sqrt_grad,
               math_ops.reciprocal_grad):
        gradcheck(fn, y, dy)
    feats = RNG.standard_normal((2, 3))
    gradcheck(math_ops.softplus_grad, dy, feats)
    gradcheck(math_ops.elu_grad, dy, np.where(feats < 0, np.expm1(feats), feats))


@needs_reshape
@pytest.mark.parametrize("fn", [af.reduce_sum, af.reduce_mean, af.reduce_max, af.reduce_min, af.reduce_prod])
@pytest.mark.parametrize("axis,keep", [(None, False), (0, False), (1, True), ([0, 2], False), (-1, False),
                                       ([0, 2], True)])
def test_reduction_gradients(fn, axis, keep):
    v = RNG.uniform(0.5, 1.5, (2, 3, 4)) * RNG.choice([-1, 1], (2, 3, 4))
    gradcheck(lambda x: fn(x, axis, keepdims=keep), v)


@needs_reshape
def test_reduce_logsumexp_gradient():
    gradcheck(lambda x: af.reduce_logsumexp(x, 1), RNG.standard_normal((3, 4)) * 3)
    gradcheck(lambda x: af.reduce_logsumexp(x), RNG.standard_normal((3, 4)))


@needs_reshape
def test_max_gradient_splits_ties_like_tf():
    x = ph(af.float64, [2, 3])
    (g,) = af.gradients(af.reduce_max(x, 1), x, grad_ys=af.constant(np.array([1.0, 6.0])))
    out = run(g, {x: np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])})
    np.testing.assert_allclose(out, [[0, 0.5, 0.5], [2, 2, 2]])


@needs_reshape
def test_prod_gradient_with_zeros():
    # One zero in a row: only the zero's position gets the product of the others.
    gradcheck(lambda x: af.reduce_prod(x, 1), np.array([[1.5, 0.0, -2.0], [0.7, 1.1, 0.9]]))
    # Two zeros: all zero; zeros in another reduction group do not interfere.
    gradcheck(lambda x: af.reduce_prod(x, 0), np.array([[0.0, 2.0, 1.0], [0.0, 3.0, 0.0], [4.0, 0.5, 2.0]]))
    gradcheck(lambda x: af.reduce_prod(x), np.array([[1.5, 0.0], [-2.0, 3.0]]))


def _erase_shape(t):
    """The same value with nothing known of its shape at graph-build time."""
    return af.placeholder_with_default(t, shape=None)


@needs_dynamic
def test_gradients_with_unknown_shapes():
    a, b = RNG.standard_normal((2, 3)), RNG.standard_normal((3,))
    for fn in (af.add, af.multiply, af.maximum, af.squared_difference):
        gradcheck(lambda x, y, fn=fn: fn(_erase_shape(x), _erase_shape(y)), a, b)
    for fn in (af.reduce_sum, af.reduce_mean, af.reduce_max, af.reduce_prod):
        gradcheck(lambda x, fn=fn: fn(_erase_shape(x), 1), a)
        gradcheck(lambda x, fn=fn: fn(_erase_shape(x)), a)
    gradcheck(lambda x, y: af.matmul(_erase_shape(x), y), RNG.standard_normal((2, 2, 3)), RNG.standard_normal((3, 2)))
    gradcheck(lambda x, c: af.where_v2(c > 0, _erase_shape(x), 0.0), a, RNG.standard_normal((2, 1)), wrt=[0])


@needs_dynamic
@pytest.mark.parametrize("fn", [af.reduce_sum, af.reduce_mean, af.reduce_min, af.reduce_prod])
def test_reduction_gradients_with_partially_known_shapes(fn):
    v = RNG.uniform(0.5, 1.5, (2, 3, 4))

    def partial(x):
        return af.placeholder_with_default(x, shape=[None, None, 4])
    gradcheck(lambda x: fn(partial(x), 2), v)                      # kept shape (?, ?, 1): dynamic
    gradcheck(lambda x: fn(partial(x), [0, 1], keepdims=False), v)  # kept shape (1, 1, 4): static
    gradcheck(lambda x: fn(partial(x), af.constant(-1)), v)


@needs_dynamic
def test_reduce_to_shape_dynamic_path():
    g = ph(af.float64, [None, 2, 3])
    like = ph(af.float64, [None, 1])
    r = math_ops.reduce_to_shape(g, like)
    assert r.shape.as_list() == [None, 1]
    v = RNG.standard_normal((4, 2, 3))
    out = run(r, {g: v, like: np.zeros((2, 1))})
    np.testing.assert_allclose(out, v.sum(axis=(0, 2))[:, None])


def test_reduce_to_shape_static_paths():
    g = ph(af.float64, [4, 2, 3])
    for like_shape in [(4, 2, 3), (2, 3), (3,), (1, 3), (2, 1), (), (4, 1, 3), (1, 1, 1)]:
        like = ph(af.float64, like_shape)
        r = math_ops.reduce_to_shape(g, like)
        assert r.shape.as_list() == list(like_shape)
        assert all(op.type in ("Sum", "Const", "Placeholder") for op in af.get_default_graph().get_operations())
    v = RNG.standard_normal((4, 2, 3))
    np.testing.assert_allclose(run(math_ops.reduce_to_shape(g, ph(af.float64, (2, 1))), {g: v}),
                               v.sum(axis=(0, 2))[:, None])
