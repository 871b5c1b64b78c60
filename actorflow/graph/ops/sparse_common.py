"""What the sparse op modules share: the inference of a SparseTensor's three outputs, checking the
three input tensors of one, and the SparseTensor of an op's outputs with its dense_shape a
constant where it is known statically (as TF's wrappers do, so that `.shape` is known)."""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.op_def import InferenceError
from actorflow.graph.ops.constant import constant
from actorflow.graph.ops.infer import constant_value
from actorflow.graph.sparse_tensor import SparseTensor
from actorflow.graph.tensor_shape import TensorShape


def rank_of(indices, shape) -> int | None:
    """The static rank of a SparseTensor given as its indices and dense_shape tensors."""
    if shape.shape.dims is not None and shape.shape.dims[0] is not None:
        return shape.shape.dims[0]
    if indices.shape.dims is not None and len(indices.shape.dims) == 2:
        return indices.shape.dims[1]
    return None


def check_sparse(indices, values, shape, what="input"):
    """Build-time checks of a SparseTensor's three tensors; returns its static rank or None."""
    if indices.dtype is not dtypes.int64 or shape.dtype is not dtypes.int64:
        raise InferenceError(f"{what}'s indices and dense_shape must be int64, got {indices.dtype.name} and "
                             f"{shape.dtype.name}")
    if indices.shape.ndims not in (None, 2) or values.shape.ndims not in (None, 1) or shape.shape.ndims not in (None, 1):
        raise InferenceError(f"{what} must be indices [n, rank], values [n] and dense_shape [rank], got shapes "
                             f"{indices.shape}, {values.shape} and {shape.shape}")
    r1 = shape.shape.dims[0] if shape.shape.dims else None
    r2 = indices.shape.dims[1] if indices.shape.dims else None
    if r1 is not None and r2 is not None and r1 != r2:
        raise InferenceError(f"{what}'s indices have {r2} columns but its dense_shape has rank {r1}")
    return rank_of(indices, shape)


def sparse_outputs(dtype, rank, n=None):
    """The (dtype, shape) pairs of a SparseTensor's indices, values and dense_shape."""
    return [(dtypes.int64, TensorShape([n, rank])), (dtype, TensorShape([n])), (dtypes.int64, TensorShape([rank]))]


def static_dims(shape) -> list | None:
    """The dense_shape tensor's value as a list of ints, when it is known at build time."""
    v = constant_value(shape)
    return None if v is None else [int(d) for d in np.reshape(v, -1)]


def make_sparse(indices, values, shape, static: TensorShape | None = None) -> SparseTensor:
    """SparseTensor(indices, values, shape), with a constant dense_shape when `static` is fully known."""
    if static is not None and static.is_fully_defined():
        shape = constant(np.array(static.as_list(), np.int64))
    return SparseTensor(indices, values, shape)

