"""slim.evaluation (tf.contrib.slim.evaluation, TF 1.15): evaluate a checkpoint, or each new
checkpoint of a directory, as slim's eval_image_classifier.py does.

`evaluate_once` restores `checkpoint_path` (all variables, or `variables_to_restore`), runs
`initial_op`, then `eval_op` `num_evals` times (the metrics' update ops), then `final_op` (returned),
and writes `summary_op`'s summaries (default: every summary of the graph) to `logdir` at the
checkpoint's global step. `evaluation_loop` does so for each checkpoint `checkpoint_dir` gets, every
`eval_interval_secs`, until `max_number_of_evaluations` or `timeout`; it returns the last final_op.
"""
from __future__ import annotations

import logging

__all__ = ["evaluate_once", "evaluation_loop"]

log = logging.getLogger(__name__)
_USE_DEFAULT = object()


def _setup(initial_op, initial_op_feed_dict, summary_op, summary_op_feed_dict, logdir, num_evals,
           variables_to_restore, hooks):
    """The scaffold and hooks TF's slim evaluation hands to tf.contrib.training's evaluation."""
    from actorflow.contrib.training import StopAfterNEvalsHook, SummaryAtEndHook
    from actorflow.graph.ops.summary_ops import merge_all
    from actorflow.train.monitored_session import Scaffold
    from actorflow.train.saver import Saver
    if summary_op is _USE_DEFAULT:
        summary_op = merge_all()
    all_hooks = [StopAfterNEvalsHook(num_evals)]
    if summary_op is not None and logdir:
        all_hooks.append(SummaryAtEndHook(log_dir=logdir, summary_op=summary_op, feed_dict=summary_op_feed_dict))
    all_hooks += list(hooks or ())
    saver = Saver(variables_to_restore) if variables_to_restore is not None else None
    return Scaffold(init_op=initial_op, init_feed_dict=initial_op_feed_dict, saver=saver), all_hooks


def evaluate_once(master, checkpoint_path, logdir, num_evals=1, initial_op=None, initial_op_feed_dict=None,
                  eval_op=None, eval_op_feed_dict=None, final_op=None, final_op_feed_dict=None,
                  summary_op=_USE_DEFAULT, summary_op_feed_dict=None, variables_to_restore=None,
                  session_config=None, hooks=None):
    """Evaluates the checkpoint `checkpoint_path` once (module docstring); returns final_op's value."""
    from actorflow.contrib.training import evaluate_once as _evaluate_once
    scaffold, all_hooks = _setup(initial_op, initial_op_feed_dict, summary_op, summary_op_feed_dict, logdir,
                                 num_evals, variables_to_restore, hooks)
    return _evaluate_once(checkpoint_path, master=master, scaffold=scaffold, eval_ops=eval_op,
                          feed_dict=eval_op_feed_dict, final_ops=final_op, final_ops_feed_dict=final_op_feed_dict,
                          hooks=all_hooks, config=session_config)


def evaluation_loop(master, checkpoint_dir, logdir, num_evals=1, initial_op=None, initial_op_feed_dict=None,
                    init_fn=None, eval_op=None, eval_op_feed_dict=None, final_op=None, final_op_feed_dict=None,
                    summary_op=_USE_DEFAULT, summary_op_feed_dict=None, variables_to_restore=None,
                    eval_interval_secs=60, max_number_of_evaluations=None, session_config=None, timeout=None,
                    timeout_fn=None, hooks=None):
    """Evaluates each new checkpoint of `checkpoint_dir` (module docstring); returns the last final_op value."""
    from actorflow.contrib.training import evaluate_repeatedly
    if init_fn is not None:
        raise NotImplementedError("slim.evaluation.evaluation_loop: init_fn is not supported; use initial_op")
    scaffold, all_hooks = _setup(initial_op, initial_op_feed_dict, summary_op, summary_op_feed_dict, logdir,
                                 num_evals, variables_to_restore, hooks)
    return evaluate_repeatedly(checkpoint_dir, master=master, scaffold=scaffold, eval_ops=eval_op,
                               feed_dict=eval_op_feed_dict, final_ops=final_op, final_ops_feed_dict=final_op_feed_dict,
                               eval_interval_secs=eval_interval_secs, hooks=all_hooks, config=session_config,
                               max_number_of_evaluations=max_number_of_evaluations, timeout=timeout,
                               timeout_fn=timeout_fn)
