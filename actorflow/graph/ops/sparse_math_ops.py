"""Arithmetic on SparseTensors, TF 1.x's names and semantics with TF's gradients: sparse_add
(SparseAdd, SparseTensorDenseAdd), sparse_maximum / sparse_minimum, sparse_softmax, sparse_reduce_sum
/ sparse_reduce_max and their `_sparse` forms, the sparse segment reductions (embedding bags:
SparseSegmentSum/Mean/SqrtN[WithNumSegments]), sparse_matmul (a dense MatMul with sparsity hints)
and sparse.bincount (DenseCountSparseOutput, SparseCountSparseOutput).
A SparseTensor enters an op as its three tensors (indices, values, dense_shape)."""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.constant import constant
from actorflow.graph.ops.infer import constant_value
from actorflow.graph.ops.sparse_common import check_sparse, make_sparse, sparse_outputs
from actorflow.graph.sparse_tensor import SparseTensor, _check, is_sparse
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["sparse_add", "sparse_maximum", "sparse_minimum", "sparse_softmax", "sparse_reduce_sum",
           "sparse_reduce_sum_sparse", "sparse_reduce_max", "sparse_reduce_max_sparse", "sparse_segment_sum",
           "sparse_segment_mean", "sparse_segment_sqrt_n", "sparse_matmul", "sparse_bincount"]


def _same_values(a, b, what):
    if a.dtype is not b.dtype:
        raise InferenceError(f"{what}: the operands' values must have one dtype, got {a.dtype.name} and {b.dtype.name}")


# ---------------------------------------------------------------------------------------------
# SparseAdd and SparseTensorDenseAdd

def _infer_sparse_add(inputs, attrs):
    a_i, a_v, a_s, b_i, b_v, b_s, thresh = inputs
    ra, rb = check_sparse(a_i, a_v, a_s, "a"), check_sparse(b_i, b_v, b_s, "b")
    _same_values(a_v, b_v, "SparseAdd")
    if ra is not None and rb is not None and ra != rb:
        raise InferenceError(f"operands do not have the same rank: {ra} and {rb}")
    if thresh.shape.ndims not in (None, 0):
        raise InferenceError(f"thresh must be a scalar, got shape {thresh.shape}")
    return sparse_outputs(a_v.dtype, ra if ra is not None else rb)


SparseAdd = define_op("SparseAdd", _infer_sparse_add)
SparseAddGrad = define_op("SparseAddGrad", lambda inputs, attrs: [(inputs[0].dtype, TensorShape([None]))] * 2)


@SparseAdd.gradient
def _sparse_add_grad(op, *grads):
    a_grad, b_grad = SparseAddGrad(grads[1], op.inputs[0], op.inputs[3], op.outputs[0])
    return [None, a_grad, None, None, b_grad, None, None]


def _infer_sparse_dense_add(inputs, attrs):
    a_i, a_v, a_s, b = inputs
    rank = check_sparse(a_i, a_v, a_s, "a")
    _same_values(a_v, b, "SparseTensorDenseAdd")
    if rank is not None and b.shape.ndims is not None and rank != b.shape.ndims:
        raise InferenceError(f"a has rank {rank} but b has shape {b.shape}")
    return [(b.dtype, b.shape)]


SparseTensorDenseAdd = define_op("SparseTensorDenseAdd", _infer_sparse_dense_add)


@SparseTensorDenseAdd.gradient
def _sparse_dense_add_grad(op, grad):
    from actorflow.graph.ops.scatter_nd_ops import gather_nd
    return [None, gather_nd(grad, op.inputs[0]), None, grad]


def sparse_add(a, b, threshold=None, thresh=None, name=None):
    """a + b where one or both are SparseTensors (tf.compat.v1.sparse_add / tf.sparse.add): two
    SparseTensors give a SparseTensor in canonical order, where a sum of two entries whose magnitude
    is below `threshold` (`thresh`, TF 1.x's name) is dropped; a SparseTensor and a dense tensor
    give a dense tensor. Both operands must have the same dense_shape (no broadcasting). TF assumes
    both in canonical order and merges them as sorted lists (out of order, its result is garbage);
    actorflow's result is the same for canonical input and the true sum for any order."""
    thresh = threshold if threshold is not None else (thresh if thresh is not None else 0)
    if not (is_sparse(a) or is_sparse(b)):
        raise TypeError("sparse_add: at least one of a and b must be a SparseTensor")
    with name_scope(name or "SparseAdd"):
        if is_sparse(a) and is_sparse(b):
            a, b = _check(a, "a"), _check(b, "b")
            t = convert_to_tensor(thresh, dtype=a.dtype, name="threshold")
            if not a.shape.is_compatible_with(b.shape):
                raise ValueError(f"sparse_add: the operands' shapes {a.shape} and {b.shape} are incompatible")
            i, v, s = SparseAdd(a.indices, a.values, a.dense_shape, b.indices, b.values, b.dense_shape, t)
            return make_sparse(i, v, s, a.shape.merge_with(b.shape))
        sp, dense = (a, b) if is_sparse(a) else (b, a)
        sp = _check(sp)
        dense = convert_to_tensor(dense, dtype=sp.dtype, name="b")
        return SparseTensorDenseAdd(sp.indices, sp.values, sp.dense_shape, dense)


# ---------------------------------------------------------------------------------------------
# SparseSparseMaximum / SparseSparseMinimum (TF has no gradient for them)

def _infer_binary(inputs, attrs):
    a_i, a_v, a_s, b_i, b_v, b_s = inputs
    ra, rb = check_sparse(a_i, a_v, a_s, "a"), check_sparse(b_i, b_v, b_s, "b")
    _same_values(a_v, b_v, "sparse maximum/minimum")
    if ra is not None and rb is not None and ra != rb:
        raise InferenceError(f"operands do not have the same rank: {ra} and {rb}")
    return sparse_outputs(a_v.dtype, ra if ra is not None else rb)[:2]


SparseSparseMaximum = define_op("SparseSparseMaximum", _infer_binary)
SparseSparseMinimum = define_op("SparseSparseMinimum", _infer_binary)


def _binary(op_def, sp_a, sp_b, name):
    a, b = _check(sp_a, "sp_a"), _check(sp_b, "sp_b")
    with name_scope(name or op_def.type):
        i, v = op_def(a.indices, a.values, a.dense_shape, b.indices, b.values, b.dense_shape)
        return SparseTensor(i, v, a.dense_shape)


def sparse_maximum(sp_a, sp_b, name=None):
    """The element-wise maximum of two SparseTensors of one dense_shape (tf.sparse.maximum); an index
    present in only one of them is compared with 0. As with sparse_add, TF's result is defined only for
    inputs in canonical order; actorflow's equals it there and is right for any order."""
    return _binary(SparseSparseMaximum, sp_a, sp_b, name)


def sparse_minimum(sp_a, sp_b, name=None):
    """The element-wise minimum of two SparseTensors (tf.sparse.minimum); see sparse_maximum."""
    return _binary(SparseSparseMinimum, sp_a, sp_b, name)


# ---------------------------------------------------------------------------------------------
# SparseSoftmax

def _infer_sparse_softmax(inputs, attrs):
    i, v, s = inputs
    rank = check_sparse(i, v, s, "sp_input")
    if rank is not None and rank < 2:
        raise InferenceError(f"sp_input must be at least a matrix, got rank {rank}")
    if not v.dtype.is_floating:
        raise InferenceError(f"sp_input's values must be floating point, got {v.dtype.name}")
    return [(v.dtype, TensorShape([None]))]


SparseSoftmax = define_op("SparseSoftmax", _infer_sparse_softmax)


@SparseSoftmax.gradient
def _sparse_softmax_grad(op, grad):
    """TF's _SparseSoftmaxGrad: (grad - sum over the row of grad * softmax) * softmax."""
    from actorflow.graph.ops.scatter_nd_ops import gather_nd
    indices, shape = op.inputs[0], op.inputs[2]
    out = op.outputs[0]
    summed = SparseReduceSum(indices, out * grad, shape, constant(-1, dtypes.int32), keep_dims=True)
    row = array_ops.concat([indices[:, :-1], array_ops.zeros_like(indices[:, -1:])], 1)
    return [None, (grad - gather_nd(summed, row)) * out, None]


def sparse_softmax(sp_input, name=None):
    """The softmax of each innermost row of a SparseTensor over its entries only (tf.sparse.softmax):
    the implicit zeros take no part. Values, indices and dense_shape keep the input's order (TF
    assumes canonical order and returns the values sorted, which differs only for unordered input)."""
    sp = _check(sp_input)
    with name_scope(name or "SparseSoftmax"):
        return SparseTensor(sp.indices, SparseSoftmax(sp.indices, sp.values, sp.dense_shape), sp.dense_shape)


# ---------------------------------------------------------------------------------------------
# SparseReduceSum / SparseReduceMax and their Sparse forms

def _reduced(inputs, attrs):
    """(values dtype, static output shape or None) of a sparse reduction."""
    i, v, s, axes = inputs
    rank = check_sparse(i, v, s, "input")
    keep = bool(attrs.get("keep_dims"))
    dims = constant_value(s)
    ax = constant_value(axes)
    if dims is None or ax is None:
        if ax is not None and rank is not None and not keep:
            return v.dtype, TensorShape([None] * (rank - len(set(int(a) % rank for a in np.reshape(ax, -1)))))
        return v.dtype, TensorShape([None] * rank if (keep and rank is not None) else None)
    dims = [int(d) for d in np.reshape(dims, -1)]
    red = set()
    for a in np.reshape(ax, -1):
        if not -len(dims) <= int(a) < len(dims):
            raise InferenceError(f"invalid reduction axis {int(a)} for a SparseTensor of rank {len(dims)}")
        red.add(int(a) % len(dims))
    out = [1 if d in red else n for d, n in enumerate(dims)] if keep else \
        [n for d, n in enumerate(dims) if d not in red]
    return v.dtype, TensorShape(out)


def _infer_reduce(inputs, attrs):
    return [_reduced(inputs, attrs)]


def _infer_reduce_sparse(inputs, attrs):
    dtype, shape = _reduced(inputs, attrs)
    return sparse_outputs(dtype, shape.ndims)


SparseReduceSum = define_op("SparseReduceSum", _infer_reduce)
SparseReduceMax = define_op("SparseReduceMax", _infer_reduce)
SparseReduceSumSparse = define_op("SparseReduceSumSparse", _infer_reduce_sparse)
SparseReduceMaxSparse = define_op("SparseReduceMaxSparse", _infer_reduce_sparse)


@SparseReduceSum.gradient
def _sparse_reduce_sum_grad(op, out_grad):
    """TF's _SparseReduceSumGrad: the output gradient at each entry's index with the reduced axes 0."""
    from actorflow.graph.ops.scatter_nd_ops import gather_nd
    indices, shape, axes = op.inputs[0], op.inputs[2], op.inputs[3]
    rank = array_ops.size(shape)
    axes = math_ops.floormod(array_ops.reshape(math_ops.cast(axes, dtypes.int32), [-1]), rank)
    reduced = math_ops.reduce_any(math_ops.equal(array_ops.expand_dims(array_ops.range(rank), 1),
                                                 array_ops.expand_dims(axes, 0)), axis=1)
    kept_shape = math_ops.where_v2(reduced, array_ops.ones_like(shape), shape)
    keep = math_ops.cast(math_ops.logical_not(reduced), dtypes.int64)
    return [None, gather_nd(array_ops.reshape(out_grad, kept_shape), indices * keep), None, None]


def _axes(sp, axis, reduction_axes):
    axis = axis if axis is not None else reduction_axes
    if axis is None:
        rank = sp.shape.ndims
        return array_ops.range(rank) if rank is not None else array_ops.range(array_ops.size(sp.dense_shape))
    return convert_to_tensor(axis, dtype=dtypes.int32, name="reduction_axes")


def _reduce(op_def, sp_input, axis, keepdims, reduction_axes, keep_dims, name):
    sp = _check(sp_input)
    keep = bool(keepdims if keepdims is not None else keep_dims)
    with name_scope(name or op_def.type):
        axes = _axes(sp, axis, reduction_axes)
        out = op_def(sp.indices, sp.values, sp.dense_shape, axes, keep_dims=keep)
        return SparseTensor(*out) if isinstance(out, tuple) else out


def sparse_reduce_sum(sp_input, axis=None, keepdims=None, reduction_axes=None, keep_dims=None, name=None):
    """The sum of a SparseTensor's values over `axis` (all axes by default), dense
    (tf.compat.v1.sparse_reduce_sum / tf.sparse.reduce_sum; op SparseReduceSum, with TF's gradient)."""
    return _reduce(SparseReduceSum, sp_input, axis, keepdims, reduction_axes, keep_dims, name)


def sparse_reduce_max(sp_input, axis=None, keepdims=None, reduction_axes=None, keep_dims=None, name=None):
    """The maximum of a SparseTensor's values over `axis`, dense (tf.sparse.reduce_max): the implicit
    zeros take no part, and a group with no values is 0, as in TF. TF has no gradient for it."""
    return _reduce(SparseReduceMax, sp_input, axis, keepdims, reduction_axes, keep_dims, name)


def sparse_reduce_sum_sparse(sp_input, axis=None, keepdims=None, reduction_axes=None, keep_dims=None, name=None):
    """sparse_reduce_sum as a SparseTensor of the groups that have values, in canonical order
    (tf.sparse.reduce_sum_sparse; TF has no gradient for it)."""
    return _reduce(SparseReduceSumSparse, sp_input, axis, keepdims, reduction_axes, keep_dims, name)


def sparse_reduce_max_sparse(sp_input, axis=None, keepdims=None, reduction_axes=None, keep_dims=None, name=None):
    """sparse_reduce_max as a SparseTensor (tf.sparse.reduce_max_sparse)."""
    return _reduce(SparseReduceMaxSparse, sp_input, axis, keepdims, reduction_axes, keep_dims, name)


# ---------------------------------------------------------------------------------------------
# Sparse segment reductions: data[indices] reduced by sorted segment_ids

def _infer_sparse_segment(inputs, attrs):
    data, indices, ids = inputs[:3]
    for t, what in ((indices, "indices"), (ids, "segment_ids")):
        if t.dtype not in (dtypes.int32, dtypes.int64):
            raise InferenceError(f"{what} must be int32 or int64, got {t.dtype.name}")
        if t.shape.ndims not in (None, 1):
            raise InferenceError(f"{what} must be a vector, got shape {t.shape}")
    if not (data.dtype.is_floating or data.dtype.is_integer):
        raise InferenceError(f"data must be numeric, got {data.dtype.name}")
    n, m = indices.shape.dims[0] if indices.shape.dims else None, ids.shape.dims[0] if ids.shape.dims else None
    if n is not None and m is not None and n != m:
        raise InferenceError(f"indices ({n}) and segment_ids ({m}) must have one length")
    if data.shape.dims is None:
        return [(data.dtype, TensorShape(None))]
    if not data.shape.dims:
        raise InferenceError("data must be at least 1-D, got a scalar")
    rows = None
    if len(inputs) == 4:
        v = constant_value(inputs[3])
        rows = None if v is None else int(np.reshape(v, ()))
    return [(data.dtype, TensorShape([rows] + list(data.shape.dims[1:])))]


def _infer_segment_grad(inputs, attrs):
    grad, _, _, dim0 = inputs
    v = constant_value(dim0)
    rows = None if v is None else int(np.reshape(v, ()))
    return [(grad.dtype, TensorShape([rows] + list(grad.shape.dims[1:])) if grad.shape.dims else TensorShape(None))]


def _segment_family(base):
    op = define_op(base, _infer_sparse_segment)
    op_n = define_op(base + "WithNumSegments", _infer_sparse_segment)
    grad_op = define_op(base + "Grad", _infer_segment_grad)

    def grad_fn(o, grad):
        if not o.inputs[0].dtype.is_floating:
            return [None] * len(o.inputs)
        dim0 = array_ops.shape(o.inputs[0], out_type=dtypes.int32)[0]
        return [grad_op(grad, o.inputs[1], o.inputs[2], dim0)] + [None] * (len(o.inputs) - 1)
    op.gradient(grad_fn)
    op_n.gradient(grad_fn)
    return op, op_n


SparseSegmentSum, SparseSegmentSumWithNumSegments = _segment_family("SparseSegmentSum")
SparseSegmentMean, SparseSegmentMeanWithNumSegments = _segment_family("SparseSegmentMean")
SparseSegmentSqrtN, SparseSegmentSqrtNWithNumSegments = _segment_family("SparseSegmentSqrtN")


def _segment(ops, data, indices, segment_ids, name, num_segments):
    op, op_n = ops
    with name_scope(name or op.type):
        data = convert_to_tensor(data, name="data")
        idx = convert_to_tensor(indices, name="indices")
        ids = convert_to_tensor(segment_ids, name="segment_ids")
        idx = idx if idx.dtype in (dtypes.int32, dtypes.int64) else math_ops.cast(idx, dtypes.int32)
        ids = ids if ids.dtype in (dtypes.int32, dtypes.int64) else math_ops.cast(ids, dtypes.int32)
        if num_segments is None:
            return op(data, idx, ids)
        n = convert_to_tensor(num_segments, name="num_segments")
        n = n if n.dtype in (dtypes.int32, dtypes.int64) else math_ops.cast(n, dtypes.int32)
        return op_n(data, idx, ids, n)


def sparse_segment_sum(data, indices, segment_ids, name=None, num_segments=None):
    """out[s] = sum of data[indices[i]] over the i with segment_ids[i] == s (tf.sparse.segment_sum);
    segment_ids sorted; max(segment_ids) + 1 rows, or num_segments; empty segments 0."""
    return _segment((SparseSegmentSum, SparseSegmentSumWithNumSegments), data, indices, segment_ids, name,
                    num_segments)


def sparse_segment_mean(data, indices, segment_ids, name=None, num_segments=None):
    """sparse_segment_sum divided by each segment's row count (tf.sparse.segment_mean)."""
    return _segment((SparseSegmentMean, SparseSegmentMeanWithNumSegments), data, indices, segment_ids, name,
                    num_segments)


def sparse_segment_sqrt_n(data, indices, segment_ids, name=None, num_segments=None):
    """sparse_segment_sum divided by the square root of each segment's row count
    (tf.sparse.segment_sqrt_n)."""
    return _segment((SparseSegmentSqrtN, SparseSegmentSqrtNWithNumSegments), data, indices, segment_ids, name,
                    num_segments)


# ---------------------------------------------------------------------------------------------
# SparseMatMul: MatMul's math; a_is_sparse / b_is_sparse only pick TF's algorithm

def _infer_sparse_matmul(inputs, attrs):
    a, b = inputs
    for t, what in ((a, "a"), (b, "b")):
        if t.dtype not in (dtypes.float32,):
            raise InferenceError(f"{what} must be float32 (TF's SparseMatMul also takes bfloat16), got {t.dtype.name}")
        if t.shape.ndims not in (None, 2):
            raise InferenceError(f"{what} must be a matrix, got shape {t.shape}")
    ad = a.shape.dims or [None, None]
    bd = b.shape.dims or [None, None]
    m, k1 = (ad[1], ad[0]) if attrs.get("transpose_a") else (ad[0], ad[1])
    k2, n = (bd[1], bd[0]) if attrs.get("transpose_b") else (bd[0], bd[1])
    if k1 is not None and k2 is not None and k1 != k2:
        raise InferenceError(f"matrix size-incompatible: the inner dimensions are {k1} and {k2}")
    return [(dtypes.float32, TensorShape([m, n]))]


SparseMatMul = define_op("SparseMatMul", _infer_sparse_matmul)


@SparseMatMul.gradient
def _sparse_matmul_grad(op, grad):
    """TF's _SparseMatMulGrad: the products of the gradient with the other operand, keeping the
    operands' sparsity hints."""
    ta, tb = bool(op.attrs.get("transpose_a")), bool(op.attrs.get("transpose_b"))
    a, b = op.inputs
    hint = {id(a): bool(op.attrs.get("a_is_sparse")), id(b): bool(op.attrs.get("b_is_sparse")), id(grad): False}

    def mm(x, y, transpose_a=False, transpose_b=False):
        if transpose_b:
            y, transpose_b = array_ops.transpose(y), False
        return SparseMatMul(x, y, transpose_a=transpose_a, transpose_b=False, a_is_sparse=hint.get(id(x), False),
                            b_is_sparse=hint.get(id(y), False))
    if not ta and not tb:
        return [mm(grad, b, transpose_b=True), mm(a, grad, transpose_a=True)]
    if not ta and tb:
        return [mm(grad, b), mm(grad, a, transpose_a=True)]
    if ta and not tb:
        return [mm(b, grad, transpose_b=True), mm(a, grad)]
    return [mm(b, grad, transpose_a=True, transpose_b=True), mm(grad, a, transpose_a=True, transpose_b=True)]


def sparse_matmul(a, b, transpose_a=False, transpose_b=False, a_is_sparse=False, b_is_sparse=False, name=None):
    """a @ b for float32 matrices (tf.compat.v1.sparse_matmul): the same product as matmul; TF
    uses the sparsity hints to pick a kernel for operands that are mostly zeros, actorflow's
    CPU kernel is the dense product whatever they say."""
    with name_scope(name or "SparseMatMul"):
        a = convert_to_tensor(a, name="a")
        b = convert_to_tensor(b, name="b")
        return SparseMatMul(a, b, transpose_a=bool(transpose_a), transpose_b=bool(transpose_b),
                            a_is_sparse=bool(a_is_sparse), b_is_sparse=bool(b_is_sparse))


# ---------------------------------------------------------------------------------------------
# tf.sparse.bincount: DenseCountSparseOutput / SparseCountSparseOutput

def _infer_count(sparse_input):
    def infer(inputs, attrs):
        values, weights = (inputs[1], inputs[3]) if sparse_input else inputs
        if not values.dtype.is_integer:
            raise InferenceError(f"values must be integers, got {values.dtype.name}")
        rank = (check_sparse(inputs[0], inputs[1], inputs[2], "values") if sparse_input else values.shape.ndims)
        if rank is not None and rank not in (1, 2):
            raise InferenceError(f"values must be a vector or a matrix, got rank {rank}")
        return sparse_outputs(weights.dtype, rank)
    return infer


DenseCountSparseOutput = define_op("DenseCountSparseOutput", _infer_count(False))
SparseCountSparseOutput = define_op("SparseCountSparseOutput", _infer_count(True))


def sparse_bincount(values, weights=None, axis=0, minlength=None, maxlength=None, binary_output=False, name=None):
    """How often each value occurs in `values` (a tensor or SparseTensor of non-negative integers),
    as a SparseTensor (tf.sparse.bincount): over all values with axis 0, per row of a matrix with
    axis -1; summing `weights` instead of counting when given, 1 for every value present with
    `binary_output`. Its dense_shape's last dimension is `maxlength` when given (larger values are
    dropped), else max(max value + 1, minlength). The counts have the weights' dtype, or the values'."""
    if weights is not None and binary_output:
        raise ValueError("sparse.bincount: binary_output and weights are mutually exclusive")
    axis = 0 if axis is None else axis
    if axis not in (0, -1):
        raise ValueError(f"sparse.bincount: axis must be 0 or -1, got {axis}")
    attrs = {"minlength": -1 if minlength is None else int(minlength),
             "maxlength": -1 if maxlength is None else int(maxlength), "binary_output": bool(binary_output)}
    with name_scope(name or "count"):
        if is_sparse(values):
            sp = _check(values, "values")
            w = None if weights is None else _check(weights, "weights").values
            if axis == 0:
                vals = sp.values
                w = array_ops.zeros([0], dtype=vals.dtype) if w is None else w
                out = DenseCountSparseOutput(vals, w, **attrs)
            else:
                w = array_ops.zeros([0], dtype=sp.dtype) if w is None else w
                out = SparseCountSparseOutput(sp.indices, sp.values, sp.dense_shape, w, **attrs)
        else:
            vals = convert_to_tensor(values, name="values")
            w = None if weights is None else convert_to_tensor(weights, name="weights")
            if axis == 0:
                vals = array_ops.reshape(vals, [-1])
                w = None if w is None else array_ops.reshape(w, [-1])
            w = array_ops.zeros([0], dtype=vals.dtype) if w is None else w
            out = DenseCountSparseOutput(vals, w, **attrs)
        return SparseTensor(*out)


# ---------------------------------------------------------------------------------------------
# SparseDenseCwiseMul / Div / Add: SparseTensor * dense, SparseTensor / dense

def _infer_cwise(inputs, attrs):
    i, v, s, y = inputs
    rank = check_sparse(i, v, s, "sp")
    _same_values(v, y, "a SparseTensor and a dense tensor")
    if rank is not None and y.shape.ndims is not None and y.shape.ndims > rank:
        raise InferenceError(f"the dense operand of shape {y.shape} has a higher rank than the SparseTensor ({rank}); "
                             f"only the dense side broadcasts")
    return [(v.dtype, TensorShape([i.shape.dims[0] if i.shape.dims else None]))]


SparseDenseCwiseMul = define_op("SparseDenseCwiseMul", _infer_cwise)
SparseDenseCwiseDiv = define_op("SparseDenseCwiseDiv", _infer_cwise)
SparseDenseCwiseAdd = define_op("SparseDenseCwiseAdd", _infer_cwise)     # TF has no gradient for it


def _cwise_mul_or_div_grad(op, grad, is_mul):
    """TF's _SparseDenseCwiseMulOrDivGrad: the dense operand read at each entry's index (scaled to
    its broadcast shape); its gradient summed back there."""
    from actorflow.graph.ops.scatter_nd_ops import gather_nd
    x_indices, x_values, x_shape, y = op.inputs
    y_shape = math_ops.cast(array_ops.shape(y), dtypes.int64)
    added = array_ops.expand_dims(array_ops.size(x_shape) - array_ops.size(y_shape), 0)
    augmented = array_ops.concat([array_ops.ones(added, dtype=dtypes.int64), y_shape], 0)
    scaled = array_ops.slice(x_indices // (x_shape // augmented), array_ops.concat([[0], added], 0), [-1, -1])
    dense_vals = gather_nd(y, scaled)
    if is_mul:
        dx, dy_val = grad * dense_vals, grad * x_values
    else:
        dx, dy_val = grad / dense_vals, grad * (-x_values / math_ops.square(dense_vals))
    dy = SparseTensorDenseAdd(scaled, dy_val, y_shape, array_ops.zeros_like(y))
    return [None, dx, None, dy]


SparseDenseCwiseMul.gradient(lambda op, grad: _cwise_mul_or_div_grad(op, grad, True))
SparseDenseCwiseDiv.gradient(lambda op, grad: _cwise_mul_or_div_grad(op, grad, False))


def sparse_dense_cwise(op_def, sp_x, y, name=None):
    """SparseTensor(sp_x.indices, op(sp_x.values, y broadcast to sp_x's dense_shape at its indices),
    sp_x.dense_shape): TF's SparseTensor * dense and SparseTensor / dense (only y broadcasts)."""
    sp = _check(sp_x, "sp_x")
    with name_scope(name or op_def.type):
        y = convert_to_tensor(y, dtype=sp.dtype, name="y")
        return SparseTensor(sp.indices, op_def(sp.indices, sp.values, sp.dense_shape, y), sp.dense_shape)


def sparse_dense_truediv(sp_x, y, name=None):
    """SparseTensor / dense as Python 3's `/` (TF's _sparse_dense_truediv): integers become floats
    first (int8/16/uint8 float32, int32/int64 float64)."""
    sp = _check(sp_x, "sp_x")
    with name_scope(name or "truediv"):
        y = convert_to_tensor(y, dtype=sp.dtype, name="y")
        to = {dtypes.int8: dtypes.float32, dtypes.uint8: dtypes.float32, dtypes.int16: dtypes.float32,
              dtypes.int32: dtypes.float64, dtypes.int64: dtypes.float64}.get(sp.dtype)
        values = sp.values
        if to is not None:
            values, y = math_ops.cast(values, to), math_ops.cast(y, to)
        return SparseTensor(sp.indices, SparseDenseCwiseDiv(sp.indices, values, sp.dense_shape, y), sp.dense_shape)
