"""CPU kernels for GatherNd, ScatterNd and the TensorScatter family (numpy fancy indexing).

Indices are checked against the addressed shape first: numpy would wrap negative ones silently,
TF raises InvalidArgumentError naming the bad index.
"""
from __future__ import annotations

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel


def _index_tuple(op: str, indices, shape) -> tuple:
    """The innermost vectors of `indices` as a tuple of index arrays into `shape`."""
    idx = np.asarray(indices)
    if idx.ndim < 1:
        raise InvalidArgumentError(f"{op}: indices must be at least rank 1, got a scalar")
    k = idx.shape[-1]
    if k > len(shape):
        raise InvalidArgumentError(f"{op}: indices.shape[-1] ({k}) must be <= the rank of the indexed "
                                   f"tensor ({len(shape)})")
    flat = idx.reshape(-1, k)
    if flat.size:
        bound = np.asarray(shape[:k], dtype=np.int64)
        bad = np.nonzero(((flat < 0) | (flat >= bound)).any(axis=1))[0]
        if bad.size:
            raise InvalidArgumentError(f"{op}: indices{[int(i) for i in np.unravel_index(bad[0], idx.shape[:-1])]} = "
                                       f"{flat[bad[0]].tolist()} does not index into shape {list(shape)}")
    return tuple(idx[..., j] for j in range(k))


def _check_updates(op, updates, indices, shape):
    want = tuple(np.shape(indices)[:-1]) + tuple(shape[np.shape(indices)[-1]:])
    if np.shape(updates) != want:
        raise InvalidArgumentError(f"{op}: updates must have shape {list(want)} (indices.shape[:-1] + "
                                   f"shape[K:]), got {list(np.shape(updates))}")


@register_kernel("GatherNd", "CPU")
def gather_nd(attrs):
    """tf.raw_ops.GatherNd: ``params[tuple(indices[..., j] for j in range(K))]``."""
    def fn(params, indices):
        params = np.asarray(params)
        return np.ascontiguousarray(params[_index_tuple("GatherNd", indices, params.shape)])
    return fn


@register_kernel("ScatterNd", "CPU")
def scatter_nd(attrs):
    """tf.raw_ops.ScatterNd: zeros of `shape` with `updates` summed in at `indices`."""
    def fn(indices, updates, shape):
        dims = tuple(int(d) for d in np.asarray(shape).reshape(-1))
        if any(d < 0 for d in dims):
            raise InvalidArgumentError(f"ScatterNd: shape {list(dims)} has a negative dimension")
        updates = np.asarray(updates)
        _check_updates("ScatterNd", updates, indices, dims)
        out = np.zeros(dims, updates.dtype)
        np.add.at(out, _index_tuple("ScatterNd", indices, dims), updates)
        return out
    return fn


def _tensor_scatter(op_type: str, combine):
    """The kernel of `op_type`: a copy of `tensor` with `combine(copy, index, updates)` applied at
    `indices`."""
    def fn(tensor, indices, updates):
        tensor = np.asarray(tensor)
        _check_updates(op_type, updates, indices, tensor.shape)
        out = tensor.copy()
        combine(out, _index_tuple(op_type, indices, tensor.shape), np.asarray(updates, out.dtype))
        return out
    return fn


def _replace(out, index, updates):
    out[index] = updates


@register_kernel("TensorScatterUpdate", "CPU")
def tensor_scatter_update(attrs):
    """tf.raw_ops.TensorScatterUpdate: a copy of `tensor` with the slices at `indices` replaced."""
    return _tensor_scatter("TensorScatterUpdate", _replace)


@register_kernel("TensorScatterAdd", "CPU")
def tensor_scatter_add(attrs):
    """tf.raw_ops.TensorScatterAdd: a copy of `tensor` with `updates` added at `indices` (duplicates summed)."""
    return _tensor_scatter("TensorScatterAdd", np.add.at)


@register_kernel("TensorScatterSub", "CPU")
def tensor_scatter_sub(attrs):
    """tf.raw_ops.TensorScatterSub: a copy of `tensor` with `updates` subtracted at `indices`."""
    return _tensor_scatter("TensorScatterSub", np.subtract.at)


@register_kernel("TensorScatterMax", "CPU")
def tensor_scatter_max(attrs):
    """tf.raw_ops.TensorScatterMax: a copy of `tensor`, each addressed element the maximum of itself and
    its updates."""
    return _tensor_scatter("TensorScatterMax", np.maximum.at)


@register_kernel("TensorScatterMin", "CPU")
def tensor_scatter_min(attrs):
    """tf.raw_ops.TensorScatterMin: a copy of `tensor`, each addressed element the minimum of itself and
    its updates."""
    return _tensor_scatter("TensorScatterMin", np.minimum.at)
