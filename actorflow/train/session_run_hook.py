"""Session-run hooks (tf.compat.v1.train.SessionRunHook) and the standard ones.

StopAtStepHook, CheckpointSaverHook, LoggingTensorHook, NanTensorHook, StepCounterHook.
"""
from __future__ import annotations

import logging
import os

import numpy as np

from actorflow import clock

__all__ = ["ProfilerHook", "SessionRunHook", "SessionRunArgs", "SessionRunContext", "SessionRunValues", "StopAtStepHook", "CheckpointSaverListener",
           "CheckpointSaverHook", "LoggingTensorHook", "NanTensorHook", "NanLossDuringTrainingError",
           "StepCounterHook"]

log = logging.getLogger(__name__)


class SessionRunArgs:
    """What a hook adds to a run: extra fetches, feeds and options (tf.train.SessionRunArgs)."""

    def __init__(self, fetches, feed_dict=None, options=None):
        self.fetches = fetches
        self.feed_dict = feed_dict
        self.options = options


class SessionRunValues:
    def __init__(self, results, options=None, run_metadata=None):
        self.results = results
        self.options = options
        self.run_metadata = run_metadata


class SessionRunContext:
    def __init__(self, original_args, session):
        self.original_args = original_args
        self.session = session
        self._stop_requested = False

    def request_stop(self):
        self._stop_requested = True

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested


class SessionRunHook:
    """Hooks into a MonitoredSession's life: begin, after_create_session, before_run, after_run, end."""

    def begin(self):
        pass

    def after_create_session(self, session, coord):
        pass

    def before_run(self, run_context):
        return None

    def after_run(self, run_context, run_values):
        pass

    def end(self, session):
        pass


def _global_step_tensor():
    from actorflow.train.training_util import get_global_step
    gs = get_global_step()
    if gs is None:
        raise RuntimeError("This hook needs a global step: call af.train.get_or_create_global_step() first.")
    return gs


class StopAtStepHook(SessionRunHook):
    """Requests a stop when the global step reaches `last_step` (or `num_steps` after the first run)."""

    def __init__(self, num_steps=None, last_step=None):
        if (num_steps is None) == (last_step is None):
            raise ValueError("Exactly one of num_steps and last_step must be given.")
        self._num_steps = num_steps
        self._last_step = last_step

    def begin(self):
        self._gs = _global_step_tensor()

    def after_create_session(self, session, coord):
        if self._last_step is None:
            self._last_step = int(session.run(self._gs)) + self._num_steps

    def before_run(self, run_context):
        return SessionRunArgs(self._gs)

    def after_run(self, run_context, run_values):
        step = int(run_values.results) + 1
        if step >= self._last_step:
            # The step counter may have moved since; read the real value before stopping.
            if int(run_context.session.run(self._gs)) >= self._last_step:
                run_context.request_stop()


class CheckpointSaverListener:
    """Called around each save of a CheckpointSaverHook (tf.train.CheckpointSaverListener): `begin()`,
    `before_save(session, global_step)`, `after_save(session, global_step)` (returning True asks the
    training loop to stop), `end(session, global_step)`."""

    def begin(self):
        pass

    def before_save(self, session, global_step_value):
        pass

    def after_save(self, session, global_step_value):
        pass

    def end(self, session, global_step_value):
        pass


class CheckpointSaverHook(SessionRunHook):
    """Saves a checkpoint every `save_secs` seconds or `save_steps` steps, and at the end, calling
    `listeners` (CheckpointSaverListeners) around each save (tf.train.CheckpointSaverHook)."""

    def __init__(self, checkpoint_dir, save_secs=None, save_steps=None, saver=None, checkpoint_basename="model.ckpt",
                 scaffold=None, listeners=None):
        if (save_secs is None) == (save_steps is None):
            raise ValueError("Exactly one of save_secs and save_steps must be given.")
        self._dir = checkpoint_dir
        self._save_secs = save_secs
        self._save_steps = save_steps
        self._saver = saver
        self._scaffold = scaffold
        self._path = os.path.join(checkpoint_dir, checkpoint_basename)
        self._last_time = None
        self._last_step = None
        self._listeners = list(listeners or [])
        self.saves = 0

    def begin(self):
        self._gs = _global_step_tensor()
        for li in self._listeners:
            li.begin()
        if self._saver is None:
            if self._scaffold is not None and self._scaffold.saver is not None:
                self._saver = self._scaffold.saver
            else:
                from actorflow.train.saver import Saver
                self._saver = Saver()

    def after_create_session(self, session, coord):
        step = int(session.run(self._gs))
        self._last_time = clock.monotonic()
        self._last_step = step
        if not os.path.exists(os.path.join(self._dir, "checkpoint")):
            self._save(session, step)

    def before_run(self, run_context):
        return SessionRunArgs(self._gs)

    def after_run(self, run_context, run_values):
        step = int(run_values.results) + 1
        due = (self._save_steps is not None and step - self._last_step >= self._save_steps) or \
              (self._save_secs is not None and clock.monotonic() - self._last_time >= self._save_secs)
        if due and self._save(run_context.session, int(run_context.session.run(self._gs))):
            run_context.request_stop()

    def end(self, session):
        step = int(session.run(self._gs))
        if step != self._last_step:
            self._save(session, step)
        for li in self._listeners:
            li.end(session, step)

    def _save(self, session, step) -> bool:
        """Saves; True when a listener asks to stop."""
        for li in self._listeners:
            li.before_save(session, step)
        self._saver.save(session, self._path, global_step=step)
        self._last_time = clock.monotonic()
        self._last_step = step
        self.saves += 1
        log.info("saved checkpoint for step %d in %s", step, self._dir)
        stop = False
        for li in self._listeners:
            if li.after_save(session, step):
                log.info("a CheckpointSaverListener requested that training be stopped (%r)", li)
                stop = True
        return stop


class LoggingTensorHook(SessionRunHook):
    """Logs the values of `tensors` every N iterations or seconds (tf.train.LoggingTensorHook)."""

    def __init__(self, tensors, every_n_iter=None, every_n_secs=None, at_end=False, formatter=None):
        if not at_end and (every_n_iter is None) == (every_n_secs is None):
            raise ValueError("Exactly one of every_n_iter and every_n_secs must be given.")
        if not isinstance(tensors, dict):
            tensors = {getattr(t, "name", str(t)): t for t in (tensors if isinstance(tensors, (list, tuple)) else [tensors])}
        self._tensors = tensors
        self._every_n_iter = every_n_iter
        self._every_n_secs = every_n_secs
        self._at_end = at_end
        self._formatter = formatter
        self._iter = 0
        self._last = None
        self.logged = []

    def before_run(self, run_context):
        self._should = self._every_n_iter is not None and self._iter % self._every_n_iter == 0 or \
            self._every_n_secs is not None and (self._last is None or clock.monotonic() - self._last >= self._every_n_secs)
        return SessionRunArgs(self._tensors) if self._should else None

    def after_run(self, run_context, run_values):
        if self._should:
            self._log(run_values.results)
            self._last = clock.monotonic()
        self._iter += 1

    def end(self, session):
        if self._at_end:
            self._log(session.run(self._tensors))

    def _log(self, values):
        msg = self._formatter(values) if self._formatter else ", ".join(f"{k} = {v}" for k, v in values.items())
        self.logged.append(values)
        log.info("%s", msg)


class NanLossDuringTrainingError(RuntimeError):
    def __str__(self):
        return "NaN loss during training."


class NanTensorHook(SessionRunHook):
    """Stops (or raises NanLossDuringTrainingError) when the loss becomes NaN."""

    def __init__(self, loss_tensor, fail_on_nan_loss=True):
        self._loss = loss_tensor
        self._fail = fail_on_nan_loss

    def before_run(self, run_context):
        return SessionRunArgs(self._loss)

    def after_run(self, run_context, run_values):
        if np.isnan(run_values.results).any():
            if self._fail:
                raise NanLossDuringTrainingError
            log.warning("NaN loss during training; stopping")
            run_context.request_stop()


class StepCounterHook(SessionRunHook):
    """Logs global steps per second every `every_n_steps` steps or `every_n_secs` seconds, and writes
    it as the scalar summary `global_step/sec` when given `output_dir` or `summary_writer`
    (tf.compat.v1.train.StepCounterHook). The rates measured are kept in `rates`."""

    def __init__(self, every_n_steps=100, every_n_secs=None, output_dir=None, summary_writer=None):
        if (every_n_steps is None) == (every_n_secs is None):
            raise ValueError("exactly one of every_n_steps and every_n_secs should be provided.")
        from actorflow.train.summary_hooks import SecondOrStepTimer
        self._timer = SecondOrStepTimer(every_steps=every_n_steps, every_secs=every_n_secs)
        self._summary_writer = summary_writer
        self._output_dir = output_dir
        self.rates = []

    def begin(self):
        if self._summary_writer is None and self._output_dir:
            from actorflow.train.summary_hooks import SummaryWriterCache
            self._summary_writer = SummaryWriterCache.get(self._output_dir)
        self._gs = _global_step_tensor()
        self._summary_tag = self._gs.op.name + "/sec"

    def before_run(self, run_context):
        return SessionRunArgs(self._gs)

    def after_run(self, run_context, run_values):
        stale = int(run_values.results)
        if self._timer.should_trigger_for_step(stale + 1):
            step = int(run_context.session.run(self._gs))       # the value after this run's update
            if self._timer.should_trigger_for_step(step):
                elapsed_time, elapsed_steps = self._timer.update_last_triggered_step(step)
                if elapsed_time is not None and elapsed_time > 0:
                    self._record(elapsed_steps / elapsed_time, step)

    def _record(self, rate, step):
        self.rates.append(rate)
        if self._summary_writer is not None:
            from actorflow.summary import Summary
            self._summary_writer.add_summary(Summary(value=[Summary.Value(tag=self._summary_tag, simple_value=rate)]),
                                             step)
        log.info("%s: %.3g", self._summary_tag, rate)


class ProfilerHook(SessionRunHook):
    """Traces one step every `save_steps` steps or `save_secs` seconds (FULL_TRACE) and writes its
    Chrome trace-event timeline to `output_dir/timeline-<global step>.json`
    (tf.compat.v1.train.ProfilerHook; open the files in chrome://tracing or ui.perfetto.dev). As in
    TF, the first step is never traced: it only starts the timer. The timeline is
    af.client.timeline's (see its docstring for how it differs from TF's)."""

    def __init__(self, save_steps=None, save_secs=None, output_dir="", show_dataflow=True, show_memory=False):
        if (save_steps is None) == (save_secs is None):
            raise ValueError("ProfilerHook: exactly one of save_steps and save_secs should be provided.")
        from actorflow.train.summary_hooks import SecondOrStepTimer
        self._output_file = os.path.join(output_dir, "timeline-{}.json")
        self._show_dataflow, self._show_memory = show_dataflow, show_memory
        self._timer = SecondOrStepTimer(every_steps=save_steps, every_secs=save_secs)
        self.written: list = []      # the paths written, in order

    def begin(self):
        self._next_step = None
        self._gs = _global_step_tensor()

    def before_run(self, run_context):
        from actorflow.actors.session import RunOptions
        self._request = self._next_step is not None and self._timer.should_trigger_for_step(self._next_step)
        opts = RunOptions(trace_level=RunOptions.FULL_TRACE) if self._request else None
        return SessionRunArgs({"global_step": self._gs}, options=opts)

    def after_run(self, run_context, run_values):
        stale = int(run_values.results["global_step"])
        if self._next_step is None:
            self._timer.update_last_triggered_step(stale)
        step = stale + 1
        if self._request:
            step = int(run_context.session.run(self._gs))
            self._timer.update_last_triggered_step(step)
            self._save(self._output_file.format(step), run_values.run_metadata.step_stats)
        self._next_step = step + 1

    def _save(self, path, step_stats):
        from actorflow.client import timeline
        from actorflow.gfile import GFile
        trace = timeline.Timeline(step_stats).generate_chrome_trace_format(
            show_dataflow=self._show_dataflow, show_memory=self._show_memory)
        with GFile(path, "w") as f:
            f.write(trace)
        self.written.append(path)
