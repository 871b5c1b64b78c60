"""OneHot, Fill, ZerosLike, OnesLike, Range: definitions, gradients and wrappers (one_hot, fill,
zeros, ones, zeros_like, ones_like, range)."""
from __future__ import annotations

import numbers

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.array_ops import shapes
from actorflow.graph.ops.array_ops._args import (
    _cast,
    _dense,
    _dtype_of,
    _fits_int32,
    _has_tensor,
    _int_const,
    _is_tensor_like,
    _op_scope,
    _to_index_tensor,
)
from actorflow.graph.ops.array_ops._infer import (
    _check_index_dtype,
    _check_rank,
    _check_scalar_like,
    _DTypeError,
    _no_gradient,
    _prod,
    _pyrange,
    _same_dtype,
    _static_int,
    _static_ints,
    _unknown,
)
from actorflow.graph.ops.constant import constant
from actorflow.graph.ops.infer import constant_shape, constant_value, unary
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["one_hot", "fill", "zeros", "ones", "zeros_like", "ones_like", "range"]


def _infer_one_hot(inputs, attrs):
    indices, depth, on, off = inputs
    _check_index_dtype(indices, "indices", (dtypes.uint8, dtypes.int32, dtypes.int64))
    _check_index_dtype(depth, "depth")
    _check_scalar_like(depth, "depth")
    if on.dtype is not off.dtype:
        raise _DTypeError(f"on_value and off_value must have the same dtype, got {on.dtype.name} and {off.dtype.name}")
    for t, what in ((on, "on_value"), (off, "off_value")):
        if t.shape.ndims not in (None, 0):
            raise InferenceError(f"{what} must be a scalar, got shape {t.shape}")
    axis = int(attrs.get("axis", -1))
    d = _static_int(depth)
    if d is not None and d < 0:
        raise InferenceError(f"depth must be non-negative, got {d}")
    if indices.shape.dims is None:
        return _unknown(on.dtype)
    r = len(indices.shape.dims)
    if axis < -1 or axis > r:
        raise InferenceError(f"Expected axis to be -1 or between [0, {r}], but received: {axis}")
    dims = list(indices.shape.dims)
    dims.insert(r if axis == -1 else axis, d)
    return [(on.dtype, TensorShape(dims))]


OneHot = define_op("OneHot", _infer_one_hot)


def _infer_fill(inputs, attrs):
    dims, value = inputs
    _check_index_dtype(dims, "dims")
    _check_rank(dims, 1, "dims")
    if value.shape.ndims not in (None, 0):
        raise InferenceError(f"value must be a scalar, got shape {value.shape}")
    v = _static_ints(dims)
    if v is not None and any(d < 0 for d in v):
        raise InferenceError(f"dims {v} must be non-negative")
    return [(value.dtype, constant_shape(dims))]


Fill = define_op("Fill", _infer_fill)
ZerosLike = define_op("ZerosLike", unary)
OnesLike = define_op("OnesLike", unary)


def _infer_range(inputs, attrs):
    dt = _same_dtype(inputs, "start, limit and delta")
    if dt not in (dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64):
        raise _DTypeError(f"Range needs int32, int64, float32 or float64 arguments, got {dt.name}")
    for t, what in zip(inputs, ("start", "limit", "delta")):
        if t.shape.ndims not in (None, 0):
            raise InferenceError(f"{what} must be a scalar, got shape {t.shape}")
    vals = [constant_value(t) for t in inputs]
    if any(v is None for v in vals):
        return [(dt, TensorShape([None]))]
    start, limit, delta = (np.asarray(v).item() for v in vals)
    if delta == 0:
        raise InferenceError("Requires delta != 0")
    if delta > 0 and start > limit:
        raise InferenceError(f"Requires start <= limit when delta > 0: {start}/{limit}")
    if delta < 0 and start < limit:
        raise InferenceError(f"Requires start >= limit when delta < 0: {start}/{limit}")
    if dt.is_integer:
        n = (abs(limit - start) + abs(delta) - 1) // abs(delta)
    else:
        n = int(np.ceil(abs((limit - start) / delta)))
    return [(dt, TensorShape([n]))]


Range = define_op("Range", _infer_range)


@Fill.gradient
def _fill_grad(op, grad):
    grad = _dense(grad)
    r = grad.shape.ndims
    axes = _int_const(list(_pyrange(r))) if r is not None else Range(_int_const(0), shapes.rank_of(grad), _int_const(1))
    return [None, math_ops.Sum(grad, axes, keep_dims=False)]


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    """One-hot encodes `indices` along a new `axis` (default last) (tf.one_hot).

    The dtype comes from `dtype`, else `on_value`/`off_value`, else float32; on/off default to 1/0.
    """
    with _op_scope(name, "one_hot") as sc:
        on_t = convert_to_tensor(on_value, dtype=dtype, name="on_value") if on_value is not None else None
        off_t = convert_to_tensor(off_value, dtype=dtype, name="off_value") if off_value is not None else None
        dt = dtypes.as_dtype(dtype) if dtype is not None else (
            on_t.dtype if on_t is not None else off_t.dtype if off_t is not None else dtypes.float32)
        if on_t is None:
            on_t = constant(1, dtype=dt, name="on_value")
        if off_t is None:
            off_t = constant(0, dtype=dt, name="off_value")
        if on_t.dtype is not off_t.dtype:
            raise TypeError(f"dtype of on_value ({on_t.dtype.name}) and off_value ({off_t.dtype.name}) must match")
        ind = convert_to_tensor(indices, name="indices")
        d = _to_index_tensor(depth, "depth", dtypes.int32)
        return sc.op(OneHot, ind, d, on_t, off_t, axis=-1 if axis is None else int(axis))


def fill(dims, value, name=None):
    """A tensor of shape `dims` filled with the scalar `value` (tf.fill)."""
    with _op_scope(name, "Fill") as sc:
        return sc.op(Fill, _to_index_tensor(dims, "dims"), convert_to_tensor(value, name="value"))


def _static_dims(shape_arg):
    """A shape argument as a list of ints when it holds no tensor and is fully known, else None."""
    if _has_tensor(shape_arg):
        return None
    if isinstance(shape_arg, TensorShape):
        return shape_arg.as_list() if shape_arg.is_fully_defined() else None
    arr = np.asarray(shape_arg)
    if arr.dtype.kind not in "iu" and arr.size:
        return None
    return [int(d) for d in arr.reshape(-1)]


# Like TF, small constant-shaped results are Const ops; bigger ones are Fill ops, which keep the
# serialized graph (shipped to every worker) small.
_SMALL_CONST = 1000


def _fill_value(value, dtype):
    """`value` (0 or 1) as an element of `dtype`: a string tensor's zero is b"" and it has no one
    (TF: "Expected string, but got 1 of type 'int'.")."""
    if dtype is dtypes.string:
        if value:
            raise TypeError(f"Expected string, but got {value} of type 'int'.")
        return b""
    return value


def _filled(shape_arg, value, dtype, name, default):
    dtype = dtypes.as_dtype(dtype)
    value = _fill_value(value, dtype)
    dims = _static_dims(shape_arg)
    with _op_scope(name, default) as sc:
        if dims is not None:
            if any(d < 0 for d in dims):
                raise ValueError(f"{default}: shape {dims} must be non-negative")
            if _prod(dims) < _SMALL_CONST:
                return sc.const(np.full(dims, value, dtype=dtype.np), dtype)
            shp = _int_const(dims)
        else:
            shp = _to_index_tensor(shape_arg, "shape")
        return sc.op(Fill, shp, constant(value, dtype=dtype))


def zeros(shape, dtype=dtypes.float32, name=None):  # noqa: A002
    """A tensor of zeros (tf.zeros): a Const when the shape is static and small, else Fill."""
    return _filled(shape, 0, dtype, name, "zeros")


def ones(shape, dtype=dtypes.float32, name=None):  # noqa: A002
    """A tensor of ones (tf.ones): a Const when the shape is static and small, else Fill."""
    return _filled(shape, 1, dtype, name, "ones")


def _like(tensor, dtype, name, optimize, value, op_def, default):
    with _op_scope(name, default) as sc:
        x = convert_to_tensor(tensor, name="tensor")
        dt = dtypes.as_dtype(dtype) if dtype is not None else x.dtype
        value = _fill_value(value, dt)
        n = x.shape.num_elements()
        if x.dtype is dtypes.variant:
            return sc.op(op_def, x)          # a tensor list: a list of the same length, elements unset
        if optimize and n is not None and n < _SMALL_CONST:
            return sc.const(np.full(x.shape.as_list(), value, dtype=dt.np), dt)
        if dt is not x.dtype:
            return sc.op(Fill, shapes.shape(x), constant(value, dtype=dt))
        return sc.op(op_def, x)


def zeros_like(tensor, dtype=None, name=None, optimize=True):
    """Zeros shaped like `tensor` (tf.zeros_like); a Const when the shape is static and small."""
    return _like(tensor, dtype, name, optimize, 0, ZerosLike, "zeros_like")


def ones_like(tensor, dtype=None, name=None, optimize=True):
    """Ones shaped like `tensor` (tf.ones_like); a Const when the shape is static and small."""
    return _like(tensor, dtype, name, optimize, 1, OnesLike, "ones_like")


_RANGE_DTYPES = (dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64)


def range(start, limit=None, delta=1, dtype=None, name="range"):  # noqa: A001  (TF's name)
    """The sequence start, start+delta, ... up to but excluding `limit` (tf.range).

    With one argument it is the limit. The dtype is `dtype`, else the widest of the arguments'
    (int32 < int64 < float32 < float64).
    """
    if limit is None:
        start, limit = 0, start
    with _op_scope(name, "range") as sc:
        args = [start, limit, delta]
        natural = []
        for v in args:
            if _is_tensor_like(v):
                natural.append(_dtype_of(v))
            elif isinstance(v, (bool, np.bool_)):
                natural.append(dtypes.int32)
            elif isinstance(v, np.generic):
                natural.append(dtypes.from_numpy(v.dtype))
            elif isinstance(v, numbers.Integral):
                natural.append(dtypes.int32 if _fits_int32(v) else dtypes.int64)
            else:
                natural.append(dtypes.float32)
        if dtype is not None:
            dt = dtypes.as_dtype(dtype)
        else:
            bad = [d.name for d in natural if d not in _RANGE_DTYPES]
            if bad:
                raise TypeError(f"range arguments must be int32, int64, float32 or float64, got {bad}")
            dt = max(natural, key=_RANGE_DTYPES.index)
        ts = []
        for v, nm in zip(args, ("start", "limit", "delta")):
            if _is_tensor_like(v):
                ts.append(_cast(convert_to_tensor(v), dt))
            else:
                ts.append(constant(np.asarray(v).astype(dt.np), dtype=dt, name=nm))
        return sc.op(Range, *ts)


for _d in (OneHot, ZerosLike, OnesLike, Range):
    _d.gradient(_no_gradient)
del _d
