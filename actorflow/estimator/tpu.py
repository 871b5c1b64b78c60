"""TPUEstimator run on the CPU (tf.compat.v1.estimator.tpu, tf.contrib.tpu; TF 1.15's semantics with
`use_tpu=False`).

TF-1.x programs written for Cloud TPUs (BERT's run_pretraining.py and run_classifier.py, among many)
build everything through `TPUEstimator` and `TPUEstimatorSpec`, and run on CPUs and GPUs by passing
`use_tpu=False`. This module is that path:

- the model_fn and the input_fn must take `params`; each call gets a copy of the estimator's params
  with `params["batch_size"]`, the global batch size of the mode (`train_batch_size`,
  `eval_batch_size`, `predict_batch_size`; absent when that size is None, and for the model_fn of
  `export_saved_model`), and the model_fn also `params["use_tpu"]`, False;
- a `TPUEstimatorSpec` becomes an `EstimatorSpec` as TF's `as_estimator_spec` makes it: its
  `eval_metrics = (metric_fn, tensors)` calls `metric_fn(*tensors)` (or `**tensors` for a dict) for the
  eval_metric_ops, `scaffold_fn()` gives the scaffold, and `host_call` runs its ops every step;
- an `ExamplesPerSecondHook` logs (and, with summaries on, records) `global_step/sec` and
  `examples/sec` every `log_step_count_steps` steps instead of the Estimator's loss line, as TF's does.

actorflow has no TPU: `use_tpu=True` keeps TF's checks of its arguments (a `train_batch_size`,
positive batch sizes), logs a warning, and runs on the CPU as `use_tpu=False` does; a
TPUClusterResolver is a clear error (af.contrib.cluster_resolver).
"""
from __future__ import annotations

import collections
import copy
import inspect
import logging
import re

from actorflow.estimator.estimator import Estimator, _fn_args
from actorflow.estimator.model_fn import EstimatorSpec, ModeKeys
from actorflow.estimator.run_config import RunConfig as _BaseRunConfig
from actorflow.train.session_run_hook import SessionRunArgs, SessionRunHook, StepCounterHook

__all__ = ["InputPipelineConfig", "TPUConfig", "RunConfig", "TPUEstimatorSpec", "TPUEstimator",
           "ExamplesPerSecondHook"]

log = logging.getLogger(__name__)

_BATCH_SIZE_KEY = "batch_size"
_USE_TPU_KEY = "use_tpu"
_CTX_KEY = "context"
_RESERVED_PARAMS_KEYS = [_BATCH_SIZE_KEY, _CTX_KEY]


class InputPipelineConfig:
    """How a TPU job's input_fn is replicated (tf.estimator.tpu.InputPipelineConfig); on the CPU the
    input_fn runs once, whichever is chosen."""
    PER_SHARD_V1 = 1
    PER_HOST_V1 = 2
    PER_HOST_V2 = 3
    BROADCAST = 4
    SLICED = 5


def _check_positive_integer(value, name):
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be positive integer. Got {value}")


_ITERATIONS = re.compile(r"^([1-9]\d*)([smh]?)$")


def _parse_iterations_per_loop(value):
    """(value, 'count' | 'seconds') of TPUConfig's iterations_per_loop: a positive int, or a duration
    like '300s', '5m', '1h'."""
    if isinstance(value, int) and not isinstance(value, bool):
        _check_positive_integer(value, "TPUConfig iterations_per_loop")
        return value, "count"
    m = _ITERATIONS.match(str(value))
    if not isinstance(value, str) or m is None:
        raise ValueError("Invalid TPUConfig `iterations_per_loop` value. Value must be positive integer "
                         f"value or duration string, e.g. 300s, 5m or 1h. Got {value!r}")
    n = int(m.group(1))
    if not m.group(2):
        return n, "count"
    return n * {"s": 1, "m": 60, "h": 3600}[m.group(2)], "seconds"


_TPU_CONFIG_FIELDS = ["iterations_per_loop", "num_shards", "num_cores_per_replica", "per_host_input_for_training",
                      "tpu_job_name", "initial_infeed_sleep_secs", "input_partition_dims",
                      "eval_training_input_configuration", "experimental_host_call_every_n_steps",
                      "experimental_allow_per_host_v2_parallel_get_next", "experimental_feed_hook"]


class TPUConfig(collections.namedtuple("TPUConfig", _TPU_CONFIG_FIELDS)):
    """TPU settings of a RunConfig (tf.estimator.tpu.TPUConfig), checked as TF checks them. On the CPU
    only `iterations_per_loop` has an effect: TPUEstimator logs its rates every
    ceil(log_step_count_steps / iterations_per_loop) steps, as TF does."""

    def __new__(cls, iterations_per_loop=2, num_shards=None, num_cores_per_replica=None,
                per_host_input_for_training=True, tpu_job_name=None, initial_infeed_sleep_secs=None,
                input_partition_dims=None, eval_training_input_configuration=InputPipelineConfig.PER_HOST_V1,
                experimental_host_call_every_n_steps=1, experimental_allow_per_host_v2_parallel_get_next=False,
                experimental_feed_hook=None):
        _parse_iterations_per_loop(iterations_per_loop)
        if num_shards is not None:
            _check_positive_integer(num_shards, "TPUConfig num_shards")
        if input_partition_dims is not None:
            if len(input_partition_dims) not in (1, 2):
                raise ValueError("input_partition_dims must be a list/tuple with one or two elements.")
            if per_host_input_for_training is not InputPipelineConfig.PER_HOST_V2:
                raise ValueError("input_partition_dims is only supported in PER_HOST_V2 mode.")
            if num_cores_per_replica is None:
                raise ValueError("input_partition_dims requires setting num_cores_per_replica.")
        if num_cores_per_replica is not None and num_cores_per_replica not in (1, 2, 4, 8, 16, 32, 64, 128):
            raise ValueError(f"num_cores_per_replica must be 1, 2, 4, 8, 16, 32, 64, 128; got {num_cores_per_replica}")
        if eval_training_input_configuration not in (InputPipelineConfig.PER_HOST_V1, InputPipelineConfig.SLICED):
            raise ValueError("eval_training_input_configuration must be PER_HOST_V1 or SLICED; "
                             f"got {eval_training_input_configuration}")
        if per_host_input_for_training is False:
            per_host_input_for_training = InputPipelineConfig.PER_SHARD_V1
        elif per_host_input_for_training is True:
            per_host_input_for_training = InputPipelineConfig.PER_HOST_V1
        if initial_infeed_sleep_secs:
            _check_positive_integer(initial_infeed_sleep_secs, "TPUConfig initial_infeed_sleep_secs")
        return super().__new__(cls, iterations_per_loop, num_shards, num_cores_per_replica,
                               per_host_input_for_training, tpu_job_name, initial_infeed_sleep_secs,
                               input_partition_dims, eval_training_input_configuration,
                               experimental_host_call_every_n_steps, experimental_allow_per_host_v2_parallel_get_next,
                               experimental_feed_hook)


class RunConfig(_BaseRunConfig):
    """A RunConfig with a TPUConfig (tf.estimator.tpu.RunConfig). `master` and `cluster` (a
    ClusterResolver) are kept as TF keeps them; the estimator itself runs in this process."""

    def __init__(self, tpu_config=None, evaluation_master=None, master=None, cluster=None, **kwargs):
        super().__init__(**kwargs)
        if tpu_config is not None and not isinstance(tpu_config, TPUConfig):
            raise TypeError(f"tpu_config must be a TPUConfig, given: {tpu_config!r}")
        self._tpu_config = tpu_config or TPUConfig()
        self._cluster = cluster
        self._master = ""
        if master is not None:
            if cluster is not None:
                raise ValueError("Both master and cluster are set.")
            self._master = master
        elif cluster:
            self._master = cluster.master()
        self._evaluation_master = evaluation_master if evaluation_master is not None else self._master

    tpu_config = property(lambda self: self._tpu_config)
    cluster = property(lambda self: self._cluster)
    master = property(lambda self: self._master)
    evaluation_master = property(lambda self: self._evaluation_master)

    def replace(self, **kwargs):
        """RunConfig.replace, which also takes `tpu_config`."""
        if "tpu_config" not in kwargs:
            return super().replace(**kwargs)
        tpu_config = kwargs.pop("tpu_config")
        new = super().replace(**kwargs) if kwargs else copy.copy(self)
        new._tpu_config = tpu_config
        return new


def _validate_host_calls(host_calls: dict) -> None:
    """TF's checks of `eval_metrics` and `host_call`: (callable, list/tuple/dict of tensors), a list as
    long as the function's arguments unless it takes *args."""
    for name, host_call in host_calls.items():
        if not isinstance(host_call, (tuple, list)):
            raise ValueError(f"{name} should be tuple or list")
        if len(host_call) != 2:
            raise ValueError(f"{name} should have two elements.")
        fn, tensors = host_call
        if not callable(fn):
            raise TypeError(f"{name}[0] should be callable.")
        if not isinstance(tensors, (tuple, list, dict)):
            raise ValueError(f"{name}[1] should be tuple or list, or dict.")
        if isinstance(tensors, (tuple, list)):
            try:
                spec = inspect.getfullargspec(fn)
            except TypeError:
                continue
            if spec.varargs is None and len(tensors) != len(_fn_args(fn)):
                raise RuntimeError(f"In TPUEstimatorSpec.{name}, length of tensors {len(tensors)} does not match "
                                   f"method args of the function, which takes {len(_fn_args(fn))}.")


def _call_host_fn(name, host_call):
    fn, tensors = host_call
    if isinstance(tensors, (tuple, list)):
        return fn(*tensors)
    try:
        return fn(**tensors)
    except TypeError as e:
        log.warning("Exception while calling %s: %s. It is likely the tensors (%s[1]) do not match the "
                    "function's arguments", name, e, name)
        raise


_SPEC_FIELDS = ["mode", "predictions", "loss", "train_op", "eval_metrics", "export_outputs", "scaffold_fn",
                "host_call", "training_hooks", "evaluation_hooks", "prediction_hooks"]


class TPUEstimatorSpec(collections.namedtuple("TPUEstimatorSpec", _SPEC_FIELDS)):
    """What a TPUEstimator's model_fn returns (tf.estimator.tpu.TPUEstimatorSpec).

    `eval_metrics` is `(metric_fn, tensors)`: `metric_fn(*tensors)` (a list) or `metric_fn(**tensors)`
    (a dict) returns the eval_metric_ops dict. `scaffold_fn()` returns the Scaffold. `host_call` is
    `(fn, tensors)` whose result runs with every step. `as_estimator_spec()` gives the EstimatorSpec the
    CPU runs."""

    def __new__(cls, mode, predictions=None, loss=None, train_op=None, eval_metrics=None, export_outputs=None,
                scaffold_fn=None, host_call=None, training_hooks=None, evaluation_hooks=None, prediction_hooks=None):
        _validate_host_calls(_host_calls(eval_metrics, host_call))
        training_hooks = tuple(training_hooks or ())
        evaluation_hooks = tuple(evaluation_hooks or ())
        prediction_hooks = tuple(prediction_hooks or ())
        for hook in training_hooks + evaluation_hooks + prediction_hooks:
            if not isinstance(hook, SessionRunHook):
                raise TypeError(f"All hooks must be SessionRunHook instances, given: {hook}")
        return super().__new__(cls, mode, predictions, loss, train_op, eval_metrics, export_outputs, scaffold_fn,
                               host_call, training_hooks, evaluation_hooks, prediction_hooks)

    def as_estimator_spec(self) -> EstimatorSpec:
        """The equivalent EstimatorSpec for the CPU (TPUEstimatorSpec.as_estimator_spec)."""
        ret = {name: _call_host_fn(name, hc) for name, hc in _host_calls(self.eval_metrics, self.host_call).items()}
        hooks = (_OutfeedHostCallHook(ret["host_call"]),) if self.host_call is not None else ()
        scaffold = self.scaffold_fn() if self.scaffold_fn else None
        return EstimatorSpec(mode=self.mode, predictions=self.predictions, loss=self.loss, train_op=self.train_op,
                             eval_metric_ops=ret.get("eval_metrics"), export_outputs=self.export_outputs,
                             scaffold=scaffold, training_hooks=self.training_hooks + hooks,
                             evaluation_hooks=self.evaluation_hooks + hooks,
                             prediction_hooks=self.prediction_hooks + hooks)


def _host_calls(eval_metrics, host_call) -> dict:
    calls = {}
    if eval_metrics is not None:
        calls["eval_metrics"] = eval_metrics
    if host_call is not None:
        calls["host_call"] = host_call
    return calls


class _OutfeedHostCallHook(SessionRunHook):
    """Runs a host_call's ops with every step (TF's hook for use_tpu=False); as TF's, it opens the
    graph's tf.contrib.summary writers when the session starts and flushes them at the end."""

    def __init__(self, tensors):
        self._tensors = tensors

    def begin(self):
        from actorflow.graph.graph import get_collection
        self._init_ops = list(get_collection("_SUMMARY_WRITER_INIT_OP"))
        self._flush_ops = list(get_collection("_SUMMARY_WRITER_FLUSH_OP"))

    def after_create_session(self, session, coord):
        if self._init_ops:
            session.run(self._init_ops)

    def before_run(self, run_context):
        return SessionRunArgs(self._tensors) if self._tensors is not None else None

    def end(self, session):
        if self._flush_ops:
            session.run(self._flush_ops)


class ExamplesPerSecondHook(StepCounterHook):
    """StepCounterHook that also logs, and records as `examples/sec`, the global batch size times the
    steps per second (TF's tpu_estimator.ExamplesPerSecondHook)."""

    def __init__(self, batch_size, every_n_steps=100, every_n_secs=None, output_dir=None, summary_writer=None):
        if (every_n_steps is None) == (every_n_secs is None):
            raise ValueError("exactly one of every_n_steps and every_n_secs should be provided.")
        super().__init__(every_n_steps=every_n_steps, every_n_secs=every_n_secs, output_dir=output_dir,
                         summary_writer=summary_writer)
        self._batch_size = batch_size
        self.examples_rates: list = []

    def _record(self, rate, step):
        super()._record(rate, step)
        if self._batch_size is None:
            return
        examples = rate * self._batch_size
        self.examples_rates.append(examples)
        if self._summary_writer is not None:
            from actorflow.summary import Summary
            self._summary_writer.add_summary(Summary(value=[Summary.Value(tag="examples/sec",
                                                                          simple_value=examples)]), step)
        log.info("examples/sec: %g", examples)


class TPUEstimator(Estimator):
    """An Estimator for model_fns written for TPUs (tf.estimator.tpu.TPUEstimator), run on the CPU.

    `config` must be a tpu RunConfig. `params` may not hold the reserved keys 'batch_size' and
    'context'. The model_fn and input_fn must take `params`: each call gets the mode's global batch
    size as `params['batch_size']` (when given to the constructor) and the model_fn `params['use_tpu']`
    (False). The model_fn returns an EstimatorSpec or a TPUEstimatorSpec. `use_tpu=True` is checked as
    TF checks it (a positive `train_batch_size` is required), then runs on the CPU with a warning:
    actorflow has no TPU."""

    def __init__(self, model_fn=None, model_dir=None, config=None, params=None, use_tpu=True,
                 train_batch_size=None, eval_batch_size=None, predict_batch_size=None, batch_axis=None,
                 eval_on_tpu=True, export_to_tpu=True, export_to_cpu=True, warm_start_from=None,
                 embedding_config_spec=None, export_saved_model_api_version=1):
        if config is None or not isinstance(config, RunConfig):
            raise ValueError("`config` must be provided with type `tpu_config.RunConfig`")
        if params is not None and any(k in params for k in _RESERVED_PARAMS_KEYS):
            raise ValueError(f"{_RESERVED_PARAMS_KEYS} are reserved keys but existed in params {params}.")
        if use_tpu:
            if train_batch_size is None:
                raise ValueError("`train_batch_size` cannot be `None`")
            _check_positive_integer(train_batch_size, "train_batch_size")
            if eval_batch_size is not None:
                _check_positive_integer(eval_batch_size, "eval_batch_size")
            if predict_batch_size is not None:
                _check_positive_integer(predict_batch_size, "predict_batch_size")
            log.warning("TPUEstimator(use_tpu=True): actorflow has no TPU; training, evaluation and prediction "
                        "run on the CPU, as with use_tpu=False")
        if embedding_config_spec is not None:
            raise NotImplementedError("TPUEstimator: embedding_config_spec (TPU embeddings) needs a TPU")
        if export_saved_model_api_version not in (1, 2) and \
                getattr(export_saved_model_api_version, "value", None) not in (1, 2):
            raise ValueError(f"export_saved_model_api_version should be 1 or 2; got {export_saved_model_api_version}.")
        log_steps = config.log_step_count_steps
        super().__init__(model_fn, model_dir=model_dir, config=config.replace(log_step_count_steps=None),
                         params=params, warm_start_from=warm_start_from)
        self._params = copy.deepcopy(params or {})
        every, unit = _parse_iterations_per_loop(config.tpu_config.iterations_per_loop)
        if unit == "seconds":
            self._log_every = (None, every)
        else:
            self._log_every = (None if log_steps is None else -(-log_steps // every), None)
        self._batch_sizes = {ModeKeys.TRAIN: train_batch_size, ModeKeys.EVAL: eval_batch_size,
                             ModeKeys.PREDICT: predict_batch_size}
        self._use_tpu = use_tpu
        self._input_fn_invoked = False

    def _call_input_fn(self, input_fn, mode):
        if "params" not in _fn_args(input_fn):
            raise ValueError(f"input_fn ({input_fn}) does not include params argument, required by "
                             "TPUEstimator to pass batch size as params[\"batch_size\"]")
        self._input_fn_invoked = True
        return super()._call_input_fn(input_fn, mode)

    def _input_fn_params(self, mode):
        return self._mode_params(mode, for_model_fn=False)

    def _mode_params(self, mode, for_model_fn):
        params = copy.deepcopy(self._params)
        size = self._batch_sizes.get(mode)
        if size is not None:
            params[_BATCH_SIZE_KEY] = size
        if for_model_fn:
            params[_USE_TPU_KEY] = False
        return params

    def _call_model_fn(self, features, labels, mode):
        export = not self._input_fn_invoked
        self._input_fn_invoked = False
        if "params" not in self._model_fn_args:
            raise ValueError(f"model_fn ({self._model_fn}) does not include params argument, required by "
                             "TPUEstimator to pass batch size as params['batch_size']")
        params = self._mode_params(mode, for_model_fn=True)
        if export:
            params.pop(_BATCH_SIZE_KEY, None)
        kwargs = self._model_fn_kwargs(labels, mode, params)
        log.info("Running %s on CPU", mode)
        spec = self._model_fn(features=features, **kwargs)
        if isinstance(spec, TPUEstimatorSpec):
            spec = spec.as_estimator_spec()
        elif not isinstance(spec, EstimatorSpec):
            raise ValueError("model_fn should return an EstimatorSpec or a TPUEstimatorSpec. "
                             f"Given: {type(spec).__name__}")
        steps, secs = self._log_every
        if steps is not None or secs is not None:
            hook = ExamplesPerSecondHook(self._batch_sizes.get(mode), every_n_steps=steps, every_n_secs=secs,
                                         output_dir=self._model_dir if self._config.save_summary_steps else None)
            spec = spec._replace(training_hooks=spec.training_hooks + (hook,))
        return spec

