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
import itertools
import logging
import os
import queue
import threading
import time
import weakref

__all__ = ["KernelPool", "SpinTeam", "SyncPool", "block_worker", "offload_policy", "on_pool_thread", "spin_us"]

log = logging.getLogger(__name__)

_LIVE: weakref.WeakSet = weakref.WeakSet()      # pools whose threads may still be running
_THREAD = threading.local()                     # .pool: the KernelPool whose thread this is


def on_pool_thread() -> bool:
    """Whether the calling thread is a KernelPool's (a whole step run as one task, LocalBackend)."""
    return getattr(_THREAD, "pool", None) is not None


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
        for t in pool.all_threads():
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
        self._team: SpinTeam | None = None
        self._team_lock = threading.Lock()
        _LIVE.add(self)

    def team(self) -> "SpinTeam | None":
        """The pool's `SpinTeam` of ``threads - 1`` helpers, made on first use; None when spinning is
        off (``AF_SPIN_US=0``), the pool has one thread, or it is shut down."""
        if spin_us() <= 0:
            return None
        team = self._team
        if team is None and self.threads > 1 and not self._stopping:
            with self._team_lock:
                if self._team is None and not self._stopping:
                    self._team = SpinTeam(self.threads - 1, spin_us())
                team = self._team
        return team

    def submit(self, fn, deferred: bool = False) -> None:
        """Runs `fn()` on a pool thread. `fn` reports its own result and errors."""
        if self._stopping:
            raise RuntimeError("the kernel pool is shut down")
        (self._deferred if deferred else self._urgent).append(fn)
        self._tokens.put(None)

    def _work(self) -> None:
        _THREAD.pool = self
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
        with self._team_lock:
            team = self._team
        if team is not None:
            team.close()
        if wait:
            for t in self.all_threads():
                t.join()

    def all_threads(self) -> list:
        """The pool's threads and its team's helpers."""
        team = self._team
        return self._threads + (team.threads if team is not None else [])


def block_worker(thunks: list, state: list, on_last):
    """A function that runs the thunks not yet claimed, claiming them in order (each thread that calls
    it takes the next one as it frees up), until none is left. `state` is [thunks left, first
    error]: each thunk's error is kept there, and whoever ends the last thunk calls `on_last()`."""
    n = len(thunks)
    claim = itertools.count().__next__       # atomic under the GIL
    lock = threading.Lock()

    def work():
        while True:
            i = claim()
            if i >= n:
                return
            thunk, thunks[i] = thunks[i], None
            try:
                thunk()
            except BaseException as e:  # noqa: BLE001 - raised by the caller
                state[1] = state[1] or e
            thunk = None
            with lock:
                state[0] -= 1
                last = not state[0]
            if last:
                on_last()
    return work


_SPIN_US_DEFAULT = 1000


def spin_us() -> int:
    """How long (us) a `SpinTeam`'s helper spins for its next blocks before it sleeps: ``AF_SPIN_US``,
    default 1000; 0 turns the teams off (split kernels' blocks then wake pool threads)."""
    raw = os.environ.get("AF_SPIN_US", "")
    if not raw:
        return _SPIN_US_DEFAULT
    try:
        v = int(raw)
    except ValueError:
        raise ValueError(f"AF_SPIN_US must be a whole number of microseconds, got {raw!r}") from None
    if v < 0:
        raise ValueError(f"AF_SPIN_US must be >= 0, got {v}")
    return v


class SpinTeam:
    """Helper threads that run the blocks of one kernel beside the thread that splits it, woken by a
    store to memory instead of a system call.

    The synchronous training path (actors/sync_step.py) runs a big GEMM as blocks that the calling
    thread and the pool's threads take until none is left. Handing blocks to a pool thread wakes it
    from a futex: on these VMs that costs the caller 20-40 us and the woken thread 50-150 us before
    its first block starts, and the caller waits as long at the end, four to five times in an MLP
    step. A team's helpers instead spin (in nogil numba code, `kernels/spin.py`: the GIL stays free)
    for up to `spin_us` after their last block, watching a generation counter; `run` bumps it, so a
    helper that is spinning starts within a microsecond, and the caller spins for the last block's
    end the same way. A helper that spun out sleeps on an event that `run` also sets, so the team
    costs no CPU between steps that are further apart than `spin_us`. (OpenMP's runtimes keep their
    threads spinning after a parallel region the same way: KMP_BLOCKTIME, OMP_WAIT_POLICY.)

    One caller at a time: `run` returns False at once when the team is busy (another thread's step,
    or a block that itself splits a kernel), and the caller uses the pool instead."""

    def __init__(self, helpers: int, spin_us: int):
        from actorflow.kernels import spin
        self._spin = spin.spin_until
        self._iters = max(1, int(spin_us * spin.iterations_per_us()))
        self._flags = spin.new_flags(2)          # [0]: blocks posted (a generation), [STRIDE]: done
        self._done_at = spin.STRIDE
        self._gen = 0
        self._work = None
        self._busy = threading.Lock()
        self._wake = threading.Event()
        self._done = threading.Event()
        self._stopping = False
        self.threads = [threading.Thread(target=self._helper, name=f"actorflow-team_{i}", daemon=True)
                        for i in range(helpers)]
        for t in self.threads:
            t.start()

    def _helper(self) -> None:
        flags, spin, iters = self._flags, self._spin, self._iters
        seen = 0
        while not self._stopping:
            v = spin(flags, 0, seen, iters)
            if v == seen:                       # nothing posted for spin_us: sleep until `run` posts
                self._wake.clear()
                if int(flags[0]) == seen and not self._stopping:
                    self._wake.wait()
                continue
            seen = v
            work = self._work
            if work is not None:
                work()
            work = None

    def run(self, thunks: list) -> bool:
        """Runs every thunk, on this thread and the helpers; returns when all have ended (True), raising
        the first error; False (nothing run) when the team is busy or closed."""
        if self._stopping or not self._busy.acquire(blocking=False):
            return False
        try:
            self._run(thunks)
        finally:
            self._work = None
            self._busy.release()
        return True

    def _run(self, thunks: list) -> None:
        state = [len(thunks), None]                # blocks left, first error
        flags, done_at, done = self._flags, self._done_at, self._done
        self._gen = gen = self._gen + 1

        def last():
            flags[done_at] = gen
            done.set()
        self._work = work = block_worker(thunks, state, last)
        flags[0] = gen                             # the helpers that spin start now
        self._wake.set()                           # and those asleep wake up
        work()
        if self._spin(flags, done_at, gen - 1, self._iters) != gen:
            # The event may still hold a set from the run before (its last block's helper sets it
            # after the flag that let that run return): cleared, then the flag read again.
            while int(flags[done_at]) != gen:
                done.clear()
                if int(flags[done_at]) == gen:
                    break
                done.wait()
        if state[1] is not None:
            raise state[1]

    def close(self) -> None:
        """Stops the helpers (each after its current block)."""
        self._stopping = True
        self._flags[0] = -1
        self._wake.set()


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
    if kdef.ready is not None and not kdef.ready():
        return True, None, limit        # its first call loads code: keep that off the loop
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
