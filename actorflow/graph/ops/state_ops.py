"""Variable state ops: VariableV2 creates a variable resource; Assign and friends update it.

Input 0 of an update op is a reference to the variable (a `ref_inputs` slot): the runtime binds it
to the variable's resource actor instead of passing a value.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops.infer import broadcast_shapes
from actorflow.graph.tensor_shape import TensorShape, as_shape

VariableV2 = define_op("VariableV2", lambda i, a: [(a["dtype"], a["shape"])], stateful=True, resource="variable",
                       actor="variable", placement="pass_through")
IsVariableInitialized = define_op("IsVariableInitialized", lambda i, a: [(dtypes.bool_, TensorShape([]))],
                                  ref_inputs=(0,), stateful=True, actor="is_initialized",
                                  placement="pass_through", host_outputs=True)


def _check_ref(inputs, n=1):
    for t in inputs[:n]:
        if t.op.op_def.resource != "variable":
            raise InferenceError(f"input '{t.name}' must be a variable reference (output of VariableV2), "
                                 f"got output of {t.op.type}")


def _infer_assign(inputs, attrs):
    _check_ref(inputs)
    ref, value = inputs
    if value.dtype is not ref.dtype:
        raise InferenceError(f"cannot assign a {value.dtype.name} value to variable '{ref.op.name}' of dtype {ref.dtype.name}")
    if attrs.get("validate_shape", True):
        if not ref.shape.is_compatible_with(value.shape):
            raise InferenceError(f"cannot assign a value of shape {value.shape} to variable '{ref.op.name}' of shape {ref.shape}")
        return [(ref.dtype, ref.shape.merge_with(value.shape))]
    return [(ref.dtype, value.shape)]


def _infer_update(inputs, attrs):
    _check_ref(inputs)
    ref, value = inputs
    if value.dtype is not ref.dtype:
        raise InferenceError(f"cannot update variable '{ref.op.name}' of dtype {ref.dtype.name} with a {value.dtype.name} value")
    b = broadcast_shapes(ref.shape, value.shape)
    if ref.shape.dims is not None and b.dims is not None and len(b.dims) != len(ref.shape.dims):
        raise InferenceError(f"update of shape {value.shape} does not match variable '{ref.op.name}' of shape {ref.shape}")
    return [(ref.dtype, ref.shape)]


def _infer_ref_read(inputs, attrs):
    _check_ref(inputs)
    return [(inputs[0].dtype, inputs[0].shape)]


# A read of a variable's current value inside a loop frame, once per iteration (TF's RefEnter + Identity).
RefRead = define_op("_RefRead", _infer_ref_read, ref_inputs=(0,), stateful=True, actor="variable",
                    placement="pass_through", internal=True)


@RefRead.gradient
def _ref_read_grad(op, grad):
    return [grad]


Assign = define_op("Assign", _infer_assign, ref_inputs=(0,), stateful=True)
AssignAdd = define_op("AssignAdd", _infer_update, ref_inputs=(0,), stateful=True)
AssignSub = define_op("AssignSub", _infer_update, ref_inputs=(0,), stateful=True)


def _infer_scatter(inputs, attrs):
    _check_ref(inputs)
    ref, indices, updates = inputs
    if not indices.dtype.is_integer:
        raise InferenceError(f"scatter indices must be integers, got {indices.dtype.name}")
    if updates.dtype is not ref.dtype:
        raise InferenceError(f"scatter updates of dtype {updates.dtype.name} do not match variable dtype {ref.dtype.name}")
    if ref.shape.dims is not None and indices.shape.dims is not None and updates.shape.dims is not None:
        want = indices.shape.concatenate(TensorShape(ref.shape.dims[1:]))
        if not as_shape(updates.shape).is_compatible_with(want) and updates.shape.ndims != 0:
            raise InferenceError(f"updates shape {updates.shape} must be indices.shape + variable.shape[1:] = {want}")
    return [(ref.dtype, ref.shape)]


ScatterAdd = define_op("ScatterAdd", _infer_scatter, ref_inputs=(0,), stateful=True)
ScatterSub = define_op("ScatterSub", _infer_scatter, ref_inputs=(0,), stateful=True)
ScatterUpdate = define_op("ScatterUpdate", _infer_scatter, ref_inputs=(0,), stateful=True)
ScatterMul = define_op("ScatterMul", _infer_scatter, ref_inputs=(0,), stateful=True)
ScatterMax = define_op("ScatterMax", _infer_scatter, ref_inputs=(0,), stateful=True)
ScatterMin = define_op("ScatterMin", _infer_scatter, ref_inputs=(0,), stateful=True)
ScatterDiv = define_op("ScatterDiv", _infer_scatter, ref_inputs=(0,), stateful=True)


def _infer_scatter_nd(inputs, attrs):
    """ScatterNd{Add,Sub,Update}: each innermost vector of K indices addresses the slice
    ``ref[i0, ..., iK-1]``; updates have shape ``indices.shape[:-1] + ref.shape[K:]``."""
    _check_ref(inputs)
    ref, indices, updates = inputs
    if indices.dtype not in (dtypes.int32, dtypes.int64):
        raise InferenceError(f"indices must be int32 or int64, got {indices.dtype.name}")
    if updates.dtype is not ref.dtype:
        raise InferenceError(f"updates of dtype {updates.dtype.name} do not match variable '{ref.op.name}' of dtype "
                             f"{ref.dtype.name}")
    idims, rdims = indices.shape.dims, ref.shape.dims
    if idims is not None and len(idims) < 1:
        raise InferenceError("indices must be at least rank 1, got a scalar")
    if idims is not None and rdims is not None and idims[-1] is not None:
        k = idims[-1]
        if k > len(rdims):
            raise InferenceError(f"indices.shape[-1] ({k}) must be <= the rank of variable '{ref.op.name}' "
                                 f"({len(rdims)})")
        want = TensorShape(list(idims[:-1]) + list(rdims[k:]))
        if not want.is_compatible_with(updates.shape):
            raise InferenceError(f"updates must have shape indices.shape[:-1] + variable.shape[K:] = {want}, "
                                 f"got {updates.shape}")
    return [(ref.dtype, ref.shape)]


ScatterNdAdd = define_op("ScatterNdAdd", _infer_scatter_nd, ref_inputs=(0,), stateful=True)
ScatterNdSub = define_op("ScatterNdSub", _infer_scatter_nd, ref_inputs=(0,), stateful=True)
ScatterNdUpdate = define_op("ScatterNdUpdate", _infer_scatter_nd, ref_inputs=(0,), stateful=True)
