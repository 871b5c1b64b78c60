"""The Levenshtein distance between sparse sequences (tf.edit_distance; op EditDistance).

`hypothesis` and `truth` are SparseTensors of one rank R whose last dimension runs along each
sequence: the entries sharing an index prefix (the first R - 1 coordinates) form one sequence, in
the order of their last coordinate. The output, float32 of shape max(hypothesis.shape[:-1],
truth.shape[:-1]), holds each prefix's edit distance (insertions, deletions, substitutions),
divided by the truth's length when `normalize` (a truth of length 0 then gives inf against a
non-empty hypothesis, 0 against an empty one, as TF's kernel does). It has no gradient, as in TF.
"""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops.infer import constant_value
from actorflow.graph.sparse_tensor import SparseTensor, SparseTensorValue
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["edit_distance"]


def _infer_edit_distance(inputs, attrs):
    hi, hv, hs, ti, tv, ts = inputs
    if hv.dtype is not tv.dtype:
        raise InferenceError(f"hypothesis values ({hv.dtype.name}) and truth values ({tv.dtype.name}) must have the "
                             "same dtype")
    for t, what in ((hi, "hypothesis_indices"), (ti, "truth_indices"), (hs, "hypothesis_shape"), (ts, "truth_shape")):
        if t.dtype is not dtypes.int64:
            raise InferenceError(f"{what} must be int64, got {t.dtype.name}")
    a, b = constant_value(hs), constant_value(ts)
    if a is not None and b is not None:
        a, b = np.reshape(a, -1), np.reshape(b, -1)
        if a.size != b.size:
            raise InferenceError(f"hypothesis and truth must have the same rank, got shapes {a.tolist()} and "
                                 f"{b.tolist()}")
        return [(dtypes.float32, TensorShape(np.maximum(a, b)[:-1].tolist()))]
    n = hs.shape.dims[0] if hs.shape.dims is not None else None
    n = n if n is not None else (ts.shape.dims[0] if ts.shape.dims is not None else None)
    return [(dtypes.float32, TensorShape(None if n is None else [None] * (n - 1)))]


EditDistance = define_op("EditDistance", _infer_edit_distance)
EditDistance.gradient(lambda op, grad: [None] * 6)


def _sparse(x, what):
    if isinstance(x, SparseTensorValue):
        return SparseTensor.from_value(x)
    if not isinstance(x, SparseTensor):
        raise TypeError(f"edit_distance: {what} must be a SparseTensor, got {type(x).__name__}")
    return x


def edit_distance(hypothesis, truth, normalize=True, name="edit_distance"):
    """The Levenshtein distance between the sequences of the SparseTensors `hypothesis` and `truth`,
    one per index prefix, normalized by the truth's length when `normalize` (tf.edit_distance)."""
    h, t = _sparse(hypothesis, "hypothesis"), _sparse(truth, "truth")
    with name_scope(name, "edit_distance", [h.indices, t.indices]) as scope:
        return EditDistance(h.indices, h.values, h.dense_shape, t.indices, t.values, t.dense_shape,
                            normalize=bool(normalize), name=scope)
