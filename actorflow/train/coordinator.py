"""Coordinator: stop a set of threads together, and report the exception that stopped them
(tf.compat.v1.train.Coordinator).

    coord = af.train.Coordinator()
    threads = af.train.start_queue_runners(sess, coord)
    try:
        while not coord.should_stop():
            sess.run(train_op)
    except Exception as e:
        coord.request_stop(e)
    finally:
        coord.request_stop()
        coord.join(threads)      # re-raises the first exception any thread reported

Threads call `request_stop(e)` (or run inside `with coord.stop_on_exception():`) when they fail;
everybody polls `should_stop()` or blocks in `wait_for_stop()`. Coroutines (QueueRunner.create_tasks)
are woken by the same stop, without polling.
"""
from __future__ import annotations

import contextlib
import logging
import sys
import threading

from actorflow import clock, errors

__all__ = ["Coordinator", "LooperThread"]

log = logging.getLogger(__name__)


class Coordinator:
    """Coordinates the termination of a set of threads (tf.compat.v1.train.Coordinator).

    `clean_stop_exception_types`: exceptions that mean "done", not "failed" (default:
    OutOfRangeError, which an input queue raises once it is closed and drained); a stop requested
    with one of them is a clean stop and `join` raises nothing.
    """

    def __init__(self, clean_stop_exception_types=None):
        if clean_stop_exception_types is None:
            clean_stop_exception_types = (errors.OutOfRangeError,)
        self._clean_stop_exception_types = tuple(clean_stop_exception_types)
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._exc_info_to_raise = None
        self._joined = False
        self._registered_threads: set = set()
        self._stop_callbacks: list = []

    def _filter_exception(self, ex):
        ex_instance = ex[1] if isinstance(ex, tuple) else ex
        if ex_instance is not None and isinstance(ex_instance, self._clean_stop_exception_types):
            return None
        return ex

    def request_stop(self, ex=None) -> None:
        """Asks every coordinated thread to stop. `ex` (an exception or a sys.exc_info() triple)
        is the reason: the first one reported is re-raised by `join` (tf.train.Coordinator.request_stop)."""
        with self._lock:
            ex = self._filter_exception(ex)
            if self._joined:
                # Nobody will join again to report it: raise it here rather than lose it.
                ex_instance = ex[1] if isinstance(ex, tuple) else ex
                if ex_instance is not None:
                    raise ex_instance
            if self._stop_event.is_set():
                return
            if ex is not None and self._exc_info_to_raise is None:
                if isinstance(ex, tuple):
                    if len(ex) != 3 or not isinstance(ex[1], BaseException):
                        raise ValueError(f"ex must be an exception or a sys.exc_info() tuple, got {ex!r}")
                    self._exc_info_to_raise = ex
                else:
                    if not isinstance(ex, BaseException):
                        raise ValueError(f"ex must be an exception or a sys.exc_info() tuple, got {ex!r}")
                    self._exc_info_to_raise = (type(ex), ex, ex.__traceback__)
                log.info("Coordinator: stop requested because of %s: %s", type(self._exc_info_to_raise[1]).__name__,
                         self._exc_info_to_raise[1])
            self._stop_event.set()
            callbacks, self._stop_callbacks = self._stop_callbacks, []
        for cb in callbacks:
            try:
                cb()
            except Exception:  # noqa: BLE001 - a waker that fails must not stop the others
                log.exception("Coordinator: a stop callback failed")

    def clear_stop(self) -> None:
        """Clears the stop flag and the recorded exception, so the coordinator can be reused
        (tf.train.Coordinator.clear_stop)."""
        with self._lock:
            self._joined = False
            self._exc_info_to_raise = None
            if self._stop_event.is_set():
                self._stop_event.clear()

    def should_stop(self) -> bool:
        """True once a stop has been requested (tf.train.Coordinator.should_stop)."""
        return self._stop_event.is_set()

    @contextlib.contextmanager
    def stop_on_exception(self):
        """Context manager that requests a stop when its body raises, and swallows the exception:
        `join` re-raises it (tf.train.Coordinator.stop_on_exception)."""
        try:
            yield
        except BaseException:  # noqa: BLE001 - reported through join, as TF does
            self.request_stop(ex=sys.exc_info())

    def wait_for_stop(self, timeout=None) -> bool:
        """Blocks until a stop is requested or `timeout` seconds pass; True if stopped
        (tf.train.Coordinator.wait_for_stop)."""
        return clock.wait(self._stop_event, timeout)

    def register_thread(self, thread) -> None:
        """Adds a thread that `join()` without arguments waits for (tf.train.Coordinator.register_thread)."""
        with self._lock:
            self._registered_threads.add(thread)

    def join(self, threads=None, stop_grace_period_secs=120, ignore_live_threads=False) -> None:
        """Waits until the threads have stopped (tf.train.Coordinator.join).

        Waits for a stop request (or for every thread to end), then gives the threads
        `stop_grace_period_secs` to finish. Re-raises the exception passed to `request_stop`, if
        any; otherwise raises RuntimeError naming the threads still running after the grace period
        (unless `ignore_live_threads`).
        """
        threads = set(self._registered_threads if threads is None else threads) | set(self._registered_threads)
        threads = list(threads)
        while any(t.is_alive() for t in threads) and not self.wait_for_stop(1.0):
            pass
        wait = 0.001
        remaining = float(stop_grace_period_secs)
        while any(t.is_alive() for t in threads) and remaining >= 0.0:
            clock.sleep(wait)
            remaining -= wait
            wait = max(min(2 * wait, remaining), 0.001)
        stragglers = [t.name for t in threads if t.is_alive()]
        with self._lock:
            self._joined = True
            self._registered_threads = set()
            if self._exc_info_to_raise is not None:
                _, ex, tb = self._exc_info_to_raise
                raise ex.with_traceback(tb)
            if stragglers:
                if ignore_live_threads:
                    log.info("Coordinator stopped with threads still running: %s", " ".join(stragglers))
                else:
                    raise RuntimeError(f"Coordinator stopped with threads still running: {' '.join(stragglers)}")

    @property
    def joined(self) -> bool:
        return self._joined

    def raise_requested_exception(self) -> None:
        """Raises the exception passed to `request_stop`, if there was one
        (tf.train.Coordinator.raise_requested_exception)."""
        with self._lock:
            if self._exc_info_to_raise is not None:
                _, ex, tb = self._exc_info_to_raise
                raise ex.with_traceback(tb)

    def loop(self, timer_interval_secs, target, args=None, kwargs=None) -> "LooperThread":
        """Starts a thread calling `target(*args, **kwargs)` every `timer_interval_secs` until the
        coordinator stops (tf.train.Coordinator.loop)."""
        t = LooperThread(self, timer_interval_secs, target=target, args=args, kwargs=kwargs)
        t.start()
        return t

    # -- for coroutines ------------------------------------------------------------------------------------
    def _add_stop_callback(self, callback) -> None:
        """Calls `callback()` (from the requesting thread) when a stop is requested, or now if it
        already was; QueueRunner tasks use it to wake their event loop instead of polling."""
        with self._lock:
            if not self._stop_event.is_set():
                self._stop_callbacks.append(callback)
                return
        callback()

    def _remove_stop_callback(self, callback) -> None:
        with self._lock:
            try:
                self._stop_callbacks.remove(callback)
            except ValueError:
                pass


class LooperThread(threading.Thread):
    """A thread that runs code repeatedly, optionally on a timer, until its coordinator stops
    (tf.compat.v1.train.LooperThread). Exceptions are reported to the coordinator."""

    def __init__(self, coord, timer_interval_secs, target=None, args=None, kwargs=None):
        if not isinstance(coord, Coordinator):
            raise ValueError(f"'coord' argument must be a Coordinator: {coord!r}")
        super().__init__(daemon=True)
        self._coord = coord
        self._timer_interval_secs = timer_interval_secs
        self._target = target
        self._args = tuple(args or ())
        self._kwargs = dict(kwargs or {})
        if self._target is not None:
            coord.register_thread(self)

    def run(self):
        with self._coord.stop_on_exception():
            self.start_loop()
            if self._timer_interval_secs is None:
                while not self._coord.should_stop():
                    self.run_loop()
            else:
                next_time = clock.monotonic() + self._timer_interval_secs
                while not self._coord.wait_for_stop(max(0.0, next_time - clock.monotonic())):
                    next_time += self._timer_interval_secs
                    self.run_loop()
            self.stop_loop()

    def start_loop(self):
        """Called once when the thread starts."""

    def stop_loop(self):
        """Called once before the thread ends."""

    def run_loop(self):
        """Called on every iteration: runs the target by default."""
        if self._target is not None:
            self._target(*self._args, **self._kwargs)
