"""The process's clock and its blocking waits: the wall clock, unless a simulation installs its own.

The runtime's training paths (MonitoredTrainingSession, the session hooks, the Saver,
SyncReplicasOptimizer's hook, the worker service, the master) read time and block through these
functions instead of `time` and `threading`, so that the deterministic simulator
(actorflow/sim/world.py) can run them in virtual time on one event loop:

- `time()`, `monotonic()`: seconds (wall clock, and a clock that never goes back);
- `sleep(s)`: blocks the calling client for `s` seconds;
- `block_on(coro, timeout)`: runs a coroutine on the runtime loop for a blocking caller (a client's
  `Session.run`) and returns its result; None when the caller must hand the coroutine to the loop's
  thread itself, as it does outside a simulation.

`install(hook)` replaces them (an object with the same methods; `block_on` may return
`NotImplemented`), `uninstall()` restores the wall clock. One `is None` test per call otherwise.
"""
from __future__ import annotations

import time as _time

__all__ = ["time", "monotonic", "sleep", "block_on", "install", "uninstall", "installed"]

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
    """Runs `coro` to its end for a blocking caller under a simulation; NotImplemented otherwise (the
    caller then submits it to the runtime loop's thread and waits, as usual)."""
    if _hook is None:
        return NotImplemented
    return _hook.block_on(coro, timeout)


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
