"""A deterministic event loop in virtual time (the simulated world's one loop).

`VirtualLoop` is an asyncio event loop (a `BaseEventLoop`) without a selector: there is no I/O to
wait for, only callbacks and timers. When nothing is ready, its clock jumps to the next timer; time
never passes otherwise, so a run's history depends on its inputs and its seed alone.

Where asyncio leaves the order free, the loop draws it from its seed: timers due at the same instant
run in a shuffled order (the real loop runs them in heap order, itself an accident of insertion).
`call_soon` keeps its FIFO guarantee.

Every callback runs in a context, and the `OWNER` variable of that context names the incarnation of
the simulated process it belongs to (asyncio copies the context into the tasks and callbacks it
creates, and the network passes the receiver's). A callback whose owner is dead is skipped: once
`owner.alive` is False, nothing that process scheduled runs again, not even its `finally` blocks,
as after kill -9.

A loop with no ready callback and no timer while something still waits on it is deadlocked: it
raises `SimulationStalled` instead of spinning (the "no hang" property). `limit_s` bounds virtual
time the same way.
"""
from __future__ import annotations

import asyncio
import contextvars
import heapq
import random
import threading

__all__ = ["VirtualLoop", "SimulationStalled", "SimulationLeak", "OWNER"]

# The incarnation of the simulated process (an object with `alive`) whose code runs now; None for
# the world's own callbacks.
OWNER: contextvars.ContextVar = contextvars.ContextVar("actorflow_sim_owner", default=None)

_MAX_SAME_INSTANT = 5_000_000    # callbacks at one virtual instant before we call it a livelock


class SimulationStalled(RuntimeError):
    """Nothing is ready and no timer is due while something waits (a deadlock), virtual time ran
    past its limit, or callbacks run forever at one instant (a livelock)."""


class SimulationLeak(RuntimeError):
    """Something reached outside the simulation: a thread, a socket, the wall clock."""


class VirtualLoop(asyncio.BaseEventLoop):
    def __init__(self, seed: int = 0, limit_s: float | None = None):
        super().__init__()
        self._now = 0.0
        self._rng = random.Random(f"actorflow-sim-loop-{seed}")
        self.limit_s = limit_s
        self.iterations = 0
        self.callbacks = 0
        self._same = 0
        self.skipped = 0

    # -- the clock ---------------------------------------------------------------------------------
    def time(self) -> float:
        return self._now

    # -- no outside world ------------------------------------------------------------------------------
    def _write_to_self(self):
        pass

    def call_soon_threadsafe(self, callback, *args, context=None):
        if self._thread_id is not None and threading.get_ident() != self._thread_id:
            raise SimulationLeak(f"call_soon_threadsafe({callback!r}) from another thread inside a simulation")
        return self.call_soon(callback, *args, context=context)

    def run_in_executor(self, executor, func, *args):
        raise SimulationLeak(f"run_in_executor({func!r}): no threads inside a simulation")

    async def getaddrinfo(self, *args, **kwargs):
        raise SimulationLeak("getaddrinfo: no real network inside a simulation")

    async def create_connection(self, *args, **kwargs):
        raise SimulationLeak("create_connection: no real sockets inside a simulation")

    async def create_server(self, *args, **kwargs):
        raise SimulationLeak("create_server: no real sockets inside a simulation")

    def _process_events(self, event_list):
        pass

    # -- one iteration ----------------------------------------------------------------------------------
    def _run_once(self):
        sched = self._scheduled
        while sched and sched[0]._cancelled:
            self._timer_cancelled_count -= 1
            heapq.heappop(sched)._scheduled = False
        if self._timer_cancelled_count > 100 and self._timer_cancelled_count * 2 > len(sched):
            live = []
            for h in sched:
                if h._cancelled:
                    h._scheduled = False
                else:
                    live.append(h)
            heapq.heapify(live)
            self._scheduled[:] = live
            self._timer_cancelled_count = 0
        if not self._ready and not self._stopping:
            if not sched:
                raise SimulationStalled(f"deadlock at t={self._now:.6f} s: nothing is ready and no timer is set")
            when = sched[0]._when
            if self.limit_s is not None and when > self.limit_s:
                raise SimulationStalled(f"virtual time limit of {self.limit_s:g} s reached (next timer at "
                                        f"{when:.3f} s)")
            if when > self._now:
                self._now = when
                self._same = 0
        due = []
        while sched and sched[0]._when <= self._now:
            h = heapq.heappop(sched)
            h._scheduled = False
            if h._cancelled:
                self._timer_cancelled_count -= 1
            else:
                due.append(h)
        if len(due) > 1:
            self._rng.shuffle(due)
        self._ready.extend(due)
        n = len(self._ready)
        self.iterations += 1
        self.callbacks += n
        self._same += n
        if self._same > _MAX_SAME_INSTANT:
            raise SimulationStalled(f"livelock at t={self._now:.6f} s: {self._same} callbacks without time passing")
        ready = self._ready
        for _ in range(n):
            h = ready.popleft()
            if h._cancelled:
                continue
            owner = h._context.get(OWNER)
            if owner is not None and not owner.alive:
                self.skipped += 1
                continue
            h._run()
