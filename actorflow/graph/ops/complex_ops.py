"""Complex numbers: building them from parts, taking them apart, conjugate, angle and modulus
(tf.complex, tf.math.real / imag / conj / angle, and tf.abs of a complex tensor).

Gradients follow TensorFlow's convention: the gradient of a real loss L with respect to a complex
z = x + iy is dL/dx + i dL/dy (the conjugate of the Wirtinger derivative times two), so that
`z - lr * grad` descends. The arithmetic ops' gradients in math_ops conjugate what they multiply
by for the same reason.
"""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.op_def import define_op
from actorflow.graph.ops.infer import broadcast_shapes
from actorflow.graph.ops.math_ops import (
    Mul,
    Neg,
    Reciprocal,
    _check_same_dtype,
    _DTypeError,
    _grad,
    _scalar,
    div_no_nan,
    reduce_to_shape,
)

__all__ = ["complex", "real", "imag", "conj", "angle"]

_COMPLEX_OF = {dtypes.float32: dtypes.complex64, dtypes.float64: dtypes.complex128}
_REAL_OF = {dtypes.complex64: dtypes.float32, dtypes.complex128: dtypes.float64}


def real_dtype(dt):
    """The dtype of the real and imaginary parts of `dt` (float32 for complex64); `dt` if real."""
    return _REAL_OF.get(dt, dt)


def _infer_complex(inputs, attrs):
    x, y = inputs
    _check_same_dtype(x, y, "real", "imag")
    if x.dtype not in _COMPLEX_OF:
        raise _DTypeError(f"real and imag must be float32 or float64, got {x.dtype.name}")
    out = dtypes.as_dtype(attrs.get("Tout", _COMPLEX_OF[x.dtype]))
    if out is not _COMPLEX_OF[x.dtype]:
        raise _DTypeError(f"Tout {out.name} does not hold {x.dtype.name} parts")
    return [(out, broadcast_shapes(x.shape, y.shape))]


def _to_real(inputs, attrs):
    (x,) = inputs
    if not x.dtype.is_complex:
        raise _DTypeError(f"input must be complex64 or complex128, got {x.dtype.name}")
    out = dtypes.as_dtype(attrs.get("Tout", _REAL_OF[x.dtype]))
    if out is not _REAL_OF[x.dtype]:
        raise _DTypeError(f"Tout {out.name} is not the part type of {x.dtype.name}")
    return [(out, x.shape)]


def _infer_conj(inputs, attrs):
    (x,) = inputs
    if not x.dtype.is_complex:
        raise _DTypeError(f"input must be complex64 or complex128, got {x.dtype.name}")
    return [(x.dtype, x.shape)]


Complex = define_op("Complex", _infer_complex)
Real = define_op("Real", _to_real)
Imag = define_op("Imag", _to_real)
Angle = define_op("Angle", _to_real)
ComplexAbs = define_op("ComplexAbs", _to_real)
Conj = define_op("Conj", _infer_conj)


def _zeros(like):
    return _scalar(0, like.dtype)


@_grad(Complex)
def _complex_grad(op, grad):
    x, y = op.inputs
    part = real_dtype(grad.dtype)
    return [reduce_to_shape(Real(grad, Tout=part), x), reduce_to_shape(Imag(grad, Tout=part), y)]


@_grad(Real)
def _real_grad(op, grad):
    return [Complex(grad, _zeros(grad), Tout=op.inputs[0].dtype)]


@_grad(Imag)
def _imag_grad(op, grad):
    return [Complex(_zeros(grad), grad, Tout=op.inputs[0].dtype)]


@_grad(Conj)
def _conj_grad(op, grad):
    return [Conj(grad)]


@_grad(ComplexAbs)
def _complex_abs_grad(op, grad):
    z, r = op.inputs[0], op.outputs[0]
    g = Complex(grad, _zeros(grad), Tout=z.dtype)
    return [div_no_nan(Mul(g, z), Complex(r, _zeros(r), Tout=z.dtype))]


@_grad(Angle)
def _angle_grad(op, grad):
    z = op.inputs[0]
    part = real_dtype(z.dtype)
    re, im = Real(z, Tout=part), Imag(z, Tout=part)
    w = Reciprocal(Complex(im, re, Tout=z.dtype))
    return [Neg(Mul(Complex(grad, _zeros(grad), Tout=z.dtype), w))]


def complex(real, imag, name=None):  # noqa: A001  (TF's name)
    """real + i * imag element-wise (tf.complex): float32 parts give complex64, float64 complex128."""
    with name_scope(name, "Complex", [real, imag]) as scope:
        real = convert_to_tensor(real)
        imag = convert_to_tensor(imag, dtype=real.dtype)
        return Complex(real, imag, Tout=_COMPLEX_OF.get(real.dtype, real.dtype), name=scope)


def _part(op_def, input, name, default):
    x = convert_to_tensor(input)
    if not x.dtype.is_complex:
        return default(x)
    return op_def(x, Tout=_REAL_OF[x.dtype], name=name)


def real(input, name=None):  # noqa: A002  (TF's argument name)
    """The real part (tf.math.real); a real tensor is returned as it is."""
    return _part(Real, input, name, lambda x: x)


def imag(input, name=None):  # noqa: A002
    """The imaginary part (tf.math.imag); zeros for a real tensor."""
    from actorflow.graph.ops.array_ops import zeros_like
    return _part(Imag, input, name, lambda x: zeros_like(x))


def angle(input, name=None):  # noqa: A002
    """The argument atan2(imag, real) (tf.math.angle); for a real tensor, pi where it is negative
    and 0 elsewhere, as TF."""
    def real_angle(x):    # a selection, so no gradient reaches x, as in TF
        from actorflow.graph.ops.math_ops import Less, SelectV2
        return SelectV2(Less(x, _zeros(x)), _scalar(np.pi, x.dtype), _zeros(x))
    return _part(Angle, input, name, real_angle)


def conj(x, name=None):
    """The complex conjugate (tf.math.conj); a real tensor is returned as it is."""
    x = convert_to_tensor(x)
    return Conj(x, name=name) if x.dtype.is_complex else x
