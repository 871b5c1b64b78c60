"""Step-local accumulators: where a forward while loop saves the values its gradient loop needs.

The paper's gradient of a loop replays the forward iterations in reverse, so each value the backward
body reads must be kept per iteration. `AccumulatorV2` creates, once per step, an empty table (a
`resource` handle); `AccumulatorPush(handle, value, *index)` stores `value` under the iteration index
(one int per enclosing loop, outermost first), and `AccumulatorPop(handle, *index)` removes and
returns it. Keying by index, not by order, keeps this correct when iterations run in parallel and
finish out of order. The table lives as long as the step that created it.

TF-1.x counterpart: the StackV2/StackPushV2/StackPopV2 ops that TF's while-loop gradients use; these
are actorflow's own (keyed instead of last-in first-out).
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.tensor_shape import TensorShape, as_shape

__all__ = ["accumulator", "accumulator_push", "accumulator_pop", "AccumulatorV2", "AccumulatorPush",
           "AccumulatorPop"]

_INDEX = (dtypes.int32, dtypes.int64)


def _check_handle(t):
    if t.dtype is not dtypes.resource:
        raise InferenceError(f"expects an accumulator handle (resource) as input 0, got {t.dtype.name}")


def _check_index(keys):
    if not keys:
        raise InferenceError("needs at least one iteration index")
    for k in keys:
        if k.dtype not in _INDEX:
            raise InferenceError(f"iteration indices must be int32 or int64, got {k.dtype.name}")
        if k.shape.ndims not in (None, 0):
            raise InferenceError(f"iteration indices must be scalars, got shape {k.shape}")


def _infer_accumulator(inputs, attrs):
    return [(dtypes.resource, TensorShape([]))]


def _infer_push(inputs, attrs):
    if len(inputs) < 3:
        raise InferenceError("AccumulatorPush takes (handle, value, *index)")
    _check_handle(inputs[0])
    _check_index(inputs[2:])
    if attrs.get("N") != len(inputs) - 2:
        raise InferenceError(f"attr N={attrs.get('N')} does not match {len(inputs) - 2} index inputs")
    return []


def _infer_pop(inputs, attrs):
    if len(inputs) < 2:
        raise InferenceError("AccumulatorPop takes (handle, *index)")
    _check_handle(inputs[0])
    _check_index(inputs[1:])
    if attrs.get("N") != len(inputs) - 1:
        raise InferenceError(f"attr N={attrs.get('N')} does not match {len(inputs) - 1} index inputs")
    return [(dtypes.as_dtype(attrs["dtype"]), as_shape(attrs.get("shape")))]


AccumulatorV2 = define_op("AccumulatorV2", _infer_accumulator, stateful=True, placement="host")
AccumulatorPush = define_op("AccumulatorPush", _infer_push, stateful=True)
AccumulatorPop = define_op("AccumulatorPop", _infer_pop, stateful=True)

# No gradients flow through saved values: the loop gradient builder uses them as constants.
for _d in (AccumulatorV2, AccumulatorPush, AccumulatorPop):
    _d.gradient(lambda op, *grads: [None] * len(op.inputs))
del _d


def accumulator(tensor_name="", name=None):
    """A new step-local table of saved values; `tensor_name` names what it saves in error messages."""
    return AccumulatorV2(tensor_name=tensor_name, name=name)


def accumulator_push(handle, value, index, name=None):
    """Saves `value` under the iteration `index` (a list of int scalars, outermost loop first)."""
    index = list(index)
    return AccumulatorPush(handle, value, *index, N=len(index), name=name)


def accumulator_pop(handle, index, dtype, shape=None, name=None):
    """Removes and returns the value saved under `index`; fails the step if there is none."""
    index = list(index)
    return AccumulatorPop(handle, *index, N=len(index), dtype=dtypes.as_dtype(dtype), shape=as_shape(shape),
                          name=name)
