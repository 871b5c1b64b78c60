"""The dispatcher: one event loop, its ready queue of actor activations, and the kernel pool.

State it keeps (per process, across steps and executables):
- `ready`: a deque of (actor, tag, args) activations, drained by `_pump` inside one loop callback at
  a time, so a message hop between actors costs a deque append and pop, and deep chains never recurse;
- `scheduled`: whether a `_pump` callback is pending (or running);
- `_to_offload`: expensive kernels made ready during this pump, submitted to the pool as a batch when
  the pump pauses;
- `pool`: the kernel pool (passed in; a `KernelPool` of `threads` threads by default, a `SyncPool`
  in unit tests of actors);
- `tracing`: how many traced steps are in flight (the pump times activations only then).

State it keeps per tag (a step's root tag is its StepState, a loop iteration's is an IterTag):
`tag.outstanding`, the activations of that tag still queued or running. Actors change it only
through the activation API below; when it falls to 0 inside a loop frame, the frame is told
(`tag.frame.quiet(tag)`), which is how iterations and loops end.

The activation API, the only ways in and out of the dispatcher:
- `enqueue(actor, tag, args)`: counts an activation of `tag` and queues `actor.fire(tag, args)`;
- `begin_async(tag)` / `end_async(tag)`: bracket work of `tag` that completes later, off the ready
  queue (a kernel on the pool, a Recv waiting for its tensor, a queue op waiting for room, an
  activation parked behind a variable update, a loop frame inside its parent iteration);
- `start(tag, activations)`: a step's first activations, drained at once in the calling callback.
No other code touches `ready`, `scheduled` or `outstanding`, with two exceptions on the 1-us hop
between actors, where a method call costs ~5%: the pump ends each activation with `end_async`
inlined, and `NodeActor.deliver` / `SingleInputActor.deliver` inline `enqueue`.

Kernels that are expensive by their cost estimate run on the kernel pool (numpy's BLAS and numba's
nogil kernels release the GIL), so independent branches use both cores; a kernel with a splitter runs
as row blocks, and variable updates wait behind kernels on the critical path (actors/pool.py).
"""
from __future__ import annotations

import asyncio
import atexit
import collections
import itertools
import logging
import os
import threading
import time
import weakref
from functools import partial

from actorflow import errors
from actorflow.actors.node import NodeActor
from actorflow.actors.pool import KernelPool, SyncPool
from actorflow.actors.tracing import now_us, thread_id
from actorflow.kernels import interrupt

__all__ = ["Runtime", "SyncPool", "default_runtime", "new_loop"]

log = logging.getLogger(__name__)

_PUMP_BUDGET = 4096

# sim: a factory `threads -> pool` for the runtimes created while a deterministic simulation runs
# (actorflow/sim/world.py installs a synchronous pool in virtual time); None: KernelPool threads.
POOL = None

_OWN_LOOPS: weakref.WeakSet = weakref.WeakSet()     # runtimes whose loop runs on a thread of their own


@atexit.register
def _stop_loops_at_exit(timeout: float = 5.0) -> None:
    """At interpreter exit, stops the event-loop thread of every runtime never closed and waits for
    it (at most `timeout` s in all): a daemon thread that wakes while the interpreter finalizes can
    crash CPython 3.11 (gh-110052) after the program itself has finished."""
    deadline = time.monotonic() + timeout
    live = [rt for rt in list(_OWN_LOOPS) if not rt._closed and rt._thread is not None]
    for rt in live:
        try:
            rt.loop.call_soon_threadsafe(rt.loop.stop)
        except RuntimeError:          # the loop is already closed
            pass
    for rt in live:
        if rt._thread is not threading.current_thread():
            rt._thread.join(max(0.0, deadline - time.monotonic()))


def new_loop():
    """A new event loop: uvloop's when it is installed."""
    try:
        import uvloop
        return uvloop.new_event_loop()
    except ImportError:  # pragma: no cover
        return asyncio.new_event_loop()


def _actor_failed(actor, tag, e: Exception) -> None:
    log.exception("actor %s failed", actor)
    tag.step.fail(errors.InternalError(getattr(actor, "name", None), None,
                                       f"internal error in actor {actor}: {type(e).__name__}: {e}"))


class Runtime:
    """Hosts actors on one event loop. `Runtime()` starts its own loop thread; `Runtime(loop)`
    attaches to an existing loop (a worker server's). `pool` runs the expensive kernels: a
    `KernelPool` of `threads` threads unless given (`SyncPool()` runs them in the caller)."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None, threads: int | None = None,
                 pool=None):
        self.ready: collections.deque = collections.deque()
        self.scheduled = False
        self._to_offload: list = []        # expensive kernels made ready during this dispatch
        self.intra_op = os.environ.get("AF_INTRA_OP", "1") != "0"
        self.threads = threads or getattr(pool, "threads", None) or max(2, os.cpu_count() or 2)
        self._ids = itertools.count(1)
        if pool is None:
            pool = POOL(self.threads) if POOL is not None else KernelPool(self.threads)
        self.pool = pool                   # submit(fn, deferred) and shutdown(): threads, or a simulation's
        self._thread = None
        _limit_blas_threads()
        if loop is None:
            loop = new_loop()
            started = threading.Event()

            def run():
                asyncio.set_event_loop(loop)
                loop.call_soon(started.set)
                loop.run_forever()

            self._thread = threading.Thread(target=run, name="actorflow-runtime", daemon=True)
            self._thread.start()
            started.wait()
            _OWN_LOOPS.add(self)
        self.loop = loop
        self._closed = False
        self.tracing = 0                 # traced steps in flight: the dispatcher times activations

    # -- the activation API ---------------------------------------------------------------------
    def enqueue(self, actor, tag, args) -> None:
        """Queues `actor.fire(tag, args)`, counted as outstanding work of `tag` until it has run."""
        tag.outstanding += 1
        self.ready.append((actor, tag, args))
        if not self.scheduled:
            self.scheduled = True
            self.loop.call_soon(self._pump)

    @staticmethod
    def begin_async(tag) -> None:
        """Work of `tag` begins that ends later, off the ready queue: `tag` stays open until the
        matching `end_async`."""
        tag.outstanding += 1

    @staticmethod
    def end_async(tag) -> None:
        """Work begun by `begin_async(tag)` ended (its outputs, if any, already delivered). An
        iteration with nothing left outstanding tells its frame, which may retire it."""
        c = tag.outstanding - 1
        tag.outstanding = c
        if not c and tag.frame is not None:
            tag.frame.quiet(tag)

    def start(self, tag, activations) -> None:
        """A wave's first activations ((actor, args) pairs of `tag`): queued as by `enqueue`, then
        run at once in this callback unless a pump is already pending. Called on the loop."""
        ready = self.ready
        n = 0
        for actor, args in activations:
            ready.append((actor, tag, args))
            n += 1
        tag.outstanding += n
        if ready and not self.scheduled:
            self.scheduled = True
            self._pump()

    # -- dispatcher ---------------------------------------------------------------------------

    def _pump(self) -> None:
        if self.tracing:                 # one test per pump, none per kernel, when nothing is traced
            return self._pump_traced()
        ready = self.ready
        pop = ready.popleft
        n = _PUMP_BUDGET
        while ready:
            actor, tag, args = pop()
            try:
                actor.fire(tag, args)
            except Exception as e:  # noqa: BLE001 - a runtime bug fails its step, never the dispatcher
                _actor_failed(actor, tag, e)
            c = tag.outstanding - 1       # end_async, inlined
            tag.outstanding = c
            if not c and tag.frame is not None:
                tag.frame.quiet(tag)
            n -= 1
            if not n:
                # Yield to the loop (network I/O, other tasks) and come back.
                if self._to_offload:
                    self._submit_offloads()
                self.loop.call_soon(self._pump)
                return
        if self._to_offload:
            self._submit_offloads()
        self.scheduled = False

    def _pump_traced(self) -> None:
        """`_pump` while a traced step is in flight: times each activation of a traced step."""
        ready = self.ready
        pop = ready.popleft
        n = _PUMP_BUDGET
        while ready:
            actor, tag, args = pop()
            tr = tag.step.trace
            rec = tr.begin(actor, tag, now_us()) if tr is not None else None
            try:
                actor.fire(tag, args)
            except Exception as e:  # noqa: BLE001 - a runtime bug fails its step, never the dispatcher
                _actor_failed(actor, tag, e)
            if rec is not None:
                tr.fired(actor, tag, args, rec, now_us())
            c = tag.outstanding - 1       # end_async, inlined
            tag.outstanding = c
            if not c and tag.frame is not None:
                tag.frame.quiet(tag)
            n -= 1
            if not n:
                if self._to_offload:
                    self._submit_offloads()
                self.loop.call_soon(self._pump)
                return
        if self._to_offload:
            self._submit_offloads()
        self.scheduled = False

    def offload(self, actor: NodeActor, tag, args) -> None:
        """Queues an expensive kernel for the pool; the dispatcher submits the batch when it pauses.
        The kernel is async work of `tag` until `_finished` delivers its output."""
        tag.outstanding += 1              # begin_async, inlined
        self._to_offload.append((actor, tag, args))

    def _submit_offloads(self) -> None:
        batch = self._to_offload
        self._to_offload = []
        split = self.threads > 1 and self.intra_op
        submit = self.pool.submit
        for actor, tag, args in batch:
            parts = None
            if split and actor.split is not None:
                # A big kernel runs as blocks (of rows, columns or images), one pool task each
                # (intra-op parallelism): threads take blocks as they free up, so a kernel that
                # starts while another runs still gets every core once that one ends.
                try:
                    parts = actor.split(self.threads, *args)
                except Exception:  # noqa: BLE001 - fall back to the plain kernel, which reports errors
                    parts = None
            if parts is None:
                job = _Job(self, actor, tag, args)
                tasks = [job.run]
            else:
                job = _Job(self, actor, tag, args, *parts)
                tasks = [partial(job.run_part, i) for i in range(len(job.thunks))]
            tr = tag.step.trace
            if tr is not None:
                job.trace = tr.offloaded(actor, tag, len(tasks) if parts is not None else 0)
            try:
                for t in tasks:
                    submit(t, actor.deferred)
            except RuntimeError as e:     # the pool is shut down: the runtime is closing
                job.exc = errors.CancelledError(actor.name, None, f"{e}: step abandoned")
                self._finished(job)

    def _finished(self, job) -> None:
        """A kernel ended on the pool (called on the loop): deliver its output or fail its step."""
        actor, tag, args, out = job.actor, job.tag, job.args, job.out
        job.args = job.out = None       # other blocks' tasks may still reference the job
        if actor.releases:
            actor.release(args)
        step = tag.step
        if step.error is None:
            if job.exc is not None:
                step.fail(actor.error(job.exc, args, tag))
            else:
                actor.emit(tag, out)
        self.end_async(tag)

    def next_step_id(self) -> int:
        return next(self._ids)

    # -- calling into the loop ----------------------------------------------------------------
    def in_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    def call_soon(self, fn, *args) -> None:
        if self.in_loop():
            fn(*args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.pool.shutdown()
        if self._thread is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5)


class _Job:
    """One kernel call on the pool: whole (`run`), or as row blocks (`run_part(i)` runs thunk i,
    which fills part of `out`). The last block to finish hands the result to the loop: one
    cross-thread wake-up per kernel, not one per block.

    A finished block drops its thunk at once, and the loop drops the inputs before it delivers
    the output: nothing on a pool thread still references an input buffer when the next actor
    runs, so a variable update after this kernel writes in place instead of copying."""
    __slots__ = ("rt", "actor", "tag", "args", "out", "thunks", "finish", "left", "exc", "lock", "trace")

    def __init__(self, rt, actor, tag, args, out=None, thunks=None, finish=None):
        self.rt, self.actor, self.tag, self.args, self.out = rt, actor, tag, args, out
        self.thunks = thunks
        self.finish = finish            # run after the last block: returns the output
        self.left = len(thunks) if thunks else 1
        self.exc = None
        self.lock = threading.Lock() if thunks else None
        self.trace = None               # the Record of a traced step's activation

    def run(self) -> None:
        rec = self.trace
        if rec is not None:
            rec.thread, rec.op_start = thread_id(), now_us()
        try:
            fn = self.actor.fn
            if getattr(fn, "interruptible", False):
                # a whole loop in one call: it reads its step's stop cell (kernels/interrupt.py)
                prev = interrupt.enter(self.tag.step.stop_cell())
                try:
                    self.out = fn(*self.args)
                finally:
                    interrupt.leave(prev)
            else:
                self.out = fn(*self.args)
        except BaseException as e:  # noqa: BLE001 - reported as the kernel's error
            self.exc = e
        if rec is not None:
            rec.op_end = now_us()
        self._done()

    def run_part(self, i) -> None:
        thunk, self.thunks[i] = self.thunks[i], None
        rec = self.trace
        if rec is not None:
            t0 = now_us()
        try:
            thunk()
        except BaseException as e:  # noqa: BLE001
            self.exc = e
        thunk = None
        if rec is not None:
            rec.blocks[i] = (thread_id(), t0, now_us())
        with self.lock:
            self.left -= 1
            last = not self.left
        if last:
            if self.finish is not None and self.exc is None:
                try:
                    self.out = self.finish()
                except BaseException as e:  # noqa: BLE001
                    self.exc = e
            self.finish = None
            self._done()

    def _done(self) -> None:
        try:
            self.rt.loop.call_soon_threadsafe(self.rt._finished, self)
        except RuntimeError:          # the loop is closed: the session is gone
            pass


_blas_limited = False


def _limit_blas_threads() -> None:
    """Runs BLAS single-threaded: parallelism comes from running independent kernels at once on the
    runtime's pool (inter-op), not from BLAS threads that would oversubscribe the cores.
    AF_BLAS_THREADS=n overrides."""
    global _blas_limited
    if _blas_limited:
        return
    _blas_limited = True
    # Loading MKL takes ~0.4 s: start it now, beside the graph building, not in the first MatMul
    # (actorflow's SGEMM, which imports numba, comes with the first float32 product it could take).
    from actorflow.kernels.cpu.blas import preload
    threading.Thread(target=preload, name="actorflow-blas-load", daemon=True).start()
    n = int(os.environ.get("AF_BLAS_THREADS", "1"))
    if n <= 0:
        return
    try:
        from threadpoolctl import threadpool_limits
        threadpool_limits(limits=n, user_api="blas")
    except Exception:  # noqa: BLE001 - threadpoolctl missing or BLAS unknown: leave BLAS as it is
        log.debug("could not limit BLAS threads", exc_info=True)


_default_runtime: Runtime | None = None
_default_lock = threading.Lock()
_default_threads: int | None = None    # the default runtime's pool size (tf.config.threading's intra-op threads)


def set_default_threads(n: int | None) -> None:
    """Sizes the kernel pool of the process-wide runtime (None or 0: one thread per core, at least 2).
    Once that runtime has started, its pool is fixed: a different size raises RuntimeError."""
    global _default_threads
    with _default_lock:
        rt = _default_runtime
        if rt is not None and not rt._closed and n and n != rt.threads:
            raise RuntimeError(f"Intra op parallelism cannot be modified after initialization: the runtime's "
                               f"kernel pool already runs {rt.threads} threads")
        _default_threads = n or None


def default_runtime() -> Runtime:
    """The process-wide runtime with its own loop thread, created on first use."""
    global _default_runtime
    with _default_lock:
        if _default_runtime is None or _default_runtime._closed:
            _default_runtime = Runtime(threads=_default_threads)
        return _default_runtime
