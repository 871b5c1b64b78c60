"""af.losses: the loss functions of tf.compat.v1.losses, built from graph ops (gradients come free).

Every loss multiplies the per-element losses by `weights` (a scalar, or a tensor of the losses'
rank whose dimensions are 1 or equal to the losses'), reduces them as `reduction` says (TF 1.x's
default: SUM_BY_NONZERO_WEIGHTS, the weighted sum over the number of non-zero weights), adds the
result to `loss_collection` (GraphKeys.LOSSES unless told otherwise) and returns it. Losses are
computed in float32 and cast back to the input dtype, as TF does.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import GraphKeys, Tensor, add_to_collection, convert_to_tensor, get_collection, name_scope
from actorflow.graph.ops import array_ops, math_ops, nn_ops
from actorflow.graph.ops.constant import constant, stop_gradient

__all__ = ["Reduction", "compute_weighted_loss", "add_loss", "get_losses", "get_total_loss",
           "get_regularization_loss", "get_regularization_losses", "absolute_difference", "mean_squared_error",
           "huber_loss", "log_loss", "hinge_loss", "cosine_distance", "sigmoid_cross_entropy",
           "softmax_cross_entropy", "sparse_softmax_cross_entropy", "mean_pairwise_squared_error"]


class Reduction:
    """How a weighted loss is reduced (tf.compat.v1.losses.Reduction)."""
    NONE = "none"
    SUM = "weighted_sum"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    MEAN = "weighted_mean"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

    @classmethod
    def all(cls):
        return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE, cls.SUM_OVER_NONZERO_WEIGHTS,
                cls.SUM_BY_NONZERO_WEIGHTS)

    @classmethod
    def validate(cls, key):
        if key not in cls.all():
            raise ValueError(f"Invalid Reduction Key {key!r}; expected one of {cls.all()}")


def _tensor(x, what, dtype=None) -> Tensor:
    if x is None:
        raise ValueError(f"{what} must not be None.")
    return x if isinstance(x, Tensor) else convert_to_tensor(x, dtype=dtype)


def _check_broadcastable(weights: Tensor, losses: Tensor) -> None:
    """TF's weights_broadcast_ops rule, on static shapes: weights are a scalar, or have the losses'
    rank with each dimension 1 or equal to the losses'."""
    w, v = weights.shape, losses.shape
    if w.ndims is None or v.ndims is None or w.ndims == 0:
        return
    if w.ndims != v.ndims or any(a is not None and b is not None and a != 1 and a != b
                                 for a, b in zip(w.dims, v.dims)):
        raise ValueError(f"weights can not be broadcast to values. values.rank={v.ndims}. weights.rank={w.ndims}. "
                         f"values.shape={v}. weights.shape={w} (weights '{weights.name}', values '{losses.name}')")


def _num_present(losses: Tensor, weights: Tensor) -> Tensor:
    # The number of loss elements whose (broadcast) weight is not zero.
    present = math_ops.where(math_ops.equal(weights, 0.0), array_ops.zeros_like(weights),
                             array_ops.ones_like(weights))
    present = math_ops.multiply(present, array_ops.ones_like(losses))
    return math_ops.reduce_sum(present, name="num_present")


def _num_elements(losses: Tensor) -> Tensor:
    return math_ops.cast(array_ops.size(losses), losses.dtype)


def compute_weighted_loss(losses, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Weights and reduces `losses` (tf.compat.v1.losses.compute_weighted_loss); see the module
    docstring. With reduction NONE the weighted losses keep their shape."""
    Reduction.validate(reduction)
    with name_scope(scope, "weighted_loss"):
        losses = _tensor(losses, "losses")
        input_dtype = losses.dtype
        losses = math_ops.cast(losses, dtypes.float32)
        weights = math_ops.cast(_tensor(weights, "weights", None), dtypes.float32)
        _check_broadcastable(weights, losses)
        weighted = math_ops.multiply(losses, weights)
        if reduction == Reduction.NONE:
            loss = weighted
        else:
            loss = math_ops.reduce_sum(weighted)
            if reduction == Reduction.MEAN:
                loss = math_ops.div_no_nan(loss, math_ops.reduce_sum(
                    math_ops.multiply(array_ops.ones_like(losses), weights)), name="value")
            elif reduction == Reduction.SUM_BY_NONZERO_WEIGHTS:
                loss = math_ops.div_no_nan(loss, _num_present(losses, weights), name="value")
            elif reduction == Reduction.SUM_OVER_BATCH_SIZE:
                loss = math_ops.div_no_nan(loss, _num_elements(losses), name="value")
        loss = math_ops.cast(loss, input_dtype)
        add_loss(loss, loss_collection)
        return loss


def _pair(labels, predictions, lname="labels", pname="predictions"):
    labels = math_ops.cast(_tensor(labels, lname), dtypes.float32)
    predictions = math_ops.cast(_tensor(predictions, pname), dtypes.float32)
    if not predictions.shape.is_compatible_with(labels.shape):
        raise ValueError(f"Shapes {predictions.shape} and {labels.shape} are incompatible "
                         f"({pname} '{predictions.name}', {lname} '{labels.name}')")
    return labels, predictions


def absolute_difference(labels, predictions, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
                        reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """|predictions - labels|, weighted and reduced (tf.compat.v1.losses.absolute_difference)."""
    with name_scope(scope, "absolute_difference") as sc:
        labels, predictions = _pair(labels, predictions)
        losses = math_ops.abs(math_ops.subtract(predictions, labels))
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def mean_squared_error(labels, predictions, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
                       reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """(predictions - labels)^2, weighted and reduced (tf.compat.v1.losses.mean_squared_error)."""
    with name_scope(scope, "mean_squared_error") as sc:
        labels, predictions = _pair(labels, predictions)
        losses = math_ops.squared_difference(predictions, labels)
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def huber_loss(labels, predictions, weights=1.0, delta=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """0.5 x^2 where |x| <= delta, else delta (|x| - 0.5 delta), x = predictions - labels
    (tf.compat.v1.losses.huber_loss)."""
    with name_scope(scope, "huber_loss") as sc:
        labels, predictions = _pair(labels, predictions)
        abs_error = math_ops.abs(math_ops.subtract(predictions, labels))
        delta = constant(float(delta), dtype=dtypes.float32)
        quadratic = math_ops.minimum(abs_error, delta)
        linear = math_ops.subtract(abs_error, quadratic)
        losses = math_ops.add(math_ops.multiply(0.5, math_ops.multiply(quadratic, quadratic)),
                              math_ops.multiply(delta, linear))
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def log_loss(labels, predictions, weights=1.0, epsilon=1e-7, scope=None, loss_collection=GraphKeys.LOSSES,
             reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """-labels log(p + eps) - (1 - labels) log(1 - p + eps), predictions p being probabilities
    (tf.compat.v1.losses.log_loss)."""
    with name_scope(scope, "log_loss") as sc:
        labels, predictions = _pair(labels, predictions)
        losses = math_ops.subtract(
            math_ops.negative(math_ops.multiply(labels, math_ops.log(math_ops.add(predictions, epsilon)))),
            math_ops.multiply(math_ops.subtract(1.0, labels),
                              math_ops.log(math_ops.add(math_ops.subtract(1.0, predictions), epsilon))))
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def hinge_loss(labels, logits, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """max(0, 1 - (2 labels - 1) logits), labels in {0, 1} (tf.compat.v1.losses.hinge_loss)."""
    with name_scope(scope, "hinge_loss") as sc:
        labels, logits = _pair(labels, logits, "labels", "logits")
        signed = math_ops.subtract(math_ops.multiply(2.0, labels), 1.0)
        losses = nn_ops.relu(math_ops.subtract(1.0, math_ops.multiply(signed, logits)))
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def cosine_distance(labels, predictions, axis=None, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
                    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS, dim=None):
    """1 - sum(labels * predictions, axis), both assumed unit-normalized along `axis` (`dim` is the
    deprecated name) (tf.compat.v1.losses.cosine_distance)."""
    if dim is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'axis' and 'dim'")
        axis = dim
    if axis is None:
        raise ValueError("You must specify 'axis'.")
    with name_scope(scope, "cosine_distance_loss") as sc:
        labels, predictions = _pair(labels, predictions)
        radial = math_ops.multiply(predictions, labels)
        losses = math_ops.subtract(1.0, math_ops.reduce_sum(radial, axis=[axis], keepdims=True))
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def sigmoid_cross_entropy(multi_class_labels, logits, weights=1.0, label_smoothing=0, scope=None,
                          loss_collection=GraphKeys.LOSSES, reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Element-wise sigmoid cross-entropy; with `label_smoothing` s the labels become
    labels (1 - s) + s / 2 (tf.compat.v1.losses.sigmoid_cross_entropy)."""
    with name_scope(scope, "sigmoid_cross_entropy_loss") as sc:
        logits = _tensor(logits, "logits")
        labels = math_ops.cast(_tensor(multi_class_labels, "multi_class_labels"), logits.dtype)
        if not logits.shape.is_compatible_with(labels.shape):
            raise ValueError(f"Shapes {logits.shape} and {labels.shape} are incompatible (logits '{logits.name}')")
        if label_smoothing > 0:
            labels = math_ops.add(math_ops.multiply(labels, 1.0 - label_smoothing), 0.5 * label_smoothing)
        losses = nn_ops.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits, name="xentropy")
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def softmax_cross_entropy(onehot_labels, logits, weights=1.0, label_smoothing=0, scope=None,
                          loss_collection=GraphKeys.LOSSES, reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Softmax cross-entropy of each row of `logits` [batch, classes] against one-hot labels; with
    `label_smoothing` s the labels become labels (1 - s) + s / classes. `weights` apply per row
    (tf.compat.v1.losses.softmax_cross_entropy). No gradient flows into the labels."""
    with name_scope(scope, "softmax_cross_entropy_loss") as sc:
        logits = _tensor(logits, "logits")
        labels = math_ops.cast(_tensor(onehot_labels, "onehot_labels"), logits.dtype)
        if not logits.shape.is_compatible_with(labels.shape):
            raise ValueError(f"Shapes {logits.shape} and {labels.shape} are incompatible (logits '{logits.name}')")
        if label_smoothing > 0:
            num_classes = math_ops.cast(array_ops.shape(labels)[-1], logits.dtype)
            labels = math_ops.add(math_ops.multiply(labels, 1.0 - label_smoothing),
                                  math_ops.divide(constant(float(label_smoothing), dtype=logits.dtype), num_classes))
        losses = nn_ops.softmax_cross_entropy_with_logits_v2(labels=stop_gradient(labels), logits=logits,
                                                             name="xentropy")
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def _squeeze_last(labels: Tensor, logits: Tensor) -> Tensor:
    # TF's remove_squeezable_dimensions with expected_rank_diff=1: labels of shape [batch, 1]
    # against logits [batch, classes] lose their last axis.
    lr, gr = labels.shape.ndims, logits.shape.ndims
    if lr is not None and gr is not None and lr == gr and labels.shape[-1] in (1, None):
        return array_ops.squeeze(labels, [-1])
    return labels


def sparse_softmax_cross_entropy(labels, logits, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
                                 reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Softmax cross-entropy against integer class `labels` [batch] (or [batch, 1])
    (tf.compat.v1.losses.sparse_softmax_cross_entropy)."""
    with name_scope(scope, "sparse_softmax_cross_entropy_loss") as sc:
        logits = _tensor(logits, "logits")
        labels = _squeeze_last(_tensor(labels, "labels"), logits)
        if isinstance(weights, Tensor) and weights.shape.ndims is not None and labels.shape.ndims is not None \
                and weights.shape.ndims == labels.shape.ndims + 1 and weights.shape[-1] in (1, None):
            weights = array_ops.squeeze(weights, [-1])
        losses = nn_ops.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits, name="xentropy")
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def mean_pairwise_squared_error(labels, predictions, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES):
    """For each sample (first axis), the mean over pairs of its elements (i, j) of
    ((p_i - p_j) - (l_i - l_j))^2, times the sample's weight, summed over the batch: TF 1.x's
    formula exactly (tf.compat.v1.losses.mean_pairwise_squared_error). `weights` broadcast to the
    labels (a scalar or [batch, 1, ...])."""
    with name_scope(scope, "mean_pairwise_squared_error"):
        labels, predictions = _pair(labels, predictions)
        weights = math_ops.cast(_tensor(weights, "weights"), dtypes.float32)
        _check_broadcastable(weights, labels)
        rank = predictions.shape.ndims
        if rank is None:
            raise ValueError(f"mean_pairwise_squared_error needs predictions of known rank ('{predictions.name}')")
        axes = list(range(1, rank))
        diffs = math_ops.subtract(predictions, labels)
        present = math_ops.where(math_ops.equal(weights, 0.0), array_ops.zeros_like(weights),
                                 array_ops.ones_like(weights))
        present = math_ops.multiply(present, array_ops.ones_like(diffs))
        num_present = math_ops.reduce_sum(present, axis=axes, keepdims=True)
        sum_sq = math_ops.reduce_sum(math_ops.square(diffs), axis=axes, keepdims=True)
        term1 = math_ops.multiply(2.0, math_ops.div_no_nan(sum_sq, math_ops.maximum(
            math_ops.subtract(num_present, 1.0), 0.0)))
        sum_d = math_ops.reduce_sum(diffs, axis=axes, keepdims=True)
        term2 = math_ops.multiply(2.0, math_ops.div_no_nan(math_ops.square(sum_d), math_ops.maximum(
            math_ops.multiply(num_present, math_ops.subtract(num_present, 1.0)), 0.0)))
        loss = math_ops.reduce_sum(math_ops.multiply(math_ops.subtract(term1, term2), weights))
        loss = math_ops.where(math_ops.greater(math_ops.reduce_sum(num_present), 0.0), loss,
                              array_ops.zeros_like(loss), name="value")
        add_loss(loss, loss_collection)
        return loss


# ---------------------------------------------------------------------------------------------
# Collections
# ---------------------------------------------------------------------------------------------

def add_loss(loss, loss_collection=GraphKeys.LOSSES):
    """Adds `loss` to `loss_collection` (tf.compat.v1.losses.add_loss); a None collection adds nothing."""
    if loss_collection:
        add_to_collection(loss_collection, loss)


def get_losses(scope=None, loss_collection=GraphKeys.LOSSES):
    """The losses in `loss_collection`, filtered by the name-scope regex `scope` (tf.compat.v1.losses.get_losses)."""
    return get_collection(loss_collection, scope)


def get_regularization_losses(scope=None):
    """The losses that variable regularizers added (tf.compat.v1.losses.get_regularization_losses)."""
    return get_collection(GraphKeys.REGULARIZATION_LOSSES, scope)


def get_regularization_loss(scope=None, name="total_regularization_loss"):
    """The sum of the regularization losses, or a constant 0.0 when there are none
    (tf.compat.v1.losses.get_regularization_loss)."""
    losses = get_regularization_losses(scope)
    if losses:
        return math_ops.add_n(losses, name=name)
    return constant(0.0, name=name)


def get_total_loss(add_regularization_losses=True, name="total_loss", scope=None):
    """The sum of the collected losses, and of the regularization losses unless told otherwise
    (tf.compat.v1.losses.get_total_loss). Raises ValueError when there is none, as TF does."""
    losses = get_losses(scope=scope)
    if add_regularization_losses:
        losses = losses + get_regularization_losses(scope)
    if not losses:
        raise ValueError("No losses found in collection.")
    return math_ops.add_n(losses, name=name)

