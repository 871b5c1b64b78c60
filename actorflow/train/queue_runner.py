"""QueueRunner: keep a queue filled from threads or coroutines (tf.compat.v1.train.QueueRunner).

Each enqueue op gets its own loop that runs it again and again. When the queue is closed (the
op fails with OutOfRangeError or CancelledError) the loop ends, and the last loop to end closes the
queue, so its consumers see OutOfRangeError once it is drained. Any other failure is reported to
the Coordinator, which stops everybody. On a stop request the in-flight runs are cancelled (their
steps abort cleanly, taking nothing from and adding nothing to any queue) and `cancel_op` closes the
queue with its pending enqueues cancelled.

Threads (TF's way) or coroutines for programs that already run an event loop:

    threads = af.train.start_queue_runners(sess, coord)           # threads
    tasks = qr.create_tasks(sess, coord)                           # inside `async def`
    ...; coord.request_stop(); await asyncio.gather(*tasks)

Differences from TF 1.x: a stop request cancels in-flight runs instead of waiting for them to
return, so a loop blocked on a full queue (or on an accumulator, for SyncReplicasOptimizer's chief
loop) stops promptly. `queue_runner_def` (a protocol buffer) is not supported.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import weakref

from actorflow import clock, errors
from actorflow.graph.graph import GraphKeys, add_to_collection

__all__ = ["QueueRunner", "add_queue_runner", "start_queue_runners"]

log = logging.getLogger(__name__)


_LINGER_SECS = 0.1


class _Stopped(Exception):
    """The coordinator asked the loop to stop while a run was in flight."""


class QueueRunner:
    """Holds a list of enqueue ops for a queue, each run in its own thread or task
    (tf.compat.v1.train.QueueRunner)."""

    def __init__(self, queue=None, enqueue_ops=None, close_op=None, cancel_op=None,
                 queue_closed_exception_types=None, queue_runner_def=None, import_scope=None):
        if queue_runner_def is not None:
            raise ValueError("QueueRunner: queue_runner_def (a protocol buffer) is not supported by actorflow; "
                             "pass queue and enqueue_ops")
        if queue is None:
            raise ValueError("QueueRunner: queue must be specified")
        if not enqueue_ops:
            raise ValueError("QueueRunner: enqueue_ops must be a non-empty list of ops")
        self._queue = queue
        self._enqueue_ops = list(enqueue_ops)
        self._close_op = close_op if close_op is not None else queue.close()
        self._cancel_op = cancel_op if cancel_op is not None else queue.close(cancel_pending_enqueues=True)
        if queue_closed_exception_types is None:
            queue_closed_exception_types = (errors.OutOfRangeError, errors.CancelledError)
        else:
            for t in queue_closed_exception_types:
                if not (isinstance(t, type) and issubclass(t, errors.OpError)):
                    raise TypeError(f"queue_closed_exception_types must hold af.errors.OpError subclasses, got {t!r}")
        self._queue_closed_exception_types = tuple(queue_closed_exception_types)
        self._lock = threading.Lock()
        self._runs_per_session: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._exceptions_raised: list = []

    # -- properties ---------------------------------------------------------------------------------------
    @property
    def queue(self):
        return self._queue

    @property
    def enqueue_ops(self):
        return self._enqueue_ops

    @property
    def close_op(self):
        return self._close_op

    @property
    def cancel_op(self):
        return self._cancel_op

    @property
    def queue_closed_exception_types(self):
        return self._queue_closed_exception_types

    @property
    def exceptions_raised(self) -> list:
        """Exceptions raised by the loops when no coordinator was given to report them to."""
        return self._exceptions_raised

    @property
    def name(self) -> str:
        """The name of the queue."""
        return self._queue.name

    # -- starting ------------------------------------------------------------------------------------------
    def _claim(self, sess) -> bool:
        with self._lock:
            if self._runs_per_session.get(sess, 0) > 0:
                return False          # already running for this session
            self._runs_per_session[sess] = len(self._enqueue_ops)
            self._exceptions_raised = []
            return True

    def create_threads(self, sess, coord=None, daemon=False, start=False) -> list:
        """Creates (and, with `start`, starts) one thread per enqueue op, plus one that runs
        `cancel_op` when `coord` stops; returns them, or [] if they already run for `sess`
        (tf.train.QueueRunner.create_threads)."""
        if not self._claim(sess):
            return []
        threads = [clock.new_thread(self._run_thread, (sess, op, coord), daemon=daemon,
                                    name=f"QueueRunnerThread-{self.name}-{op.name}") for op in self._enqueue_ops]
        if coord is not None:
            threads.append(clock.new_thread(self._close_on_stop, (sess, coord), daemon=daemon,
                                            name=f"QueueRunnerThread-{self.name}-close_on_stop"))
        for t in threads:
            if coord is not None:
                coord.register_thread(t)
            if start:
                t.start()
        return threads

    def create_tasks(self, sess, coord=None, task_group: asyncio.TaskGroup | None = None) -> list:
        """The coroutine form of `create_threads` (actorflow extension): one asyncio task per
        enqueue op (running them with `await sess.arun`), plus, with `coord`, one that runs
        `cancel_op` on a stop. Must be called inside a running event loop; the tasks belong to
        `task_group` when given, else the caller must await (or cancel) them. They end when the
        queue closes, on an error (reported to `coord`, else raised), or on `coord.request_stop()`."""
        if not self._claim(sess):
            return []
        spawn = task_group.create_task if task_group is not None else asyncio.get_running_loop().create_task
        loops = [spawn(self._loop(sess, op, coord), name=f"QueueRunner-{self.name}-{op.name}")
                 for op in self._enqueue_ops]
        tasks = list(loops)
        if coord is not None:
            tasks.append(spawn(self._acancel_on_stop(sess, coord, loops), name=f"QueueRunner-{self.name}-cancel"))
        return tasks

    # -- the loops -------------------------------------------------------------------------------------------
    def _run_thread(self, sess, enqueue_op, coord) -> None:
        try:
            # sim: a simulated thread runs the loop on the simulation's event loop (actorflow/clock.py)
            if clock.installed() is not None:
                clock.block_on(self._loop(sess, enqueue_op, coord), None)
                return
        except Exception as e:  # noqa: BLE001 - already reported; the thread just ends
            log.debug("QueueRunner thread for %s ended with %s", enqueue_op.name, e)
            return
        loop = asyncio.new_event_loop()
        try:
            if loop.run_until_complete(self._loop(sess, enqueue_op, coord)):
                # A cancelled run reports its end to this loop a moment later: keep the loop open
                # for it rather than have the runtime call into a closed loop.
                loop.run_until_complete(asyncio.sleep(_LINGER_SECS))
        except Exception as e:  # noqa: BLE001 - already reported; the thread just ends
            log.debug("QueueRunner thread for %s ended with %s", enqueue_op.name, e)
        finally:
            loop.close()

    async def _loop(self, sess, enqueue_op, coord) -> bool:
        """Runs `enqueue_op` until the queue closes, an error, or a stop; True if a run was cancelled."""
        decremented = False
        stop = _StopEvent(coord) if coord is not None else None
        try:
            while True:
                if coord is not None and coord.should_stop():
                    break
                try:
                    await _run_until_stop(sess, enqueue_op, stop)
                except self._queue_closed_exception_types:
                    # The queue was closed: this loop is done; the last one closes it for consumers.
                    with self._lock:
                        self._runs_per_session[sess] -= 1
                        decremented = True
                        last = self._runs_per_session[sess] == 0
                    if last:
                        try:
                            await sess.arun(self._close_op)
                        except Exception as e:  # noqa: BLE001 - the session may be closing
                            log.debug("QueueRunner %s: ignored %s while closing the queue", self.name, e)
                    return False
        except _Stopped:
            return True
        except Exception as e:  # noqa: BLE001
            if coord is not None:
                coord.request_stop(e)
            else:
                log.error("Exception in QueueRunner %s: %s", self.name, e)
                with self._lock:
                    self._exceptions_raised.append(e)
                raise
        finally:
            if stop is not None:
                stop.detach()
            if not decremented:
                with self._lock:
                    self._runs_per_session[sess] = self._runs_per_session.get(sess, 1) - 1

    def _close_on_stop(self, sess, coord) -> None:
        coord.wait_for_stop()
        try:
            sess.run(self._cancel_op)
        except Exception as e:  # noqa: BLE001 - the session or queue may be gone already
            log.debug("QueueRunner %s: ignored %s while cancelling", self.name, e)

    async def _acancel_on_stop(self, sess, coord, loops) -> None:
        stop = _StopEvent(coord)
        try:
            waiter = asyncio.ensure_future(stop.wait())
            await asyncio.wait([waiter, *loops], return_when=asyncio.FIRST_COMPLETED)
            if not waiter.done():
                # The loops may all have ended (queue closed, or failed): nothing left to cancel.
                await asyncio.wait([waiter, asyncio.gather(*loops, return_exceptions=True)],
                                   return_when=asyncio.FIRST_COMPLETED)
            if waiter.done():
                try:
                    await sess.arun(self._cancel_op)
                except Exception as e:  # noqa: BLE001
                    log.debug("QueueRunner %s: ignored %s while cancelling", self.name, e)
            else:
                waiter.cancel()
        finally:
            stop.detach()


class _StopEvent:
    """An asyncio.Event set (thread-safely) when the coordinator stops."""

    def __init__(self, coord):
        self._coord = coord
        self._event = asyncio.Event()
        loop = asyncio.get_running_loop()

        def wake():
            try:
                loop.call_soon_threadsafe(self._event.set)
            except RuntimeError:      # the loop is closed: nobody to wake
                pass
        self._wake = wake
        if coord is not None:
            coord._add_stop_callback(wake)

    async def wait(self):
        await self._event.wait()

    def is_set(self) -> bool:
        return self._event.is_set()

    def detach(self) -> None:
        if self._coord is not None:
            self._coord._remove_stop_callback(self._wake)


async def _run_until_stop(sess, op, stop):
    """`await sess.arun(op)`, cancelled when `stop` is set (then raises _Stopped)."""
    if stop is None:
        return await sess.arun(op)
    run = asyncio.ensure_future(sess.arun(op))
    waiter = asyncio.ensure_future(stop.wait())
    await asyncio.wait([run, waiter], return_when=asyncio.FIRST_COMPLETED)
    if run.done():
        waiter.cancel()
        return run.result()
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)
    raise _Stopped()


def add_queue_runner(qr, collection=GraphKeys.QUEUE_RUNNERS) -> None:
    """Adds `qr` to the graph collection `collection` (tf.compat.v1.train.add_queue_runner)."""
    add_to_collection(collection, qr)


def start_queue_runners(sess=None, coord=None, daemon=True, start=True, collection=GraphKeys.QUEUE_RUNNERS) -> list:
    """Starts the threads of every QueueRunner in the graph's `collection`; returns them
    (tf.compat.v1.train.start_queue_runners). `sess` defaults to the default session."""
    if sess is None:
        from actorflow.graph.graph import get_default_session
        sess = get_default_session()
        if sess is None:
            raise ValueError("Cannot start queue runners: no default session is registered. Use `with "
                             "sess.as_default()` or pass an explicit session to af.train.start_queue_runners(sess=sess)")
    threads = []
    for qr in sess.graph.get_collection(collection):
        threads.extend(qr.create_threads(sess, coord=coord, daemon=daemon, start=start))
    return threads
