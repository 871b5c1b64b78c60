"""Beam search's backtrace (tf.contrib.seq2seq.gather_tree; op GatherTree).

A beam search records, at every step t, each beam's chosen token `step_ids[t, b, k]` and the beam
of step t - 1 it extends, `parent_ids[t, b, k]`. GatherTree follows the parent pointers back from
each batch entry's last step (`max_sequence_lengths[b] - 1`) and writes out every beam's full token
sequence, [max_time, batch, beam] like its inputs. Steps at or past a batch entry's length, and every
step after a beam's first `end_token`, hold `end_token`. It has no gradient, as in TF.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op

__all__ = ["gather_tree"]


def _infer_gather_tree(inputs, attrs):
    step_ids, parent_ids, max_lengths, end_token = inputs
    for t, what in ((step_ids, "step_ids"), (parent_ids, "parent_ids"), (end_token, "end_token")):
        if t.dtype is not dtypes.int32 and t.dtype is not dtypes.int64:
            raise InferenceError(f"{what} must be int32 or int64, got {t.dtype.name}")
    if parent_ids.dtype is not step_ids.dtype or end_token.dtype is not step_ids.dtype:
        raise InferenceError(f"step_ids ({step_ids.dtype.name}), parent_ids ({parent_ids.dtype.name}) and end_token "
                             f"({end_token.dtype.name}) must have one dtype")
    if max_lengths.dtype is not dtypes.int32:
        raise InferenceError(f"max_sequence_lengths must be int32, got {max_lengths.dtype.name}")
    shape = step_ids.shape.merge_with(parent_ids.shape) if step_ids.shape.ndims is not None or \
        parent_ids.shape.ndims is not None else step_ids.shape
    if shape.ndims is not None and shape.ndims != 3:
        raise InferenceError(f"step_ids must be a 3-tensor [max_time, batch, beam], got shape {shape}")
    if max_lengths.shape.ndims is not None and max_lengths.shape.ndims != 1:
        raise InferenceError(f"max_sequence_lengths must be a vector, got shape {max_lengths.shape}")
    if end_token.shape.ndims not in (None, 0):
        raise InferenceError(f"end_token must be a scalar, got shape {end_token.shape}")
    if shape.ndims == 3 and max_lengths.shape.ndims == 1:
        b, n = shape.dims[1], max_lengths.shape.dims[0]
        if b is not None and n is not None and b != n:
            raise InferenceError(f"max_sequence_lengths has {n} entries, but step_ids has a batch of {b}")
    return [(step_ids.dtype, shape)]


GatherTree = define_op("GatherTree", _infer_gather_tree)
GatherTree.gradient(lambda op, grad: [None] * 4)


def gather_tree(step_ids, parent_ids, max_sequence_lengths, end_token, name=None):
    """Every beam's token sequence, traced back through `parent_ids` from each batch entry's last
    step (tf.contrib.seq2seq.gather_tree); see the module's docstring."""
    with name_scope(name, "GatherTree", [step_ids, parent_ids, max_sequence_lengths]) as scope:
        step_ids = convert_to_tensor(step_ids, name="step_ids")
        parent_ids = convert_to_tensor(parent_ids, dtype=step_ids.dtype, name="parent_ids")
        lengths = convert_to_tensor(max_sequence_lengths, name="max_sequence_lengths")
        if lengths.dtype is not dtypes.int32:
            from actorflow.graph.ops.math_ops import cast
            lengths = cast(lengths, dtypes.int32)
        end_token = convert_to_tensor(end_token, dtype=step_ids.dtype, name="end_token")
        return GatherTree(step_ids, parent_ids, lengths, end_token, name=scope)
