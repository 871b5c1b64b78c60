"""Where (the coordinates of true elements) and boolean_mask."""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.array_ops import gathering, joining, reshaping, shapes, slicing
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["boolean_mask"]


def _infer_where(inputs, attrs):
    c = inputs[0]
    if not (c.dtype.is_bool or c.dtype.is_numeric):
        raise InferenceError(f"Where needs a bool or numeric input, got {c.dtype.name}")
    return [(dtypes.int64, TensorShape([None, c.shape.ndims]) if c.shape.ndims is not None
             else TensorShape([None, None]))]


Where = define_op("Where", _infer_where)


def where_indices(condition, name=None):
    """The coordinates of the true (non-zero) elements of `condition`, an int64 [num_true, rank]
    tensor in row-major order (tf.compat.v1.where with one argument; op Where). No gradient."""
    c = convert_to_tensor(condition)
    return Where(c, name=name or "Where")


def boolean_mask(tensor, mask, name="boolean_mask", axis=None):
    """The entries of `tensor` where `mask` is true: `mask`'s k dimensions, starting at `axis`
    (default 0), collapse into one of unknown size (tf.boolean_mask). `mask` needs a known rank."""
    with name_scope(name, "boolean_mask"):
        tensor = convert_to_tensor(tensor)
        mask = convert_to_tensor(mask, dtype=dtypes.bool_) if not isinstance(mask, Tensor) else mask
        k = mask.shape.ndims
        if k is None or k == 0:
            raise ValueError(f"boolean_mask: the mask must have a known, non-zero rank, got {mask.shape} "
                             f"('{mask.name}')")
        axis = 0 if axis is None else int(axis)
        rank = tensor.shape.ndims
        if rank is not None:
            if axis < 0:
                axis += rank
            if not tensor.shape[axis:axis + k].is_compatible_with(mask.shape):
                raise ValueError(f"boolean_mask: the mask's shape {mask.shape} does not match the tensor's "
                                 f"dimensions {tensor.shape[axis:axis + k]} from axis {axis} ('{tensor.name}')")
        dims = shapes.shape(tensor)
        lead = slicing.strided_slice(dims, [0], [axis]) if axis else None
        collapsed = math_ops.reduce_prod(slicing.strided_slice(dims, [axis], [axis + k]), [0], keepdims=True)
        rest = slicing.strided_slice(dims, [axis + k], [0], end_mask=1)
        flat = reshaping.reshape(tensor, joining.concat([p for p in (lead, collapsed, rest) if p is not None], 0))
        if rank is not None:
            flat.set_shape(tensor.shape[:axis].concatenate(
                [tensor.shape[axis:axis + k].num_elements()]).concatenate(tensor.shape[axis + k:]))
        idx = reshaping.squeeze(where_indices(reshaping.reshape(mask, [-1])), [1])
        return gathering.gather(flat, idx, axis=axis)
