"""ConcatV2, Split, SplitV: definitions, gradients and wrappers (concat, split)."""
from __future__ import annotations

import builtins
import numbers

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.array_ops import filling, gathering, reshaping, shapes
from actorflow.graph.ops.array_ops._args import (
    _as_list,
    _cast,
    _convert_same_dtype,
    _dense,
    _dim,
    _int_const,
    _op_scope,
    _to_index_tensor,
)
from actorflow.graph.ops.array_ops._infer import (
    _check_index_dtype,
    _check_rank,
    _check_scalar_like,
    _normalize,
    _partial_ints,
    _same_dtype,
    _static_int,
    _unknown,
    _with_rank,
)
from actorflow.graph.ops.constant import Identity
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["concat", "split"]


def _infer_concat(inputs, attrs):
    n = attrs["N"]
    if n < 1 or len(inputs) != n + 1:
        raise InferenceError(f"ConcatV2 takes N={n} values and an axis, got {len(inputs)} inputs")
    values, axis = inputs[:n], inputs[n]
    dt = _same_dtype(values, "values")
    _check_index_dtype(axis, "axis")
    _check_scalar_like(axis, "axis")
    ranks = {v.shape.ndims for v in values if v.shape.ndims is not None}
    if len(ranks) > 1:
        raise InferenceError("all values must have the same rank, got shapes "
                             + ", ".join(str(v.shape) for v in values))
    if not ranks:
        return _unknown(dt)
    rank = ranks.pop()
    if rank == 0:
        raise InferenceError("Can't concatenate scalars (use stack instead)")
    a = _static_int(axis)
    if a is None:
        return [_with_rank(dt, rank)]
    a = _normalize(a, rank)
    out, seen, total = [None] * rank, [None] * rank, 0
    for v in values:
        if v.shape.dims is None:
            total = None
            continue
        for i, d in enumerate(v.shape.dims):
            if i == a:
                total = None if total is None or d is None else total + d
            elif d is not None:
                if out[i] is not None and out[i] != d:
                    raise InferenceError(f"Dimension {i} in both shapes must be equal, but are {out[i]} and {d}. "
                                         f"Shapes are {seen[i]} and {v.shape} (concatenating along axis {a})")
                out[i], seen[i] = d, v.shape
    out[a] = total
    return [(dt, TensorShape(out))]


ConcatV2 = define_op("ConcatV2", _infer_concat)


def _split_outputs(value, a, sizes):
    dims = list(value.shape.dims)
    outs = []
    for s in sizes:
        d = list(dims)
        d[a] = s
        outs.append((value.dtype, TensorShape(d)))
    return outs


def _infer_split(inputs, attrs):
    axis, value = inputs
    num = attrs["num_split"]
    if num < 1:
        raise InferenceError(f"num_split must be at least 1, got {num}")
    _check_index_dtype(axis, "axis")
    _check_scalar_like(axis, "axis")
    rank = value.shape.ndims
    if rank is None:
        return _unknown(value.dtype, num)
    a = _static_int(axis)
    if a is None:
        return [_with_rank(value.dtype, rank)] * num
    a = _normalize(a, rank)
    d = value.shape.dims[a]
    if d is not None and d % num:
        raise InferenceError(f"Number of ways to split should evenly divide the split dimension, but got "
                             f"split_dim {a} (size = {d}) and num_split {num}")
    return _split_outputs(value, a, [None if d is None else d // num] * num)


Split = define_op("Split", _infer_split)


def _infer_split_v(inputs, attrs):
    value, size_splits, axis = inputs
    num = attrs["num_split"]
    if num < 1:
        raise InferenceError(f"num_split must be at least 1, got {num}")
    _check_index_dtype(size_splits, "size_splits")
    _check_rank(size_splits, 1, "size_splits")
    _check_index_dtype(axis, "axis")
    _check_scalar_like(axis, "axis")
    sizes = _partial_ints(size_splits)
    if sizes is not None and len(sizes) != num:
        raise InferenceError(f"size_splits has {len(sizes)} entries but num_split is {num}")
    rank = value.shape.ndims
    if rank is None:
        return _unknown(value.dtype, num)
    a = _static_int(axis)
    if a is None:
        return [_with_rank(value.dtype, rank)] * num
    a = _normalize(a, rank)
    sizes = list(sizes) if sizes is not None else [None] * num
    if any(s is not None and s < -1 for s in sizes):
        raise InferenceError(f"size_splits {reshaping._fmt(sizes)} must be non-negative, or -1")
    inferred = [i for i, s in enumerate(sizes) if s == -1]
    if len(inferred) > 1:
        raise InferenceError(f"size_splits {reshaping._fmt(sizes)} can contain at most one -1")
    known = builtins.sum(s for s in sizes if s is not None and s >= 0)
    d = value.shape.dims[a]
    if d is not None:
        if known > d or (not inferred and None not in sizes and known != d):
            raise InferenceError(f"size_splits {reshaping._fmt(sizes)} must sum to the size of dimension {a} ({d}), "
                                 f"or be less than it when one size is -1")
        if inferred and None not in sizes:
            sizes[inferred[0]] = d - known
    return _split_outputs(value, a, [None if s is None or s < 0 else s for s in sizes])


SplitV = define_op("SplitV", _infer_split_v)


@ConcatV2.gradient
def _concat_grad(op, grad):
    n = op.attrs["N"]
    values, axis = op.inputs[:n], op.inputs[n]
    grad = _dense(grad)
    if n == 1:
        return [grad, None]
    rank = next((v.shape.ndims for v in values if v.shape.ndims is not None), None)
    a = _static_int(axis)
    if a is not None and rank is not None:
        a %= rank
        sizes = [_dim(v, a) for v in values]
        axis_t = a
    else:
        # The axis is known only at run time: normalize it there (it may be negative).
        axis_t = math_ops.FloorMod(_cast(axis, dtypes.int32), _cast(shapes.rank_of(values[0]), dtypes.int32))
        sizes = [gathering.GatherV2(shapes.shape(v), axis_t, _int_const(0), batch_dims=0) for v in values]
    return split(grad, _to_index_tensor(sizes, None, dtypes.int32), axis_t, num=n) + [None]


def _split_grads_to_concat(op, grads, axis):
    if all(g is None for g in grads):
        return None
    parts = [filling.zeros_like(op.outputs[i]) if g is None else _dense(g) for i, g in enumerate(grads)]
    return concat(parts, axis)


@Split.gradient
def _split_grad(op, *grads):
    return [None, _split_grads_to_concat(op, grads, op.inputs[0])]


@SplitV.gradient
def _split_v_grad(op, *grads):
    return [_split_grads_to_concat(op, grads, op.inputs[2]), None, None]


def concat(values, axis, name="concat"):
    """Concatenates tensors along `axis` (tf.concat); one value is returned through an Identity."""
    if not isinstance(values, (list, tuple)):
        values = [values]
    with _op_scope(name, "concat") as sc:
        if len(values) == 1:
            axis_t = _to_index_tensor(axis, "concat_dim")
            if axis_t.shape.ndims not in (None, 0):
                raise ValueError(f"concat's axis must be a scalar, got shape {axis_t.shape}")
            return sc.op(Identity, convert_to_tensor(values[0], name="values_0"))
        ts = _convert_same_dtype(values)
        return sc.op(ConcatV2, *ts, _to_index_tensor(axis, "axis"), N=len(ts))


def split(value, num_or_size_splits, axis=0, num=None, name="split"):
    """Splits `value` along `axis` into a list of tensors (tf.split).

    An int splits into that many equal parts; a list or 1-D tensor gives the sizes (one may be
    -1). `num` is needed only when the number of sizes cannot be known when building.
    """
    with _op_scope(name, "split") as sc:
        x = convert_to_tensor(value, name="value")
        axis_t = _to_index_tensor(axis, "split_dim")
        if isinstance(num_or_size_splits, numbers.Integral):
            n = int(num_or_size_splits)
            if n < 1:
                raise ValueError(f"split needs at least 1 part, got num_or_size_splits={n}")
            return _as_list(sc.op(Split, axis_t, x, num_split=n), n)
        sizes = _to_index_tensor(num_or_size_splits, "size_splits")
        if sizes.shape.ndims == 0:
            n = _static_int(sizes)
            if n is None:
                raise ValueError(f"Cannot infer num from shape {sizes.shape}: the number of parts must be "
                                 "known when the graph is built")
            return _as_list(sc.op(Split, axis_t, x, num_split=n), n)
        if num is None:
            if sizes.shape.ndims == 1 and sizes.shape.dims[0] is not None:
                num = sizes.shape.dims[0]
            else:
                raise ValueError(f"Cannot infer argument `num` from shape {sizes.shape}")
        return _as_list(sc.op(SplitV, x, sizes, axis_t, num_split=num), num)
