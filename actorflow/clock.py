"""The process's clock and its blocking waits: the wall clock, unless a simulation installs its own.

The runtime's training paths (MonitoredTrainingSession, the session hooks, the Saver,
SyncReplicasOptimizer's hook, the worker service, the master) read time and block through these
functions instead of `time` and `threading`, so that the deterministic simulator
(actorflow/sim/world.py) can run them in virtual time on one event loop:

- `time()`, `monotonic()`: seconds (wall clock, and a clock that never goes back);
- `sleep(s)`: blocks the calling client for `s` seconds;
- `block_on(coro, timeout)`: runs a coroutine on the runtime loop for a blocking caller (a client's
  `Session.run`) and returns its result, under a simulation only (outside one, the caller hands the
  coroutine to the loop's thread itself);
- `new_thread(target, args, name, daemon)`: a `threading.Thread`, or a simulated one (the queue
  runners of SyncReplicasOptimizer's chief);
- `wait(event, timeout)`: `threading.Event.wait`, or a wait in virtual time;
- `holding(lock)`: `with lock:`, or a lock waited for in virtual time;
- under a simulation, `installed().run_blocking(fn, *args)` runs a blocking call from a coroutine
  (Session.arun's preparation) in a simulated thread and returns a future of its result.

`install(hook)` replaces them (an object with the same methods), `uninstall()` restores the wall
clock. One `is None` test per call otherwise.
"""
from __future__ import annotations

import contextlib
import time as _time

__all__ = ["time", "monotonic", "sleep", "block_on", "new_thread", "wait", "holding", "install", "uninstall", "installed"]

_hook = None


def time() -> float:
    """Seconds since the epoch (time.time), or the simulation's virtual time."""
    return _time.time() if _hook is None else _hook.time()


def monotonic() -> float:
    """Seconds on a clock that never goes back (time.monotonic), or the simulation's virtual time."""
    return _time.monotonic() if _hook is None else _hook.monotonic()


def sleep(seconds: float) -> None:
    """Blocks the calling thread (time.sleep), or the calling simulated client in virtual time."""
    if _hook is None:
        _time.sleep(seconds)
    else:
        _hook.sleep(seconds)


def block_on(coro, timeout: float | None):
    """Runs `coro` to its end for a blocking caller under a simulation (check `installed()` first;
    without one, the caller submits it to the runtime loop's thread and waits, as usual)."""
    if _hook is None:
        coro.close()
        raise RuntimeError("clock.block_on needs a simulation's clock (actorflow.clock.installed())")
    return _hook.block_on(coro, timeout)


def new_thread(target, args=(), name=None, daemon=None):
    """threading.Thread(target=target, args=args, name=name, daemon=daemon), or the simulation's."""
    if _hook is None:
        import threading
        return threading.Thread(target=target, args=args, name=name, daemon=daemon)
    return _hook.new_thread(target, args, name, daemon)


def wait(event, timeout: float | None = None) -> bool:
    """event.wait(timeout) for a threading.Event; under a simulation, polled in virtual time."""
    if _hook is None:
        return event.wait(timeout)
    deadline = None if timeout is None else _hook.monotonic() + timeout
    while not event.is_set():
        left = None if deadline is None else deadline - _hook.monotonic()
        if left is not None and left <= 1e-6:
            return False
        _hook.sleep(0.01 if left is None else min(0.01, left))
    return True


@contextlib.contextmanager
def holding(lock):
    """`with lock:`; under a simulation, a lock held by another simulated thread (suspended in a
    blocking call) is waited for in virtual time instead of blocking the one real thread."""
    if _hook is None:
        with lock:
            yield
        return
    while not lock.acquire(blocking=False):
        _hook.sleep(1e-4)
    try:
        yield
    finally:
        lock.release()


def install(hook) -> None:
    """Makes `hook` (time, monotonic, sleep, block_on) the process's clock."""
    global _hook
    _hook = hook


def uninstall() -> None:
    global _hook
    _hook = None


def installed():
    """The installed hook, or None (the wall clock)."""
    return _hook
