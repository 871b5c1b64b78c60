"""GPU kernels for element-wise math, casts, reductions and arg-reductions, on CuPy arrays.

They follow the CPU kernels' TensorFlow semantics with two exceptions, as TF's own GPU kernels
do: integer division by zero is not checked (checking would wait for the GPU), and integer
arguments of reductions (axes) are read on the host.
"""
from __future__ import annotations

import cupyx
import numpy as np

from actorflow.kernels.cpu.math import reduction_axes
from actorflow.kernels.gpu._common import cp, floats_only, register_fn
from actorflow.kernels.registry import register_kernel

_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)

# -- unary ---------------------------------------------------------------------------------------
for _op, _uf in {"Neg": cp.negative, "Exp": cp.exp, "Log": cp.log, "Log1p": cp.log1p, "Expm1": cp.expm1,
                 "Sin": cp.sin, "Cos": cp.cos, "Sqrt": cp.sqrt, "Square": cp.square, "Abs": cp.absolute,
                 "Sign": cp.sign, "Tanh": cp.tanh, "LogicalNot": cp.logical_not, "IsNan": cp.isnan, "IsInf": cp.isinf,
                 "IsFinite": cp.isfinite, "Tan": cp.tan, "Asin": cp.arcsin, "Acos": cp.arccos, "Atan": cp.arctan,
                 "Sinh": cp.sinh, "Cosh": cp.cosh, "Asinh": cp.arcsinh, "Acosh": cp.arccosh,
                 "Atanh": cp.arctanh}.items():
    register_fn(_op, _uf)


# The error and gamma functions: cupyx.scipy.special, imported when a kernel is first built (as on
# the CPU), with the CPU kernels' fixes (float16 through float32, NaN at digamma's poles).
def _digamma_poles(x, y):
    return cp.where((x <= 0) & (cp.floor(x) == x), cp.asarray(np.nan, y.dtype), y)


def _special_unary(name: str, fix=None):
    def factory(attrs):
        from cupyx.scipy import special
        uf = getattr(special, name)

        def fn(x):
            y = uf(x)
            return y if fix is None else fix(x, y)
        return floats_only(fn)
    return factory


for _op, _name, _fix in (("Erf", "erf", None), ("Erfc", "erfc", None), ("Lgamma", "gammaln", None),
                         ("Digamma", "digamma", _digamma_poles)):
    register_kernel(_op, "GPU", releases_gil=False)(_special_unary(_name, _fix))


def _keep_ints(uf):
    def fn(x):
        return x if x.dtype.kind in "iub" else uf(x)
    return fn


register_fn("Floor", _keep_ints(cp.floor))
register_fn("Ceil", _keep_ints(cp.ceil))
register_fn("Round", _keep_ints(cp.rint))


def reciprocal(x):
    return cp.reciprocal(x) if x.dtype.kind == "f" else cp.floor_divide(x.dtype.type(1), x)


register_fn("Reciprocal", reciprocal)
register_fn("Rsqrt", cupyx.rsqrt)

# NaN passes through relu and relu6, as with np.maximum on the CPU.
_relu = cp.ElementwiseKernel("T x", "T y", "y = x < (T)0 ? (T)0 : x", "af_relu")
_relu6 = cp.ElementwiseKernel("T x", "T y", "y = x < (T)0 ? (T)0 : (x > (T)6 ? (T)6 : x)", "af_relu6")
_elu = cp.ElementwiseKernel("T x", "T y", "y = x > (T)0 ? x : (T)expm1((double)x)", "af_elu")
_sigmoid = cp.ElementwiseKernel("T x", "T y", "y = (T)(1.0 / (1.0 + exp(-(double)x)))", "af_sigmoid")
_softplus = cp.ElementwiseKernel(
    "T x", "T y", "double v = (double)x; y = (T)(v > 0 ? v + log1p(exp(-v)) : log1p(exp(v)))", "af_softplus")

register_fn("Relu", _relu)
register_fn("Relu6", _relu6)
register_fn("Elu", floats_only(_elu))
register_fn("Sigmoid", floats_only(_sigmoid))
register_fn("Softplus", floats_only(_softplus))
register_fn("L2Loss", floats_only(lambda x: (cp.square(x).sum() * 0.5).astype(x.dtype)))

# -- binary --------------------------------------------------------------------------------------
for _op, _uf in {"Add": cp.add, "AddV2": cp.add, "Sub": cp.subtract, "Mul": cp.multiply,
                 "RealDiv": cp.true_divide, "Pow": cp.power, "Maximum": cp.maximum, "Minimum": cp.minimum,
                 "Equal": cp.equal, "NotEqual": cp.not_equal, "Less": cp.less, "LessEqual": cp.less_equal,
                 "Greater": cp.greater, "GreaterEqual": cp.greater_equal, "LogicalAnd": cp.logical_and,
                 "LogicalOr": cp.logical_or, "FloorMod": cp.remainder}.items():
    register_fn(_op, _uf)


def floor_div(x, y):
    if x.dtype.kind == "f":
        return cp.floor(cp.true_divide(x, y))
    return cp.floor_divide(x, y)


def div(x, y):
    return cp.true_divide(x, y) if x.dtype.kind == "f" else cp.floor_divide(x, y)


_sqdiff = cp.ElementwiseKernel("T x, T y", "T z", "T d = x - y; z = d * d", "af_squared_difference")
_div_no_nan = cp.ElementwiseKernel("T x, T y", "T z", "z = y == (T)0 ? (T)0 : x / y", "af_div_no_nan")

register_fn("FloorDiv", floor_div)
register_fn("Div", div)
register_fn("SquaredDifference", _sqdiff)
register_fn("Atan2", cp.arctan2)


@register_kernel("Polygamma", "GPU", releases_gil=False)
def _polygamma(attrs):
    from cupyx.scipy import special

    def polygamma(a, x):
        a, x = cp.broadcast_arrays(a, x)
        valid = (a >= 0) & (cp.floor(a) == a)
        n = cp.where(valid, a, 0).astype(x.dtype)
        y = special.polygamma(n, x).astype(x.dtype, copy=False)
        y = cp.where(valid & (a == 0), _digamma_poles(x, y), y)
        return cp.where(valid, y, cp.asarray(np.nan, y.dtype))
    return floats_only(polygamma)
register_fn("DivNoNan", _div_no_nan)


@register_kernel("Cast", "GPU", releases_gil=False)
def cast_kernel(attrs):
    dst = np.dtype(attrs["DstT"])

    def cast(x):
        return x.astype(dst, copy=False)
    return cast


register_fn("SelectV2", cp.where)


def add_n(*inputs):
    if len(inputs) == 1:
        return inputs[0]
    acc = cp.add(inputs[0], inputs[1])
    for x in inputs[2:]:
        acc += x
    return acc


register_fn("AddN", add_n)

# -- gradients of activations --------------------------------------------------------------------
_relu_grad = cp.ElementwiseKernel("T g, T x", "T dx", "dx = x > (T)0 ? g : (T)0", "af_relu_grad")
_relu6_grad = cp.ElementwiseKernel("T g, T x", "T dx", "dx = (x > (T)0 && x < (T)6) ? g : (T)0", "af_relu6_grad")
_elu_grad = cp.ElementwiseKernel("T g, T y", "T dx", "dx = y < (T)0 ? (y + (T)1) * g : g", "af_elu_grad")
_softplus_grad = cp.ElementwiseKernel("T g, T x", "T dx", "dx = (T)((double)g / (1.0 + exp(-(double)x)))",
                                      "af_softplus_grad")
_sigmoid_grad = cp.ElementwiseKernel("T y, T dy", "T dx", "dx = dy * y * ((T)1 - y)", "af_sigmoid_grad")
_tanh_grad = cp.ElementwiseKernel("T y, T dy", "T dx", "dx = dy * ((T)1 - y * y)", "af_tanh_grad")
_rsqrt_grad = cp.ElementwiseKernel("T y, T dy", "T dx", "dx = (T)-0.5 * dy * y * y * y", "af_rsqrt_grad")
_sqrt_grad = cp.ElementwiseKernel("T y, T dy", "T dx", "dx = (T)0.5 * dy / y", "af_sqrt_grad")
_reciprocal_grad = cp.ElementwiseKernel("T y, T dy", "T dx", "dx = -dy * y * y", "af_reciprocal_grad")

for _op, _k in {"ReluGrad": _relu_grad, "Relu6Grad": _relu6_grad, "EluGrad": _elu_grad,
                "SoftplusGrad": floats_only(_softplus_grad), "SigmoidGrad": _sigmoid_grad,
                "TanhGrad": _tanh_grad, "RsqrtGrad": _rsqrt_grad, "SqrtGrad": _sqrt_grad,
                "ReciprocalGrad": _reciprocal_grad}.items():
    register_fn(_op, _k)


# -- reductions ----------------------------------------------------------------------------------
def _keep(attrs) -> bool:
    return bool(attrs.get("keep_dims", attrs.get("keepdims", False)))


def _empty_identity(fn, dt):
    if dt.kind == "f":
        return -np.inf if fn is cp.max else np.inf
    if dt.kind == "b":
        return fn is not cp.max
    info = np.iinfo(dt)
    return info.min if fn is cp.max else info.max


def _reduce_factory(op: str, fn, accumulate: bool):
    def factory(attrs):
        keep = _keep(attrs)

        def reduce(x, reduction_indices):
            axes = reduction_axes(op, x.ndim, reduction_indices)
            if not axes:
                return x
            dt = x.dtype
            if accumulate:
                if dt == _F16:
                    return fn(x, axis=axes, dtype=_F32, keepdims=keep).astype(_F16)
                return fn(x, axis=axes, dtype=dt, keepdims=keep)
            if x.size == 0:
                shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape)) if keep else \
                    tuple(d for i, d in enumerate(x.shape) if i not in axes)
                if fn in (cp.all, cp.any):
                    return cp.full(shape, fn is cp.all, dtype=bool)
                return cp.full(shape, _empty_identity(fn, dt), dtype=dt)
            return fn(x, axis=axes, keepdims=keep)
        return reduce
    return factory


for _op, _fn, _acc in (("Sum", cp.sum, True), ("Prod", cp.prod, True), ("Max", cp.max, False),
                       ("Min", cp.min, False), ("All", cp.all, False), ("Any", cp.any, False)):
    register_kernel(_op, "GPU", releases_gil=False, host_inputs=(1,))(_reduce_factory(_op, _fn, _acc))


@register_kernel("Mean", "GPU", releases_gil=False, host_inputs=(1,))
def mean_kernel(attrs):
    keep = _keep(attrs)

    def mean(x, reduction_indices):
        axes = reduction_axes("Mean", x.ndim, reduction_indices)
        if not axes:
            return x
        count = 1
        for a in axes:
            count *= x.shape[a]
        dt = x.dtype
        if dt.kind == "f":
            s = cp.sum(x, axis=axes, dtype=_F32 if dt == _F16 else dt, keepdims=keep)
            s = s / count if count else s * np.nan
            return s.astype(dt, copy=False)
        s = cp.sum(x, axis=axes, dtype=dt, keepdims=keep)
        if count == 0:
            return cp.zeros_like(s)
        s = s.astype(np.int64)
        return ((s - cp.fmod(s, count)) // count).astype(dt)
    return mean


def _arg_reduce_factory(op: str, fn):
    def factory(attrs):
        out_type = np.dtype(attrs.get("output_type", np.int64))

        def arg_reduce(x, dimension):
            axis = int(dimension)
            if not -x.ndim <= axis < x.ndim:
                raise ValueError(f"{op}: Expected dimension in the range [{-x.ndim}, {x.ndim}), but got {axis}")
            if x.shape[axis] == 0:
                raise ValueError(f"{op}: Reduction axis {axis} is empty in shape {list(x.shape)}")
            return fn(x, axis=axis).astype(out_type, copy=False)
        return arg_reduce
    return factory


register_kernel("ArgMax", "GPU", releases_gil=False, host_inputs=(1,))(_arg_reduce_factory("ArgMax", cp.argmax))
register_kernel("ArgMin", "GPU", releases_gil=False, host_inputs=(1,))(_arg_reduce_factory("ArgMin", cp.argmin))
