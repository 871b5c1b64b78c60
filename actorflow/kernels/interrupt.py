"""Stopping a long kernel mid-run: a whole while loop run as one kernel call (scheduler/jit).

The actor runtime checks a step's deadline and cancellation between activations: a loop run by the
actors stops at its next iteration. A loop compiled (or interpreted) as one kernel call runs all its
iterations inside that call, so it checks a *stop cell* instead: a one-element int64 array that the
runtime sets when the step fails (its deadline passed, its caller cancelled it, another op failed).
A compiled loop reads the cell every `CHECK_EVERY` iterations (an atomic load: the write comes from
another thread), an interpreted one every iteration; a stopped loop returns at once and its kernel
raises the error the cell names (`raise_if_stopped`).

The cell reaches the kernel through the thread that runs it: whoever runs a kernel whose ``fn`` has
``interruptible = True`` puts the step's cell in place with `enter` around the call and restores
the previous one with `leave`. This layer knows nothing of steps; the runtime (actors/) owns the
cells. A kernel run with no cell in place gets `NEVER`, which nothing sets.
"""
from __future__ import annotations

import threading

import numpy as np

from actorflow import errors

__all__ = ["CANCELLED", "CHECK_EVERY", "DEADLINE", "FAILED", "NEVER", "current", "enter", "leave", "new_cell",
           "raise_if_stopped", "stop"]

# what a set cell says (cell[0]); 0: run on
DEADLINE = 1            # the step's deadline passed
CANCELLED = 2           # the caller cancelled the step (or the runtime is closing)
FAILED = 3              # another op of the step failed: nobody will read the loop's result

# a compiled loop checks its cell before every CHECK_EVERY-th iteration (a power of two)
CHECK_EVERY = 256

NEVER = np.zeros(1, np.int64)   # the cell of a kernel run outside any step: never set
_local = threading.local()


def new_cell() -> np.ndarray:
    return np.zeros(1, np.int64)


def current() -> np.ndarray:
    """The stop cell in place in this thread (`NEVER` when none is)."""
    return getattr(_local, "cell", NEVER)


def enter(cell: np.ndarray):
    """Puts `cell` in place in this thread; returns what was there (for `leave`)."""
    prev = getattr(_local, "cell", None)
    _local.cell = cell
    return prev


def leave(prev) -> None:
    if prev is None:
        try:
            del _local.cell
        except AttributeError:
            pass
    else:
        _local.cell = prev


def stop(cell: np.ndarray, why: int) -> None:
    """Tells the kernels reading `cell` to stop (the first reason stays)."""
    if cell is not NEVER and not cell[0]:
        cell[0] = why


def raise_if_stopped(cell: np.ndarray, what: str) -> None:
    """Raises the error `cell` names, if it is set: `what` (the kernel) stopped mid-run."""
    why = int(cell[0])
    if not why:
        return
    if why == DEADLINE:
        raise errors.DeadlineExceededError(None, None, f"{what} stopped mid-run: its step's deadline passed")
    if why == CANCELLED:
        raise errors.CancelledError(None, None, f"{what} stopped mid-run: its step was cancelled")
    raise errors.AbortedError(None, None, f"{what} stopped mid-run: another op of its step failed")
