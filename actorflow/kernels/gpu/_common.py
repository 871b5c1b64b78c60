"""Shared helpers of the GPU kernels."""
from __future__ import annotations

import cupy as cp
import numpy as np

from actorflow.kernels.registry import get_kernel, register_kernel

__all__ = ["cp", "register_fn", "reuse_cpu_kernel", "host_kernel", "raw_kernel", "floats_only", "host_value",
           "ctype", "launch"]

_CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


def register_fn(op_type: str, fn, **kw) -> None:
    """Registers a GPU kernel that needs no attributes: its factory returns `fn` itself."""
    register_kernel(op_type, "GPU", releases_gil=False, **kw)(lambda attrs, _fn=fn: _fn)


def host_value(v):
    """A host (numpy) view of an input that TF keeps in host memory."""
    if type(v) is np.ndarray or not hasattr(v, "__cuda_array_interface__"):
        return v
    return v.get()


def _to_device(v):
    if isinstance(v, tuple):
        return tuple(_to_device(x) for x in v)
    if isinstance(v, list):
        return [_to_device(x) for x in v]
    if isinstance(v, (np.ndarray, np.generic)):
        return cp.asarray(v)
    return v


def reuse_cpu_kernel(op_type: str, **kw) -> None:
    """Registers the CPU kernel itself as the GPU one, for ops whose numpy calls dispatch to CuPy
    (array-function protocol) or that only move references around."""
    def factory(attrs):
        return get_kernel(op_type, "CPU").factory(attrs)
    register_kernel(op_type, "GPU", releases_gil=False, **kw)(factory)


def host_kernel(op_type: str, **kw) -> None:
    """Registers, for an op whose work is shape bookkeeping on small integer vectors (Range,
    BroadcastGradientArgs, ...), a GPU kernel that reads every input on the host (TF's
    HostMemory), runs the CPU kernel there and puts the result on the GPU."""
    def factory(attrs):
        cpu = get_kernel(op_type, "CPU").factory(attrs)

        def fn(*inputs):
            return _to_device(cpu(*(host_value(v) for v in inputs)))
        return fn
    register_kernel(op_type, "GPU", releases_gil=False, **kw)(factory)


def ctype(dtype) -> str:
    t = _CTYPES.get(np.dtype(dtype))
    if t is None:
        raise TypeError(f"no CUDA kernel for dtype {np.dtype(dtype)}")
    return t


class raw_kernel:
    """A CUDA C kernel templated on the element type `T` (float or double), compiled once per
    dtype on first use (CuPy caches the binary on disk)."""

    def __init__(self, name: str, source: str):
        self.name = name
        self.source = source
        self._compiled: dict = {}

    def __call__(self, dtype):
        dtype = np.dtype(dtype)
        k = self._compiled.get(dtype)
        if k is None:
            t = ctype(dtype)
            src = f"typedef {t} T;\n" + self.source
            k = self._compiled[dtype] = cp.RawKernel(src, self.name)
        return k


def floats_only(fn):
    """Runs `fn` on float32/float64 data; float16 goes through float32 and back."""
    def wrapped(*inputs):
        if any(getattr(a, "dtype", None) == np.float16 for a in inputs):
            out = fn(*(a.astype(np.float32) if getattr(a, "dtype", None) == np.float16 else a for a in inputs))
            if isinstance(out, tuple):
                return tuple(o.astype(np.float16) for o in out)
            return out.astype(np.float16)
        return fn(*inputs)
    return wrapped


def launch(kernel, n: int, args, block: int = 256) -> None:
    """Launches `kernel` with one thread per item of `n`."""
    if n > 0:
        kernel(((n + block - 1) // block,), (block,), args)
