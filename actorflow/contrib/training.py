"""af.contrib.training: tf.contrib.training.bucket_by_sequence_length (TF 1.15), a queue-based
input pipeline that batches examples of similar lengths together, and HParams, the
hyperparameter container with its "name=value,..." parser.

Built as TF builds it: one queue per bucket (a PaddingFIFOQueue with `dynamic_pad`), one enqueue
op that evaluates the example once and puts it in the queue of its bucket, and a top queue that
QueueRunner threads fill with whole batches from the bucket queues, one thread per bucket; the
output is a dequeue from the top queue. Start the runners with af.train.start_queue_runners. When
the input runs out, the bucket queues close; with `allow_smaller_final_batch` their remainders
come out as smaller batches, then the top queue closes (OutOfRangeError).
"""
from __future__ import annotations

import json
import logging
import numbers
import re

from actorflow.contrib.slim_learning import (  # noqa: F401  (tf.contrib.training's names for them)
    add_gradients_summaries,
    clip_gradient_norms,
    multiply_gradients,
)
from actorflow.graph import dtypes, nest
from actorflow.graph.control_flow import cond
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.constant import constant, group, no_op
from actorflow.graph.ops.data_flow_ops import FIFOQueue, PaddingFIFOQueue
from actorflow.graph.tensor_shape import TensorShape, as_shape
from actorflow.train.queue_runner import QueueRunner, add_queue_runner
from actorflow.train.session_run_hook import SessionRunArgs, SessionRunHook
from actorflow.train.utilities import checkpoints_iterator  # noqa: F401  (tf.contrib.training.checkpoints_iterator)

__all__ = ["bucket_by_sequence_length", "HParams", "parse_values", "create_train_op", "train", "evaluate_once",
           "evaluate_repeatedly", "StopAfterNEvalsHook", "SummaryAtEndHook", "get_or_create_eval_step",
           "checkpoints_iterator", "wait_for_new_checkpoint", "add_gradients_summaries", "clip_gradient_norms",
           "multiply_gradients"]

log = logging.getLogger(__name__)


def _per_bucket(value, n, what):
    if isinstance(value, numbers.Integral):
        return [int(value)] * n
    value = [int(v) for v in value]
    if len(value) != n:
        raise ValueError(f"If {what} is a list it must have num_buckets ({n}) elements, got {len(value)}")
    return value


def bucket_by_sequence_length(input_length, tensors, batch_size, bucket_boundaries, num_threads=1, capacity=32,
                              bucket_capacities=None, shapes=None, dynamic_pad=False,
                              allow_smaller_final_batch=False, keep_input=True, shared_name=None, name=None):
    """Batches `tensors` (a list or dict of one example's tensors) with examples whose
    `input_length` falls in the same bucket: [-inf, b0), [b0, b1), ..., [bn, inf)
    (tf.contrib.training.bucket_by_sequence_length).

    `batch_size` and `bucket_capacities` are an int or one per bucket. With `dynamic_pad`, a batch
    is padded (with zeros) to its longest example. Returns ``(lengths, batched tensors)``, the
    batched tensors structured as `tensors`. Only examples with `keep_input` true are kept.
    """
    boundaries = list(bucket_boundaries)
    if not boundaries:
        raise ValueError("bucket_boundaries must not be empty")
    if not all(isinstance(b, numbers.Integral) for b in boundaries):
        raise TypeError(f"bucket_boundaries must be a list of ints, got {boundaries}")
    if any(a >= b for a, b in zip(boundaries, boundaries[1:])):
        raise ValueError(f"Buckets must contain sequential increasing lengths, got {boundaries}")
    n = len(boundaries) + 1
    batch_sizes = _per_bucket(batch_size, n, "batch_size")
    capacities = _per_bucket(bucket_capacities if bucket_capacities is not None else capacity, n,
                             "bucket_capacities")
    with name_scope(name or "bucket_by_sequence_length"):
        input_length = convert_to_tensor(input_length, name="input_length")
        if input_length.dtype not in (dtypes.int32, dtypes.int64):
            raise TypeError(f"input_length must be int32 or int64, got {input_length.dtype.name} "
                            f"('{input_length.name}')")
        if input_length.shape.ndims not in (None, 0):
            raise ValueError(f"input_length must be a scalar, got shape {input_length.shape}")
        flat = [convert_to_tensor(t) for t in nest.flatten(tensors)]
        if not flat:
            raise ValueError("Expected at least one tensor in bucket_by_sequence_length().")
        # The bucket of a length is the number of boundaries at or below it.
        bounds = constant(boundaries, dtype=input_length.dtype, name="bucket_boundaries")
        which = math_ops.reduce_sum(math_ops.cast(math_ops.less_equal(bounds, input_length), dtypes.int32),
                                    name="which_bucket")

        values = [input_length] + flat
        types = [t.dtype for t in values]
        if shapes is not None:
            elem_shapes = [TensorShape([])] + [as_shape(s) for s in shapes]
        else:
            elem_shapes = [t.shape for t in values]
        if not dynamic_pad:
            for t, s in zip(values, elem_shapes):
                if not s.is_fully_defined():
                    raise ValueError(f"All shapes must be fully defined without dynamic_pad: tensor '{t.name}' has "
                                     f"shape {s}")
        queue_cls = PaddingFIFOQueue if dynamic_pad else FIFOQueue
        queues = [queue_cls(capacities[i], types, shapes=elem_shapes, shared_name=(
            f"{shared_name}_bucket_{i}" if shared_name else None), name=f"bucket_queue_{i}") for i in range(n)]
        keep = convert_to_tensor(keep_input, dtype=dtypes.bool_)
        routes = [cond(math_ops.logical_and(keep, math_ops.equal(which, i)),
                       lambda q=q: q.enqueue(values), lambda: no_op()) for i, q in enumerate(queues)]
        enqueue = group(*routes, name="bucket_enqueue")
        add_queue_runner(QueueRunner(queues[0], [enqueue] * num_threads,
                                     close_op=group(*[q.close() for q in queues]),
                                     cancel_op=group(*[q.close(cancel_pending_enqueues=True) for q in queues])))

        top = FIFOQueue(capacity, types, shared_name=f"{shared_name}_top" if shared_name else None, name="top_queue")
        fills = []
        for q, bs in zip(queues, batch_sizes):
            batch = q.dequeue_up_to(bs) if allow_smaller_final_batch else q.dequeue_many(bs)
            fills.append(top.enqueue(list(batch) if isinstance(batch, (list, tuple)) else [batch]))
        add_queue_runner(QueueRunner(top, fills))
        out = top.dequeue()
        out = list(out) if isinstance(out, (list, tuple)) else [out]
        same = len(set(batch_sizes)) == 1 and not allow_smaller_final_batch
        lead = batch_sizes[0] if same else None
        for t, s in zip(out, elem_shapes):
            dims = None if s.dims is None else [lead] + s.as_list()
            t.set_shape(TensorShape(dims))
        return out[0], nest.pack_sequence_as(tensors, out[1:])


# ---------------------------------------------------------------------------------------------
# HParams
# ---------------------------------------------------------------------------------------------

# One clause of "name=value,name[i]=value,name=[v1,v2]": a name, an optional index, then one
# token (no comma or bracket) or a bracketed list.
_CLAUSE = re.compile(r"(?P<name>[a-zA-Z][\w.]*)(\[\s*(?P<index>\d+)\s*\])?\s*=\s*"
                     r"(?:(?P<val>[^,\[]*)|\[(?P<vals>[^\]]*)\])(?:$|,\s*)")


def _bool_parser(name, values):
    def parse(token):
        if token in ("true", "True"):
            return True
        if token in ("false", "False"):
            return False
        try:
            return bool(int(token))
        except ValueError:
            raise ValueError(f"Could not parse hparam '{name}' of type 'bool' with value '{token}' in {values}") \
                from None
    return parse


def parse_values(values, type_map, ignore_unknown=False):
    """{name: value} from "name=value,..." where each value parses as `type_map[name]` (a scalar,
    a bracketed list, or `name[i]=value`, which gives {i: value}) (tf.contrib.training.parse_values).

    Booleans are true/True/false/False or an integer. A name given twice, an unknown name (unless
    `ignore_unknown`), a list assigned to an index, or a malformed clause is a ValueError.
    """
    out: dict = {}
    pos = 0
    while pos < len(values):
        m = _CLAUSE.match(values, pos)
        if not m:
            raise ValueError(f"Malformed hyperparameter value: {values[pos:]}")
        pos = m.end()
        name, index, val, vals = m.group("name"), m.group("index"), m.group("val"), m.group("vals")
        if name not in type_map:
            if ignore_unknown:
                continue
            raise ValueError(f"Unknown hyperparameter type for {name}")
        kind = type_map[name]
        parse = _bool_parser(name, values) if kind is bool else kind

        def fail(text, name=name, kind=kind):
            raise ValueError(f"Could not parse hparam '{name}' of type '{kind.__name__}' with value '{text}' in "
                             f"{values}")
        if val is not None:
            try:
                parsed = parse(val)
            except ValueError:
                fail(val)
            if index is None:
                if name in out:
                    raise ValueError(f"Multiple assignments to variable '{name}' in {values}")
                out[name] = parsed
            else:
                slot = out.setdefault(name, {})
                if not isinstance(slot, dict):
                    raise ValueError(f"Multiple assignments to variable '{name}' in {values}")
                i = int(index)
                if i in slot:
                    raise ValueError(f"Multiple assignments to variable '{name}[{i}]' in {values}")
                slot[i] = parsed
        elif vals is not None:
            if index is not None:
                raise ValueError("Assignment of a list to a list index.")
            if name in out:
                raise ValueError(f"Multiple assignments to variable '{name}' in {values}")
            try:
                out[name] = [parse(e) for e in re.split("[ ,]", vals) if e]
            except ValueError:
                fail(vals)
        else:
            fail("")
    return out


def _cast(name, kind, value):
    """`value` as a `kind` hyperparameter; no str from non-str, bool from non-bool (or back), int
    from non-int or number from non-number (TF's _cast_to_type_if_compatible)."""
    if type(value) is kind or kind is type(None):
        return value
    bad = ((issubclass(kind, (str, bytes)) and not isinstance(value, (str, bytes)))
           or issubclass(kind, bool) != isinstance(value, bool)
           or (issubclass(kind, numbers.Integral) and not isinstance(value, numbers.Integral))
           or (issubclass(kind, numbers.Number) and not isinstance(value, numbers.Number)))
    if bad:
        raise ValueError(f"Could not cast hparam '{name}' of type '{kind}' from value {value!r}")
    return kind(value)


class HParams:
    """Named hyperparameters, readable as attributes, typed by their first value
    (tf.contrib.training.HParams): int, float, bool, str, or a non-empty list of one of them.

    `parse("lr=0.3,layers=[64,32]")`, `parse_json`, `override_from_dict` and `set_hparam`
    override values, checking their types; `values()`, `to_json()` read them. The protocol-buffer
    form (`hparam_def`, `to_proto`) is not supported.
    """

    _HAS_DYNAMIC_ATTRIBUTES = True

    def __init__(self, hparam_def=None, model_structure=None, **kwargs):
        if hparam_def is not None:
            raise NotImplementedError("HParams: hparam_def (an HParamDef protocol buffer) is not supported by "
                                      "actorflow; pass the values as keyword arguments")
        self._hparam_types: dict = {}
        self._model_structure = model_structure
        for name, value in kwargs.items():
            self.add_hparam(name, value)

    def add_hparam(self, name, value):
        """Adds hyperparameter `name`; ValueError if the name is taken by an attribute or the value is
        an empty list."""
        if getattr(self, name, None) is not None:
            raise ValueError(f"Hyperparameter name is reserved: {name}")
        if isinstance(value, (list, tuple)):
            if not value:
                raise ValueError(f"Multi-valued hyperparameters cannot be empty: {name}")
            self._hparam_types[name] = (type(value[0]), True)
        else:
            self._hparam_types[name] = (type(value), False)
        setattr(self, name, value)

    def set_hparam(self, name, value):
        """Sets an existing hyperparameter (KeyError if unknown), casting to its type when compatible."""
        kind, is_list = self._hparam_types[name]
        if isinstance(value, list):
            if not is_list:
                raise ValueError(f"Must not pass a list for single-valued parameter: {name}")
            setattr(self, name, [_cast(name, kind, v) for v in value])
        else:
            if is_list:
                raise ValueError(f"Must pass a list for multi-valued parameter: {name}.")
            setattr(self, name, _cast(name, kind, value))

    def del_hparam(self, name):
        """Removes hyperparameter `name` if present."""
        if hasattr(self, name):
            delattr(self, name)
            del self._hparam_types[name]

    def parse(self, values):
        """Overrides values from "name=value,..." (see `parse_values`); returns self."""
        return self.override_from_dict(parse_values(values, {n: t for n, (t, _) in self._hparam_types.items()}))

    def override_from_dict(self, values_dict):
        """Overrides values from {name: value}; returns self."""
        for name, value in values_dict.items():
            self.set_hparam(name, value)
        return self

    set_from_map = override_from_dict

    def set_model_structure(self, model_structure):
        self._model_structure = model_structure

    def get_model_structure(self):
        return self._model_structure

    def to_json(self, indent=None, separators=None, sort_keys=False):
        """The values as a JSON object."""
        return json.dumps(self.values(), indent=indent, separators=separators, sort_keys=sort_keys)

    def parse_json(self, values_json):
        """Overrides values from a JSON object; returns self."""
        return self.override_from_dict(json.loads(values_json))

    def values(self):
        """{name: value} of every hyperparameter."""
        return {n: getattr(self, n) for n in self._hparam_types}

    def get(self, key, default=None):
        """The value of `key`, else `default` (which must fit the hyperparameter's type)."""
        if key not in self._hparam_types:
            return default
        if default is not None:
            kind, is_list = self._hparam_types[key]
            msg = f"Hparam '{key}' of type '{f'list<{kind}>' if is_list else kind}' is incompatible with default={default}"
            if is_list != isinstance(default, list):
                raise ValueError(msg)
            try:
                for v in (default if is_list else [default]):
                    _cast(key, kind, v)
            except ValueError as e:
                raise ValueError(f"{msg}. {e}") from None
        return getattr(self, key)

    def __contains__(self, key):
        return key in self._hparam_types

    def __str__(self):
        return ",".join(f"{k}={v}" for k, v in self.values().items())

    def __repr__(self):
        return f"{type(self).__name__}({sorted(self.values().items())})"


# -- training and evaluation loops (tf.contrib.training, TF 1.15) ------------------------------------------

def create_train_op(total_loss, optimizer, global_step=None, update_ops=None, variables_to_train=None,
                    transform_grads_fn=None, summarize_gradients=False, gate_gradients=1, aggregation_method=None,
                    colocate_gradients_with_ops=False, check_numerics=True):
    """The loss computed after a gradient step that minimizes it (tf.contrib.training.create_train_op;
    slim.learning's, with `transform_grads_fn` applied to the gradients). `global_step` None takes the
    graph's, created when missing."""
    from actorflow.contrib.slim_learning import _USE_DEFAULT, create_train_op_base
    return create_train_op_base(total_loss, optimizer, _USE_DEFAULT if global_step is None else global_step,
                                update_ops, variables_to_train, transform_grads_fn, summarize_gradients,
                                gate_gradients, aggregation_method, colocate_gradients_with_ops, check_numerics)


def train(train_op, logdir, master="", is_chief=True, scaffold=None, hooks=None, chief_only_hooks=None,
          save_checkpoint_secs=600, save_summaries_steps=100, config=None, max_wait_secs=7200, run_metadata=None):
    """Runs `train_op` in a MonitoredTrainingSession on `logdir` until a hook stops it (a StopAtStepHook,
    the input's end); returns the last value (tf.contrib.training.train)."""
    from actorflow.train.monitored_session import MonitoredTrainingSession
    if logdir is None and is_chief:
        if save_summaries_steps:
            raise ValueError("logdir cannot be None when save_summaries_steps is not None")
        if save_checkpoint_secs:
            raise ValueError("logdir cannot be None when save_checkpoint_secs is not None")
    loss = None
    with MonitoredTrainingSession(master=master, is_chief=is_chief, checkpoint_dir=logdir, scaffold=scaffold,
                                  hooks=hooks, chief_only_hooks=chief_only_hooks,
                                  save_checkpoint_secs=save_checkpoint_secs, save_summaries_steps=save_summaries_steps,
                                  config=config, max_wait_secs=max_wait_secs) as session:
        while not session.should_stop():
            loss = session.run(train_op, run_metadata=run_metadata)
    return loss


_EVAL_STEP = "eval_step"


def get_or_create_eval_step():
    """The graph's evaluation step counter: a local int64 variable `eval_step` counting eval_ops runs."""
    from actorflow.graph.graph import GraphKeys, get_collection
    from actorflow.graph.initializers import zeros_initializer
    from actorflow.graph.variable_scope import get_variable
    found = get_collection(_EVAL_STEP)
    if found:
        return found[0]
    step = get_variable(_EVAL_STEP, shape=[], dtype=dtypes.int64, initializer=zeros_initializer(), trainable=False,
                        collections=[GraphKeys.LOCAL_VARIABLES, _EVAL_STEP])
    return step


class StopAfterNEvalsHook(SessionRunHook):
    """Stops an evaluation after `num_evals` runs of its eval ops, counted by the eval step
    (tf.contrib.training.StopAfterNEvalsHook); evaluate_once hands it the count read after each run's
    update."""

    def __init__(self, num_evals, log_progress=True):
        self._num_evals = num_evals
        self._log_progress = log_progress
        self._evals_completed = None

    def _set_evals_completed_tensor(self, updated_eval_step):
        self._evals_completed = updated_eval_step

    def before_run(self, run_context):
        if self._evals_completed is None:
            return None
        return SessionRunArgs({"evals_completed": self._evals_completed})

    def after_run(self, run_context, run_values):
        if self._evals_completed is None:
            done = int(run_context.session.run(get_or_create_eval_step()))
        else:
            done = int(run_values.results["evals_completed"])
        if self._log_progress:
            log.info("Evaluation [%d/%s]", done, self._num_evals)
        if self._num_evals is not None and done >= self._num_evals:
            run_context.request_stop()


class SummaryAtEndHook(SessionRunHook):
    """Writes `summary_op`'s summaries (default: the graph's merged summaries) to `log_dir` at the global
    step when the evaluation ends (tf.contrib.training.SummaryAtEndHook)."""

    def __init__(self, log_dir=None, summary_writer=None, summary_op=None, feed_dict=None):
        if (log_dir is None) == (summary_writer is None):
            raise ValueError("Exactly one of log_dir or summary_writer should be set.")
        self._log_dir, self._writer, self._op, self._feed = log_dir, summary_writer, summary_op, feed_dict

    def begin(self):
        from actorflow.graph.ops.summary_ops import merge_all
        from actorflow.train.training_util import get_global_step
        if self._op is None:
            self._op = merge_all()
        self._gs = get_global_step()

    def end(self, session):
        if self._op is None:
            return
        from actorflow.summary import FileWriterCache
        summary = session.run(self._op, self._feed)
        step = int(session.run(self._gs)) if self._gs is not None else None
        writer = self._writer or FileWriterCache.get(self._log_dir)
        writer.add_summary(summary, step)
        writer.flush()


def wait_for_new_checkpoint(checkpoint_dir, last_checkpoint=None, seconds_to_sleep=1, timeout=None):
    """The latest checkpoint of `checkpoint_dir` once it differs from `last_checkpoint`; None after
    `timeout` seconds without one (tf.contrib.training.wait_for_new_checkpoint)."""
    from actorflow import clock
    from actorflow.train.saver import latest_checkpoint
    deadline = None if timeout is None else clock.monotonic() + timeout
    while True:
        path = latest_checkpoint(checkpoint_dir)
        if path is not None and path != last_checkpoint:
            return path
        if deadline is not None and clock.monotonic() + seconds_to_sleep > deadline:
            return None
        clock.sleep(seconds_to_sleep)


def evaluate_once(checkpoint_path, master="", scaffold=None, eval_ops=None, feed_dict=None, final_ops=None,
                  final_ops_feed_dict=None, hooks=None, config=None):
    """Restores `checkpoint_path`, runs `eval_ops` until a hook stops it (StopAfterNEvalsHook, the
    input's end) and returns `final_ops`' values (tf.contrib.training.evaluate_once)."""
    from actorflow import errors
    from actorflow.graph.graph import control_dependencies
    from actorflow.graph.variables import assign_add
    from actorflow.train.monitored_session import ChiefSessionCreator, MonitoredSession
    from actorflow.train.utilities import FinalOpsHook
    eval_step = get_or_create_eval_step()
    hooks = list(hooks or [])
    if eval_ops is not None:
        with control_dependencies(nest.flatten(eval_ops)):
            counted = assign_add(eval_step, 1)
        eval_ops = [eval_ops, counted]
        with control_dependencies([counted]):
            updated = eval_step.read_value()
        for h in hooks:
            if isinstance(h, StopAfterNEvalsHook):
                h._set_evals_completed_tensor(updated)
    final = FinalOpsHook(final_ops, final_ops_feed_dict) if final_ops is not None else None
    creator = ChiefSessionCreator(scaffold, master=master, config=config, checkpoint_filename_with_path=checkpoint_path)
    with MonitoredSession(creator, hooks + ([final] if final else [])) as session:
        if eval_ops is not None:
            while not session.should_stop():
                try:
                    session.run(eval_ops, feed_dict)
                except errors.OutOfRangeError:
                    break
    return final.final_ops_values if final is not None else None


def evaluate_repeatedly(checkpoint_dir, master="", scaffold=None, eval_ops=None, feed_dict=None, final_ops=None,
                        final_ops_feed_dict=None, eval_interval_secs=60, hooks=None, config=None,
                        max_number_of_evaluations=None, timeout=None, timeout_fn=None):
    """evaluate_once on each new checkpoint of `checkpoint_dir`; returns the last final_ops' values."""
    final, done = None, 0
    for path in checkpoints_iterator(checkpoint_dir, eval_interval_secs, timeout, timeout_fn):
        final = evaluate_once(path, master, scaffold, eval_ops, feed_dict, final_ops, final_ops_feed_dict, hooks,
                              config)
        done += 1
        if max_number_of_evaluations is not None and done >= max_number_of_evaluations:
            break
    return final
