"""af.metrics: the streaming metrics of tf.compat.v1.metrics.

Each metric returns `(value, update_op)`. Its running totals are local variables (collections
LOCAL_VARIABLES and METRIC_VARIABLES, zeros until `af.local_variables_initializer()` runs, as in
TF); running `update_op` adds one batch and returns the metric over every batch so far, and
`value` reads it without updating. `metrics_collections` and `updates_collections` receive the
value and the update op. Numbers follow TF 1.x's metrics_impl formulas.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import GraphKeys, Tensor, add_to_collection, control_dependencies, convert_to_tensor
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.constant import constant, identity
from actorflow.graph.variable_scope import variable_scope
from actorflow.graph.variables import Variable, assign_add
from actorflow.losses import _check_broadcastable

__all__ = ["accuracy", "mean", "mean_squared_error", "mean_absolute_error", "root_mean_squared_error",
           "true_positives", "false_positives", "true_negatives", "false_negatives", "precision", "recall",
           "auc", "mean_iou", "metric_variable", "true_positives_at_thresholds", "false_positives_at_thresholds",
           "true_negatives_at_thresholds", "false_negatives_at_thresholds", "precision_at_thresholds",
           "recall_at_thresholds", "mean_per_class_accuracy", "mean_relative_error", "mean_cosine_distance",
           "percentage_below", "mean_tensor",
           "sensitivity_at_specificity", "specificity_at_sensitivity", "precision_at_k", "recall_at_k",
           "precision_at_top_k", "recall_at_top_k", "average_precision_at_k", "sparse_precision_at_k",
           "sparse_average_precision_at_k"]


def metric_variable(shape, dtype, validate_shape=True, name=None) -> Variable:
    """A zero-initialized local variable for a metric's running state (TF's metric_variable)."""
    dtype = dtypes.as_dtype(dtype)
    return Variable(lambda: array_ops.zeros(shape, dtype), trainable=False,
                    collections=[GraphKeys.LOCAL_VARIABLES, GraphKeys.METRIC_VARIABLES],
                    validate_shape=validate_shape, name=name)


def _tensor(x, what) -> Tensor:
    if x is None:
        raise ValueError(f"{what} must not be None.")
    return x if isinstance(x, Tensor) else convert_to_tensor(x)


def _remove_squeezable(predictions: Tensor, labels: Tensor, weights=None):
    """TF's metrics squeeze: of labels and predictions, the one with one more dimension, a last
    dimension of 1, loses it; so do weights one rank above the predictions."""
    pr, lr = predictions.shape.ndims, labels.shape.ndims
    if pr is not None and lr is not None:
        if pr == lr + 1 and predictions.shape[-1] in (1, None):
            predictions = array_ops.squeeze(predictions, [-1])
        elif lr == pr + 1 and labels.shape[-1] in (1, None):
            labels = array_ops.squeeze(labels, [-1])
    if weights is not None:
        weights = _tensor(weights, "weights")
        wr, pr = weights.shape.ndims, predictions.shape.ndims
        if wr is not None and pr is not None and wr == pr + 1 and weights.shape[-1] in (1, None):
            weights = array_ops.squeeze(weights, [-1])
    return predictions, labels, weights


def _broadcast_weights(weights, values: Tensor) -> Tensor:
    w = math_ops.cast(_tensor(weights, "weights"), dtypes.float32)
    _check_broadcastable(w, values)
    return math_ops.multiply(w, array_ops.ones_like(values))


def _collect(value, update_op, metrics_collections, updates_collections):
    for c in metrics_collections or ():
        add_to_collection(c, value)
    for c in updates_collections or ():
        add_to_collection(c, update_op)
    return value, update_op


def _check_shapes(predictions: Tensor, labels: Tensor) -> None:
    if not predictions.shape.is_compatible_with(labels.shape):
        raise ValueError(f"Shapes {predictions.shape} and {labels.shape} are incompatible "
                         f"(predictions '{predictions.name}', labels '{labels.name}')")


def mean(values, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """The (weighted) mean of every value seen (tf.compat.v1.metrics.mean); 0 before any."""
    with variable_scope(name, "mean"):
        values = math_ops.cast(_tensor(values, "values"), dtypes.float32)
        total = metric_variable([], dtypes.float32, name="total")
        count = metric_variable([], dtypes.float32, name="count")
        if weights is None:
            num_values = math_ops.cast(array_ops.size(values), dtypes.float32)
        else:
            values, _, weights = _remove_squeezable(values, values, weights)
            weights = _broadcast_weights(weights, values)
            values = math_ops.multiply(values, weights)
            num_values = math_ops.reduce_sum(weights)
        update_total = assign_add(total, math_ops.reduce_sum(values))
        with control_dependencies([values]):
            update_count = assign_add(count, num_values)
        value = math_ops.div_no_nan(total.value(), count.value(), name="value")
        update_op = math_ops.div_no_nan(update_total, update_count, name="update_op")
        return _collect(value, update_op, metrics_collections, updates_collections)


def accuracy(labels, predictions, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """The (weighted) fraction of predictions equal to labels (tf.compat.v1.metrics.accuracy)."""
    labels, predictions = _tensor(labels, "labels"), _tensor(predictions, "predictions")
    predictions, labels, weights = _remove_squeezable(predictions, labels, weights)
    _check_shapes(predictions, labels)
    if labels.dtype is not predictions.dtype:
        predictions = math_ops.cast(predictions, labels.dtype)
    is_correct = math_ops.cast(math_ops.equal(predictions, labels), dtypes.float32)
    return mean(is_correct, weights, metrics_collections, updates_collections, name or "accuracy")


def _errors(labels, predictions, weights):
    labels, predictions = _tensor(labels, "labels"), _tensor(predictions, "predictions")
    predictions, labels, weights = _remove_squeezable(predictions, labels, weights)
    _check_shapes(predictions, labels)
    return math_ops.cast(labels, dtypes.float32), math_ops.cast(predictions, dtypes.float32), weights


def mean_squared_error(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
                       name=None):
    """The running mean of (labels - predictions)^2 (tf.compat.v1.metrics.mean_squared_error)."""
    labels, predictions, weights = _errors(labels, predictions, weights)
    return mean(math_ops.squared_difference(labels, predictions), weights, metrics_collections,
                updates_collections, name or "mean_squared_error")


def mean_absolute_error(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
                        name=None):
    """The running mean of |predictions - labels| (tf.compat.v1.metrics.mean_absolute_error)."""
    labels, predictions, weights = _errors(labels, predictions, weights)
    return mean(math_ops.abs(math_ops.subtract(predictions, labels)), weights, metrics_collections,
                updates_collections, name or "mean_absolute_error")


def root_mean_squared_error(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
                            name=None):
    """The square root of the running mean squared error (tf.compat.v1.metrics.root_mean_squared_error)."""
    labels, predictions, weights = _errors(labels, predictions, weights)
    mse, update_mse = mean(math_ops.squared_difference(labels, predictions), weights, None, None,
                           name or "root_mean_squared_error")
    return _collect(math_ops.sqrt(mse), math_ops.sqrt(update_mse), metrics_collections, updates_collections)


def mean_relative_error(labels, predictions, normalizer, weights=None, metrics_collections=None,
                        updates_collections=None, name=None):
    """The running mean of |labels - predictions| / normalizer, 0 where the normalizer is 0
    (tf.compat.v1.metrics.mean_relative_error)."""
    labels, predictions, weights = _errors(labels, predictions, weights)
    normalizer = math_ops.cast(_tensor(normalizer, "normalizer"), dtypes.float32)
    rel = math_ops.where(math_ops.equal(normalizer, 0.0), array_ops.zeros_like(labels),
                         math_ops.div_no_nan(math_ops.abs(math_ops.subtract(labels, predictions)), normalizer))
    return mean(rel, weights, metrics_collections, updates_collections, name or "mean_relative_error")


def mean_cosine_distance(labels, predictions, dim, weights=None, metrics_collections=None, updates_collections=None,
                         name=None):
    """1 - the running mean of sum(labels * predictions, dim), both unit-normalized along `dim`
    (tf.compat.v1.metrics.mean_cosine_distance)."""
    labels, predictions, weights = _errors(labels, predictions, weights)
    radial = math_ops.reduce_sum(math_ops.multiply(predictions, labels), axis=[dim], keepdims=True)
    value, update_op = mean(radial, weights, None, None, name or "mean_cosine_distance")
    return _collect(math_ops.subtract(1.0, value), math_ops.subtract(1.0, update_op), metrics_collections,
                    updates_collections)


def percentage_below(values, threshold, weights=None, metrics_collections=None, updates_collections=None,
                     name=None):
    """The running (weighted) fraction of values below `threshold` (tf.compat.v1.metrics.percentage_below)."""
    is_below = math_ops.less(_tensor(values, "values"), threshold)
    return mean(is_below, weights, metrics_collections, updates_collections, name or "percentage_below_threshold")


def mean_tensor(values, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """The element-wise running (weighted) mean of `values`, which need a fully defined shape
    (tf.compat.v1.metrics.mean_tensor)."""
    with variable_scope(name, "mean"):
        values = math_ops.cast(_tensor(values, "values"), dtypes.float32)
        if not values.shape.is_fully_defined():
            raise ValueError(f"mean_tensor needs values of a fully defined shape, got {values.shape} "
                             f"('{values.name}')")
        total = metric_variable(values.shape.as_list(), dtypes.float32, name="total_tensor")
        count = metric_variable(values.shape.as_list(), dtypes.float32, name="count_tensor")
        num_values = array_ops.ones_like(values)
        if weights is not None:
            values, _, weights = _remove_squeezable(values, values, weights)
            weights = _broadcast_weights(weights, values)
            values = math_ops.multiply(values, weights)
            num_values = math_ops.multiply(num_values, weights)
        update_total = assign_add(total, values)
        with control_dependencies([values]):
            update_count = assign_add(count, num_values)
        value = math_ops.div_no_nan(total.value(), count.value(), name="value")
        update_op = math_ops.div_no_nan(update_total, update_count, name="update_op")
        return _collect(value, update_op, metrics_collections, updates_collections)


def _count_condition(values: Tensor, weights, metrics_collections, updates_collections):
    count = metric_variable([], dtypes.float32, name="count")
    values = math_ops.cast(values, dtypes.float32)
    if weights is not None:
        values = math_ops.multiply(values, _broadcast_weights(weights, values))
    value = identity(count.value())
    update_op = assign_add(count, math_ops.reduce_sum(values))
    return _collect(value, update_op, metrics_collections, updates_collections)


def _bool_pair(labels, predictions, weights):
    labels, predictions = _tensor(labels, "labels"), _tensor(predictions, "predictions")
    predictions, labels, weights = _remove_squeezable(math_ops.cast(predictions, dtypes.bool_),
                                                      math_ops.cast(labels, dtypes.bool_), weights)
    _check_shapes(predictions, labels)
    return labels, predictions, weights


def _condition_metric(default_name, label_value, prediction_value):
    def metric(labels, predictions, weights=None, metrics_collections=None, updates_collections=None, name=None):
        with variable_scope(name, default_name):
            lab, pred, w = _bool_pair(labels, predictions, weights)
            cond = math_ops.logical_and(math_ops.equal(lab, label_value), math_ops.equal(pred, prediction_value))
            return _count_condition(cond, w, metrics_collections, updates_collections)
    metric.__name__ = default_name
    metric.__doc__ = (f"The running (weighted) count of {default_name.replace('_', ' ')}: labels "
                      f"{label_value} and predictions {prediction_value}, both cast to bool "
                      f"(tf.compat.v1.metrics.{default_name}).")
    return metric


true_positives = _condition_metric("true_positives", True, True)
false_positives = _condition_metric("false_positives", False, True)
true_negatives = _condition_metric("true_negatives", False, False)
false_negatives = _condition_metric("false_negatives", True, False)


def _ratio(num, other, name):
    # TF's where(total > 0, num / total, 0); counts are never negative, so div_no_nan is the same.
    return math_ops.div_no_nan(num, math_ops.add(num, other), name=name)


def precision(labels, predictions, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """tp / (tp + fp) over every batch so far, 0 when there is no positive prediction
    (tf.compat.v1.metrics.precision)."""
    with variable_scope(name, "precision"):
        lab, pred, w = _bool_pair(labels, predictions, weights)
        tp, tp_up = true_positives(lab, pred, w)
        fp, fp_up = false_positives(lab, pred, w)
        return _collect(_ratio(tp, fp, "value"), _ratio(tp_up, fp_up, "update_op"), metrics_collections,
                        updates_collections)


def recall(labels, predictions, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """tp / (tp + fn) over every batch so far, 0 when there is no positive label
    (tf.compat.v1.metrics.recall)."""
    with variable_scope(name, "recall"):
        lab, pred, w = _bool_pair(labels, predictions, weights)
        tp, tp_up = true_positives(lab, pred, w)
        fn, fn_up = false_negatives(lab, pred, w)
        return _collect(_ratio(tp, fn, "value"), _ratio(tp_up, fn_up, "update_op"), metrics_collections,
                        updates_collections)


def _confusion_at_thresholds(labels, predictions, thresholds, weights, includes=("tp", "fn", "tn", "fp")):
    """Running tp, fn, tn, fp per threshold (prediction > threshold is positive), as TF's
    _confusion_matrix_at_thresholds; returns (values, update ops), dicts keyed by `includes`."""
    predictions = math_ops.cast(_tensor(predictions, "predictions"), dtypes.float32)
    labels = math_ops.cast(_tensor(labels, "labels"), dtypes.bool_)
    predictions, labels, weights = _remove_squeezable(predictions, labels, weights)
    _check_shapes(predictions, labels)
    n = len(thresholds)
    preds_row = array_ops.reshape(predictions, [1, -1])
    labels_row = array_ops.reshape(labels, [1, -1])
    thresh = constant([[t] for t in thresholds], dtype=dtypes.float32)
    pred_pos = math_ops.greater(preds_row, thresh)                      # [thresholds, samples]
    pred_neg = math_ops.logical_not(pred_pos)
    label_pos = math_ops.logical_and(labels_row, array_ops.ones_like(pred_pos))
    label_neg = math_ops.logical_not(label_pos)
    w_row = None
    if weights is not None:
        w_row = array_ops.reshape(_broadcast_weights(weights, predictions), [1, -1])
    values, updates = {}, {}
    for key, a, b in (("tp", label_pos, pred_pos), ("fn", label_pos, pred_neg), ("tn", label_neg, pred_neg),
                      ("fp", label_neg, pred_pos)):
        if key not in includes:
            continue
        var = metric_variable([n], dtypes.float32, name={"tp": "true_positives", "fn": "false_negatives",
                                                        "tn": "true_negatives", "fp": "false_positives"}[key])
        hits = math_ops.cast(math_ops.logical_and(a, b), dtypes.float32)
        if w_row is not None:
            hits = math_ops.multiply(hits, w_row)
        updates[key] = assign_add(var, math_ops.reduce_sum(hits, axis=1))
        values[key] = var.value()
    return values, updates


def auc(labels, predictions, weights=None, num_thresholds=200, metrics_collections=None, updates_collections=None,
        curve="ROC", name=None, summation_method="trapezoidal", thresholds=None):
    """The area under the ROC (or PR) curve by a Riemann sum over `num_thresholds` thresholds
    spread over [0, 1] (tf.compat.v1.metrics.auc); `predictions` are probabilities.
    summation_method: "trapezoidal" (default), "minoring" or "majoring"; TF's
    "careful_interpolation" is not supported."""
    if curve not in ("ROC", "PR"):
        raise ValueError(f"curve must be 'ROC' or 'PR', got {curve!r}")
    if summation_method not in ("trapezoidal", "minoring", "majoring"):
        raise ValueError(f"summation_method {summation_method!r} is not supported: use 'trapezoidal', "
                         "'minoring' or 'majoring'")
    with variable_scope(name, "auc"):
        kepsilon = 1e-7
        if thresholds is not None:
            ths = [0.0 - kepsilon] + [float(t) for t in thresholds] + [1.0 + kepsilon]
        else:
            if num_thresholds < 2:
                raise ValueError("`num_thresholds` must be > 1.")
            ths = [0.0 - kepsilon] + [(i + 1) * 1.0 / (num_thresholds - 1)
                                      for i in range(num_thresholds - 2)] + [1.0 + kepsilon]
        n = len(ths)
        values, updates = _confusion_at_thresholds(labels, predictions, ths, weights)
        epsilon = 1.0e-6

        def compute(c, name):
            tp, fn, tn, fp = c["tp"], c["fn"], c["tn"], c["fp"]
            rec = math_ops.divide(math_ops.add(tp, epsilon), math_ops.add(math_ops.add(tp, fn), epsilon))
            if curve == "ROC":
                x, y = math_ops.divide(fp, math_ops.add(math_ops.add(fp, tn), epsilon)), rec
            else:
                x = rec
                y = math_ops.divide(math_ops.add(tp, epsilon), math_ops.add(math_ops.add(tp, fp), epsilon))
            dx = math_ops.subtract(x[:n - 1], x[1:])
            if summation_method == "trapezoidal":
                h = math_ops.divide(math_ops.add(y[:n - 1], y[1:]), 2.0)
            elif summation_method == "minoring":
                h = math_ops.minimum(y[:n - 1], y[1:])
            else:
                h = math_ops.maximum(y[:n - 1], y[1:])
            return math_ops.reduce_sum(math_ops.multiply(dx, h), name=name)
        return _collect(compute(values, "value"), compute(updates, "update_op"), metrics_collections,
                        updates_collections)


def _at_thresholds(key, default_name):
    def metric(labels, predictions, thresholds, weights=None, metrics_collections=None, updates_collections=None,
               name=None):
        with variable_scope(name, default_name):
            values, updates = _confusion_at_thresholds(labels, predictions, [float(t) for t in thresholds],
                                                       weights, includes=(key,))
            return _collect(values[key], updates[key], metrics_collections, updates_collections)
    metric.__name__ = default_name
    metric.__doc__ = (f"Running {default_name.replace('_at_thresholds', '').replace('_', ' ')} per threshold "
                      f"(a prediction above the threshold counts as positive), a [len(thresholds)] float "
                      f"tensor (tf.compat.v1.metrics.{default_name}).")
    return metric


true_positives_at_thresholds = _at_thresholds("tp", "true_positives_at_thresholds")
false_positives_at_thresholds = _at_thresholds("fp", "false_positives_at_thresholds")
true_negatives_at_thresholds = _at_thresholds("tn", "true_negatives_at_thresholds")
false_negatives_at_thresholds = _at_thresholds("fn", "false_negatives_at_thresholds")


def precision_at_thresholds(labels, predictions, thresholds, weights=None, metrics_collections=None,
                            updates_collections=None, name=None):
    """tp / (tp + fp + 1e-7) per threshold (tf.compat.v1.metrics.precision_at_thresholds)."""
    with variable_scope(name, "precision_at_thresholds"):
        values, updates = _confusion_at_thresholds(labels, predictions, [float(t) for t in thresholds], weights,
                                                   includes=("tp", "fp"))

        def compute(c, name):
            return math_ops.divide(c["tp"], math_ops.add(math_ops.add(c["tp"], c["fp"]), 1e-7), name=name)
        return _collect(compute(values, "value"), compute(updates, "update_op"), metrics_collections,
                        updates_collections)


def recall_at_thresholds(labels, predictions, thresholds, weights=None, metrics_collections=None,
                         updates_collections=None, name=None):
    """tp / (tp + fn + 1e-7) per threshold (tf.compat.v1.metrics.recall_at_thresholds)."""
    with variable_scope(name, "recall_at_thresholds"):
        values, updates = _confusion_at_thresholds(labels, predictions, [float(t) for t in thresholds], weights,
                                                   includes=("tp", "fn"))

        def compute(c, name):
            return math_ops.divide(c["tp"], math_ops.add(math_ops.add(c["tp"], c["fn"]), 1e-7), name=name)
        return _collect(compute(values, "value"), compute(updates, "update_op"), metrics_collections,
                        updates_collections)


def mean_per_class_accuracy(labels, predictions, num_classes, weights=None, metrics_collections=None,
                            updates_collections=None, name=None):
    """The mean over classes of each class's running accuracy (tf.compat.v1.metrics.mean_per_class_accuracy).
    As in TF, `update_op` returns the per-class accuracies, a [num_classes] tensor."""
    with variable_scope(name, "mean_accuracy"):
        labels, predictions = _tensor(labels, "labels"), _tensor(predictions, "predictions")
        predictions, labels, weights = _remove_squeezable(predictions, labels, weights)
        _check_shapes(predictions, labels)
        num_classes = int(num_classes)
        total = metric_variable([num_classes], dtypes.float32, name="total")
        count = metric_variable([num_classes], dtypes.float32, name="count")
        if labels.dtype is not predictions.dtype:
            predictions = math_ops.cast(predictions, labels.dtype)
        ones = math_ops.cast(array_ops.ones_like(labels), dtypes.float32)
        is_correct = math_ops.cast(math_ops.equal(predictions, labels), dtypes.float32)
        if weights is not None:
            w = _broadcast_weights(weights, ones)
            ones, is_correct = math_ops.multiply(ones, w), math_ops.multiply(is_correct, w)
        lab_1h = array_ops.one_hot(array_ops.reshape(math_ops.cast(labels, dtypes.int32), [-1]), num_classes,
                                   dtype=dtypes.float32)
        update_total = assign_add(total, math_ops.reduce_sum(
            math_ops.multiply(lab_1h, array_ops.reshape(ones, [-1, 1])), axis=0))
        update_count = assign_add(count, math_ops.reduce_sum(
            math_ops.multiply(lab_1h, array_ops.reshape(is_correct, [-1, 1])), axis=0))
        per_class = math_ops.div_no_nan(count.value(), total.value())
        value = math_ops.reduce_mean(per_class, name="mean_accuracy")
        update_op = math_ops.div_no_nan(update_count, update_total, name="update_op")
        return _collect(value, update_op, metrics_collections, updates_collections)


def mean_iou(labels, predictions, num_classes, weights=None, metrics_collections=None, updates_collections=None,
             name=None):
    """The mean over classes of intersection / union, from a running confusion matrix
    (tf.compat.v1.metrics.mean_iou). As in TF, `update_op` returns the updated confusion matrix
    (float64, [num_classes, num_classes]); classes absent from labels and predictions are skipped."""
    with variable_scope(name, "mean_iou"):
        labels, predictions = _tensor(labels, "labels"), _tensor(predictions, "predictions")
        predictions, labels, weights = _remove_squeezable(predictions, labels, weights)
        _check_shapes(predictions, labels)
        num_classes = int(num_classes)
        total_cm = metric_variable([num_classes, num_classes], dtypes.float64, name="total_confusion_matrix")
        lab = array_ops.reshape(math_ops.cast(labels, dtypes.int32), [-1])
        pred = array_ops.reshape(math_ops.cast(predictions, dtypes.int32), [-1])
        lab_1h = array_ops.one_hot(lab, num_classes, dtype=dtypes.float64)
        pred_1h = array_ops.one_hot(pred, num_classes, dtype=dtypes.float64)
        if weights is not None:
            w = array_ops.reshape(math_ops.cast(_broadcast_weights(weights, math_ops.cast(labels, dtypes.float32)),
                                                dtypes.float64), [-1, 1])
            pred_1h = math_ops.multiply(pred_1h, w)
        current = math_ops.matmul(lab_1h, pred_1h, transpose_a=True)   # cm[label, prediction] += weight
        update_op = assign_add(total_cm, current)
        cm = total_cm.value()
        rows = math_ops.cast(math_ops.reduce_sum(cm, axis=0), dtypes.float32)
        cols = math_ops.cast(math_ops.reduce_sum(cm, axis=1), dtypes.float32)
        diag = math_ops.cast(math_ops.reduce_sum(math_ops.multiply(
            cm, constant(_eye(num_classes), dtype=dtypes.float64)), axis=1), dtypes.float32)
        denom = math_ops.subtract(math_ops.add(rows, cols), diag)
        valid = math_ops.reduce_sum(math_ops.cast(math_ops.not_equal(denom, 0.0), dtypes.float32))
        denom = math_ops.where(math_ops.greater(denom, 0.0), denom, array_ops.ones_like(denom))
        iou = math_ops.divide(diag, denom)
        value = math_ops.div_no_nan(math_ops.reduce_sum(iou), valid, name="mean_iou")
        return _collect(value, update_op, metrics_collections, updates_collections)


def _eye(n):
    return [[1.0 if i == j else 0.0 for j in range(n)] for i in range(n)]


def _sens_spec_at(labels, predictions, target, weights, num_thresholds, last_threshold, default_name,
                  find, metrics_collections, updates_collections, name):
    if not 0 <= target <= 1:
        raise ValueError(f"{default_name}: the target rate must be in [0, 1], got {target}")
    if num_thresholds < 2:
        raise ValueError(f"{default_name}: `num_thresholds` must be > 1, got {num_thresholds}")
    with variable_scope(name, default_name):
        kepsilon = 1e-7
        ths = ([0.0 - kepsilon] + [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
               + [last_threshold])
        values, updates = _confusion_at_thresholds(labels, predictions, ths, weights)
        return _collect(find(values, "value"), find(updates, "update_op"), metrics_collections,
                        updates_collections)


def sensitivity_at_specificity(labels, predictions, specificity, weights=None, num_thresholds=200,
                               metrics_collections=None, updates_collections=None, name=None):
    """The running sensitivity tp / (tp + fn) at the threshold whose specificity is closest to
    `specificity` (the first such threshold), over `num_thresholds` thresholds spread over [0, 1]
    (tf.compat.v1.metrics.sensitivity_at_specificity); `predictions` are probabilities."""
    kepsilon = 1e-7

    def find(c, name):
        spec = math_ops.divide(c["tn"], math_ops.add(math_ops.add(c["tn"], c["fp"]), kepsilon))
        i = math_ops.cast(math_ops.argmin(math_ops.abs(math_ops.subtract(spec, specificity)), 0), dtypes.int32)
        tp, fn = array_ops.gather(c["tp"], i), array_ops.gather(c["fn"], i)
        return math_ops.divide(tp, math_ops.add(math_ops.add(tp, fn), kepsilon), name=name)
    return _sens_spec_at(labels, predictions, specificity, weights, num_thresholds, 1.0 + kepsilon,
                         "sensitivity_at_specificity", find, metrics_collections, updates_collections, name)


def specificity_at_sensitivity(labels, predictions, sensitivity, weights=None, num_thresholds=200,
                               metrics_collections=None, updates_collections=None, name=None):
    """The running specificity tn / (tn + fp) at the threshold whose sensitivity is closest to
    `sensitivity` (the last such threshold, as TF's cumsum/argmax tie-break), over `num_thresholds`
    thresholds spread over [0, 1] (tf.compat.v1.metrics.specificity_at_sensitivity)."""
    kepsilon = 1e-7

    def find(c, name):
        sens = math_ops.divide(c["tp"], math_ops.add(math_ops.add(c["tp"], c["fn"]), kepsilon))
        dist = math_ops.abs(math_ops.subtract(sens, sensitivity))
        at_min = math_ops.cast(math_ops.equal(dist, math_ops.reduce_min(dist)), dtypes.int64)
        i = math_ops.cast(math_ops.argmax(_cumsum(at_min), 0), dtypes.int32)
        tn, fp = array_ops.gather(c["tn"], i), array_ops.gather(c["fp"], i)
        return math_ops.divide(tn, math_ops.add(math_ops.add(tn, fp), kepsilon), name=name)
    return _sens_spec_at(labels, predictions, sensitivity, weights, num_thresholds, 1.0 - kepsilon,
                         "specificity_at_sensitivity", find, metrics_collections, updates_collections, name)


# -- top-k metrics over class ids ---------------------------------------------------------------
# TF computes these with set operations over (possibly sparse) label sets. Here labels are a dense
# int tensor, [batch] or [batch, num_labels], predictions [batch, num_classes] (or the top-k ids
# [batch, k]); membership is an equality broadcast, and a label repeated within a row counts once
# (set semantics). As in TF with dense labels, a negative label is an ordinary (never predicted)
# class for precision/recall, so it counts as a false negative, while average_precision ignores
# it. SparseTensor labels and batch ranks above one are not supported.

def _cumsum(x, axis=0):
    from actorflow.graph.ops.sort_ops import cumsum
    return cumsum(x, axis=axis)


def _at_k_name(name, k=None, class_id=None):
    if k is not None:
        name = f"{name}_at_{k}"
    if class_id is not None:
        name = f"{name}_class{class_id}"
    return name


def _topk_inputs(labels, predictions_idx, who):
    labels = math_ops.cast(_tensor(labels, "labels"), dtypes.int64)
    ids = math_ops.cast(_tensor(predictions_idx, "predictions_idx"), dtypes.int64)
    if ids.shape.ndims != 2 or ids.shape[-1] is None:
        raise ValueError(f"{who}: predictions (ids) must be [batch, k] with k known, got {ids.shape} ('{ids.name}')")
    if labels.shape.ndims == 1:
        labels = array_ops.expand_dims(labels, -1)
    if labels.shape.ndims != 2:
        raise ValueError(f"{who}: labels must be [batch] or [batch, num_labels], got {labels.shape} "
                         f"('{labels.name}')")
    return labels, ids


def _row_weights(weights, like: Tensor) -> Tensor | None:
    if weights is None:
        return None
    w = math_ops.cast(_tensor(weights, "weights"), dtypes.float64)
    if w.shape.ndims == 2:
        w = array_ops.squeeze(w, [-1])
    return math_ops.multiply(w, array_ops.ones_like(like))


def _topk_counts(labels, ids, class_id):
    """Per row (float64, [batch]): true positives, false positives, false negatives."""
    labels_distinct = _distinct_labels(labels)                                  # [B, L] bool
    in_labels = math_ops.reduce_any(math_ops.equal(array_ops.expand_dims(ids, -1),
                                                   array_ops.expand_dims(labels, 1)), axis=-1)  # [B, k]
    if class_id is not None:
        cid = constant(int(class_id), dtype=dtypes.int64)
        pred_has = math_ops.reduce_any(math_ops.equal(ids, cid), axis=-1)
        lab_has = math_ops.reduce_any(math_ops.logical_and(math_ops.equal(labels, cid), labels_distinct), axis=-1)
        f = lambda b: math_ops.cast(b, dtypes.float64)  # noqa: E731
        return (f(math_ops.logical_and(pred_has, lab_has)),
                f(math_ops.logical_and(pred_has, math_ops.logical_not(lab_has))),
                f(math_ops.logical_and(lab_has, math_ops.logical_not(pred_has))))
    ids_distinct = _distinct_labels(ids)
    tp = math_ops.reduce_sum(math_ops.cast(math_ops.logical_and(in_labels, ids_distinct), dtypes.float64), axis=-1)
    n_pred = math_ops.reduce_sum(math_ops.cast(ids_distinct, dtypes.float64), axis=-1)
    n_lab = math_ops.reduce_sum(math_ops.cast(labels_distinct, dtypes.float64), axis=-1)
    return tp, math_ops.subtract(n_pred, tp), math_ops.subtract(n_lab, tp)


def _distinct_labels(x: Tensor, drop_negative=False) -> Tensor:
    """[B, L] bool: x[b, j] differs from every x[b, j'] with j' < j (and, with drop_negative,
    is non-negative)."""
    n = x.shape[-1]
    if n is None:
        raise ValueError(f"the last dimension of '{x.name}' must be known")
    earlier = constant([[j2 < j for j2 in range(n)] for j in range(n)], dtype=dtypes.bool_)  # [j, j']
    same = math_ops.equal(array_ops.expand_dims(x, -1), array_ops.expand_dims(x, 1))         # [B, j, j']
    dup = math_ops.reduce_any(math_ops.logical_and(same, earlier), axis=-1)
    if not drop_negative:
        return math_ops.logical_not(dup)
    return math_ops.logical_and(math_ops.greater_equal(x, 0), math_ops.logical_not(dup))


def _topk_ratio(labels, predictions_idx, k, class_id, weights, other, default_name, metrics_collections,
                updates_collections, name):
    with variable_scope(name, _at_k_name(default_name, k, class_id)):
        labels, ids = _topk_inputs(labels, predictions_idx, f"metrics.{default_name}")
        tp_row, fp_row, fn_row = _topk_counts(labels, ids, class_id)
        w = _row_weights(weights, tp_row)
        if w is not None:
            tp_row, fp_row, fn_row = (math_ops.multiply(t, w) for t in (tp_row, fp_row, fn_row))
        k_name = "" if k is None else f"_at_{k}"
        tp = metric_variable([], dtypes.float64, name=f"true_positive{k_name}")
        o = metric_variable([], dtypes.float64, name=f"{other}{k_name}")
        tp_up = assign_add(tp, math_ops.reduce_sum(tp_row))
        o_up = assign_add(o, math_ops.reduce_sum(fp_row if other == "false_positive" else fn_row))
        value = math_ops.divide(tp.value(), math_ops.add(tp.value(), o.value()), name="value")
        update = math_ops.divide(tp_up, math_ops.add(tp_up, o_up), name="update")
        return _collect(value, update, metrics_collections, updates_collections)


def precision_at_top_k(labels, predictions_idx, k=None, class_id=None, weights=None, metrics_collections=None,
                       updates_collections=None, name=None):
    """Running precision of the top-k class ids `predictions_idx` ([batch, k]) against the label
    ids: tp / (tp + fp), float64, NaN before any prediction (as TF's divide)
    (tf.compat.v1.metrics.precision_at_top_k). With `class_id`, only that class counts."""
    return _topk_ratio(labels, predictions_idx, k, class_id, weights, "false_positive", "precision",
                       metrics_collections, updates_collections, name)


def recall_at_top_k(labels, predictions_idx, k=None, class_id=None, weights=None, metrics_collections=None,
                    updates_collections=None, name=None):
    """Running recall of the top-k class ids `predictions_idx` against the label ids:
    tp / (tp + fn), float64 (tf.compat.v1.metrics.recall_at_top_k)."""
    return _topk_ratio(labels, predictions_idx, k, class_id, weights, "false_negative", "recall",
                       metrics_collections, updates_collections, name)


def _top_k_ids(predictions, k):
    from actorflow.graph.ops.sort_ops import top_k
    return top_k(_tensor(predictions, "predictions"), k)[1]


def _drop_out_of_range(labels, predictions):
    # TF replaces labels >= num_classes by -1, which are then ignored.
    labels = math_ops.cast(_tensor(labels, "labels"), dtypes.int64)
    num_classes = math_ops.cast(array_ops.shape(predictions)[-1], dtypes.int64)
    return math_ops.where(math_ops.greater_equal(labels, num_classes),
                          math_ops.multiply(array_ops.ones_like(labels), constant(-1, dtype=dtypes.int64)), labels)


def precision_at_k(labels, predictions, k, class_id=None, weights=None, metrics_collections=None,
                   updates_collections=None, name=None):
    """Running precision@k of the `k` highest-scoring classes of `predictions` ([batch, num_classes])
    against the label ids (tf.compat.v1.metrics.precision_at_k)."""
    return precision_at_top_k(labels, _top_k_ids(predictions, k), k, class_id, weights, metrics_collections,
                              updates_collections, name)


def recall_at_k(labels, predictions, k, class_id=None, weights=None, metrics_collections=None,
                updates_collections=None, name=None):
    """Running recall@k of the `k` highest-scoring classes of `predictions` against the label ids
    (tf.compat.v1.metrics.recall_at_k)."""
    return recall_at_top_k(labels, _top_k_ids(predictions, k), k, class_id, weights, metrics_collections,
                           updates_collections, name)


def sparse_precision_at_k(labels, predictions, k, class_id=None, weights=None, metrics_collections=None,
                          updates_collections=None, name=None):
    """precision_at_k under its deprecated name (tf.compat.v1.metrics.sparse_precision_at_k)."""
    return precision_at_k(labels, predictions, k, class_id, weights, metrics_collections, updates_collections,
                          name)


def average_precision_at_k(labels, predictions, k, weights=None, metrics_collections=None,
                           updates_collections=None, name=None):
    """The running (weighted) mean over rows of average precision@k: per row, the sum of
    precision@i over the ranks i <= k that hit a label, divided by min(#labels, k); labels
    >= num_classes and negative labels are ignored (tf.compat.v1.metrics.average_precision_at_k).
    float64; 0 before any row."""
    if k < 1:
        raise ValueError(f"metrics.average_precision_at_k: k must be >= 1, got {k}")
    with variable_scope(name, _at_k_name("average_precision", k)):
        predictions = _tensor(predictions, "predictions")
        labels, ids = _topk_inputs(_drop_out_of_range(labels, predictions), _top_k_ids(predictions, k),
                                   "metrics.average_precision_at_k")
        distinct = _distinct_labels(labels, drop_negative=True)
        hit = math_ops.reduce_any(math_ops.logical_and(
            math_ops.equal(array_ops.expand_dims(ids, -1), array_ops.expand_dims(labels, 1)),
            array_ops.expand_dims(distinct, 1)), axis=-1)                             # [B, k]
        rel = math_ops.cast(hit, dtypes.float64)
        ranks = constant([float(i + 1) for i in range(k)], dtype=dtypes.float64)
        prec = math_ops.divide(_cumsum(rel, axis=-1), ranks)
        n_rel = math_ops.minimum(math_ops.reduce_sum(math_ops.cast(
            math_ops.greater_equal(labels, 0), dtypes.float64), axis=-1), float(k))
        ap = math_ops.divide(math_ops.reduce_sum(math_ops.multiply(prec, rel), axis=-1), n_rel)
        w = _row_weights(weights, ap)
        if w is None:
            batch_max = math_ops.cast(array_ops.size(ap), dtypes.float64)
        else:
            ap = math_ops.multiply(ap, w)
            batch_max = math_ops.reduce_sum(w)
        max_var = metric_variable([], dtypes.float64, name="max")
        total_var = metric_variable([], dtypes.float64, name="total")
        max_up = assign_add(max_var, batch_max)
        total_up = assign_add(total_var, math_ops.reduce_sum(ap))
        value = math_ops.div_no_nan(total_var.value(), max_var.value(), name="mean")
        update = math_ops.div_no_nan(total_up, max_up, name="update")
        return _collect(value, update, metrics_collections, updates_collections)


def sparse_average_precision_at_k(labels, predictions, k, weights=None, metrics_collections=None,
                                  updates_collections=None, name=None):
    """average_precision_at_k under its deprecated name (tf.compat.v1.metrics.sparse_average_precision_at_k)."""
    return average_precision_at_k(labels, predictions, k, weights, metrics_collections, updates_collections, name)
