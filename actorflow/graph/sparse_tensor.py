"""SparseTensor and SparseTensorValue (tf.SparseTensor, tf.SparseTensorValue).

A SparseTensor is three tensors: `indices` (int64 [n, rank]), `values` ([n]) and `dense_shape`
(int64 [rank]). It is a named tuple of them, so a Session fetches it as a SparseTensorValue of
three arrays (actors/session.py), feeds one from a SparseTensorValue or an (indices, values,
dense_shape) tuple, and structures (while_loop variables, nest) see its three tensors.
"""
from __future__ import annotations

import collections

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.indexed_slices import OfValues
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["SparseTensor", "SparseTensorValue"]


class SparseTensorValue(collections.namedtuple("SparseTensorValue", ["indices", "values", "dense_shape"])):
    """The value of a SparseTensor: three numpy arrays (tf.compat.v1.SparseTensorValue)."""


class SparseTensor(collections.namedtuple("SparseTensor", ["indices", "values", "dense_shape"]), OfValues):
    """A sparse tensor: the non-default `values` at `indices` of a tensor of shape `dense_shape`."""

    _value_type = SparseTensorValue      # what Session.run returns for it

    def __new__(cls, indices, values, dense_shape):
        idx = convert_to_tensor(indices, dtype=dtypes.int64, name="indices")
        vals = convert_to_tensor(values, name="values")
        shape = convert_to_tensor(dense_shape, dtype=dtypes.int64, name="dense_shape")
        if idx.shape.ndims not in (None, 2):
            raise ValueError(f"SparseTensor indices must be a matrix [n, rank], got shape {idx.shape}")
        if vals.shape.ndims not in (None, 1):
            raise ValueError(f"SparseTensor values must be a vector, got shape {vals.shape}")
        if shape.shape.ndims not in (None, 1):
            raise ValueError(f"SparseTensor dense_shape must be a vector, got shape {shape.shape}")
        return super().__new__(cls, idx, vals, shape)

    @classmethod
    def from_value(cls, value):
        if isinstance(value, SparseTensor):
            return value
        return cls(np.asarray(value.indices, np.int64), value.values, np.asarray(value.dense_shape, np.int64))

    @property
    def shape(self) -> TensorShape:
        from actorflow.graph.ops.infer import constant_value
        v = constant_value(self.dense_shape)
        if v is not None:
            return TensorShape([int(d) for d in np.reshape(v, -1)])
        n = self.dense_shape.shape.dims[0] if self.dense_shape.shape.dims is not None else None
        return TensorShape(None if n is None else [None] * n)

    def get_shape(self) -> TensorShape:
        return self.shape

    def eval(self, feed_dict=None, session=None):
        from actorflow.graph.graph import get_default_session
        sess = session or get_default_session()
        if sess is None:
            raise ValueError("Cannot evaluate a SparseTensor using `eval()`: no default session is registered.")
        return sess.run(self, feed_dict)

    # TF's operators on a SparseTensor: * and / with a dense tensor that broadcasts to its shape
    # (SparseDenseCwiseMul / Div); a namedtuple's own * (repetition) would be wrong here.
    def __mul__(self, other):
        from actorflow.graph.ops.sparse_math_ops import SparseDenseCwiseMul, sparse_dense_cwise
        return sparse_dense_cwise(SparseDenseCwiseMul, self, other, name="mul")

    def __truediv__(self, other):
        from actorflow.graph.ops.sparse_math_ops import sparse_dense_truediv
        return sparse_dense_truediv(self, other)

    def __div__(self, other):      # TF 1.x's `div`: integer division for integers
        from actorflow.graph.ops.sparse_math_ops import SparseDenseCwiseDiv, sparse_dense_cwise
        return sparse_dense_cwise(SparseDenseCwiseDiv, self, other, name="div")

    def __repr__(self):
        return f"SparseTensor(indices={self.indices!r}, values={self.values!r}, dense_shape={self.dense_shape!r})"


def is_sparse(x) -> bool:
    return isinstance(x, (SparseTensor, SparseTensorValue))


def _check(x, what="sp_input") -> SparseTensor:
    if isinstance(x, SparseTensorValue):
        return SparseTensor.from_value(x)
    if not isinstance(x, SparseTensor):
        raise TypeError(f"{what} must be a SparseTensor, got {type(x).__name__}")
    return x

