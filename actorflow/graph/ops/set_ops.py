"""Set operations on the last dimension of dense or sparse tensors (tf.sets: set_size,
set_intersection, set_union, set_difference; TF's SetSize and {Dense,Sparse}To{Dense,Sparse}SetOperation).

Each position of the leading dimensions holds one set: the values along the last dimension (a
dense row, or a SparseTensor's values sharing their leading indices), duplicates ignored. The
results are SparseTensors whose sets are sorted ascending (bytes order for strings), with
dense_shape = the leading shape + [the largest result set], as TensorFlow returns them. Integer and
string sets only, as in TF. No gradients (set membership is not differentiable).
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops.array_ops._args import _op_scope
from actorflow.graph.ops.sparse_common import check_sparse, sparse_outputs
from actorflow.graph.sparse_tensor import SparseTensor, SparseTensorValue, is_sparse
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["set_difference", "set_intersection", "set_size", "set_union"]

_SET_TYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "string")
_OPS = ("a-b", "b-a", "intersection", "union")


class _SetTypeError(InferenceError, TypeError):
    """A dtype a set cannot hold: a ValueError like every inference error, a TypeError as in TF."""


def _need_set_type(t, op):
    if t.dtype.name not in _SET_TYPES:
        raise _SetTypeError(f"{op}: invalid dtype {t.dtype.name} of '{t.name}'; sets hold {', '.join(_SET_TYPES)}")


def _need_op(attrs, op):
    if attrs["set_operation"] not in _OPS:
        raise InferenceError(f"{op}: invalid set_operation {attrs['set_operation']!r}, expected one of {_OPS}")


def _rank(t):
    return t.shape.ndims


def _infer_set_size(inputs, attrs):
    indices, values, shape = inputs
    rank = check_sparse(indices, values, shape, "SetSize's set")
    _need_set_type(values, "SetSize")
    if rank is not None and rank < 2:
        raise InferenceError(f"SetSize: the sets must have rank at least 2, got {rank}")
    return [(dtypes.int32, TensorShape(None if rank is None else [None] * (rank - 1)))]


def _infer_dense_dense(inputs, attrs):
    a, b = inputs
    _need_op(attrs, "DenseToDenseSetOperation")
    for t in (a, b):
        _need_set_type(t, "DenseToDenseSetOperation")
    if a.dtype is not b.dtype:
        raise _SetTypeError(f"DenseToDenseSetOperation: set1 is {a.dtype.name} but set2 is {b.dtype.name}")
    for t in (a, b):
        if _rank(t) is not None and _rank(t) < 2:
            raise InferenceError(f"DenseToDenseSetOperation: '{t.name}' must have rank at least 2, got {_rank(t)}")
    if _rank(a) is not None and _rank(b) is not None:
        if _rank(a) != _rank(b):
            raise InferenceError(f"DenseToDenseSetOperation: set1 has rank {_rank(a)} but set2 rank {_rank(b)}")
        lead_a, lead_b = a.shape.as_list()[:-1], b.shape.as_list()[:-1]
        for x, y in zip(lead_a, lead_b):
            if x is not None and y is not None and x != y:
                raise InferenceError(f"DenseToDenseSetOperation: the leading shapes {lead_a} and {lead_b} of "
                                     f"'{a.name}' and '{b.name}' differ")
    return sparse_outputs(a.dtype, _rank(a))


def _infer_dense_sparse(inputs, attrs):
    a, bi, bv, bs = inputs
    _need_op(attrs, "DenseToSparseSetOperation")
    check_sparse(bi, bv, bs, "set2")
    _need_set_type(a, "DenseToSparseSetOperation")
    if a.dtype is not bv.dtype:
        raise _SetTypeError(f"DenseToSparseSetOperation: set1 is {a.dtype.name} but set2 is {bv.dtype.name}")
    if _rank(a) is not None and _rank(a) < 2:
        raise InferenceError(f"DenseToSparseSetOperation: '{a.name}' must have rank at least 2, got {_rank(a)}")
    return sparse_outputs(a.dtype, _rank(a))


def _infer_sparse_sparse(inputs, attrs):
    ai, av, as_, bi, bv, bs = inputs
    _need_op(attrs, "SparseToSparseSetOperation")
    rank = check_sparse(ai, av, as_, "set1")
    check_sparse(bi, bv, bs, "set2")
    _need_set_type(av, "SparseToSparseSetOperation")
    if av.dtype is not bv.dtype:
        raise _SetTypeError(f"SparseToSparseSetOperation: set1 is {av.dtype.name} but set2 is {bv.dtype.name}")
    return sparse_outputs(av.dtype, rank)


SetSize = define_op("SetSize", _infer_set_size)
DenseToDenseSetOperation = define_op("DenseToDenseSetOperation", _infer_dense_dense)
DenseToSparseSetOperation = define_op("DenseToSparseSetOperation", _infer_dense_sparse)
SparseToSparseSetOperation = define_op("SparseToSparseSetOperation", _infer_sparse_sparse)
for _d in (SetSize, DenseToDenseSetOperation, DenseToSparseSetOperation, SparseToSparseSetOperation):
    _d.gradient(lambda op, *grads: [None] * len(op.inputs))


def _as_set_input(x, what):
    if isinstance(x, SparseTensorValue):
        return SparseTensor.from_value(x)
    if isinstance(x, SparseTensor):
        return x
    return convert_to_tensor(x, name=what)


def set_size(a, validate_indices=True):
    """The number of distinct values in each set of the SparseTensor `a` (its last dimension), int32
    of shape dense_shape[:-1] (tf.sets.set_size). A dense `a` is a TypeError, as in TF."""
    if isinstance(a, SparseTensorValue):
        a = SparseTensor.from_value(a)
    if not isinstance(a, SparseTensor):
        raise TypeError(f"set_size expects a SparseTensor, got {type(a).__name__}")
    with _op_scope(None, "SetSize") as sc:
        return sc.op(SetSize, a.indices, a.values, a.dense_shape, validate_indices=bool(validate_indices))


def _set_operation(a, b, op, validate_indices):
    a, b = _as_set_input(a, "a"), _as_set_input(b, "b")
    if is_sparse(a) and not is_sparse(b):
        if op in ("a-b", "b-a"):
            op = "b-a" if op == "a-b" else "a-b"
        a, b = b, a
    with _op_scope(None, "SetOperation") as sc:
        kw = {"set_operation": op, "validate_indices": bool(validate_indices)}
        if not is_sparse(a) and not is_sparse(b):
            outs = sc.op(DenseToDenseSetOperation, a, b, **kw)
        elif not is_sparse(a):
            outs = sc.op(DenseToSparseSetOperation, a, b.indices, b.values, b.dense_shape, **kw)
        else:
            outs = sc.op(SparseToSparseSetOperation, a.indices, a.values, a.dense_shape,
                         b.indices, b.values, b.dense_shape, **kw)
    return SparseTensor(*outs)


def set_intersection(a, b, validate_indices=True):
    """The values in both sets, per set, as a SparseTensor (tf.sets.set_intersection); `a` and `b`
    are dense tensors or SparseTensors of the same leading shape."""
    return _set_operation(a, b, "intersection", validate_indices)


def set_union(a, b, validate_indices=True):
    """The values in either set, per set, as a SparseTensor (tf.sets.set_union)."""
    return _set_operation(a, b, "union", validate_indices)


def set_difference(a, b, aminusb=True, validate_indices=True):
    """The values of `a` not in `b` (or of `b` not in `a` when `aminusb` is False), per set, as a
    SparseTensor (tf.sets.set_difference)."""
    return _set_operation(a, b, "a-b" if aminusb else "b-a", validate_indices)
