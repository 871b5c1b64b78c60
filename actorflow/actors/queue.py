"""The queue resource: FIFO, random-shuffle, padding and priority queues with blocking, back-pressure and close.

All operations run on the owning runtime's loop, one at a time. A blocked enqueue or dequeue is a
waiter with a callback; waiters whose step has failed (cancelled, timed out, aborted) are dropped
the next time the queue is serviced, so nothing they carried is ever added or taken (a dequeue_many
at the head takes elements as they arrive, as TF's does, and a dropped one puts them back in front).
"""
from __future__ import annotations

import collections
import heapq
import secrets

import numpy as np

from actorflow import errors
from actorflow.kernels.cpu import philox

__all__ = ["QueueResource"]


class _Waiter:
    __slots__ = ("step", "done", "items", "n", "partial", "taken")

    def __init__(self, step, done, items=None, n=1, partial=False):
        self.step = step
        self.done = done
        self.items = items          # enqueue: deque of elements still to add
        self.n = n                  # dequeue: how many elements
        self.partial = partial      # dequeue_up_to: fewer allowed once closed
        self.taken = ()             # dequeue_many at the head: the elements it took so far

    @property
    def cancelled(self) -> bool:
        return self.step is not None and self.step.error is not None


class QueueResource:
    def __init__(self, name: str, attrs: dict, kind: str):
        self.name = name
        self.kind = kind                                  # "fifo" | "shuffle" | "padding" | "priority"
        self.dtypes = [np.dtype(d) for d in attrs["component_types"]]
        shapes = attrs.get("shapes") or ()
        self.shapes = [tuple(s) if s is not None else None for s in shapes] or [None] * len(self.dtypes)
        if kind == "priority":        # TF: an int64 scalar priority before the declared components
            self.dtypes.insert(0, np.dtype(np.int64))
            self.shapes.insert(0, ())
        self._seq = 0                 # priority ties dequeue in enqueue order
        self.capacity = int(attrs.get("capacity", -1))
        if self.capacity <= 0:
            self.capacity = 1 << 62                       # TF: capacity -1 means unbounded
        self.min_after = int(attrs.get("min_after_dequeue", 0)) if kind == "shuffle" else 0
        seed, seed2 = int(attrs.get("seed", 0)), int(attrs.get("seed2", 0))
        if kind == "shuffle" and seed == 0 and seed2 == 0:
            seed, seed2 = secrets.randbits(64), secrets.randbits(64)
        # TF's RandomShuffleQueue: each dequeue takes the element at word % size, the last fills its slot.
        self.random = philox.PhiloxWords(seed, seed2) if kind == "shuffle" else None
        self.items: list = [] if kind in ("shuffle", "priority") else collections.deque()
        self.closed = False
        self.enqueuers: collections.deque[_Waiter] = collections.deque()
        self.dequeuers: collections.deque[_Waiter] = collections.deque()

    # -- entry point for the runtime ------------------------------------------------------------------
    def run(self, op_type: str, attrs: dict, args, done, step) -> None:
        if op_type == "QueueEnqueueV2":
            self._enqueue([self._element(args, None)], done, step)
        elif op_type == "QueueEnqueueManyV2":
            self._enqueue(self._split(args), done, step)
        elif op_type == "QueueDequeueV2":
            self.dequeuers.append(_Waiter(step, done, n=None))
        elif op_type == "QueueDequeueManyV2":
            self.dequeuers.append(_Waiter(step, done, n=self._count(args[0])))
        elif op_type == "QueueDequeueUpToV2":
            self.dequeuers.append(_Waiter(step, done, n=self._count(args[0]), partial=True))
        elif op_type == "QueueCloseV2":
            done(None, None)
            self.close(bool(attrs.get("cancel_pending_enqueues", False)))
            return
        elif op_type == "QueueSizeV2":
            self._service()                 # puts back what a failed step's dequeue_many held
            done(np.int32(len(self.items)), None)
            return
        elif op_type == "QueueIsClosedV2":
            done(np.bool_(self.closed), None)
            return
        else:
            raise errors.UnimplementedError(None, None, f"queue '{self.name}' cannot run {op_type}")
        self._service()

    def close(self, cancel_pending_enqueues: bool) -> None:
        self.closed = True
        if cancel_pending_enqueues:
            while self.enqueuers:
                w = self.enqueuers.popleft()
                if not w.cancelled:
                    w.done(None, errors.CancelledError(None, None, f"Enqueue operation was cancelled: queue "
                                                                   f"'{self.name}' was closed"))
        self._service()

    # -- elements --------------------------------------------------------------------------------------
    def _count(self, n) -> int:
        n = int(n)
        if n < 0:
            raise errors.InvalidArgumentError(None, None, f"dequeue count must be >= 0, got {n}")
        return n

    def _element(self, comps, index):
        if len(comps) != len(self.dtypes):
            raise errors.InvalidArgumentError(None, None, f"queue '{self.name}' expects {len(self.dtypes)} "
                                                          f"components, got {len(comps)}")
        out = []
        for i, (c, dt) in enumerate(zip(comps, self.dtypes)):
            a = np.array(c if index is None else c[index], dtype=dt, copy=True)
            want = self.shapes[i]
            if want is not None and self.kind != "padding" and tuple(a.shape) != want:
                raise errors.InvalidArgumentError(None, None, f"Shape mismatch in tuple component {i} of queue "
                                                              f"'{self.name}': expected {list(want)}, got {list(a.shape)}")
            if want is not None and self.kind == "padding" and (
                    a.ndim != len(want) or any(w not in (-1, d) for w, d in zip(want, a.shape))):
                raise errors.InvalidArgumentError(None, None, f"Shape mismatch in tuple component {i} of queue "
                                                              f"'{self.name}': expected {list(want)}, got {list(a.shape)}")
            out.append(a)
        return tuple(out)

    def _split(self, comps):
        sizes = {np.shape(c)[0] if np.ndim(c) else None for c in comps}
        if len(sizes) != 1 or None in sizes:
            raise errors.InvalidArgumentError(None, None, f"enqueue_many on queue '{self.name}': components must "
                                                          f"share their first dimension, got {sorted(map(str, sizes))}")
        n = sizes.pop()
        return [self._element(comps, i) for i in range(n)]

    def _enqueue(self, elements, done, step):
        if self.closed:
            done(None, errors.CancelledError(None, None, f"Queue '{self.name}' is closed."))
            return
        self.enqueuers.append(_Waiter(step, done, items=collections.deque(elements)))

    # -- the service loop --------------------------------------------------------------------------------
    def _available(self) -> int:
        return len(self.items) - (0 if self.closed else self.min_after)

    def _put(self, element) -> None:
        if self.kind == "priority":
            heapq.heappush(self.items, (int(element[0]), self._seq, element))
            self._seq += 1
        else:
            self.items.append(element)

    def _take(self, n):
        items = self.items
        if self.kind == "priority":
            return [heapq.heappop(items)[2] for _ in range(n)]
        if self.kind == "shuffle":
            out = []
            for _ in range(n):
                j = self.random() % len(items)
                items[j], items[-1] = items[-1], items[j]
                out.append(items.pop())
            return out
        return [items.popleft() for _ in range(n)]

    def _batch(self, elements):
        comps = []
        for i, dt in enumerate(self.dtypes):
            parts = [e[i] for e in elements]
            if self.kind == "padding":
                rank = parts[0].ndim if parts else (len(self.shapes[i]) if self.shapes[i] else 0)
                if parts:
                    shape = [max(p.shape[d] for p in parts) for d in range(rank)]
                else:
                    shape = [max(s, 0) for s in (self.shapes[i] or ())]
                out = np.zeros([len(parts)] + shape, dtype=dt)
                for j, p in enumerate(parts):
                    out[(j,) + tuple(slice(0, s) for s in p.shape)] = p
                comps.append(out)
            elif parts:
                comps.append(np.stack(parts))
            else:
                shape = self.shapes[i] or ()
                comps.append(np.zeros((0,) + tuple(max(s, 0) for s in shape), dtype=dt))
        return tuple(comps)

    def _out(self, comps):
        # A one-component dequeue op has a single output: its value, not a 1-tuple.
        return comps[0] if len(comps) == 1 else comps

    def _put_back(self, w) -> None:
        """Returns what a dequeue_many took to the front of the queue (it failed or was cancelled)."""
        if w.taken:
            if self.kind == "shuffle":
                self.items.extend(w.taken)
            else:
                self.items.extendleft(reversed(w.taken))
            w.taken = ()

    def _service(self) -> None:
        # A dequeue of n at the head takes elements as they come, as TF's TryDequeueMany does: a
        # batch larger than the capacity fills while the enqueuers it unblocks go on. Should it
        # fail (the queue closed short, its step cancelled), what it took goes back to the front.
        progress = True
        while progress:
            progress = False
            # Enqueuers, in order, while there is room.
            while self.enqueuers:
                w = self.enqueuers[0]
                if w.cancelled:
                    self.enqueuers.popleft()
                    continue
                while w.items and len(self.items) < self.capacity:
                    self._put(w.items.popleft())
                    progress = True
                if w.items:
                    break
                self.enqueuers.popleft()
                w.done(None, None)
            # Dequeuers, in order.
            while self.dequeuers:
                w = self.dequeuers[0]
                if w.cancelled:
                    self.dequeuers.popleft()
                    self._put_back(w)
                    continue
                single = w.n is None
                need = 1 if single else w.n
                avail = self._available()
                have = len(w.taken)
                if have + avail >= need:
                    self.dequeuers.popleft()
                    taken = [*w.taken, *self._take(need - have)] if have else self._take(need)
                    w.taken = ()
                    w.done(self._out(taken[0] if single else self._batch(taken)), None)
                    progress = True
                    continue
                if not self.closed:
                    if avail > 0 and not single:
                        w.taken = [*w.taken, *self._take(avail)]
                        progress = True
                    break
                # Closed: a partial dequeue_up_to takes what is left; everything else fails.
                self._put_back(w)
                avail = self._available()
                self.dequeuers.popleft()
                if w.partial and avail > 0:
                    w.done(self._out(self._batch(self._take(avail))), None)
                    progress = True
                else:
                    w.done(None, errors.OutOfRangeError(
                        None, None, f"Queue '{self.name}' is closed and has insufficient elements "
                                    f"(requested {need}, current size {len(self.items)})"))
            if self.closed and self.enqueuers and not progress:
                break
