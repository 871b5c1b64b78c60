"""The kernel registry: (op type, device type) -> kernel factory.

A kernel factory takes the op's attributes (a dict of plain values, dtypes as numpy dtypes)
and returns a callable on arrays: ``fn(*inputs) -> array`` for single-output ops, or a tuple
for ops with several outputs. Kernels know nothing of graphs, actors or sessions.

``cost`` (optional) estimates the work of one call from its input arrays, in the unit natural to
the kernel: multiply-adds for GEMM-bound kernels (MatMul, convolutions), element operations for the
rest. ``unit_ns`` is what one unit takes on one core, in nanoseconds (MAC_NS or ELEMENT_NS,
measured by benchmarks/offload_cost.py), so that ``cost(*inputs) * unit_ns`` is the call's time;
the runtime compares that with the thread pool's hand-off cost to decide whether the call is worth
a hop to the pool (actors/node.py, OFFLOAD_NS).
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["KernelDef", "register_kernel", "get_kernel", "has_kernel", "registered_ops", "MAC_NS", "ELEMENT_NS"]

# One core's time per unit of work, in ns (benchmarks/offload_cost.py measures both on the machine
# it runs on; these are an AMD EPYC Zen 4 VM's). MAC_NS: single-threaded SGEMM (MKL) runs at
# 0.021 ns per multiply-add on the MLP's big products and 0.025-0.045 on the narrow ones near the
# offload threshold (256x1024x10); convolutions at 0.010 (Winograd) to 0.07 (tiny im2col GEMMs).
# ELEMENT_NS: numpy's and numba's element-wise kernels on 256x1024 float32 take 0.07 (ReluGrad, per
# input element) to 0.45 (Exp) ns per element, most of them 0.12-0.2.
MAC_NS = 0.025
ELEMENT_NS = 0.15


@dataclass(frozen=True, slots=True)
class KernelDef:
    op_type: str
    device_type: str
    factory: Callable[[dict], Callable]
    cost: Callable | None = None
    # ns of one core per unit of `cost` (see the module docstring).
    unit_ns: float = ELEMENT_NS
    # True when the kernel releases the GIL for the bulk of its work (numpy BLAS, nogil numba),
    # so running it on a worker thread buys real parallelism.
    releases_gil: bool = True
    # Optional intra-op parallelism: split(attrs) -> fn(parts, *inputs) returning (output, [thunks])
    # whose thunks, run concurrently, fill `output`, or (None, [thunks], finish) where finish(), run
    # once after every thunk, returns the output; or None when the call is not worth splitting.
    split: Callable | None = None
    # Input slots read on the host even when the kernel runs on a GPU (TF's HostMemory): shapes, axes,
    # permutations, predicates. The runtime hands these inputs over as numpy arrays.
    host_inputs: tuple = ()
    # When set, the only input slots that live on the kernel's device; every other input is read on
    # the host (for ops with a variable number of host inputs, such as loop indices).
    device_inputs: tuple | None = None
    # True when the kernel reads only its inputs' metadata (shape, size, rank), so an input that
    # lives on another device needs no copy (Shape, Size, Rank).
    metadata_only: bool = False
    # None, or ready() -> False while the kernel's code is still to load (numba not imported yet, see
    # lazy_numba): the runtime then runs the kernel on the pool, so that loading it (0.3-1 s) does not
    # stop the event loop, whose heartbeats and other steps go on meanwhile.
    ready: Callable | None = None
    # True when a kernel instance carries state that TF keeps per op per session (a random op's
    # stream): the runtime then builds one instance per op and session, which all its plans share.
    session_state: bool = False


_REGISTRY: dict[tuple[str, str], KernelDef] = {}
_LOADED: set[str] = set()
_LOAD_LOCK = threading.RLock()


def register_kernel(op_type: str, device_type: str = "CPU", *, cost=None, unit_ns=ELEMENT_NS, releases_gil=True,
                    split=None, host_inputs=(), metadata_only=False, device_inputs=None, ready=None,
                    session_state=False):
    """Decorator registering a kernel factory for (op_type, device_type)."""
    def deco(factory):
        _REGISTRY[(op_type, device_type)] = KernelDef(
            op_type, device_type, factory, cost, unit_ns, releases_gil, split, host_inputs=tuple(host_inputs),
            device_inputs=None if device_inputs is None else tuple(device_inputs), metadata_only=metadata_only,
            ready=ready, session_state=session_state)
        return factory
    return deco


def _load(device_type: str) -> None:
    if device_type in _LOADED:
        return
    # Several event loops (in-process servers, the session runtime) may ask at once: the others must
    # wait until the modules are imported, not see a half-filled registry.
    with _LOAD_LOCK:
        if device_type in _LOADED:
            return
        import importlib
        if device_type == "CPU":
            from actorflow.kernels import cpu
            for m in cpu.MODULES:
                importlib.import_module(f"actorflow.kernels.cpu.{m}")     # registers its kernels
        elif device_type == "GPU":
            from actorflow.kernels import gpu
            for m in getattr(gpu, "MODULES", ()):
                importlib.import_module(f"actorflow.kernels.gpu.{m}")
        _LOADED.add(device_type)


def get_kernel(op_type: str, device_type: str = "CPU") -> KernelDef:
    _load(device_type)
    try:
        return _REGISTRY[(op_type, device_type)]
    except KeyError:
        raise LookupError(f"No {device_type} kernel registered for op type '{op_type}'") from None


def has_kernel(op_type: str, device_type: str = "CPU") -> bool:
    _load(device_type)
    return (op_type, device_type) in _REGISTRY


def registered_ops(device_type: str = "CPU") -> list[str]:
    _load(device_type)
    return sorted(op for op, dev in _REGISTRY if dev == device_type)
