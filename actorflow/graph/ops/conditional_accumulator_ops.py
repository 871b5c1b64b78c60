"""Conditional accumulators: gradient aggregation for synchronous replicas (tf.ConditionalAccumulator).

An accumulator op (ConditionalAccumulator, SparseConditionalAccumulator) creates an accumulator
resource in the task that owns its device; the other ops take it as a reference input, so they run
there, serialized by the resource's actor. The accumulator has a global step: a gradient applied
with `local_step` below it is stale and dropped; `take_grad(n)` waits until n fresh gradients are
in, returns their average (or sum), resets, and increments the step.

actorflow extensions, all optional (TF 1.x programs never see them):
- Apply ops take two more int64 scalars, `worker` and `batch_id` (-1: unknown), named in the log
  line and counter of every dropped gradient, so that a dropped batch can be re-queued.
- `max_accumulated` (accumulator attribute): once that many fresh gradients are in for the current
  step, later ones are dropped as "late" instead of being added, so a take never averages more than
  that many.
- AccumulatorTryApplyGradient applies like AccumulatorApplyGradient and also returns what happened
  (`ACCEPTED`, `STALE`, `LATE`, `WITHDRAWN`) and the accumulator's step.
- A negative `local_step` withdraws the gradient: it is neither added nor counted as dropped (the
  caller decided elsewhere that it must not count).
- AccumulatorNumDropped reads the drop counters.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, convert_to_tensor
from actorflow.graph.indexed_slices import IndexedSlices
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.tensor_shape import TensorShape, as_shape

__all__ = ["ConditionalAccumulatorBase", "ConditionalAccumulator", "SparseConditionalAccumulator",
           "ACCEPTED", "STALE", "LATE", "WITHDRAWN"]

# Outcomes of AccumulatorTryApplyGradient (its first output).
ACCEPTED, STALE, LATE, WITHDRAWN = 0, 1, 2, 3

_DROP_KINDS = ("all", "stale", "late", "late_last_take")


def _infer_accumulator(inputs, attrs):
    dt = attrs["dtype"]
    if not dt.is_floating:
        raise InferenceError(f"accumulators hold floating-point gradients, got dtype {dt.name}")
    if attrs.get("reduction_type", "MEAN") not in ("MEAN", "SUM"):
        raise InferenceError(f"reduction_type must be 'MEAN' or 'SUM', got {attrs['reduction_type']!r}")
    if int(attrs.get("max_accumulated", 0)) < 0:
        raise InferenceError(f"max_accumulated must be >= 0 (0: no limit), got {attrs['max_accumulated']}")
    return [(dtypes.resource, TensorShape([]))]


ConditionalAccumulator_ = define_op("ConditionalAccumulator", _infer_accumulator, stateful=True,
                                    resource="accumulator", actor="handle")
SparseConditionalAccumulator_ = define_op("SparseConditionalAccumulator", _infer_accumulator, stateful=True,
                                          resource="accumulator", actor="handle")


# -- input checks ------------------------------------------------------------------------------------
def _handle(t, sparse=None):
    if t.op.op_def.resource != "accumulator":
        raise InferenceError(f"input '{t.name}' must be an accumulator handle, got the output of a {t.op.type} op")
    is_sparse = t.op.type == "SparseConditionalAccumulator"
    if sparse is not None and is_sparse != sparse:
        want = "SparseConditionalAccumulator" if sparse else "ConditionalAccumulator"
        raise InferenceError(f"accumulator '{t.op.name}' is a {t.op.type}, this op needs a {want}")
    return t.op.attrs["dtype"], as_shape(t.op.attrs.get("shape", TensorShape(None)))


def _int_scalar(t, what, dtype=dtypes.int64):
    if t.dtype is not dtype:
        raise InferenceError(f"{what} must be {dtype.name}, got {t.dtype.name} ('{t.name}')")
    if t.shape.ndims not in (None, 0):
        raise InferenceError(f"{what} must be a scalar, got shape {t.shape} ('{t.name}')")


def _check_info(inputs, first):
    """The optional trailing (worker, batch_id) inputs of the apply ops."""
    extra = inputs[first:]
    if len(extra) not in (0, 2):
        raise InferenceError(f"expects either no reporting inputs or both worker and batch_id, got {len(extra)}")
    for t, what in zip(extra, ("worker", "batch_id")):
        _int_scalar(t, what)


def _infer_apply(inputs, attrs):
    if len(inputs) < 3:
        raise InferenceError("expects (handle, local_step, gradient[, worker, batch_id])")
    dt, shape = _handle(inputs[0], sparse=False)
    _int_scalar(inputs[1], "local_step")
    g = inputs[2]
    if g.dtype is not dt:
        raise InferenceError(f"accumulator '{inputs[0].op.name}' holds {dt.name} gradients, got {g.dtype.name}")
    if not shape.is_compatible_with(g.shape):
        raise InferenceError(f"Shape mismatch: accumulator '{inputs[0].op.name}' has shape {shape}, "
                             f"got a gradient of shape {g.shape}")
    _check_info(inputs, 3)
    return []


def _infer_try_apply(inputs, attrs):
    if len(inputs) != 5:
        raise InferenceError("expects (handle, local_step, gradient, worker, batch_id)")
    _infer_apply(inputs, attrs)
    return [(dtypes.int32, TensorShape([])), (dtypes.int64, TensorShape([]))]


def _infer_sparse_apply(inputs, attrs):
    if len(inputs) < 5:
        raise InferenceError("expects (handle, local_step, gradient_indices, gradient_values, gradient_shape"
                             "[, worker, batch_id])")
    dt, shape = _handle(inputs[0], sparse=True)
    _int_scalar(inputs[1], "local_step")
    idx, vals, dense = inputs[2], inputs[3], inputs[4]
    if idx.dtype is not dtypes.int64 or idx.shape.ndims not in (None, 1):
        raise InferenceError(f"gradient_indices must be an int64 vector, got {idx.dtype.name} {idx.shape}")
    if vals.dtype is not dt:
        raise InferenceError(f"accumulator '{inputs[0].op.name}' holds {dt.name} gradients, got {vals.dtype.name}")
    if vals.shape.ndims == 0:
        raise InferenceError("Values cannot be 0-dimensional.")
    if shape.ndims is not None and vals.shape.ndims is not None:
        if vals.shape.ndims != shape.ndims:
            raise InferenceError(f"Shape mismatch: accumulator '{inputs[0].op.name}' has shape {shape}, got values "
                                 f"of rank {vals.shape.ndims}")
        if not TensorShape(shape.dims[1:]).is_compatible_with(TensorShape(vals.shape.dims[1:])):
            raise InferenceError(f"Shape mismatch: accumulator '{inputs[0].op.name}' has rows of shape "
                                 f"{TensorShape(shape.dims[1:])}, got values of shape {vals.shape}")
    if dense.dtype is not dtypes.int64 or dense.shape.ndims not in (None, 1):
        raise InferenceError(f"gradient_shape must be an int64 vector, got {dense.dtype.name} {dense.shape}")
    _check_info(inputs, 5)
    return []


def _num_required(t):
    _int_scalar(t, "num_required", dtypes.int32)


def _infer_take(inputs, attrs):
    dt, shape = _handle(inputs[0], sparse=False)
    _num_required(inputs[1])
    return [(dt, shape)]


def _infer_sparse_take(inputs, attrs):
    dt, shape = _handle(inputs[0], sparse=True)
    _num_required(inputs[1])
    rows = TensorShape(None) if shape.ndims is None else TensorShape([None] + list(shape.dims[1:]))
    rank = shape.ndims
    return [(dtypes.int64, TensorShape([None])), (dt, rows), (dtypes.int64, TensorShape([rank]))]


def _infer_num(inputs, attrs):
    _handle(inputs[0])
    return [(dtypes.int32, TensorShape([]))]


def _infer_set_step(inputs, attrs):
    _handle(inputs[0])
    _int_scalar(inputs[1], "new_global_step")
    return []


def _infer_dropped(inputs, attrs):
    _handle(inputs[0])
    if attrs.get("kind", "all") not in _DROP_KINDS:
        raise InferenceError(f"kind must be one of {_DROP_KINDS}, got {attrs['kind']!r}")
    return [(dtypes.int64, TensorShape([]))]


AccumulatorApplyGradient = define_op("AccumulatorApplyGradient", _infer_apply, ref_inputs=(0,), actor="resource", stateful=True)
AccumulatorTryApplyGradient = define_op("AccumulatorTryApplyGradient", _infer_try_apply, ref_inputs=(0,), actor="resource",
                                        stateful=True)
AccumulatorTakeGradient = define_op("AccumulatorTakeGradient", _infer_take, ref_inputs=(0,), actor="resource", stateful=True)
AccumulatorNumAccumulated = define_op("AccumulatorNumAccumulated", _infer_num, ref_inputs=(0,), actor="resource", stateful=True)
AccumulatorSetGlobalStep = define_op("AccumulatorSetGlobalStep", _infer_set_step, ref_inputs=(0,), actor="resource", stateful=True)
AccumulatorNumDropped = define_op("AccumulatorNumDropped", _infer_dropped, ref_inputs=(0,), actor="resource", stateful=True)
SparseAccumulatorApplyGradient = define_op("SparseAccumulatorApplyGradient", _infer_sparse_apply, ref_inputs=(0,), actor="resource",
                                           stateful=True)
SparseAccumulatorTakeGradient = define_op("SparseAccumulatorTakeGradient", _infer_sparse_take, ref_inputs=(0,), actor="resource",
                                          stateful=True)


# -- Python API ----------------------------------------------------------------------------------------
def _step(local_step):
    from actorflow.graph.ops.math_ops import cast
    t = convert_to_tensor(local_step, dtype=dtypes.int64) if not isinstance(local_step, Tensor) else local_step
    return t if t.dtype is dtypes.int64 else cast(t, dtypes.int64)


def _info(worker, batch_id):
    if worker is None and batch_id is None:
        return []
    return [_step(-1 if worker is None else worker), _step(-1 if batch_id is None else batch_id)]


class ConditionalAccumulatorBase:
    """What both accumulators share (tf.ConditionalAccumulatorBase)."""

    def __init__(self, dtype, shape, accumulator_ref):
        self._dtype = dtype
        self._shape = shape
        self._accumulator_ref = accumulator_ref

    @property
    def accumulator_ref(self) -> Tensor:
        """The handle tensor of the accumulator."""
        return self._accumulator_ref

    @property
    def name(self) -> str:
        return self._accumulator_ref.op.name

    @property
    def dtype(self):
        return self._dtype

    def num_accumulated(self, name=None):
        """The number of fresh gradients accumulated for the current step, int32
        (tf.ConditionalAccumulatorBase.num_accumulated)."""
        return AccumulatorNumAccumulated(self._accumulator_ref, name=name or "num_accumulated")

    def set_global_step(self, new_global_step, name=None):
        """Sets the accumulator's global step; gradients with a smaller local step are stale from
        now on (tf.ConditionalAccumulatorBase.set_global_step). A smaller value than the current
        one is allowed (and logged), as in TF."""
        return AccumulatorSetGlobalStep(self._accumulator_ref, _step(new_global_step),
                                        name=name or "AccumulatorSetGlobalStep")

    def num_dropped(self, kind="all", name=None):
        """How many gradients this accumulator has dropped since it was created, int64
        (actorflow extension; TF drops them silently). `kind`: "stale" (local step behind the
        accumulator's), "late" (fresh, but the step already had `max_accumulated`), "all", or
        "late_last_take" (late gradients of the step the most recent take completed)."""
        return AccumulatorNumDropped(self._accumulator_ref, kind=kind, name=name or "num_dropped")


class ConditionalAccumulator(ConditionalAccumulatorBase):
    """Aggregates dense gradients of one step (tf.ConditionalAccumulator).

    `max_accumulated` (actorflow extension, 0 = no limit): fresh gradients beyond that many per step
    are dropped as late, so exactly `max_accumulated` gradients are averaged.
    """

    def __init__(self, dtype, shape=None, shared_name=None, name="conditional_accumulator",
                 reduction_type="MEAN", max_accumulated=0):
        dtype = dtypes.as_dtype(dtype)
        shape = as_shape(shape) if shape is not None else TensorShape(None)
        ref = ConditionalAccumulator_(dtype=dtype, shape=shape, container="", shared_name=shared_name or "",
                                      reduction_type=reduction_type, max_accumulated=int(max_accumulated or 0),
                                      name=name)
        super().__init__(dtype, shape, ref)

    def apply_grad(self, grad, local_step=0, name=None, worker=None, batch_id=None):
        """Adds `grad` unless it is stale (local_step below the accumulator's global step), in which
        case it is dropped, counted and logged (tf.ConditionalAccumulator.apply_grad). `worker` and
        `batch_id` (int64 scalars, actorflow extension) name the gradient in that report."""
        grad = convert_to_tensor(grad, dtype=self._dtype)
        return AccumulatorApplyGradient(self._accumulator_ref, _step(local_step), grad, *_info(worker, batch_id),
                                        name=name or "AccumulatorApplyGradient")

    def try_apply_grad(self, grad, local_step=0, worker=None, batch_id=None, name=None):
        """Like `apply_grad`, returning `(status, global_step)`: status is ACCEPTED, STALE, LATE or
        WITHDRAWN (int32), global_step the accumulator's step after the attempt (actorflow extension)."""
        grad = convert_to_tensor(grad, dtype=self._dtype)
        info = _info(-1 if worker is None else worker, batch_id)
        return AccumulatorTryApplyGradient(self._accumulator_ref, _step(local_step), grad, *info,
                                           name=name or "AccumulatorTryApplyGradient")

    def take_grad(self, num_required, name=None):
        """Waits until `num_required` fresh gradients are in, then returns their average (or sum),
        resets the accumulator and increments its global step (tf.ConditionalAccumulator.take_grad)."""
        n = convert_to_tensor(num_required, dtype=dtypes.int32)
        out = AccumulatorTakeGradient(self._accumulator_ref, n, dtype=self._dtype,
                                      name=name or "AccumulatorTakeGradient")
        if self._shape.ndims is not None:
            out.set_shape(self._shape)
        return out


class SparseConditionalAccumulator(ConditionalAccumulatorBase):
    """Aggregates sparse (IndexedSlices) gradients of one step (tf.SparseConditionalAccumulator).

    With reduction "MEAN" each row is divided by the number of gradients that contained it, as in TF.
    Duplicate indices within one gradient are summed first and count once.
    """

    def __init__(self, dtype, shape=None, shared_name=None, name="sparse_conditional_accumulator",
                 reduction_type="MEAN", max_accumulated=0):
        dtype = dtypes.as_dtype(dtype)
        shape = as_shape(shape) if shape is not None else TensorShape(None)
        ref = SparseConditionalAccumulator_(dtype=dtype, shape=shape, container="", shared_name=shared_name or "",
                                            reduction_type=reduction_type,
                                            max_accumulated=int(max_accumulated or 0), name=name)
        super().__init__(dtype, shape, ref)

    def apply_grad(self, grad_indices, grad_values, grad_shape=None, local_step=0, name=None, worker=None,
                   batch_id=None):
        """Adds the sparse gradient (indices, values, dense shape) unless it is stale
        (tf.SparseConditionalAccumulator.apply_grad); `worker`/`batch_id` as for ConditionalAccumulator."""
        from actorflow.graph.ops.math_ops import cast
        idx = convert_to_tensor(grad_indices)
        if idx.dtype is not dtypes.int64:
            idx = cast(idx, dtypes.int64)
        vals = convert_to_tensor(grad_values, dtype=self._dtype)
        known = grad_shape is not None
        if known:
            shp = convert_to_tensor(grad_shape)
            if shp.dtype is not dtypes.int64:
                shp = cast(shp, dtypes.int64)
        else:
            shp = convert_to_tensor([], dtype=dtypes.int64)
        return SparseAccumulatorApplyGradient(self._accumulator_ref, _step(local_step), idx, vals, shp,
                                              *_info(worker, batch_id), has_known_shape=known,
                                              name=name or "SparseAccumulatorApplyGradient")

    def apply_indexed_slices_grad(self, grad, local_step=0, name=None, worker=None, batch_id=None):
        """Adds an IndexedSlices gradient (tf.SparseConditionalAccumulator.apply_indexed_slices_grad)."""
        if not isinstance(grad, IndexedSlices):
            raise TypeError(f"accumulator '{self.name}': expected an IndexedSlices gradient, got {grad!r}")
        return self.apply_grad(grad.indices, grad.values, grad.dense_shape, local_step=local_step, name=name,
                               worker=worker, batch_id=batch_id)

    def take_grad(self, num_required, name=None):
        """Waits for `num_required` fresh gradients; returns (indices, values, shape) of their
        row-wise average (tf.SparseConditionalAccumulator.take_grad)."""
        n = convert_to_tensor(num_required, dtype=dtypes.int32)
        return SparseAccumulatorTakeGradient(self._accumulator_ref, n, dtype=self._dtype,
                                             name=name or "SparseAccumulatorTakeGradient")

    def take_indexed_slices_grad(self, num_required, name=None):
        """`take_grad` as an IndexedSlices (tf.SparseConditionalAccumulator.take_indexed_slices_grad)."""
        idx, vals, shape = self.take_grad(num_required, name=name)
        return IndexedSlices(vals, idx, shape)
