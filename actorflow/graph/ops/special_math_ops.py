"""Special functions of tf.math (TF 1.x names): the Hurwitz zeta function, the regularized incomplete
gamma and beta functions, lbeta; and the truncating integer division, its remainder, and the cross
product.

Op types defined here: Zeta, Igamma, Igammac, IgammaGradA, Betainc, TruncateDiv, TruncateMod, Cross.
The kernels (kernels/cpu/special_math.py) call scipy.special. Gradients are TF's: zeta and betainc
differentiate only in q and x (TF gives a and b none either); igamma's derivative in `a` is
IgammaGradA.
"""
from __future__ import annotations

import numpy as np

from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.infer import broadcast_shapes
from actorflow.graph.ops.math_ops import _binary, _check_kind, _check_same_dtype, reduce_to_shape

__all__ = ["zeta", "igamma", "igammac", "betainc", "lbeta", "truncatediv", "truncatemod", "cross",
           "xlogy", "xdivy", "xlog1py", "multiply_no_nan", "erfinv", "ndtri", "bessel_i0", "bessel_i0e",
           "bessel_i1", "bessel_i1e", "polyval", "nextafter", "erfcinv"]

Zeta = define_op("Zeta", _binary("float"))
Igamma = define_op("Igamma", _binary("float"))
Igammac = define_op("Igammac", _binary("float"))
IgammaGradA = define_op("IgammaGradA", _binary("float"))
TruncateDiv = define_op("TruncateDiv", _binary("numeric"))
TruncateMod = define_op("TruncateMod", _binary("numeric"))


def _infer_betainc(inputs, attrs):
    a, b, x = inputs
    _check_same_dtype(a, b, "a", "b")
    _check_same_dtype(a, x, "a", "x")
    _check_kind(a, "float", "inputs")
    return [(a.dtype, broadcast_shapes(broadcast_shapes(a.shape, b.shape), x.shape))]


Betainc = define_op("Betainc", _infer_betainc)


def _infer_cross(inputs, attrs):
    a, b = inputs
    _check_same_dtype(a, b, "a", "b")
    _check_kind(a, "numeric", "inputs")
    if not a.shape.is_compatible_with(b.shape):
        raise InferenceError(f"a and b must have the same shape, got {a.shape} and {b.shape}")
    shape = a.shape.merge_with(b.shape)
    if shape.ndims == 0 or (shape.dims is not None and shape.dims[-1] not in (None, 3)):
        raise InferenceError(f"the innermost dimension of a and b must be 3, got shape {shape}")
    return [(a.dtype, shape)]


Cross = define_op("Cross", _infer_cross)


@Zeta.gradient
def _zeta_grad(op, grad):
    x, q = op.inputs
    # d/dq zeta(x, q) = -x * zeta(x + 1, q); TF gives x no gradient.
    dq = math_ops.multiply(grad, math_ops.multiply(math_ops.negative(x), Zeta(math_ops.add(x, 1.0), q)))
    return [None, reduce_to_shape(dq, q)]


def _igamma_dx(a, x):
    """d/dx P(a, x) = exp(-x + (a - 1) log x - lgamma(a))."""
    return math_ops.exp(math_ops.subtract(math_ops.subtract(math_ops.multiply(math_ops.subtract(a, 1.0),
                                                                             math_ops.log(x)), x),
                                          math_ops.lgamma(a)))


@Igamma.gradient
def _igamma_grad(op, grad):
    a, x = op.inputs
    return [reduce_to_shape(math_ops.multiply(grad, IgammaGradA(a, x)), a),
            reduce_to_shape(math_ops.multiply(grad, _igamma_dx(a, x)), x)]


@Igammac.gradient
def _igammac_grad(op, grad):
    a, x = op.inputs
    return [reduce_to_shape(math_ops.negative(math_ops.multiply(grad, IgammaGradA(a, x))), a),
            reduce_to_shape(math_ops.negative(math_ops.multiply(grad, _igamma_dx(a, x))), x)]


@Betainc.gradient
def _betainc_grad(op, grad):
    a, b, x = op.inputs
    # d/dx I_x(a, b) = x^(a-1) (1-x)^(b-1) / B(a, b), as TF computes it (log-space).
    log_beta = math_ops.subtract(math_ops.add(math_ops.lgamma(a), math_ops.lgamma(b)),
                                 math_ops.lgamma(math_ops.add(a, b)))
    partial = math_ops.exp(math_ops.subtract(
        math_ops.add(math_ops.multiply(math_ops.subtract(b, 1.0), math_ops.log1p(math_ops.negative(x))),
                     math_ops.multiply(math_ops.subtract(a, 1.0), math_ops.log(x))), log_beta))
    return [None, None, reduce_to_shape(math_ops.multiply(grad, partial), x)]


@TruncateDiv.gradient
def _truncate_div_grad(op, grad):
    return [None, None]


@Cross.gradient
def _cross_grad(op, grad):
    u, v = op.inputs
    return [Cross(v, grad), Cross(grad, u)]


def zeta(x, q, name=None):
    """The Hurwitz zeta function sum_n (q + n) ** -x (tf.math.zeta); differentiable in q only, as in TF."""
    return Zeta(*math_ops._pair(x, q), name=name)


def igamma(a, x, name=None):
    """The lower regularized incomplete gamma function P(a, x) (tf.math.igamma)."""
    return Igamma(*math_ops._pair(a, x), name=name)


def igammac(a, x, name=None):
    """The upper regularized incomplete gamma function Q(a, x) = 1 - P(a, x) (tf.math.igammac)."""
    return Igammac(*math_ops._pair(a, x), name=name)


def betainc(a, b, x, name=None):
    """The regularized incomplete beta function I_x(a, b) (tf.math.betainc); differentiable in x
    only, as in TF. The three arguments broadcast (TF wants equal shapes or scalars)."""
    with name_scope(name, "Betainc", [a, b, x]) as scope:
        a = convert_to_tensor(a, name="a")
        b = convert_to_tensor(b, dtype=a.dtype, name="b")
        x = convert_to_tensor(x, dtype=a.dtype, name="x")
        return Betainc(a, b, x, name=scope)


def lbeta(x, name=None):
    """log |Beta(x)| over the last dimension: sum(lgamma(x), -1) - lgamma(sum(x, -1)) (tf.math.lbeta);
    an empty last dimension gives 0 (log Beta of no arguments is log 1)."""
    with name_scope(name, "lbeta", [x]):
        x = convert_to_tensor(x, name="x")
        if not x.dtype.is_floating:
            raise TypeError(f"lbeta: x must be of a floating dtype, got {x.dtype.name}")
        log_prod = math_ops.reduce_sum(math_ops.lgamma(x), axis=-1)
        log_sum = math_ops.lgamma(math_ops.reduce_sum(x, axis=-1))
        return math_ops.subtract(log_prod, log_sum)


def truncatediv(x, y, name=None):
    """Integer division rounded toward zero (C's `/`; tf.truncatediv); true division for floats. A
    zero integer divisor is an InvalidArgumentError."""
    return TruncateDiv(*math_ops._pair(x, y), name=name)


def truncatemod(x, y, name=None):
    """The remainder of truncatediv, with the sign of x (C's fmod; tf.truncatemod). No gradient, as in TF."""
    return TruncateMod(*math_ops._pair(x, y), name=name)


def cross(a, b, name=None):
    """The cross product of the 3-vectors in the last dimension of `a` and `b` (tf.linalg.cross, tf.cross)."""
    with name_scope(name, "Cross", [a, b]) as scope:
        a = convert_to_tensor(a, name="a")
        return Cross(a, convert_to_tensor(b, dtype=a.dtype, name="b"), name=scope)



# ---------------------------------------------------------------------------------------------
# x * log(y) and friends (0 where x is 0), erfinv, ndtri, the modified Bessel functions of order
# 0 and 1, nextafter. Kernels: scipy.special and numpy. Gradients: TF's formulas.

Xlogy = define_op("Xlogy", _binary("float"))
Xdivy = define_op("Xdivy", _binary("float"))
Xlog1py = define_op("Xlog1py", _binary("float"))
MulNoNan = define_op("MulNoNan", _binary("float"))
NextAfter = define_op("NextAfter", _binary("float"))
Erfinv = define_op("Erfinv", math_ops._unary("float"))
Ndtri = define_op("Ndtri", math_ops._unary("float"))
BesselI0 = define_op("BesselI0", math_ops._unary("float"))
BesselI0e = define_op("BesselI0e", math_ops._unary("float"))
BesselI1 = define_op("BesselI1", math_ops._unary("float"))
BesselI1e = define_op("BesselI1e", math_ops._unary("float"))


def _nonzero(x):
    return math_ops.cast(math_ops.not_equal(x, 0.0), x.dtype)


def _partials(op, grad, px, py):
    x, y = op.inputs
    return [reduce_to_shape(math_ops.Mul(px, grad), x), reduce_to_shape(math_ops.Mul(py, grad), y)]


@math_ops._grad(Xlogy)
def _xlogy_grad(op, grad):
    x, y = op.inputs
    return _partials(op, grad, Xlogy(_nonzero(x), y), Xdivy(x, y))


@math_ops._grad(Xlog1py)
def _xlog1py_grad(op, grad):
    x, y = op.inputs
    return _partials(op, grad, Xlog1py(_nonzero(x), y), Xdivy(x, math_ops.add(y, 1.0)))


@math_ops._grad(Xdivy)
def _xdivy_grad(op, grad):
    x, y = op.inputs
    return _partials(op, grad, Xdivy(_nonzero(x), y), Xdivy(math_ops.Neg(x), math_ops.Square(y)))


@math_ops._grad(MulNoNan)
def _mul_no_nan_grad(op, grad):
    x, y = op.inputs
    return [reduce_to_shape(MulNoNan(grad, y), x), reduce_to_shape(MulNoNan(x, grad), y)]


@math_ops._grad(NextAfter)
def _next_after_grad(op, grad):
    """TF's: the gradient passes to x1 as if NextAfter were the identity; x2 gets zeros."""
    from actorflow.graph.ops.array_ops import ones_like, zeros_like
    x, y = op.inputs
    return _partials(op, grad, ones_like(x), zeros_like(y))


@math_ops._grad(Erfinv)
def _erfinv_grad(op, grad):
    y = op.outputs[0]
    return [math_ops.multiply(grad, math_ops.multiply(0.5 * np.sqrt(np.pi), math_ops.Exp(math_ops.Square(y))))]


@math_ops._grad(Ndtri)
def _ndtri_grad(op, grad):
    y = op.outputs[0]
    return [math_ops.multiply(grad, math_ops.multiply(np.sqrt(2 * np.pi),
                                                      math_ops.Exp(math_ops.multiply(math_ops.Square(y), 0.5))))]


@math_ops._grad(BesselI0)
def _bessel_i0_grad(op, grad):
    return [math_ops.Mul(grad, BesselI1(op.inputs[0]))]


@math_ops._grad(BesselI0e)
def _bessel_i0e_grad(op, grad):
    x, y = op.inputs[0], op.outputs[0]
    return [math_ops.Mul(grad, math_ops.Sub(BesselI1e(x), math_ops.Mul(math_ops.Sign(x), y)))]


@math_ops._grad(BesselI1)
def _bessel_i1_grad(op, grad):
    x, y = op.inputs[0], op.outputs[0]
    zero = math_ops.equal(x, 0.0)
    safe = math_ops.where_v2(zero, math_ops.add(math_ops.multiply(x, 0.0), 1.0), x)
    # TF 2.21 takes 1 at x == 0 (I1'(0) is 1/2; TF's number is kept so that gradients agree)
    d = math_ops.where_v2(zero, math_ops.add(math_ops.multiply(x, 0.0), 1.0),
                          math_ops.Sub(BesselI0(x), math_ops.RealDiv(y, safe)))
    return [math_ops.Mul(grad, d)]


@math_ops._grad(BesselI1e)
def _bessel_i1e_grad(op, grad):
    x, y = op.inputs[0], op.outputs[0]
    zero = math_ops.equal(x, 0.0)
    safe = math_ops.where_v2(zero, math_ops.add(math_ops.multiply(x, 0.0), 1.0), x)
    d = math_ops.where_v2(zero, math_ops.add(math_ops.multiply(x, 0.0), 0.5),
                          math_ops.Sub(BesselI0e(x), math_ops.Mul(y, math_ops.AddV2(math_ops.Sign(x),
                                                                                     math_ops.Reciprocal(safe)))))
    return [math_ops.Mul(grad, d)]


def _binary_fn(op_def, tf_name, doc):
    def fn(x, y, name=None):
        with name_scope(name, op_def.type, [x, y]) as scope:
            x = convert_to_tensor(x)
            y = convert_to_tensor(y, dtype=x.dtype)
            return op_def(x, y, name=scope)
    fn.__name__, fn.__doc__ = tf_name, doc
    return fn


def _unary_fn(op_def, tf_name, doc):
    def fn(x, name=None):
        return op_def(convert_to_tensor(x), name=name)
    fn.__name__, fn.__doc__ = tf_name, doc
    return fn


xlogy = _binary_fn(Xlogy, "xlogy", "x * log(y), 0 where x == 0 (tf.math.xlogy).")
xdivy = _binary_fn(Xdivy, "xdivy", "x / y, 0 where x == 0 (tf.math.xdivy).")
xlog1py = _binary_fn(Xlog1py, "xlog1py", "x * log1p(y), 0 where x == 0 (tf.math.xlog1py).")
multiply_no_nan = _binary_fn(MulNoNan, "multiply_no_nan",
                             "x * y, 0 where y == 0 even if x is inf or NaN (tf.math.multiply_no_nan).")
nextafter = _binary_fn(NextAfter, "nextafter",
                       "The next representable value after x1 towards x2 (tf.math.nextafter; no gradient).")
erfinv = _unary_fn(Erfinv, "erfinv", "The inverse of erf (tf.math.erfinv).")
ndtri = _unary_fn(Ndtri, "ndtri", "The inverse of the standard normal CDF (tf.math.ndtri).")


def erfcinv(x, name=None):
    """The inverse of erfc (tf.math.erfcinv): -ndtri(x / 2) / sqrt(2), TF's formula."""
    with name_scope(name, "erfcinv", [x]):
        x = convert_to_tensor(x)
        return math_ops.multiply(math_ops.negative(Ndtri(math_ops.multiply(x, 0.5))), np.sqrt(0.5))


bessel_i0 = _unary_fn(BesselI0, "bessel_i0", "The modified Bessel function I0 (tf.math.bessel_i0).")
bessel_i0e = _unary_fn(BesselI0e, "bessel_i0e", "exp(-|x|) * I0(x) (tf.math.bessel_i0e).")
bessel_i1 = _unary_fn(BesselI1, "bessel_i1", "The modified Bessel function I1 (tf.math.bessel_i1).")
bessel_i1e = _unary_fn(BesselI1e, "bessel_i1e", "exp(-|x|) * I1(x) (tf.math.bessel_i1e).")


def polyval(coeffs, x, name=None):
    """coeffs[0] * x**(n-1) + ... + coeffs[n-1] by Horner's rule (tf.math.polyval); `coeffs` is a
    list of tensors; an empty list gives zeros like x."""
    with name_scope(name, "polyval", [x]):
        x = convert_to_tensor(x)
        if not coeffs:
            return math_ops.multiply(x, 0)
        p = convert_to_tensor(coeffs[0], dtype=x.dtype)
        for c in coeffs[1:]:
            p = math_ops.add(convert_to_tensor(c, dtype=x.dtype), math_ops.multiply(p, x))
        return p
