"""Bit operations on integers (tf.bitwise: bitwise_and/or/xor, invert, left_shift, right_shift) and
the reinterpreting cast (tf.bitcast).

Shifts follow TensorFlow's kernels: the shift amount is clamped to [0, bits - 1] (a negative amount
shifts by 0, 9 on int8 by 7), a left shift wraps around, and a right shift of a signed type is
arithmetic. None has a gradient (integers are not differentiable).
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, convert_to_tensor
from actorflow.graph.op_def import define_op
from actorflow.graph.ops.array_ops._args import _op_scope
from actorflow.graph.ops.infer import broadcast_shapes
from actorflow.graph.ops.math_ops import _check_same_dtype, _DTypeError
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["bitcast", "bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift"]

_INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_QUANTIZED = ("qint8", "quint8", "qint16", "quint16", "qint32")


def _need_int(t, op, what="x"):
    if t.dtype.name not in _INTS:
        raise _DTypeError(f"{op}: value passed to parameter '{what}' ({t.name}) has DataType {t.dtype.name} not in "
                          f"list of allowed values: {', '.join(_INTS)}")


def _infer_binary(op):
    def infer(inputs, attrs):
        x, y = inputs
        _need_int(x, op)
        _check_same_dtype(x, y)
        return [(x.dtype, broadcast_shapes(x.shape, y.shape))]
    return infer


def _infer_invert(inputs, attrs):
    _need_int(inputs[0], "Invert")
    return [(inputs[0].dtype, inputs[0].shape)]


BitwiseAnd = define_op("BitwiseAnd", _infer_binary("BitwiseAnd"))
BitwiseOr = define_op("BitwiseOr", _infer_binary("BitwiseOr"))
BitwiseXor = define_op("BitwiseXor", _infer_binary("BitwiseXor"))
LeftShift = define_op("LeftShift", _infer_binary("LeftShift"))
RightShift = define_op("RightShift", _infer_binary("RightShift"))
Invert = define_op("Invert", _infer_invert)
for _d in (BitwiseAnd, BitwiseOr, BitwiseXor, LeftShift, RightShift):
    _d.gradient(lambda op, grad: [None, None])
Invert.gradient(lambda op, grad: [None])


def _binary(opdef, default_name):
    def fn(x, y, name=None):
        with _op_scope(name, default_name) as sc:
            x = convert_to_tensor(x)
            y = y if isinstance(y, Tensor) else convert_to_tensor(y, dtype=x.dtype)
            return sc.op(opdef, x, y)
    fn.__name__ = default_name
    return fn


bitwise_and = _binary(BitwiseAnd, "BitwiseAnd")
bitwise_and.__doc__ = "x & y elementwise, broadcasting (tf.bitwise.bitwise_and)."
bitwise_or = _binary(BitwiseOr, "BitwiseOr")
bitwise_or.__doc__ = "x | y elementwise, broadcasting (tf.bitwise.bitwise_or)."
bitwise_xor = _binary(BitwiseXor, "BitwiseXor")
bitwise_xor.__doc__ = "x ^ y elementwise, broadcasting (tf.bitwise.bitwise_xor)."
left_shift = _binary(LeftShift, "LeftShift")
left_shift.__doc__ = ("x << y elementwise (tf.bitwise.left_shift): y clamped to [0, bits - 1], the result "
                      "wrapping around, as TF's kernel.")
right_shift = _binary(RightShift, "RightShift")
right_shift.__doc__ = ("x >> y elementwise (tf.bitwise.right_shift): y clamped to [0, bits - 1]; arithmetic "
                       "(sign-filling) for signed types, as TF's kernel.")


def invert(x, name=None):
    """~x elementwise: every bit flipped (tf.bitwise.invert)."""
    with _op_scope(name, "Invert") as sc:
        return sc.op(Invert, convert_to_tensor(x))


# -- Bitcast -------------------------------------------------------------------------------------

_BITCASTABLE = _INTS + _QUANTIZED + ("float16", "float32", "float64", "complex64", "complex128")


def _infer_bitcast(inputs, attrs):
    (x,) = inputs
    out = dtypes.as_dtype(attrs["type"])
    for t, what in ((x.dtype, "input"), (out, "type")):
        if t.name not in _BITCASTABLE:
            raise _DTypeError(f"Bitcast: {what} dtype {t.name} is not a numeric type that can be bitcast")
    a, b = x.dtype.size, out.size
    if x.shape.ndims is None:
        return [(out, TensorShape(None))]
    dims = list(x.shape.as_list())
    if a == b:
        return [(out, x.shape)]
    if a > b:
        return [(out, TensorShape(dims + [a // b]))]
    if not dims:
        raise _DTypeError(f"Bitcast: cannot bitcast a scalar {x.dtype.name} to the larger {out.name}")
    if dims[-1] is not None and dims[-1] != b // a:
        raise _DTypeError(f"Bitcast: the last dimension of {x.name} must be {b // a} to bitcast {x.dtype.name} to "
                          f"{out.name}, got {dims[-1]}")
    return [(out, TensorShape(dims[:-1]))]


Bitcast = define_op("Bitcast", _infer_bitcast)
Bitcast.gradient(lambda op, grad: [None])


def bitcast(input, type, name=None):  # noqa: A002 (TF's argument names)
    """The same bytes read as `type`, without copying values (tf.bitcast): a wider input gains a last
    dimension of size in/out bytes, a narrower one loses its last dimension, which must be out/in."""
    with _op_scope(name, "Bitcast") as sc:
        return sc.op(Bitcast, convert_to_tensor(input), type=dtypes.as_dtype(type))
