"""Waiting for another thread's write without a system call and without the GIL.

`spin_until(flags, i, seen, iters)` reads ``flags[i]`` (an int64 array) with an atomic load until it
differs from `seen`, at most `iters` times, and returns the last value read (`seen` when it ran out).
It runs in nogil numba code, so a thread spinning in it leaves the GIL to the others.

What it is for (actors/pool.py's `SpinTeam`): on these VMs, waking a thread that sleeps in a futex
costs 13-100 us, mostly the hypervisor waking the idle virtual CPU; a thread that is already running
sees a store to memory within a microsecond. OpenMP's runtimes and TensorFlow's Eigen pool keep their
workers spinning for a while after their last task for the same reason.

Importing this module imports numba (as actorflow does, through `import_numba`): import it where a
spin is about to be used, not at module level of something imported at startup.
"""
from __future__ import annotations

import time

import numpy as np

from actorflow.kernels.lazy_numba import import_numba

import_numba()

from numba import njit, types  # noqa: E402 - after import_numba (see its docstring)
from numba.extending import intrinsic  # noqa: E402

__all__ = ["iterations_per_us", "new_flags", "spin_until"]

# flags that different threads write sit a cache line apart: index 0, 8, 16...
STRIDE = 8


def new_flags(n: int) -> np.ndarray:
    """`n` int64 flags, each on its own cache line (index k * STRIDE), all 0."""
    return np.zeros(n * STRIDE, np.int64)


@intrinsic
def _load(typingctx, arr, i):
    """``arr[i]`` read with an atomic (acquire) load: another thread writes it, and a plain load in a
    loop that stores nothing would be hoisted out of the loop."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.int64 and arr.ndim == 1):
        return None
    sig = types.int64(arr, types.intp)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.load_atomic(builder.gep(ary.data, [args[1]]), "acquire", 8)
    return sig, codegen


@njit(nogil=True, cache=True)
def spin_until(flags, i, seen, iters):
    for _ in range(iters):
        v = _load(flags, i)
        if v != seen:
            return v
    return seen


_rate = 0.0


def iterations_per_us() -> float:
    """How many `spin_until` iterations take a microsecond on this machine (measured once)."""
    global _rate
    if not _rate:
        flags = new_flags(1)
        spin_until(flags, 0, 0, 1)             # compiled (or loaded from the cache) first
        n = 200_000
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            spin_until(flags, 0, 0, n)
            best = min(best, time.perf_counter() - t0)
        _rate = max(n / max(best * 1e6, 1e-3), 1.0)
    return _rate
