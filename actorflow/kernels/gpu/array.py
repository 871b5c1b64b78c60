"""GPU kernels for shapes, slicing, concatenation, gathering and segment sums, on CuPy arrays.

Shape-like arguments (shapes, axes, begin/end/strides, paddings, multiples) are read on the host
(TF's HostMemory); the CPU kernels' argument checks are reused, so errors read the same on both
devices. Ops that only re-view or reorder data reuse the CPU kernel itself, whose numpy calls
dispatch to CuPy through the array-function protocol.
"""
from __future__ import annotations

import math

import cupyx
import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.cpu import array as cpu_array
from actorflow.kernels.cpu.array import _axis, _contiguous, _int_list, _masks, _pad, _slice_spec, _strided_slice_spec
from actorflow.kernels.gpu._common import cp, host_kernel, register_fn, reuse_cpu_kernel
from actorflow.kernels.registry import register_kernel

# -- the CPU kernel as is: its numpy calls dispatch to CuPy ---------------------------------------
_SAME_AS_CPU = {"Identity": (), "StopGradient": (), "PlaceholderWithDefault": (), "Reshape": (1,),
                "Transpose": (1,), "ExpandDims": (1,), "Squeeze": (), "ConcatV2": (-1,), "Split": (0,),
                "SplitV": (1, 2), "Pack": (), "Unpack": (), "Tile": (1,), "BroadcastTo": (1,)}


for _op, _host in _SAME_AS_CPU.items():
    reuse_cpu_kernel(_op, host_inputs=_host)


def snapshot(x):
    return x.copy()


register_fn("Snapshot", snapshot)


def slice_(x, begin, size):
    return _contiguous(x[_slice_spec(x, begin, size)])


register_fn("Slice", slice_, host_inputs=(1, 2))


@register_kernel("StridedSlice", "GPU", releases_gil=False, host_inputs=(1, 2, 3))
def strided_slice_kernel(attrs):
    masks = _masks(attrs)

    def strided_slice(x, begin, end, strides):
        spec = _strided_slice_spec(x.ndim, tuple(begin.tolist()), tuple(end.tolist()), tuple(strides.tolist()), masks)
        try:
            r = x[spec]
        except IndexError:
            raise cpu_array._apply_spec_error("StridedSlice", spec, x.shape) from None
        return _contiguous(r)
    return strided_slice


@register_kernel("StridedSliceGrad", "GPU", releases_gil=False, host_inputs=(0, 1, 2, 3))
def strided_slice_grad_kernel(attrs):
    masks = _masks(attrs)

    def strided_slice_grad(shape, begin, end, strides, dy):
        dims = tuple(_int_list(shape, "StridedSliceGrad", "shape"))
        spec = _strided_slice_spec(len(dims), tuple(begin.tolist()), tuple(end.tolist()), tuple(strides.tolist()),
                                   masks)
        dx = cp.zeros(dims, dtype=dy.dtype)
        try:
            view = dx[spec]
            if view.shape != dy.shape:
                raise InvalidArgumentError(f"StridedSliceGrad: shape of dy {list(dy.shape)} does not match the "
                                           f"shape {list(view.shape)} of the slice")
            dx[spec] = dy
        except IndexError:
            raise cpu_array._apply_spec_error("StridedSliceGrad", spec, dims) from None
        return dx
    return strided_slice_grad


def pad(x, paddings):
    return _pad("Pad", x, paddings, 0, cp)


def pad_v2(x, paddings, constant_values):
    return _pad("PadV2", x, paddings, np.asarray(constant_values).reshape(()).item(), cp)


register_fn("Pad", pad, host_inputs=(1,))
register_fn("PadV2", pad_v2, host_inputs=(1, 2))


def fill(dims, value):
    shape = tuple(_int_list(dims, "Fill", "dims"))
    if any(d < 0 for d in shape):
        raise InvalidArgumentError(f"Fill: dims must be non-negative, got {list(shape)}")
    v = np.asarray(value)
    if v.ndim != 0:
        raise InvalidArgumentError(f"Fill: value must be a scalar, got shape {list(v.shape)}")
    return cp.full(shape, v.item(), dtype=v.dtype)


register_fn("Fill", fill, host_inputs=(0, 1))
register_fn("ZerosLike", cp.zeros_like)
register_fn("OnesLike", cp.ones_like)


@register_kernel("OneHot", "GPU", releases_gil=False, host_inputs=(1, 2, 3))
def one_hot_kernel(attrs):
    axis = int(attrs.get("axis", -1))

    def one_hot(indices, depth, on_value, off_value):
        d = int(depth)
        if d < 0:
            raise InvalidArgumentError(f"OneHot: depth must be non-negative, got {d}")
        if not -1 <= axis <= indices.ndim:
            raise InvalidArgumentError(f"OneHot: Expected axis to be -1 or between [0, {indices.ndim}]. "
                                       f"But received: {axis}")
        a = indices.ndim if axis == -1 else axis
        on = np.asarray(on_value)
        classes = cp.arange(d).reshape((d,) + (1,) * (indices.ndim - a))
        hot = indices.reshape(indices.shape[:a] + (1,) + indices.shape[a:]) == classes
        return cp.where(hot, on.dtype.type(on), np.asarray(off_value).astype(on.dtype).item()).astype(on.dtype)
    return one_hot


# Integer bookkeeping on small vectors: computed on the host, as TF's GPU kernels do (HostMemory).
for _op in ("Range", "BroadcastGradientArgs", "InvertPermutation"):
    host_kernel(_op)
# Output shapes that depend on the values: the kernel waits for its inputs (the one place a GPU
# kernel synchronizes, as TF's do for these ops).
for _op in ("DynamicPartition", "DynamicStitch", "ParallelDynamicStitch"):
    host_kernel(_op)


@register_kernel("GatherV2", "GPU", releases_gil=False, host_inputs=(2,))
def gather_v2_kernel(attrs):
    """tf.gather on the GPU. Out-of-range indices are not detected (that would wait for the GPU):
    they wrap around, where TF's GPU kernel writes zeros and the CPU kernel raises."""
    batch_dims = int(attrs.get("batch_dims", 0))

    def gather(params, indices, axis):
        if params.ndim == 0:
            raise InvalidArgumentError("GatherV2: params must be at least 1-D, got a scalar")
        a = _axis(axis, params.ndim, "GatherV2")
        bd = batch_dims + indices.ndim if batch_dims < 0 else batch_dims
        if bd == 0:
            return cp.take(params, indices, axis=a) if params.shape[a] else \
                cp.zeros(params.shape[:a] + indices.shape + params.shape[a + 1:], params.dtype)
        b = math.prod(params.shape[:bd])
        pre = math.prod(params.shape[bd:a])
        n = params.shape[a]
        post = math.prod(params.shape[a + 1:])
        k = math.prod(indices.shape[bd:])
        p = params.reshape(b, pre, n, post)
        idx = cp.clip(indices.reshape(b, k), 0, n - 1)
        out = p[cp.arange(b)[:, None, None], cp.arange(pre)[None, :, None], idx[:, None, :]]
        return out.reshape(params.shape[:a] + indices.shape[bd:] + params.shape[a + 1:])
    return gather


def unsorted_segment_sum(data, segment_ids, num_segments):
    """Negative ids are dropped, as in TF; ids >= num_segments are dropped too (TF's GPU kernel
    ignores them as well; the CPU kernel raises)."""
    num = int(num_segments)
    if num < 0:
        raise InvalidArgumentError(f"UnsortedSegmentSum: num_segments must be non-negative, got {num}")
    ids = segment_ids
    if data.shape[:ids.ndim] != ids.shape:
        raise InvalidArgumentError(f"UnsortedSegmentSum: data.shape = {list(data.shape)} does not start with "
                                   f"segment_ids.shape = {list(ids.shape)}")
    inner = data.shape[ids.ndim:]
    dt = data.dtype
    acc_dt = np.dtype(np.float32) if dt == np.float16 else dt
    flat = ids.reshape(-1)
    # Out-of-range rows go to a spare last row, dropped at the end.
    flat = cp.where((flat < 0) | (flat >= num), num, flat)
    out = cp.zeros((num + 1,) + inner, dtype=acc_dt)
    if flat.size:
        cupyx.scatter_add(out, flat, data.reshape((flat.size,) + inner).astype(acc_dt, copy=False))
    return out[:num].astype(dt, copy=False)


register_fn("UnsortedSegmentSum", unsorted_segment_sum, host_inputs=(2,))


# -- step-local accumulators (values saved by a while loop for its gradient) ------------------------
# The accumulator is a host object; a GPU value is saved and returned as is, never copied.
reuse_cpu_kernel("AccumulatorPush", device_inputs=(1,))
reuse_cpu_kernel("AccumulatorPop", device_inputs=())
