"""Tensors generated from sizes and ranges: LinSpace (linspace), and sequence_mask and meshgrid,
built as TF 1.x builds them."""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.array_ops import filling, packing, reshaping, shapes
from actorflow.graph.ops.array_ops._args import _is_tensor_like, _op_scope
from actorflow.graph.ops.array_ops._infer import _check_index_dtype, _no_gradient, _static_int
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["linspace", "lin_space", "sequence_mask", "meshgrid"]


def _infer_lin_space(inputs, attrs):
    start, stop, num = inputs
    if start.dtype not in (dtypes.float32, dtypes.float64):
        raise InferenceError(f"start must be float32 or float64, got {start.dtype.name}")
    if stop.dtype is not start.dtype:
        raise InferenceError(f"stop must have start's dtype {start.dtype.name}, got {stop.dtype.name}")
    _check_index_dtype(num, "num")
    for t, what in ((start, "start"), (stop, "stop"), (num, "num")):
        if t.shape.ndims not in (None, 0):
            raise InferenceError(f"{what} must be a scalar, but '{t.name}' has shape {t.shape}")
    n = _static_int(num)
    if n is not None and n <= 0:
        raise InferenceError(f"Requires num > 0: {n}")
    return [(start.dtype, TensorShape([n]))]


LinSpace = define_op("LinSpace", _infer_lin_space)
LinSpace.gradient(_no_gradient)


def linspace(start, stop, num, name=None):
    """`num` evenly spaced values from `start` to `stop`, both included (tf.linspace, tf.lin_space)."""
    with _op_scope(name, "LinSpace") as sc:
        start = convert_to_tensor(start, preferred_dtype=dtypes.float32, name="start")
        stop = convert_to_tensor(stop, dtype=start.dtype, name="stop")
        num = convert_to_tensor(num, preferred_dtype=dtypes.int32, name="num")
        return sc.op(LinSpace, start, stop, num)


lin_space = linspace


def sequence_mask(lengths, maxlen=None, dtype=dtypes.bool_, name=None):
    """mask[i..., j] = j < lengths[i...], j in [0, maxlen) (tf.sequence_mask); `maxlen` defaults to
    the largest length."""
    with _op_scope(name, "SequenceMask"):
        lengths = convert_to_tensor(lengths, name="lengths")
        if maxlen is None:
            maxlen = math_ops.reduce_max(lengths)
            maxlen = math_ops.maximum(convert_to_tensor(0, dtype=maxlen.dtype), maxlen)
        else:
            maxlen = convert_to_tensor(maxlen, name="maxlen")
        if maxlen.shape.ndims is not None and maxlen.shape.ndims != 0:
            raise ValueError("maxlen must be scalar for sequence_mask")
        row = filling.range(convert_to_tensor(0, dtype=maxlen.dtype), maxlen, convert_to_tensor(1, dtype=maxlen.dtype))
        matrix = math_ops.cast(reshaping.expand_dims(lengths, -1), maxlen.dtype)
        result = math_ops.less(row, matrix)
        dtype = dtypes.as_dtype(dtype)
        return result if dtype is dtypes.bool_ else math_ops.cast(result, dtype)


def meshgrid(*args, **kwargs):
    """Coordinate grids from 1-D coordinate vectors (tf.meshgrid); `indexing` "xy" (Cartesian,
    the default) or "ij" (matrix)."""
    indexing = kwargs.pop("indexing", "xy")
    name = kwargs.pop("name", "meshgrid")
    if kwargs:
        key = next(iter(kwargs))
        raise TypeError(f"'{key}' is an invalid keyword argument for this function")
    if indexing not in ("xy", "ij"):
        raise ValueError("indexing parameter must be either 'xy' or 'ij'")
    with _op_scope(name, "meshgrid"):
        ndim = len(args)
        ones_ = (1,) * ndim
        outputs = []
        for i, x in enumerate(args):
            v = packing.stack(x) if not _is_tensor_like(x) else convert_to_tensor(x)
            outputs.append(reshaping.reshape(v, ones_[:i] + (-1,) + ones_[i + 1:]))
        sizes = [shapes.size(convert_to_tensor(x) if _is_tensor_like(x) else packing.stack(x)) for x in args]
        out_dtype = convert_to_tensor(args[0]).dtype if ndim else dtypes.float32
        if indexing == "xy" and ndim > 1:
            outputs[0] = reshaping.reshape(outputs[0], (1, -1) + (1,) * (ndim - 2))
            outputs[1] = reshaping.reshape(outputs[1], (-1, 1) + (1,) * (ndim - 2))
            sizes[0], sizes[1] = sizes[1], sizes[0]
        mult = filling.ones(packing.stack(sizes), out_dtype)
        return [math_ops.multiply(x, mult) for x in outputs]
