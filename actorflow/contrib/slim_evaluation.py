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

from actorflow.train.training_util import get_global_step

__all__ = ["evaluate_once", "evaluation_loop"]

log = logging.getLogger(__name__)
_USE_DEFAULT = object()


def _run_eval(checkpoint_path, logdir, num_evals, initial_op, initial_op_feed_dict, eval_op, eval_op_feed_dict,
              final_op, final_op_feed_dict, summary_op, summary_op_feed_dict, variables_to_restore, session_config,
              hooks):
    from actorflow.graph.ops.summary_ops import merge_all
    from actorflow.train.monitored_session import ChiefSessionCreator, MonitoredSession, Scaffold
    from actorflow.train.saver import Saver
    if summary_op is _USE_DEFAULT:
        summary_op = merge_all()
    saver = Saver(variables_to_restore) if variables_to_restore is not None else None
    scaffold = Scaffold(saver=saver)
    creator = ChiefSessionCreator(scaffold, config=session_config, checkpoint_filename_with_path=checkpoint_path)
    global_step = get_global_step()
    log.info("Starting evaluation of %s", checkpoint_path)
    with MonitoredSession(creator, list(hooks or ())) as sess:
        if initial_op is not None:
            sess.run(initial_op, initial_op_feed_dict)
        if eval_op is not None:
            for i in range(int(num_evals or 0)):
                sess.run(eval_op, eval_op_feed_dict)
                log.info("Evaluation [%d/%d]", i + 1, num_evals)
        final = sess.run(final_op, final_op_feed_dict) if final_op is not None else None
        if logdir and summary_op is not None:
            from actorflow.summary import FileWriterCache
            summary, step = sess.run([summary_op, global_step] if global_step is not None else [summary_op, []],
                                     summary_op_feed_dict)
            writer = FileWriterCache.get(logdir)
            writer.add_summary(summary, int(step) if global_step is not None else None)
            writer.flush()
    log.info("Finished evaluation of %s", checkpoint_path)
    return final


def evaluate_once(master, checkpoint_path, logdir, num_evals=1, initial_op=None, initial_op_feed_dict=None,
                  eval_op=None, eval_op_feed_dict=None, final_op=None, final_op_feed_dict=None,
                  summary_op=_USE_DEFAULT, summary_op_feed_dict=None, variables_to_restore=None,
                  session_config=None, hooks=None):
    """Evaluates the checkpoint `checkpoint_path` once (module docstring); returns final_op's value."""
    return _run_eval(checkpoint_path, logdir, num_evals, initial_op, initial_op_feed_dict, eval_op,
                     eval_op_feed_dict, final_op, final_op_feed_dict, summary_op, summary_op_feed_dict,
                     variables_to_restore, session_config, hooks)


def evaluation_loop(master, checkpoint_dir, logdir, num_evals=1, initial_op=None, initial_op_feed_dict=None,
                    init_fn=None, eval_op=None, eval_op_feed_dict=None, final_op=None, final_op_feed_dict=None,
                    summary_op=_USE_DEFAULT, summary_op_feed_dict=None, variables_to_restore=None,
                    eval_interval_secs=60, max_number_of_evaluations=None, session_config=None, timeout=None,
                    timeout_fn=None, hooks=None):
    """Evaluates each new checkpoint of `checkpoint_dir` (module docstring); returns the last final_op value."""
    from actorflow.train.utilities import checkpoints_iterator
    if init_fn is not None:
        raise NotImplementedError("slim.evaluation.evaluation_loop: init_fn is not supported; use initial_op")
    final = None
    done = 0
    for path in checkpoints_iterator(checkpoint_dir, eval_interval_secs, timeout, timeout_fn):
        final = _run_eval(path, logdir, num_evals, initial_op, initial_op_feed_dict, eval_op, eval_op_feed_dict,
                          final_op, final_op_feed_dict, summary_op, summary_op_feed_dict, variables_to_restore,
                          session_config, hooks)
        done += 1
        if max_number_of_evaluations is not None and done >= max_number_of_evaluations:
            log.info("Reached max_number_of_evaluations=%s. Exit", max_number_of_evaluations)
            break
    return final
