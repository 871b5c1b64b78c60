"""Connectionist temporal classification (tf.nn.ctc_loss, ctc_loss_v2; ops CTCLoss,
CTCGreedyDecoder, CTCBeamSearchDecoder), as TF 1.x's ctc_ops.py.

CTCLoss takes time-major logits [max_time, batch, num_classes], the labels as a SparseTensor's
indices (int64 [n, 2]: batch, position) and values (int32), and sequence_length [batch]; the last
class is the blank. Its outputs are the loss [batch] and the gradient of each loss with respect to
the logits [max_time, batch, num_classes] (zero past each sequence's length); the op's gradient is
that second output scaled by the incoming gradient of the loss, as TF's _CTCLossGrad (so no second
derivative, as in TF, where it is prevented).
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.scatter_nd_ops import gather_nd
from actorflow.graph.sparse_tensor import SparseTensor, SparseTensorValue
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["ctc_loss", "ctc_loss_v2", "ctc_greedy_decoder", "ctc_beam_search_decoder", "ctc_beam_search_decoder_v2",
           "collapse_repeated", "ctc_unique_labels"]


def _infer_ctc_loss(inputs, attrs):
    x, idx, vals, seq = inputs
    if x.dtype not in (dtypes.float32, dtypes.float64):
        raise InferenceError(f"inputs must be float32 or float64, got {x.dtype.name}")
    if idx.dtype is not dtypes.int64:
        raise InferenceError(f"labels_indices must be int64, got {idx.dtype.name}")
    if vals.dtype is not dtypes.int32 or seq.dtype is not dtypes.int32:
        raise InferenceError(f"labels_values and sequence_length must be int32, got {vals.dtype.name} and "
                             f"{seq.dtype.name}")
    xs = x.shape if x.shape.ndims is not None else TensorShape([None, None, None])
    if xs.ndims != 3:
        raise InferenceError(f"inputs must be 3-D [max_time, batch, num_classes], got shape {x.shape}")
    batch = TensorShape([xs[1]])
    if seq.shape.ndims is not None:
        if seq.shape.ndims != 1:
            raise InferenceError(f"sequence_length must be a vector, got shape {seq.shape}")
        if not batch.is_compatible_with(seq.shape):
            raise InferenceError(f"sequence_length {seq.shape} does not match the batch of inputs {xs}")
        batch = batch.merge_with(seq.shape)
    return [(x.dtype, batch), (x.dtype, TensorShape([xs[0], batch[0], xs[2]]))]


CTCLoss = define_op("CTCLoss", _infer_ctc_loss)


@CTCLoss.gradient
def _ctc_loss_grad(op, grad_loss, _grad_gradient=None):
    # TF's _BroadcastMul: the per-example gradient [batch] over the time-major gradient.
    return [math_ops.multiply(array_ops.expand_dims(grad_loss, -1), op.outputs[1]), None, None, None]


def _as_sparse(labels):
    if isinstance(labels, SparseTensorValue):
        return SparseTensor.from_value(labels)
    return labels


def ctc_loss(labels, inputs=None, sequence_length=None, preprocess_collapse_repeated=False, ctc_merge_repeated=True,
             ignore_longer_outputs_than_inputs=False, time_major=True, logits=None):
    """The CTC loss [batch] of `inputs` (logits, time-major unless `time_major=False`) against the
    label sequences of the SparseTensor `labels` (int32 values; the blank is the last class)
    (tf.compat.v1.nn.ctc_loss)."""
    if inputs is not None and logits is not None:
        raise ValueError("ctc_loss: give either inputs or logits (its deprecated name), not both")
    inputs = logits if inputs is None else inputs
    labels = _as_sparse(labels)
    if not isinstance(labels, SparseTensor):
        raise TypeError(f"Expected argument `labels` to be a SparseTensor. Received labels={labels} of type: "
                        f"{type(labels).__name__}")
    if sequence_length is None:
        raise ValueError("ctc_loss: sequence_length is required")
    with name_scope(None, "CTCLoss", [inputs]):
        x = convert_to_tensor(inputs, name="logits")
        if not time_major:
            x = array_ops.transpose(x, [1, 0, 2])
        orig = x.dtype
        if orig is dtypes.float16:
            x = math_ops.cast(x, dtypes.float32)
        seq = _int32(sequence_length)
        loss, _ = CTCLoss(x, labels.indices, labels.values, seq,
                          preprocess_collapse_repeated=bool(preprocess_collapse_repeated),
                          ctc_merge_repeated=bool(ctc_merge_repeated),
                          ignore_longer_outputs_than_inputs=bool(ignore_longer_outputs_than_inputs))
        return math_ops.cast(loss, orig) if orig is not x.dtype else loss


def _num_classes(logits):
    n = logits.shape[2] if logits.shape.ndims == 3 else None
    return n if n is not None else array_ops.shape(logits)[2]


def ctc_loss_v2(labels, logits, label_length, logit_length, logits_time_major=True, unique=None, blank_index=None,
                name=None):
    """The CTC loss [batch] of `logits` against `labels`: dense [batch, max_label_length] with
    `label_length`, or a SparseTensor (then `blank_index` is required); the blank is class
    `blank_index` (0 by default for dense labels; negative counts from the end)
    (tf.compat.v1.nn.ctc_loss_v2, tf.nn.ctc_loss in TF 2). `unique` only speeds up TF's TPU path and
    is accepted and unused. Dense labels go through the same kernel as sparse ones (TF composes a
    dense forward-backward from smaller ops); values and gradients agree, but a label sequence longer
    than its logit_length is an InvalidArgumentError here, where TF's dense path returns a large
    finite loss (about 700)."""
    del unique
    labels = _as_sparse(labels)
    with name_scope(name, "ctc_loss_dense", [logits, labels, label_length, logit_length]):
        logits = convert_to_tensor(logits, name="logits")
        if not isinstance(labels, SparseTensor):
            if blank_index is None:
                blank_index = 0
            labels = convert_to_tensor(labels, name="labels")
            if label_length is None:
                raise ValueError("ctc_loss_v2: label_length is required with dense labels")
            maxlen = array_ops.shape(labels)[1]
            mask = array_ops.sequence_mask(label_length, maxlen)
            idx = math_ops.where(mask)
            labels = SparseTensor(idx, math_ops.cast(gather_nd(labels, idx), dtypes.int32),
                                  math_ops.cast(array_ops.shape(labels), dtypes.int64))
        elif blank_index is None:
            raise ValueError("Argument `blank_index` must be provided when labels is a SparseTensor.")
        n = _num_classes(logits)
        if not isinstance(n, int):
            raise ValueError("ctc_loss_v2: logits need a known number of classes (their last dimension)")
        if blank_index < 0:
            blank_index += n
        if not 0 <= blank_index < n:
            raise ValueError(f"ctc_loss_v2: blank_index {blank_index} is outside [0, {n})")
        vals = math_ops.cast(labels.values, dtypes.int32)
        if blank_index != n - 1:
            logits = array_ops.concat([logits[:, :, :blank_index], logits[:, :, blank_index + 1:],
                                       logits[:, :, blank_index:blank_index + 1]], axis=2)
            vals = math_ops.where(vals < blank_index, vals, vals - 1)
        return ctc_loss(SparseTensor(labels.indices, vals, labels.dense_shape), logits, logit_length,
                        time_major=logits_time_major)


def _decoder_inputs(inputs, seq):
    if inputs.dtype not in (dtypes.float32, dtypes.float64):
        raise InferenceError(f"inputs must be float32 or float64, got {inputs.dtype.name}")
    if seq.dtype is not dtypes.int32:
        raise InferenceError(f"sequence_length must be int32, got {seq.dtype.name}")
    xs = inputs.shape if inputs.shape.ndims is not None else TensorShape([None, None, None])
    if xs.ndims != 3:
        raise InferenceError(f"inputs must be 3-D [max_time, batch, num_classes], got shape {inputs.shape}")
    batch = TensorShape([xs[1]])
    if seq.shape.ndims is not None:
        if not batch.is_compatible_with(seq.shape):
            raise InferenceError(f"sequence_length {seq.shape} does not match the batch of inputs {xs}")
        batch = batch.merge_with(seq.shape)
    return batch[0]


_SPARSE_OUT = [(dtypes.int64, TensorShape([None, 2])), (dtypes.int64, TensorShape([None])),
               (dtypes.int64, TensorShape([2]))]


def _infer_greedy(inputs, attrs):
    b = _decoder_inputs(*inputs)
    return [*_SPARSE_OUT, (inputs[0].dtype, TensorShape([b, 1]))]


def _infer_beam(inputs, attrs):
    b = _decoder_inputs(*inputs)
    k = int(attrs.get("top_paths", 1))
    if k < 1 or k > int(attrs.get("beam_width", 100)):
        raise InferenceError(f"top_paths must lie in [1, beam_width], got {k}")
    return [_SPARSE_OUT[0]] * k + [_SPARSE_OUT[1]] * k + [_SPARSE_OUT[2]] * k + [(inputs[0].dtype, TensorShape([b, k]))]


CTCGreedyDecoder = define_op("CTCGreedyDecoder", _infer_greedy)
CTCBeamSearchDecoder = define_op("CTCBeamSearchDecoder", _infer_beam)
CTCGreedyDecoder.gradient(lambda op, *grads: [None, None])
CTCBeamSearchDecoder.gradient(lambda op, *grads: [None, None])


def _int32(x):
    x = convert_to_tensor(x)
    return x if x.dtype is dtypes.int32 else math_ops.cast(x, dtypes.int32)


def ctc_greedy_decoder(inputs, sequence_length, merge_repeated=True, blank_index=None):
    """Best-path decoding of time-major logits: the most likely class per frame, repeats merged
    (unless `merge_repeated=False`) and blanks (`blank_index`, the last class by default) dropped
    (tf.nn.ctc_greedy_decoder). Returns ([SparseTensor of int64 [batch, max_length]], minus the
    summed largest logit per sequence [batch, 1])."""
    with name_scope(None, "CTCGreedyDecoder", [inputs]):
        ix, val, shape, logp = CTCGreedyDecoder(convert_to_tensor(inputs), _int32(sequence_length),
                                                merge_repeated=bool(merge_repeated),
                                                blank_index=-1 if blank_index is None else int(blank_index))
        return [SparseTensor(ix, val, shape)], logp


def ctc_beam_search_decoder(inputs, sequence_length, beam_width=100, top_paths=1, merge_repeated=True):
    """TF's prefix beam search over time-major logits (blank the last class): the `top_paths` best
    label sequences as SparseTensors and their log probabilities [batch, top_paths]
    (tf.compat.v1.nn.ctc_beam_search_decoder)."""
    top_paths = int(top_paths)
    with name_scope(None, "CTCBeamSearchDecoder", [inputs]):
        outs = CTCBeamSearchDecoder(convert_to_tensor(inputs), _int32(sequence_length), beam_width=int(beam_width),
                                    top_paths=top_paths, merge_repeated=bool(merge_repeated))
        outs = list(outs)
        k = top_paths
        return [SparseTensor(i, v, s) for i, v, s in zip(outs[:k], outs[k:2 * k], outs[2 * k:3 * k])], outs[-1]


def ctc_beam_search_decoder_v2(inputs, sequence_length, beam_width=100, top_paths=1):
    """ctc_beam_search_decoder without merging repeated labels (tf.nn.ctc_beam_search_decoder in TF 2,
    tf.compat.v1.nn.ctc_beam_search_decoder_v2)."""
    return ctc_beam_search_decoder(inputs, sequence_length, beam_width=beam_width, top_paths=top_paths,
                                   merge_repeated=False)


def _dim(x, i):
    d = x.shape[i] if x.shape.ndims is not None else None
    return d if d is not None else array_ops.shape(x)[i]


def collapse_repeated(labels, seq_length, name=None):
    """Merges runs of equal labels in each row of the dense `labels` [batch, max_length] (within
    its `seq_length`), left-aligned and zero-padded to the longest result; returns (labels,
    new seq_length) (tf.nn.collapse_repeated, the same composition of ops as TF's)."""
    from actorflow.graph.ops.scatter_nd_ops import scatter_nd
    with name_scope(name, "collapse_repeated_labels", [labels, seq_length]):
        labels = convert_to_tensor(labels, name="labels")
        seq_length = convert_to_tensor(seq_length, name="seq_length")
        label_mask = array_ops.concat([array_ops.ones_like(labels[:, :1], dtypes.bool_),
                                       math_ops.not_equal(labels[:, 1:], labels[:, :-1])], axis=1)
        seq_mask = array_ops.sequence_mask(seq_length, maxlen=_dim(labels, 1))
        label_mask = math_ops.logical_and(label_mask, seq_mask)
        new_seq_len = math_ops.reduce_sum(math_ops.cast(label_mask, dtypes.int32), axis=1)
        new_maxlen = math_ops.reduce_max(new_seq_len)
        idx_mask = array_ops.sequence_mask(new_seq_len, maxlen=new_maxlen)
        flat_labels = array_ops.reshape(labels, [-1])
        flat_label_mask = array_ops.reshape(label_mask, [-1])
        flat_idx_mask = array_ops.reshape(idx_mask, [-1])
        idx = array_ops.range(_dim(flat_idx_mask, 0))
        flat = scatter_nd(array_ops.expand_dims(array_ops.boolean_mask(idx, flat_idx_mask), axis=1),
                          array_ops.boolean_mask(flat_labels, flat_label_mask), array_ops.shape(flat_idx_mask))
        return (array_ops.reshape(flat, array_ops.stack([_dim(labels, 0), new_maxlen])),
                math_ops.cast(new_seq_len, seq_length.dtype))


def ctc_unique_labels(labels, name=None):
    """Per row of `labels` [batch, max_length]: its unique labels in order of first appearance,
    zero-padded (int64), and each entry's index into them (int32) (tf.nn.ctc_unique_labels)."""
    from actorflow.graph.ops.functional_ops import map_fn
    from actorflow.graph.ops.sort_ops import unique
    with name_scope(name, "ctc_unique_labels", [labels]):
        labels = convert_to_tensor(labels, name="labels")

        def _unique(x):
            y, idx = unique(x)
            y = array_ops.pad(y, [[0, _dim(idx, 0) - _dim(y, 0)]])
            return [math_ops.cast(y, dtypes.int64), idx]

        return map_fn(_unique, labels, dtype=[dtypes.int64, dtypes.int32])
