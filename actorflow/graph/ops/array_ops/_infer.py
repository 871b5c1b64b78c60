"""Inference helpers of the array ops: static values and shapes of inputs, rank and dtype checks."""
from __future__ import annotations

import builtins

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.op_def import InferenceError
from actorflow.graph.ops.infer import constant_value
from actorflow.graph.tensor_shape import TensorShape

# This module defines `range`, `slice` and friends, TF's names; Python's own stay reachable.
_pyrange = builtins.range
_pyslice = builtins.slice

_INDEX_DTYPES = (dtypes.int32, dtypes.int64)
_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


class _DTypeError(InferenceError, TypeError):
    """A dtype mistake: a ValueError like every inference error, and a TypeError like in TF."""


def _check_index_dtype(t, what, allowed=_INDEX_DTYPES):
    if t.dtype not in allowed:
        raise _DTypeError(f"{what} must be {' or '.join(d.name for d in allowed)}, got {t.dtype.name} "
                          f"('{t.name}')")


def _check_rank(t, rank, what):
    n = t.shape.ndims
    if n is not None and n != rank:
        raise InferenceError(f"{what} must have rank {rank}, but '{t.name}' has shape {t.shape}")


def _check_scalar_like(t, what):
    """A scalar, or a vector of one element (TF accepts both for axis arguments)."""
    n = t.shape.num_elements()
    if t.shape.ndims is not None and t.shape.ndims > 1 or n not in (None, 1):
        raise InferenceError(f"{what} must be a scalar, but '{t.name}' has shape {t.shape}")


def _static_ints(t):
    """Every entry of an integer tensor as Python ints, when known at build time; else None."""
    v = constant_value(t)
    return None if v is None else [int(x) for x in np.reshape(v, -1)]


def _static_int(t):
    """The value of a one-element integer tensor when known at build time, else None."""
    v = constant_value(t)
    if v is None or np.size(v) != 1:
        return None
    return int(np.reshape(v, -1)[0])


def _partial_ints(t):
    """The entries of a 1-D integer tensor, each an int or None when only the run time knows it.

    Sees through Pack of scalars, which is how shapes and slice bounds mixing Python ints and
    tensors are built. None when even the length is unknown.
    """
    v = _static_ints(t)
    if v is not None:
        return v
    op = t.op
    if op.type == "Pack" and op.attrs.get("axis", 0) == 0 and all(x.shape.ndims == 0 for x in op.inputs):
        return [_static_int(x) for x in op.inputs]
    if op.type == "Shape" and op.inputs[0].shape.ndims is not None:
        # The shape of a partially known tensor: its known dimensions are known here too.
        return list(op.inputs[0].shape.dims)
    if t.shape.ndims == 1 and t.shape.dims[0] is not None:
        return [None] * t.shape.dims[0]
    return None


def _prod(values):
    n = 1
    for v in values:
        n *= v
    return n


def _same_dtype(tensors, what):
    for i, t in enumerate(tensors[1:], 1):
        if t.dtype is not tensors[0].dtype:
            raise _DTypeError(f"All {what} must have the same dtype, got {tensors[0].dtype.name} ({what}[0]) "
                              f"and {t.dtype.name} ({what}[{i}])")
    return tensors[0].dtype


def _unknown(dtype, n=1):
    return [(dtype, TensorShape(None))] * n


def _with_rank(dtype, rank):
    return (dtype, TensorShape(None if rank is None else [None] * rank))


def _normalize(axis, rank, what="axis"):
    if not -rank <= axis < rank:
        raise InferenceError(f"{what} {axis} is out of range [{-rank}, {rank}) for a tensor of rank {rank}")
    return axis % rank


def _check_prefix(ids, data, ids_what, data_what):
    """`ids`' shape must be a prefix of `data`'s (segment ids, partitions, stitch indices)."""
    if ids.shape.dims is None or data.shape.dims is None:
        return
    k = len(ids.shape.dims)
    if k > len(data.shape.dims) or not TensorShape(data.shape.dims[:k]).is_compatible_with(ids.shape):
        raise InferenceError(f"{ids_what}.shape {ids.shape} must be a prefix of {data_what}.shape {data.shape}")


def _no_gradient(op, *grads):
    return [None] * len(op.inputs)
