"""af.contrib.metrics: tf.contrib.metrics' streaming metrics (TF 1.15), which are af.metrics'
(tf.metrics) with `predictions` before `labels`, plus `accuracy` and the aggregation helpers.

Each streaming metric returns (value, update_op) over local variables, as tf.metrics does: run
af.local_variables_initializer() first, the update op per batch, then read the value.
"""
from __future__ import annotations

from actorflow import metrics as _m
from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, math_ops

__all__ = ["streaming_accuracy", "streaming_mean", "streaming_mean_tensor", "streaming_precision",
           "streaming_recall", "streaming_auc", "streaming_mean_squared_error", "streaming_mean_absolute_error",
           "streaming_root_mean_squared_error", "streaming_mean_relative_error", "streaming_mean_cosine_distance",
           "streaming_mean_iou", "streaming_percentage_less", "streaming_precision_at_thresholds",
           "streaming_recall_at_thresholds", "accuracy", "aggregate_metrics", "aggregate_metric_map"]


def streaming_accuracy(predictions, labels, weights=None, metrics_collections=None, updates_collections=None,
                       name=None):
    """The running fraction of `predictions` equal to `labels` (tf.contrib.metrics.streaming_accuracy)."""
    return _m.accuracy(labels, predictions, weights, metrics_collections, updates_collections, name)


def streaming_mean(values, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """The running (weighted) mean of `values` (tf.contrib.metrics.streaming_mean)."""
    return _m.mean(values, weights, metrics_collections, updates_collections, name)


def streaming_mean_tensor(values, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """The running element-wise mean of `values` (tf.contrib.metrics.streaming_mean_tensor)."""
    return _m.mean_tensor(values, weights, metrics_collections, updates_collections, name)


def streaming_precision(predictions, labels, weights=None, metrics_collections=None, updates_collections=None,
                        name=None):
    """Running true positives / predicted positives (tf.contrib.metrics.streaming_precision)."""
    return _m.precision(labels, predictions, weights, metrics_collections, updates_collections, name)


def streaming_recall(predictions, labels, weights=None, metrics_collections=None, updates_collections=None,
                     name=None):
    """Running true positives / actual positives (tf.contrib.metrics.streaming_recall)."""
    return _m.recall(labels, predictions, weights, metrics_collections, updates_collections, name)


def streaming_auc(predictions, labels, weights=None, num_thresholds=200, metrics_collections=None,
                  updates_collections=None, curve="ROC", name=None, summation_method="trapezoidal"):
    """The running area under the ROC or PR curve (tf.contrib.metrics.streaming_auc)."""
    return _m.auc(labels, predictions, weights=weights, num_thresholds=num_thresholds,
                  metrics_collections=metrics_collections, updates_collections=updates_collections, curve=curve,
                  name=name, summation_method=summation_method)


def streaming_mean_squared_error(predictions, labels, weights=None, metrics_collections=None,
                                 updates_collections=None, name=None):
    """The running mean of (predictions - labels)^2 (tf.contrib.metrics.streaming_mean_squared_error)."""
    return _m.mean_squared_error(labels, predictions, weights, metrics_collections, updates_collections, name)


def streaming_mean_absolute_error(predictions, labels, weights=None, metrics_collections=None,
                                  updates_collections=None, name=None):
    """The running mean of |predictions - labels| (tf.contrib.metrics.streaming_mean_absolute_error)."""
    return _m.mean_absolute_error(labels, predictions, weights, metrics_collections, updates_collections, name)


def streaming_root_mean_squared_error(predictions, labels, weights=None, metrics_collections=None,
                                      updates_collections=None, name=None):
    """The square root of the running mean squared error (tf.contrib.metrics.streaming_root_mean_squared_error)."""
    return _m.root_mean_squared_error(labels, predictions, weights, metrics_collections, updates_collections, name)


def streaming_mean_relative_error(predictions, labels, normalizer, weights=None, metrics_collections=None,
                                  updates_collections=None, name=None):
    """The running mean of |predictions - labels| / normalizer (tf.contrib.metrics.streaming_mean_relative_error)."""
    return _m.mean_relative_error(labels, predictions, normalizer, weights, metrics_collections, updates_collections,
                                  name)


def streaming_mean_cosine_distance(predictions, labels, dim, weights=None, metrics_collections=None,
                                   updates_collections=None, name=None):
    """The running mean cosine distance along `dim` (tf.contrib.metrics.streaming_mean_cosine_distance)."""
    return _m.mean_cosine_distance(labels, predictions, dim, weights, metrics_collections, updates_collections, name)


def streaming_mean_iou(predictions, labels, num_classes, weights=None, metrics_collections=None,
                       updates_collections=None, name=None):
    """The running mean intersection-over-union (tf.contrib.metrics.streaming_mean_iou)."""
    return _m.mean_iou(labels, predictions, num_classes, weights, metrics_collections, updates_collections, name)


def streaming_percentage_less(values, threshold, weights=None, metrics_collections=None, updates_collections=None,
                              name=None):
    """The running fraction of `values` below `threshold` (tf.contrib.metrics.streaming_percentage_less)."""
    return _m.percentage_below(values, threshold, weights, metrics_collections, updates_collections, name)


def streaming_precision_at_thresholds(predictions, labels, thresholds, weights=None, metrics_collections=None,
                                      updates_collections=None, name=None):
    """Running precision at each threshold (tf.contrib.metrics.streaming_precision_at_thresholds)."""
    return _m.precision_at_thresholds(labels, predictions, thresholds, weights, metrics_collections,
                                      updates_collections, name)


def streaming_recall_at_thresholds(predictions, labels, thresholds, weights=None, metrics_collections=None,
                                   updates_collections=None, name=None):
    """Running recall at each threshold (tf.contrib.metrics.streaming_recall_at_thresholds)."""
    return _m.recall_at_thresholds(labels, predictions, thresholds, weights, metrics_collections,
                                   updates_collections, name)


def accuracy(predictions, labels, weights=None, name=None):
    """The (weighted) fraction of `predictions` equal to `labels`, computed once, not streamed
    (tf.contrib.metrics.accuracy); both must have the same bool, integer or string dtype."""
    predictions, labels = convert_to_tensor(predictions), convert_to_tensor(labels)
    if not (labels.dtype.is_integer or labels.dtype in (dtypes.bool_, dtypes.string)):
        raise ValueError(f"Labels should have bool, integer, or string dtype, not {labels.dtype.name} ('{labels.name}')")
    if predictions.dtype is not labels.dtype:
        raise ValueError(f"Dtypes of predictions and labels should match. Given: predictions ({predictions.dtype.name}) "
                         f"and labels ({labels.dtype.name})")
    with name_scope(name, "accuracy", [predictions, labels]):
        correct = math_ops.cast(math_ops.equal(predictions, labels), dtypes.float32)
        if weights is None:
            return math_ops.reduce_mean(correct)
        weights = math_ops.cast(convert_to_tensor(weights), dtypes.float32)
        return math_ops.divide(math_ops.reduce_sum(correct * weights),
                               math_ops.reduce_sum(weights * array_ops.ones_like(correct)))


def aggregate_metrics(*value_update_tuples):
    """(values, update ops) as two lists from (value, update_op) pairs (tf.contrib.metrics.aggregate_metrics)."""
    if not value_update_tuples:
        raise ValueError("Expected at least one value_tensor/update_op pair")
    values, updates = zip(*value_update_tuples)
    return list(values), list(updates)


def aggregate_metric_map(names_to_tuples):
    """({name: value}, {name: update_op}) from {name: (value, update_op)}
    (tf.contrib.metrics.aggregate_metric_map)."""
    names = list(names_to_tuples)
    values, updates = aggregate_metrics(*[names_to_tuples[n] for n in names])
    return dict(zip(names, values)), dict(zip(names, updates))
