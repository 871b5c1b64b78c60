"""Sparse tensors in computations: sparse_placeholder, sparse_to_dense / sparse_tensor_to_dense
(op SparseToDense), sparse_tensor_dense_matmul (op SparseTensorDenseMatMul),
the SparseTensor of a dense tensor (sparse.from_dense), embedding_lookup_sparse and
safe_embedding_lookup_sparse; TF 1.x's names
and semantics, with TF's gradients (to the values and to the dense operand)."""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.constant import constant, placeholder
from actorflow.graph.ops.infer import constant_value
from actorflow.graph.sparse_tensor import SparseTensor, _check
from actorflow.graph.tensor_shape import TensorShape, as_shape

__all__ = ["sparse_placeholder", "sparse_to_dense", "sparse_tensor_to_dense", "sparse_tensor_dense_matmul",
           "sparse_from_dense", "embedding_lookup_sparse", "safe_embedding_lookup_sparse",
           "convert_to_tensor_or_sparse_tensor"]


def _infer_sparse_to_dense(inputs, attrs):
    indices, shape, values, default = inputs
    if indices.dtype not in (dtypes.int32, dtypes.int64) or shape.dtype not in (dtypes.int32, dtypes.int64):
        raise InferenceError("sparse_indices and output_shape must be int32 or int64")
    if default.dtype is not values.dtype:
        raise InferenceError(f"default_value must have the values' dtype {values.dtype.name}, got {default.dtype.name}")
    v = constant_value(shape)
    if v is not None:
        return [(values.dtype, TensorShape([int(d) for d in np.reshape(v, -1)]))]
    n = shape.shape.dims[0] if shape.shape.dims else None
    return [(values.dtype, TensorShape(None if n is None else [None] * n))]


SparseToDense = define_op("SparseToDense", _infer_sparse_to_dense)


@SparseToDense.gradient
def _sparse_to_dense_grad(op, grad):
    indices = op.inputs[0]
    if indices.shape.ndims == 1 or (indices.shape.ndims is None):
        indices = array_ops.reshape(indices, [-1, 1]) if indices.shape.ndims == 1 else indices
    values_grad = _gather_nd(grad, indices)
    return [None, None, values_grad, math_ops.reduce_sum(grad) - math_ops.reduce_sum(values_grad)]


def _gather_nd(x, indices):
    from actorflow.graph.ops.scatter_nd_ops import gather_nd
    return gather_nd(x, indices)


def _infer_sp_matmul(inputs, attrs):
    a_indices, a_values, a_shape, b = inputs
    if b.shape.ndims not in (None, 2):
        raise InferenceError(f"b must be a matrix, got shape {b.shape}")
    if a_values.dtype is not b.dtype:
        raise InferenceError(f"a's values ({a_values.dtype.name}) and b ({b.dtype.name}) must have one dtype")
    v = constant_value(a_shape)
    rows = None
    if v is not None:
        a = [int(d) for d in np.reshape(v, -1)]
        if len(a) != 2:
            raise InferenceError(f"sp_a must be a matrix, got dense_shape {a}")
        rows = a[1] if attrs.get("adjoint_a") else a[0]
    cols = None
    if b.shape.dims is not None:
        cols = b.shape.dims[0] if attrs.get("adjoint_b") else b.shape.dims[1]
    return [(b.dtype, TensorShape([rows, cols]))]


SparseTensorDenseMatMul = define_op("SparseTensorDenseMatMul", _infer_sp_matmul)


@SparseTensorDenseMatMul.gradient
def _sp_matmul_grad(op, grad):
    a_indices, a_values, a_shape, b = op.inputs
    adj_a, adj_b = bool(op.attrs.get("adjoint_a")), bool(op.attrs.get("adjoint_b"))
    # d b = op(a)^T @ grad, in b's orientation
    b_grad = SparseTensorDenseMatMul(a_indices, a_values, a_shape, grad, adjoint_a=not adj_a, adjoint_b=False)
    if adj_b:
        b_grad = array_ops.transpose(b_grad)
    # d a_values[k] = sum_j grad[row, j] * op(b)[col, j] at a's (row, col) = indices[k] (swapped for adjoint_a)
    rows = a_indices[:, 1] if adj_a else a_indices[:, 0]
    cols = a_indices[:, 0] if adj_a else a_indices[:, 1]
    bt = array_ops.transpose(b) if adj_b else b
    g_rows = array_ops.gather(grad, rows)
    b_rows = array_ops.gather(bt, cols)
    values_grad = math_ops.reduce_sum(g_rows * b_rows, axis=1)
    return [None, values_grad, None, b_grad]


def sparse_placeholder(dtype, shape=None, name=None):
    """A SparseTensor to feed (tf.compat.v1.sparse_placeholder): its indices, values and dense_shape
    are placeholders `name/indices`, `name/values`, `name/shape` (the shape a constant when `shape`
    is fully known; `shape` may also be an int tensor, which is then the dense shape, as in TF 1.x);
    feed it a SparseTensorValue or an (indices, values, dense_shape) tuple."""
    from actorflow.graph.graph import Tensor
    dtype = dtypes.as_dtype(dtype)
    if isinstance(shape, Tensor):
        if shape.shape.ndims != 1:
            raise ValueError(f"sparse_placeholder: a tensor shape must be a vector, got {shape.name} of shape "
                             f"{shape.shape}")
        rank = shape.shape.dims[0]
        with name_scope(name or "Placeholder") as scope:
            base = scope.rstrip("/")
            values = placeholder(dtype, [None], name=base + "/values/")
            indices = placeholder(dtypes.int64, [None, rank], name=base + "/indices/")
            dense_shape = shape if shape.dtype is dtypes.int64 else math_ops.cast(shape, dtypes.int64)
        return SparseTensor(indices, values, dense_shape)
    shape = as_shape(shape) if shape is not None else TensorShape(None)
    rank = shape.ndims
    with name_scope(name or "Placeholder") as scope:
        base = scope.rstrip("/")
        values = placeholder(dtype, [None], name=base + "/values/")
        indices = placeholder(dtypes.int64, [None, rank], name=base + "/indices/")
        if shape.is_fully_defined():
            dense_shape = constant(np.array(shape.as_list(), np.int64), name=base + "/shape/")
        else:
            dense_shape = placeholder(dtypes.int64, [rank], name=base + "/shape/")
    return SparseTensor(indices, values, dense_shape)


def sparse_to_dense(sparse_indices, output_shape, sparse_values, default_value=0, validate_indices=True, name=None):
    """A dense tensor of `output_shape` with `sparse_values` at `sparse_indices` and `default_value`
    elsewhere (tf.sparse_to_dense); indices out of range, and (validate_indices) unsorted or
    repeated ones, are an InvalidArgumentError."""
    with name_scope(name or "SparseToDense"):
        values = convert_to_tensor(sparse_values, name="sparse_values")
        idx = convert_to_tensor(sparse_indices, name="sparse_indices")
        if idx.dtype not in (dtypes.int32, dtypes.int64):
            idx = math_ops.cast(idx, dtypes.int64)
        shape = convert_to_tensor(output_shape, dtype=idx.dtype, name="output_shape")
        default = convert_to_tensor(default_value, dtype=values.dtype, name="default_value")
        return SparseToDense(idx, shape, values, default, validate_indices=bool(validate_indices))


def sparse_tensor_to_dense(sp_input, default_value=0, validate_indices=True, name=None):
    """The dense tensor of a SparseTensor (tf.sparse.to_dense)."""
    sp = _check(sp_input)
    return sparse_to_dense(sp.indices, sp.dense_shape, sp.values, default_value, validate_indices,
                           name=name or "SparseToDense")


def sparse_tensor_dense_matmul(sp_a, b, adjoint_a=False, adjoint_b=False, name=None):
    """op(sp_a) @ op(b) for a sparse matrix sp_a and a dense matrix b (tf.sparse.sparse_dense_matmul)."""
    sp = _check(sp_a, "sp_a")
    with name_scope(name or "SparseTensorDenseMatMul"):
        b = convert_to_tensor(b, dtype=sp.dtype, name="b")
        return SparseTensorDenseMatMul(sp.indices, sp.values, sp.dense_shape, b, adjoint_a=bool(adjoint_a),
                                       adjoint_b=bool(adjoint_b))


def sparse_from_dense(tensor, name=None):
    """The SparseTensor of the non-zero (non-empty, for strings) elements of `tensor` (tf.sparse.from_dense)."""
    with name_scope(name or "dense_to_sparse"):
        x = convert_to_tensor(tensor, name="tensor")
        zero = constant(b"" if x.dtype is dtypes.string else 0, dtype=x.dtype)
        indices = math_ops.cast(array_ops.where_indices(math_ops.not_equal(x, zero)), dtypes.int64)
        values = _gather_nd(x, indices)
        shape = math_ops.cast(array_ops.shape(x), dtypes.int64)
        return SparseTensor(indices, values, shape)


def embedding_lookup_sparse(params, sp_ids, sp_weights, partition_strategy="mod", name=None, combiner=None,
                            max_norm=None):
    """Embeddings of the ids of each row of `sp_ids`, combined by "sum", "mean" (the default) or
    "sqrtn", weighted by `sp_weights` when given (tf.nn.embedding_lookup_sparse). Rows are the first
    index of each id, which must be sorted (a SparseTensor's canonical order), as in TF; the result
    has max(row) + 1 rows."""
    from actorflow.graph.ops import nn_ops, segment_ops
    combiner = combiner or "mean"
    if combiner not in ("mean", "sqrtn", "sum"):
        raise ValueError("combiner must be one of 'mean', 'sqrtn' or 'sum'")
    ids = _check(sp_ids, "sp_ids")
    weights = None if sp_weights is None else _check(sp_weights, "sp_weights")
    with name_scope(name or "embedding_lookup_sparse"):
        segment_ids = math_ops.cast(ids.indices[:, 0], dtypes.int32)
        emb = nn_ops.embedding_lookup(params, ids.values, partition_strategy=partition_strategy, max_norm=max_norm)
        if weights is None:
            if combiner == "sum":
                return segment_ops.segment_sum(emb, segment_ids)
            if combiner == "mean":
                return segment_ops.segment_mean(emb, segment_ids)
            counts = segment_ops.segment_sum(array_ops.ones_like(segment_ids, dtype=emb.dtype), segment_ids)
            return math_ops.div_no_nan(segment_ops.segment_sum(emb, segment_ids),
                                       array_ops.expand_dims(math_ops.sqrt(counts), 1))
        w = math_ops.cast(weights.values, emb.dtype)
        emb = emb * array_ops.reshape(w, array_ops.concat([array_ops.shape(w), [1] * (emb.shape.ndims - 1)], 0)) \
            if emb.shape.ndims is not None and emb.shape.ndims > 1 else emb * w
        total = segment_ops.segment_sum(emb, segment_ids)
        if combiner == "sum":
            return total
        wsum = segment_ops.segment_sum(w, segment_ids)
        if combiner == "sqrtn":
            wsum = math_ops.sqrt(segment_ops.segment_sum(w * w, segment_ids))
        return math_ops.div_no_nan(total, array_ops.expand_dims(wsum, 1))      # (an empty row is 0, as in TF)


def safe_embedding_lookup_sparse(embedding_weights, sparse_ids, sparse_weights=None, combiner="mean", default_id=None,
                                 name=None, partition_strategy="div", max_norm=None, allow_fast_lookup=False):
    """embedding_lookup_sparse that tolerates bad input (tf.compat.v1.nn.safe_embedding_lookup_sparse):
    ids < 0 are dropped, and with a "mean" or "sqrtn" combiner so are weights <= 0; a row with no id
    left gets the embedding of `default_id`, or zeros when it is None. `sparse_ids` of rank R > 2 are
    looked up as rows of their first R - 1 dimensions: the result is [d0, ..., d(R-2), dim].
    `allow_fast_lookup` is accepted and changes nothing (TF's fast path computes the same values)."""
    from actorflow.graph.ops.sparse_manip_ops import sparse_fill_empty_rows, sparse_reshape, sparse_retain
    if embedding_weights is None or (isinstance(embedding_weights, list) and not embedding_weights):
        raise ValueError(f"safe_embedding_lookup_sparse: missing embedding_weights {embedding_weights!r}")
    ids = _check(sparse_ids, "sparse_ids")
    weights = None if sparse_weights is None else _check(sparse_weights, "sparse_weights")
    with name_scope(name or "embedding_lookup"):
        original_shape = ids.dense_shape
        rank = ids.dense_shape.shape.dims[0] if ids.dense_shape.shape.dims else None
        rank_t = array_ops.size(original_shape) if rank is None else rank
        outer = array_ops.slice(original_shape, [0], array_ops.reshape(rank_t - 1, [1]))
        ids = sparse_reshape(ids, array_ops.stack([math_ops.reduce_prod(outer),
                                                   array_ops.gather(original_shape, rank_t - 1)]))
        if weights is not None:
            weights = SparseTensor(ids.indices, weights.values, ids.dense_shape)
        valid = math_ops.greater_equal(ids.values, 0)                   # TF's _prune_invalid_ids
        ids = sparse_retain(ids, valid)
        if weights is not None:
            weights = sparse_retain(weights, valid)
        if combiner != "sum" and weights is not None:                    # _prune_invalid_weights
            positive = math_ops.greater(weights.values, 0)
            ids, weights = sparse_retain(ids, positive), sparse_retain(weights, positive)
        ids, is_row_empty = sparse_fill_empty_rows(ids, default_id or 0)
        if weights is not None:
            weights, _ = sparse_fill_empty_rows(weights, 1.0)
        result = embedding_lookup_sparse(embedding_weights, ids, weights, combiner=combiner,
                                         partition_strategy=partition_strategy, max_norm=max_norm)
        if default_id is None:
            empty = array_ops.tile(array_ops.reshape(is_row_empty, [-1, 1]),
                                   array_ops.stack([1, array_ops.shape(result)[1]]))
            result = math_ops.where(empty, array_ops.zeros_like(result), result)
        final = array_ops.reshape(result, array_ops.concat([
            array_ops.slice(math_ops.cast(original_shape, dtypes.int32), [0], array_ops.reshape(rank_t - 1, [1])),
            array_ops.slice(array_ops.shape(result), [1], [-1])], 0))
        if rank is not None:
            final.set_shape(TensorShape([None] * (rank - 1)).concatenate(result.shape[1:]))
        return final


def convert_to_tensor_or_sparse_tensor(value, dtype=None, name=None):
    """A SparseTensor for a SparseTensor or SparseTensorValue, else convert_to_tensor(value)
    (tf.compat.v1.convert_to_tensor_or_sparse_tensor); a dtype other than the SparseTensor's is a
    ValueError, as in TF."""
    from actorflow.graph.sparse_tensor import SparseTensorValue
    if isinstance(value, (SparseTensor, SparseTensorValue)):
        sp = _check(value, "value")
        if dtype is not None and dtypes.as_dtype(dtype) is not dtypes.as_dtype(sp.dtype):
            raise ValueError(f"convert_to_tensor_or_sparse_tensor: the SparseTensor's dtype {sp.dtype.name} is not "
                             f"the requested {dtypes.as_dtype(dtype).name}")
        return sp
    return convert_to_tensor(value, dtype=dtype, name=name)
