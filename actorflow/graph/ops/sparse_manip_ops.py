"""Reshaping, reordering and combining SparseTensors, TF 1.x's names and semantics, with TF's
gradients to the values: sparse_reorder, sparse_reshape, sparse_slice, sparse_concat, sparse_split,
sparse_transpose, sparse_retain, sparse_reset_shape, sparse_fill_empty_rows, sparse.expand_dims,
sparse.eye, sparse_mask (IndexedSlices), sparse_merge, sparse_to_indicator, sparse.cross and
cross_hashed (SparseCrossV2, SparseCross), and the SparseTensor
(de)serialization of tf.io (SerializeSparse, SerializeManySparse, DeserializeSparse,
DeserializeManySparse; TF's TensorProto bytes). A SparseTensor enters an op as its three tensors."""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.indexed_slices import IndexedSlices
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.constant import constant, identity
from actorflow.graph.ops.infer import constant_value
from actorflow.graph.ops.sparse_common import check_sparse, make_sparse, rank_of, sparse_outputs, static_dims
from actorflow.graph.sparse_tensor import SparseTensor, _check
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["sparse_reorder", "sparse_reshape", "sparse_slice", "sparse_concat", "sparse_split", "sparse_transpose",
           "sparse_retain", "sparse_reset_shape", "sparse_fill_empty_rows", "sparse_expand_dims", "sparse_eye",
           "sparse_mask", "sparse_merge", "sparse_to_indicator", "serialize_sparse", "serialize_many_sparse",
           "deserialize_sparse", "deserialize_many_sparse", "sparse_cross", "sparse_cross_hashed"]


def _int_vector(x, name):
    t = convert_to_tensor(x, name=name)
    return t if t.dtype is dtypes.int64 else math_ops.cast(t, dtypes.int64)


# ---------------------------------------------------------------------------------------------
# SparseReorder

def _infer_reorder(inputs, attrs):
    i, v, s = inputs
    return sparse_outputs(v.dtype, check_sparse(i, v, s))[:2]


SparseReorder = define_op("SparseReorder", _infer_reorder)


@SparseReorder.gradient
def _sparse_reorder_grad(op, _, values_grad):
    """TF's _SparseReorderGrad: the output gradient read back through the inverse permutation,
    which a SparseReorder of the entries' positions computes."""
    indices, shape = op.inputs[0], op.inputs[2]
    positions = array_ops.range(array_ops.shape(indices, out_type=dtypes.int64)[0], dtype=dtypes.int64)
    _, perm = SparseReorder(indices, positions, shape)
    return [None, array_ops.gather(values_grad, array_ops.invert_permutation(perm)), None]


def sparse_reorder(sp_input, name=None):
    """The SparseTensor with its entries in canonical (row-major) order (tf.sparse.reorder)."""
    sp = _check(sp_input)
    with name_scope(name or "SparseReorder"):
        i, v = SparseReorder(sp.indices, sp.values, sp.dense_shape)
        return make_sparse(i, v, sp.dense_shape, sp.shape)


# ---------------------------------------------------------------------------------------------
# SparseReshape (indices only: the values pass through, so does their gradient)

def _static_reshape(old, new):
    """The reshaped dense_shape when it is known at build time (with one -1 resolved), else None."""
    if new is None:
        return None
    if -1 not in new:
        return TensorShape(new)
    if old is None or any(d is None for d in old):
        return TensorShape([None if d == -1 else d for d in new])
    known = int(np.prod([d for d in new if d != -1]))
    total = int(np.prod(old))
    if known == 0 or total % known:
        raise InferenceError(f"cannot reshape a SparseTensor with {total} dense values into {new}")
    return TensorShape([total // known if d == -1 else d for d in new])


def _infer_reshape(inputs, attrs):
    i, s, new = inputs
    if new.shape.ndims not in (None, 1):
        raise InferenceError(f"new_shape must be a vector, got shape {new.shape}")
    rank = new.shape.dims[0] if new.shape.dims else None
    return [(dtypes.int64, TensorShape([i.shape.dims[0] if i.shape.dims else None, rank])),
            (dtypes.int64, TensorShape([rank]))]


SparseReshape = define_op("SparseReshape", _infer_reshape)


def sparse_reshape(sp_input, shape, name=None):
    """The SparseTensor of the same dense values in a new dense shape, row-major as tf.reshape; one
    dimension may be -1 (tf.sparse.reshape). A mismatch of sizes is an error naming the op."""
    sp = _check(sp_input)
    with name_scope(name or "SparseReshape"):
        new = _int_vector(shape, "shape")
        v = constant_value(new)
        old = sp.shape.as_list() if sp.shape.ndims is not None else None
        static = _static_reshape(old, None if v is None else [int(d) for d in np.reshape(v, -1)])
        if static is not None and old is not None and None not in old and static.is_fully_defined() \
                and int(np.prod(old)) != int(np.prod(static.as_list())):
            raise ValueError(f"sparse_reshape: cannot reshape a SparseTensor of shape {old} ({int(np.prod(old))} "
                             f"elements) into {static.as_list()}")
        i, s = SparseReshape(sp.indices, sp.dense_shape, new)
        return make_sparse(i, sp.values, s, static)


# ---------------------------------------------------------------------------------------------
# SparseSlice

def _infer_slice(inputs, attrs):
    i, v, s, start, size = inputs
    return sparse_outputs(v.dtype, check_sparse(i, v, s))


SparseSlice = define_op("SparseSlice", _infer_slice)
SparseSliceGrad = define_op("SparseSliceGrad", lambda inputs, attrs: [(inputs[0].dtype, TensorShape([None]))])


@SparseSlice.gradient
def _sparse_slice_grad(op, *grads):
    return [None, SparseSliceGrad(grads[1], op.inputs[0], op.inputs[3], op.outputs[0]), None, None, None]


def sparse_slice(sp_input, start, size, name=None):
    """The entries of a SparseTensor within [start, start + size), shifted by -start; the dense_shape
    is cut at the input's (tf.sparse.slice)."""
    sp = _check(sp_input)
    with name_scope(name or "SparseSlice"):
        i, v, s = SparseSlice(sp.indices, sp.values, sp.dense_shape, _int_vector(start, "start"),
                              _int_vector(size, "size"))
        return SparseTensor(i, v, s)


# ---------------------------------------------------------------------------------------------
# SparseConcat (TF has no gradient: NotDifferentiable)

def _infer_concat(inputs, attrs):
    n = int(attrs["N"])
    ranks = {check_sparse(inputs[k], inputs[n + k], inputs[2 * n + k], f"sp_inputs[{k}]") for k in range(n)}
    vdts = {inputs[n + k].dtype for k in range(n)}
    if len(vdts) > 1:
        raise InferenceError(f"the inputs' values must have one dtype, got {sorted(d.name for d in vdts)}")
    ranks.discard(None)
    if len(ranks) > 1:
        raise InferenceError(f"the inputs must have one rank, got ranks {sorted(ranks)}")
    rank = ranks.pop() if ranks else None
    dim = int(attrs["concat_dim"])
    if rank is not None and not -rank <= dim < rank:
        raise InferenceError(f"concat_dim {dim} is out of range for rank {rank}")
    return sparse_outputs(inputs[n].dtype, rank)


SparseConcat = define_op("SparseConcat", _infer_concat)
SparseConcat.gradient(lambda op, *grads: [None] * len(op.inputs))


def sparse_concat(axis, sp_inputs, name=None, expand_nonconcat_dim=False, concat_dim=None,
                  expand_nonconcat_dims=None):
    """The SparseTensors joined along `axis`, in canonical order (tf.compat.v1.sparse_concat): the
    other dimensions must match, unless `expand_nonconcat_dim`, which grows each to the largest.
    TF registers no gradient for it (NotDifferentiable): the values get none."""
    axis = concat_dim if axis is None else axis
    expand = expand_nonconcat_dims if expand_nonconcat_dims is not None else expand_nonconcat_dim
    sps = [_check(s, "sp_inputs") for s in sp_inputs]
    if not sps:
        raise ValueError("sparse_concat needs at least one SparseTensor")
    with name_scope(name or "SparseConcat"):
        shapes = [s.dense_shape for s in sps]
        static = [s.shape for s in sps]
        if expand:
            top = shapes[0]
            for s in shapes[1:]:
                top = math_ops.maximum(top, s)
            rank = rank_of(sps[0].indices, sps[0].dense_shape)
            if rank is None:
                raise ValueError("sparse_concat: expand_nonconcat_dim needs inputs of known rank")
            d = int(axis) % rank
            shapes = [array_ops.concat([top[:d], s[d:d + 1], top[d + 1:]], 0) for s in shapes]
            static = [TensorShape(None)]
        i, v, s = SparseConcat(*[x.indices for x in sps], *[x.values for x in sps], *shapes, concat_dim=int(axis),
                               N=len(sps))
        out = None
        if all(t.is_fully_defined() for t in static):
            dims = [t.as_list() for t in static]
            d = int(axis) % len(dims[0])
            out = list(dims[0])
            out[d] = sum(x[d] for x in dims)
            for k, x in enumerate(dims):
                if len(x) != len(out) or any(x[j] != out[j] for j in range(len(out)) if j != d):
                    raise ValueError(f"sparse_concat: sp_inputs[{k}] has shape {x}, which does not match "
                                     f"sp_inputs[0]'s {dims[0]} outside the concat axis {d}")
        return make_sparse(i, v, s, None if out is None else TensorShape(out))


# ---------------------------------------------------------------------------------------------
# SparseSplit (TF has no gradient)

def _infer_split(inputs, attrs):
    split_dim, i, v, s = inputs
    rank = check_sparse(i, v, s)
    n = int(attrs["num_split"])
    outs = sparse_outputs(v.dtype, rank)
    return [outs[0]] * n + [outs[1]] * n + [outs[2]] * n


SparseSplit = define_op("SparseSplit", _infer_split)


def sparse_split(keyword_required=None, sp_input=None, num_split=None, axis=None, name=None, split_dim=None):
    """`num_split` SparseTensors cut along `axis` (tf.compat.v1.sparse_split, keyword arguments only):
    the first dim % num_split pieces are one longer. TF has no gradient for it."""
    if keyword_required is not None:
        raise ValueError("sparse_split takes keyword arguments only: sparse_split(sp_input=..., num_split=..., "
                         "axis=...)")
    axis = split_dim if axis is None else axis
    if sp_input is None or num_split is None or axis is None:
        raise ValueError("sparse_split needs sp_input, num_split and axis")
    sp = _check(sp_input)
    n = int(num_split)
    with name_scope(name or "SparseSplit"):
        outs = SparseSplit(convert_to_tensor(axis, dtype=dtypes.int64, name="split_dim"), sp.indices, sp.values,
                           sp.dense_shape, num_split=n)
        outs = (outs,) if n == 1 and not isinstance(outs, tuple) else outs
        return [SparseTensor(outs[k], outs[n + k], outs[2 * n + k]) for k in range(n)]


# ---------------------------------------------------------------------------------------------
# SparseFillEmptyRows

def _infer_fill(inputs, attrs):
    i, v, s, default = inputs
    rank = check_sparse(i, v, s)
    if default.dtype is not v.dtype:
        raise InferenceError(f"default_value must have the values' dtype {v.dtype.name}, got {default.dtype.name}")
    if default.shape.ndims not in (None, 0):
        raise InferenceError(f"default_value must be a scalar, got shape {default.shape}")
    rows = static_dims(s)
    return sparse_outputs(v.dtype, rank)[:2] + [
        (dtypes.bool_, TensorShape([rows[0] if rows else None])),
        (dtypes.int64, TensorShape([i.shape.dims[0] if i.shape.dims else None]))]


SparseFillEmptyRows = define_op("SparseFillEmptyRows", _infer_fill)
SparseFillEmptyRowsGrad = define_op("SparseFillEmptyRowsGrad", lambda inputs, attrs: [
    (inputs[1].dtype, inputs[0].shape), (inputs[1].dtype, TensorShape([]))])


@SparseFillEmptyRows.gradient
def _sparse_fill_empty_rows_grad(op, *grads):
    d_values, d_default = SparseFillEmptyRowsGrad(op.outputs[3], grads[1])
    return [None, d_values, None, d_default]


def sparse_fill_empty_rows(sp_input, default_value, name=None):
    """(the SparseTensor with `default_value` at [r, 0, ..., 0] of every row r that has no entry,
    a bool vector marking those rows) (tf.sparse.fill_empty_rows). The output is ordered by row;
    a row's entries keep their input order."""
    sp = _check(sp_input)
    with name_scope(name or "SparseFillEmptyRows"):
        default = convert_to_tensor(default_value, dtype=sp.dtype, name="default_value")
        i, v, empty, _ = SparseFillEmptyRows(sp.indices, sp.values, sp.dense_shape, default)
        return make_sparse(i, v, sp.dense_shape, sp.shape), empty


# ---------------------------------------------------------------------------------------------
# Composites of the ops above and the array ops (as TF builds them)

def sparse_transpose(sp_input, perm=None, name=None):
    """The SparseTensor with its dimensions permuted by `perm` (reversed by default), in canonical
    order (tf.sparse.transpose)."""
    sp = _check(sp_input)
    with name_scope(name or "SparseTranspose"):
        rank = rank_of(sp.indices, sp.dense_shape)
        if perm is None:
            if rank is None:
                rank_t = array_ops.size(sp.dense_shape)
                perm = array_ops.range(rank_t - 1, -1, -1)
            else:
                perm = list(range(rank - 1, -1, -1))
        p = constant_value(convert_to_tensor(perm)) if not isinstance(perm, list) else np.array(perm)
        if p is not None and rank is not None and sorted(np.reshape(p, -1).tolist()) != list(range(rank)):
            raise ValueError(f"sparse_transpose: perm {np.reshape(p, -1).tolist()} is not a permutation of "
                             f"range({rank})")
        perm_t = convert_to_tensor(perm, dtype=dtypes.int32, name="perm")
        indices = array_ops.transpose(array_ops.gather(array_ops.transpose(sp.indices), perm_t))
        shape = array_ops.gather(sp.dense_shape, perm_t)
        static = None
        if p is not None and sp.shape.is_fully_defined():
            static = TensorShape([sp.shape.as_list()[int(k)] for k in np.reshape(p, -1)])
        i, v = SparseReorder(indices, sp.values, shape)
        return make_sparse(i, v, shape, static)


def sparse_retain(sp_input, to_retain):
    """The entries of a SparseTensor where the bool vector `to_retain` is True (tf.sparse.retain)."""
    sp = _check(sp_input)
    keep = convert_to_tensor(to_retain, name="to_retain")
    if keep.shape.ndims not in (None, 1):
        raise ValueError(f"sparse_retain: to_retain must be a vector, got shape {keep.shape}")
    n = sp.values.shape.dims[0] if sp.values.shape.dims else None
    m = keep.shape.dims[0] if keep.shape.dims else None
    if n is not None and m is not None and n != m:
        raise ValueError(f"sparse_retain: to_retain has {m} entries for a SparseTensor with {n} values")
    with name_scope("SparseRetain"):
        where = array_ops.reshape(array_ops.where_indices(keep), [-1])
        return SparseTensor(array_ops.gather(sp.indices, where), array_ops.gather(sp.values, where), sp.dense_shape)


def sparse_reset_shape(sp_input, new_shape=None):
    """The SparseTensor with dense_shape `new_shape` (which must not be smaller, checked when the
    step runs), or the tight shape max(indices) + 1 (tf.sparse.reset_shape)."""
    from actorflow.graph.graph import control_dependencies
    from actorflow.graph.ops import check_ops
    sp = _check(sp_input)
    with name_scope("SparseResetShape"):
        if new_shape is None:
            shape = math_ops.reduce_max(sp.indices, axis=0) + 1
            return SparseTensor(sp.indices, sp.values, shape)
        new = _int_vector(new_shape, "new_shape")
        if new.shape.ndims not in (None, 1):
            raise ValueError(f"sparse_reset_shape: new_shape must be a vector, got shape {new.shape}")
        r1, r2 = rank_of(sp.indices, sp.dense_shape), new.shape.dims[0] if new.shape.dims else None
        if r1 is not None and r2 is not None and r1 != r2:
            raise ValueError(f"sparse_reset_shape: new_shape has rank {r2} but sp_input has rank {r1}")
        old, want = static_dims(sp.dense_shape), static_dims(new)
        if old is not None and want is not None and any(w < o for w, o in zip(want, old)):
            raise ValueError(f"sparse_reset_shape: new_shape {want} is smaller than sp_input's shape {old}")
        if old is not None and want is not None:        # checked above
            return make_sparse(sp.indices, sp.values, new, TensorShape(want))
        check = check_ops.assert_less_equal(sp.dense_shape, new, message="sparse_reset_shape: new_shape must "
                                            "not be smaller than sp_input's dense_shape")
        with control_dependencies([check]):
            return SparseTensor(sp.indices, sp.values, identity(new))


def sparse_expand_dims(sp_input, axis=None, name=None):
    """The SparseTensor with a dimension of size 1 inserted at `axis` (-1, the end, by default)
    (tf.sparse.expand_dims)."""
    sp = _check(sp_input)
    axis = -1 if axis is None else int(axis)
    rank = rank_of(sp.indices, sp.dense_shape)
    if rank is None:
        raise ValueError("sparse.expand_dims needs a SparseTensor of known rank")
    if not -rank - 1 <= axis <= rank:
        raise ValueError(f"sparse.expand_dims: axis {axis} is out of range [{-rank - 1}, {rank}]")
    a = axis if axis >= 0 else axis + rank + 1
    with name_scope(name or "ExpandDims"):
        zeros = array_ops.zeros(array_ops.stack([array_ops.shape(sp.indices)[0], 1]), dtype=dtypes.int64)
        indices = array_ops.concat([sp.indices[:, :a], zeros, sp.indices[:, a:]], 1)
        shape = array_ops.concat([sp.dense_shape[:a], constant([1], dtypes.int64), sp.dense_shape[a:]], 0)
        static = None
        if sp.shape.ndims is not None:
            dims = sp.shape.as_list()
            static = TensorShape(dims[:a] + [1] + dims[a:])
        return make_sparse(indices, sp.values, shape, static)


def sparse_eye(num_rows, num_columns=None, dtype=dtypes.float32, name=None):
    """The identity matrix [num_rows, num_columns] as a SparseTensor (tf.sparse.eye)."""
    with name_scope(name or "eye"):
        rows = convert_to_tensor(num_rows, dtype=dtypes.int64, name="num_rows")
        cols = rows if num_columns is None else convert_to_tensor(num_columns, dtype=dtypes.int64,
                                                                  name="num_columns")
        n = math_ops.minimum(rows, cols)
        diag = array_ops.range(n, dtype=dtypes.int64)
        ones = array_ops.ones(array_ops.reshape(n, [1]), dtype=dtypes.as_dtype(dtype))
        return SparseTensor(array_ops.stack([diag, diag], 1), ones, array_ops.stack([rows, cols]))


def sparse_mask(a, mask_indices, name=None):
    """The IndexedSlices `a` without the rows whose index is in `mask_indices` (tf.sparse.mask)."""
    from actorflow.graph.ops.misc_ops import setdiff1d
    if not isinstance(a, IndexedSlices):
        raise TypeError(f"sparse_mask: a must be an IndexedSlices, got {type(a).__name__}")
    with name_scope(name or "sparse_mask"):
        mask = convert_to_tensor(mask_indices, dtype=a.indices.dtype, name="mask_indices")
        out_indices, to_gather = setdiff1d(a.indices, mask)
        return IndexedSlices(array_ops.gather(a.values, to_gather), out_indices, a.dense_shape)


def sparse_merge(sp_ids, sp_values, vocab_size, name=None, already_sorted=False):
    """The SparseTensor [..., vocab_size] with sp_values' values at the last index sp_ids' values
    (tf.compat.v1.sparse_merge; one sp_ids and one vocab_size, or lists of both): sparse feature ids
    and weights merged into one tensor, in canonical order unless `already_sorted`."""
    ids_list = list(sp_ids) if isinstance(sp_ids, list) else [sp_ids]
    sizes = list(vocab_size) if isinstance(vocab_size, list) else [vocab_size]
    if len(ids_list) != len(sizes):
        raise ValueError(f"sparse_merge: {len(ids_list)} sp_ids but {len(sizes)} vocab sizes")
    ids_list = [_check(x, "sp_ids") for x in ids_list]
    vals = _check(sp_values, "sp_values")
    with name_scope(name or "SparseMerge"):
        cols = []
        for ids in ids_list:
            if not ids.dtype.is_integer:
                raise TypeError(f"sparse_merge: sp_ids must hold integers, got {ids.dtype.name}")
            cols.append(array_ops.expand_dims(math_ops.cast(ids.values, dtypes.int64), 1))
        first = ids_list[0]
        indices = array_ops.concat([first.indices[:, :-1]] + cols, 1)
        sizes_t = [convert_to_tensor(s, dtype=dtypes.int64, name="vocab_size") for s in sizes]
        shape = array_ops.concat([first.dense_shape[:-1], array_ops.stack(sizes_t)], 0)
        if already_sorted:
            return SparseTensor(indices, vals.values, shape)
        i, v = SparseReorder(indices, vals.values, shape)
        return SparseTensor(i, v, shape)


def sparse_to_indicator(sp_input, vocab_size, name=None):
    """A bool tensor [..., vocab_size]: True at [..., id] for each id among the values of a row of
    the integer SparseTensor `sp_input` (tf.sparse.to_indicator)."""
    from actorflow.graph.ops.sparse_ops import sparse_tensor_to_dense
    sp = _check(sp_input)
    with name_scope(name or "SparseToIndicator"):
        trues = array_ops.fill(array_ops.expand_dims(array_ops.shape(sp.indices)[0], 0), True)
        merged = sparse_merge(sp, SparseTensor(sp.indices, trues, sp.dense_shape), vocab_size)
        return sparse_tensor_to_dense(merged, default_value=False, validate_indices=False)


# ---------------------------------------------------------------------------------------------
# Serialization: each SparseTensor as the TensorProto bytes of its three tensors

def _infer_serialize(many):
    def infer(inputs, attrs):
        i, v, s = inputs
        check_sparse(i, v, s, "sp_input")
        if attrs.get("out_type", dtypes.string) is not dtypes.string:
            raise InferenceError("out_type must be tf.string (actorflow has no variant tensors)")
        if many:
            rows = static_dims(s)
            return [(dtypes.string, TensorShape([rows[0] if rows else None, 3]))]
        return [(dtypes.string, TensorShape([3]))]
    return infer


SerializeSparse = define_op("SerializeSparse", _infer_serialize(False))
SerializeManySparse = define_op("SerializeManySparse", _infer_serialize(True))


def _infer_deserialize(many):
    def infer(inputs, attrs):
        s = inputs[0]
        if s.dtype is not dtypes.string:
            raise InferenceError(f"serialized_sparse must be strings, got {s.dtype.name}")
        if s.shape.dims is not None and (not s.shape.dims or s.shape.dims[-1] not in (None, 3)):
            raise InferenceError(f"serialized_sparse must have 3 as its last dimension, got shape {s.shape}")
        if many and s.shape.ndims not in (None, 2):
            raise InferenceError(f"serialized_sparse must be a matrix [N, 3], got shape {s.shape}")
        return sparse_outputs(dtypes.as_dtype(attrs["dtype"]), None)
    return infer


DeserializeSparse = define_op("DeserializeSparse", _infer_deserialize(False))
DeserializeManySparse = define_op("DeserializeManySparse", _infer_deserialize(True))


def _with_rank(indices, values, shape, serialized, rank):
    """The SparseTensor, its rank set from `rank` (each serialized tensor's) where it is given."""
    if rank is not None and serialized.shape.ndims is not None:
        r = int(rank) + serialized.shape.ndims - 1
        indices.set_shape([None, r])
        shape.set_shape([r])
    return SparseTensor(indices, values, shape)


def serialize_sparse(sp_input, name=None, out_type=dtypes.string):
    """A string vector [3]: the serialized TensorProtos of a SparseTensor's indices, values and
    dense_shape, the bytes TF writes (tf.io.serialize_sparse)."""
    sp = _check(sp_input)
    with name_scope(name or "SerializeSparse"):
        return SerializeSparse(sp.indices, sp.values, sp.dense_shape, out_type=dtypes.as_dtype(out_type))


def serialize_many_sparse(sp_input, name=None, out_type=dtypes.string):
    """A string matrix [N, 3]: serialize_sparse of each of the N rank-(R-1) SparseTensors along the
    first dimension (the minibatch) of `sp_input` (tf.io.serialize_many_sparse)."""
    sp = _check(sp_input)
    with name_scope(name or "SerializeManySparse"):
        return SerializeManySparse(sp.indices, sp.values, sp.dense_shape, out_type=dtypes.as_dtype(out_type))


def deserialize_sparse(serialized_sparse, dtype, rank=None, name=None):
    """The SparseTensor of serialized SparseTensors [..., 3] (tf.io.deserialize_sparse): one of shape
    [3] as it was; more are stacked along the leading dimensions, each dimension the largest."""
    with name_scope(name or "DeserializeSparse"):
        s = convert_to_tensor(serialized_sparse, dtype=dtypes.string, name="serialized_sparse")
        i, v, sh = DeserializeSparse(s, dtype=dtypes.as_dtype(dtype))
        return _with_rank(i, v, sh, s, rank)


def deserialize_many_sparse(serialized_sparse, dtype, rank=None, name=None):
    """The SparseTensor [N, ...] of N serialized SparseTensors [N, 3] (tf.io.deserialize_many_sparse)."""
    with name_scope(name or "DeserializeManySparse"):
        s = convert_to_tensor(serialized_sparse, dtype=dtypes.string, name="serialized_sparse")
        i, v, sh = DeserializeManySparse(s, dtype=dtypes.as_dtype(dtype))
        return _with_rank(i, v, sh, s, rank)


# ---------------------------------------------------------------------------------------------
# SparseCross / SparseCrossV2: feature crosses of sparse and dense string or integer columns

def _infer_cross(v2):
    def infer(inputs, attrs):
        n = int(attrs["N"])
        dense = inputs[3 * n:len(inputs) - (1 if v2 else 0)]
        for k in range(n):
            check_sparse(inputs[k], inputs[n + k], inputs[2 * n + k], f"inputs[{k}]")
        for t in list(inputs[n:2 * n]) + list(dense):
            if t.dtype not in (dtypes.string, dtypes.int64):
                raise InferenceError(f"the crossed features must be strings or int64, got {t.dtype.name}")
        for t in dense:
            if t.shape.ndims not in (None, 2):
                raise InferenceError(f"a dense input must be a matrix [batch, features], got shape {t.shape}")
        out = dtypes.int64 if attrs.get("hashed_output") else dtypes.string
        return sparse_outputs(out, 2)
    return infer


SparseCross = define_op("SparseCross", _infer_cross(False))
SparseCrossV2 = define_op("SparseCrossV2", _infer_cross(True))


def _cross_inputs(inputs):
    if not isinstance(inputs, (tuple, list)) or isinstance(inputs, SparseTensor):
        raise TypeError("sparse.cross: inputs must be a list of Tensors and SparseTensors")
    sparse = [_check(x, "inputs") for x in inputs if isinstance(x, SparseTensor)]
    dense = [convert_to_tensor(x) for x in inputs if not isinstance(x, SparseTensor)]
    values = [v if v.dtype is dtypes.string else math_ops.cast(v, dtypes.int64) for v in (s.values for s in sparse)]
    dense = [d if d.dtype is dtypes.string else math_ops.cast(d, dtypes.int64) for d in dense]
    return sparse, values, dense


def sparse_cross(inputs, name=None, separator=None):
    """The string feature crosses of a list of rank-2 SparseTensors and dense matrices
    (tf.sparse.cross): for each batch row, every combination of one feature per input, joined by
    `separator` ("_X_"); the sparse inputs come first in each cross, then the dense ones, the last
    varying fastest; integers are written in decimal."""
    sparse, values, dense = _cross_inputs(inputs)
    with name_scope(name or "SparseCrossV2"):
        sep = convert_to_tensor("_X_" if separator is None else separator, dtype=dtypes.string, name="sep")
        i, v, s = SparseCrossV2(*[x.indices for x in sparse], *values, *[x.dense_shape for x in sparse], *dense, sep,
                                N=len(sparse))
        return SparseTensor(i, v, s)


def sparse_cross_hashed(inputs, num_buckets=0, hash_key=None, name=None):
    """sparse.cross's crosses as int64 hashes (tf.sparse.cross_hashed): FingerprintCat64 of
    hash_key (0xDECAFCAFFE by default) and each feature's Fingerprint64 (an integer feature's own
    value), modulo num_buckets when it is positive; TF's values."""
    sparse, values, dense = _cross_inputs(inputs)
    with name_scope(name or "SparseCross"):
        i, v, s = SparseCross(*[x.indices for x in sparse], *values, *[x.dense_shape for x in sparse], *dense,
                              N=len(sparse), hashed_output=True, num_buckets=int(num_buckets),
                              hash_key=int(hash_key if hash_key is not None else 0xDECAFCAFFE),
                              out_type=dtypes.int64, internal_type=dtypes.int64)
        return SparseTensor(i, v, s)
