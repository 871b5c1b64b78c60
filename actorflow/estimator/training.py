"""TrainSpec, EvalSpec and train_and_evaluate, local mode (tf.estimator.train_and_evaluate).

As TF 1.15 does with no cluster in TF_CONFIG: one train() call, whose saving listener evaluates each
new checkpoint saved at least `throttle_secs` after the previous evaluation, then the final
checkpoint when training ends (at `max_steps` or the end of the input).
"""
from __future__ import annotations

import logging
import os

from actorflow import clock
from actorflow.estimator.estimator import Estimator
from actorflow.estimator.model_fn import _check_hooks
from actorflow.train.session_run_hook import CheckpointSaverListener

__all__ = ["TrainSpec", "EvalSpec", "train_and_evaluate"]

log = logging.getLogger(__name__)


class TrainSpec:
    """The training half of train_and_evaluate: `input_fn`, `max_steps` (None: forever), `hooks`
    (tf.estimator.TrainSpec)."""

    def __init__(self, input_fn, max_steps=None, hooks=None):
        if not callable(input_fn):
            raise TypeError(f"`input_fn` must be callable, given: {input_fn!r}")
        if max_steps is not None and max_steps <= 0:
            raise ValueError(f"Must specify max_steps > 0, given: {max_steps}")
        self.input_fn = input_fn
        self.max_steps = max_steps
        self.hooks = _check_hooks(hooks)


class EvalSpec:
    """The evaluation half of train_and_evaluate (tf.estimator.EvalSpec): `steps` batches (None: to the
    end of the input), a `name` for the evaluation, `hooks`, `exporters` (each called as
    `exporter.export(estimator, export_path, checkpoint_path, eval_result, is_the_final_export)`),
    and `throttle_secs`, the least time between evaluations. `start_delay_secs` is for distributed
    evaluators and is unused locally, as in TF."""

    def __init__(self, input_fn, steps=100, name=None, hooks=None, exporters=None, start_delay_secs=120,
                 throttle_secs=600):
        if not callable(input_fn):
            raise TypeError(f"`input_fn` must be callable, given: {input_fn!r}")
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"`name` must be string, given: {name!r}")
        if start_delay_secs < 0:
            raise ValueError(f"Must specify start_delay_secs >= 0, given: {start_delay_secs}")
        if throttle_secs < 0:
            raise ValueError(f"Must specify throttle_secs >= 0, given: {throttle_secs}")
        if exporters is None:
            exporters = ()
        elif not isinstance(exporters, (list, tuple)):
            exporters = (exporters,)
        names = [getattr(e, "name", None) for e in exporters]
        if len(set(names)) != len(names):
            raise ValueError(f"`exporters` must have unique names, given: {names}")
        self.input_fn = input_fn
        self.steps = steps
        self.name = name
        self.hooks = _check_hooks(hooks)
        self.exporters = tuple(exporters)
        self.start_delay_secs = start_delay_secs
        self.throttle_secs = throttle_secs


class _EvalListener(CheckpointSaverListener):
    """Evaluates each new checkpoint at least `throttle_secs` after the last evaluation, and the final
    one (TF's _NewCheckpointListenerForEvaluate)."""

    def __init__(self, estimator, eval_spec):
        self._est = estimator
        self._spec = eval_spec
        self.metrics = None
        self.exports = []
        self._evaluated = None

    def begin(self):
        self._last = clock.monotonic()

    def _evaluate(self, final):
        ckpt = self._est.latest_checkpoint()
        if ckpt is None or ckpt == self._evaluated:
            return
        self._evaluated = ckpt
        self._last = clock.monotonic()
        self.metrics = self._est.evaluate(self._spec.input_fn, steps=self._spec.steps, hooks=self._spec.hooks,
                                          name=self._spec.name, checkpoint_path=ckpt)
        self.exports = [e.export(self._est, os.path.join(self._est.model_dir, "export", e.name), ckpt,
                                 self.metrics, final) for e in self._spec.exporters]

    def after_save(self, session, global_step_value):
        if clock.monotonic() - self._last >= self._spec.throttle_secs and global_step_value > 0:
            self._evaluate(False)
        return False

    def end(self, session, global_step_value):
        self._evaluate(True)


def train_and_evaluate(estimator, train_spec, eval_spec):
    """Trains `estimator` to `train_spec.max_steps` (or the end of its input), evaluating new checkpoints
    on the way and the last one at the end (tf.estimator.train_and_evaluate, local mode). Returns (the
    final evaluation's metrics, the exporters' results of the final export)."""
    if not isinstance(estimator, Estimator):
        raise TypeError(f"`estimator` must have type `tf.estimator.Estimator`, given {type(estimator)}")
    if not isinstance(train_spec, TrainSpec):
        raise TypeError(f"`train_spec` must have type `tf.estimator.TrainSpec`, given {type(train_spec)}")
    if not isinstance(eval_spec, EvalSpec):
        raise TypeError(f"`eval_spec` must have type `tf.estimator.EvalSpec`, given {type(eval_spec)}")
    listener = _EvalListener(estimator, eval_spec)
    estimator.train(train_spec.input_fn, hooks=train_spec.hooks, max_steps=train_spec.max_steps,
                    saving_listeners=[listener])
    if listener.metrics is None:          # training was skipped: max_steps was already reached
        listener.begin()
        listener.end(None, None)
    return listener.metrics, listener.exports
