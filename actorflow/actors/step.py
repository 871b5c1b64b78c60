"""Per-step state: one run of an executable, and the tag of the step's root frame."""
from __future__ import annotations

import threading

from actorflow import errors
from actorflow.actors.node import DEAD
from actorflow.kernels import interrupt

_CELL_LOCK = threading.Lock()

__all__ = ["StepState"]


class StepState:
    """One run of an executable. It is also the tag of the step's root frame (`tag.step is self`)."""

    __slots__ = ("step", "step_id", "executable", "results", "remaining", "error", "done_cb",
                 "dead_possible", "finished", "frames", "outstanding", "frame", "trace", "stop")

    def __init__(self, executable, step_id, n_results, done_cb):
        self.step = self
        self.step_id = step_id
        self.executable = executable
        self.results = [None] * n_results
        self.remaining = executable.n_sinks
        self.error = None
        self.done_cb = done_cb
        self.dead_possible = executable.dead_possible
        self.finished = False
        self.frames = None           # (parent tag, frame name) -> FrameState, for loops
        self.outstanding = 0          # queued activations of the root frame
        self.frame = None             # the root frame has no FrameState
        self.trace = None             # a StepTracer when the step is traced (actors/tracing.py)
        self.stop = None              # the stop cell of its interruptible kernels (stop_cell)

    # A step is its own root tag (`self.step = self`), so every StepState ends as cyclic garbage. What
    # it hands on (the results, the done callback and the closures and futures behind it) is dropped
    # when it ends: the cycle the collector frees later is then the StepState alone, not a dozen
    # objects per step holding the fetched arrays until the next collection.

    def finish(self) -> None:
        if self.finished:
            return
        self.finished = True
        results, done_cb = self.results, self.done_cb
        self.results = self.done_cb = None
        for i, v in enumerate(results):
            if v is DEAD:
                f = self.executable.plan.fetches[i]
                self.error = errors.InvalidArgumentError(
                    f.op.name if f is not None else None, None,
                    f"Retval[{i}] does not have value: fetched tensor '{f.name}' is on an untaken branch")
                done_cb(None, self.error)
                return
        done_cb(results, None)

    def stop_cell(self):
        """The cell this step's interruptible kernels (a whole while loop as one kernel call) read
        to see whether to stop mid-run (kernels/interrupt.py); `fail` sets it. Made on first use,
        on whichever thread runs such a kernel first."""
        cell = self.stop
        if cell is None:
            with _CELL_LOCK:
                cell = self.stop
                if cell is None:
                    cell = self.stop = interrupt.new_cell()
        if self.error is not None:      # failed before the cell existed: `fail` found none to set
            interrupt.stop(cell, _why(self.error))
        return cell

    def fail(self, error: errors.OpError) -> None:
        if self.error is not None or self.finished:
            return
        self.error = error
        if self.stop is not None:
            interrupt.stop(self.stop, _why(error))
        self.finished = True
        self.frames = None
        done_cb = self.done_cb
        self.results = self.done_cb = None
        self.executable.drop(self)
        done_cb(None, error)

    def __repr__(self):
        return f"<step {self.step_id}>"


def _why(error) -> int:
    """What a stop cell says for a step failed with `error`."""
    if isinstance(error, errors.DeadlineExceededError):
        return interrupt.DEADLINE
    if isinstance(error, errors.CancelledError):
        return interrupt.CANCELLED
    return interrupt.FAILED
