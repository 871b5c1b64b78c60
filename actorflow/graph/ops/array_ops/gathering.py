"""GatherV2, UnsortedSegmentSum, DynamicPartition, DynamicStitch: definitions, gradients and
wrappers, and the densifying of sparse (IndexedSlices) gradients."""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.indexed_slices import IndexedSlices
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.array_ops import filling, joining, reshaping, shapes, slicing
from actorflow.graph.ops.array_ops._args import (
    _as_list,
    _cast,
    _convert_same_dtype,
    _dense,
    _int_const,
    _op_scope,
    _to_index_tensor,
)
from actorflow.graph.ops.array_ops._infer import (
    _check_index_dtype,
    _check_prefix,
    _check_scalar_like,
    _DTypeError,
    _partial_ints,
    _prod,
    _pyrange,
    _pyslice,
    _same_dtype,
    _static_int,
    _static_ints,
    _unknown,
    _with_rank,
)
from actorflow.graph.ops.constant import constant
from actorflow.graph.ops.infer import constant_shape, constant_value
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["gather", "unsorted_segment_sum", "dynamic_partition", "dynamic_stitch", "batch_gather"]


def _infer_gather(inputs, attrs):
    params, indices, axis = inputs
    _check_index_dtype(indices, "indices")
    _check_index_dtype(axis, "axis")
    _check_scalar_like(axis, "axis")
    bd = int(attrs.get("batch_dims", 0))
    prank, irank = params.shape.ndims, indices.shape.ndims
    if bd < 0:
        if irank is None:
            return _unknown(params.dtype)
        bd += irank
        if bd < 0:
            raise InferenceError(f"batch_dims {attrs['batch_dims']} is out of range for indices of rank {irank}")
    if irank is not None and bd > irank:
        raise InferenceError(f"batch_dims ({bd}) must be at most the rank of indices ({irank})")
    if prank is None or irank is None:
        return _unknown(params.dtype)
    a = _static_int(axis)
    if a is None:
        return [_with_rank(params.dtype, prank - 1 + irank - bd)]
    if not -prank <= a < prank:
        raise InferenceError(f"Expected axis in the range [{-prank}, {prank}), but got {a}")
    a %= prank
    if bd > a:
        raise InferenceError(f"batch_dims ({bd}) must be less than or equal to axis ({a})")
    pd, idims = params.shape.dims, indices.shape.dims
    batch = []
    for i in _pyrange(bd):
        if pd[i] is not None and idims[i] is not None and pd[i] != idims[i]:
            raise InferenceError(f"params.shape[{i}] = {pd[i]} and indices.shape[{i}] = {idims[i]} must match "
                                 f"in the {bd} batch dimensions")
        batch.append(pd[i] if pd[i] is not None else idims[i])
    return [(params.dtype, TensorShape(batch + list(pd[bd:a]) + list(idims[bd:]) + list(pd[a + 1:])))]


GatherV2 = define_op("GatherV2", _infer_gather)


def _infer_unsorted_segment_sum(inputs, attrs):
    data, ids, num = inputs
    if not data.dtype.is_numeric:
        raise _DTypeError(f"data must be numeric, got {data.dtype.name}")
    _check_index_dtype(ids, "segment_ids")
    _check_index_dtype(num, "num_segments")
    _check_scalar_like(num, "num_segments")
    _check_prefix(ids, data, "segment_ids", "data")
    n = _static_int(num)
    if n is not None and n < 0:
        raise InferenceError(f"num_segments must be non-negative, got {n}")
    if data.shape.dims is None or ids.shape.ndims is None:
        return _unknown(data.dtype)
    return [(data.dtype, TensorShape([n] + list(data.shape.dims[ids.shape.ndims:])))]


UnsortedSegmentSum = define_op("UnsortedSegmentSum", _infer_unsorted_segment_sum)


def _infer_dynamic_partition(inputs, attrs):
    data, partitions = inputs
    n = attrs["num_partitions"]
    if n < 1:
        raise InferenceError(f"num_partitions must be at least 1, got {n}")
    _check_index_dtype(partitions, "partitions")
    _check_prefix(partitions, data, "partitions", "data")
    if data.shape.dims is None or partitions.shape.ndims is None:
        return _unknown(data.dtype, n)
    return [(data.dtype, TensorShape([None] + list(data.shape.dims[partitions.shape.ndims:])))] * n


DynamicPartition = define_op("DynamicPartition", _infer_dynamic_partition)


def _infer_dynamic_stitch(inputs, attrs):
    n = attrs["N"]
    if n < 1 or len(inputs) != 2 * n:
        raise InferenceError(f"DynamicStitch takes N={n} indices and N data tensors, got {len(inputs)} inputs")
    indices, data = inputs[:n], inputs[n:]
    dt = _same_dtype(data, "data")
    inner = None
    for i, (idx, d) in enumerate(zip(indices, data)):
        _check_index_dtype(idx, f"indices[{i}]")
        _check_prefix(idx, d, f"indices[{i}]", f"data[{i}]")
        if idx.shape.ndims is None or d.shape.dims is None:
            continue
        rest = TensorShape(d.shape.dims[idx.shape.ndims:])
        if inner is not None and not inner.is_compatible_with(rest):
            raise InferenceError(f"data[{i}].shape {d.shape} does not match the other data tensors: their shapes "
                                 f"beyond their indices' must all be {inner}")
        inner = rest if inner is None else inner.merge_with(rest)
    values = [_static_ints(idx) for idx in indices]
    rows = None
    if all(v is not None for v in values):
        flat = [x for v in values for x in v]
        rows = max(flat) + 1 if flat else 0
    if inner is None:
        return _unknown(dt)
    return [(dt, TensorShape([rows] + list(inner.dims)))]


DynamicStitch = define_op("DynamicStitch", _infer_dynamic_stitch)


@GatherV2.gradient
def _gather_grad(op, grad):
    params, indices, axis = op.inputs
    grad = _dense(grad)
    prank, irank = params.shape.ndims, indices.shape.ndims
    a = _static_int(axis)
    if a is not None and prank is not None:
        a %= max(prank, 1)
    if a == 0:
        # Only the gathered rows get a gradient: keep it sparse, as TF does.
        # (a static count when indices' shape is known: the values' shape is then a constant, which
        # the JIT compiles, where a Size op packed with the tail sizes kept a loop's gradient off it)
        n_idx = indices.shape.num_elements() if indices.shape.is_fully_defined() else shapes.size(indices)
        tail = params.shape.dims[1:] if params.shape.dims is not None else None
        if tail is not None and all(d is not None for d in tail):
            values_shape = _to_index_tensor([n_idx] + list(tail), None, dtypes.int32)
            values = reshaping.reshape(grad, values_shape)
        elif irank == 0:
            # one index (dynamic_rnn's read of a time step from an input whose batch size is open):
            # its row, as [1, ...], keeping the static shape the JIT's symbolic shapes follow
            values = reshaping.expand_dims(grad, 0)
        elif irank == 1:
            values = grad               # already [n, ...]
        else:
            values_shape = joining.concat([reshaping.expand_dims(n_idx, 0), slicing._slice_helper(shapes.shape(params), _pyslice(1, None))], 0)
            values = reshaping.reshape(grad, values_shape)
        return [IndexedSlices(values, reshaping.reshape(indices, _int_const([-1])), shapes.shape(params)), None, None]
    bd = int(op.attrs.get("batch_dims", 0))
    if bd < 0:
        if irank is None:
            raise ValueError(f"The gradient of '{op.name}' (GatherV2) needs the rank of indices to resolve "
                             f"batch_dims={bd}")
        bd += irank
    # Collapse params to [B, O, N, R] (batch, outer, gathered axis, inner) and the gradient to
    # [B, O, S, R] (S: indices per batch), then scatter-add rows with batch-offset indices.
    # Every size is a Python int when known when building, else an int32 scalar tensor.
    pshape, ishape = shapes.shape(params), shapes.shape(indices)

    def prod_of(shape_t, static, start, stop):
        """The product of dimensions start..stop (None: to the end); ints or int32 tensors."""
        if isinstance(start, int) and (stop is None or isinstance(stop, int)) and static is not None:
            part = static[start:stop]
            if all(d is not None for d in part):
                return _prod(part)
        begin = _to_index_tensor([start], None, dtypes.int32)
        if stop is None:
            count = _int_const([-1])
        elif isinstance(start, int) and isinstance(stop, int):
            count = _int_const([stop - start])
        else:
            count = reshaping.reshape(math_ops.Sub(_to_index_tensor(stop, None, dtypes.int32),
                                         _to_index_tensor(start, None, dtypes.int32)), _int_const([1]))
        return math_ops.Prod(slicing.Slice(shape_t, begin, count), _int_const(0), keep_dims=False)

    def mul(x, y):
        if isinstance(x, int) and isinstance(y, int):
            return x * y
        return math_ops.Mul(_to_index_tensor(x, None, dtypes.int32), _to_index_tensor(y, None, dtypes.int32))

    pdims = params.shape.dims
    if a is None or a < 0:
        # The axis is known only at run time (or its sign only with the rank): normalize it there.
        a = math_ops.FloorMod(_cast(axis, dtypes.int32), shapes.rank_of(params))
        nn = GatherV2(pshape, a, _int_const(0), batch_dims=0)
        after = math_ops.AddV2(a, _int_const(1))
    else:
        nn = pdims[a] if pdims is not None and pdims[a] is not None else GatherV2(
            pshape, _int_const(a), _int_const(0), batch_dims=0)
        after = a + 1
    nb = prod_of(pshape, pdims, 0, bd)
    no = prod_of(pshape, pdims, bd, a)
    nr = prod_of(pshape, pdims, after, None)
    ns = prod_of(ishape, indices.shape.dims, bd, None)
    g = reshaping.reshape(grad, [nb, no, ns, nr])
    g = reshaping.reshape(reshaping.transpose(g, _int_const([0, 2, 1, 3])), [-1, no, nr])
    idx = reshaping.reshape(indices, [nb, ns])
    if bd:
        # Batch b's rows live at b * N .. b * N + N - 1 of the flattened [B * N, O, R] result.
        it = indices.dtype
        starts = filling.Range(_int_const(0, it), _to_index_tensor(nb, None, it), _int_const(1, it))
        offsets = math_ops.Mul(starts, _to_index_tensor(nn, None, it))
        idx = math_ops.AddV2(idx, reshaping.reshape(offsets, _int_const([-1, 1])))
    idx = reshaping.reshape(idx, _int_const([-1]))
    out = UnsortedSegmentSum(g, idx, _to_index_tensor(mul(nb, nn), None, dtypes.int32))
    out = reshaping.transpose(reshaping.reshape(out, [nb, nn, no, nr]), _int_const([0, 2, 1, 3]))
    return [reshaping.reshape(out, pshape), None, None]


def _gather_drop_negatives(params, ids):
    """gather(params, ids) with zero rows where ids < 0: the rows UnsortedSegmentSum dropped."""
    v = constant_value(ids)
    if v is not None and (np.asarray(v) >= 0).all():
        return gather(params, ids)
    zero = constant(0, dtype=ids.dtype)
    gathered = gather(params, math_ops.Maximum(ids, zero))
    keep = math_ops.GreaterEqual(ids, zero)
    if gathered.shape.ndims is not None and ids.shape.ndims is not None:
        for _ in _pyrange(gathered.shape.ndims - ids.shape.ndims):
            keep = reshaping.expand_dims(keep, -1)
    else:
        extra = math_ops.Sub(shapes.rank_of(gathered), shapes.rank_of(ids))
        ones_ = filling.Fill(reshaping.expand_dims(extra, 0), _int_const(1))
        keep = reshaping.reshape(keep, joining.concat([shapes.shape(ids), ones_], 0))
    return math_ops.SelectV2(keep, gathered, constant(0, dtype=gathered.dtype))


@UnsortedSegmentSum.gradient
def _unsorted_segment_sum_grad(op, grad):
    return [_gather_drop_negatives(_dense(grad), op.inputs[1]), None, None]


@DynamicPartition.gradient
def _dynamic_partition_grad(op, *grads):
    data, partitions = op.inputs
    n = op.attrs["num_partitions"]
    if all(g is None for g in grads):
        return [None, None]
    # Partition the positions like the data, then stitch the gradients back to them.
    positions = reshaping.reshape(filling.Range(_int_const(0), shapes.size(partitions), _int_const(1)), shapes.shape(partitions))
    where = dynamic_partition(positions, partitions, n)
    parts = [filling.zeros_like(op.outputs[i]) if g is None else _dense(g) for i, g in enumerate(grads)]
    return [reshaping.reshape(dynamic_stitch(where, parts), shapes.shape(data)), None]


@DynamicStitch.gradient
def _dynamic_stitch_grad(op, grad):
    n = op.attrs["N"]
    grad = _dense(grad)
    # Like TF: every position gets the gradient of its output row, even those overwritten by a
    # later duplicate index.
    return [None] * n + [gather(grad, _cast(op.inputs[i], dtypes.int32)) for i in _pyrange(n)]


def indexed_slices_to_dense(s, name=None):
    """The dense tensor an IndexedSlices stands for: duplicate rows summed, absent rows zero.

    TF-1.x counterpart: the IndexedSlices -> Tensor conversion (`tf.convert_to_tensor`), which
    uses UnsortedSegmentSum over ``dense_shape[0]`` rows in the same way.
    """
    if s.dense_shape is None:
        raise ValueError(f"Cannot convert IndexedSlices with values '{s.values.name}' to a dense tensor: "
                         "its dense_shape is unknown")
    with name_scope(name, "IndexedSlicesToDense", [s.values]):
        dense_shape = _to_index_tensor(s.dense_shape, "dense_shape")
        known = _partial_ints(dense_shape)
        rows = known[0] if known and known[0] is not None else GatherV2(
            dense_shape, _int_const(0, dense_shape.dtype), _int_const(0), batch_dims=0)
        out = unsorted_segment_sum(s.values, s.indices, rows)
        static = constant_shape(dense_shape)
        if not out.shape.is_fully_defined() or (static.dims is not None and out.shape != static):
            out = reshaping.reshape(out, dense_shape)
        return out


def gather(params, indices, validate_indices=None, name=None, axis=None, batch_dims=0):
    """Gathers slices of `params` along `axis` at `indices` (tf.compat.v1.gather).

    The gradient with respect to `params` along axis 0 is an IndexedSlices (sparse).
    `validate_indices` is accepted and ignored, as in TF (indices are always checked).
    """
    if axis is None:
        axis = batch_dims
    with _op_scope(name, "GatherV2") as sc:
        p = convert_to_tensor(params, name="params")
        i = convert_to_tensor(indices, name="indices")
        a = _to_index_tensor(axis, "axis")
        return sc.op(GatherV2, p, i, a, batch_dims=int(batch_dims))


def batch_gather(params, indices, name=None):
    """For each batch position of `indices` (all its dimensions but the last), the elements of the
    matching row of `params` it lists: ``gather(params, indices, batch_dims=rank(indices) - 1)``
    (tf.compat.v1.batch_gather, deprecated in TF for that). `indices` must have a known rank."""
    with _op_scope(name, "BatchGather") as sc:
        p = convert_to_tensor(params, name="params")
        i = convert_to_tensor(indices, name="indices")
        if i.shape.ndims is None:
            raise ValueError(f"batch_gather: indices must have a known rank, got shape {i.shape}")
        b = max(i.shape.ndims - 1, 0)
        return sc.op(GatherV2, p, i, _to_index_tensor(b, "axis"), batch_dims=b)


def unsorted_segment_sum(data, segment_ids, num_segments, name=None):
    """Sums the rows of `data` into `num_segments` segments by `segment_ids`; negative ids are
    dropped (tf.math.unsorted_segment_sum)."""
    with _op_scope(name, "UnsortedSegmentSum") as sc:
        d = convert_to_tensor(data, name="data")
        ids = convert_to_tensor(segment_ids, name="segment_ids")
        n = _to_index_tensor(num_segments, "num_segments")
        return sc.op(UnsortedSegmentSum, d, ids, n)


def dynamic_partition(data, partitions, num_partitions, name=None):
    """Splits `data` into `num_partitions` tensors by the partition index of each row
    (tf.dynamic_partition)."""
    with _op_scope(name, "DynamicPartition") as sc:
        d = convert_to_tensor(data, name="data")
        p = convert_to_tensor(partitions, name="partitions")
        n = int(num_partitions)
        return _as_list(sc.op(DynamicPartition, d, p, num_partitions=n), n)


def dynamic_stitch(indices, data, name=None):
    """Interleaves `data` tensors into one: ``merged[indices[i][j]] = data[i][j]``; the last
    write wins for duplicate indices (tf.dynamic_stitch)."""
    indices, data = list(indices), list(data)
    if len(indices) != len(data) or not indices:
        raise ValueError(f"dynamic_stitch needs as many indices as data tensors (at least one), got "
                         f"{len(indices)} and {len(data)}")
    with _op_scope(name, "DynamicStitch") as sc:
        idx = [_to_index_tensor(v, f"indices_{i}") for i, v in enumerate(indices)]
        ds = _convert_same_dtype(data, "data")
        return sc.op(DynamicStitch, *idx, *ds, N=len(idx))
