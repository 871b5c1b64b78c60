"""A progress bar over the global step for MonitoredTrainingSession (tqdm).

TF 1.x has no ProgressBarHook; this one follows the SessionRunHook contract of the TF hooks
(StopAtStepHook's `last_step`/`num_steps`) and draws with tqdm.
"""
from __future__ import annotations

from actorflow.train.session_run_hook import SessionRunArgs, SessionRunHook, _global_step_tensor

__all__ = ["ProgressBarHook"]


class ProgressBarHook(SessionRunHook):
    """Shows the global step's progress towards `last_step` (or `num_steps` after the first run) as
    a tqdm bar, with the latest values of `tensors` ({label: tensor}, e.g. the loss) beside it.

    `every_n_steps` refreshes the tensors' values that often (fetching them costs a little each
    time); the step count itself is updated every run. The bar ends at the global step's real
    value when the session ends, so it never stops one short of a finished run. `file`, `desc`,
    `disable` (None: off when `file` is not a terminal) and `leave` go to tqdm. Pair it with a StopAtStepHook of the same `last_step`: this
    hook shows progress, it does not stop training."""

    def __init__(self, last_step=None, num_steps=None, tensors=None, every_n_steps=1, desc="train", file=None,
                 disable=False, leave=True):
        if (num_steps is None) == (last_step is None):
            raise ValueError("Exactly one of num_steps and last_step must be given.")
        if every_n_steps is None or int(every_n_steps) < 1:
            raise ValueError(f"every_n_steps must be a positive integer, got {every_n_steps!r}")
        self._num_steps = num_steps
        self._last_step = last_step
        self._tensors = dict(tensors or {})
        self._every = int(every_n_steps)
        self._tqdm_args = {"desc": desc, "file": file, "disable": disable, "leave": leave, "unit": "step",
                           "dynamic_ncols": True}
        self.bar = None
        self._runs = 0

    def begin(self):
        self._gs = _global_step_tensor()

    def after_create_session(self, session, coord):
        from tqdm.auto import tqdm
        start = int(session.run(self._gs))
        if self._last_step is None:
            self._last_step = start + int(self._num_steps)
        self.bar = tqdm(total=int(self._last_step), initial=min(start, int(self._last_step)), **self._tqdm_args)

    def before_run(self, run_context):
        self._runs += 1
        if self._tensors and self._runs % self._every == 0:
            return SessionRunArgs({"step": self._gs, "tensors": self._tensors})
        return SessionRunArgs({"step": self._gs})

    def after_run(self, run_context, run_values):
        if self.bar is None:
            return
        res = run_values.results
        # The global step fetched in the same run is read before its update: +1 for this run.
        self._advance(int(res["step"]) + 1)
        if "tensors" in res:
            self.bar.set_postfix({k: _short(v) for k, v in res["tensors"].items()}, refresh=False)

    def end(self, session):
        if self.bar is None:
            return
        try:
            self._advance(int(session.run(self._gs)))
        finally:
            self.bar.close()

    def _advance(self, step: int) -> None:
        step = min(step, int(self._last_step))
        if step > self.bar.n:
            self.bar.update(step - self.bar.n)


def _short(v):
    try:
        return f"{float(v):.4g}"
    except (TypeError, ValueError):
        return str(v)
