"""Hooks that write TensorBoard summaries during training: SummarySaverHook, and the timer they share
with StepCounterHook (tf.compat.v1.train.SummarySaverHook, SecondOrStepTimer)."""
from __future__ import annotations

import logging
import time

from actorflow.graph.graph import GraphKeys, get_default_graph
from actorflow.summary.writer import FileWriterCache as SummaryWriterCache  # tf.compat.v1.train.SummaryWriterCache
from actorflow.train.session_run_hook import SessionRunArgs, SessionRunHook

__all__ = ["SummarySaverHook", "SecondOrStepTimer", "SummaryWriterCache"]

log = logging.getLogger(__name__)


class SecondOrStepTimer:
    """Triggers every `every_secs` seconds or every `every_steps` steps, exactly one of them
    (tf.compat.v1.train.SecondOrStepTimer)."""

    def __init__(self, every_secs=None, every_steps=None):
        if every_secs is None and every_steps is None:
            raise ValueError("Either every_secs or every_steps should be provided.")
        if every_secs is not None and every_steps is not None:
            raise ValueError("Can not provide both every_secs and every_steps.")
        self._every_secs = every_secs
        self._every_steps = every_steps
        self.reset()

    def reset(self):
        self._last_triggered_step = None
        self._last_triggered_time = None

    def should_trigger_for_step(self, step) -> bool:
        """True when `step` is due: the first step, or `every_steps` steps / `every_secs` seconds since
        the last triggered one (never twice for the same step)."""
        if self._last_triggered_step is None:
            return True
        if self._last_triggered_step == step:
            return False
        if self._every_secs is not None and time.time() >= self._last_triggered_time + self._every_secs:
            return True
        return self._every_steps is not None and step >= self._last_triggered_step + self._every_steps

    def update_last_triggered_step(self, step):
        """Records `step` as triggered now; returns (seconds, steps) since the previous trigger, or
        (None, None) the first time."""
        now = time.time()
        if self._last_triggered_time is None:
            elapsed = (None, None)
        else:
            elapsed = (now - self._last_triggered_time, step - self._last_triggered_step)
        self._last_triggered_time = now
        self._last_triggered_step = step
        return elapsed

    def last_triggered_step(self):
        return self._last_triggered_step


def default_summary_op(scaffold=None):
    """The summary op a monitored session writes: the scaffold's `summary_op` when it has one, else the
    one op of the SUMMARY_OP collection, else `af.summary.merge_all()` (cached in SUMMARY_OP), as
    TF's Scaffold does. None when the graph has no summaries."""
    op = getattr(scaffold, "summary_op", None)
    if op is not None:
        return op
    g = get_default_graph()
    found = g.get_collection(GraphKeys.SUMMARY_OP)
    if len(found) > 1:
        raise RuntimeError(f"More than one item in collection {GraphKeys.SUMMARY_OP}; pass summary_op explicitly")
    if found:
        return found[0]
    from actorflow.summary import merge_all
    op = merge_all()
    if op is not None:
        g.add_to_collection(GraphKeys.SUMMARY_OP, op)
    return op


class SummarySaverHook(SessionRunHook):
    """Runs a summary op every `save_steps` steps or `save_secs` seconds and writes its result with
    the global step (tf.compat.v1.train.SummarySaverHook).

    Exactly one of `scaffold` and `summary_op` is given; with a scaffold, the op is the scaffold's
    summary op or `af.summary.merge_all()`. The writer is `summary_writer`, or the cached FileWriter
    of `output_dir`. A SessionLog START is written at the first step, as in TF.
    """

    def __init__(self, save_steps=None, save_secs=None, output_dir=None, summary_writer=None, scaffold=None,
                 summary_op=None):
        if (scaffold is None) + (summary_op is None) != 1:
            raise ValueError("Exactly one of scaffold or summary_op should be set.")
        self._summary_op = summary_op
        self._summary_writer = summary_writer
        self._output_dir = output_dir
        self._scaffold = scaffold
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)

    def begin(self):
        from actorflow.train.training_util import get_global_step
        if self._summary_writer is None and self._output_dir:
            self._summary_writer = SummaryWriterCache.get(self._output_dir)
        self._next_step = None
        self._global_step_tensor = get_global_step()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use SummarySaverHook.")
        if self._summary_op is None:
            self._summary_op = default_summary_op(self._scaffold)

    def _get_summary_op(self):
        op = self._summary_op
        if op is None:
            return None
        return list(op) if isinstance(op, (list, tuple)) else [op]

    def before_run(self, run_context):
        self._request_summary = self._next_step is None or self._timer.should_trigger_for_step(self._next_step)
        requests = {"global_step": self._global_step_tensor}
        if self._request_summary and self._get_summary_op() is not None:
            requests["summary"] = self._get_summary_op()
        return SessionRunArgs(requests)

    def after_run(self, run_context, run_values):
        if not self._summary_writer:
            return
        global_step = int(run_values.results["global_step"]) + 1
        if self._next_step is None or self._request_summary:
            # The fetched step is from before this run's update; read the real one.
            global_step = int(run_context.session.run(self._global_step_tensor))
        if self._next_step is None:
            from actorflow.summary import SessionLog
            self._summary_writer.add_session_log(SessionLog(status=SessionLog.START), global_step)
        if self._request_summary:
            self._timer.update_last_triggered_step(global_step)
            for summary in run_values.results.get("summary", ()):
                self._summary_writer.add_summary(summary, global_step)
        self._next_step = global_step + 1

    def end(self, session=None):
        if self._summary_writer:
            self._summary_writer.flush()
