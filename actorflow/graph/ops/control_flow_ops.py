"""Control-flow primitives of the paper: Switch, Merge, Enter, Exit, NextIteration, LoopCond.

They have no kernels: the runtime's control-flow actors implement them (actorflow/actors/control_flow.py).
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["switch", "merge", "enter", "exit", "next_iteration", "loop_cond"]


def _infer_switch(inputs, attrs):
    data, pred = inputs
    if pred.dtype is not dtypes.bool_:
        raise InferenceError(f"Switch predicate must be bool, got {pred.dtype.name}")
    if pred.shape.ndims not in (None, 0):
        raise InferenceError(f"Switch predicate must be a scalar, got shape {pred.shape}")
    return [(data.dtype, data.shape), (data.dtype, data.shape)]


def _infer_merge(inputs, attrs):
    d = inputs[0].dtype
    shape = inputs[0].shape
    for t in inputs[1:]:
        if t.dtype is not d:
            raise InferenceError(f"Merge inputs must have one dtype, got {d.name} and {t.dtype.name}")
        if shape.is_compatible_with(t.shape):
            if shape.dims is not None and t.shape.dims is not None:
                shape = TensorShape([a if a == b else None for a, b in zip(shape.dims, t.shape.dims)])
        else:
            shape = TensorShape(None) if shape.ndims != t.shape.ndims else TensorShape([None] * shape.ndims)
    return [(d, shape), (dtypes.int32, TensorShape([]))]


def _infer_loop_cond(inputs, attrs):
    if inputs[0].dtype is not dtypes.bool_:
        raise InferenceError(f"LoopCond input must be bool, got {inputs[0].dtype.name}")
    return [(dtypes.bool_, TensorShape([]))]


def _like(inputs, attrs):
    return [(inputs[0].dtype, inputs[0].shape)]


Switch = define_op("Switch", _infer_switch, control_flow="switch", actor="switch", placement="pass_through",
                   host_inputs=(1,))
Merge = define_op("Merge", _infer_merge, control_flow="merge", actor="merge", placement="pass_through")
Enter = define_op("Enter", _like, control_flow="enter", actor="enter", placement="pass_through")
Exit = define_op("Exit", _like, control_flow="exit", actor="exit", placement="pass_through")
NextIteration = define_op("NextIteration", _like, control_flow="next_iteration", actor="next_iteration",
                          placement="pass_through")
LoopCond = define_op("LoopCond", _infer_loop_cond, control_flow="loop_cond", actor="identity", placement="host")
ControlTrigger = define_op("ControlTrigger", lambda i, a: [], actor="noop", placement="host")


def switch(data, pred, name=None):
    """Forwards `data` to output 1 if `pred` else output 0; the other output is dead (tf.raw_ops.Switch)."""
    return Switch(data, pred, name=name)


def merge(inputs, name=None):
    """Forwards the first live input; returns (value, index of that input) (tf.raw_ops.Merge)."""
    return Merge(*inputs, N=len(inputs), name=name)


def enter(data, frame_name, is_constant=False, parallel_iterations=10, name=None):
    """Moves `data` into the child frame `frame_name` (tf.raw_ops.Enter)."""
    return Enter(data, frame_name=frame_name, is_constant=is_constant,
                 parallel_iterations=parallel_iterations, name=name)


def exit(data, name=None):  # noqa: A001 - TF's name
    """Moves `data` from a frame to its parent frame (tf.raw_ops.Exit)."""
    return Exit(data, name=name)


def next_iteration(data, name=None):
    """Makes `data` available to the next iteration (tf.raw_ops.NextIteration)."""
    return NextIteration(data, name=name)


def loop_cond(input, name=None):
    """Marks the loop-termination predicate (tf.raw_ops.LoopCond)."""
    return LoopCond(input, name=name)
