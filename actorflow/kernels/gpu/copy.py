"""Host <-> device copies: the kernels of the copy nodes the runtime puts on every edge between the
CPU and a GPU (the paper's Send/Recv between devices of one task).

Large host-to-device copies go through pinned staging memory on a copy stream of their own, so
that they overlap with kernels running on the compute stream; the compute stream waits on an
event, never the host. Device-to-host copies run on the runtime's thread pool (they must wait for
the GPU) and land in pinned memory. Arrays already on the right device pass through untouched.
"""
from __future__ import annotations

import collections
import threading

import cupyx
import numpy as np

from actorflow.kernels.gpu._common import cp
from actorflow.kernels.registry import register_kernel

# Below this size a device-to-host copy is a plain synchronous one (it has to wait anyway).
_SMALL = 1 << 16

_local = threading.local()


def _copy_stream(device: int):
    streams = getattr(_local, "streams", None)
    if streams is None:
        streams = _local.streams = {}
    s = streams.get(device)
    if s is None:
        with cp.cuda.Device(device):
            s = streams[device] = cp.cuda.Stream(non_blocking=True)
    return s


# Pinned buffers of host-to-device copies in flight, kept alive until their copy has finished.
_in_flight: collections.deque = collections.deque()


def _hold(event, buf) -> None:
    while _in_flight and _in_flight[0][0].done:
        _in_flight.popleft()
    _in_flight.append((event, buf))


def _device_index(attrs) -> int:
    dev = str(attrs.get("device", "GPU:0"))
    return int(dev.rpartition(":")[2] or 0)


def to_device(x, device: int = 0):
    """`x` (numpy array or scalar) as a CuPy array on GPU `device`, without blocking the host
    for large arrays."""
    if isinstance(x, cp.ndarray):
        if x.device.id == device:
            return x
        with cp.cuda.Device(device):
            return x.copy()
    a = np.asarray(x)
    with cp.cuda.Device(device):
        if a.dtype.kind not in "biufc" or a.size == 0:
            return cp.asarray(a)
        # Even a scalar goes through pinned memory and the copy stream: a plain cudaMemcpy from
        # pageable memory would wait for every kernel queued on the compute stream.
        stream = _copy_stream(device)
        buf = cupyx.empty_pinned(a.shape, a.dtype)
        np.copyto(buf, a)
        out = cp.empty(a.shape, a.dtype)
        out.set(buf, stream=stream)
        ev = stream.record()
        cp.cuda.get_current_stream().wait_event(ev)
        _hold(ev, buf)
        return out


def to_host(x):
    """`x` as a numpy array; waits for the GPU work that produces it."""
    if not isinstance(x, cp.ndarray):
        return x
    if x.nbytes < _SMALL:
        return x.get()
    with x.device:
        stream = _copy_stream(x.device.id)
        src = x if x.flags.c_contiguous else cp.ascontiguousarray(x)
        stream.wait_event(cp.cuda.get_current_stream().record())
        out = cupyx.empty_pinned(x.shape, x.dtype)
        src.get(stream=stream, out=out)
        stream.synchronize()
        return out


@register_kernel("_HostToDevice", "GPU", releases_gil=False)
def host_to_device(attrs):
    device = _device_index(attrs)

    def fn(x):
        return to_device(x, device)
    return fn


@register_kernel("_DeviceToHost", "GPU")
def device_to_host(attrs):
    return to_host
