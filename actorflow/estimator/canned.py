"""The premade estimators over feature columns (tf.estimator.DNNClassifier, DNNRegressor,
LinearClassifier, LinearRegressor; TF 1.15's v1 canned estimators and heads).

A head turns logits into the EstimatorSpec of each mode. The classification head: binary (one
logit, sigmoid cross-entropy) when n_classes is 2, else softmax over n_classes logits; predictions
'logits', 'probabilities', 'class_ids', 'classes' (and 'logistic' for binary); eval metrics
'accuracy', 'average_loss' (and, binary, 'auc', 'precision', 'recall', 'prediction/mean',
'label/mean'). The regression head: squared error; predictions 'predictions'; eval 'average_loss',
'prediction/mean', 'label/mean'. The training loss is the weighted sum over the batch, TF v1's
default loss_reduction (SUM; `loss_reduction` picks another af.losses.Reduction); Estimator.evaluate's
'loss' is its mean over the batches.
"""
from __future__ import annotations

import math

import numpy as np

from actorflow import feature_column as fc
from actorflow import layers, metrics
from actorflow.estimator.estimator import Estimator
from actorflow.estimator.model_fn import EstimatorSpec, ModeKeys
from actorflow.graph import dtypes
from actorflow.graph.graph import GraphKeys, control_dependencies, get_collection
from actorflow.graph.ops import array_ops, math_ops, nn_ops, string_ops
from actorflow.graph.ops.constant import constant
from actorflow.graph.ops.lookup_ops import KeyValueTensorInitializer, StaticHashTable
from actorflow.graph.variable_scope import variable_scope
from actorflow.losses import Reduction, compute_weighted_loss
from actorflow.train.training_util import get_global_step

__all__ = ["DNNClassifier", "DNNRegressor", "LinearClassifier", "LinearRegressor"]

SUM = Reduction.SUM
_REDUCTIONS = {Reduction.SUM, Reduction.MEAN, Reduction.SUM_OVER_BATCH_SIZE, Reduction.SUM_BY_NONZERO_WEIGHTS}


def _optimizer(opt, default_lr):
    """An optimizer from TF's canned names ('Adagrad', 'Adam', 'Ftrl', 'RMSProp', 'SGD'), a callable
    returning one, or an optimizer."""
    from actorflow.train import (
        AdagradOptimizer,
        AdamOptimizer,
        FtrlOptimizer,
        GradientDescentOptimizer,
        Optimizer,
        RMSPropOptimizer,
    )
    names = {"Adagrad": AdagradOptimizer, "Adam": AdamOptimizer, "Ftrl": FtrlOptimizer, "RMSProp": RMSPropOptimizer,
             "SGD": GradientDescentOptimizer}
    if isinstance(opt, str):
        if opt not in names:
            raise ValueError(f"Unsupported optimizer name: {opt}. Supported names are: {sorted(names)}")
        return names[opt](learning_rate=default_lr)
    if not isinstance(opt, Optimizer) and callable(opt):
        opt = opt()
    if not isinstance(opt, Optimizer):
        raise ValueError(f"The given object is not an Optimizer instance. Given: {opt!r}")
    return opt


def _weights(features, weight_column):
    if weight_column is None:
        return None
    key = weight_column if isinstance(weight_column, str) else weight_column.key
    w = math_ops.cast(features[key], dtypes.float32)
    return array_ops.reshape(w, [-1, 1])


def _train_op(loss, optimizer):
    with control_dependencies(get_collection(GraphKeys.UPDATE_OPS)):
        return optimizer.minimize(loss, global_step=get_global_step())


def _check_reduction(loss_reduction):
    if loss_reduction not in _REDUCTIONS:
        raise ValueError(f"Invalid loss_reduction: {loss_reduction}. Expected one of {sorted(_REDUCTIONS)}")
    return loss_reduction


def _reduce(per_example, weights, reduction):
    """The training loss from per-example losses, by `reduction` (TF v1 heads: SUM by default)."""
    return compute_weighted_loss(per_example, weights=1.0 if weights is None else weights, reduction=reduction)


class _ClassificationHead:
    def __init__(self, n_classes, weight_column, label_vocabulary, loss_reduction):
        if n_classes is None or n_classes < 2:
            raise ValueError(f"n_classes must be > 1 for classification: {n_classes}")
        if label_vocabulary is not None:
            if not isinstance(label_vocabulary, (list, tuple)):
                raise ValueError(f"label_vocabulary should be a list or a tuple. Given type: {type(label_vocabulary)}")
            if len(label_vocabulary) != n_classes:
                raise ValueError(f"label_vocabulary has {len(label_vocabulary)} entries, n_classes is {n_classes}")
        self.n_classes, self.weight_column, self.vocab = n_classes, weight_column, label_vocabulary
        self.reduction = _check_reduction(loss_reduction)
        self.logits_dimension = 1 if n_classes == 2 else n_classes

    def _label_ids(self, labels):
        labels = labels if labels.shape.ndims != 1 else array_ops.expand_dims(labels, 1)
        if self.vocab is not None:
            table = StaticHashTable(KeyValueTensorInitializer(
                constant(np.asarray(self.vocab, dtype=object)), constant(np.arange(self.n_classes, dtype=np.int64))),
                -1)
            return table.lookup(labels)
        if labels.dtype == dtypes.string:
            raise ValueError("Labels dtype should be integer. Instead got string; use label_vocabulary.")
        return math_ops.cast(labels, dtypes.int64)

    def spec(self, features, mode, logits, labels, optimizer):
        if self.n_classes == 2:
            logistic = math_ops.sigmoid(logits)
            probabilities = array_ops.concat([1.0 - logistic, logistic], axis=1)
            class_ids = math_ops.cast(math_ops.greater(logits, 0.0), dtypes.int64)
        else:
            probabilities = nn_ops.softmax(logits)
            class_ids = array_ops.expand_dims(math_ops.argmax(logits, axis=1), 1)
        if self.vocab is not None:
            classes = array_ops.gather(constant(np.asarray(self.vocab, dtype=object)), class_ids)
        else:
            classes = string_ops.as_string(class_ids)
        predictions = {"logits": logits, "probabilities": probabilities, "class_ids": class_ids, "classes": classes}
        if self.n_classes == 2:
            predictions["logistic"] = logistic
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=predictions)
        ids = self._label_ids(labels)
        if self.n_classes == 2:
            per_example = nn_ops.sigmoid_cross_entropy_with_logits(labels=math_ops.cast(ids, dtypes.float32),
                                                                    logits=logits)
        else:
            per_example = array_ops.expand_dims(nn_ops.sparse_softmax_cross_entropy_with_logits(
                labels=ids[:, 0], logits=logits), 1)
        weights = _weights(features, self.weight_column)
        loss = _reduce(per_example, weights, self.reduction)
        if mode == ModeKeys.TRAIN:
            return EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=_train_op(loss, optimizer))
        eval_ops = {"accuracy": metrics.accuracy(ids, class_ids, weights=weights),
                    "average_loss": metrics.mean(per_example, weights=weights)}
        if self.n_classes == 2:
            fl = math_ops.cast(ids, dtypes.float32)
            eval_ops.update({"prediction/mean": metrics.mean(logistic, weights=weights),
                             "label/mean": metrics.mean(fl, weights=weights),
                             "auc": metrics.auc(fl, logistic, weights=weights),
                             "precision": metrics.precision(fl, class_ids, weights=weights),
                             "recall": metrics.recall(fl, class_ids, weights=weights)})
        return EstimatorSpec(mode, predictions=predictions, loss=loss, eval_metric_ops=eval_ops)


class _RegressionHead:
    def __init__(self, label_dimension, weight_column, loss_reduction):
        if label_dimension is None or label_dimension < 1:
            raise ValueError(f"Invalid label_dimension {label_dimension}.")
        self.logits_dimension, self.weight_column = label_dimension, weight_column
        self.reduction = _check_reduction(loss_reduction)

    def spec(self, features, mode, logits, labels, optimizer):
        predictions = {"predictions": logits}
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=predictions)
        labels = array_ops.reshape(math_ops.cast(labels, dtypes.float32), [-1, self.logits_dimension])
        per_example = math_ops.square(logits - labels)
        weights = _weights(features, self.weight_column)
        loss = _reduce(per_example, weights, self.reduction)
        if mode == ModeKeys.TRAIN:
            return EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=_train_op(loss, optimizer))
        eval_ops = {"average_loss": metrics.mean(per_example, weights=weights),
                    "prediction/mean": metrics.mean(logits, weights=weights),
                    "label/mean": metrics.mean(labels, weights=weights)}
        return EstimatorSpec(mode, predictions=predictions, loss=loss, eval_metric_ops=eval_ops)


def _dnn_logits(features, mode, feature_columns, hidden_units, activation_fn, dropout, logits_dimension):
    with variable_scope("dnn"):
        with variable_scope("input_from_feature_columns"):
            net = fc.input_layer(features, feature_columns)
        for i, units in enumerate(hidden_units):
            net = layers.dense(net, units, activation=activation_fn, name=f"hiddenlayer_{i}")
            if dropout is not None and mode == ModeKeys.TRAIN:
                net = layers.dropout(net, rate=dropout, training=True)
        return layers.dense(net, logits_dimension, name="logits")


def _check_dnn(hidden_units, feature_columns, dropout):
    if not hidden_units:
        raise ValueError("hidden_units must be a non-empty list of layer sizes.")
    if not feature_columns:
        raise ValueError("feature_columns must not be empty.")
    if dropout is not None and not 0 <= dropout < 1:
        raise ValueError(f"dropout must be in [0, 1), given: {dropout}")


class DNNClassifier(Estimator):
    """A feed-forward classifier on `feature_columns` (tf.estimator.DNNClassifier): hidden layers of
    `hidden_units` with `activation_fn` and `dropout` (the rate dropped, in training), then logits.
    `optimizer` is a name ('Adagrad' by default, learning rate 0.05), a callable or an Optimizer."""

    def __init__(self, hidden_units, feature_columns, model_dir=None, n_classes=2, weight_column=None,
                 label_vocabulary=None, optimizer="Adagrad", activation_fn=nn_ops.relu, dropout=None,
                 input_layer_partitioner=None, config=None, warm_start_from=None, loss_reduction=SUM,
                 batch_norm=False):
        _check_dnn(hidden_units, feature_columns, dropout)
        if batch_norm:
            raise NotImplementedError("DNNClassifier: batch_norm is not supported")
        head = _ClassificationHead(n_classes, weight_column, label_vocabulary, loss_reduction)
        columns, units = list(feature_columns), list(hidden_units)

        def model_fn(features, labels, mode, config):
            logits = _dnn_logits(features, mode, columns, units, activation_fn, dropout, head.logits_dimension)
            return head.spec(features, mode, logits, labels, _optimizer(optimizer, 0.05))

        super().__init__(model_fn, model_dir=model_dir, config=config, warm_start_from=warm_start_from)


class DNNRegressor(Estimator):
    """A feed-forward regressor on `feature_columns` (tf.estimator.DNNRegressor); see DNNClassifier."""

    def __init__(self, hidden_units, feature_columns, model_dir=None, label_dimension=1, weight_column=None,
                 optimizer="Adagrad", activation_fn=nn_ops.relu, dropout=None, input_layer_partitioner=None,
                 config=None, warm_start_from=None, loss_reduction=SUM, batch_norm=False):
        _check_dnn(hidden_units, feature_columns, dropout)
        if batch_norm:
            raise NotImplementedError("DNNRegressor: batch_norm is not supported")
        head = _RegressionHead(label_dimension, weight_column, loss_reduction)
        columns, units = list(feature_columns), list(hidden_units)

        def model_fn(features, labels, mode, config):
            logits = _dnn_logits(features, mode, columns, units, activation_fn, dropout, head.logits_dimension)
            return head.spec(features, mode, logits, labels, _optimizer(optimizer, 0.05))

        super().__init__(model_fn, model_dir=model_dir, config=config, warm_start_from=warm_start_from)


def _linear_lr(feature_columns):
    return min(0.2, 1.0 / math.sqrt(len(feature_columns)))


class LinearClassifier(Estimator):
    """A linear classifier on `feature_columns` (tf.estimator.LinearClassifier); categorical columns
    are used directly, their ids' weights combined by `sparse_combiner`. `optimizer` defaults to
    'Ftrl' with learning rate min(0.2, 1/sqrt(number of columns)), as TF."""

    def __init__(self, feature_columns, model_dir=None, n_classes=2, weight_column=None, label_vocabulary=None,
                 optimizer="Ftrl", config=None, partitioner=None, warm_start_from=None, loss_reduction=SUM,
                 sparse_combiner="sum"):
        if not feature_columns:
            raise ValueError("feature_columns must not be empty.")
        head = _ClassificationHead(n_classes, weight_column, label_vocabulary, loss_reduction)
        columns = list(feature_columns)

        def model_fn(features, labels, mode, config):
            with variable_scope("linear"):
                logits = fc.linear_model(features, columns, units=head.logits_dimension,
                                         sparse_combiner=sparse_combiner)
            return head.spec(features, mode, logits, labels, _optimizer(optimizer, _linear_lr(columns)))

        super().__init__(model_fn, model_dir=model_dir, config=config, warm_start_from=warm_start_from)


class LinearRegressor(Estimator):
    """A linear regressor on `feature_columns` (tf.estimator.LinearRegressor); see LinearClassifier."""

    def __init__(self, feature_columns, model_dir=None, label_dimension=1, weight_column=None, optimizer="Ftrl",
                 config=None, partitioner=None, warm_start_from=None, loss_reduction=SUM, sparse_combiner="sum"):
        if not feature_columns:
            raise ValueError("feature_columns must not be empty.")
        head = _RegressionHead(label_dimension, weight_column, loss_reduction)
        columns = list(feature_columns)

        def model_fn(features, labels, mode, config):
            with variable_scope("linear"):
                logits = fc.linear_model(features, columns, units=head.logits_dimension,
                                         sparse_combiner=sparse_combiner)
            return head.spec(features, mode, logits, labels, _optimizer(optimizer, _linear_lr(columns)))

        super().__init__(model_fn, model_dir=model_dir, config=config, warm_start_from=warm_start_from)
