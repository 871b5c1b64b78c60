"""Estimator: train, evaluate and predict with a model_fn, checkpointing in a model directory
(tf.estimator.Estimator, TF 1.15's semantics).

Each call builds a fresh graph: the global step, the input_fn's tensors, the model_fn's spec for the
mode. train() runs a MonitoredTrainingSession whose chief restores the latest checkpoint of
`model_dir` (so a second train() resumes and `max_steps` counts the global step), saves by the
RunConfig's schedule and once at the end; evaluate() and predict() restore a checkpoint (the latest
by default) into their own graph and read their input until it ends (OutOfRangeError) or `steps`.
"""
from __future__ import annotations

import copy
import inspect
import logging
import os
import re
import tempfile

import numpy as np

from actorflow import errors
from actorflow.data.dataset import Dataset
from actorflow.estimator.model_fn import EstimatorSpec, ModeKeys
from actorflow.estimator.run_config import RunConfig
from actorflow.graph.graph import Graph, GraphKeys
from actorflow.graph.ops.random_ops import set_random_seed
from actorflow.graph.variables import global_variables
from actorflow.metrics import mean as metric_mean
from actorflow.train.monitored_session import ChiefSessionCreator, MonitoredSession, MonitoredTrainingSession
from actorflow.train.saver import Saver, latest_checkpoint, list_variables, load_variable
from actorflow.train.session_run_hook import (
    CheckpointSaverHook,
    LoggingTensorHook,
    NanTensorHook,
    SessionRunHook,
    StopAtStepHook,
)
from actorflow.train.training_util import get_or_create_global_step

__all__ = ["Estimator", "WarmStartSettings"]

log = logging.getLogger(__name__)

_MODEL_FN_ARGS = {"features", "labels", "mode", "params", "config"}


def _fn_args(fn) -> tuple:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return ()
    return tuple(n for n, p in sig.parameters.items()
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


class WarmStartSettings:
    """Which checkpoint, and which of its variables, initialize a new model (tf.estimator.WarmStartSettings).

    `vars_to_warm_start` is a regular expression on variable names (or a list of names); the variables
    of the graph that it matches and that the checkpoint holds with the same shape start from there.
    """

    def __init__(self, ckpt_to_initialize_from, vars_to_warm_start=".*", var_name_to_vocab_info=None,
                 var_name_to_prev_var_name=None):
        self.ckpt_to_initialize_from = ckpt_to_initialize_from
        self.vars_to_warm_start = vars_to_warm_start
        self.var_name_to_prev_var_name = dict(var_name_to_prev_var_name or {})


class _FinalOpsHook(SessionRunHook):
    """Reads `final_ops` once at the end of a session (TF's FinalOpsHook)."""

    def __init__(self, final_ops):
        self._final_ops = final_ops
        self.final_ops_values = None

    def end(self, session):
        self.final_ops_values = session.run(self._final_ops)


class Estimator:
    """Trains, evaluates and predicts with `model_fn` (tf.estimator.Estimator).

    `model_fn(features, labels, mode, params, config)` returns an EstimatorSpec; it may declare any
    subset of those arguments (`features` is required) and is called with the ones it declares.
    `model_dir` defaults to `config.model_dir`, else a new temporary directory, as in TF.
    `warm_start_from` (a checkpoint path or directory, or WarmStartSettings) initializes the
    variables of the first training run that has no checkpoint of its own.
    """

    def __init__(self, model_fn, model_dir=None, config=None, params=None, warm_start_from=None):
        if not callable(model_fn):
            raise ValueError(f"model_fn must be callable, given: {model_fn!r}")
        if config is None:
            config = RunConfig()
        elif not isinstance(config, RunConfig):
            raise ValueError(f"config must be an instance of `RunConfig`, but provided {config!r}.")
        if model_dir is not None and config.model_dir is not None and \
                os.path.abspath(model_dir) != os.path.abspath(config.model_dir):
            raise ValueError("`model_dir` are set both in constructor and `RunConfig`, but with different values. "
                             f"In constructor: '{model_dir}', in `RunConfig`: '{config.model_dir}' ")
        model_dir = model_dir or config.model_dir
        if model_dir is None:
            model_dir = tempfile.mkdtemp()
            log.warning("Using temporary folder as model directory: %s", model_dir)
        model_dir = os.fspath(model_dir)
        self._config = config.replace(model_dir=model_dir)
        self._model_dir = model_dir
        args = _fn_args(model_fn)
        if args and "features" not in args:
            raise ValueError(f"model_fn ({model_fn}) must include features argument.")
        unknown = set(args) - _MODEL_FN_ARGS - {"self"}
        if unknown:
            raise ValueError(f"model_fn ({model_fn}) has following not expected args: {sorted(unknown)}")
        if params is not None and "params" not in args:
            raise ValueError(f"model_fn ({model_fn}) does not include params argument, "
                             f"but params ({params}) is passed to Estimator.")
        self._model_fn = model_fn
        self._model_fn_args = args
        self._params = copy.deepcopy(params or {})
        if isinstance(warm_start_from, (str, os.PathLike)):
            warm_start_from = WarmStartSettings(os.fspath(warm_start_from))
        self._warm_start = warm_start_from

    # -- properties ------------------------------------------------------------------------------------------
    @property
    def model_dir(self):
        return self._model_dir

    @property
    def config(self):
        return copy.deepcopy(self._config)

    @property
    def params(self):
        return copy.deepcopy(self._params)

    @property
    def model_fn(self):
        return self._model_fn

    def latest_checkpoint(self):
        """The path of the newest checkpoint in model_dir, or None (Estimator.latest_checkpoint)."""
        return latest_checkpoint(self._model_dir)

    def _require_checkpoint(self):
        path = self.latest_checkpoint()
        if path is None:
            raise ValueError(f"Could not find trained model in model_dir: {self._model_dir}.")
        return path

    def get_variable_names(self):
        """The names of the variables in the latest checkpoint (Estimator.get_variable_names)."""
        return [name for name, _ in list_variables(self._require_checkpoint())]

    def get_variable_value(self, name):
        """The value of variable `name` in the latest checkpoint (Estimator.get_variable_value)."""
        return load_variable(self._require_checkpoint(), name)

    # -- graph building --------------------------------------------------------------------------------------
    def _call_input_fn(self, input_fn, mode):
        args = _fn_args(input_fn)
        kwargs = {}
        if "mode" in args:
            kwargs["mode"] = mode
        if "params" in args:
            kwargs["params"] = self._input_fn_params(mode)
        if "config" in args:
            kwargs["config"] = self.config
        result = input_fn(**kwargs)
        if isinstance(result, Dataset):
            result = result.make_one_shot_iterator().get_next()
        if isinstance(result, (tuple, list)):
            if len(result) != 2:
                raise ValueError(f"input_fn should return (features, labels) as a len 2 tuple, got {len(result)} items")
            return result[0], result[1]
        return result, None

    def _input_fn_params(self, mode):
        return self.params

    def _model_fn_kwargs(self, labels, mode, params):
        """The arguments besides `features` that the model_fn declares, as TF passes them."""
        args = self._model_fn_args
        kwargs = {}
        if "labels" in args:
            kwargs["labels"] = labels
        elif labels is not None:
            raise ValueError("model_fn does not take labels, but input_fn returns labels.")
        if "mode" in args:
            kwargs["mode"] = mode
        if "params" in args:
            kwargs["params"] = params
        if "config" in args:
            kwargs["config"] = self.config
        return kwargs

    def _call_model_fn(self, features, labels, mode):
        spec = self._model_fn(features=features, **self._model_fn_kwargs(labels, mode, self.params))
        if not isinstance(spec, EstimatorSpec):
            raise ValueError(f"model_fn should return an EstimatorSpec. Given: {type(spec).__name__}")
        return spec

    def _new_graph(self):
        g = Graph()
        with g.as_default():
            if self._config.tf_random_seed is not None:
                set_random_seed(self._config.tf_random_seed)
            get_or_create_global_step()
        return g

    def _ensure_saver(self, spec, graph):
        """The scaffold's saver, as TF's Estimator makes it: sharded, keeping keep_checkpoint_max."""
        if spec.scaffold.saver is None and not graph.get_collection(GraphKeys.SAVERS):
            saver = Saver(sharded=True, max_to_keep=self._config.keep_checkpoint_max,
                          keep_checkpoint_every_n_hours=self._config.keep_checkpoint_every_n_hours)
            graph.add_to_collection(GraphKeys.SAVERS, saver)

    def _warm_start_fn(self):
        """A Scaffold init_fn that restores the warm-start variables, built now (before the graph is used)."""
        ws = self._warm_start
        ckpt = ws.ckpt_to_initialize_from
        if os.path.isdir(ckpt):
            found = latest_checkpoint(ckpt)
            if found is None:
                raise ValueError(f"warm_start_from: no checkpoint in directory {ckpt}")
            ckpt = found
        in_ckpt = dict(list_variables(ckpt))
        pattern = ws.vars_to_warm_start
        var_list = {}
        for v in global_variables():
            name = v.op.name
            if name == GraphKeys.GLOBAL_STEP or name == "global_step":
                continue
            if isinstance(pattern, (list, tuple)):
                wanted = name in pattern
            else:
                wanted = re.match(pattern or ".*", name) is not None
            prev = ws.var_name_to_prev_var_name.get(name, name)
            if wanted and prev in in_ckpt and tuple(in_ckpt[prev]) == tuple(v.shape.as_list()):
                var_list[prev] = v
        if not var_list:
            log.warning("warm start from %s matched no variables", ckpt)
            return None
        saver = Saver(var_list=var_list, sharded=False)
        log.info("warm-starting %d variables from %s", len(var_list), ckpt)
        return lambda scaffold, sess: saver.restore(sess, ckpt)

    # -- train -----------------------------------------------------------------------------------------------
    def train(self, input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
        """Trains for `steps` more steps, or until the global step reaches `max_steps`, or until the input
        ends (Estimator.train). Returns self."""
        if steps is not None and max_steps is not None:
            raise ValueError("Can not provide both steps and max_steps.")
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        if max_steps is not None and max_steps <= 0:
            raise ValueError(f"Must specify max_steps > 0, given: {max_steps}")
        hooks = _check_hooks(hooks)
        if max_steps is not None:
            ckpt = self.latest_checkpoint()
            if ckpt is not None:
                done = int(load_variable(ckpt, "global_step"))
                if max_steps <= done:
                    log.info("Skipping training since max_steps has already saved.")
                    return self
        g = self._new_graph()
        with g.as_default():
            global_step = g.get_collection(GraphKeys.GLOBAL_STEP)[0]
            features, labels = self._call_input_fn(input_fn, ModeKeys.TRAIN)
            spec = self._call_model_fn(features, labels, ModeKeys.TRAIN)
            self._ensure_saver(spec, g)
            if not any(t.op.name == "loss" for t in g.get_collection(GraphKeys.SUMMARIES)):
                from actorflow import summary
                summary.scalar("loss", spec.loss)      # as TF's Estimator: the loss curve in TensorBoard
            scaffold = spec.scaffold
            if self._warm_start is not None and self.latest_checkpoint() is None and scaffold.init_fn is None:
                scaffold.init_fn = self._warm_start_fn()
            cfg = self._config
            all_hooks = [NanTensorHook(spec.loss)]
            if steps is not None or max_steps is not None:
                all_hooks.insert(0, StopAtStepHook(num_steps=steps, last_step=max_steps))
            if cfg.log_step_count_steps:
                all_hooks.append(LoggingTensorHook({"loss": spec.loss, "step": global_step},
                                                   every_n_iter=cfg.log_step_count_steps))
            all_hooks += hooks + list(spec.training_hooks)
            chief_hooks = list(spec.training_chief_hooks)
            if cfg.save_checkpoints_steps or cfg.save_checkpoints_secs:
                chief_hooks.append(CheckpointSaverHook(self._model_dir, save_secs=cfg.save_checkpoints_secs,
                                                       save_steps=cfg.save_checkpoints_steps, scaffold=scaffold,
                                                       listeners=saving_listeners))
            elif saving_listeners:
                raise ValueError("There should be a CheckpointSaverHook to use saving_listeners. Please set one "
                                 "of the RunConfig.save_checkpoints_steps or RunConfig.save_checkpoints_secs.")
            loss = None
            with _Closing(MonitoredTrainingSession(
                    checkpoint_dir=self._model_dir, scaffold=scaffold, hooks=all_hooks, chief_only_hooks=chief_hooks,
                    save_checkpoint_secs=None, save_checkpoint_steps=None,
                    save_summaries_steps=cfg.save_summary_steps or None, config=cfg.session_config,
                    log_step_count_steps=cfg.log_step_count_steps,
                    max_wait_secs=cfg.session_creation_timeout_secs)) as sess:
                while not sess.should_stop():
                    try:
                        _, loss = sess.run([spec.train_op, spec.loss])
                    except errors.OutOfRangeError:
                        break
            if loss is not None:
                log.info("Loss for final step: %s.", loss)
        return self

    # -- evaluate --------------------------------------------------------------------------------------------
    def evaluate(self, input_fn, steps=None, hooks=None, checkpoint_path=None, name=None):
        """Evaluates the checkpoint (the latest by default) over `input_fn` until the input ends or
        `steps` batches (Estimator.evaluate). Returns a dict of the eval_metric_ops' values, 'loss' (the
        mean loss over the batches) and 'global_step'."""
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        hooks = _check_hooks(hooks)
        if checkpoint_path is None:
            checkpoint_path = self.latest_checkpoint()
            if checkpoint_path is None:
                log.info("Could not find trained model in model_dir: %s, running initialization to evaluate.",
                         self._model_dir)
        g = self._new_graph()
        with g.as_default():
            global_step = g.get_collection(GraphKeys.GLOBAL_STEP)[0]
            features, labels = self._call_input_fn(input_fn, ModeKeys.EVAL)
            spec = self._call_model_fn(features, labels, ModeKeys.EVAL)
            metrics = dict(spec.eval_metric_ops)
            if "loss" not in metrics:
                metrics["loss"] = metric_mean(spec.loss)
            self._ensure_saver(spec, g)
            update_ops = [op for _, op in metrics.values()]
            final = _FinalOpsHook({**{k: v for k, (v, _) in metrics.items()}, "global_step": global_step})
            creator = ChiefSessionCreator(spec.scaffold, config=self._config.session_config,
                                          checkpoint_filename_with_path=checkpoint_path)
            with _Closing(MonitoredSession(creator, hooks + list(spec.evaluation_hooks) + [final])) as sess:
                n = 0
                while (steps is None or n < steps) and not sess.should_stop():
                    try:
                        sess.run(update_ops)
                    except errors.OutOfRangeError:
                        break
                    n += 1
        results = {k: _scalar(v) for k, v in final.final_ops_values.items()}
        eval_dir = os.path.join(self._model_dir, "eval" if not name else f"eval_{name}")
        _write_eval_summary(eval_dir, results)
        log.info("Saving dict for global step %d: %s", results["global_step"],
                 ", ".join(f"{k} = {v}" for k, v in sorted(results.items())))
        return results

    # -- predict ---------------------------------------------------------------------------------------------
    def predict(self, input_fn, predict_keys=None, hooks=None, checkpoint_path=None, yield_single_examples=True):
        """Yields predictions of the checkpoint (the latest by default) for `input_fn`'s features until
        the input ends (Estimator.predict): one example at a time, or whole batches when
        `yield_single_examples` is False; dicts restricted to `predict_keys` when given."""
        hooks = _check_hooks(hooks)
        if checkpoint_path is None:
            checkpoint_path = self.latest_checkpoint()
            if checkpoint_path is None:
                log.info("Could not find trained model in model_dir: %s, running initialization to predict.",
                         self._model_dir)
        g = self._new_graph()
        with g.as_default():
            features, _ = self._call_input_fn(input_fn, ModeKeys.PREDICT)
            spec = self._call_model_fn(features, None, ModeKeys.PREDICT)
            predictions = spec.predictions
            if predict_keys is not None:
                if isinstance(predict_keys, str):
                    predict_keys = [predict_keys]
                if not isinstance(predictions, dict):
                    raise ValueError("predict_keys argument is not valid in case of non-dict predictions.")
                missing = [k for k in predict_keys if k not in predictions]
                if missing:
                    raise ValueError(f"Expected to run at least one output from {sorted(predictions)}, "
                                     f"provided {predict_keys}.")
                predictions = {k: predictions[k] for k in predict_keys}
            self._ensure_saver(spec, g)
            creator = ChiefSessionCreator(spec.scaffold, config=self._config.session_config,
                                          checkpoint_filename_with_path=checkpoint_path)
            sess = MonitoredSession(creator, hooks + list(spec.prediction_hooks))
        # The loop runs outside `g.as_default()`: a generator suspended inside it would leave g the
        # caller's default graph between items.
        try:
            while not sess.should_stop():
                try:
                    values = sess.run(predictions)
                except errors.OutOfRangeError:
                    break
                if not yield_single_examples:
                    yield values
                    continue
                if isinstance(values, dict):
                    n = _batch_length(values)
                    for i in range(n):
                        yield {k: v[i] for k, v in values.items()}
                else:
                    if np.ndim(values) == 0:
                        raise ValueError("Prediction values should have a batch dimension with "
                                         "yield_single_examples=True; given a scalar.")
                    yield from values
        finally:
            with g.as_default():
                sess.close()

    # -- export ----------------------------------------------------------------------------------------------
    def export_saved_model(self, export_dir_base, serving_input_receiver_fn, assets_extra=None, as_text=False,
                           checkpoint_path=None, experimental_mode=ModeKeys.PREDICT):
        """Exports the checkpoint (the latest by default) as a SavedModel in a new timestamped directory
        under `export_dir_base`, with the PREDICT graph fed by `serving_input_receiver_fn()`'s receiver
        tensors (Estimator.export_saved_model). The signatures are the spec's export_outputs, else its
        predictions as the 'serving_default' predict signature. Returns the directory, as bytes (TF)."""
        from actorflow.actors.session import Session
        from actorflow.estimator.export import PredictOutput, ServingInputReceiver
        from actorflow.saved_model import signature_constants as sc
        from actorflow.saved_model import tag_constants
        from actorflow.saved_model.builder import SavedModelBuilder
        if assets_extra:
            raise NotImplementedError("export_saved_model: assets_extra is not supported")
        if checkpoint_path is None:
            checkpoint_path = self._require_checkpoint()
        g = self._new_graph()
        with g.as_default():
            receiver = serving_input_receiver_fn()
            if not isinstance(receiver, ServingInputReceiver):
                raise ValueError(f"serving_input_receiver_fn must return a ServingInputReceiver, given {receiver!r}")
            spec = self._call_model_fn(receiver.features, None, experimental_mode)
            outputs = spec.export_outputs
            if not outputs:
                outputs = {sc.DEFAULT_SERVING_SIGNATURE_DEF_KEY: PredictOutput(spec.predictions)}
            signatures = {k: out.as_signature_def(receiver.receiver_tensors) for k, out in outputs.items()}
            self._ensure_saver(spec, g)
            spec.scaffold.finalize()
            export_dir = _timestamped_dir(export_dir_base)
            with Session(config=self._config.session_config) as sess:
                spec.scaffold.saver.restore(sess, checkpoint_path)
                if spec.scaffold.local_init_op is not None:
                    sess.run(spec.scaffold.local_init_op)
                builder = SavedModelBuilder(export_dir)
                builder.add_meta_graph_and_variables(sess, [tag_constants.SERVING], signature_def_map=signatures)
                builder.save(as_text=as_text)
        return os.fsencode(export_dir)

    export_savedmodel = export_saved_model


def _write_eval_summary(eval_dir, results):
    """Writes the scalar metrics to an event file in `eval_dir` at the evaluated global step, for
    TensorBoard (TF's _write_dict_to_summary); skipped, with a log line, when the summary protobufs
    (the `summary` extra) are not installed."""
    from actorflow import summary
    try:
        proto = summary.Summary
    except (ImportError, AttributeError):
        log.info("not writing the evaluation summary: TensorBoard's protobufs are not installed")
        return
    values = [proto.Value(tag=k, simple_value=float(v)) for k, v in sorted(results.items())
              if k != "global_step" and isinstance(v, (int, float, np.number)) and not isinstance(v, bool)]
    writer = summary.FileWriterCache.get(eval_dir)
    writer.add_summary(proto(value=values), results["global_step"])
    writer.flush()


def _timestamped_dir(base):
    """base/<seconds since the epoch>, a new one (TF's get_timestamped_export_dir)."""
    import time
    os.makedirs(base, exist_ok=True)
    t = int(time.time())
    while os.path.exists(os.path.join(base, str(t))):
        t += 1
    return os.path.join(os.fspath(base), str(t))


def _check_hooks(hooks) -> list:
    hooks = list(hooks or [])
    for h in hooks:
        if not isinstance(h, SessionRunHook):
            raise TypeError(f"All hooks must be SessionRunHook instances, given: {h!r}")
    return hooks


def _batch_length(values: dict) -> int:
    n = None
    for k, v in values.items():
        if np.ndim(v) == 0:
            raise ValueError(f"Prediction {k} should have a batch dimension with yield_single_examples=True; "
                             "given a scalar.")
        if n is None:
            n = len(v)
        elif len(v) != n:
            raise ValueError("Batch length of predictions should be same. "
                             f"{k} has different batch length than others.")
    return n or 0


def _scalar(v):
    a = np.asarray(v)
    return a.item() if a.ndim == 0 and a.dtype.kind in "biuf" else v


class _Closing:
    """Closes a monitored session on exit, letting its hooks' end() run (final checkpoint, final ops);
    an OutOfRangeError from the input is the normal end, as TF's MonitoredSession.__exit__ treats it."""

    def __init__(self, sess):
        self.sess = sess

    def __enter__(self):
        return self.sess

    def __exit__(self, exc_type, exc, tb):
        self.sess.close()
        return exc_type is not None and issubclass(exc_type, errors.OutOfRangeError)

