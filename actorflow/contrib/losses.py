"""af.contrib.losses: tf.contrib.losses (TF 1.x), the losses of TF 1.0-1.2 programs, whose
arguments come in their old order (predictions or logits first), over af.losses; and
`metric_learning`'s contrastive and semi-hard triplet losses.

Each weighted loss adds itself to the LOSSES collection and reduces as tf.losses' default does
(the weighted sum over the number of non-zero weights). `hinge_loss` returns the unreduced,
unweighted per-element losses, as TF 1.x's contrib version did.
"""
from __future__ import annotations

import types

from actorflow import losses as _losses
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, math_ops

__all__ = ["absolute_difference", "add_loss", "compute_weighted_loss", "cosine_distance", "get_losses",
           "get_regularization_losses", "get_total_loss", "hinge_loss", "log_loss", "mean_pairwise_squared_error",
           "mean_squared_error", "sigmoid_cross_entropy", "softmax_cross_entropy", "sparse_softmax_cross_entropy",
           "metric_learning"]

add_loss = _losses.add_loss
compute_weighted_loss = _losses.compute_weighted_loss
get_losses = _losses.get_losses
get_regularization_losses = _losses.get_regularization_losses


def get_total_loss(add_regularization_losses=True, name="total_loss"):
    return _losses.get_total_loss(add_regularization_losses=add_regularization_losses, name=name)


def absolute_difference(predictions, labels=None, weights=1.0, scope=None):
    return _losses.absolute_difference(labels, predictions, weights=weights, scope=scope)


def cosine_distance(predictions, labels=None, axis=None, weights=1.0, scope=None, dim=None):
    return _losses.cosine_distance(labels, predictions, axis=axis, weights=weights, scope=scope, dim=dim)


def log_loss(predictions, labels=None, weights=1.0, epsilon=1e-7, scope=None):
    return _losses.log_loss(labels, predictions, weights=weights, epsilon=epsilon, scope=scope)


def mean_pairwise_squared_error(predictions, labels=None, weights=1.0, scope=None):
    return _losses.mean_pairwise_squared_error(labels, predictions, weights=weights, scope=scope)


def mean_squared_error(predictions, labels=None, weights=1.0, scope=None):
    return _losses.mean_squared_error(labels, predictions, weights=weights, scope=scope)


def sigmoid_cross_entropy(logits, multi_class_labels, weights=1.0, label_smoothing=0, scope=None):
    return _losses.sigmoid_cross_entropy(multi_class_labels, logits, weights=weights,
                                         label_smoothing=label_smoothing, scope=scope)


def softmax_cross_entropy(logits, onehot_labels, weights=1.0, label_smoothing=0, scope=None):
    return _losses.softmax_cross_entropy(onehot_labels, logits, weights=weights, label_smoothing=label_smoothing,
                                         scope=scope)


def sparse_softmax_cross_entropy(logits, labels, weights=1.0, scope=None):
    return _losses.sparse_softmax_cross_entropy(labels, logits, weights=weights, scope=scope)


def hinge_loss(logits, labels=None, scope=None):
    """Per-element hinge losses max(0, 1 - (2 * labels - 1) * logits), unreduced and not collected."""
    with name_scope(scope, "hinge_loss", [logits, labels]):
        logits = convert_to_tensor(logits, name="logits")
        labels = math_ops.cast(convert_to_tensor(labels, name="labels"), logits.dtype)
        logits.shape.assert_is_compatible_with(labels.shape)
        return math_ops.maximum(0.0, 1.0 - (2.0 * labels - 1.0) * logits)


# -- metric learning ---------------------------------------------------------------------------------

def pairwise_distance(feature, squared=False):
    """[n, n] distances between the rows of `feature` (squared Euclidean with `squared`), with an
    exact zero diagonal and a gradient-safe square root at zero."""
    feature = convert_to_tensor(feature, name="feature")
    sq = (math_ops.reduce_sum(math_ops.square(feature), 1, keepdims=True)
          + array_ops.reshape(math_ops.reduce_sum(math_ops.square(feature), 1), [1, -1])
          - 2.0 * math_ops.matmul(feature, feature, transpose_b=True))
    sq = math_ops.maximum(sq, 0.0)
    zero = math_ops.less_equal(sq, 0.0)
    dist = sq if squared else math_ops.sqrt(sq + math_ops.cast(zero, sq.dtype) * 1e-16)
    dist = dist * math_ops.cast(math_ops.logical_not(zero), dist.dtype)
    n = array_ops.shape(feature)[0]
    return dist * (1.0 - array_ops.eye(n, dtype=dist.dtype))


def contrastive_loss(labels, embeddings_anchor, embeddings_positive, margin=1.0):
    """Mean over pairs of y d^2 + (1 - y) max(margin - d, 0)^2, d the Euclidean distance of a pair
    (Hadsell et al.), y 1 for a similar pair."""
    a = convert_to_tensor(embeddings_anchor, name="embeddings_anchor")
    p = convert_to_tensor(embeddings_positive, dtype=a.dtype, name="embeddings_positive")
    d = math_ops.sqrt(math_ops.reduce_sum(math_ops.squared_difference(a, p), 1))
    y = math_ops.cast(labels, d.dtype)
    return math_ops.reduce_mean(y * math_ops.square(d) + (1.0 - y) * math_ops.square(math_ops.maximum(margin - d, 0.0)),
                                name="contrastive_loss")


def triplet_semihard_loss(labels, embeddings, margin=1.0):
    """FaceNet's triplet loss with semi-hard negatives (Schroff et al.), over squared distances: for
    each anchor a and positive p (same label, a != p), the negative n is the closest one farther
    than p, or the farthest negative when there is none; the loss is the mean over (a, p) of
    max(margin + d(a, p) - d(a, n), 0)."""
    labels = array_ops.reshape(convert_to_tensor(labels, name="labels"), [-1, 1])
    d = pairwise_distance(embeddings, squared=True)                        # [a, x]
    same = math_ops.equal(labels, array_ops.reshape(labels, [1, -1]))
    neg = math_ops.logical_not(same)
    neg_f = math_ops.cast(neg, d.dtype)
    # Candidates [a, p, n]: n is a negative of a farther from a than p is.
    cand = math_ops.logical_and(array_ops.expand_dims(neg, 1),
                                math_ops.greater(array_ops.expand_dims(d, 1), array_ops.expand_dims(d, 2)))
    cand_f = math_ops.cast(cand, d.dtype)
    top = array_ops.reshape(math_ops.reduce_max(d, 1), [-1, 1, 1])
    closest = math_ops.reduce_min((array_ops.expand_dims(d, 1) - top) * cand_f, 2) + top[:, :, 0]
    low = math_ops.reduce_min(d, 1, keepdims=True)
    farthest = math_ops.reduce_max((d - low) * neg_f, 1, keepdims=True) + low
    n = array_ops.shape(d)[0]
    semi_hard = math_ops.where_v2(math_ops.reduce_any(cand, 2), closest,
                                  array_ops.tile(farthest, array_ops.stack([1, n])))
    pos = math_ops.cast(same, d.dtype) - array_ops.eye(n, dtype=d.dtype)
    per_pair = math_ops.maximum((margin + d - semi_hard) * pos, 0.0)
    return math_ops.truediv(math_ops.reduce_sum(per_pair), math_ops.reduce_sum(pos), name="triplet_semihard_loss")


metric_learning = types.SimpleNamespace(pairwise_distance=pairwise_distance, contrastive_loss=contrastive_loss,
                                        triplet_semihard_loss=triplet_semihard_loss)
