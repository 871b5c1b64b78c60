"""af.contrib.legacy_seq2seq: the list-of-tensors sequence-to-sequence models of TF 1.x
(tf.contrib.legacy_seq2seq, TF 1.15): decoders unrolled over Python lists of [batch, ...] tensors,
one per time step, and their per-step losses.

Variable names follow TF's: ``basic_rnn_seq2seq/rnn/<cell>/...`` for the encoder (a deep copy of
the cell) and ``basic_rnn_seq2seq/rnn_decoder/<cell>/...`` for the decoder, ``embedding`` under
``embedding_rnn_decoder``, and so on.
"""
from __future__ import annotations

import copy

from actorflow.contrib.rnn import EmbeddingWrapper, OutputProjectionWrapper
from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, math_ops, nn_ops
from actorflow.graph.ops.constant import stop_gradient
from actorflow.graph.variable_scope import get_variable, get_variable_scope, variable_scope
from actorflow.rnn import static_rnn

__all__ = ["rnn_decoder", "basic_rnn_seq2seq", "tied_rnn_seq2seq", "embedding_rnn_decoder", "embedding_rnn_seq2seq",
           "sequence_loss_by_example", "sequence_loss", "model_with_buckets"]


def _extract_argmax_and_embed(embedding, output_projection=None, update_embedding=True):
    """A loop function feeding back the embedding of the previous output's argmax."""
    def loop_function(prev, _):
        if output_projection is not None:
            prev = nn_ops.xw_plus_b(prev, output_projection[0], output_projection[1])
        emb_prev = nn_ops.embedding_lookup(embedding, math_ops.argmax(prev, 1))
        return emb_prev if update_embedding else stop_gradient(emb_prev)
    return loop_function


def rnn_decoder(decoder_inputs, initial_state, cell, loop_function=None, scope=None):
    """Runs `cell` from `initial_state` over the list `decoder_inputs`
    (tf.contrib.legacy_seq2seq.rnn_decoder). With `loop_function(prev, i)`, every input after the
    first is computed from the previous output instead. Returns (outputs, final state)."""
    with variable_scope(scope or "rnn_decoder"):
        state = initial_state
        outputs = []
        prev = None
        for i, inp in enumerate(decoder_inputs):
            if loop_function is not None and prev is not None:
                with variable_scope("loop_function", reuse=True):
                    inp = loop_function(prev, i)
            if i > 0:
                get_variable_scope().reuse_variables()
            output, state = cell(inp, state)
            outputs.append(output)
            if loop_function is not None:
                prev = output
    return outputs, state


def basic_rnn_seq2seq(encoder_inputs, decoder_inputs, cell, dtype=dtypes.float32, scope=None):
    """Encodes with a copy of `cell`, then decodes from its final state with `cell`
    (tf.contrib.legacy_seq2seq.basic_rnn_seq2seq). Returns (decoder outputs, final state)."""
    with variable_scope(scope or "basic_rnn_seq2seq"):
        enc_cell = copy.deepcopy(cell)
        _, enc_state = static_rnn(enc_cell, encoder_inputs, dtype=dtype)
        return rnn_decoder(decoder_inputs, enc_state, cell)


def tied_rnn_seq2seq(encoder_inputs, decoder_inputs, cell, loop_function=None, dtype=dtypes.float32, scope=None):
    """basic_rnn_seq2seq with one set of variables for encoder and decoder
    (tf.contrib.legacy_seq2seq.tied_rnn_seq2seq)."""
    with variable_scope("combined_tied_rnn_seq2seq"):
        scope = scope or "tied_rnn_seq2seq"
        _, enc_state = static_rnn(cell, encoder_inputs, dtype=dtype, scope=scope)
        get_variable_scope().reuse_variables()
        return rnn_decoder(decoder_inputs, enc_state, cell, loop_function=loop_function, scope=scope)


def embedding_rnn_decoder(decoder_inputs, initial_state, cell, num_symbols, embedding_size, output_projection=None,
                          feed_previous=False, update_embedding_for_previous=True, scope=None):
    """rnn_decoder over embedded integer inputs, the variable ``embedding`` [num_symbols,
    embedding_size] (tf.contrib.legacy_seq2seq.embedding_rnn_decoder). With `feed_previous`, each
    step after the first is fed the embedding of the previous output's argmax (after
    `output_projection` = (W, b) when given)."""
    with variable_scope(scope or "embedding_rnn_decoder") as sc:
        if output_projection is not None:
            proj_w = convert_to_tensor(output_projection[0], dtype=sc.dtype)
            proj_b = convert_to_tensor(output_projection[1], dtype=sc.dtype)
            if not proj_w.shape.is_compatible_with([None, num_symbols]):
                raise ValueError(f"output_projection[0] must have shape [?, {num_symbols}], got {proj_w.shape}")
            if not proj_b.shape.is_compatible_with([num_symbols]):
                raise ValueError(f"output_projection[1] must have shape [{num_symbols}], got {proj_b.shape}")
            output_projection = (proj_w, proj_b)
        embedding = get_variable("embedding", [num_symbols, embedding_size])
        loop_function = (_extract_argmax_and_embed(embedding, output_projection, update_embedding_for_previous)
                         if feed_previous else None)
        emb_inp = [nn_ops.embedding_lookup(embedding, i) for i in decoder_inputs]
        return rnn_decoder(emb_inp, initial_state, cell, loop_function=loop_function)


def embedding_rnn_seq2seq(encoder_inputs, decoder_inputs, cell, num_encoder_symbols, num_decoder_symbols,
                          embedding_size, output_projection=None, feed_previous=False, dtype=None, scope=None):
    """Embedding encoder (an EmbeddingWrapper around a copy of `cell`) and embedding_rnn_decoder,
    its outputs projected to `num_decoder_symbols` unless `output_projection` is given
    (tf.contrib.legacy_seq2seq.embedding_rnn_seq2seq). `feed_previous` must be a Python bool here
    (TF also takes a bool tensor)."""
    if isinstance(feed_previous, Tensor):
        raise NotImplementedError("embedding_rnn_seq2seq: a tensor feed_previous is not supported by actorflow; "
                                  "build one model per value")
    with variable_scope(scope or "embedding_rnn_seq2seq") as sc:
        if dtype is not None:
            sc.set_dtype(dtype)
        else:
            dtype = sc.dtype
        encoder_cell = EmbeddingWrapper(copy.deepcopy(cell), embedding_classes=num_encoder_symbols,
                                        embedding_size=embedding_size)
        _, encoder_state = static_rnn(encoder_cell, encoder_inputs, dtype=dtype)
        if output_projection is None:
            cell = OutputProjectionWrapper(cell, num_decoder_symbols)
        return embedding_rnn_decoder(decoder_inputs, encoder_state, cell, num_decoder_symbols, embedding_size,
                                     output_projection=output_projection, feed_previous=feed_previous)


def sequence_loss_by_example(logits, targets, weights, average_across_timesteps=True, softmax_loss_function=None,
                             name=None):
    """Per-example weighted cross-entropy summed over the lists of per-step `logits`, `targets`
    and `weights`, divided by the summed weights (+1e-12) with `average_across_timesteps`
    (tf.contrib.legacy_seq2seq.sequence_loss_by_example). Returns a [batch] tensor."""
    if len(targets) != len(logits) or len(weights) != len(logits):
        raise ValueError(f"Lengths of logits, weights, and targets must be the same {len(logits)}, {len(weights)}, "
                         f"{len(targets)}.")
    with name_scope(name, "sequence_loss_by_example", list(logits) + list(targets) + list(weights)):
        log_perps = []
        for logit, target, weight in zip(logits, targets, weights):
            if softmax_loss_function is None:
                crossent = nn_ops.sparse_softmax_cross_entropy_with_logits(labels=array_ops.reshape(target, [-1]),
                                                                           logits=logit)
            else:
                crossent = softmax_loss_function(labels=target, logits=logit)
            log_perps.append(crossent * weight)
        total = math_ops.add_n(log_perps)
        if average_across_timesteps:
            total = total / (math_ops.add_n(list(weights)) + 1e-12)
    return total


def sequence_loss(logits, targets, weights, average_across_timesteps=True, average_across_batch=True,
                  softmax_loss_function=None, name=None):
    """The sum over the batch of sequence_loss_by_example, divided by the batch size with
    `average_across_batch` (tf.contrib.legacy_seq2seq.sequence_loss). Returns a scalar."""
    with name_scope(name, "sequence_loss", list(logits) + list(targets) + list(weights)):
        cost = math_ops.reduce_sum(sequence_loss_by_example(logits, targets, weights,
                                                            average_across_timesteps=average_across_timesteps,
                                                            softmax_loss_function=softmax_loss_function))
        if average_across_batch:
            batch_size = array_ops.shape(convert_to_tensor(targets[0]))[0]
            return cost / math_ops.cast(batch_size, cost.dtype)
        return cost


def model_with_buckets(encoder_inputs, decoder_inputs, targets, weights, buckets, seq2seq, softmax_loss_function=None,
                       per_example_loss=False, name=None):
    """One model per bucket (encoder length, decoder length), sharing variables, each over the
    first inputs of the lists (tf.contrib.legacy_seq2seq.model_with_buckets). `seq2seq(enc, dec)`
    returns (outputs, state). Returns (outputs per bucket, loss per bucket)."""
    if len(encoder_inputs) < buckets[-1][0]:
        raise ValueError(f"Length of the encoder inputs ({len(encoder_inputs)}) must be at least that of last bucket "
                         f"({buckets[-1][0]}).")
    if len(targets) < buckets[-1][1]:
        raise ValueError(f"Length of targets ({len(targets)}) must be at least that of last bucket ({buckets[-1][1]}).")
    if len(weights) < buckets[-1][1]:
        raise ValueError(f"Length of weights ({len(weights)}) must be at least that of last bucket ({buckets[-1][1]}).")
    losses, outputs = [], []
    with name_scope(name, "model_with_buckets", encoder_inputs + decoder_inputs + targets + weights):
        for j, (enc_len, dec_len) in enumerate(buckets):
            with variable_scope(get_variable_scope(), reuse=True if j > 0 else None):
                bucket_outputs, _ = seq2seq(encoder_inputs[:enc_len], decoder_inputs[:dec_len])
                outputs.append(bucket_outputs)
                loss_fn = sequence_loss_by_example if per_example_loss else sequence_loss
                losses.append(loss_fn(outputs[-1], targets[:dec_len], weights[:dec_len],
                                      softmax_loss_function=softmax_loss_function))
    return outputs, losses
