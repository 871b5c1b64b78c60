"""Sampled losses over many classes: NCE and sampled softmax (tf.nn.nce_loss, tf.nn.sampled_softmax_loss).

Both score each example against its true classes and a small set of sampled classes instead of all
`num_classes`, following TF's nn_impl._compute_sampled_logits step for step: the rows of the class
weights (and biases) for the true and the sampled ids are fetched with one `embedding_lookup`, so
their gradients are IndexedSlices over those rows only, and an optimizer updates just them (the
point of the method for a large vocabulary). Logits are corrected by ``log(expected_count)`` of the
sampler, and optionally a true class that was also sampled is removed from the negatives.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, math_ops, nn_ops
from actorflow.graph.ops.candidate_sampling_ops import compute_accidental_hits, log_uniform_candidate_sampler
from actorflow.graph.ops.constant import stop_gradient
from actorflow.graph.ops.scatter_nd_ops import tensor_scatter_nd_update

__all__ = ["nce_loss", "sampled_softmax_loss"]


def _weight_list(weights) -> list:
    if hasattr(weights, "_get_variable_list"):        # a PartitionedVariable: its shards
        return list(weights._get_variable_list())
    return list(weights) if isinstance(weights, (list, tuple)) else [weights]


def _compute_sampled_logits(weights, biases, labels, inputs, num_sampled, num_classes, num_true=1,
                            sampled_values=None, subtract_log_q=True, remove_accidental_hits=False,
                            partition_strategy="mod", name=None, seed=None):
    """Logits ``[batch, num_true + num_sampled]`` and their target labels (TF's _compute_sampled_logits)."""
    weights = _weight_list(weights)
    with name_scope(name, "compute_sampled_logits", [biases, inputs, labels]):
        labels = convert_to_tensor(labels)
        if labels.dtype is not dtypes.int64:
            labels = math_ops.cast(labels, dtypes.int64)
        if labels.shape.ndims is not None and labels.shape.ndims != 2:
            raise ValueError(f"labels must be a [batch_size, num_true] matrix, got shape {labels.shape} "
                             f"('{labels.name}')")
        if labels.shape.dims is not None and labels.shape.dims[1] not in (None, num_true):
            raise ValueError(f"labels has {labels.shape.dims[1]} columns but num_true={num_true} ('{labels.name}')")
        inputs = convert_to_tensor(inputs)
        labels_flat = array_ops.reshape(labels, [-1])
        if sampled_values is None:
            sampled_values = log_uniform_candidate_sampler(true_classes=labels, num_true=num_true,
                                                           num_sampled=num_sampled, unique=True,
                                                           range_max=num_classes, seed=seed)
        if len(sampled_values) != 3:
            raise ValueError("sampled_values must be (sampled_candidates, true_expected_count, "
                             f"sampled_expected_count), got {len(sampled_values)} values")
        sampled, true_expected_count, sampled_expected_count = (stop_gradient(s) for s in sampled_values)
        sampled = math_ops.cast(sampled, dtypes.int64)
        n_true = array_ops.shape(labels_flat)[0]

        all_ids = array_ops.concat([labels_flat, sampled], 0)
        all_w = nn_ops.embedding_lookup(weights, all_ids, partition_strategy=partition_strategy)
        if all_w.dtype is not inputs.dtype:
            all_w = math_ops.cast(all_w, inputs.dtype)
        true_w = array_ops.slice(all_w, [0, 0], array_ops.stack([n_true, -1]))
        sampled_w = array_ops.slice(all_w, array_ops.stack([n_true, 0]), [-1, -1])
        sampled_logits = math_ops.matmul(inputs, sampled_w, transpose_b=True)

        all_b = nn_ops.embedding_lookup(biases, all_ids, partition_strategy=partition_strategy)
        if all_b.dtype is not inputs.dtype:
            all_b = math_ops.cast(all_b, inputs.dtype)
        true_b = array_ops.slice(all_b, [0], array_ops.reshape(n_true, [1]))
        sampled_b = array_ops.slice(all_b, array_ops.reshape(n_true, [1]), [-1])

        # Each example's dot product with each of its true classes' rows.
        dim = array_ops.shape(true_w)[1:2]
        true_w3 = array_ops.reshape(true_w, array_ops.concat([[-1, num_true], dim], 0))
        row_dots = math_ops.multiply(array_ops.expand_dims(inputs, 1), true_w3)
        true_logits = math_ops.reduce_sum(row_dots, axis=2)
        true_logits = true_logits + array_ops.reshape(true_b, [-1, num_true])
        sampled_logits = sampled_logits + sampled_b

        if remove_accidental_hits:
            acc_indices, acc_ids, acc_weights = compute_accidental_hits(labels, sampled, num_true=num_true)
            idx = array_ops.concat([array_ops.reshape(acc_indices, [-1, 1]),
                                    array_ops.reshape(math_ops.cast(acc_ids, dtypes.int32), [-1, 1])], 1)
            if acc_weights.dtype is not sampled_logits.dtype:
                acc_weights = math_ops.cast(acc_weights, sampled_logits.dtype)
            # Overwrite, not add (TF's sparse_to_dense): a row's hit counted twice stays -FLT_MAX.
            mask = tensor_scatter_nd_update(array_ops.zeros_like(sampled_logits), idx, acc_weights)
            sampled_logits = sampled_logits + mask

        if subtract_log_q:
            true_logits = true_logits - math_ops.log(math_ops.cast(true_expected_count, true_logits.dtype))
            sampled_logits = sampled_logits - math_ops.log(math_ops.cast(sampled_expected_count,
                                                                         sampled_logits.dtype))
        out_logits = array_ops.concat([true_logits, sampled_logits], 1)
        out_labels = array_ops.concat([array_ops.ones_like(true_logits) / num_true,
                                       array_ops.zeros_like(sampled_logits)], 1)
        return out_logits, out_labels


def nce_loss(weights, biases, labels, inputs, num_sampled, num_classes, num_true=1, sampled_values=None,
             remove_accidental_hits=False, partition_strategy="mod", name="nce_loss"):
    """Noise-contrastive estimation loss per example (tf.compat.v1.nn.nce_loss).

    `weights` ``[num_classes, dim]`` (a tensor, a Variable, a list of shards or a
    PartitionedVariable, split by `partition_strategy` "mod" or "div" as in `embedding_lookup`),
    `biases` ``[num_classes]``, `labels` int ``[batch, num_true]``, `inputs` ``[batch, dim]``.
    Samples `num_sampled` negative classes with `log_uniform_candidate_sampler` unless
    `sampled_values` gives them, and returns the summed sigmoid cross-entropy of the true classes
    (target 1 / num_true) and the sampled ones (target 0), logits corrected by ``-log Q``: ``[batch]``.
    The gradients into `weights` and `biases` are IndexedSlices.
    """
    logits, labels = _compute_sampled_logits(weights, biases, labels, inputs, num_sampled, num_classes,
                                             num_true=num_true, sampled_values=sampled_values, subtract_log_q=True,
                                             remove_accidental_hits=remove_accidental_hits,
                                             partition_strategy=partition_strategy, name=name)
    losses = nn_ops.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits, name="sampled_losses")
    return math_ops.reduce_sum(losses, axis=1)


def sampled_softmax_loss(weights, biases, labels, inputs, num_sampled, num_classes, num_true=1,
                         sampled_values=None, remove_accidental_hits=True, partition_strategy="mod",
                         name="sampled_softmax_loss", seed=None):
    """Softmax cross-entropy over the true and sampled classes only (tf.compat.v1.nn.sampled_softmax_loss).

    Arguments as `nce_loss`; accidental hits are removed by default. An estimate of the full softmax
    loss for training; evaluate with the full softmax. Returns ``[batch]``; the gradients into
    `weights` and `biases` are IndexedSlices.
    """
    logits, labels = _compute_sampled_logits(weights, biases, labels, inputs, num_sampled, num_classes,
                                             num_true=num_true, sampled_values=sampled_values, subtract_log_q=True,
                                             remove_accidental_hits=remove_accidental_hits,
                                             partition_strategy=partition_strategy, name=name, seed=seed)
    labels = stop_gradient(labels, name="labels_stop_gradient")
    return nn_ops.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
