"""af.contrib.seq2seq: tf.contrib.seq2seq.sequence_loss (TF 1.15), the weighted cross-entropy of a
batch of logit sequences."""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, math_ops, nn_ops

__all__ = ["sequence_loss"]


def sequence_loss(logits, targets, weights, average_across_timesteps=True, average_across_batch=True,
                  sum_over_timesteps=False, sum_over_batch=False, softmax_loss_function=None, name=None):
    """Weighted cross-entropy of `logits` [batch, time, classes] against integer `targets`
    [batch, time], weighted by `weights` [batch, time] (tf.contrib.seq2seq.sequence_loss).

    Averaging (`average_across_*`) divides the weighted sum by the sum of the weights over the
    reduced axes; summing (`sum_over_*`) divides it by the number of nonzero weights there. With
    both axes reduced the result is a scalar, with one a vector over the other axis, with none the
    [batch, time] losses. `softmax_loss_function(labels=, logits=)` replaces the sparse softmax
    cross-entropy. A division by zero gives 0 (div_no_nan).
    """
    logits, targets, weights = convert_to_tensor(logits), convert_to_tensor(targets), convert_to_tensor(weights)
    if logits.shape.ndims != 3:
        raise ValueError(f"Logits must be a [batch_size x sequence_length x logits] tensor, got shape "
                         f"{logits.shape} ('{logits.name}')")
    if targets.shape.ndims != 2:
        raise ValueError(f"Targets must be a [batch_size x sequence_length] tensor, got shape {targets.shape} "
                         f"('{targets.name}')")
    if weights.shape.ndims != 2:
        raise ValueError(f"Weights must be a [batch_size x sequence_length] tensor, got shape {weights.shape} "
                         f"('{weights.name}')")
    if average_across_timesteps and sum_over_timesteps:
        raise ValueError("average_across_timesteps and sum_over_timesteps cannot be set to True at same time.")
    if average_across_batch and sum_over_batch:
        raise ValueError("average_across_batch and sum_over_batch cannot be set to True at same time.")
    with name_scope(name, "sequence_loss", [logits, targets, weights]):
        if logits.shape[2] is not None:
            logits_flat = array_ops.reshape(logits, [-1, logits.shape[2]])
        else:
            logits_flat = array_ops.reshape(logits, array_ops.stack([-1, array_ops.shape(logits)[2]]))
        flat_targets = array_ops.reshape(targets, [-1])
        if softmax_loss_function is None:
            crossent = nn_ops.sparse_softmax_cross_entropy_with_logits(labels=flat_targets, logits=logits_flat)
        else:
            crossent = softmax_loss_function(labels=flat_targets, logits=logits_flat)
        crossent = crossent * array_ops.reshape(weights, [-1])
        if average_across_timesteps and average_across_batch:
            return math_ops.div_no_nan(math_ops.reduce_sum(crossent), math_ops.reduce_sum(weights))
        if sum_over_timesteps and sum_over_batch:
            count = math_ops.cast(math_ops.count_nonzero(weights), crossent.dtype)
            return math_ops.div_no_nan(math_ops.reduce_sum(crossent), count)
        crossent = array_ops.reshape(crossent, array_ops.shape(logits)[0:2])
        if average_across_timesteps or average_across_batch:
            axis = [0] if average_across_batch else [1]
            return math_ops.div_no_nan(math_ops.reduce_sum(crossent, axis=axis),
                                       math_ops.reduce_sum(weights, axis=axis))
        if sum_over_timesteps or sum_over_batch:
            axis = [0] if sum_over_batch else [1]
            count = math_ops.cast(math_ops.count_nonzero(weights, axis=axis, dtype=dtypes.int64), crossent.dtype)
            return math_ops.div_no_nan(math_ops.reduce_sum(crossent, axis=axis), count)
        return crossent
