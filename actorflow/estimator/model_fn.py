"""ModeKeys and EstimatorSpec: what a model_fn returns (tf.estimator.ModeKeys, tf.estimator.EstimatorSpec).

EstimatorSpec checks its fields as TF 1.15's does, with the same error classes and messages: the
mode's required fields (a loss and a train_op to train, a loss to evaluate, predictions to predict),
a scalar loss, Tensors from the default graph, (value, update_op) pairs of metrics, SessionRunHooks.
"""
from __future__ import annotations

import collections

from actorflow.graph.graph import Operation, Tensor, get_default_graph
from actorflow.train.monitored_session import Scaffold
from actorflow.train.session_run_hook import SessionRunHook

__all__ = ["ModeKeys", "EstimatorSpec"]


class ModeKeys:
    """The three modes a model_fn is called in (tf.estimator.ModeKeys)."""
    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "infer"


_MODES = (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT)

_FIELDS = ["mode", "predictions", "loss", "train_op", "eval_metric_ops", "export_outputs", "training_chief_hooks",
           "training_hooks", "scaffold", "evaluation_hooks", "prediction_hooks"]


def _check_graph(x, what):
    g = x.graph if isinstance(x, (Tensor, Operation)) else None
    if g is not None and g is not get_default_graph():
        raise ValueError(f"{what} must be from the default graph.")


def _check_hooks(hooks):
    hooks = tuple(hooks or ())
    for h in hooks:
        if not isinstance(h, SessionRunHook):
            raise TypeError(f"All hooks must be SessionRunHook instances, given: {h!r}")
    return hooks


class EstimatorSpec(collections.namedtuple("EstimatorSpec", _FIELDS)):
    """The ops and objects a model_fn returns for one mode (tf.estimator.EstimatorSpec).

    TRAIN needs `loss` and `train_op`, EVAL needs `loss`, PREDICT needs `predictions` (a Tensor or a
    dict of them). `eval_metric_ops` maps names to (value, update_op) pairs, as af.metrics returns
    them. As in TF, a Tensor-valued `train_op` is taken as its op. `export_outputs` is kept for
    export_saved_model, where predictions serve as the default signature when it is absent.
    """

    def __new__(cls, mode, predictions=None, loss=None, train_op=None, eval_metric_ops=None, export_outputs=None,
                training_chief_hooks=None, training_hooks=None, scaffold=None, evaluation_hooks=None,
                prediction_hooks=None):
        if mode not in _MODES:
            raise ValueError(f"mode={mode!r} unrecognized; expected one of {list(_MODES)}.")
        if predictions is None and mode == ModeKeys.PREDICT:
            raise ValueError("Missing predictions.")
        if predictions is None:
            predictions = {}
        if isinstance(predictions, dict):
            for k, v in predictions.items():
                if not isinstance(v, Tensor):
                    raise TypeError(f"predictions[{k}] must be Tensor, given: {v!r}")
                _check_graph(v, "predictions")
            predictions = dict(predictions)
        elif not isinstance(predictions, Tensor):
            raise TypeError(f"predictions must be Tensor, given: {predictions!r}")
        else:
            _check_graph(predictions, "predictions")
        if loss is None:
            if mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
                raise ValueError("Missing loss.")
        else:
            if not isinstance(loss, Tensor):
                raise TypeError(f"loss must be Tensor, given: {loss!r}")
            if loss.shape.ndims is not None and loss.shape.num_elements() != 1:
                raise ValueError(f"Loss must be scalar, given: {loss!r}")
            if loss.shape.ndims not in (None, 0):
                from actorflow.graph.ops.array_ops import reshape
                loss = reshape(loss, [])
            _check_graph(loss, "loss")
        if train_op is None:
            if mode == ModeKeys.TRAIN:
                raise ValueError("Missing train_op.")
        else:
            if not isinstance(train_op, (Tensor, Operation)):
                raise TypeError(f"train_op must be Operation or Tensor, given: {train_op!r}")
            _check_graph(train_op, "train_op")
        if eval_metric_ops is None:
            eval_metric_ops = {}
        else:
            if not isinstance(eval_metric_ops, dict):
                raise TypeError(f"eval_metric_ops must be a dict, given: {eval_metric_ops!r}")
            for k, v in eval_metric_ops.items():
                if not isinstance(v, tuple) or len(v) != 2:
                    raise TypeError("Values of eval_metric_ops must be (metric_value, update_op) tuples, "
                                    f"given: {v!r} for key: {k}")
                for x in v:
                    if not isinstance(x, (Tensor, Operation)):
                        raise TypeError(f"eval_metric_ops[{k}] must hold Tensors or Operations, given: {x!r}")
                    _check_graph(x, f"eval_metric_ops[{k}]")
            eval_metric_ops = dict(eval_metric_ops)
        if export_outputs is not None and not isinstance(export_outputs, dict):
            raise TypeError(f"export_outputs must be dict, given: {export_outputs!r}")
        if scaffold is not None and not isinstance(scaffold, Scaffold):
            raise TypeError(f"scaffold must be tf.train.Scaffold. Given: {scaffold!r}")
        return super().__new__(cls, mode, predictions, loss, train_op, eval_metric_ops, export_outputs,
                               _check_hooks(training_chief_hooks), _check_hooks(training_hooks),
                               scaffold or Scaffold(), _check_hooks(evaluation_hooks), _check_hooks(prediction_hooks))
