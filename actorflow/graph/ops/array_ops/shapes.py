"""Shape, Size, Rank, BroadcastTo, BroadcastGradientArgs, BroadcastArgs, InvertPermutation: definitions, gradients
and wrappers."""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.array_ops._args import _dense, _op_scope, _to_index_tensor
from actorflow.graph.ops.array_ops._infer import (
    _INDEX_DTYPES,
    _check_index_dtype,
    _check_rank,
    _DTypeError,
    _no_gradient,
    _static_ints,
    _unknown,
)
from actorflow.graph.ops.infer import constant_shape
from actorflow.graph.tensor_shape import TensorShape, as_shape

__all__ = ["shape", "size", "rank", "broadcast_to", "invert_permutation", "broadcast_dynamic_shape",
           "broadcast_static_shape"]


def _out_type(attrs):
    t = dtypes.as_dtype(attrs.get("out_type", dtypes.int32))
    if t not in _INDEX_DTYPES:
        raise _DTypeError(f"out_type must be int32 or int64, got {t.name}")
    return t


Shape = define_op("Shape", lambda inputs, attrs: [(_out_type(attrs), TensorShape([inputs[0].shape.ndims]))])
Size = define_op("Size", lambda inputs, attrs: [(_out_type(attrs), TensorShape([]))])
Rank = define_op("Rank", lambda inputs, attrs: [(dtypes.int32, TensorShape([]))])


def _infer_broadcast_to(inputs, attrs):
    x, shp = inputs
    _check_index_dtype(shp, "shape")
    _check_rank(shp, 1, "shape")
    target = constant_shape(shp)
    v = _static_ints(shp)
    if v is not None and any(d < 0 for d in v):
        raise InferenceError(f"shape {v} must be non-negative")
    if target.dims is None:
        return _unknown(x.dtype)
    if x.shape.dims is None:
        return [(x.dtype, target)]
    if len(x.shape.dims) > len(target.dims):
        raise InferenceError(f"Rank of input ({len(x.shape.dims)}) must be no greater than rank of output shape "
                             f"({len(target.dims)}): cannot broadcast {x.shape} to {target}")
    lead = len(target.dims) - len(x.shape.dims)
    out = []
    for j, t in enumerate(target.dims):
        d = x.shape.dims[j - lead] if j >= lead else 1
        if t is not None:
            if d is not None and d != 1 and d != t:
                raise InferenceError(f"Incompatible shapes: cannot broadcast {x.shape} to {target}")
            out.append(t)
        else:
            out.append(d if d is not None and d != 1 else None)
    return [(x.dtype, TensorShape(out))]


BroadcastTo = define_op("BroadcastTo", _infer_broadcast_to)


def _infer_broadcast_gradient_args(inputs, attrs):
    s0, s1 = inputs
    for t, what in ((s0, "s0"), (s1, "s1")):
        _check_index_dtype(t, what)
        _check_rank(t, 1, what)
    if s0.dtype is not s1.dtype:
        raise _DTypeError(f"s0 and s1 must have the same dtype, got {s0.dtype.name} and {s1.dtype.name}")
    return [(s0.dtype, TensorShape([None]))] * 2


BroadcastGradientArgs = define_op("BroadcastGradientArgs", _infer_broadcast_gradient_args)


def _infer_invert_permutation(inputs, attrs):
    (x,) = inputs
    _check_index_dtype(x, "x")
    _check_rank(x, 1, "x")
    return [(x.dtype, x.shape)]


InvertPermutation = define_op("InvertPermutation", _infer_invert_permutation)


def _infer_broadcast_args(inputs, attrs):
    s0, s1 = inputs
    for t, what in ((s0, "s0"), (s1, "s1")):
        _check_index_dtype(t, what)
        _check_rank(t, 1, what)
    if s0.dtype is not s1.dtype:
        raise _DTypeError(f"s0 and s1 must have the same dtype, got {s0.dtype.name} and {s1.dtype.name}")
    a, b = _static_ints(s0), _static_ints(s1)
    n = None
    if a is not None and b is not None:
        n = len(broadcast_static_shape(TensorShape(a), TensorShape(b)).dims)
    elif s0.shape.is_fully_defined() and s1.shape.is_fully_defined():
        n = max(s0.shape.dims[0], s1.shape.dims[0])
    return [(s0.dtype, TensorShape([n]))]


BroadcastArgs = define_op("BroadcastArgs", _infer_broadcast_args)


@BroadcastTo.gradient
def _broadcast_to_grad(op, grad):
    return [math_ops.reduce_to_shape(_dense(grad), op.inputs[0]), None]


def shape(input, name=None, out_type=dtypes.int32):  # noqa: A002
    """The shape of `input` as a 1-D tensor (tf.shape); a Const when the shape is static."""
    out_type = dtypes.as_dtype(out_type)
    with _op_scope(name, "Shape") as sc:
        x = convert_to_tensor(input, name="input")
        if x.shape.is_fully_defined():
            return sc.const(x.shape.as_list(), out_type)
        return sc.op(Shape, x, out_type=out_type)


def size(input, name=None, out_type=dtypes.int32):  # noqa: A002
    """The number of elements of `input` as a scalar (tf.size); a Const when static."""
    out_type = dtypes.as_dtype(out_type)
    with _op_scope(name, "Size") as sc:
        x = convert_to_tensor(input, name="input")
        if x.shape.is_fully_defined():
            return sc.const(x.shape.num_elements(), out_type)
        return sc.op(Size, x, out_type=out_type)


def rank(input, name=None):  # noqa: A002
    """The number of dimensions of `input` as an int32 scalar (tf.rank); a Const when static."""
    with _op_scope(name, "Rank") as sc:
        x = convert_to_tensor(input, name="input")
        if x.shape.ndims is not None:
            return sc.const(x.shape.ndims, dtypes.int32)
        return sc.op(Rank, x)


rank_of = rank   # for code in this module where a local variable is called `rank`


def broadcast_to(input, shape, name=None):  # noqa: A002
    """Broadcasts `input` to `shape` with numpy's rules (tf.broadcast_to)."""
    with _op_scope(name, "BroadcastTo") as sc:
        return sc.op(BroadcastTo, convert_to_tensor(input, name="input"), _to_index_tensor(shape, "shape"))


def invert_permutation(x, name=None):
    """The inverse of the permutation `x`: ``y[x[i]] = i`` (tf.math.invert_permutation)."""
    with _op_scope(name, "InvertPermutation") as sc:
        return sc.op(InvertPermutation, _to_index_tensor(x, "x"))


for _d in (Shape, Size, Rank, BroadcastGradientArgs, InvertPermutation):
    _d.gradient(_no_gradient)
del _d


def broadcast_dynamic_shape(shape_x, shape_y):
    """The shape that `shape_x` and `shape_y` (1-D integer tensors) broadcast to, as a tensor
    (tf.broadcast_dynamic_shape; op BroadcastArgs). Incompatible shapes fail when it runs."""
    with _op_scope(None, "BroadcastArgs") as sc:
        x = _to_index_tensor(shape_x, "shape_x")
        return sc.op(BroadcastArgs, x, _to_index_tensor(shape_y, "shape_y", x.dtype))


def broadcast_static_shape(shape_x, shape_y):
    """The TensorShape that `shape_x` and `shape_y` broadcast to, unknown dimensions kept unknown
    (tf.broadcast_static_shape). Raises ValueError when they are incompatible."""
    x, y = as_shape(shape_x), as_shape(shape_y)
    if x.dims is None or y.dims is None:
        return TensorShape(None)
    n = max(len(x.dims), len(y.dims))
    a = [1] * (n - len(x.dims)) + list(x.dims)
    b = [1] * (n - len(y.dims)) + list(y.dims)
    out = []
    for da, db in zip(a, b):
        if da is None or db is None:
            # An unknown dimension against 1 is that dimension; against anything else it must equal it.
            known = db if da is None else da
            out.append(None if known in (None, 1) else known)
        elif da == db or db == 1:
            out.append(da)
        elif da == 1:
            out.append(db)
        else:
            raise ValueError(f"Incompatible shapes for broadcasting: {x} and {y}")
    return TensorShape(out)
