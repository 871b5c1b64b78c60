"""Send/Recv rendezvous: a value meets its receiver under (step, edge key, frame/iteration key).

A value may arrive before its step starts here (the sender ran ahead of this task's run_graph
request), so values of steps that are not running are kept, but not for ever and not without limit:

- a step that has not started here `grace` seconds after its first value arrived expires: its
  values are dropped, and the step, should it start after all, fails at once with
  DeadlineExceededError instead of waiting for values that are gone;
- values for a step that finished or failed here are dropped on arrival;
- each origin (a connection) may have at most `max_pending` bytes of values waiting; a value over
  that, or over the process `budget`, fails its step with ResourceExhaustedError naming the origin;
- when an origin goes away (`drop_origin`), its values for steps that have not started are dropped
  and those steps fail with the origin's error.
"""
from __future__ import annotations

import collections
import ctypes
import logging
import time

from actorflow import errors

__all__ = ["Rendezvous"]

log = logging.getLogger(__name__)

_TRIM_BYTES = 1 << 20  # dropping at least this much gives the freed heap back to the OS
_malloc_trim = None     # glibc's malloc_trim once looked up; False where there is none
_REMEMBER = 4096        # finished and aborted step ids remembered (late values for them are dropped)


class Rendezvous:
    """Single-threaded (the runtime's loop). A value may arrive before or after its receiver asks."""

    def __init__(self, grace: float = 60.0, max_pending: int | None = None, budget=None, clock=time.monotonic):
        self.grace = grace
        self.max_pending = max_pending
        self.budget = budget              # a transport.budget.ByteBudget shared with the connections, or None
        self.clock = clock
        self._steps: dict[int, dict] = {}
        self._aborted: dict[int, BaseException] = {}
        self._finished: collections.OrderedDict[int, None] = collections.OrderedDict()
        self._running: set[int] = set()
        self._born: dict[int, float] = {}             # step not running here -> when its first value came
        self._pending: dict[object, int] = {}         # origin -> bytes of its values waiting here
        self._refusals: dict[object, int] = {}        # origin -> values refused (for the log), until it goes away

    def start(self, step_id: int) -> None:
        """The step starts here: its values stay until it finishes."""
        self._running.add(step_id)
        self._born.pop(step_id, None)

    def put(self, step_id: int, key, value, origin=None):
        """Delivers a value. From an `origin` (a connection's name), it counts against that origin's
        pending bytes; over the limit, the value is dropped and the step fails with the
        ResourceExhaustedError returned here (returned, not raised: a traceback kept with the step's
        error would keep the dropped value alive through its frames)."""
        if step_id in self._aborted or step_id in self._finished:
            return None
        slots = self._steps.get(step_id)
        waiter = None if slots is None else slots.pop(key, None)
        if waiter is None:
            nbytes = int(getattr(value, "nbytes", 0) or 0) if origin is not None else 0
            if nbytes:
                err = self._charge(step_id, origin, nbytes)
                if err is not None:
                    return err
            if slots is None:
                slots = self._steps[step_id] = {}
                if step_id not in self._running:
                    self._born[step_id] = self.clock()
            slots[key] = _Value(value, origin, nbytes)
            return None
        elif isinstance(waiter, _Value):
            slots[key] = waiter
            raise RuntimeError(f"duplicate send for step {step_id} key {key!r}")
        else:
            if not slots:
                self._steps.pop(step_id, None)
            waiter(value, None)
        return None

    def _charge(self, step_id: int, origin, nbytes: int):
        used = self._pending.get(origin, 0)
        err = None
        if self.max_pending is not None and used + nbytes > self.max_pending:
            err = errors.ResourceExhaustedError(
                None, None, f"{origin}: a {nbytes}-byte tensor for step {step_id} would exceed the "
                            f"{self.max_pending}-byte limit on tensors waiting from one peer ({used} bytes waiting)")
        elif self.budget is not None:
            try:
                self.budget.take(nbytes, str(origin), "of tensors waiting")
            except errors.ResourceExhaustedError as e:
                err = e.with_traceback(None)
        if err is not None:
            # One line per origin and thousand refusals: a flooding peer must not flood the log too.
            k = self._refusals[origin] = self._refusals.get(origin, 0) + 1
            if k % 1000 == 1:
                log.warning("%s (refusal %d from this peer)", err.message, k)
            self.abort(step_id, err)
            return err
        self._pending[origin] = used + nbytes
        return None

    def _release(self, v: _Value) -> None:
        if v.nbytes:
            left = self._pending.get(v.origin, 0) - v.nbytes
            if left > 0:
                self._pending[v.origin] = left
            else:
                self._pending.pop(v.origin, None)
            if self.budget is not None:
                self.budget.give(v.nbytes)
            v.nbytes = 0

    def recv(self, step_id: int, key, callback) -> None:
        """Calls `callback(value, None)` when the value is there, or `callback(None, error)` on abort."""
        err = self._aborted.get(step_id)
        if err is not None:
            callback(None, err)
            return
        slots = self._steps.setdefault(step_id, {})
        v = slots.pop(key, None)
        if v is None:
            slots[key] = callback
        else:
            if not slots:
                self._steps.pop(step_id, None)
            self._release(v)
            callback(v.value, None)

    def _drop(self, step_id: int) -> dict:
        """Removes the step's entries, releasing the bytes its values held; returns them."""
        slots = self._steps.pop(step_id, None) or {}
        self._born.pop(step_id, None)
        for v in slots.values():
            if isinstance(v, _Value):
                self._release(v)
        return slots

    def abort(self, step_id: int, error: BaseException) -> None:
        """Fails every receiver of the step and drops its buffered values."""
        slots = self._drop(step_id)
        self._running.discard(step_id)
        self._aborted[step_id] = error
        if len(self._aborted) > _REMEMBER:       # bounded memory: forget the oldest aborts
            for k in list(self._aborted)[:_REMEMBER // 2]:
                del self._aborted[k]
        for v in slots.values():
            if not isinstance(v, _Value):
                v(None, error)

    def waiting_on(self, predicate) -> list[int]:
        """Steps with a receiver waiting on a key for which `predicate(key)` holds."""
        out = []
        for step_id, slots in self._steps.items():
            if any(not isinstance(v, _Value) and predicate(k) for k, v in slots.items()):
                out.append(step_id)
        return out

    def finish(self, step_id: int) -> None:
        """Drops anything left of a finished step; values that arrive for it later are dropped too."""
        self._drop(step_id)
        self._running.discard(step_id)
        self._finished[step_id] = None
        if len(self._finished) > _REMEMBER:
            self._finished.popitem(last=False)

    def expire(self, now: float | None = None) -> list[int]:
        """Expires the steps that have not started here within `grace` seconds of their first value;
        returns their ids. The owner calls this periodically."""
        now = self.clock() if now is None else now
        old = [s for s, t in self._born.items() if now - t >= self.grace]
        if old:
            n = sum(v.nbytes for s in old for v in self._steps.get(s, {}).values() if isinstance(v, _Value))
            log.warning("dropping %d bytes of tensors for %d steps (first %d): they did not start here within %g s",
                        n, len(old), old[0], self.grace)
        for s in old:
            self.abort(s, errors.DeadlineExceededError(
                None, None, f"tensors for step {s} arrived but the step did not start here within {self.grace:g} s; "
                            "they were dropped"))
        if old and n >= _TRIM_BYTES:
            trim_heap()
        return old

    def drop_origin(self, origin, error: BaseException) -> None:
        """`origin` went away: steps not running here that hold its values fail with `error`."""
        self._refusals.pop(origin, None)
        if not self._pending.get(origin):
            return
        for s in [s for s in self._born
                  if any(isinstance(v, _Value) and v.origin == origin for v in self._steps.get(s, {}).values())]:
            self.abort(s, error)

    def pending(self) -> int:
        return sum(len(s) for s in self._steps.values())

    def pending_bytes(self, origin=None) -> int:
        """Bytes of values waiting here, from `origin` or from all origins."""
        return self._pending.get(origin, 0) if origin is not None else sum(self._pending.values())


class _Value:
    __slots__ = ("value", "origin", "nbytes")

    def __init__(self, value, origin=None, nbytes: int = 0):
        self.value = value
        self.origin = origin
        self.nbytes = nbytes


def trim_heap() -> None:
    """Gives freed heap memory back to the OS (glibc's malloc_trim; nothing elsewhere). Tensors of
    a few KiB live in malloc's arenas, which keep their pages after free: without this, a peer's
    flood of values that expire leaves the process's RSS high for good."""
    global _malloc_trim
    if _malloc_trim is None:
        try:
            _malloc_trim = ctypes.CDLL(None).malloc_trim
            _malloc_trim.argtypes, _malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
        except (OSError, AttributeError):
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)
