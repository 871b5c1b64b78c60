"""Segment reductions: SegmentSum/Mean/Max/Min/Prod (sorted segment ids) and
UnsortedSegmentMax/Min/Prod (UnsortedSegmentSum is in array_ops/gathering.py), with TF's gradients,
and the TF 1.x wrappers, unsorted_segment_mean and unsorted_segment_sqrt_n included (built, as in TF,
from UnsortedSegmentSum and a count of each segment's rows).

TF-1.x counterparts: tf.compat.v1.segment_sum ... segment_prod, tf.compat.v1.unsorted_segment_max,
..._min, ..._prod, ..._mean, ..._sqrt_n (top level and under tf.math).
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.array_ops import filling, joining, reshaping, shapes
from actorflow.graph.ops.array_ops._args import _int_const, _op_scope, _to_index_tensor
from actorflow.graph.ops.array_ops._infer import _check_index_dtype, _check_rank, _DTypeError, _unknown
from actorflow.graph.ops.array_ops.gathering import (
    UnsortedSegmentSum,
    _gather_drop_negatives,
    _infer_unsorted_segment_sum,
    gather,
)
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["segment_sum", "segment_mean", "segment_max", "segment_min", "segment_prod", "unsorted_segment_max",
           "unsorted_segment_min", "unsorted_segment_prod", "unsorted_segment_mean", "unsorted_segment_sqrt_n"]


def _infer_segment(inputs, attrs):
    """TF's SegmentReductionShapeFn: 1-D ids as long as data's first dimension; [?] + data[1:]."""
    data, ids = inputs
    if not data.dtype.is_numeric:
        raise _DTypeError(f"data must be numeric, got {data.dtype.name}")
    _check_index_dtype(ids, "segment_ids")
    _check_rank(ids, 1, "segment_ids")
    if data.shape.dims is None:
        return _unknown(data.dtype)
    if not data.shape.dims:
        raise InferenceError(f"data must be at least 1-D, but '{data.name}' is a scalar")
    n, m = data.shape.dims[0], ids.shape.dims[0] if ids.shape.dims else None
    if n is not None and m is not None and n != m:
        raise InferenceError(f"segment_ids should be the same size as dimension 0 of data: {m} != {n}")
    return [(data.dtype, TensorShape([None] + list(data.shape.dims[1:])))]


def _infer_unsorted(inputs, attrs):
    """UnsortedSegmentSum's inference (ids' shape a prefix of data's; [num_segments] + the rest)."""
    return _infer_unsorted_segment_sum(inputs, attrs)


SegmentSum = define_op("SegmentSum", _infer_segment)
SegmentMean = define_op("SegmentMean", _infer_segment)
SegmentMax = define_op("SegmentMax", _infer_segment)
SegmentMin = define_op("SegmentMin", _infer_segment)
SegmentProd = define_op("SegmentProd", _infer_segment)
UnsortedSegmentMax = define_op("UnsortedSegmentMax", _infer_unsorted)
UnsortedSegmentMin = define_op("UnsortedSegmentMin", _infer_unsorted)
UnsortedSegmentProd = define_op("UnsortedSegmentProd", _infer_unsorted)


# ---------------------------------------------------------------------------------------------
# Gradients (TF's math_grad.py formulas); integer data gets none.

def _float_grad(fn):
    def grad_fn(op, grad):
        if grad is None or not op.inputs[0].dtype.is_floating:
            return [None] * len(op.inputs)
        return [fn(op, grad)] + [None] * (len(op.inputs) - 1)
    grad_fn.__name__ = fn.__name__
    grad_fn.__doc__ = fn.__doc__
    return grad_fn


@SegmentSum.gradient
@_float_grad
def _segment_sum_grad(op, grad):
    return gather(grad, op.inputs[1])


@SegmentMean.gradient
@_float_grad
def _segment_mean_grad(op, grad):
    """The gradient of each segment divided by its row count, gathered back to the rows."""
    data, ids = op.inputs
    counts = SegmentSum(filling.ones_like(data), ids)
    # TF divides; an empty segment's 0/0 is never gathered, so DivNoNan gives the same gradient
    # without computing infinities.
    return gather(math_ops.DivNoNan(grad, counts), ids)


def _segment_min_or_max_grad(op, grad):
    """TF's _SegmentMinOrMaxGrad: the gradient of a segment split evenly among the rows that hit
    its extreme value."""
    data, ids = op.inputs
    is_selected = math_ops.Equal(data, gather(op.outputs[0], ids))
    num_selected = SegmentSum(math_ops.Cast(is_selected, DstT=grad.dtype), ids)
    weighted = math_ops.DivNoNan(grad, num_selected)     # 0 only in empty segments, never gathered
    return math_ops.SelectV2(is_selected, gather(weighted, ids), filling.zeros_like(data))


SegmentMax.gradient(_float_grad(_segment_min_or_max_grad))
SegmentMin.gradient(_float_grad(_segment_min_or_max_grad))


def _prod_grad(op, grad, sum_op, prod_op, gather_fn, extra):
    """TF's _SegmentProdGrad / _UnsortedSegmentProdGrad: divide the product by each row, except
    in segments with zeros (one zero: only it gets the others' product; two or more: none)."""
    data, ids = op.inputs[0], op.inputs[1]
    zero = convert_to_tensor(0, dtype=data.dtype)
    is_zero = math_ops.Equal(data, zero)
    num_zeros = sum_op(math_ops.Cast(is_zero, DstT=dtypes.int32), ids, *extra)
    grad = math_ops.SelectV2(math_ops.Greater(num_zeros, _int_const(1)), filling.zeros_like(grad), grad)
    non_zero_data = math_ops.SelectV2(is_zero, filling.ones_like(data), data)
    non_zero_prod = prod_op(non_zero_data, ids, *extra)
    gathered_prod = gather_fn(op.outputs[0], ids)
    gathered_non_zero_prod = gather_fn(non_zero_prod, ids)
    partial = math_ops.SelectV2(is_zero, gathered_non_zero_prod, math_ops.RealDiv(gathered_prod, non_zero_data))
    return math_ops.Mul(gather_fn(grad, ids), partial)


@SegmentProd.gradient
@_float_grad
def _segment_prod_grad(op, grad):
    return _prod_grad(op, grad, SegmentSum, SegmentProd, gather, ())


@UnsortedSegmentProd.gradient
@_float_grad
def _unsorted_segment_prod_grad(op, grad):
    return _prod_grad(op, grad, UnsortedSegmentSum, UnsortedSegmentProd, _gather_drop_negatives, (op.inputs[2],))


def _unsorted_min_or_max_grad(op, grad):
    """TF's _UnsortedSegmentMinOrMaxGrad: as the sorted one; rows with negative ids get none."""
    data, ids, num = op.inputs
    gathered = _gather_drop_negatives(op.outputs[0], ids)
    is_positive = math_ops.Greater(_gather_drop_negatives(filling.ones_like(op.outputs[0]), ids),
                                   convert_to_tensor(0, dtype=data.dtype))
    is_selected = math_ops.LogicalAnd(math_ops.Equal(data, gathered), is_positive)
    num_selected = UnsortedSegmentSum(math_ops.Cast(is_selected, DstT=grad.dtype), ids, num)
    weighted = _gather_drop_negatives(math_ops.DivNoNan(grad, num_selected), ids)
    return math_ops.SelectV2(is_selected, weighted, filling.zeros_like(weighted))


UnsortedSegmentMax.gradient(_float_grad(_unsorted_min_or_max_grad))
UnsortedSegmentMin.gradient(_float_grad(_unsorted_min_or_max_grad))


# ---------------------------------------------------------------------------------------------
# Wrappers

def _sorted(op_def, data, segment_ids, name):
    with _op_scope(name, op_def.type) as sc:
        d = convert_to_tensor(data, name="data")
        ids = convert_to_tensor(segment_ids, name="segment_ids")
        return sc.op(op_def, d, ids)


def segment_sum(data, segment_ids, name=None):
    """Sums the rows of `data` by sorted `segment_ids` (tf.math.segment_sum): the output has
    ``segment_ids[-1] + 1`` rows, empty segments 0. Unsorted ids fail the step
    (InvalidArgumentError naming the op)."""
    return _sorted(SegmentSum, data, segment_ids, name)


def segment_mean(data, segment_ids, name=None):
    """The mean of each segment's rows (tf.math.segment_mean); empty segments 0."""
    return _sorted(SegmentMean, data, segment_ids, name)


def segment_max(data, segment_ids, name=None):
    """The maximum of each segment's rows (tf.math.segment_max); empty segments 0."""
    return _sorted(SegmentMax, data, segment_ids, name)


def segment_min(data, segment_ids, name=None):
    """The minimum of each segment's rows (tf.math.segment_min); empty segments 0."""
    return _sorted(SegmentMin, data, segment_ids, name)


def segment_prod(data, segment_ids, name=None):
    """The product of each segment's rows (tf.math.segment_prod); empty segments 1."""
    return _sorted(SegmentProd, data, segment_ids, name)


def _unsorted(op_def, data, segment_ids, num_segments, name):
    with _op_scope(name, op_def.type) as sc:
        d = convert_to_tensor(data, name="data")
        ids = convert_to_tensor(segment_ids, name="segment_ids")
        n = _to_index_tensor(num_segments, "num_segments")
        return sc.op(op_def, d, ids, n)


def unsorted_segment_max(data, segment_ids, num_segments, name=None):
    """The maximum of the rows of each of `num_segments` segments (tf.math.unsorted_segment_max);
    empty segments get the dtype's lowest value, negative ids are dropped."""
    return _unsorted(UnsortedSegmentMax, data, segment_ids, num_segments, name)


def unsorted_segment_min(data, segment_ids, num_segments, name=None):
    """The minimum per segment (tf.math.unsorted_segment_min); empty segments get the dtype's
    highest value."""
    return _unsorted(UnsortedSegmentMin, data, segment_ids, num_segments, name)


def unsorted_segment_prod(data, segment_ids, num_segments, name=None):
    """The product per segment (tf.math.unsorted_segment_prod); empty segments 1."""
    return _unsorted(UnsortedSegmentProd, data, segment_ids, num_segments, name)


def _segment_counts(data, ids, num):
    """TF's _unsorted_segment_N: rows per segment, at least 1, shaped to broadcast against the sums."""
    n = UnsortedSegmentSum(filling.ones_like(ids, dtype=data.dtype), ids, num)
    dr, ir = data.shape.ndims, ids.shape.ndims
    if dr is not None and ir is not None:
        extra = _int_const([1] * (dr - ir), num.dtype)
    else:
        extra = filling.Fill(reshaping.expand_dims(math_ops.Sub(shapes.rank_of(data), shapes.rank_of(ids)), 0),
                             convert_to_tensor(1, dtype=num.dtype))
    n = reshaping.reshape(n, joining.concat([reshaping.reshape(num, _int_const([1])), extra], 0))
    return math_ops.Maximum(n, convert_to_tensor(1, dtype=data.dtype))


def _unsorted_composite(data, segment_ids, num_segments, name, default, finish):
    with _op_scope(name, default) as sc:
        d = convert_to_tensor(data, name="data")
        ids = convert_to_tensor(segment_ids, name="segment_ids")
        num = _to_index_tensor(num_segments, "num_segments")
        if not d.dtype.is_floating:
            raise TypeError(f"{default}: data must be floating-point, got {d.dtype.name}")
        counts = _segment_counts(d, ids, num)
        summed = UnsortedSegmentSum(d, ids, num)
        return math_ops.RealDiv(summed, finish(counts), name=sc.name)


def unsorted_segment_mean(data, segment_ids, num_segments, name=None):
    """The mean per segment (tf.math.unsorted_segment_mean): the UnsortedSegmentSum divided by the
    row count (at least 1), as TF builds it; empty segments 0."""
    return _unsorted_composite(data, segment_ids, num_segments, name, "UnsortedSegmentMean", lambda n: n)


def unsorted_segment_sqrt_n(data, segment_ids, num_segments, name=None):
    """The sum per segment divided by the square root of its row count
    (tf.math.unsorted_segment_sqrt_n), as TF builds it."""
    return _unsorted_composite(data, segment_ids, num_segments, name, "UnsortedSegmentSqrtN", math_ops.Sqrt)

