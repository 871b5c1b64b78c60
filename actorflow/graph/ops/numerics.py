"""NaN and infinity checks: the CheckNumerics op, `check_numerics`, `verify_tensor_all_finite` and
`add_check_numerics_ops` (tf.debugging.check_numerics and tensorflow/python/ops/numerics.py).

CheckNumerics passes its input through unchanged and fails its step with InvalidArgumentError,
"<message> : Tensor had NaN values" in TF's words, when the input holds a NaN or an infinity; the
message then goes on to give the first bad element's value and index, which TF does not, and the
runtime adds the op's name. Its gradient checks the incoming gradient the same way, as TF's does.
"""
from __future__ import annotations

import contextlib

from actorflow.graph.device_spec import DeviceSpec
from actorflow.graph.graph import (
    Tensor,
    control_dependencies,
    convert_to_tensor,
    device,
    get_default_graph,
    name_scope,
)
from actorflow.graph.indexed_slices import IndexedSlices
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops.constant import group, identity

__all__ = ["check_numerics", "verify_tensor_all_finite", "add_check_numerics_ops", "enable_check_numerics",
           "disable_check_numerics"]


class _DTypeError(InferenceError, TypeError):
    """A dtype mistake: a ValueError like every inference error, and a TypeError like in TF."""


def _infer_check_numerics(inputs, attrs):
    (x,) = inputs
    if not x.dtype.is_floating:
        raise _DTypeError(f"check_numerics needs a floating-point tensor (half, float or double), "
                          f"got {x.dtype.name}")
    if not isinstance(attrs.get("message", ""), str):
        raise InferenceError(f"CheckNumerics' message must be a string, got {type(attrs['message']).__name__}")
    return [(x.dtype, x.shape)]


# Passes `tensor` through; fails the step if it holds a NaN or an infinity. Stateful, as in TF: two
# checks of one tensor with different messages are not one op, and none is ever dropped by an
# optimization for computing nothing new.
CheckNumerics = define_op("CheckNumerics", _infer_check_numerics, stateful=True)


@CheckNumerics.gradient
def _check_numerics_grad(op, grad):
    if grad is None:
        return [None]
    message = ("Not a number (NaN) or infinity (Inf) values detected in gradient. "
               + op.attrs.get("message", ""))
    if isinstance(grad, IndexedSlices):
        return [IndexedSlices(CheckNumerics(grad.values, message=message), grad.indices, grad.dense_shape)]
    return [CheckNumerics(grad, message=message)]


def _on_task_of(t: Tensor):
    """A device scope naming the job and task of `t`'s op, not its device type: the check runs in
    the process that holds the data (no copy across the network), and on its CPU when the data is
    on a GPU (CheckNumerics has CPU kernels only; colocating, as TF does, would pull the producer
    off the GPU with it)."""
    spec = DeviceSpec.from_string(t.op.device)
    if spec.job is None and spec.task is None:
        return contextlib.nullcontext()
    return device(DeviceSpec(spec.job, spec.replica, spec.task).to_string())


def check_numerics(tensor, message, name=None):
    """Returns `tensor` unchanged; running it fails the step with InvalidArgumentError if `tensor`
    holds a NaN or an infinity (tf.debugging.check_numerics).

    The error reads "<message> : Tensor had NaN values" (or "Inf", or "Inf and NaN", as in TF),
    followed by the first bad element's value and index (actorflow's addition) and the op's name.
    The gradient is the incoming gradient, checked the same way.
    """
    if not isinstance(message, str):
        raise TypeError(f"check_numerics: message must be a string, got {type(message).__name__}")
    return CheckNumerics(convert_to_tensor(tensor), message=message, name=name)


def verify_tensor_all_finite(t=None, msg=None, name=None, x=None, message=None):
    """Returns `t` after a check that it holds no NaN or infinity (tf.compat.v1.verify_tensor_all_finite,
    also tf.compat.v1.debugging.assert_all_finite).

    The returned tensor depends on a CheckNumerics of `t` with message `msg`, on `t`'s task (TF
    colocates it with `t`; here a GPU producer keeps its GPU), so running it fails the step with
    InvalidArgumentError naming that op. `x` and `message` are the newer names of `t` and `msg`.
    """
    if x is not None and t is not None:
        raise ValueError("Cannot specify both 't' and 'x'")
    if message is not None and msg is not None:
        raise ValueError("Cannot specify both 'msg' and 'message'")
    t = x if t is None else t
    msg = message if msg is None else msg
    if t is None:
        raise ValueError("verify_tensor_all_finite needs a tensor ('t' or 'x')")
    with name_scope(name, "VerifyFinite", [t if isinstance(t, Tensor) else None]):
        t = convert_to_tensor(t, name="x")
        with _on_task_of(t):
            verify = check_numerics(t, message="" if msg is None else str(msg))
            with control_dependencies([verify]):
                return identity(t)


def add_check_numerics_ops():
    """Adds a CheckNumerics on every half, float and double tensor of the default graph and
    returns a group op of them all (tf.compat.v1.add_check_numerics_ops).

    Each check's message is "<op name>:<output index>"; the checks are chained by control edges in
    graph order, so the checks of an op's inputs run before those of its outputs and the first
    failure reported is the earliest bad tensor. Each check runs on its tensor's task (TF leaves
    them to the placer). Fetched beside a training op, the group fails the step whose values went
    NaN or infinite, but the update may already be applied; built under
    `af.control_dependencies([group])`, the update waits for every check and is never applied with
    bad values (the variables keep their values from before the step). Like TF, refuses graphs
    with cond or while_loop (ValueError): a check outside a branch or loop frame cannot see its
    tensors. Variables and their updates are not checked, as in TF (their outputs are references);
    the reads of variables are.
    """
    from actorflow.graph.control_flow import context_of
    graph = get_default_graph()
    check = []
    for op in list(graph.get_operations()):
        for out in op.outputs:
            # A variable and the ops that update one (Assign, Apply*, Scatter*) output its
            # reference in TF (float32_ref), which TF skips: checking them would re-run every
            # initializer and update with each check. The variable's reads are checked.
            if not out.dtype.is_floating or op.op_def.resource is not None or op.op_def.ref_inputs:
                continue
            if op.op_def.control_flow is not None or context_of(op) is not None:
                raise ValueError("`af.add_check_numerics_ops() is not compatible with control flow operations "
                                 f"such as `af.cond()` or `af.while_loop()` (op '{op.name}' of type {op.type}).")
            with control_dependencies(check), _on_task_of(out):
                check = [check_numerics(out, message=f"{op.name}:{out.value_index}")]
    return group(*check)


# -- tf.debugging.enable_check_numerics: a CheckNumerics on every floating output of the ops made after ----

# Ops that cannot make a NaN or an infinity their inputs lack, or that must not be wrapped (control
# flow, state, the checks themselves), as TF's check-numerics callback leaves them alone.
_SAFE_OPS = frozenset({
    "CheckNumerics", "Const", "Placeholder", "PlaceholderWithDefault", "Identity", "IdentityN", "StopGradient",
    "Reshape", "Squeeze", "ExpandDims", "ConcatV2", "Pack", "Unpack", "Slice", "StridedSlice", "GatherV2",
    "GatherNd", "Transpose", "Tile", "Fill", "ZerosLike", "OnesLike", "BroadcastTo", "Shape", "ShapeN", "Size",
    "Rank", "Split", "SplitV", "PreventGradient", "Snapshot", "NoOp", "Relu", "Relu6", "Maximum", "Minimum",
    "Neg", "Abs", "Sign", "Floor", "Ceil", "Round"})


def _check_numerics_callback(op, outputs):
    d = op.op_def
    if op.type in _SAFE_OPS or d.control_flow is not None or d.ref_inputs or d.resource is not None \
            or d.internal:
        return outputs
    out = []
    for i, t in enumerate(outputs):
        if t.dtype.is_floating:
            message = (f'\n\n!!! Detected Infinity or NaN in output {i} of graph op "{op.type}" (# of outputs: '
                       f'{len(outputs)}) !!!\n  dtype: {t.dtype.name}\n  shape: {t.shape}\n  op: {op.name}\n')
            t = CheckNumerics(t, message=message, name=f"{op.name}/CheckNumerics{'' if i == 0 else f'_{i}'}")
        out.append(t)
    return out


def enable_check_numerics(stack_height_limit=30, path_length_limit=50):
    """From now on, every floating output of a new op (as the op wrappers return them) passes through
    a CheckNumerics that fails the step naming the op, its output, dtype and shape when it holds a NaN
    or an infinity (tf.debugging.enable_check_numerics). Ops that cannot make one are left alone, as
    in TF; ops built before the call, and raw `Graph.create_op` calls, are not checked. The stack
    limits are TF's arguments for its message and are not used."""
    from actorflow.graph.op_def import add_op_callback
    add_op_callback(_check_numerics_callback)


def disable_check_numerics():
    """Stops instrumenting new ops (tf.debugging.disable_check_numerics); a no-op when not enabled."""
    from actorflow.graph.op_def import _OP_CALLBACKS, remove_op_callback
    if _check_numerics_callback in _OP_CALLBACKS:
        remove_op_callback(_check_numerics_callback)
