"""af.contrib.seq2seq: tf.contrib.seq2seq (TF 1.15): `sequence_loss`, the weighted cross-entropy
of a batch of logit sequences, and dynamic decoding: `dynamic_decode` running a `BasicDecoder`
(a cell, a helper, an optional output layer) in a while loop, with `TrainingHelper` (teacher
forcing) and `GreedyEmbeddingHelper` (feeding back the argmax's embedding until `end_token`).

`AttentionWrapper` adds Bahdanau (additive) or Luong (multiplicative) attention over a memory to
any cell. `BeamSearchDecoder` decodes by beam search, `gather_tree` tracing the beams back.
"""
from __future__ import annotations

import collections
import math

from actorflow.graph import dtypes, nest
from actorflow.graph.control_flow import cond, while_loop
from actorflow.graph.graph import Tensor, convert_to_tensor, name_scope
from actorflow.graph.initializers import constant_initializer, ones_initializer, zeros_initializer
from actorflow.graph.ops import array_ops, math_ops, nn_ops
from actorflow.graph.ops.beam_search_ops import gather_tree
from actorflow.graph.ops.sort_ops import top_k
from actorflow.graph.ops.tensor_array_ops import TensorArray
from actorflow.graph.tensor_shape import TensorShape
from actorflow.graph.variable_scope import get_variable, variable_scope
from actorflow.layers import Dense
from actorflow.rnn import _transpose_batch_time
from actorflow.rnn_cell import RNNCell

__all__ = ["sequence_loss", "Helper", "TrainingHelper", "GreedyEmbeddingHelper", "Decoder", "BasicDecoder",
           "BasicDecoderOutput", "dynamic_decode", "BahdanauAttention", "LuongAttention", "AttentionWrapper",
           "AttentionWrapperState", "SampleEmbeddingHelper", "tile_batch", "CustomHelper", "InferenceHelper", "hardmax",
           "BeamSearchDecoder", "BeamSearchDecoderState", "BeamSearchDecoderOutput", "FinalBeamSearchDecoderOutput",
           "gather_tree"]


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


# ---------------------------------------------------------------------------------------------
# Dynamic decoding
# ---------------------------------------------------------------------------------------------

def _rows(mask: Tensor, like: Tensor) -> Tensor:
    """A [batch] bool mask reshaped to broadcast over the rows of `like`."""
    r = like.shape.ndims
    return mask if r in (None, 1) else array_ops.reshape(mask, [-1] + [1] * (r - 1))


class Helper:
    """How a decoder samples and what it feeds next (tf.contrib.seq2seq.Helper)."""

    @property
    def batch_size(self):
        raise NotImplementedError

    @property
    def sample_ids_shape(self):
        raise NotImplementedError

    @property
    def sample_ids_dtype(self):
        raise NotImplementedError

    def initialize(self, name=None):
        """(finished, first inputs)."""
        raise NotImplementedError

    def sample(self, time, outputs, state, name=None):
        raise NotImplementedError

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        """(finished, next inputs, next state)."""
        raise NotImplementedError


class TrainingHelper(Helper):
    """Teacher forcing: step t is fed `inputs[:, t]`; a row is finished once t reaches its
    `sequence_length`; samples are the argmax of the outputs (tf.contrib.seq2seq.TrainingHelper).
    When every row is finished the next inputs are zeros."""

    def __init__(self, inputs, sequence_length, time_major=False, name=None):
        with name_scope(name, "TrainingHelper", [inputs, sequence_length]):
            inputs = convert_to_tensor(inputs, name="inputs")
            self._inputs = inputs if time_major else _transpose_batch_time(inputs)
            self._sequence_length = convert_to_tensor(sequence_length, name="sequence_length")
            if self._sequence_length.shape.ndims != 1:
                raise ValueError(f"Expected sequence_length to be a vector, but received shape: "
                                 f"{self._sequence_length.shape}")
            self._zero_inputs = array_ops.zeros_like(array_ops.gather(self._inputs, 0))
            self._batch_size = array_ops.size(self._sequence_length)

    @property
    def inputs(self):
        return self._inputs

    @property
    def sequence_length(self):
        return self._sequence_length

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def sample_ids_shape(self):
        return TensorShape([])

    @property
    def sample_ids_dtype(self):
        return dtypes.int32

    def _read(self, t, finished):
        return cond(math_ops.reduce_all(finished), lambda: self._zero_inputs,
                    lambda: array_ops.gather(self._inputs, t))

    def initialize(self, name=None):
        with name_scope(name, "TrainingHelperInitialize"):
            finished = math_ops.greater_equal(math_ops.cast(0, self._sequence_length.dtype), self._sequence_length)
            return finished, self._read(0, finished)

    def sample(self, time, outputs, state=None, name=None):
        with name_scope(name, "TrainingHelperSample"):
            return math_ops.cast(math_ops.argmax(outputs, axis=-1), dtypes.int32)

    def next_inputs(self, time, outputs, state, sample_ids=None, name=None):
        with name_scope(name, "TrainingHelperNextInputs"):
            next_time = time + 1
            finished = math_ops.greater_equal(math_ops.cast(next_time, self._sequence_length.dtype),
                                              self._sequence_length)
            return finished, self._read(next_time, finished), state


def _embedding_and_tokens(embedding, start_tokens, end_token):
    """(ids -> embeddings, start_tokens [batch] int32, end_token scalar int32) of a decoding helper;
    `embedding` is a [vocab, depth] matrix or a function of the ids."""
    if callable(embedding):
        embed = embedding
    else:
        params = convert_to_tensor(embedding, name="embedding")

        def embed(ids):
            return nn_ops.embedding_lookup(params, ids)
    start = convert_to_tensor(start_tokens, dtype=dtypes.int32, name="start_tokens")
    end = convert_to_tensor(end_token, dtype=dtypes.int32, name="end_token")
    if start.shape.ndims != 1:
        raise ValueError("start_tokens must be a vector")
    if end.shape.ndims != 0:
        raise ValueError("end_token must be a scalar")
    return embed, start, end


class GreedyEmbeddingHelper(Helper):
    """Greedy decoding: starts from the embedding of `start_tokens`, then feeds the embedding of
    each step's argmax; a row is finished when it emits `end_token`
    (tf.contrib.seq2seq.GreedyEmbeddingHelper). `embedding` is a [vocab, depth] matrix or a
    function of the ids."""

    def __init__(self, embedding, start_tokens, end_token):
        self._embed, self._start_tokens, self._end_token = _embedding_and_tokens(embedding, start_tokens, end_token)
        self._batch_size = array_ops.size(self._start_tokens)
        self._start_inputs = self._embed(self._start_tokens)

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def sample_ids_shape(self):
        return TensorShape([])

    @property
    def sample_ids_dtype(self):
        return dtypes.int32

    def initialize(self, name=None):
        return array_ops.zeros_like(self._start_tokens, dtype=dtypes.bool_), self._start_inputs

    def sample(self, time, outputs, state=None, name=None):
        if not isinstance(outputs, Tensor) or outputs.shape.ndims != 2:
            raise ValueError(f"Expected outputs to be a single Tensor of rank 2, got {outputs!r}")
        return math_ops.cast(math_ops.argmax(outputs, axis=-1), dtypes.int32)

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        finished = math_ops.equal(sample_ids, self._end_token)
        next_inputs = cond(math_ops.reduce_all(finished), lambda: self._start_inputs,
                           lambda: self._embed(sample_ids))
        return finished, next_inputs, state


class SampleEmbeddingHelper(GreedyEmbeddingHelper):
    """GreedyEmbeddingHelper that samples each id from softmax(outputs / softmax_temperature)
    instead of taking the argmax (tf.contrib.seq2seq.SampleEmbeddingHelper)."""

    def __init__(self, embedding, start_tokens, end_token, softmax_temperature=None, seed=None):
        super().__init__(embedding, start_tokens, end_token)
        self._temperature = softmax_temperature
        self._seed = seed

    def sample(self, time, outputs, state=None, name=None):
        from actorflow.graph.ops.random_more_ops import multinomial
        if not isinstance(outputs, Tensor) or outputs.shape.ndims != 2:
            raise ValueError(f"Expected outputs to be a single Tensor of rank 2, got {outputs!r}")
        logits = outputs if self._temperature is None else outputs / self._temperature
        return math_ops.cast(array_ops.reshape(multinomial(logits, 1, seed=self._seed), [-1]), dtypes.int32)


def tile_batch(t, multiplier, name=None):
    """Each batch entry of every tensor in `t` repeated `multiplier` times in place:
    [a, b] -> [a, a, b, b] for 2 (tf.contrib.seq2seq.tile_batch; for beam search's memories)."""
    def tile(x):
        x = convert_to_tensor(x)
        if x.shape.ndims is None or x.shape.ndims < 1:
            raise ValueError(f"t must have statically known rank, got {x.shape} ('{x.name}')")
        reps = [1] * (x.shape.ndims + 1)
        reps[1] = multiplier
        shape = array_ops.shape(x)
        tiled = array_ops.tile(array_ops.expand_dims(x, 1), reps)
        tiled = array_ops.reshape(tiled, array_ops.concat([array_ops.reshape(shape[0] * multiplier, [1]),
                                                           shape[1:]], 0))
        lead = x.shape[0] * multiplier if x.shape[0] is not None else None
        tiled.set_shape(TensorShape([lead]).concatenate(x.shape[1:]))
        return tiled
    with name_scope(name, "tile_batch", nest.flatten(t)):
        return nest.map_structure(tile, t)


class Decoder:
    """The interface dynamic_decode runs (tf.contrib.seq2seq.Decoder): `initialize()` ->
    (finished, inputs, state); `step(time, inputs, state)` -> (outputs, state, inputs, finished)."""

    @property
    def batch_size(self):
        raise NotImplementedError

    @property
    def output_size(self):
        raise NotImplementedError

    @property
    def output_dtype(self):
        raise NotImplementedError

    @property
    def tracks_own_finished(self):
        return False

    def initialize(self, name=None):
        raise NotImplementedError

    def step(self, time, inputs, state, name=None):
        raise NotImplementedError

    def finalize(self, outputs, final_state, sequence_lengths):
        raise NotImplementedError


class BasicDecoderOutput(collections.namedtuple("BasicDecoderOutput", ("rnn_output", "sample_id"))):
    """A BasicDecoder step's output: the (projected) cell output and the sampled id."""

    __slots__ = ()


class BasicDecoder(Decoder):
    """A cell, a helper and an optional `output_layer` (an af.layers layer applied to the cell
    output) (tf.contrib.seq2seq.BasicDecoder)."""

    def __init__(self, cell, helper, initial_state, output_layer=None):
        if not callable(cell):
            raise TypeError(f"cell must be an RNNCell, received: {type(cell).__name__}")
        if not isinstance(helper, Helper):
            raise TypeError(f"helper must be a Helper, received: {type(helper).__name__}")
        if output_layer is not None and not callable(output_layer):
            raise TypeError(f"output_layer must be a Layer, received: {type(output_layer).__name__}")
        self._cell, self._helper, self._initial_state, self._output_layer = cell, helper, initial_state, output_layer

    @property
    def batch_size(self):
        return self._helper.batch_size

    def _rnn_output_size(self):
        size = self._cell.output_size
        if self._output_layer is None:
            return size
        units = getattr(self._output_layer, "units", None)
        if units is None:
            raise ValueError("BasicDecoder: output_layer must have `units` (a Dense layer)")
        return int(units)

    @property
    def output_size(self):
        return BasicDecoderOutput(rnn_output=self._rnn_output_size(), sample_id=self._helper.sample_ids_shape)

    @property
    def output_dtype(self):
        dtype = nest.flatten(self._initial_state)[0].dtype
        return BasicDecoderOutput(nest.map_structure(lambda _: dtype, self._rnn_output_size()),
                                  self._helper.sample_ids_dtype)

    def initialize(self, name=None):
        finished, inputs = self._helper.initialize()
        return finished, inputs, self._initial_state

    def step(self, time, inputs, state, name=None):
        with name_scope(name, "BasicDecoderStep"):
            cell_outputs, cell_state = self._cell(inputs, state)
            if self._output_layer is not None:
                cell_outputs = self._output_layer(cell_outputs)
            sample_ids = self._helper.sample(time=time, outputs=cell_outputs, state=cell_state)
            finished, next_inputs, next_state = self._helper.next_inputs(time=time, outputs=cell_outputs,
                                                                         state=cell_state, sample_ids=sample_ids)
        return BasicDecoderOutput(cell_outputs, sample_ids), next_state, next_inputs, finished


def _zeros_like_size(size, dtype, batch_size):
    shape = TensorShape(size if not isinstance(size, int) else [size]).as_list()
    full = array_ops.concat([array_ops.reshape(batch_size, [1]),
                             convert_to_tensor(shape, dtype=dtypes.int32)], 0) if shape else \
        array_ops.reshape(batch_size, [1])
    return array_ops.zeros(full, dtype=dtype)


def dynamic_decode(decoder, output_time_major=False, impute_finished=False, maximum_iterations=None,
                   parallel_iterations=32, swap_memory=False, scope=None):
    """Runs `decoder` step by step in a while loop until every row is finished or
    `maximum_iterations` steps (tf.contrib.seq2seq.dynamic_decode).

    Returns (final outputs [batch, time, ...] (time-major with `output_time_major`), final state,
    final sequence lengths). With `impute_finished`, a finished row's outputs are zeros and its
    state is copied through. A row's length counts the steps up to and including the one that
    finished it.
    """
    if not isinstance(decoder, Decoder):
        raise TypeError(f"Expected decoder to be type Decoder, but saw: {type(decoder).__name__}")
    with variable_scope(scope, "decoder"):
        if maximum_iterations is not None:
            maximum_iterations = convert_to_tensor(maximum_iterations, dtype=dtypes.int32, name="maximum_iterations")
            if maximum_iterations.shape.ndims != 0:
                raise ValueError("maximum_iterations must be a scalar")
        initial_finished, initial_inputs, initial_state = decoder.initialize()
        batch_size = decoder.batch_size
        zero_outputs = nest.map_structure(lambda s, d: _zeros_like_size(s, d, batch_size), decoder.output_size,
                                          decoder.output_dtype)
        if maximum_iterations is not None:
            initial_finished = math_ops.logical_or(initial_finished, math_ops.greater_equal(0, maximum_iterations))
        initial_lengths = array_ops.zeros_like(initial_finished, dtype=dtypes.int32)
        static_batch = initial_finished.shape[0] if initial_finished.shape.ndims == 1 else None

        def make_ta(size, dtype):
            shape = TensorShape(size if not isinstance(size, int) else [size])
            return TensorArray(dtype=dtype, size=0, dynamic_size=True,
                               element_shape=TensorShape([static_batch]).concatenate(shape))
        initial_tas = nest.map_structure(make_ta, decoder.output_size, decoder.output_dtype)

        def condition(time, tas, state, inputs, finished, lengths):
            return math_ops.logical_not(math_ops.reduce_all(finished))

        def body(time, tas, state, inputs, finished, lengths):
            outputs, dec_state, next_inputs, dec_finished = decoder.step(time, inputs, state)
            next_finished = dec_finished if decoder.tracks_own_finished else math_ops.logical_or(dec_finished,
                                                                                                  finished)
            next_lengths = math_ops.where_v2(math_ops.logical_not(finished), array_ops.fill(array_ops.shape(lengths),
                                                                                             time + 1), lengths)
            if maximum_iterations is not None:
                next_finished = math_ops.logical_or(next_finished, math_ops.greater_equal(time + 1,
                                                                                          maximum_iterations))
            if impute_finished:
                emit = nest.map_structure(lambda out, zero: math_ops.where_v2(_rows(finished, out), zero, out),
                                          outputs, zero_outputs)

                def keep(new, cur):
                    if isinstance(cur, TensorArray):
                        return new
                    new.set_shape(cur.shape)
                    return new if new.shape.ndims == 0 else math_ops.where_v2(_rows(finished, new), cur, new)
                next_state = nest.map_structure(keep, dec_state, state)
            else:
                emit, next_state = outputs, dec_state
            tas = nest.map_structure(lambda ta, out: ta.write(time, out), tas, emit)
            return time + 1, tas, next_state, next_inputs, next_finished, next_lengths

        res = while_loop(condition, body, loop_vars=(convert_to_tensor(0, dtype=dtypes.int32), initial_tas,
                                                     initial_state, initial_inputs, initial_finished,
                                                     initial_lengths),
                         parallel_iterations=parallel_iterations, swap_memory=swap_memory)
        final_outputs = nest.map_structure(lambda ta: ta.stack(), res[1])
        final_state, final_lengths = res[2], res[5]
        try:
            final_outputs, final_state = decoder.finalize(final_outputs, final_state, final_lengths)
        except NotImplementedError:
            pass
        if not output_time_major:
            final_outputs = nest.map_structure(_transpose_batch_time, final_outputs)
    return final_outputs, final_state, final_lengths


# ---------------------------------------------------------------------------------------------
# Attention
# ---------------------------------------------------------------------------------------------

class _AttentionMechanism:
    """Keys and values over a memory [batch, time, depth]: values are the memory with the steps
    past `memory_sequence_length` zeroed, keys the values through ``memory_layer`` (a Dense of
    `num_units` without bias); scores past the length are masked (`score_mask_value`, -inf by
    default) before the softmax (`probability_fn`)."""

    _scope_name = ""

    def __init__(self, num_units, memory, memory_sequence_length, probability_fn, score_mask_value, dtype, name,
                 query_layer):
        self._num_units = int(num_units)
        self._name = name
        with name_scope(name, "BaseAttentionMechanismInit", [memory]):
            memory = convert_to_tensor(memory, name="memory")
            if memory.shape.ndims != 3 or memory.shape[2] is None:
                raise ValueError(f"{name}: memory must be [batch, time, depth] with a known depth, got {memory.shape}")
            self._length = (None if memory_sequence_length is None
                            else convert_to_tensor(memory_sequence_length, name="memory_sequence_length"))
            if self._length is not None:
                steps = array_ops.shape(memory)[1]
                self._mask = array_ops.sequence_mask(self._length, steps)
                memory = memory * array_ops.expand_dims(math_ops.cast(self._mask, memory.dtype), 2)
            else:
                self._mask = None
            self._values = memory
            self._memory_layer = Dense(num_units, name="memory_layer", use_bias=False, dtype=dtype)
            self._keys = self._memory_layer(memory)
        self._query_layer = query_layer
        self._probability_fn = probability_fn or nn_ops.softmax
        self._score_mask_value = score_mask_value
        self._batch_size = memory.shape[0] if memory.shape[0] is not None else array_ops.shape(memory)[0]
        self._alignments_size = memory.shape[1] if memory.shape[1] is not None else array_ops.shape(memory)[1]

    values = property(lambda self: self._values)
    keys = property(lambda self: self._keys)
    batch_size = property(lambda self: self._batch_size)
    alignments_size = property(lambda self: self._alignments_size)
    state_size = property(lambda self: self._alignments_size)
    memory_layer = property(lambda self: self._memory_layer)
    query_layer = property(lambda self: self._query_layer)

    def _probabilities(self, score, state):
        if self._mask is not None:
            fill = (self._score_mask_value if self._score_mask_value is not None
                    else convert_to_tensor(float("-inf"), dtype=score.dtype))
            score = math_ops.where_v2(self._mask, score, array_ops.ones_like(score) * fill)
        return self._probability_fn(score)

    def initial_alignments(self, batch_size, dtype):
        """Zeros [batch, memory time]."""
        return array_ops.zeros(array_ops.stack([batch_size, self._alignments_size]), dtype=dtype)

    initial_state = initial_alignments

    def __call__(self, query, state):
        """(alignments, next state): the attention weights over the memory for `query`."""
        with variable_scope(None, self._scope_name, [query]):
            score = self._score(query)
        alignments = self._probabilities(score, state)
        return alignments, alignments


class BahdanauAttention(_AttentionMechanism):
    """Additive attention (Bahdanau et al. 2015) (tf.contrib.seq2seq.BahdanauAttention):
    score = sum(v * tanh(keys + query_layer(query))), ``attention_v`` [num_units]; with
    `normalize`, v is weight-normalized (``attention_g``, ``attention_b``)."""

    _scope_name = "bahdanau_attention"

    def __init__(self, num_units, memory, memory_sequence_length=None, normalize=False, probability_fn=None,
                 score_mask_value=None, dtype=None, custom_key_value_fn=None, name="BahdanauAttention"):
        if custom_key_value_fn is not None:
            raise NotImplementedError("BahdanauAttention: custom_key_value_fn is not supported by actorflow")
        super().__init__(num_units, memory, memory_sequence_length,
                         (lambda score: probability_fn(score)) if probability_fn else None, score_mask_value, dtype,
                         name, Dense(num_units, name="query_layer", use_bias=False, dtype=dtype))
        self._normalize = normalize

    def _score(self, query):
        q = array_ops.expand_dims(self._query_layer(query), 1)
        keys = self._keys
        v = get_variable("attention_v", [self._num_units], dtype=keys.dtype)
        if self._normalize:
            g = get_variable("attention_g", [], dtype=keys.dtype,
                             initializer=constant_initializer(math.sqrt(1.0 / self._num_units)))
            b = get_variable("attention_b", [self._num_units], dtype=keys.dtype,
                             initializer=zeros_initializer())
            normed_v = g * v * math_ops.rsqrt(math_ops.reduce_sum(math_ops.square(v)))
            return math_ops.reduce_sum(normed_v * math_ops.tanh(keys + q + b), [2])
        return math_ops.reduce_sum(v * math_ops.tanh(keys + q), [2])


class LuongAttention(_AttentionMechanism):
    """Multiplicative attention (Luong et al. 2015) (tf.contrib.seq2seq.LuongAttention):
    score = query . keys, times the scalar ``attention_g`` with `scale`."""

    _scope_name = "luong_attention"

    def __init__(self, num_units, memory, memory_sequence_length=None, scale=False, probability_fn=None,
                 score_mask_value=None, dtype=None, custom_key_value_fn=None, name="LuongAttention"):
        if custom_key_value_fn is not None:
            raise NotImplementedError("LuongAttention: custom_key_value_fn is not supported by actorflow")
        super().__init__(num_units, memory, memory_sequence_length,
                         (lambda score: probability_fn(score)) if probability_fn else None, score_mask_value, dtype,
                         name, None)
        self._scale = scale

    def _score(self, query):
        query = convert_to_tensor(query)
        if query.shape[-1] is not None and query.shape[-1] != self._num_units:
            raise ValueError(f"Incompatible or unknown inner dimensions between query and keys. Query "
                             f"({query.name}) has units: {query.shape[-1]}. Keys have units: {self._num_units}. "
                             "Perhaps you need to set num_units to the keys' dimension?")
        score = array_ops.squeeze(math_ops.matmul(array_ops.expand_dims(query, 1), self._keys, transpose_b=True),
                                  [1])
        if self._scale:
            g = get_variable("attention_g", [], dtype=score.dtype, initializer=ones_initializer())
            score = g * score
        return score


class AttentionWrapperState(collections.namedtuple("AttentionWrapperState", (
        "cell_state", "attention", "time", "alignments", "alignment_history", "attention_state"))):
    """The state of an AttentionWrapper: the wrapped cell's state, the last attention vector, the
    step, the last alignments, their history (a TensorArray, or () when not kept) and the
    mechanism's state."""

    __slots__ = ()

    def clone(self, **kwargs):
        """A copy with the given fields replaced (cell_state=... to start from an encoder's state)."""
        return self._replace(**kwargs)


class AttentionWrapper(RNNCell):
    """A cell with attention (tf.contrib.seq2seq.AttentionWrapper): each step feeds the cell
    `cell_input_fn(inputs, previous attention)` (their concatenation), scores the memory with the
    cell output, reads the context (alignments @ values) and, with `attention_layer_size`, makes
    the attention vector ``attention_layer`` ([cell output, context] @ W, no bias); otherwise the
    context is the attention. Outputs the attention (or, with `output_attention=False`, the cell
    output). Variables live under ``attention_wrapper``. One attention mechanism only here.
    """

    def __init__(self, cell, attention_mechanism, attention_layer_size=None, alignment_history=False,
                 cell_input_fn=None, output_attention=True, initial_cell_state=None, name=None, attention_layer=None,
                 attention_fn=None):
        super().__init__(name=name)
        if isinstance(attention_mechanism, (list, tuple)):
            if len(attention_mechanism) != 1:
                raise NotImplementedError("AttentionWrapper: several attention mechanisms are not supported by "
                                          "actorflow")
            attention_mechanism = attention_mechanism[0]
        if not isinstance(attention_mechanism, _AttentionMechanism):
            raise TypeError(f"attention_mechanism must be an AttentionMechanism, saw: "
                            f"{type(attention_mechanism).__name__}")
        if attention_fn is not None:
            raise NotImplementedError("AttentionWrapper: attention_fn is not supported by actorflow")
        if attention_layer_size is not None and attention_layer is not None:
            raise ValueError("Only one of attention_layer_size and attention_layer should be set")
        self._cell = cell
        self._mechanism = attention_mechanism
        self._cell_input_fn = cell_input_fn or (lambda inputs, attention: array_ops.concat([inputs, attention], -1))
        if isinstance(attention_layer_size, (list, tuple)):
            attention_layer_size = attention_layer_size[0]
        if attention_layer is None and attention_layer_size is not None:
            attention_layer = Dense(attention_layer_size, name="attention_layer", use_bias=False)
        self._attention_layer = attention_layer
        self._attention_size = (int(attention_layer.units) if attention_layer is not None
                                else attention_mechanism.values.shape[-1])
        self._alignment_history = alignment_history
        self._output_attention = output_attention
        self._initial_cell_state = initial_cell_state

    @property
    def output_size(self):
        return self._attention_size if self._output_attention else self._cell.output_size

    @property
    def state_size(self):
        return AttentionWrapperState(cell_state=self._cell.state_size, time=TensorShape([]),
                                     attention=self._attention_size, alignments=self._mechanism.alignments_size,
                                     attention_state=self._mechanism.state_size, alignment_history=())

    @property
    def variables(self) -> list:
        return self._cell.variables

    def zero_state(self, batch_size, dtype):
        """The initial state: the cell's (or `initial_cell_state`), zero attention and alignments."""
        with name_scope(type(self).__name__ + "ZeroState"):
            cell_state = (self._initial_cell_state if self._initial_cell_state is not None
                          else self._cell.zero_state(batch_size, dtype))
            bs = convert_to_tensor(batch_size, dtype=dtypes.int32)
            attention = array_ops.zeros(array_ops.stack([bs, self._attention_size]), dtype=dtype)
            attention.set_shape([batch_size if isinstance(batch_size, int) else None, self._attention_size])
            alignments = self._mechanism.initial_alignments(bs, dtype)
            history = (TensorArray(dtype=dtype, size=0, dynamic_size=True) if self._alignment_history else ())
            return AttentionWrapperState(cell_state=cell_state, attention=attention,
                                         time=convert_to_tensor(0, dtype=dtypes.int32), alignments=alignments,
                                         alignment_history=history,
                                         attention_state=self._mechanism.initial_state(bs, dtype))

    def __call__(self, inputs, state, scope=None):
        if not isinstance(state, AttentionWrapperState):
            raise TypeError(f"Expected state to be instance of AttentionWrapperState. Received type "
                            f"{type(state).__name__} instead.")
        return super().__call__(inputs, state, scope=scope)

    def call(self, inputs, state):
        cell_inputs = self._cell_input_fn(inputs, state.attention)
        cell_output, next_cell_state = self._cell(cell_inputs, state.cell_state)
        alignments, next_attention_state = self._mechanism(cell_output, state=state.attention_state)
        context = array_ops.squeeze(math_ops.matmul(array_ops.expand_dims(alignments, 1), self._mechanism.values),
                                    [1])
        if self._attention_layer is not None:
            attention = self._attention_layer(array_ops.concat([cell_output, context], 1))
        else:
            attention = context
        history = (state.alignment_history.write(state.time, alignments) if self._alignment_history else ())
        next_state = AttentionWrapperState(time=state.time + 1, cell_state=next_cell_state, attention=attention,
                                           attention_state=next_attention_state, alignments=alignments,
                                           alignment_history=history)
        return (attention if self._output_attention else cell_output), next_state


# ---------------------------------------------------------------------------------------------
# More helpers, and beam search
# ---------------------------------------------------------------------------------------------

class CustomHelper(Helper):
    """A helper made of three functions (tf.contrib.seq2seq.CustomHelper): `initialize_fn()` ->
    (finished, inputs), `sample_fn(time, outputs, state)` -> sample ids, `next_inputs_fn(time,
    outputs, state, sample_ids)` -> (finished, next inputs, next state)."""

    def __init__(self, initialize_fn, sample_fn, next_inputs_fn, sample_ids_shape=None, sample_ids_dtype=None):
        self._initialize_fn, self._sample_fn, self._next_inputs_fn = initialize_fn, sample_fn, next_inputs_fn
        self._sample_ids_shape = TensorShape(sample_ids_shape or [])
        self._sample_ids_dtype = dtypes.as_dtype(sample_ids_dtype or dtypes.int32)
        self._batch_size = None

    @property
    def batch_size(self):
        if self._batch_size is None:
            raise ValueError("CustomHelper: batch_size is known only after initialize() has been called")
        return self._batch_size

    @property
    def sample_ids_shape(self):
        return self._sample_ids_shape

    @property
    def sample_ids_dtype(self):
        return self._sample_ids_dtype

    def initialize(self, name=None):
        with name_scope(name, "CustomHelperInitialize"):
            finished, inputs = self._initialize_fn()
            if self._batch_size is None:
                self._batch_size = array_ops.size(finished)
            return finished, inputs

    def sample(self, time, outputs, state, name=None):
        with name_scope(name, "CustomHelperSample"):
            return self._sample_fn(time=time, outputs=outputs, state=state)

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        with name_scope(name, "CustomHelperNextInputs"):
            return self._next_inputs_fn(time=time, outputs=outputs, state=state, sample_ids=sample_ids)


class InferenceHelper(Helper):
    """Inference that feeds back `sample_fn(outputs)` itself, or `next_inputs_fn` of it, with no
    embedding (tf.contrib.seq2seq.InferenceHelper); a row is finished when `end_fn(sample_ids)`."""

    def __init__(self, sample_fn, sample_shape, sample_dtype, start_inputs, end_fn, next_inputs_fn=None):
        self._sample_fn, self._end_fn = sample_fn, end_fn
        self._sample_shape = TensorShape(sample_shape)
        self._sample_dtype = dtypes.as_dtype(sample_dtype)
        self._next_inputs_fn = next_inputs_fn
        self._start_inputs = convert_to_tensor(start_inputs, name="start_inputs")
        self._batch_size = array_ops.shape(self._start_inputs)[0]

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def sample_ids_shape(self):
        return self._sample_shape

    @property
    def sample_ids_dtype(self):
        return self._sample_dtype

    def initialize(self, name=None):
        return array_ops.fill(array_ops.reshape(self._batch_size, [1]), False), self._start_inputs

    def sample(self, time, outputs, state, name=None):
        return self._sample_fn(outputs)

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        finished = self._end_fn(sample_ids)
        next_inputs = sample_ids if self._next_inputs_fn is None else self._next_inputs_fn(sample_ids)
        return finished, next_inputs, state


def hardmax(logits, name=None):
    """One-hot of the argmax over the last axis, in the logits' dtype (tf.contrib.seq2seq.hardmax)."""
    with name_scope(name, "Hardmax", [logits]):
        logits = convert_to_tensor(logits, name="logits")
        depth = logits.shape[-1] if logits.shape.ndims and logits.shape[-1] is not None else array_ops.shape(logits)[-1]
        return array_ops.one_hot(math_ops.argmax(logits, -1), depth, dtype=logits.dtype)


class BeamSearchDecoderState(collections.namedtuple("BeamSearchDecoderState", (
        "cell_state", "log_probs", "finished", "lengths", "accumulated_attention_probs"))):
    """A beam search's state, every field [batch, beam, ...]: the cell's state, each beam's total
    log probability, whether it has emitted end_token, and its length (end_token included)."""

    __slots__ = ()


class BeamSearchDecoderOutput(collections.namedtuple("BeamSearchDecoderOutput",
                                                     ("scores", "predicted_ids", "parent_ids"))):
    """One beam search step, [batch, beam] each: the beams' scores, the tokens they chose and the
    beams of the previous step they extend."""

    __slots__ = ()


class FinalBeamSearchDecoderOutput(collections.namedtuple("FinalBeamSearchDecoderOutput",
                                                          ("predicted_ids", "beam_search_decoder_output"))):
    """What dynamic_decode returns for a beam search: every beam's whole token sequence (traced back
    with gather_tree), and the steps' raw BeamSearchDecoderOutput."""

    __slots__ = ()


def _length_penalty(lengths, weight, dtype):
    """GNMT's length normalisation, ((5 + length) / 6) ** weight; 1 when the weight is 0."""
    if isinstance(weight, (int, float)) and weight == 0:
        return None
    lengths = math_ops.cast(lengths, dtype)
    return math_ops.pow((5.0 + lengths) / 6.0, math_ops.cast(weight, dtype))


class BeamSearchDecoder(Decoder):
    """Beam search over a cell's outputs (tf.contrib.seq2seq.BeamSearchDecoder).

    `initial_state` is the cell's state for batch * beam_width rows (tile an encoder's state with
    `tile_batch`). Every step extends each of the `beam_width` beams of a batch entry by every token,
    scores the candidates by total log probability (over ``((5 + length) / 6) **
    length_penalty_weight``) and keeps the best `beam_width` of the batch entry's beam * vocab
    candidates, ties going to the lower beam, then the lower token. A beam that has emitted
    `end_token` only continues with end_token, at no cost, and stops growing. Decoding starts from
    beam 0 alone (the others at -inf) and stops when every beam of every entry has finished, or at
    dynamic_decode's `maximum_iterations`. dynamic_decode returns a `FinalBeamSearchDecoderOutput`
    (predicted_ids [batch, time, beam], best beam first) and the final `BeamSearchDecoderState`.
    """

    def __init__(self, cell, embedding, start_tokens, end_token, initial_state, beam_width, output_layer=None,
                 length_penalty_weight=0.0, coverage_penalty_weight=0.0, reorder_tensor_arrays=True):
        if not callable(cell):
            raise TypeError(f"cell must be an RNNCell, received: {type(cell).__name__}")
        if output_layer is not None and not callable(output_layer):
            raise TypeError(f"output_layer must be a Layer, received: {type(output_layer).__name__}")
        if coverage_penalty_weight:
            raise NotImplementedError("BeamSearchDecoder: coverage_penalty_weight is not supported by actorflow "
                                      "(it needs the attention's accumulated alignments); use 0.0")
        self._cell, self._output_layer = cell, output_layer
        self._reorder_tensor_arrays = reorder_tensor_arrays
        self._embed, self._start_tokens, self._end_token = _embedding_and_tokens(embedding, start_tokens, end_token)
        self._beam_width = int(beam_width)
        if self._beam_width < 1:
            raise ValueError(f"beam_width must be at least 1, got {beam_width}")
        self._length_penalty_weight = length_penalty_weight
        self._batch_size = array_ops.size(self._start_tokens)
        self._static_batch = self._start_tokens.shape[0]
        self._initial_cell_state = nest.map_structure(self._split, initial_state)
        self._start_tokens = array_ops.tile(array_ops.expand_dims(self._start_tokens, 1), [1, self._beam_width])
        self._start_inputs = self._embed(self._start_tokens)
        first = array_ops.zeros(array_ops.reshape(self._batch_size, [1]), dtype=dtypes.int32)
        self._finished = array_ops.one_hot(first, self._beam_width, on_value=False, off_value=True, dtype=dtypes.bool_)
        self._first = first

    def _split(self, t):
        """A [batch * beam, ...] tensor as [batch, beam, ...] (TensorArrays and scalars as they are)."""
        if isinstance(t, TensorArray):
            return t
        t = convert_to_tensor(t)
        if t.shape.ndims is None:
            raise ValueError(f"BeamSearchDecoder: the cell state '{t.name}' must have a static rank")
        if t.shape.ndims == 0:
            return t
        rest = array_ops.shape(t)[1:]
        out = array_ops.reshape(t, array_ops.concat([array_ops.stack([self._batch_size, self._beam_width]), rest], 0))
        lead = t.shape[0]
        if lead is not None and self._static_batch is not None and lead != self._static_batch * self._beam_width:
            raise ValueError(f"BeamSearchDecoder: the cell state '{t.name}' has {lead} rows, not batch * beam_width = "
                             f"{self._static_batch * self._beam_width}; tile it with tile_batch")
        out.set_shape(TensorShape([self._static_batch, self._beam_width]).concatenate(t.shape[1:]))
        return out

    def _merge(self, t):
        """A [batch, beam, ...] tensor as [batch * beam, ...]."""
        if isinstance(t, TensorArray) or t.shape.ndims == 0:
            return t
        out = array_ops.reshape(t, array_ops.concat([array_ops.reshape(self._batch_size * self._beam_width, [1]),
                                                     array_ops.shape(t)[2:]], 0))
        lead = None if self._static_batch is None else self._static_batch * self._beam_width
        out.set_shape(TensorShape([lead]).concatenate(t.shape[2:]))
        return out

    def _gather_beams(self, t, parents):
        """`t` [batch, beam, ...] with each beam replaced by its parent's row."""
        if isinstance(t, TensorArray) or t.shape.ndims is None or t.shape.ndims < 2:
            return t
        offsets = array_ops.expand_dims(array_ops.range(self._batch_size) * self._beam_width, 1)
        rows = array_ops.reshape(parents + offsets, [-1])
        out = array_ops.reshape(array_ops.gather(self._merge(t), rows), array_ops.shape(t))
        out.set_shape(t.shape)
        return out

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def output_size(self):
        beams = TensorShape([self._beam_width])
        return BeamSearchDecoderOutput(scores=beams, predicted_ids=beams, parent_ids=beams)

    @property
    def output_dtype(self):
        dtype = nest.flatten(self._initial_cell_state)[0].dtype
        return BeamSearchDecoderOutput(scores=dtype, predicted_ids=dtypes.int32, parent_ids=dtypes.int32)

    @property
    def tracks_own_finished(self):
        return True

    def initialize(self, name=None):
        with name_scope(name, "BeamSearchDecoderInitialize"):
            dtype = nest.flatten(self._initial_cell_state)[0].dtype
            log_probs = array_ops.one_hot(self._first, self._beam_width, on_value=convert_to_tensor(0.0, dtype=dtype),
                                          off_value=convert_to_tensor(float("-inf"), dtype=dtype), dtype=dtype)
            lengths = array_ops.zeros(array_ops.stack([self._batch_size, self._beam_width]), dtype=dtypes.int64)
            state = BeamSearchDecoderState(cell_state=self._initial_cell_state, log_probs=log_probs,
                                           finished=self._finished, lengths=lengths, accumulated_attention_probs=())
            return self._finished, self._start_inputs, state

    def step(self, time, inputs, state, name=None):
        with name_scope(name, "BeamSearchDecoderStep"):
            cell_state = nest.map_structure(self._merge, state.cell_state)
            outputs, next_cell_state = self._cell(self._merge(inputs), cell_state)
            if self._output_layer is not None:
                outputs = self._output_layer(outputs)
            logits = self._split(outputs)
            next_cell_state = nest.map_structure(self._split, next_cell_state)
            output, next_state = self._search_step(logits, next_cell_state, state)
            finished = next_state.finished
            next_inputs = cond(math_ops.reduce_all(finished), lambda: self._start_inputs,
                               lambda: self._embed(output.predicted_ids))
        return output, next_state, next_inputs, finished

    def _search_step(self, logits, cell_state, state):
        dtype = logits.dtype
        vocab = logits.shape[-1] if logits.shape[-1] is not None else array_ops.shape(logits)[2]
        was_finished = state.finished
        step_log_probs = nn_ops.log_softmax(logits)
        # A finished beam continues only with end_token, at no cost.
        eos_only = array_ops.one_hot(self._end_token, vocab, on_value=convert_to_tensor(0.0, dtype=dtype),
                                     off_value=convert_to_tensor(dtype.min, dtype=dtype), dtype=dtype)
        step_log_probs = math_ops.where_v2(array_ops.expand_dims(was_finished, 2), eos_only, step_log_probs)
        total = array_ops.expand_dims(state.log_probs, 2) + step_log_probs          # [batch, beam, vocab]
        scores = total
        not_eos = 1 - array_ops.one_hot(self._end_token, vocab, dtype=dtypes.int64)
        grows = array_ops.expand_dims(math_ops.cast(math_ops.logical_not(was_finished), dtypes.int64), 2)
        penalty = _length_penalty(array_ops.expand_dims(state.lengths, 2) + grows * not_eos,
                                  self._length_penalty_weight, dtype)
        if penalty is not None:
            scores = total / penalty
        flat = array_ops.reshape(scores, array_ops.stack([self._batch_size, -1]))
        best_scores, best = top_k(flat, k=self._beam_width)    # ties: the lower beam, then token
        best_scores.set_shape([self._static_batch, self._beam_width])
        best.set_shape([self._static_batch, self._beam_width])
        word_ids = math_ops.floormod(best, vocab)
        parents = math_ops.floordiv(best, vocab)
        offsets = array_ops.expand_dims(array_ops.range(self._batch_size) * (self._beam_width * vocab), 1)
        log_probs = array_ops.reshape(array_ops.gather(array_ops.reshape(total, [-1]), best + offsets),
                                      array_ops.shape(best))
        log_probs.set_shape(best.shape)
        was_finished = self._gather_beams_flat(was_finished, parents)
        finished = math_ops.logical_or(was_finished, math_ops.equal(word_ids, self._end_token))
        lengths = self._gather_beams_flat(state.lengths, parents) + math_ops.cast(math_ops.logical_not(was_finished),
                                                                                   dtypes.int64)
        cell_state = nest.map_structure(lambda t: self._gather_beams(t, parents), cell_state)
        next_state = BeamSearchDecoderState(cell_state=cell_state, log_probs=log_probs, finished=finished,
                                            lengths=lengths, accumulated_attention_probs=())
        return BeamSearchDecoderOutput(scores=best_scores, predicted_ids=word_ids, parent_ids=parents), next_state

    def _gather_beams_flat(self, t, parents):
        """A [batch, beam] tensor's entries taken from each beam's parent."""
        offsets = array_ops.expand_dims(array_ops.range(self._batch_size) * self._beam_width, 1)
        out = array_ops.reshape(array_ops.gather(array_ops.reshape(t, [-1]), parents + offsets), array_ops.shape(t))
        out.set_shape(t.shape)
        return out

    def finalize(self, outputs, final_state, sequence_lengths):
        """Traces every beam's sequence back through the parent ids (gather_tree), up to the longest
        beam of each batch entry."""
        lengths = math_ops.cast(math_ops.reduce_max(final_state.lengths, axis=1), dtypes.int32)
        predicted = gather_tree(outputs.predicted_ids, outputs.parent_ids, lengths, self._end_token)
        return FinalBeamSearchDecoderOutput(predicted_ids=predicted, beam_search_decoder_output=outputs), final_state

