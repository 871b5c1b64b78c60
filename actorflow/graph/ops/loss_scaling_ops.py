"""Losses scaled for synchronous replicas (tf.nn.compute_average_loss, tf.nn.scale_regularization_loss).

TF divides by the global batch size (the per-replica batch times the number of replicas of the
current tf.distribute strategy) and by the number of replicas. actorflow has no tf.distribute
strategies (its replicas are between-graph, each a separate graph), so the number of replicas in
sync is 1, as TF's default strategy gives.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.ops import array_ops, math_ops

__all__ = ["compute_average_loss", "scale_regularization_loss"]

_NUM_REPLICAS_IN_SYNC = 1


def compute_average_loss(per_example_loss, sample_weight=None, global_batch_size=None):
    """sum(per_example_loss * sample_weight) / global_batch_size (0 when that is 0), the batch size
    defaulting to the loss's first dimension (tf.nn.compute_average_loss)."""
    loss = convert_to_tensor(per_example_loss)
    if loss.shape.ndims == 0:
        raise ValueError("Invalid value passed for `per_example_loss`. Expected a tensor with at least rank 1, "
                         f"received: {loss}")
    dtype = loss.dtype
    if sample_weight is not None:
        # TF's losses_util.scale_losses_by_sample_weight weighs in float32 whatever the loss's dtype.
        w = math_ops.cast(convert_to_tensor(sample_weight), dtypes.float32)
        loss = math_ops.cast(math_ops.multiply(math_ops.cast(loss, dtypes.float32), w), dtype)
    if global_batch_size is None:
        global_batch_size = array_ops.shape(loss)[0] * _NUM_REPLICAS_IN_SYNC
    gbs = convert_to_tensor(global_batch_size)
    if gbs.shape.ndims not in (None, 0):
        raise ValueError(f"global_batch_size must be scalar, got shape {gbs.shape}")
    if not gbs.dtype.is_integer:
        raise ValueError(f"global_batch_size must be an integer, got {gbs.dtype.name}")
    return math_ops.div_no_nan(math_ops.reduce_sum(loss), math_ops.cast(gbs, dtype))


def scale_regularization_loss(regularization_loss):
    """sum(regularization_loss) / the number of replicas in sync (tf.nn.scale_regularization_loss)."""
    return math_ops.reduce_sum(regularization_loss) / _NUM_REPLICAS_IN_SYNC
