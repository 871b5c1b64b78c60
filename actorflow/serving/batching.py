"""Dynamic batching: concurrent requests to one signature become one session step.

State (all on the server's event loop, no locks): `_pending`, a FIFO of requests not yet in a
step, with `_rows` their row count; `_slots`, a semaphore bounding the steps in flight
(TF Serving's num_batch_threads); `_steps`, the tasks of those steps. One scheduler task per
queue takes the first pending request, waits up to `batch_timeout_micros` for more rows (less
when the batch fills), then for a free slot (requests keep arriving meanwhile, so under load the
batch grows while the previous steps run), and takes up to `max_batch_size` rows of requests whose
inputs can be concatenated with the first's (the same trailing shapes, or padded to the largest
when `pad_variable_length_inputs` and the signature leaves those dimensions unknown). The step's
outputs are split back along dimension 0, each caller getting its own rows in order.

Back-pressure: more than `max_enqueued_batches * max_batch_size` pending rows refuses new
requests (RequestError 429) instead of growing the queue without bound.
"""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import time

import numpy as np

from actorflow.serving.servable import RequestError

log = logging.getLogger(__name__)

__all__ = ["BatchingParameters", "BatchQueue"]


@dataclasses.dataclass
class BatchingParameters:
    """Batching options, named as TF Serving's `--batching_parameters_file` fields.

    max_batch_size: rows per step at most. batch_timeout_micros: how long the first request of a batch
    waits for more. num_batch_threads: steps in flight at once per signature. max_enqueued_batches:
    pending rows beyond this many full batches are refused with 429. pad_variable_length_inputs: pad
    inputs whose dimensions the signature leaves unknown (with zeros) so that requests of different
    lengths share a step.
    """
    max_batch_size: int = 64
    batch_timeout_micros: int = 1000
    num_batch_threads: int = 2
    max_enqueued_batches: int = 64
    pad_variable_length_inputs: bool = False

    def __post_init__(self):
        for f in ("max_batch_size", "num_batch_threads", "max_enqueued_batches"):
            if int(getattr(self, f)) < 1:
                raise ValueError(f"BatchingParameters.{f} must be at least 1, got {getattr(self, f)}")
        if self.batch_timeout_micros < 0:
            raise ValueError(f"BatchingParameters.batch_timeout_micros must be >= 0, got {self.batch_timeout_micros}")


@dataclasses.dataclass(slots=True)
class _Item:
    feeds: dict
    rows: int
    key: tuple
    future: asyncio.Future
    t: float


class BatchQueue:
    """The batching queue of one signature of one servable. `await submit(feeds)` returns this
    request's outputs. `stats` (a dict shared with the server) counts steps and rows."""

    def __init__(self, runner, params: BatchingParameters, stats: dict | None = None):
        self._runner = runner
        self._p = params
        self._pending: collections.deque = collections.deque()
        self._rows = 0
        self._limit = params.max_enqueued_batches * params.max_batch_size
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(params.num_batch_threads)
        self._steps: set = set()
        self._closed = False
        self.stats = stats if stats is not None else {}
        # Feeds come converted by the runner (its dtypes, shapes checked against the signature): when
        # the signature fixes every dimension but the batch one, all requests can share a step.
        self._one_key = all(s is not None and None not in s[1:] for s in runner.shapes.values())
        self._task = asyncio.get_running_loop().create_task(self._schedule())

    def _key(self, feeds: dict) -> tuple:
        if self._one_key:
            return ()
        if self._p.pad_variable_length_inputs:
            shapes = self._runner.shapes
            return tuple((k, a.dtype.str, tuple(d if shapes[k] is None or shapes[k][i + 1] is not None else None
                                                for i, d in enumerate(a.shape[1:])))
                         for k, a in sorted(feeds.items()))
        return tuple((k, a.dtype.str, a.shape[1:]) for k, a in sorted(feeds.items()))

    async def submit(self, feeds: dict) -> dict:
        """Queues one request (every input with the same dimension 0) and waits for its outputs."""
        if self._closed:
            raise RequestError(503, "model version is being unloaded")
        rows = {a.shape[0] for a in feeds.values()}
        if len(rows) != 1:
            raise RequestError(400, f"inputs disagree on the batch dimension: {sorted(rows)}")
        n = rows.pop()
        if self._rows + n > self._limit and self._rows:
            self.stats["rejected"] = self.stats.get("rejected", 0) + 1
            raise RequestError(429, f"batching queue of signature '{self._runner.key}' is full "
                                    f"({self._rows} rows pending); retry later")
        fut = asyncio.get_running_loop().create_future()
        self._pending.append(_Item(feeds, n, self._key(feeds), fut, time.monotonic()))
        self._rows += n
        self._wake.set()
        return await fut

    async def _schedule(self) -> None:
        p = self._p
        timeout = p.batch_timeout_micros / 1e6
        while True:
            while not self._pending:
                if self._closed:
                    return
                self._wake.clear()
                await self._wake.wait()
            first = self._pending[0]
            deadline = first.t + timeout
            while self._rows < p.max_batch_size:
                rem = deadline - time.monotonic()
                if rem <= 0:
                    break
                self._wake.clear()
                try:
                    async with asyncio.timeout(rem):
                        await self._wake.wait()
                except TimeoutError:
                    break
            await self._slots.acquire()
            batch = self._take()
            if not batch:
                self._slots.release()
                continue
            t = asyncio.get_running_loop().create_task(self._run(batch))
            self._steps.add(t)
            t.add_done_callback(self._steps.discard)

    def _take(self) -> list:
        """Up to max_batch_size rows of pending requests compatible with the first live one."""
        batch, keep = [], collections.deque()
        rows = 0
        key = None
        while self._pending:
            it = self._pending.popleft()
            if it.future.done():          # the caller went away
                self._rows -= it.rows
                continue
            if key is None:
                key = it.key
            if it.key == key and (not batch or rows + it.rows <= self._p.max_batch_size):
                batch.append(it)
                rows += it.rows
                self._rows -= it.rows
                if rows >= self._p.max_batch_size:
                    break
            else:
                keep.append(it)
        keep.extend(self._pending)
        self._pending = keep
        return batch

    def _concat(self, batch) -> dict:
        if len(batch) == 1:
            return batch[0].feeds
        out = {}
        for k in batch[0].feeds:
            arrs = [it.feeds[k] for it in batch]
            if self._p.pad_variable_length_inputs:
                tail = tuple(max(a.shape[i] for a in arrs) for i in range(1, arrs[0].ndim))
                arrs = [a if a.shape[1:] == tail else
                        np.pad(a, [(0, 0)] + [(0, t - s) for s, t in zip(a.shape[1:], tail)]) for a in arrs]
            out[k] = np.concatenate(arrs)
        return out

    async def _run(self, batch) -> None:
        try:
            feeds = self._concat(batch)
            total = sum(it.rows for it in batch)
            self.stats["batch_steps"] = self.stats.get("batch_steps", 0) + 1
            self.stats["batched_rows"] = self.stats.get("batched_rows", 0) + total
            self.stats["batched_requests"] = self.stats.get("batched_requests", 0) + len(batch)
            try:
                outs = await self._runner.run(feeds)
            except Exception as e:  # noqa: BLE001 - the step's error goes to every caller in it
                for it in batch:
                    if not it.future.done():
                        it.future.set_exception(e)
                return
            if len(batch) == 1:
                if not batch[0].future.done():
                    batch[0].future.set_result(outs)
                return
            for k, v in outs.items():
                if np.ndim(v) == 0 or v.shape[0] != total:
                    err = RequestError(500, f"output '{k}' of signature '{self._runner.key}' has shape "
                                            f"{list(np.shape(v))}, which does not keep the batch dimension of "
                                            f"{total} rows; serve it with batching off")
                    for it in batch:
                        if not it.future.done():
                            it.future.set_exception(err)
                    return
            off = 0
            for it in batch:
                if not it.future.done():
                    it.future.set_result({k: v[off:off + it.rows] for k, v in outs.items()})
                off += it.rows
        finally:
            self._slots.release()

    async def close(self) -> None:
        """Finishes the pending requests and the steps in flight, then stops the scheduler."""
        self._closed = True
        self._wake.set()
        try:
            await self._task
        finally:
            if self._steps:
                await asyncio.gather(*list(self._steps), return_exceptions=True)

    def cancel(self) -> None:
        """Stops at once (server teardown): pending callers get 503."""
        self._closed = True
        self._task.cancel()
        for it in self._pending:
            if not it.future.done():
                it.future.set_exception(RequestError(503, "server is shutting down"))
        self._pending.clear()
