"""Element-wise math, casts, selection, reductions and matrix products (tf.math, TF 1.x names).

Each op type is defined here once, with its output inference and its gradient (TF's formulas),
followed by the public wrappers. Binary ops take operands of one dtype; a Python or numpy operand
of a wrapper adopts the dtype of the tensor operand (``x + 1.5`` with float64 `x` adds a float64
constant). Gradients only flow into floating-point inputs.

The element-wise ``*Grad`` ops (``ReluGrad``, ``SigmoidGrad``...) and their wrappers
(`relu_grad`, `sigmoid_grad`...) are module-level but not in `__all__`: they are building blocks
for gradient functions (nn_ops uses them), not part of TF's public API.
"""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, convert_to_tensor, name_scope
from actorflow.graph.indexed_slices import IndexedSlices
from actorflow.graph.op_def import InferenceError, define_op, get_op_def
from actorflow.graph.ops.constant import constant, identity, stop_gradient
from actorflow.graph.ops.infer import broadcast_shapes, constant_value
from actorflow.graph.tensor_shape import TensorShape

__all__ = [
    # arithmetic
    "add", "subtract", "multiply", "divide", "truediv", "realdiv", "div", "floordiv", "floor_div",
    "mod", "floormod", "negative", "pow", "squared_difference", "maximum", "minimum", "div_no_nan",
    "scalar_mul", "add_n", "accumulate_n",
    # element-wise functions
    "exp", "log", "log1p", "expm1", "sin", "cos", "sqrt", "rsqrt", "square", "abs", "sign",
    "reciprocal", "floor", "ceil", "round", "sigmoid", "tanh", "is_nan", "is_inf", "is_finite",
    "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "asinh", "acosh", "atanh",
    "erf", "erfc", "lgamma", "digamma", "polygamma",
    # comparison and logic
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "logical_and", "logical_or", "logical_not", "logical_xor", "where", "where_v2",
    # casts
    "cast", "to_float", "to_double", "to_complex64", "to_complex128", "to_int32", "to_int64",
    # reductions and matrices
    "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_all",
    "reduce_any", "reduce_logsumexp", "count_nonzero", "argmax", "argmin", "matmul",
]


# ---------------------------------------------------------------------------------------------
# Inference
# ---------------------------------------------------------------------------------------------

class _DTypeError(InferenceError, TypeError):
    """A dtype mistake: a ValueError like every inference error, and a TypeError like in TF."""


def _kind_ok(dtype, kind: str) -> bool:
    if kind == "float":
        return dtype.is_floating
    if kind == "inexact":
        return dtype.is_floating or dtype.is_complex
    if kind == "numeric":
        return dtype.is_numeric
    if kind == "bool":
        return dtype.is_bool
    return True  # "any"


_KIND_WORDS = {"float": "a floating-point", "inexact": "a floating-point or complex", "numeric": "a numeric", "bool": "a bool"}


def _check_kind(t, kind: str, what: str) -> None:
    if not _kind_ok(t.dtype, kind):
        raise _DTypeError(f"{what} must have {_KIND_WORDS[kind]} dtype, got {t.dtype.name}")


def _check_same_dtype(x, y, xname="x", yname="y") -> None:
    if x.dtype is not y.dtype:
        raise _DTypeError(f"{xname} and {yname} must have the same dtype, got {x.dtype.name} "
                          f"({xname}) and {y.dtype.name} ({yname})")


def _unary(kind: str, out_dtype=None):
    def infer(inputs, attrs):
        (x,) = inputs
        _check_kind(x, kind, "input")
        return [(out_dtype or x.dtype, x.shape)]
    return infer


def _binary(kind: str, out_dtype=None):
    def infer(inputs, attrs):
        x, y = inputs
        _check_same_dtype(x, y)
        _check_kind(x, kind, "inputs")
        return [(out_dtype or x.dtype, broadcast_shapes(x.shape, y.shape))]
    return infer


def _same_shape_pair(kind: str, names: tuple):
    """Inference of the element-wise *Grad ops: two same-shaped inputs of one dtype."""
    def infer(inputs, attrs):
        a, b = inputs
        _check_same_dtype(a, b, *names)
        _check_kind(a, kind, "inputs")
        if not a.shape.is_compatible_with(b.shape):
            raise InferenceError(f"{names[0]} and {names[1]} must have the same shape, "
                                 f"got {a.shape} and {b.shape}")
        return [(a.dtype, a.shape.merge_with(b.shape))]
    return infer


# ---------------------------------------------------------------------------------------------
# Gradient plumbing
# ---------------------------------------------------------------------------------------------

def _op(type_name: str, *inputs, name=None, **attrs):
    """Creates an op defined elsewhere (array ops used by gradients), importing its module lazily:
    array_ops is imported after this module and builds on it."""
    try:
        op_def = get_op_def(type_name)
    except LookupError:
        import actorflow.graph.ops.array_ops  # noqa: F401  (registers the array op types)
        op_def = get_op_def(type_name)
    return op_def(*inputs, name=name, **attrs)


def _grad(op_def, dense: bool = True):
    """Registers a gradient that only feeds floating-point inputs.

    Integer and bool inputs get None without building anything: formulas such as Pow's log(x)
    would not even type-check for them. Sparse (IndexedSlices) output gradients are densified
    unless `dense` is False (for ops such as AddN that pass gradients through untouched).
    """
    def deco(fn):
        def grad_fn(op, *grads):
            if not any(_differentiable(t) for t in op.inputs):
                return [None] * len(op.inputs)
            if dense:
                grads = [g if g is None or isinstance(g, Tensor) else convert_to_tensor(g) for g in grads]
            out = fn(op, *grads)
            return [g if _differentiable(t) else None for g, t in zip(out, op.inputs, strict=True)]
        grad_fn.__name__ = fn.__name__
        grad_fn.__doc__ = fn.__doc__
        op_def.gradient(grad_fn)
        return fn
    return deco


def _differentiable(t) -> bool:
    return t.dtype.is_floating or t.dtype.is_complex


def _conj(x):
    """conj(x) for a complex tensor, x itself otherwise: TF's gradients of a real loss with respect
    to a complex input are grad * conj(f'(z)), so the formulas below conjugate what they multiply by."""
    if not x.dtype.is_complex:
        return x
    from actorflow.graph.ops import complex_ops
    return complex_ops.Conj(x)


def _no_grad(*op_defs):
    """Marks op types as not differentiable (tf.no_gradient): every input gets None."""
    for d in op_defs:
        d.gradient(lambda op, *grads: [None] * len(op.inputs))


def _scalar(value, dtype) -> Tensor:
    return constant(value, dtype=dtype)


def _shape_tensor(x: Tensor) -> Tensor:
    """The shape of `x` as an int32 vector: a constant when static, else a Shape op."""
    if x.shape.is_fully_defined():
        return constant(x.shape.as_list(), dtype=dtypes.int32)
    return _op("Shape", x, out_type=dtypes.int32)


def reduce_to_shape(grad, like):
    """Sums a gradient of a broadcast result back to the shape of the input `like`.

    Static (a few Sums) when the ranks and the broadcast axes are known when the graph is built;
    otherwise Shape + BroadcastGradientArgs + Sum + Reshape, decided at run time. Not public: it
    is the helper gradient functions of broadcasting ops share.
    """
    if grad is None:
        return None
    if not isinstance(grad, Tensor):
        grad = convert_to_tensor(grad)
    gs, ls = grad.shape, like.shape
    if gs.dims is not None and ls.dims is not None and len(ls.dims) <= len(gs.dims):
        lead = len(gs.dims) - len(ls.dims)
        static, keep_axes = True, []
        for i, dl in enumerate(ls.dims):
            dg = gs.dims[lead + i]
            if dl == 1:
                if dg != 1:
                    keep_axes.append(i)
            elif dl is None and dg != 1:
                # `like` may be 1 here (broadcast) or not: only the run time knows.
                static = False
                break
        if static:
            if lead:
                grad = Sum(grad, constant(list(range(lead)), dtype=dtypes.int32), keep_dims=False)
            if keep_axes:
                grad = Sum(grad, constant(keep_axes, dtype=dtypes.int32), keep_dims=True)
            return grad
    s_like = _op("Shape", like, out_type=dtypes.int32)
    s_grad = _op("Shape", grad, out_type=dtypes.int32)
    r_like, _ = _op("BroadcastGradientArgs", s_like, s_grad)
    out = _op("Reshape", Sum(grad, r_like, keep_dims=False), s_like)
    out.set_shape(like.shape)
    return out


def _binary_grads(op, gx, gy):
    x, y = op.inputs
    return [reduce_to_shape(gx, x), reduce_to_shape(gy, y)]


# ---------------------------------------------------------------------------------------------
# Element-wise unary ops
# ---------------------------------------------------------------------------------------------

Neg = define_op("Neg", _unary("numeric"))
Exp = define_op("Exp", _unary("inexact"))
Log = define_op("Log", _unary("inexact"))
Log1p = define_op("Log1p", _unary("float"))
Expm1 = define_op("Expm1", _unary("float"))
Sin = define_op("Sin", _unary("float"))
Cos = define_op("Cos", _unary("float"))
Sqrt = define_op("Sqrt", _unary("inexact"))
Rsqrt = define_op("Rsqrt", _unary("float"))
Square = define_op("Square", _unary("numeric"))
Abs = define_op("Abs", _unary("numeric"))
Sign = define_op("Sign", _unary("numeric"))
Reciprocal = define_op("Reciprocal", _unary("numeric"))
Floor = define_op("Floor", _unary("float"))
Ceil = define_op("Ceil", _unary("float"))
Round = define_op("Round", _unary("numeric"))
Relu = define_op("Relu", _unary("numeric"))
Sigmoid = define_op("Sigmoid", _unary("float"))
Tanh = define_op("Tanh", _unary("float"))
LogicalNot = define_op("LogicalNot", _unary("bool"))
IsNan = define_op("IsNan", _unary("float", dtypes.bool_))
IsFinite = define_op("IsFinite", _unary("float", dtypes.bool_))
IsInf = define_op("IsInf", _unary("float", dtypes.bool_))
Tan = define_op("Tan", _unary("float"))
Asin = define_op("Asin", _unary("float"))
Acos = define_op("Acos", _unary("float"))
Atan = define_op("Atan", _unary("float"))
Sinh = define_op("Sinh", _unary("float"))
Cosh = define_op("Cosh", _unary("float"))
Asinh = define_op("Asinh", _unary("float"))
Acosh = define_op("Acosh", _unary("float"))
Atanh = define_op("Atanh", _unary("float"))
Erf = define_op("Erf", _unary("float"))
Erfc = define_op("Erfc", _unary("float"))
Lgamma = define_op("Lgamma", _unary("float"))
Digamma = define_op("Digamma", _unary("float"))

# Gradient helpers of the unary ops: (y, dy) -> dy * f'(x) expressed through y = f(x).
SigmoidGrad = define_op("SigmoidGrad", _same_shape_pair("float", ("y", "dy")))
TanhGrad = define_op("TanhGrad", _same_shape_pair("float", ("y", "dy")))
RsqrtGrad = define_op("RsqrtGrad", _same_shape_pair("float", ("y", "dy")))
SqrtGrad = define_op("SqrtGrad", _same_shape_pair("inexact", ("y", "dy")))
ReciprocalGrad = define_op("ReciprocalGrad", _same_shape_pair("inexact", ("y", "dy")))
ReluGrad = define_op("ReluGrad", _same_shape_pair("numeric", ("gradients", "features")))
Relu6Grad = define_op("Relu6Grad", _same_shape_pair("numeric", ("gradients", "features")))
EluGrad = define_op("EluGrad", _same_shape_pair("float", ("gradients", "outputs")))
SoftplusGrad = define_op("SoftplusGrad", _same_shape_pair("float", ("gradients", "features")))

_no_grad(Sign, Floor, Ceil, Round, LogicalNot, IsNan, IsInf, IsFinite)


@_grad(Neg)
def _neg_grad(op, grad):
    return [Neg(grad)]


@_grad(Exp)
def _exp_grad(op, grad):
    return [Mul(grad, _conj(op.outputs[0]))]


@_grad(Log)
def _log_grad(op, grad):
    return [Mul(grad, Reciprocal(_conj(op.inputs[0])))]


@_grad(Log1p)
def _log1p_grad(op, grad):
    x = op.inputs[0]
    return [Mul(grad, Reciprocal(AddV2(_scalar(1, x.dtype), x)))]


@_grad(Expm1)
def _expm1_grad(op, grad):
    return [Mul(grad, Exp(op.inputs[0]))]


@_grad(Sin)
def _sin_grad(op, grad):
    return [Mul(grad, Cos(op.inputs[0]))]


@_grad(Cos)
def _cos_grad(op, grad):
    return [Neg(Mul(grad, Sin(op.inputs[0])))]


# The inverse trigonometric and hyperbolic functions, erf and the gamma family: TF's formulas in
# TF's order of operations, so that values at the domain boundaries (inf, NaN) come out as in TF.

@_grad(Tan)
def _tan_grad(op, grad):
    return [Mul(Square(Reciprocal(Cos(op.inputs[0]))), grad)]


def _one_minus_square_inv_sqrt(x):
    return Reciprocal(Sqrt(Sub(_scalar(1, x.dtype), Square(x))))


@_grad(Asin)
def _asin_grad(op, grad):
    return [Mul(grad, _one_minus_square_inv_sqrt(op.inputs[0]))]


@_grad(Acos)
def _acos_grad(op, grad):
    return [Mul(Neg(grad), _one_minus_square_inv_sqrt(op.inputs[0]))]


@_grad(Atan)
def _atan_grad(op, grad):
    x = op.inputs[0]
    return [Mul(grad, Reciprocal(AddV2(_scalar(1, x.dtype), Square(x))))]


@_grad(Sinh)
def _sinh_grad(op, grad):
    return [Mul(grad, Cosh(op.inputs[0]))]


@_grad(Cosh)
def _cosh_grad(op, grad):
    return [Mul(grad, Sinh(op.inputs[0]))]


@_grad(Asinh)
def _asinh_grad(op, grad):
    # 1 / sqrt(x**2 + 1) = 1 / cosh(asinh(x)), through the output as TF does
    return [RealDiv(grad, Cosh(op.outputs[0]))]


@_grad(Acosh)
def _acosh_grad(op, grad):
    # 1 / sqrt(x**2 - 1) = 1 / sinh(acosh(x))
    return [RealDiv(grad, Sinh(op.outputs[0]))]


@_grad(Atanh)
def _atanh_grad(op, grad):
    x = op.inputs[0]
    return [Mul(grad, Reciprocal(Sub(_scalar(1, x.dtype), Square(x))))]


_TWO_OVER_SQRT_PI = 2 / np.sqrt(np.pi)


@_grad(Erf)
def _erf_grad(op, grad):
    x = op.inputs[0]
    return [Mul(Mul(grad, _scalar(_TWO_OVER_SQRT_PI, grad.dtype)), Exp(Neg(Square(x))))]


@_grad(Erfc)
def _erfc_grad(op, grad):
    x = op.inputs[0]
    return [Mul(Mul(grad, _scalar(-_TWO_OVER_SQRT_PI, grad.dtype)), Exp(Neg(Square(x))))]


@_grad(Lgamma)
def _lgamma_grad(op, grad):
    return [Mul(grad, Digamma(op.inputs[0]))]


@_grad(Digamma)
def _digamma_grad(op, grad):
    x = op.inputs[0]
    return [Mul(grad, Polygamma(_scalar(1, x.dtype), x))]


@_grad(Sqrt)
def _sqrt_grad(op, grad):
    return [SqrtGrad(_conj(op.outputs[0]), grad)]


@_grad(Rsqrt)
def _rsqrt_grad(op, grad):
    return [RsqrtGrad(op.outputs[0], grad)]


@_grad(Square)
def _square_grad(op, grad):
    x = op.inputs[0]
    return [Mul(grad, Mul(_scalar(2, x.dtype), _conj(x)))]


@_grad(Abs)
def _abs_grad(op, grad):
    return [Mul(grad, Sign(op.inputs[0]))]


@_grad(Reciprocal)
def _reciprocal_grad(op, grad):
    return [ReciprocalGrad(_conj(op.outputs[0]), grad)]


@_grad(Relu)
def _relu_grad(op, grad):
    return [ReluGrad(grad, op.outputs[0])]


@_grad(Sigmoid)
def _sigmoid_grad(op, grad):
    return [SigmoidGrad(op.outputs[0], grad)]


@_grad(Tanh)
def _tanh_grad(op, grad):
    return [TanhGrad(op.outputs[0], grad)]


# Second derivatives (gradients of the *Grad ops), TF's formulas.

@_grad(SigmoidGrad)
def _sigmoid_grad_grad(op, grad):
    y, dy = op.inputs
    gb = Mul(grad, dy)
    return [Sub(gb, Mul(_scalar(2, y.dtype), Mul(gb, y))), SigmoidGrad(y, grad)]


@_grad(TanhGrad)
def _tanh_grad_grad(op, grad):
    y, dy = op.inputs
    return [Mul(Mul(grad, _scalar(-2, y.dtype)), Mul(dy, y)), TanhGrad(y, grad)]


@_grad(RsqrtGrad)
def _rsqrt_grad_grad(op, grad):
    y, dy = op.inputs
    return [Mul(Mul(_scalar(-1.5, y.dtype), grad), Mul(dy, Square(y))), RsqrtGrad(y, grad)]


@_grad(SqrtGrad)
def _sqrt_grad_grad(op, grad):
    y = op.inputs[0]
    ga = RealDiv(grad, y)
    return [Neg(Mul(ga, op.outputs[0])), Mul(_scalar(0.5, y.dtype), ga)]


@_grad(ReciprocalGrad)
def _reciprocal_grad_grad(op, grad):
    y, dy = op.inputs
    return [Mul(Mul(grad, _scalar(-2, y.dtype)), Mul(dy, y)), ReciprocalGrad(y, grad)]


@_grad(ReluGrad)
def _relu_grad_grad(op, grad):
    return [ReluGrad(grad, op.inputs[1]), None]


@_grad(Relu6Grad)
def _relu6_grad_grad(op, grad):
    return [Relu6Grad(grad, op.inputs[1]), None]


@_grad(EluGrad)
def _elu_grad_grad(op, grad):
    dy, outputs = op.inputs
    zero = _scalar(0, outputs.dtype)
    return [EluGrad(grad, outputs), SelectV2(Less(outputs, zero), Mul(grad, dy), zero)]


@_grad(SoftplusGrad)
def _softplus_grad_grad(op, grad):
    dy, x = op.inputs
    # d/dx [dy * sigmoid(x)] = dy * sigmoid'(x) = dy / (e^-x + 2 + e^x)
    denom = AddV2(AddV2(Exp(Neg(x)), _scalar(2, x.dtype)), Exp(x))
    return [SoftplusGrad(grad, x), RealDiv(Mul(grad, dy), denom)]


# ---------------------------------------------------------------------------------------------
# Element-wise binary ops
# ---------------------------------------------------------------------------------------------

AddV2 = define_op("AddV2", _binary("numeric"))
Add = define_op("Add", _binary("numeric"))         # TF's older name (graphs written by TF 1.x)
Sub = define_op("Sub", _binary("numeric"))
Mul = define_op("Mul", _binary("numeric"))
# RealDiv is float-only here: truediv casts integers first, and an integer RealDiv kernel would
# have to truncate (TF's semantics) rather than return floats.
RealDiv = define_op("RealDiv", _binary("inexact"))
Div = define_op("Div", _binary("numeric"))
FloorDiv = define_op("FloorDiv", _binary("numeric"))
FloorMod = define_op("FloorMod", _binary("numeric"))
Pow = define_op("Pow", _binary("numeric"))
Maximum = define_op("Maximum", _binary("numeric"))
Minimum = define_op("Minimum", _binary("numeric"))
SquaredDifference = define_op("SquaredDifference", _binary("numeric"))
DivNoNan = define_op("DivNoNan", _binary("inexact"))
Atan2 = define_op("Atan2", _binary("float"))           # Atan2(y, x)
# Polygamma(a, x): the a-th derivative of digamma; NaN where a is not a non-negative integer.
Polygamma = define_op("Polygamma", _binary("float"))
Equal = define_op("Equal", _binary("any", dtypes.bool_))
NotEqual = define_op("NotEqual", _binary("any", dtypes.bool_))
Less = define_op("Less", _binary("numeric", dtypes.bool_))
LessEqual = define_op("LessEqual", _binary("numeric", dtypes.bool_))
Greater = define_op("Greater", _binary("numeric", dtypes.bool_))
GreaterEqual = define_op("GreaterEqual", _binary("numeric", dtypes.bool_))
LogicalAnd = define_op("LogicalAnd", _binary("bool", dtypes.bool_))
LogicalOr = define_op("LogicalOr", _binary("bool", dtypes.bool_))

_no_grad(FloorDiv, Equal, NotEqual, Less, LessEqual, Greater, GreaterEqual, LogicalAnd, LogicalOr)


@_grad(Add)
@_grad(AddV2)
def _add_grad(op, grad):
    return _binary_grads(op, grad, grad)


@_grad(Sub)
def _sub_grad(op, grad):
    return _binary_grads(op, grad, Neg(grad))


@_grad(Mul)
def _mul_grad(op, grad):
    x, y = op.inputs
    return _binary_grads(op, Mul(grad, _conj(y)), Mul(_conj(x), grad))


def _div_grads(op, grad):
    x, y = op.inputs
    xc, yc = _conj(x), _conj(y)
    return _binary_grads(op, RealDiv(grad, yc), Mul(grad, RealDiv(RealDiv(Neg(xc), yc), yc)))


# Div shares RealDiv's formula: for the floats that get gradients the two ops agree.
_grad(RealDiv)(_div_grads)
_grad(Div)(_div_grads)


@_grad(DivNoNan)
def _div_no_nan_grad(op, grad):
    x, y = op.inputs
    xc, yc = _conj(x), _conj(y)
    return _binary_grads(op, DivNoNan(grad, yc), Mul(grad, DivNoNan(DivNoNan(Neg(xc), yc), yc)))


@_grad(Atan2)
def _atan2_grad(op, grad):
    y, x = op.inputs
    grad_inv = RealDiv(grad, AddV2(Square(x), Square(y)))
    return _binary_grads(op, Mul(x, grad_inv), Mul(Neg(y), grad_inv))


@_grad(Polygamma)
def _polygamma_grad(op, grad):
    # d/dx polygamma(a, x) = polygamma(a + 1, x); TF defines no gradient for the order a.
    a, x = op.inputs
    return [None, reduce_to_shape(Mul(Polygamma(AddV2(a, _scalar(1, a.dtype)), x), grad), x)]


@_grad(FloorMod)
def _floor_mod_grad(op, grad):
    # x mod y = x - floor(x / y) * y, with floor(x / y) piecewise constant.
    x, y = op.inputs
    return _binary_grads(op, grad, Mul(grad, Neg(FloorDiv(x, y))))


@_grad(Pow)
def _pow_grad(op, grad):
    x, y = op.inputs
    z = op.outputs[0]
    one = _scalar(1, x.dtype)
    gx = Mul(grad, Mul(y, Pow(x, Sub(y, one))))
    # d/dy x^y = x^y log x, defined as 0 where x <= 0 (TF's convention: the real power is
    # only differentiable in y for positive x).
    zero = _scalar(0, x.dtype)
    positive = Greater(x, zero)
    log_x = SelectV2(positive, Log(SelectV2(positive, x, one)), zero)
    gy = Mul(grad, Mul(z, log_x))
    return _binary_grads(op, gx, gy)


def _select_grads(op, grad, x_wins):
    zero = _scalar(0, grad.dtype)
    return _binary_grads(op, SelectV2(x_wins, grad, zero), SelectV2(x_wins, zero, grad))


@_grad(Maximum)
def _maximum_grad(op, grad):
    x, y = op.inputs
    return _select_grads(op, grad, GreaterEqual(x, y))


@_grad(Minimum)
def _minimum_grad(op, grad):
    x, y = op.inputs
    return _select_grads(op, grad, LessEqual(x, y))


@_grad(SquaredDifference)
def _squared_difference_grad(op, grad):
    x, y = op.inputs
    gx = Mul(Mul(_scalar(2, grad.dtype), grad), Sub(x, y))
    return _binary_grads(op, gx, Neg(gx))


# ---------------------------------------------------------------------------------------------
# Cast, SelectV2, AddN
# ---------------------------------------------------------------------------------------------

def _infer_cast(inputs, attrs):
    return [(dtypes.as_dtype(attrs["DstT"]), inputs[0].shape)]


Cast = define_op("Cast", _infer_cast)


@Cast.gradient
def _cast_grad(op, grad):
    src, dst = op.inputs[0].dtype, op.outputs[0].dtype
    if (src.is_floating or src.is_complex) and (dst.is_floating or dst.is_complex) and grad is not None:
        return [cast(grad, src)]   # keeps a sparse (IndexedSlices) gradient sparse
    return [None]


def _infer_select(inputs, attrs):
    c, t, e = inputs
    if not c.dtype.is_bool:
        raise _DTypeError(f"condition must be bool, got {c.dtype.name}")
    _check_same_dtype(t, e, "t", "e")
    return [(t.dtype, broadcast_shapes(broadcast_shapes(c.shape, t.shape), e.shape))]


SelectV2 = define_op("SelectV2", _infer_select)


@_grad(SelectV2)
def _select_v2_grad(op, grad):
    c, t, e = op.inputs
    zero = _scalar(0, grad.dtype)
    return [None, reduce_to_shape(SelectV2(c, grad, zero), t), reduce_to_shape(SelectV2(c, zero, grad), e)]


def _infer_add_n(inputs, attrs):
    if not inputs:
        raise InferenceError("AddN needs at least one input")
    if attrs.get("N", len(inputs)) != len(inputs):
        raise InferenceError(f"attr N={attrs['N']} does not match the {len(inputs)} inputs")
    shape = inputs[0].shape
    for i, t in enumerate(inputs[1:], 1):
        _check_same_dtype(inputs[0], t, "inputs[0]", f"inputs[{i}]")
        if not shape.is_compatible_with(t.shape):
            raise InferenceError(f"all inputs must have the same shape, got {inputs[0].shape} "
                                 f"(inputs[0]) and {t.shape} (inputs[{i}])")
        shape = shape.merge_with(t.shape)
    if inputs[0].dtype is not dtypes.variant:         # (tensor lists add element by element, as in TF)
        _check_kind(inputs[0], "numeric", "inputs")
    return [(inputs[0].dtype, shape)]


AddN = define_op("AddN", _infer_add_n)


@_grad(AddN, dense=False)
def _add_n_grad(op, grad):
    return [grad] * len(op.inputs)


# ---------------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------------

def _reduces_all(axes: Tensor, x: Tensor) -> bool:
    """Whether `axes` is the Range(0, Rank(x), 1) that reduce_* builds for axis=None."""
    op = axes.op
    if op.type != "Range":
        return False
    start, limit, delta = op.inputs
    sv, dv = constant_value(start), constant_value(delta)
    return (sv is not None and dv is not None and int(sv) == 0 and int(dv) == 1
            and limit.op.type == "Rank" and limit.op.inputs[0] is x)


def _static_axes(axes: Tensor, rank: int):
    """The normalized, sorted reduction axes if known when building, else None."""
    v = constant_value(axes)
    if v is None:
        return None
    out = []
    for a in np.reshape(v, -1).tolist():
        if not -rank <= a < rank:
            raise InferenceError(f"Invalid reduction dimension {a} for input with {rank} dimension(s)")
        a %= rank
        if a in out:
            raise InferenceError(f"Invalid reduction arguments: axes contains duplicate dimension {a}")
        out.append(a)
    return sorted(out)


def _reduction(kind: str):
    def infer(inputs, attrs):
        x, axes = inputs
        _check_kind(x, kind, "input")
        if not axes.dtype.is_integer:
            raise _DTypeError(f"reduction_indices must be int32 or int64, got {axes.dtype.name}")
        if axes.shape.ndims is not None and axes.shape.ndims > 1:
            raise InferenceError(f"reduction_indices must be a scalar or a vector, got shape {axes.shape}")
        keep = bool(attrs.get("keep_dims", False))
        rank = x.shape.ndims
        if _reduces_all(axes, x):
            return [(x.dtype, TensorShape(None) if keep else TensorShape([]))]
        if rank is None:
            return [(x.dtype, TensorShape(None))]
        ax = _static_axes(axes, rank)
        if ax is None:
            if keep:
                return [(x.dtype, TensorShape([None] * rank))]
            n = axes.shape.num_elements() if axes.shape.ndims == 1 else (1 if axes.shape.ndims == 0 else None)
            # Without duplicates (which the kernel rejects) k axes leave rank - k dimensions.
            return [(x.dtype, TensorShape(None) if n is None else TensorShape([None] * (rank - n)))]
        dims = []
        for i, d in enumerate(x.shape.dims):
            if i in ax:
                if keep:
                    dims.append(1)
            else:
                dims.append(d)
        return [(x.dtype, TensorShape(dims))]
    return infer


Sum = define_op("Sum", _reduction("numeric"))
Mean = define_op("Mean", _reduction("numeric"))
Max = define_op("Max", _reduction("numeric"))
Min = define_op("Min", _reduction("numeric"))
Prod = define_op("Prod", _reduction("numeric"))
All = define_op("All", _reduction("bool"))
Any = define_op("Any", _reduction("bool"))
_no_grad(All, Any)


def _kept_dims_shape(x: Tensor, axes: Tensor) -> Tensor:
    """Shape of `x` with the reduced axes set to 1 (the output shape under keep_dims=True)."""
    rank = x.shape.ndims
    if rank is not None:
        ax = _static_axes(axes, rank)
        if ax is not None:
            kept = [1 if i in ax else d for i, d in enumerate(x.shape.dims)]
            if sum(d is None for d in kept) <= 1:
                return constant([-1 if d is None else d for d in kept], dtype=dtypes.int32)
            mask = np.array([i in ax for i in range(rank)])
            return SelectV2(constant(mask), _scalar(1, dtypes.int32), _op("Shape", x, out_type=dtypes.int32))
    # Unknown rank or axes: stitch 1s into Shape(x) at the (normalized) reduced axes, like TF.
    shape = _op("Shape", x, out_type=dtypes.int32)
    size = _op("Size", shape, out_type=dtypes.int32)
    axes = axes if axes.dtype is dtypes.int32 else Cast(axes, DstT=dtypes.int32)
    axes = FloorMod(AddV2(axes, size), size)
    ones = _op("Fill", _op("Shape", axes, out_type=dtypes.int32), _scalar(1, dtypes.int32))
    everything = _op("Range", _scalar(0, dtypes.int32), size, _scalar(1, dtypes.int32))
    return _op("DynamicStitch", everything, axes, shape, ones, N=2)


def _grad_kept_dims(op, grad):
    """The output gradient of a reduction reshaped to keep_dims form, so that it broadcasts
    against the reduction's input."""
    if op.attrs.get("keep_dims", False):
        return grad
    x, axes = op.inputs
    return _op("Reshape", grad, _kept_dims_shape(x, axes))


def _broadcast_to_input(op, kept):
    x = op.inputs[0]
    out = _op("BroadcastTo", kept, _shape_tensor(x))
    out.set_shape(x.shape)
    return out


@_grad(Sum)
def _sum_grad(op, grad):
    return [_broadcast_to_input(op, _grad_kept_dims(op, grad)), None]


def _reduced_count(op) -> Tensor:
    """Number of input elements folded into each output element, as the input's dtype."""
    x, y = op.inputs[0], op.outputs[0]
    nx, ny = x.shape.num_elements(), y.shape.num_elements()
    if nx is not None and ny is not None:
        return _scalar(nx // max(ny, 1), x.dtype)
    sx = _op("Size", x, out_type=dtypes.int32)
    sy = _op("Size", y, out_type=dtypes.int32)
    return Cast(FloorDiv(sx, Maximum(sy, _scalar(1, dtypes.int32))), DstT=x.dtype)


@_grad(Mean)
def _mean_grad(op, grad):
    # Divide while the gradient is still reduction-sized, then broadcast.
    kept = RealDiv(_grad_kept_dims(op, grad), _reduced_count(op))
    return [_broadcast_to_input(op, kept), None]


def _min_or_max_grad(op, grad):
    # The gradient goes to every position holding the extreme value, split evenly (like TF).
    x, axes = op.inputs
    y = _grad_kept_dims(op, op.outputs[0])
    g = _grad_kept_dims(op, grad)
    indicators = Cast(Equal(y, x), DstT=x.dtype)
    num_selected = Sum(indicators, axes, keep_dims=True)
    return [Mul(indicators, RealDiv(g, num_selected)), None]


_grad(Max)(_min_or_max_grad)
_grad(Min)(_min_or_max_grad)


@_grad(Prod)
def _prod_grad(op, grad):
    # d prod / d x_i is the product of the other elements. TF gets it from exclusive cumprods;
    # counting zeros gives the same exact result without a Cumprod op: with no zero it is
    # prod / x_i, with exactly one zero it is the product of the non-zeros at the zero and 0
    # elsewhere, with more zeros it is 0 everywhere.
    x, axes = op.inputs
    dt = x.dtype
    zero, one = _scalar(0, dt), _scalar(1, dt)
    is_zero = Equal(x, zero)
    x_nz = SelectV2(is_zero, one, x)
    prod_nz = Prod(x_nz, axes, keep_dims=True)
    n_zeros = Sum(Cast(is_zero, DstT=dt), axes, keep_dims=True)
    at_zero = SelectV2(Equal(n_zeros, one), prod_nz, zero)
    elsewhere = SelectV2(Equal(n_zeros, zero), RealDiv(prod_nz, x_nz), zero)
    others = SelectV2(is_zero, at_zero, elsewhere)
    return [Mul(_grad_kept_dims(op, grad), others), None]


def _infer_arg(inputs, attrs):
    x, dim = inputs
    _check_kind(x, "numeric", "input")
    if not dim.dtype.is_integer:
        raise _DTypeError(f"dimension must be int32 or int64, got {dim.dtype.name}")
    out = dtypes.as_dtype(attrs.get("output_type", dtypes.int64))
    if out not in (dtypes.int32, dtypes.int64):
        raise _DTypeError(f"output_type must be int32 or int64, got {out.name}")
    rank = x.shape.ndims
    if rank is None:
        return [(out, TensorShape(None))]
    if rank == 0:
        raise InferenceError("input must have at least one dimension")
    v = constant_value(dim)
    if v is None:
        return [(out, TensorShape([None] * (rank - 1)))]
    if np.ndim(v) != 0:
        raise InferenceError(f"dimension must be a scalar, got shape {np.shape(v)}")
    a = int(v)
    if not -rank <= a < rank:
        raise InferenceError(f"Expected dimension in the range [{-rank}, {rank}), but got {a}")
    a %= rank
    return [(out, TensorShape(x.shape.dims[:a] + x.shape.dims[a + 1:]))]


ArgMax = define_op("ArgMax", _infer_arg)
ArgMin = define_op("ArgMin", _infer_arg)
_no_grad(ArgMax, ArgMin)


# ---------------------------------------------------------------------------------------------
# Matrix products
# ---------------------------------------------------------------------------------------------

def _infer_matmul(inputs, attrs):
    a, b = inputs
    _check_same_dtype(a, b, "a", "b")
    _check_kind(a, "numeric", "inputs")
    ta, tb = bool(attrs.get("transpose_a", False)), bool(attrs.get("transpose_b", False))
    for t, nm in ((a, "a"), (b, "b")):
        if t.shape.ndims is not None and t.shape.ndims != 2:
            raise InferenceError(f"MatMul needs rank-2 inputs, but {nm} has shape {t.shape} "
                                 f"(rank {t.shape.ndims}); use matmul for batches")
    da = a.shape.dims if a.shape.dims is not None else (None, None)
    db = b.shape.dims if b.shape.dims is not None else (None, None)
    m, ka = (da[1], da[0]) if ta else (da[0], da[1])
    kb, n = (db[1], db[0]) if tb else (db[0], db[1])
    if ka is not None and kb is not None and ka != kb:
        raise InferenceError(f"Matrix size-incompatible: a has shape {a.shape} (transpose_a={ta}) "
                             f"and b has shape {b.shape} (transpose_b={tb}): inner dimensions "
                             f"{ka} and {kb} differ")
    return [(a.dtype, TensorShape([m, n]))]


MatMul = define_op("MatMul", _infer_matmul)


@_grad(MatMul)
def _matmul_grad(op, grad):
    a, b = _conj(op.inputs[0]), _conj(op.inputs[1])   # adjoints, as TF's for complex operands
    ta, tb = op.attrs.get("transpose_a", False), op.attrs.get("transpose_b", False)
    if not ta and not tb:
        return [MatMul(grad, b, transpose_a=False, transpose_b=True),
                MatMul(a, grad, transpose_a=True, transpose_b=False)]
    if not ta and tb:
        return [MatMul(grad, b, transpose_a=False, transpose_b=False),
                MatMul(grad, a, transpose_a=True, transpose_b=False)]
    if ta and not tb:
        return [MatMul(b, grad, transpose_a=False, transpose_b=True),
                MatMul(a, grad, transpose_a=False, transpose_b=False)]
    return [MatMul(b, grad, transpose_a=True, transpose_b=True),
            MatMul(grad, a, transpose_a=True, transpose_b=True)]


def _infer_batch_matmul(inputs, attrs):
    x, y = inputs
    _check_same_dtype(x, y)
    _check_kind(x, "numeric", "inputs")
    ax, ay = bool(attrs.get("adj_x", False)), bool(attrs.get("adj_y", False))
    for t, nm in ((x, "x"), (y, "y")):
        if t.shape.ndims is not None and t.shape.ndims < 2:
            raise InferenceError(f"BatchMatMulV2 needs inputs of rank >= 2, but {nm} has shape "
                                 f"{t.shape} (rank {t.shape.ndims})")
    if x.shape.dims is None or y.shape.dims is None:
        return [(x.dtype, TensorShape(None))]
    dx, dy = x.shape.dims, y.shape.dims
    m, kx = (dx[-1], dx[-2]) if ax else (dx[-2], dx[-1])
    ky, n = (dy[-1], dy[-2]) if ay else (dy[-2], dy[-1])
    if kx is not None and ky is not None and kx != ky:
        raise InferenceError(f"Matrix size-incompatible: x has shape {x.shape} (adj_x={ax}) and "
                             f"y has shape {y.shape} (adj_y={ay}): inner dimensions {kx} and {ky} differ")
    try:
        batch = broadcast_shapes(TensorShape(dx[:-2]), TensorShape(dy[:-2]))
    except InferenceError:
        raise InferenceError(f"batch dimensions of x {x.shape} and y {y.shape} do not broadcast") from None
    return [(x.dtype, batch.concatenate(TensorShape([m, n])))]


BatchMatMulV2 = define_op("BatchMatMulV2", _infer_batch_matmul)


@_grad(BatchMatMulV2)
def _batch_matmul_grad(op, grad):
    x, y = op.inputs
    ax, ay = op.attrs.get("adj_x", False), op.attrs.get("adj_y", False)
    if not ax and not ay:
        gx = BatchMatMulV2(grad, y, adj_x=False, adj_y=True)
        gy = BatchMatMulV2(x, grad, adj_x=True, adj_y=False)
    elif not ax and ay:
        gx = BatchMatMulV2(grad, y, adj_x=False, adj_y=False)
        gy = BatchMatMulV2(grad, x, adj_x=True, adj_y=False)
    elif ax and not ay:
        gx = BatchMatMulV2(y, grad, adj_x=False, adj_y=True)
        gy = BatchMatMulV2(x, grad, adj_x=False, adj_y=False)
    else:
        gx = BatchMatMulV2(y, grad, adj_x=True, adj_y=True)
        gy = BatchMatMulV2(grad, x, adj_x=True, adj_y=True)
    # The matrix dimensions of gx and x agree, so only broadcast batch dimensions are summed.
    return [reduce_to_shape(gx, x), reduce_to_shape(gy, y)]


# ---------------------------------------------------------------------------------------------
# Public wrappers
# ---------------------------------------------------------------------------------------------

def _is_tensor_like(v) -> bool:
    return isinstance(v, Tensor) or hasattr(v, "_as_graph_element")


def _t(x, float_only: bool = False) -> Tensor:
    """Converts an operand; Python numbers given to float-only ops become float32, as in TF."""
    if float_only and not _is_tensor_like(x):
        return convert_to_tensor(x, preferred_dtype=dtypes.float32)
    return convert_to_tensor(x)


def _pair(x, y):
    """Converts two operands; a non-tensor operand adopts the dtype of the tensor one."""
    if _is_tensor_like(x):
        x = convert_to_tensor(x)
        y = convert_to_tensor(y) if _is_tensor_like(y) else convert_to_tensor(y, dtype=x.dtype)
    elif _is_tensor_like(y):
        y = convert_to_tensor(y)
        x = convert_to_tensor(x, dtype=y.dtype)
    else:
        x = convert_to_tensor(x)
        y = convert_to_tensor(y, dtype=x.dtype)
    return x, y


def add(x, y, name=None):
    """x + y element-wise with broadcasting (tf.math.add; op AddV2)."""
    return AddV2(*_pair(x, y), name=name)


def subtract(x, y, name=None):
    """x - y element-wise with broadcasting (tf.math.subtract; op Sub)."""
    return Sub(*_pair(x, y), name=name)


def multiply(x, y, name=None):
    """x * y element-wise with broadcasting (tf.math.multiply; op Mul)."""
    return Mul(*_pair(x, y), name=name)


# TF's table: small integers divide in float32, 32/64-bit integers in float64.
_TRUEDIV_FLOAT = {dtypes.uint8: dtypes.float32, dtypes.int8: dtypes.float32, dtypes.int16: dtypes.float32,
                  dtypes.int32: dtypes.float64, dtypes.int64: dtypes.float64}


def truediv(x, y, name=None):
    """x / y with Python 3 semantics (tf.math.truediv): integer operands are cast to float
    (int8/int16/uint8 to float32, int32/int64 to float64) before a RealDiv."""
    with name_scope(name, "truediv", [x, y]) as scope:
        x, y = _pair(x, y)
        if x.dtype is not y.dtype:
            raise TypeError(f"truediv: x and y must have the same dtype, got {x.dtype.name} != {y.dtype.name}")
        if x.dtype.is_bool:
            raise TypeError(f"truediv: invalid dtype bool for operands '{x.name}' and '{y.name}'")
        target = _TRUEDIV_FLOAT.get(x.dtype)
        if target is not None:
            x, y = Cast(x, DstT=target), Cast(y, DstT=target)
        return RealDiv(x, y, name=scope)


def divide(x, y, name=None):
    """x / y (tf.math.divide): true division, as `truediv`."""
    return truediv(x, y, name=name)


def realdiv(x, y, name=None):
    """x / y for floating-point operands (tf.realdiv; op RealDiv)."""
    return RealDiv(*_pair(x, y), name=name)


def div(x, y, name=None):
    """x / y with Python 2 semantics (tf.compat.v1.div): floor division for integers,
    real division for floats."""
    x, y = _pair(x, y)
    if x.dtype.is_integer and y.dtype.is_integer:
        return FloorDiv(x, y, name=name or "div")
    return RealDiv(x, y, name=name or "div")


def floordiv(x, y, name=None):
    """floor(x / y) element-wise (tf.math.floordiv; op FloorDiv), for integers and floats."""
    return FloorDiv(*_pair(x, y), name=name)


def floor_div(x, y, name=None):
    """The raw FloorDiv op (tf.math.floor_div); the same as `floordiv`."""
    return FloorDiv(*_pair(x, y), name=name)


def floormod(x, y, name=None):
    """x - floor(x / y) * y element-wise: the remainder has the sign of y (tf.math.floormod)."""
    return FloorMod(*_pair(x, y), name=name)


def mod(x, y, name=None):
    """Python-style modulo (tf.math.mod); the same as `floormod`."""
    return FloorMod(*_pair(x, y), name=name)


def negative(x, name=None):
    """-x element-wise (tf.math.negative; op Neg)."""
    return Neg(_t(x), name=name)


def pow(x, y, name=None):  # noqa: A001  (TF's name)
    """x ** y element-wise with broadcasting (tf.math.pow)."""
    return Pow(*_pair(x, y), name=name)


def atan2(y, x, name=None):
    """The angle of the point (x, y), in [-pi, pi], element-wise with broadcasting
    (tf.math.atan2); note the order of the arguments, y first."""
    return Atan2(*_pair(y, x), name=name)


def polygamma(a, x, name=None):
    """The a-th derivative of digamma at x, element-wise with broadcasting (tf.math.polygamma);
    `a` is a float tensor of non-negative integer values (NaN elsewhere). Its gradient flows
    into x only, as in TF."""
    return Polygamma(*_pair(a, x), name=name)


def squared_difference(x, y, name=None):
    """(x - y)**2 element-wise (tf.math.squared_difference)."""
    return SquaredDifference(*_pair(x, y), name=name)


def maximum(x, y, name=None):
    """The larger of x and y element-wise (tf.math.maximum); the gradient goes to x on ties."""
    return Maximum(*_pair(x, y), name=name)


def minimum(x, y, name=None):
    """The smaller of x and y element-wise (tf.math.minimum); the gradient goes to x on ties."""
    return Minimum(*_pair(x, y), name=name)


def div_no_nan(x, y, name=None):
    """x / y, but 0 wherever y is 0 (tf.math.div_no_nan); floating-point operands."""
    return DivNoNan(*_pair(x, y), name=name)


def scalar_mul(scalar, x, name=None):
    """Multiplies `x` (a Tensor or IndexedSlices) by a scalar (tf.math.scalar_mul)."""
    if isinstance(x, IndexedSlices):
        with name_scope(name, "scalar_mul", [x.values]) as scope:
            s = convert_to_tensor(scalar, dtype=x.dtype) if not _is_tensor_like(scalar) else convert_to_tensor(scalar)
            if s.shape.ndims not in (0, None):
                raise ValueError(f"Only scalar multiply works, got shape {s.shape}")
            return IndexedSlices(Mul(s, x.values, name=scope), x.indices, x.dense_shape)
    s, x = _pair(scalar, x)
    if s.shape.ndims not in (0, None):
        raise ValueError(f"Only scalar multiply works, got shape {s.shape}")
    return Mul(s, x, name=name)


def add_n(inputs, name=None):
    """Sums a list of tensors of one dtype and shape element-wise (tf.math.add_n; op AddN)."""
    if isinstance(inputs, (Tensor, IndexedSlices)) or not inputs:
        raise ValueError("add_n: inputs must be a non-empty list of tensors of the same dtype and shape")
    inputs = [convert_to_tensor(v) for v in inputs]
    if len(inputs) == 1:
        return identity(inputs[0], name=name) if name else inputs[0]
    return AddN(*inputs, N=len(inputs), name=name)


def accumulate_n(inputs, shape=None, tensor_dtype=None, name=None):
    """Sums a list of tensors (tf.math.accumulate_n); here the same as `add_n`, checking the
    optional `shape` and `tensor_dtype`."""
    inputs = [convert_to_tensor(v) for v in inputs] if isinstance(inputs, (list, tuple)) else inputs
    if isinstance(inputs, list):
        for v in inputs:
            if tensor_dtype is not None and v.dtype is not dtypes.as_dtype(tensor_dtype):
                raise TypeError(f"accumulate_n: input '{v.name}' has dtype {v.dtype.name}, "
                                f"expected {dtypes.as_dtype(tensor_dtype).name}")
            if shape is not None and not v.shape.is_compatible_with(TensorShape(shape)):
                raise ValueError(f"accumulate_n: input '{v.name}' has shape {v.shape}, expected {TensorShape(shape)}")
    return add_n(inputs, name=name)


def exp(x, name=None):
    """e**x element-wise (tf.math.exp)."""
    return Exp(_t(x, True), name=name)


def log(x, name=None):
    """Natural logarithm element-wise (tf.math.log)."""
    return Log(_t(x, True), name=name)


def log1p(x, name=None):
    """log(1 + x) element-wise, accurate for small x (tf.math.log1p)."""
    return Log1p(_t(x, True), name=name)


def expm1(x, name=None):
    """e**x - 1 element-wise, accurate for small x (tf.math.expm1)."""
    return Expm1(_t(x, True), name=name)


def sin(x, name=None):
    """Sine element-wise (tf.math.sin)."""
    return Sin(_t(x, True), name=name)


def cos(x, name=None):
    """Cosine element-wise (tf.math.cos)."""
    return Cos(_t(x, True), name=name)


def tan(x, name=None):
    """Tangent element-wise (tf.math.tan)."""
    return Tan(_t(x, True), name=name)


def asin(x, name=None):
    """Inverse sine element-wise (tf.math.asin); NaN outside [-1, 1]."""
    return Asin(_t(x, True), name=name)


def acos(x, name=None):
    """Inverse cosine element-wise (tf.math.acos); NaN outside [-1, 1]."""
    return Acos(_t(x, True), name=name)


def atan(x, name=None):
    """Inverse tangent element-wise (tf.math.atan)."""
    return Atan(_t(x, True), name=name)


def sinh(x, name=None):
    """Hyperbolic sine element-wise (tf.math.sinh)."""
    return Sinh(_t(x, True), name=name)


def cosh(x, name=None):
    """Hyperbolic cosine element-wise (tf.math.cosh)."""
    return Cosh(_t(x, True), name=name)


def asinh(x, name=None):
    """Inverse hyperbolic sine element-wise (tf.math.asinh)."""
    return Asinh(_t(x, True), name=name)


def acosh(x, name=None):
    """Inverse hyperbolic cosine element-wise (tf.math.acosh); NaN below 1."""
    return Acosh(_t(x, True), name=name)


def atanh(x, name=None):
    """Inverse hyperbolic tangent element-wise (tf.math.atanh); +-inf at +-1, NaN beyond."""
    return Atanh(_t(x, True), name=name)


def erf(x, name=None):
    """The Gauss error function element-wise (tf.math.erf)."""
    return Erf(_t(x, True), name=name)


def erfc(x, name=None):
    """The complementary error function 1 - erf(x) element-wise, accurate where erf(x) is near 1
    (tf.math.erfc)."""
    return Erfc(_t(x, True), name=name)


def lgamma(x, name=None):
    """log(|Gamma(x)|) element-wise (tf.math.lgamma); inf at the non-positive integers."""
    return Lgamma(_t(x, True), name=name)


def digamma(x, name=None):
    """The derivative of lgamma, psi(x), element-wise (tf.math.digamma)."""
    return Digamma(_t(x, True), name=name)


def sqrt(x, name=None):
    """Square root element-wise (tf.math.sqrt)."""
    return Sqrt(_t(x, True), name=name)


def rsqrt(x, name=None):
    """1 / sqrt(x) element-wise (tf.math.rsqrt)."""
    return Rsqrt(_t(x, True), name=name)


def square(x, name=None):
    """x * x element-wise (tf.math.square)."""
    return Square(_t(x), name=name)


def abs(x, name=None):  # noqa: A001  (TF's name)
    """Absolute value element-wise (tf.math.abs); for an IndexedSlices, of its values."""
    if isinstance(x, IndexedSlices):
        return IndexedSlices(abs(x.values, name=name), x.indices, x.dense_shape)
    x = _t(x)
    if x.dtype.is_complex:      # |z|, a real tensor (op ComplexAbs), as tf.math.abs
        from actorflow.graph.ops import complex_ops
        return complex_ops.ComplexAbs(x, Tout=complex_ops.real_dtype(x.dtype), name=name)
    return Abs(x, name=name)


def sign(x, name=None):
    """-1, 0 or 1 by the sign of x, element-wise (tf.math.sign)."""
    return Sign(_t(x), name=name)


def reciprocal(x, name=None):
    """1 / x element-wise (tf.math.reciprocal)."""
    return Reciprocal(_t(x), name=name)


def floor(x, name=None):
    """Largest integer not greater than x, element-wise (tf.math.floor); floats only."""
    return Floor(_t(x, True), name=name)


def ceil(x, name=None):
    """Smallest integer not less than x, element-wise (tf.math.ceil); floats only."""
    return Ceil(_t(x, True), name=name)


def round(x, name=None):  # noqa: A001  (TF's name)
    """Rounds half to even, element-wise (tf.math.round); integers are returned unchanged."""
    x = _t(x)
    if x.dtype.is_integer:
        return x
    return Round(x, name=name)


def sigmoid(x, name=None):
    """1 / (1 + exp(-x)) element-wise (tf.math.sigmoid / tf.nn.sigmoid)."""
    return Sigmoid(_t(x, True), name=name)


def tanh(x, name=None):
    """Hyperbolic tangent element-wise (tf.math.tanh / tf.nn.tanh)."""
    return Tanh(_t(x, True), name=name)


def is_nan(x, name=None):
    """Whether each element is NaN (tf.math.is_nan)."""
    return IsNan(_t(x, True), name=name)


def is_inf(x, name=None):
    """Whether each element is +inf or -inf (tf.math.is_inf)."""
    return IsInf(_t(x, True), name=name)


def is_finite(x, name=None):
    """Whether each element is neither infinite nor NaN (tf.math.is_finite)."""
    return IsFinite(_t(x, True), name=name)


def equal(x, y, name=None):
    """x == y element-wise, with broadcasting (tf.math.equal)."""
    return Equal(*_pair(x, y), name=name)


def not_equal(x, y, name=None):
    """x != y element-wise, with broadcasting (tf.math.not_equal)."""
    return NotEqual(*_pair(x, y), name=name)


def less(x, y, name=None):
    """x < y element-wise, with broadcasting (tf.math.less)."""
    return Less(*_pair(x, y), name=name)


def less_equal(x, y, name=None):
    """x <= y element-wise, with broadcasting (tf.math.less_equal)."""
    return LessEqual(*_pair(x, y), name=name)


def greater(x, y, name=None):
    """x > y element-wise, with broadcasting (tf.math.greater)."""
    return Greater(*_pair(x, y), name=name)


def greater_equal(x, y, name=None):
    """x >= y element-wise, with broadcasting (tf.math.greater_equal)."""
    return GreaterEqual(*_pair(x, y), name=name)


def logical_and(x, y, name=None):
    """x AND y on bool tensors, with broadcasting (tf.math.logical_and)."""
    return LogicalAnd(*_pair(x, y), name=name)


def logical_or(x, y, name=None):
    """x OR y on bool tensors, with broadcasting (tf.math.logical_or)."""
    return LogicalOr(*_pair(x, y), name=name)


def logical_not(x, name=None):
    """NOT x on a bool tensor (tf.math.logical_not)."""
    return LogicalNot(_t(x), name=name)


def logical_xor(x, y, name="LogicalXor"):
    """x XOR y on bool tensors (tf.math.logical_xor), composed as (x | y) & ~(x & y) like TF."""
    x, y = _pair(x, y)
    with name_scope(name, "LogicalXor", [x, y]) as scope:
        return LogicalAnd(LogicalOr(x, y), LogicalNot(LogicalAnd(x, y)), name=scope)


def where(condition, x=None, y=None, name=None):
    """Picks elements of `x` where `condition` is true, else of `y` (tf.compat.v1.where).

    As in TF 1.x, a vector condition may select whole rows of higher-rank `x` and `y`; other
    shapes broadcast (op SelectV2). With only a condition, the coordinates of its true elements
    (op Where, an int64 [num_true, rank] tensor).
    """
    if x is None and y is None:
        from actorflow.graph.ops.array_ops import where_indices  # array_ops imports this module
        return where_indices(condition, name=name)
    if x is None or y is None:
        raise ValueError("af.where: x and y must both be given, or neither")
    with name_scope(name, "Where", [condition, x, y]) as scope:
        c = convert_to_tensor(condition, dtype=dtypes.bool_) if not _is_tensor_like(condition) \
            else convert_to_tensor(condition)
        x, y = _pair(x, y)
        xr = x.shape.ndims
        if c.shape.ndims == 1 and xr is not None and xr > 1:
            # TF 1.x Select: a vector condition picks along the first dimension.
            c = _op("Reshape", c, constant([-1] + [1] * (xr - 1), dtype=dtypes.int32))
        return SelectV2(c, x, y, name=scope)


def where_v2(condition, x=None, y=None, name=None):
    """Picks elements of `x` where `condition` is true, else of `y`, with broadcasting of all
    three (tf.compat.v1.where_v2 / TF 2's tf.where; op SelectV2)."""
    if x is None or y is None:
        raise NotImplementedError(
            "af.where_v2 needs x and y: the one-argument form (op Where) is not supported")
    c = convert_to_tensor(condition, dtype=dtypes.bool_) if not _is_tensor_like(condition) \
        else convert_to_tensor(condition)
    return SelectV2(c, *_pair(x, y), name=name)


def cast(x, dtype, name=None):
    """Casts a tensor (or the values of an IndexedSlices) to `dtype` (tf.cast).

    Returns `x` itself when it already has that dtype. Float to integer truncates toward zero.
    """
    dtype = dtypes.as_dtype(dtype)
    if isinstance(x, IndexedSlices):
        return IndexedSlices(cast(x.values, dtype, name=name), x.indices, x.dense_shape)
    x = _t(x)
    if x.dtype is dtype:
        return x
    return Cast(x, DstT=dtype, name=name)


def to_float(x, name="ToFloat"):
    """Casts to float32 (tf.compat.v1.to_float)."""
    return cast(x, dtypes.float32, name=name)


def to_double(x, name="ToDouble"):
    """Casts to float64 (tf.compat.v1.to_double)."""
    return cast(x, dtypes.float64, name=name)


def to_complex64(x, name="ToComplex64"):
    """Casts to complex64 (tf.compat.v1.to_complex64)."""
    return cast(x, dtypes.complex64, name=name)


def to_complex128(x, name="ToComplex128"):
    """Casts to complex128 (tf.compat.v1.to_complex128)."""
    return cast(x, dtypes.complex128, name=name)


def to_int32(x, name="ToInt32"):
    """Casts to int32 (tf.compat.v1.to_int32)."""
    return cast(x, dtypes.int32, name=name)


def to_int64(x, name="ToInt64"):
    """Casts to int64 (tf.compat.v1.to_int64)."""
    return cast(x, dtypes.int64, name=name)


# -- reductions ---------------------------------------------------------------------------------

def _pick(new, old, new_name, old_name, default=None):
    """TF 1.x deprecated-argument aliases: at most one of the two may be given."""
    if new is not None and old is not None:
        raise ValueError(f"Cannot specify both '{new_name}' and '{old_name}'")
    if new is not None:
        return new
    if old is not None:
        return old
    return default


def _axes_tensor(x: Tensor, axis) -> Tensor:
    if axis is None:
        if x.shape.ndims is not None:
            return constant(list(range(x.shape.ndims)), dtype=dtypes.int32)
        return _op("Range", _scalar(0, dtypes.int32), _op("Rank", x), _scalar(1, dtypes.int32))
    if _is_tensor_like(axis):
        return convert_to_tensor(axis)
    return constant(axis, dtype=dtypes.int32)


def _reduce(op_def, input_tensor, axis, keepdims, name, reduction_indices, keep_dims):
    axis = _pick(axis, reduction_indices, "axis", "reduction_indices")
    keep = bool(_pick(keepdims, keep_dims, "keepdims", "keep_dims", False))
    x = _t(input_tensor)
    return op_def(x, _axes_tensor(x, axis), keep_dims=keep, name=name)


def reduce_sum(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None, keep_dims=None):
    """Sum over `axis` (all axes when None) (tf.compat.v1.reduce_sum; op Sum)."""
    return _reduce(Sum, input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_mean(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None, keep_dims=None):
    """Mean over `axis` (all axes when None) (tf.compat.v1.reduce_mean; op Mean).
    Integer inputs give an integer (truncated) mean, as in TF."""
    return _reduce(Mean, input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_max(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None, keep_dims=None):
    """Maximum over `axis` (all axes when None) (tf.compat.v1.reduce_max; op Max)."""
    return _reduce(Max, input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_min(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None, keep_dims=None):
    """Minimum over `axis` (all axes when None) (tf.compat.v1.reduce_min; op Min)."""
    return _reduce(Min, input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_prod(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None, keep_dims=None):
    """Product over `axis` (all axes when None) (tf.compat.v1.reduce_prod; op Prod)."""
    return _reduce(Prod, input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_all(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None, keep_dims=None):
    """Logical AND over `axis` of a bool tensor (tf.compat.v1.reduce_all; op All)."""
    return _reduce(All, input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_any(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None, keep_dims=None):
    """Logical OR over `axis` of a bool tensor (tf.compat.v1.reduce_any; op Any)."""
    return _reduce(Any, input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_logsumexp(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
                     keep_dims=None):
    """log(sum(exp(x))) over `axis`, computed stably by shifting by the maximum
    (tf.compat.v1.reduce_logsumexp)."""
    axis = _pick(axis, reduction_indices, "axis", "reduction_indices")
    keep = bool(_pick(keepdims, keep_dims, "keepdims", "keep_dims", False))
    with name_scope(name, "ReduceLogSumExp", [input_tensor]) as scope:
        x = _t(input_tensor, True)
        raw_max = Max(x, _axes_tensor(x, axis), keep_dims=True)
        # An infinite maximum would turn x - max into NaN; shift by 0 there instead. The shift
        # cancels mathematically, so it carries no gradient.
        shift = stop_gradient(SelectV2(IsFinite(raw_max), raw_max, _scalar(0, x.dtype)))
        exps = Exp(Sub(x, shift))
        summed = Log(Sum(exps, _axes_tensor(exps, axis), keep_dims=keep))
        if not keep:
            # Reducing the kept size-1 axes drops them: a squeeze that needs no shape.
            shift = Max(shift, _axes_tensor(shift, axis), keep_dims=False)
        return AddV2(summed, shift, name=scope)


def count_nonzero(input_tensor=None, axis=None, keepdims=None, dtype=dtypes.int64, name=None,
                  reduction_indices=None, keep_dims=None, input=None):  # noqa: A002  (TF's name)
    """Number of non-zero (or True) elements over `axis` (tf.compat.v1.count_nonzero)."""
    input_tensor = _pick(input_tensor, input, "input_tensor", "input")
    if input_tensor is None:
        raise ValueError("count_nonzero needs input_tensor")
    axis = _pick(axis, reduction_indices, "axis", "reduction_indices")
    keep = bool(_pick(keepdims, keep_dims, "keepdims", "keep_dims", False))
    with name_scope(name, "count_nonzero", [input_tensor]) as scope:
        x = _t(input_tensor)
        zero = _scalar(False if x.dtype.is_bool else 0, x.dtype)
        # Counting in int64 cannot overflow; the requested dtype is applied to the counts.
        nonzero = Cast(NotEqual(x, zero), DstT=dtypes.int64)
        dtype = dtypes.as_dtype(dtype)
        if dtype is dtypes.int64:
            return Sum(nonzero, _axes_tensor(x, axis), keep_dims=keep, name=scope)
        return Cast(Sum(nonzero, _axes_tensor(x, axis), keep_dims=keep), DstT=dtype, name=scope)


def _arg(op_def, input, axis, name, dimension, output_type):
    axis = _pick(axis, dimension, "axis", "dimension", 0)
    x = _t(input)
    a = convert_to_tensor(axis) if _is_tensor_like(axis) else constant(axis, dtype=dtypes.int32)
    return op_def(x, a, output_type=dtypes.as_dtype(output_type), name=name)


def argmax(input, axis=None, name=None, dimension=None, output_type=dtypes.int64):  # noqa: A002
    """Index of the largest value along `axis` (default 0) (tf.compat.v1.argmax; op ArgMax).
    Ties resolve to the first index."""
    return _arg(ArgMax, input, axis, name, dimension, output_type)


def argmin(input, axis=None, name=None, dimension=None, output_type=dtypes.int64):  # noqa: A002
    """Index of the smallest value along `axis` (default 0) (tf.compat.v1.argmin; op ArgMin).
    Ties resolve to the first index."""
    return _arg(ArgMin, input, axis, name, dimension, output_type)


def matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False, name=None):
    """Matrix product a @ b (tf.linalg.matmul).

    Rank-2 operands give a MatMul op; higher ranks a BatchMatMulV2 whose batch dimensions
    broadcast. Adjoint is the transpose (actorflow has no complex dtypes). The sparse-operand
    hints of TF (a_is_sparse, ...) are not supported.
    """
    if transpose_a and adjoint_a:
        raise ValueError("Only one of transpose_a and adjoint_a can be True.")
    if transpose_b and adjoint_b:
        raise ValueError("Only one of transpose_b and adjoint_b can be True.")
    ta, tb = bool(transpose_a or adjoint_a), bool(transpose_b or adjoint_b)
    a, b = _pair(a, b)
    if a.shape.ndims == 2 and b.shape.ndims == 2:
        return MatMul(a, b, transpose_a=ta, transpose_b=tb, name=name)
    return BatchMatMulV2(a, b, adj_x=ta, adj_y=tb, name=name)


# -- *Grad wrappers (for gradient functions; not in __all__) -------------------------------------

def relu_grad(gradients, features, name=None):
    """gradients * (features > 0) (TF's raw ReluGrad)."""
    return ReluGrad(*_pair(gradients, features), name=name)


def relu6_grad(gradients, features, name=None):
    """gradients * (0 < features < 6) (TF's raw Relu6Grad)."""
    return Relu6Grad(*_pair(gradients, features), name=name)


def elu_grad(gradients, outputs, name=None):
    """gradients * (outputs + 1) where outputs < 0, else gradients (TF's raw EluGrad)."""
    return EluGrad(*_pair(gradients, outputs), name=name)


def softplus_grad(gradients, features, name=None):
    """gradients * sigmoid(features) (TF's raw SoftplusGrad)."""
    return SoftplusGrad(*_pair(gradients, features), name=name)


def sigmoid_grad(y, dy, name=None):
    """dy * y * (1 - y), with y = sigmoid(x) (TF's raw SigmoidGrad)."""
    return SigmoidGrad(*_pair(y, dy), name=name)


def tanh_grad(y, dy, name=None):
    """dy * (1 - y**2), with y = tanh(x) (TF's raw TanhGrad)."""
    return TanhGrad(*_pair(y, dy), name=name)


def rsqrt_grad(y, dy, name=None):
    """dy * -0.5 * y**3, with y = rsqrt(x) (TF's raw RsqrtGrad)."""
    return RsqrtGrad(*_pair(y, dy), name=name)


def sqrt_grad(y, dy, name=None):
    """dy * 0.5 / y, with y = sqrt(x) (TF's raw SqrtGrad)."""
    return SqrtGrad(*_pair(y, dy), name=name)


def reciprocal_grad(y, dy, name=None):
    """-dy * y**2, with y = 1 / x (TF's raw ReciprocalGrad)."""
    return ReciprocalGrad(*_pair(y, dy), name=name)
