"""slim.learning (tf.contrib.slim.learning, TF 1.15): the training op and loop slim's training scripts
(train_image_classifier.py and their descendants) are written with.

`create_train_op(total_loss, optimizer, ...)` makes the UPDATE_OPS (batch-norm statistics) run before
the loss, computes and optionally multiplies (`gradient_multipliers`) and clips (`clip_gradient_norm`,
each gradient on its own) the gradients, applies them with the global step, and returns the loss
checked for inf and NaN, computed after the update, added to the TRAIN_OP collection.

`train(train_op, logdir, ...)` runs it under a Supervisor: the variables are restored from `logdir`'s
latest checkpoint or initialized (then `init_fn(sess)`), summaries and checkpoints are written every
`save_summaries_secs` / `save_interval_secs`, the loss is logged every `log_every_n_steps` steps, the
loop ends after `number_of_steps` global steps (or at the input's end), and a last checkpoint is saved.
Returns the last loss. Differs from TF: `sync_optimizer` (SyncReplicasOptimizer chief queues) and
`trace_every_n_steps` (run-metadata traces) are not supported.
"""
from __future__ import annotations

import logging
import time

from actorflow.graph.graph import GraphKeys, control_dependencies, get_collection, get_default_graph, name_scope
from actorflow.graph.ops import clip_ops, math_ops
from actorflow.graph.ops.constant import no_op
from actorflow.graph.ops.numerics import check_numerics as _check_numerics
from actorflow.graph.variables import trainable_variables
from actorflow.train.optimizer import Optimizer
from actorflow.train.training_util import get_or_create_global_step

__all__ = ["create_train_op", "train", "train_step", "clip_gradient_norms", "multiply_gradients",
           "add_gradients_summaries"]

log = logging.getLogger(__name__)
_USE_DEFAULT = object()


def with_dependencies(dependencies, x):
    """`x` through an identity that runs after `dependencies` (TF's control_flow_ops.with_dependencies)."""
    from actorflow.graph.ops.constant import identity
    with control_dependencies(dependencies):
        return identity(x)


def clip_gradient_norms(gradients_to_variables, max_norm):
    """Each gradient clipped to norm `max_norm` on its own (IndexedSlices' values likewise)."""
    from actorflow.graph.indexed_slices import IndexedSlices
    out = []
    for grad, var in gradients_to_variables:
        if grad is not None:
            if isinstance(grad, IndexedSlices):
                grad = IndexedSlices(clip_ops.clip_by_norm(grad.values, max_norm), grad.indices, grad.dense_shape)
            else:
                grad = clip_ops.clip_by_norm(grad, max_norm)
        out.append((grad, var))
    return out


def multiply_gradients(grads_and_vars, gradient_multipliers):
    """Gradients scaled by `gradient_multipliers` (a dict keyed by variable or variable op name)."""
    from actorflow.graph.indexed_slices import IndexedSlices
    if not isinstance(grads_and_vars, list):
        raise ValueError("`grads_and_vars` must be a list.")
    if not gradient_multipliers:
        raise ValueError("`gradient_multipliers` is empty.")
    if not isinstance(gradient_multipliers, dict):
        raise ValueError("`gradient_multipliers` must be a dict.")
    out = []
    for grad, var in grads_and_vars:
        key = var if var in gradient_multipliers else var.op.name
        if key in gradient_multipliers and grad is not None:
            if grad is None:
                raise ValueError(f"Requested multiple of `None` gradient for {var.op.name}.")
            mult = math_ops.cast(gradient_multipliers[key], grad.dtype)
            if isinstance(grad, IndexedSlices):
                grad = IndexedSlices(grad.values * mult, grad.indices, grad.dense_shape)
            else:
                grad = grad * mult
        out.append((grad, var))
    return out


def add_gradients_summaries(grads_and_vars):
    """A histogram of each gradient and a scalar of its norm; returns the summary ops."""
    from actorflow.graph.indexed_slices import IndexedSlices
    from actorflow.graph.ops import summary_ops
    summaries = []
    for grad, var in grads_and_vars:
        if grad is None:
            log.info("Var %s has no gradient", var.op.name)
            continue
        values = grad.values if isinstance(grad, IndexedSlices) else grad
        summaries.append(summary_ops.histogram(var.op.name + "_gradient", values))
        summaries.append(summary_ops.scalar(var.op.name + "_gradient_norm", clip_ops.global_norm([values])))
    return summaries


def create_train_op_base(total_loss, optimizer, global_step=_USE_DEFAULT, update_ops=None, variables_to_train=None,
                         transform_grads_fn=None, summarize_gradients=False, gate_gradients=Optimizer.GATE_OP,
                         aggregation_method=None, colocate_gradients_with_ops=False, check_numerics=True):
    """tf.contrib.training.create_train_op: the loss, computed after the gradient step (module docstring),
    the gradients passed through `transform_grads_fn` before they are applied."""
    if global_step is _USE_DEFAULT:
        global_step = get_or_create_global_step()
    collected = set(get_collection(GraphKeys.UPDATE_OPS))
    update_ops = collected if update_ops is None else set(update_ops)
    if not collected.issubset(update_ops):
        log.warning("update_ops in create_train_op does not contain all the update_ops in GraphKeys.UPDATE_OPS")
    if update_ops:
        with control_dependencies(sorted(update_ops, key=lambda op: op.name)):
            barrier = no_op(name="update_barrier")
        total_loss = with_dependencies([barrier], total_loss)
    if variables_to_train is None:
        variables_to_train = trainable_variables()
    if not variables_to_train:
        raise ValueError("create_train_op: there are no variables to train")
    grads = optimizer.compute_gradients(total_loss, variables_to_train, gate_gradients=gate_gradients,
                                        aggregation_method=aggregation_method,
                                        colocate_gradients_with_ops=colocate_gradients_with_ops)
    if transform_grads_fn:
        grads = transform_grads_fn(grads)
    if summarize_gradients:
        with name_scope("summarize_grads"):
            add_gradients_summaries(grads)
    grad_updates = optimizer.apply_gradients(grads, global_step=global_step)
    with name_scope("train_op"):
        if check_numerics:
            total_loss = _check_numerics(total_loss, "LossTensor is inf or nan")
        train_op = with_dependencies([grad_updates], total_loss)
    train_ops = get_default_graph().get_collection_ref(GraphKeys.TRAIN_OP)
    if train_op not in train_ops:
        train_ops.append(train_op)
    return train_op


def create_train_op(total_loss, optimizer, global_step=_USE_DEFAULT, update_ops=None, variables_to_train=None,
                    clip_gradient_norm=0, summarize_gradients=False, gate_gradients=Optimizer.GATE_OP,
                    aggregation_method=None, colocate_gradients_with_ops=False, gradient_multipliers=None,
                    check_numerics=True):
    """slim.learning.create_train_op: create_train_op_base with the gradients multiplied by
    `gradient_multipliers` and each clipped to `clip_gradient_norm` (module docstring)."""
    def transform(grads):
        if gradient_multipliers:
            with name_scope("multiply_grads"):
                grads = multiply_gradients(grads, gradient_multipliers)
        if clip_gradient_norm > 0:
            with name_scope("clip_grads"):
                grads = clip_gradient_norms(grads, clip_gradient_norm)
        return grads
    return create_train_op_base(total_loss, optimizer, global_step, update_ops, variables_to_train, transform,
                                summarize_gradients, gate_gradients, aggregation_method, colocate_gradients_with_ops,
                                check_numerics)


def train_step(sess, train_op, global_step, train_step_kwargs):
    """One step: runs `train_op` and the global step; logs the loss every `log_every_n_steps`; returns
    (loss, whether to stop)."""
    start = time.time()
    total_loss, np_global_step = sess.run([train_op, global_step])
    elapsed = time.time() - start
    if "should_log" in train_step_kwargs and sess.run(train_step_kwargs["should_log"]):
        log.info("global step %d: loss = %.4f (%.3f sec/step)", np_global_step, total_loss, elapsed)
    should_stop = bool(sess.run(train_step_kwargs["should_stop"])) if "should_stop" in train_step_kwargs else False
    return total_loss, should_stop


def train(train_op, logdir, train_step_fn=train_step, train_step_kwargs=_USE_DEFAULT, log_every_n_steps=1,
          graph=None, master="", is_chief=True, global_step=None, number_of_steps=None, init_op=_USE_DEFAULT,
          init_feed_dict=None, local_init_op=_USE_DEFAULT, init_fn=None, ready_op=_USE_DEFAULT,
          summary_op=_USE_DEFAULT, save_summaries_secs=600, summary_writer=_USE_DEFAULT, startup_delay_steps=0,
          saver=None, save_interval_secs=600, sync_optimizer=None, session_config=None, session_wrapper=None,
          trace_every_n_steps=None, ignore_live_threads=False):
    """Trains with `train_op` under a Supervisor in `logdir` (module docstring); returns the last loss."""
    from actorflow.train.supervisor import Supervisor
    if train_op is None:
        raise ValueError("train_op cannot be None.")
    if logdir is None and (summary_op is not None or save_summaries_secs):
        if summary_op is not _USE_DEFAULT and summary_op is not None or save_interval_secs and saver is not None:
            raise ValueError("Cannot provide summary_op or saver when logdir is None")
    if sync_optimizer is not None:
        raise NotImplementedError("slim.learning.train: sync_optimizer is not supported; use "
                                  "MonitoredTrainingSession with SyncReplicasOptimizer.make_session_run_hook")
    if trace_every_n_steps is not None:
        raise NotImplementedError("slim.learning.train: trace_every_n_steps is not supported")
    graph = graph or get_default_graph()
    with graph.as_default():
        if global_step is None:
            global_step = get_or_create_global_step()
        default = Supervisor.USE_DEFAULT
        if train_step_kwargs is _USE_DEFAULT:
            with name_scope("train_step"):
                train_step_kwargs = {}
                if number_of_steps:
                    train_step_kwargs["should_stop"] = math_ops.greater_equal(global_step, number_of_steps)
                train_step_kwargs["should_log"] = math_ops.equal(math_ops.floormod(global_step, log_every_n_steps), 0)
        sv = Supervisor(graph=graph, is_chief=is_chief, logdir=logdir,
                        init_op=default if init_op is _USE_DEFAULT else init_op, init_feed_dict=init_feed_dict,
                        local_init_op=default if local_init_op is _USE_DEFAULT else local_init_op,
                        ready_op=default if ready_op is _USE_DEFAULT else ready_op,
                        summary_op=default if summary_op is _USE_DEFAULT else summary_op,
                        summary_writer=default if summary_writer is _USE_DEFAULT else summary_writer,
                        global_step=global_step, saver=saver if saver is not None else default,
                        save_summaries_secs=save_summaries_secs, save_model_secs=save_interval_secs,
                        init_fn=init_fn)
    total_loss = None
    should_retry = True
    while should_retry:
        should_retry = False
        with sv.managed_session(master, start_standard_services=False, config=session_config) as sess:
            log.info("Starting Session.")
            if session_wrapper is not None:
                sess = session_wrapper(sess)
            if logdir and is_chief:
                sv.start_standard_services(sess)
            sv.start_queue_runners(sess)
            log.info("Starting Queues.")
            if startup_delay_steps > 0 and not is_chief:
                while sess.run(global_step) < startup_delay_steps:
                    time.sleep(0.1)
            try:
                while not sv.should_stop():
                    total_loss, should_stop = train_step_fn(sess, train_op, global_step, train_step_kwargs)
                    if should_stop:
                        log.info("Stopping Training.")
                        sv.request_stop()
                        break
            except Exception as e:  # noqa: BLE001 - the input's end stops training as TF's loop does
                from actorflow import errors
                if not isinstance(e, errors.OutOfRangeError):
                    raise
                log.info("Caught OutOfRangeError. Stopping Training.")
            if logdir and sv.is_chief and sv.saver is not None:
                log.info("Finished training! Saving model to disk.")
                sv.saver.save(sess, sv.save_path, global_step=sv.global_step)
    return total_loss
