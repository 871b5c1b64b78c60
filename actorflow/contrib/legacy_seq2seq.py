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
from actorflow.graph import dtypes, nest
from actorflow.graph.graph import Tensor, convert_to_tensor, name_scope
from actorflow.graph.initializers import zeros_initializer
from actorflow.graph.ops import array_ops, math_ops, nn_ops
from actorflow.graph.ops.constant import stop_gradient
from actorflow.graph.variable_scope import get_variable, get_variable_scope, variable_scope
from actorflow.rnn import static_rnn

__all__ = ["rnn_decoder", "basic_rnn_seq2seq", "tied_rnn_seq2seq", "embedding_rnn_decoder", "embedding_rnn_seq2seq",
           "attention_decoder", "embedding_attention_decoder", "embedding_attention_seq2seq",
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


class _Linear:
    """``concat(args, 1) @ kernel + bias`` with `kernel` and `bias` (zeros) got in the current
    variable scope (TF 1.x core_rnn_cell._Linear)."""

    def __init__(self, args, output_size, build_bias=True):
        args = list(args) if isinstance(args, (list, tuple)) else [args]
        total = 0
        for a in args:
            if a.shape.ndims != 2:
                raise ValueError(f"linear is expecting 2D arguments, got {a.name} of shape {a.shape}")
            if a.shape[1] is None:
                raise ValueError(f"linear expects shape[1] to be provided for shape {a.shape}, but saw None ({a.name})")
            total += a.shape[1]
        dtype = args[0].dtype
        self._kernel = get_variable("kernel", [total, output_size], dtype=dtype)
        self._bias = (get_variable("bias", [output_size], dtype=dtype, initializer=zeros_initializer())
                      if build_bias else None)

    def __call__(self, args):
        args = list(args) if isinstance(args, (list, tuple)) else [args]
        x = args[0] if len(args) == 1 else array_ops.concat(args, 1)
        out = math_ops.matmul(x, self._kernel)
        return nn_ops.bias_add(out, self._bias) if self._bias is not None else out


def attention_decoder(decoder_inputs, initial_state, attention_states, cell, output_size=None, num_heads=1,
                      loop_function=None, dtype=None, scope=None, initial_state_attention=False):
    """An RNN decoder with `num_heads` additive attention reads over `attention_states`
    [batch, length, size] (Bahdanau et al., Vinyals et al. 2015) (tf.contrib.legacy_seq2seq.attention_decoder).

    Each step feeds the cell a projection of (input, previous reads), reads the attention with the
    new state (``Attention_<h>/kernel``: the query projection; ``AttnW_<h>``, ``AttnV_<h>``: the
    keys and the score vector), and outputs a projection of (cell output, reads) of `output_size`
    (``AttnOutputProjection``). Returns (outputs, final state).
    """
    if not decoder_inputs:
        raise ValueError("Must provide at least 1 input to attention decoder.")
    if num_heads < 1:
        raise ValueError("With less than 1 heads, use a non-attention decoder.")
    attention_states = convert_to_tensor(attention_states)
    if attention_states.shape.ndims != 3 or attention_states.shape[2] is None:
        raise ValueError(f"Shape[2] of attention_states must be known: {attention_states.shape}")
    if output_size is None:
        output_size = cell.output_size
    with variable_scope(scope or "attention_decoder", dtype=dtype) as sc:
        dtype = sc.dtype
        batch_size = array_ops.shape(decoder_inputs[0])[0]
        attn_length = attention_states.shape[1]
        if attn_length is None:
            attn_length = array_ops.shape(attention_states)[1]
        attn_size = attention_states.shape[2]
        # The keys W1 h_t of every state, as a 1x1 convolution over [batch, length, 1, size].
        hidden = array_ops.reshape(attention_states, array_ops.stack([-1, attn_length, 1, attn_size])
                                   if not isinstance(attn_length, int) else [-1, attn_length, 1, attn_size])
        hidden_features, v = [], []
        for a in range(num_heads):
            k = get_variable(f"AttnW_{a}", [1, 1, attn_size, attn_size], dtype=dtype)
            hidden_features.append(nn_ops.conv2d(hidden, k, [1, 1, 1, 1], "SAME"))
            v.append(get_variable(f"AttnV_{a}", [attn_size], dtype=dtype))

        def attention(query):
            query_list = nest.flatten(query)
            query = query_list[0] if len(query_list) == 1 else array_ops.concat(query_list, 1)
            reads = []
            for a in range(num_heads):
                with variable_scope(f"Attention_{a}"):
                    y = _Linear(query, attn_size, True)(query)
                    y = array_ops.reshape(y, [-1, 1, 1, attn_size])
                    s = math_ops.reduce_sum(v[a] * math_ops.tanh(hidden_features[a] + y), [2, 3])
                    weights = nn_ops.softmax(s)
                    read = math_ops.reduce_sum(array_ops.reshape(weights, array_ops.stack([-1, attn_length, 1, 1])
                                                                 if not isinstance(attn_length, int)
                                                                 else [-1, attn_length, 1, 1]) * hidden, [1, 2])
                    reads.append(array_ops.reshape(read, [-1, attn_size]))
            return reads

        outputs = []
        prev = None
        attns = [array_ops.zeros(array_ops.stack([batch_size, attn_size]), dtype=dtype) for _ in range(num_heads)]
        for a in attns:
            a.set_shape([None, attn_size])
        state = initial_state
        if initial_state_attention:
            attns = attention(initial_state)
        for i, inp in enumerate(decoder_inputs):
            if i > 0:
                get_variable_scope().reuse_variables()
            if loop_function is not None and prev is not None:
                with variable_scope("loop_function", reuse=True):
                    inp = loop_function(prev, i)
            inp = convert_to_tensor(inp)
            if inp.shape.ndims != 2 or inp.shape[1] is None:
                raise ValueError(f"Could not infer input size from input: {inp.name} {inp.shape}")
            x = _Linear([inp] + attns, inp.shape[1], True)([inp] + attns)
            cell_output, state = cell(x, state)
            if i == 0 and initial_state_attention:
                with variable_scope(get_variable_scope(), reuse=True):
                    attns = attention(state)
            else:
                attns = attention(state)
            with variable_scope("AttnOutputProjection"):
                output = _Linear([cell_output] + attns, output_size, True)([cell_output] + attns)
            if loop_function is not None:
                prev = output
            outputs.append(output)
    return outputs, state


def embedding_attention_decoder(decoder_inputs, initial_state, attention_states, cell, num_symbols, embedding_size,
                                num_heads=1, output_size=None, output_projection=None, feed_previous=False,
                                update_embedding_for_previous=True, dtype=None, scope=None,
                                initial_state_attention=False):
    """attention_decoder over embedded integer inputs (``embedding`` [num_symbols, embedding_size]),
    optionally fed its own argmax (tf.contrib.legacy_seq2seq.embedding_attention_decoder)."""
    if output_size is None:
        output_size = cell.output_size
    if output_projection is not None:
        proj_b = convert_to_tensor(output_projection[1], dtype=dtype)
        if not proj_b.shape.is_compatible_with([num_symbols]):
            raise ValueError(f"output_projection[1] must have shape [{num_symbols}], got {proj_b.shape}")
    with variable_scope(scope or "embedding_attention_decoder", dtype=dtype):
        embedding = get_variable("embedding", [num_symbols, embedding_size])
        loop_function = (_extract_argmax_and_embed(embedding, output_projection, update_embedding_for_previous)
                         if feed_previous else None)
        emb_inp = [nn_ops.embedding_lookup(embedding, i) for i in decoder_inputs]
        return attention_decoder(emb_inp, initial_state, attention_states, cell, output_size=output_size,
                                 num_heads=num_heads, loop_function=loop_function,
                                 initial_state_attention=initial_state_attention)


def embedding_attention_seq2seq(encoder_inputs, decoder_inputs, cell, num_encoder_symbols, num_decoder_symbols,
                                embedding_size, num_heads=1, output_projection=None, feed_previous=False, dtype=None,
                                scope=None, initial_state_attention=False):
    """Embedding encoder (a copy of `cell`) whose outputs the embedding attention decoder attends
    to (tf.contrib.legacy_seq2seq.embedding_attention_seq2seq; TF's translate model). Outputs are
    projected to `num_decoder_symbols` unless `output_projection` is given. `feed_previous` must be
    a Python bool here."""
    if isinstance(feed_previous, Tensor):
        raise NotImplementedError("embedding_attention_seq2seq: a tensor feed_previous is not supported by "
                                  "actorflow; build one model per value")
    with variable_scope(scope or "embedding_attention_seq2seq", dtype=dtype) as sc:
        dtype = sc.dtype
        encoder_cell = EmbeddingWrapper(copy.deepcopy(cell), embedding_classes=num_encoder_symbols,
                                        embedding_size=embedding_size)
        encoder_outputs, encoder_state = static_rnn(encoder_cell, encoder_inputs, dtype=dtype)
        top_states = [array_ops.reshape(e, [-1, 1, cell.output_size]) for e in encoder_outputs]
        attention_states = array_ops.concat(top_states, 1)
        output_size = None
        if output_projection is None:
            cell = OutputProjectionWrapper(cell, num_decoder_symbols)
            output_size = num_decoder_symbols
        return embedding_attention_decoder(decoder_inputs, encoder_state, attention_states, cell, num_decoder_symbols,
                                           embedding_size, num_heads=num_heads, output_size=output_size,
                                           output_projection=output_projection, feed_previous=feed_previous,
                                           initial_state_attention=initial_state_attention)


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
