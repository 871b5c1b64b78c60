"""The kernel thread pool: a fixed set of threads running kernels handed over by the event loop,
with two priorities.

Work on the critical path (a kernel whose output another kernel waits for) goes before work that
nothing in the step waits on but its end (a variable update): a thread that frees up takes the
oldest urgent task first, and a deferred one only when no urgent task is queued. A split kernel's
row blocks are separate tasks, so a big update soaks up idle threads without delaying anything
urgent by more than one block.

Hand-over is one C-level SimpleQueue token per task (what ThreadPoolExecutor uses too), with the
tasks themselves in two deques whose append and popleft are atomic: a worker holding a token always
finds a task, the urgent one if there is any.
"""
from __future__ import annotations

import atexit
import collections
import logging
import queue
import threading
import time
import weakref

__all__ = ["KernelPool", "SyncPool", "offload_policy"]

log = logging.getLogger(__name__)

_LIVE: weakref.WeakSet = weakref.WeakSet()      # pools whose threads may still be running


@atexit.register
def _stop_pools_at_exit(timeout: float = 5.0) -> None:
    """At interpreter exit, stops every pool and waits (at most `timeout` s in all) for kernels still
    running on its daemon threads (a session never closed, a step abandoned). Without this, a kernel
    in BLAS or numba code could still run while the interpreter and those libraries tear down, which
    can crash the process after the program itself has finished."""
    deadline = time.monotonic() + timeout
    pools = list(_LIVE)
    for pool in pools:
        pool.shutdown()
    for pool in pools:
        for t in pool._threads:
            if t is not threading.current_thread():
                t.join(max(0.0, deadline - time.monotonic()))


class KernelPool:
    """`threads` threads running kernels, urgent ones first (see the module's docstring)."""

    def __init__(self, threads: int, name: str = "actorflow-kernel"):
        self.threads = threads
        self._urgent: collections.deque = collections.deque()
        self._deferred: collections.deque = collections.deque()
        self._tokens: queue.SimpleQueue = queue.SimpleQueue()
        self._stopping = False
        self._threads = [threading.Thread(target=self._work, name=f"{name}_{i}", daemon=True)
                         for i in range(threads)]
        for t in self._threads:
            t.start()
        _LIVE.add(self)

    def submit(self, fn, deferred: bool = False) -> None:
        """Runs `fn()` on a pool thread. `fn` reports its own result and errors."""
        if self._stopping:
            raise RuntimeError("the kernel pool is shut down")
        (self._deferred if deferred else self._urgent).append(fn)
        self._tokens.put(None)

    def _work(self) -> None:
        get = self._tokens.get
        urgent, deferred = self._urgent, self._deferred
        while True:
            get()
            if self._stopping:
                return
            try:
                fn = urgent.popleft()
            except IndexError:
                fn = deferred.popleft()
            try:
                fn()
            except BaseException:  # noqa: BLE001 - a task must never take its thread down
                log.exception("kernel pool task %r failed", fn)
            # Drop the task before waiting for the next: it holds the kernel's inputs, and a
            # variable update copies any buffer someone else still references.
            fn = None

    def shutdown(self, wait: bool = False) -> None:
        """Stops the threads once their current task ends; queued tasks are dropped."""
        if self._stopping:
            return
        self._stopping = True
        self._urgent.clear()
        self._deferred.clear()
        for _ in self._threads:
            self._tokens.put(None)
        if wait:
            for t in self._threads:
                t.join()


class SyncPool:
    """A kernel pool with no threads: `submit` runs the task at once, in the caller (the loop).
    For unit tests of actors: an offloaded kernel still goes through the dispatcher's offload path
    and reports back through the loop, but deterministically and on one thread. Deferred tasks run
    like urgent ones (there is never a queue to reorder)."""

    threads = 1

    def __init__(self):
        self.submitted = 0               # tasks run so far (tests check that a kernel was offloaded)
        self._stopping = False

    def submit(self, fn, deferred: bool = False) -> None:
        if self._stopping:
            raise RuntimeError("the kernel pool is shut down")
        self.submitted += 1
        fn()

    def shutdown(self, wait: bool = False) -> None:
        self._stopping = True


# -- the offload policy: which kernels go to the pool -------------------------------------------
def offload_policy(shapes, values, kdef):
    """(always_offload, cost_fn_or_None, limit) of a kernel whose inputs have static `shapes`
    (TensorShapes) and, where known, constant `values` (None elsewhere): decided once when the
    shapes are known. A call with a cost function goes to the pool when ``cost(*inputs) > limit``:
    OFFLOAD_NS in the cost's units (kdef.unit_ns; input elements where the kernel has no cost)."""
    from actorflow.actors.node import OFFLOAD_NS
    limit = OFFLOAD_NS / kdef.unit_ns
    if not kdef.releases_gil:
        return False, None, limit
    if all(s.is_fully_defined() for s in shapes):
        if kdef.cost is None:
            est = sum(s.num_elements() for s in shapes)
        else:
            try:
                est = kdef.cost(*[v if v is not None else _ShapeOnly(tuple(s.as_list()))
                                  for s, v in zip(shapes, values)])
            except Exception:  # noqa: BLE001 - a cost function that needs real values
                return False, kdef.cost, limit
        return est > limit, None, limit
    if kdef.cost is None:
        return False, _default_cost, limit
    return False, kdef.cost, limit


class _ShapeOnly:
    """Stands in for an array when a cost function only needs shapes."""
    __slots__ = ("shape", "size", "ndim")

    def __init__(self, shape):
        self.shape = shape
        self.ndim = len(shape)
        n = 1
        for d in shape:
            n *= d
        self.size = n


def _default_cost(*args):
    n = 0
    for a in args:
        n += getattr(a, "size", 1)
    return n
