"""Ordering ops: TopKV2 (top_k, and sort/argsort built on it as TF does), Cumsum, Cumprod,
ReverseV2, Unique and UniqueWithCounts, with their TF 1.x wrappers and gradients.

TF-1.x counterparts: tf.compat.v1.nn.top_k, tf.sort, tf.argsort, tf.cumsum, tf.cumprod, tf.reverse,
tf.reverse_v2, tf.unique, tf.unique_with_counts. Sorting is top_k over the axis moved last (TF's
sort_ops.py), so its gradient is top_k's: the values' gradient scattered back to the indices.
"""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.array_ops import filling, reshaping, shapes
from actorflow.graph.ops.array_ops._args import _cast, _dense, _int_const, _op_scope, _to_index_tensor
from actorflow.graph.ops.array_ops._infer import (
    _check_index_dtype,
    _check_rank,
    _DTypeError,
    _normalize,
    _static_int,
    _static_ints,
)
from actorflow.graph.ops.array_ops.gathering import GatherV2, UnsortedSegmentSum
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["top_k", "sort", "argsort", "cumsum", "cumprod", "reverse", "reverse_v2", "unique", "unique_with_counts"]


def _check_real(t, what):
    dt = t.dtype
    if not (dt.is_floating or dt.is_integer):
        raise _DTypeError(f"{what} must be a real numeric tensor, got {dt.name} ('{t.name}')")


# ---------------------------------------------------------------------------------------------
# TopKV2

def _infer_top_k(inputs, attrs):
    x, k = inputs
    _check_real(x, "input")
    _check_index_dtype(k, "k", (dtypes.int16, dtypes.int32, dtypes.int64))
    _check_rank(k, 0, "k")
    index_type = dtypes.as_dtype(attrs.get("index_type", dtypes.int32))
    kv = _static_int(k)
    if kv is not None and kv < 0:
        raise InferenceError(f"Need k >= 0, got {kv}")
    dims = x.shape.dims
    if dims is None:
        return [(x.dtype, TensorShape(None)), (index_type, TensorShape(None))]
    if not dims:
        raise InferenceError(f"input must be at least 1-D, but '{x.name}' has shape {x.shape}")
    if kv is not None and dims[-1] is not None and dims[-1] < kv:
        raise InferenceError(f"input must have last dimension >= k = {kv} but is {dims[-1]} (shape {x.shape})")
    out = TensorShape(list(dims[:-1]) + [kv])
    return [(x.dtype, out), (index_type, out)]


TopKV2 = define_op("TopKV2", _infer_top_k)


def _last_dim(t):
    """The last dimension of `t`: an int when known at build time, else an int32 scalar tensor."""
    d = t.shape.dims[-1] if t.shape.dims else None
    if d is not None:
        return d
    last = math_ops.Sub(shapes.rank_of(t), _int_const(1))
    return GatherV2(shapes.shape(t), last, _int_const(0), batch_dims=0)


def _i32(v):
    return _to_index_tensor(v, None, dtypes.int32)


@TopKV2.gradient
def _top_k_grad(op, grad_values, grad_indices=None):
    """TF's _TopKGrad: each value's gradient goes to the input position its index names."""
    x, idx = op.inputs[0], op.outputs[1]
    if grad_values is None or not x.dtype.is_floating:
        return [None, None]
    grad_values = _dense(grad_values)
    # Row r's indices are offset by r * n into the flattened input (n >= 1 keeps an empty row's
    # arithmetic defined), then the values' gradient is summed into those positions.
    n, k = _last_dim(x), _last_dim(idx)
    step = max(n, 1) if isinstance(n, int) else math_ops.Maximum(n, _int_const(1))
    if x.shape.is_fully_defined():
        total = x.shape.num_elements()
        outer = total // step
    else:
        total = shapes.size(x)
        outer = math_ops.FloorDiv(total, _i32(step))
    ind = reshaping.reshape(_cast(idx, dtypes.int32), [outer, k])
    offsets = filling.Range(_int_const(0), _i32(total), _i32(step))
    flat = reshaping.reshape(math_ops.AddV2(ind, reshaping.expand_dims(offsets, -1)), _int_const([-1]))
    out = UnsortedSegmentSum(reshaping.reshape(grad_values, _int_const([-1])), flat, _i32(total))
    return [reshaping.reshape(out, shapes.shape(x) if not x.shape.is_fully_defined() else x.shape.as_list()),
            None]


def top_k(input, k=1, sorted=True, name=None, index_type=dtypes.int32):  # noqa: A002  (TF's names)
    """The `k` largest entries of the last dimension of `input` and their indices
    (tf.compat.v1.nn.top_k, op TopKV2).

    Equal values come in the order of their indices, lower first, as in TF. `k` may be a tensor;
    a constant `k` gives the static shape ``[..., k]``. `sorted=False` still returns them sorted
    (TF allows any order then).
    """
    with _op_scope(name, "TopKV2") as sc:
        x = convert_to_tensor(input, name="input")
        kt = _to_index_tensor(k, "k", dtypes.int32)
        return sc.op(TopKV2, x, kt, sorted=bool(sorted), index_type=dtypes.as_dtype(index_type))


def _descending(values, axis, return_argsort):
    """TF's _descending_sort: top_k of every element over `axis` moved last."""
    rank = values.shape.ndims
    if rank is None:
        if axis != -1:
            raise ValueError(f"sort along axis {axis} needs the rank of '{values.name}', which is unknown")
        rank_axis = None
    else:
        if rank == 0:
            raise ValueError(f"sort needs a tensor of rank >= 1, but '{values.name}' is a scalar")
        rank_axis = _normalize(axis, rank)
    perm = None
    if rank is not None and rank_axis != rank - 1:
        perm = list(range(rank_axis)) + [rank - 1] + list(range(rank_axis + 1, rank - 1)) + [rank_axis]
        values = reshaping.transpose(values, _int_const(perm))
    v, i = top_k(values, _last_dim(values))
    out = i if return_argsort else v
    if perm is not None:
        out = reshaping.transpose(out, _int_const(perm))
    return out


def _sort_or_argsort(values, axis, direction, return_argsort):
    if direction not in ("ASCENDING", "DESCENDING"):
        raise ValueError(f"Argument `direction` should be one of ASCENDING, DESCENDING. Received: "
                         f"direction={direction}")
    a = convert_to_tensor(axis, name="axis")
    av = _static_int(a)
    if a.shape.ndims not in (None, 0) or av is None:
        raise ValueError(f"Argument `axis` must be a constant scalar. Received: axis={axis}.")
    values = convert_to_tensor(values, name="values")
    if direction == "DESCENDING":
        return _descending(values, av, return_argsort)
    dt = values.dtype
    if dt.is_integer and np.dtype(dt.np).kind == "u":
        offset = convert_to_tensor(np.iinfo(dt.np).max, dtype=dt)
        out = _descending(math_ops.Sub(offset, values), av, return_argsort)
        return out if return_argsort else math_ops.Sub(offset, out)
    if dt.is_integer:
        one = convert_to_tensor(1, dtype=dt)
        out = _descending(math_ops.Sub(math_ops.Neg(values), one), av, return_argsort)
        return out if return_argsort else math_ops.Sub(math_ops.Neg(out), one)
    out = _descending(math_ops.Neg(values), av, return_argsort)
    return out if return_argsort else math_ops.Neg(out)


def sort(values, axis=-1, direction="ASCENDING", name=None):
    """`values` sorted along `axis` (tf.sort): top_k over the axis moved last, as TF builds it,
    so it has top_k's gradient. `axis` must be a constant."""
    with name_scope(name, "sort"):
        return _sort_or_argsort(values, axis, direction, return_argsort=False)


def argsort(values, axis=-1, direction="ASCENDING", stable=False, name=None):
    """The int32 indices that sort `values` along `axis` (tf.argsort). Equal values keep their
    order in both directions, so the result is always stable (TF's is too, `stable` only
    documents it)."""
    del stable
    with name_scope(name, "argsort"):
        return _sort_or_argsort(values, axis, direction, return_argsort=True)


# ---------------------------------------------------------------------------------------------
# Cumsum, Cumprod

def _infer_cumulative(inputs, attrs):
    x, axis = inputs
    if not x.dtype.is_numeric:
        raise _DTypeError(f"x must be numeric, got {x.dtype.name} ('{x.name}')")
    _check_index_dtype(axis, "axis")
    _check_rank(axis, 0, "axis")
    a, rank = _static_int(axis), x.shape.ndims
    if a is not None and rank is not None:
        if rank == 0:
            raise InferenceError(f"x must be at least 1-D, but '{x.name}' is a scalar")
        _normalize(a, rank)
    return [(x.dtype, x.shape)]


Cumsum = define_op("Cumsum", _infer_cumulative)
Cumprod = define_op("Cumprod", _infer_cumulative)


@Cumsum.gradient
def _cumsum_grad(op, grad):
    """TF's _CumsumGrad: a cumsum of the gradient the other way round."""
    if grad is None or not op.inputs[0].dtype.is_floating:
        return [None, None]
    return [Cumsum(grad, op.inputs[1], exclusive=op.attrs["exclusive"], reverse=not op.attrs["reverse"]), None]


@Cumprod.gradient
def _cumprod_grad(op, grad):
    """TF's _CumprodGrad: cumsum(cumprod(x) * grad) the other way round, divided by x (0 where x is 0)."""
    x, axis = op.inputs
    if grad is None or not x.dtype.is_floating:
        return [None, None]
    ex, rev = op.attrs["exclusive"], op.attrs["reverse"]
    prod = Cumprod(x, axis, exclusive=ex, reverse=rev)
    out = Cumsum(math_ops.Mul(prod, grad), axis, exclusive=ex, reverse=not rev)
    return [math_ops.DivNoNan(out, x), None]


def _cumulative(op_def, x, axis, exclusive, reverse, name):
    with _op_scope(name, op_def.type) as sc:
        t = convert_to_tensor(x, name="x")
        a = _to_index_tensor(axis, "axis", dtypes.int32)
        return sc.op(op_def, t, a, exclusive=bool(exclusive), reverse=bool(reverse))


def cumsum(x, axis=0, exclusive=False, reverse=False, name=None):
    """The cumulative sum of `x` along `axis` (tf.math.cumsum, op Cumsum): `exclusive` leaves
    each element out of its own sum, `reverse` sums from the end."""
    return _cumulative(Cumsum, x, axis, exclusive, reverse, name)


CumulativeLogsumexp = define_op("CumulativeLogsumexp", _infer_cumulative)


@CumulativeLogsumexp.gradient
def _cumulative_logsumexp_grad(op, grad):
    """TF's: the gradient split by sign, each part a cumulative logsumexp the other way round
    (so that no exp overflows), exponentiated back and subtracted."""
    x, axis = op.inputs
    if grad is None or not x.dtype.is_floating:
        return [None, None]
    out = op.outputs[0]
    ex, rev = op.attrs["exclusive"], op.attrs["reverse"]
    ninf = math_ops.constant(-np.inf, dtype=grad.dtype)
    zero = math_ops.constant(0, dtype=grad.dtype)

    def part(cond, mag):
        safe = math_ops.SelectV2(cond, mag, math_ops.constant(1, dtype=grad.dtype))
        log_g = math_ops.SelectV2(cond, math_ops.Log(safe), ninf)
        acc = CumulativeLogsumexp(math_ops.Sub(log_g, out), axis, exclusive=ex, reverse=not rev)
        return math_ops.Exp(math_ops.AddV2(acc, x))
    pos = part(math_ops.Greater(grad, zero), grad)
    neg = part(math_ops.Less(grad, zero), math_ops.Neg(grad))
    return [math_ops.Sub(pos, neg), None]


def cumulative_logsumexp(x, axis=0, exclusive=False, reverse=False, name=None):
    """log(cumsum(exp(x))) along `axis`, computed stably (tf.math.cumulative_logsumexp, op
    CumulativeLogsumexp); `exclusive` gives -inf first."""
    return _cumulative(CumulativeLogsumexp, x, axis, exclusive, reverse, name)


def cumprod(x, axis=0, exclusive=False, reverse=False, name=None):
    """The cumulative product of `x` along `axis` (tf.math.cumprod, op Cumprod)."""
    return _cumulative(Cumprod, x, axis, exclusive, reverse, name)


# ---------------------------------------------------------------------------------------------
# ReverseV2

def _infer_reverse(inputs, attrs):
    x, axis = inputs
    _check_index_dtype(axis, "axis")
    _check_rank(axis, 1, "axis")
    axes, rank = _static_ints(axis), x.shape.ndims
    if axes is not None and rank is not None:
        seen = set()
        for a in axes:
            if not -rank <= a < rank:
                raise InferenceError(f"axis {a} is out of range [{-rank}, {rank}) for a tensor of rank {rank}")
            if a % rank in seen:
                raise InferenceError(f"axis {a % rank} specified more than once")
            seen.add(a % rank)
    return [(x.dtype, x.shape)]


ReverseV2 = define_op("ReverseV2", _infer_reverse)


@ReverseV2.gradient
def _reverse_grad(op, grad):
    return [None if grad is None else ReverseV2(grad, op.inputs[1]), None]


def reverse(tensor, axis, name=None):
    """`tensor` with the dimensions in `axis` (a 1-D list or tensor; negative counts from the
    end) reversed (tf.reverse, op ReverseV2)."""
    with _op_scope(name, "ReverseV2") as sc:
        t = convert_to_tensor(tensor, name="tensor")
        a = _to_index_tensor(axis, "axis", dtypes.int32)
        return sc.op(ReverseV2, t, a)


reverse_v2 = reverse


# ---------------------------------------------------------------------------------------------
# Unique, UniqueWithCounts

def _infer_unique(n_out):
    def infer(inputs, attrs):
        (x,) = inputs
        _check_rank(x, 1, "x")
        out_idx = dtypes.as_dtype(attrs.get("out_idx", dtypes.int32))
        if out_idx not in (dtypes.int32, dtypes.int64):
            raise _DTypeError(f"out_idx must be int32 or int64, got {out_idx.name}")
        outs = [(x.dtype, TensorShape([None])), (out_idx, x.shape if x.shape.ndims is not None else TensorShape([None]))]
        if n_out == 3:
            outs.append((out_idx, TensorShape([None])))
        return outs
    return infer


Unique = define_op("Unique", _infer_unique(2))
UniqueWithCounts = define_op("UniqueWithCounts", _infer_unique(3))
# TF registers no gradient for either: tf.gradients through them raises LookupError, as here.


def unique(x, out_idx=dtypes.int32, name=None):
    """The distinct values of 1-D `x` in the order they first occur, and for each element of `x`
    the index of its value there (tf.unique, op Unique)."""
    with _op_scope(name, "Unique") as sc:
        t = convert_to_tensor(x, name="x")
        return sc.op(Unique, t, out_idx=dtypes.as_dtype(out_idx))


def unique_with_counts(x, out_idx=dtypes.int32, name=None):
    """tf.unique's outputs and, third, how often each distinct value occurs
    (tf.unique_with_counts, op UniqueWithCounts)."""
    with _op_scope(name, "UniqueWithCounts") as sc:
        t = convert_to_tensor(x, name="x")
        return sc.op(UniqueWithCounts, t, out_idx=dtypes.as_dtype(out_idx))



# ---------------------------------------------------------------------------------------------
# LowerBound, UpperBound (searchsorted) and repeat, whose gather indices searchsorted finds

def _infer_bound(inputs, attrs):
    seq, values = inputs
    if seq.dtype is not values.dtype:
        raise _DTypeError(f"sorted_sequence ({seq.dtype.name}) and values ({values.dtype.name}) must have the same "
                          "dtype")
    _check_real(seq, "sorted_sequence")
    out = attrs.get("out_type", dtypes.int32)
    if out not in (dtypes.int32, dtypes.int64):
        raise InferenceError(f"out_type must be int32 or int64, got {out}")
    sd, vd = seq.shape.dims, values.shape.dims
    if sd is not None and len(sd) < 1:
        raise InferenceError("sorted_sequence must have rank at least 1, got a scalar")
    if vd is not None and len(vd) < 1:
        raise InferenceError("values must have rank at least 1, got a scalar")
    if sd is not None and vd is not None:
        if len(sd) != len(vd) or not TensorShape(sd[:-1]).is_compatible_with(TensorShape(vd[:-1])):
            raise InferenceError(f"sorted_sequence {seq.shape} and values {values.shape} must have the same leading "
                                 "dimensions (all but the last)")
    return [(out, values.shape)]


LowerBound = define_op("LowerBound", _infer_bound)
UpperBound = define_op("UpperBound", _infer_bound)


def searchsorted(sorted_sequence, values, side="left", out_type=dtypes.int32, name=None):
    """For each of `values[..., j]` the index into the sorted innermost rows of `sorted_sequence`
    where it would go to keep them sorted: before equal elements for side='left' (op LowerBound),
    after them for 'right' (UpperBound) (tf.searchsorted). The leading dimensions of the two must
    agree."""
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    op = LowerBound if side == "left" else UpperBound
    with _op_scope(name, "SearchSorted") as sc:
        seq = convert_to_tensor(sorted_sequence, name="sorted_sequence")
        vals = convert_to_tensor(values, dtype=seq.dtype, name="values")
        return sc.op(op, seq, vals, out_type=dtypes.as_dtype(out_type))


def repeat(input, repeats, axis=None, name=None):  # noqa: A002
    """Repeats each element (each slice along `axis`) of `input` `repeats` times, `repeats` a scalar or
    one count per element (tf.repeat); with axis None the flattened input. Built as a gather, whose
    indices are ``searchsorted(cumsum(repeats), range(total), 'right')``, so it differentiates
    as a gather."""
    with name_scope(name, "Repeat", [input, repeats]):
        x = convert_to_tensor(input, name="input")
        if axis is None:
            x = reshaping.reshape(x, _int_const([-1]))
            axis = 0
        if x.shape.ndims is None:
            raise ValueError("repeat: input must have a known rank")
        axis = _normalize(int(axis), max(x.shape.ndims, 1), "repeat: axis")
        r = _to_index_tensor(repeats, "repeats")
        if r.shape.ndims is not None and r.shape.ndims > 1:
            raise ValueError(f"repeat: repeats must be a scalar or a vector, got shape {r.shape}")
        r = _cast(r, dtypes.int32)
        n = shapes.shape(x)[axis]
        r = math_ops.multiply(r, filling.ones(reshaping.reshape(n, _int_const([1])), dtypes.int32))  # to [n]
        ends = Cumsum(r, _int_const(0), exclusive=False, reverse=False)
        total = math_ops.reduce_sum(r)
        positions = filling.Range(_int_const(0), total, _int_const(1))
        index = UpperBound(reshaping.reshape(ends, _int_const([1, -1])),
                           reshaping.reshape(positions, _int_const([1, -1])), out_type=dtypes.int32)
        return GatherV2(x, reshaping.reshape(index, _int_const([-1])), _int_const(axis), batch_dims=0)


__all__ += ["searchsorted", "repeat"]
