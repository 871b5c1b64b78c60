"""N-dimensional gather and scatter (tf.gather_nd, tf.scatter_nd, tf.tensor_scatter_nd_update).

Op types defined here: GatherNd, ScatterNd, TensorScatterUpdate, TensorScatterAdd, TensorScatterSub,
TensorScatterMax, TensorScatterMin. `indices` has shape
``[..., K]``: each innermost vector of K integers addresses a slice ``params[i0, ..., iK-1]`` of
shape ``params.shape[K:]``. TensorScatterUpdate is functional: it returns a copy of its tensor with
the addressed slices replaced, which is how `af.nn.dynamic_rnn` writes one time step of its output
per loop iteration (the role TF's TensorArray plays), and its gradient needs only the indices.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.indexed_slices import IndexedSlices
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.infer import constant_shape
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["gather_nd", "scatter_nd", "tensor_scatter_nd_update", "tensor_scatter_update", "tensor_scatter_nd_add",
           "tensor_scatter_add", "tensor_scatter_nd_sub", "tensor_scatter_sub", "tensor_scatter_nd_max",
           "tensor_scatter_nd_min"]


def _check_indices(indices):
    if indices.dtype not in (dtypes.int32, dtypes.int64):
        raise InferenceError(f"indices must be int32 or int64, got {indices.dtype.name}")
    d = indices.shape.dims
    if d is not None and len(d) < 1:
        raise InferenceError("indices must be at least rank 1, got a scalar")
    return None if d is None else d[-1]


def _slice_shape(indices, params_shape: TensorShape):
    """``indices.shape[:-1] + params.shape[K:]``, or None when the ranks are unknown."""
    k = _check_indices(indices)
    idims, pdims = indices.shape.dims, params_shape.dims
    if idims is None or pdims is None or k is None:
        return None
    if k > len(pdims):
        raise InferenceError(f"indices.shape[-1] ({k}) must be <= the rank of params ({len(pdims)})")
    return TensorShape(list(idims[:-1]) + list(pdims[k:]))


def _infer_gather_nd(inputs, attrs):
    params, indices = inputs
    out = _slice_shape(indices, params.shape)
    return [(params.dtype, out if out is not None else TensorShape(None))]


def _check_updates(updates, indices, shape: TensorShape, what):
    want = _slice_shape(indices, shape)
    if want is not None and not want.is_compatible_with(updates.shape):
        raise InferenceError(f"updates must have shape indices.shape[:-1] + {what}.shape[K:] = {want}, "
                             f"got {updates.shape}")


def _infer_scatter_nd(inputs, attrs):
    indices, updates, shape = inputs
    if not shape.dtype.is_integer:
        raise InferenceError(f"shape must be an integer tensor, got {shape.dtype.name}")
    out = constant_shape(shape)
    _check_updates(updates, indices, out, "output")
    return [(updates.dtype, out)]


def _infer_tensor_scatter_update(inputs, attrs):
    tensor, indices, updates = inputs
    if updates.dtype is not tensor.dtype:
        raise InferenceError(f"updates ({updates.dtype.name}) and tensor ({tensor.dtype.name}) must have "
                             "the same dtype")
    _check_updates(updates, indices, tensor.shape, "tensor")
    return [(tensor.dtype, tensor.shape)]


GatherNd = define_op("GatherNd", _infer_gather_nd)
ScatterNd = define_op("ScatterNd", _infer_scatter_nd)
TensorScatterUpdate = define_op("TensorScatterUpdate", _infer_tensor_scatter_update)
TensorScatterAdd = define_op("TensorScatterAdd", _infer_tensor_scatter_update)
TensorScatterSub = define_op("TensorScatterSub", _infer_tensor_scatter_update)
TensorScatterMax = define_op("TensorScatterMax", _infer_tensor_scatter_update)
TensorScatterMin = define_op("TensorScatterMin", _infer_tensor_scatter_update)


def _dense(grad):
    return grad._dense() if isinstance(grad, IndexedSlices) else grad


@GatherNd.gradient
def _gather_nd_grad(op, grad):
    params, indices = op.inputs
    grad = _dense(grad)
    shape = array_ops.shape(params, out_type=indices.dtype)
    # Whole rows addressed by a column of indices: a sparse gradient, as TF's _GatherNdGrad gives.
    if indices.shape.ndims == 2 and indices.shape.dims[-1] == 1:
        return [IndexedSlices(grad, array_ops.squeeze(indices, axis=[-1]), shape), None]
    return [ScatterNd(indices, grad, shape), None]


@ScatterNd.gradient
def _scatter_nd_grad(op, grad):
    return [None, GatherNd(_dense(grad), op.inputs[0]), None]


@TensorScatterUpdate.gradient
def _tensor_scatter_update_grad(op, grad):
    _, indices, updates = op.inputs
    grad = _dense(grad)
    # The replaced slices do not depend on the input tensor; the updates get exactly those slices.
    return [TensorScatterUpdate(grad, indices, array_ops.zeros_like(updates)), None, GatherNd(grad, indices)]


@TensorScatterAdd.gradient
def _tensor_scatter_add_grad(op, grad):
    _, indices, _ = op.inputs
    grad = _dense(grad)
    return [grad, None, GatherNd(grad, indices)]


@TensorScatterSub.gradient
def _tensor_scatter_sub_grad(op, grad):
    _, indices, _ = op.inputs
    grad = _dense(grad)
    return [grad, None, math_ops.negative(GatherNd(grad, indices))]


def _tensor_scatter_min_or_max_grad(op, grad):
    """TF's _TensorScatterMinOrMaxGrad: the gradient goes to every input equal to the output,
    shared equally among ties."""
    x, indices, y = op.inputs
    out = op.outputs[0]
    grad = _dense(grad)
    x_ind = math_ops.cast(math_ops.equal(x, out), grad.dtype)
    y_ind = math_ops.cast(math_ops.equal(y, GatherNd(out, indices)), grad.dtype)
    ys_ind = ScatterNd(indices, y_ind, array_ops.shape(x, out_type=indices.dtype))
    ind = math_ops.add(x_ind, ys_ind)
    return [math_ops.divide(math_ops.multiply(grad, x_ind), ind), None,
            math_ops.multiply(GatherNd(math_ops.divide(grad, ind), indices), y_ind)]


TensorScatterMax.gradient(_tensor_scatter_min_or_max_grad)
TensorScatterMin.gradient(_tensor_scatter_min_or_max_grad)


def gather_nd(params, indices, name=None, batch_dims=0):
    """Slices of `params` addressed by the innermost vectors of `indices` (tf.gather_nd).

    Output shape ``indices.shape[:-1] + params.shape[indices.shape[-1]:]``. Differs from TF: only
    `batch_dims=0` is supported (anything else raises ValueError).
    """
    if batch_dims != 0:
        raise ValueError(f"gather_nd: only batch_dims=0 is supported, got {batch_dims}")
    with name_scope(name, "GatherNd", [params, indices]) as scope:
        return GatherNd(convert_to_tensor(params), convert_to_tensor(indices), name=scope)


def scatter_nd(indices, updates, shape, name=None):
    """A zero tensor of `shape` with `updates` added at `indices`, duplicates summed (tf.scatter_nd)."""
    with name_scope(name, "ScatterNd", [indices, updates, shape]) as scope:
        indices = convert_to_tensor(indices)
        shape = convert_to_tensor(shape, dtype=indices.dtype)
        return ScatterNd(indices, convert_to_tensor(updates), shape, name=scope)


def tensor_scatter_nd_update(tensor, indices, updates, name=None):
    """A copy of `tensor` with the slices at `indices` replaced by `updates` (tf.tensor_scatter_nd_update).

    With duplicate indices the last update wins (TF leaves the order unspecified).
    """
    with name_scope(name, "TensorScatterUpdate", [tensor, indices, updates]) as scope:
        tensor = convert_to_tensor(tensor)
        return TensorScatterUpdate(tensor, convert_to_tensor(indices),
                                   convert_to_tensor(updates, dtype=tensor.dtype), name=scope)


tensor_scatter_update = tensor_scatter_nd_update


def tensor_scatter_nd_add(tensor, indices, updates, name=None):
    """A copy of `tensor` with `updates` added to the slices at `indices`, duplicates summed
    (tf.tensor_scatter_nd_add)."""
    with name_scope(name, "TensorScatterAdd", [tensor, indices, updates]) as scope:
        tensor = convert_to_tensor(tensor)
        return TensorScatterAdd(tensor, convert_to_tensor(indices), convert_to_tensor(updates, dtype=tensor.dtype),
                                name=scope)


tensor_scatter_add = tensor_scatter_nd_add


def _tensor_scatter(op_def, default, tensor, indices, updates, name):
    with name_scope(name, default, [tensor, indices, updates]) as scope:
        tensor = convert_to_tensor(tensor)
        return op_def(tensor, convert_to_tensor(indices), convert_to_tensor(updates, dtype=tensor.dtype), name=scope)


def tensor_scatter_nd_sub(tensor, indices, updates, name=None):
    """A copy of `tensor` with `updates` subtracted from the slices at `indices`, duplicates summed
    (tf.tensor_scatter_nd_sub)."""
    return _tensor_scatter(TensorScatterSub, "TensorScatterSub", tensor, indices, updates, name)


tensor_scatter_sub = tensor_scatter_nd_sub


def tensor_scatter_nd_max(tensor, indices, updates, name=None):
    """A copy of `tensor` with each slice at `indices` the element-wise maximum of itself and its
    updates (tf.tensor_scatter_nd_max)."""
    return _tensor_scatter(TensorScatterMax, "TensorScatterMax", tensor, indices, updates, name)


def tensor_scatter_nd_min(tensor, indices, updates, name=None):
    """A copy of `tensor` with each slice at `indices` the element-wise minimum of itself and its
    updates (tf.tensor_scatter_nd_min)."""
    return _tensor_scatter(TensorScatterMin, "TensorScatterMin", tensor, indices, updates, name)
