"""af.contrib.crf: tf.contrib.crf (TF 1.15), a linear-chain conditional random field over tag
sequences, as sequence taggers (NER, POS) put on top of a BiLSTM.

`inputs` are unary potentials [batch, max_time, num_tags], `transition_params` [num_tags, num_tags]
the score of tag i followed by tag j, `sequence_lengths` [batch] how many steps of each row count.
A tag sequence y of length n scores ``sum_t inputs[t, y_t] + sum_t transition[y_t, y_t+1]``; the
log-likelihood is that score minus the log-sum-exp over every sequence of length n (the forward
algorithm, in a dynamic_rnn so it runs as a loop and differentiates). A row of length 0 scores 0
and has log-norm 0. `crf_decode` is Viterbi in the graph (a forward max-product pass recording
backpointers, then a backward pass following them), `viterbi_decode` the same in numpy; tags past
a row's length decode as 0.
"""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.control_flow import cond
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.misc_ops import reverse_sequence
from actorflow.graph.variable_scope import get_variable
from actorflow.rnn import dynamic_rnn
from actorflow.rnn_cell import RNNCell

__all__ = ["crf_sequence_score", "crf_multitag_sequence_score", "crf_log_norm", "crf_log_likelihood",
           "crf_unary_score", "crf_binary_score", "crf_forward", "viterbi_decode", "crf_decode",
           "CrfForwardRnnCell", "CrfDecodeForwardRnnCell", "CrfDecodeBackwardRnnCell"]


def _num_tags(t, what):
    n = t.shape[-1] if t.shape.ndims else None
    if n is None:
        raise ValueError(f"{what} must have a statically known number of tags (last dimension), got shape {t.shape}")
    return int(n)


def _single_step(inputs):
    """A predicate: is the time axis 1 long (static when it can be)?"""
    t = inputs.shape[1] if inputs.shape.ndims == 3 else None
    if t is not None:
        return t == 1
    return math_ops.equal(array_ops.shape(inputs)[1], 1)


def _smart_cond(pred, true_fn, false_fn):
    if isinstance(pred, bool):
        return true_fn() if pred else false_fn()
    return cond(pred, true_fn, false_fn)


def _zero_where_empty(values, lengths):
    return math_ops.where_v2(math_ops.less_equal(lengths, 0), array_ops.zeros_like(values), values)


def crf_unary_score(tag_indices, sequence_lengths, inputs):
    """Each row's sum of the unary potentials of its tags over its first `sequence_lengths` steps."""
    with name_scope(None, "crf_unary_score", [tag_indices, inputs]):
        inputs = convert_to_tensor(inputs, name="inputs")
        tags = convert_to_tensor(tag_indices, name="tag_indices")
        picked = array_ops.squeeze(array_ops.gather(inputs, array_ops.expand_dims(tags, -1), axis=2, batch_dims=2),
                                   [2])
        mask = array_ops.sequence_mask(sequence_lengths, maxlen=array_ops.shape(tags)[1], dtype=inputs.dtype)
        return math_ops.reduce_sum(picked * mask, 1)


def crf_binary_score(tag_indices, sequence_lengths, transition_params):
    """Each row's sum of the transition scores between its consecutive tags within its length."""
    with name_scope(None, "crf_binary_score", [tag_indices, transition_params]):
        trans = convert_to_tensor(transition_params, name="transition_params")
        tags = convert_to_tensor(tag_indices, name="tag_indices")
        n = _num_tags(trans, "transition_params")
        pairs = tags[:, :-1] * n + tags[:, 1:]
        scores = array_ops.gather(array_ops.reshape(trans, [-1]), pairs)
        mask = array_ops.sequence_mask(sequence_lengths, maxlen=array_ops.shape(tags)[1], dtype=trans.dtype)
        return math_ops.reduce_sum(scores * mask[:, 1:], 1)


def crf_sequence_score(inputs, tag_indices, sequence_lengths, transition_params):
    """The unnormalised score of each row's tag sequence: unary plus transition scores."""
    with name_scope(None, "crf_sequence_score", [inputs, tag_indices]):
        inputs = convert_to_tensor(inputs, name="inputs")
        tags = convert_to_tensor(tag_indices, name="tag_indices")
        lengths = convert_to_tensor(sequence_lengths, name="sequence_lengths")

        def single():
            first = array_ops.squeeze(inputs, [1])
            picked = array_ops.squeeze(array_ops.gather(first, tags[:, :1], axis=1, batch_dims=1), [1])
            return _zero_where_empty(picked, lengths)

        def multi():
            return crf_unary_score(tags, lengths, inputs) + crf_binary_score(tags, lengths, transition_params)
        return _smart_cond(_single_step(inputs), single, multi)


def crf_multitag_sequence_score(inputs, tag_bitmap, sequence_lengths, transition_params):
    """The log-sum-exp of the scores of every tag sequence allowed by `tag_bitmap` (a [batch, time,
    num_tags] bool: the tags each step may take)."""
    with name_scope(None, "crf_multitag_sequence_score", [inputs, tag_bitmap]):
        inputs = convert_to_tensor(inputs, name="inputs")
        allowed = convert_to_tensor(tag_bitmap, dtype=dtypes.bool_, name="tag_bitmap")
        masked = math_ops.where_v2(allowed, inputs, convert_to_tensor(float("-inf"), dtype=inputs.dtype))
        return crf_log_norm(masked, sequence_lengths, transition_params)


class CrfForwardRnnCell(RNNCell):
    """One step of the forward algorithm: alpha'_j = input_j + logsumexp_i(alpha_i + transition[i, j])."""

    def __init__(self, transition_params):
        super().__init__()
        self._transition_params = array_ops.expand_dims(convert_to_tensor(transition_params), 0)
        self._num_tags = _num_tags(self._transition_params, "transition_params")

    @property
    def state_size(self):
        return self._num_tags

    @property
    def output_size(self):
        return self._num_tags

    def __call__(self, inputs, state, scope=None):
        scores = array_ops.expand_dims(state, 2) + self._transition_params
        alphas = inputs + math_ops.reduce_logsumexp(scores, [1])
        return alphas, alphas


def crf_forward(inputs, state, transition_params, sequence_lengths):
    """The forward algorithm's alphas at each row's last step: `state` [batch, num_tags] holds the
    first step's, `inputs` the potentials of the steps after it."""
    with name_scope(None, "crf_forward", [inputs, state]):
        lengths = convert_to_tensor(sequence_lengths, name="sequence_lengths")
        steps = math_ops.maximum(math_ops.cast(0, lengths.dtype), lengths - 1)
        _, alphas = dynamic_rnn(CrfForwardRnnCell(transition_params), inputs, sequence_length=steps,
                                initial_state=state, dtype=convert_to_tensor(inputs).dtype, scope="crf_forward")
        return alphas


def crf_log_norm(inputs, sequence_lengths, transition_params):
    """Each row's log partition function: the log-sum-exp of the scores of every tag sequence of
    its length."""
    with name_scope(None, "crf_log_norm", [inputs]):
        inputs = convert_to_tensor(inputs, name="inputs")
        lengths = convert_to_tensor(sequence_lengths, name="sequence_lengths")
        first = inputs[:, 0, :]

        def single():
            return _zero_where_empty(math_ops.reduce_logsumexp(first, [1]), lengths)

        def multi():
            alphas = crf_forward(inputs[:, 1:, :], first, transition_params, lengths)
            return _zero_where_empty(math_ops.reduce_logsumexp(alphas, [1]), lengths)
        return _smart_cond(_single_step(inputs), single, multi)


def crf_log_likelihood(inputs, tag_indices, sequence_lengths, transition_params=None):
    """(log-likelihood of each row's tags, transition_params). Without `transition_params` it is
    created as the variable ``transitions`` [num_tags, num_tags] of the current variable scope."""
    inputs = convert_to_tensor(inputs, name="inputs")
    n = _num_tags(inputs, "inputs")
    if transition_params is None:
        transition_params = get_variable("transitions", [n, n], dtype=inputs.dtype)
    score = crf_sequence_score(inputs, tag_indices, sequence_lengths, transition_params)
    return score - crf_log_norm(inputs, sequence_lengths, transition_params), transition_params


def viterbi_decode(score, transition_params):
    """(the best tag sequence as a list of ints, its score) for one sequence's potentials `score`
    [time, num_tags], in numpy (for use outside the graph)."""
    score = np.asarray(score)
    trans = np.asarray(transition_params)
    if score.ndim != 2 or trans.shape != (score.shape[1], score.shape[1]):
        raise ValueError(f"viterbi_decode: score must be [time, num_tags] and transition_params [num_tags, num_tags], "
                         f"got {score.shape} and {trans.shape}")
    best = score[0].copy()
    back = np.zeros(score.shape, np.int32)
    for t in range(1, score.shape[0]):
        cand = best[:, None] + trans
        back[t] = np.argmax(cand, 0)
        best = score[t] + np.max(cand, 0)
    path = [int(np.argmax(best))]
    for t in range(score.shape[0] - 1, 0, -1):
        path.append(int(back[t][path[-1]]))
    path.reverse()
    return path, float(np.max(best))


class CrfDecodeForwardRnnCell(CrfForwardRnnCell):
    """One max-product step of Viterbi: outputs the backpointers (int32), state the best scores."""

    def __call__(self, inputs, state, scope=None):
        scores = array_ops.expand_dims(state, 2) + self._transition_params
        best = inputs + math_ops.reduce_max(scores, [1])
        return math_ops.cast(math_ops.argmax(scores, 1), dtypes.int32), best


class CrfDecodeBackwardRnnCell(RNNCell):
    """One step back along the backpointers: state and output the previous step's tag ([batch, 1])."""

    def __init__(self, num_tags):
        super().__init__()
        self._num_tags = int(num_tags)

    @property
    def state_size(self):
        return 1

    @property
    def output_size(self):
        return 1

    def __call__(self, inputs, state, scope=None):
        tag = array_ops.gather(inputs, state, axis=1, batch_dims=1)
        return tag, tag


def crf_decode(potentials, transition_params, sequence_length):
    """(the best tags [batch, time] int32, their scores [batch]): Viterbi decoding in the graph."""
    with name_scope(None, "crf_decode", [potentials, transition_params]):
        potentials = convert_to_tensor(potentials, name="potentials")
        lengths = math_ops.cast(convert_to_tensor(sequence_length, name="sequence_length"), dtypes.int32)
        n = _num_tags(potentials, "potentials")

        def single():
            first = array_ops.squeeze(potentials, [1])
            tags = array_ops.expand_dims(math_ops.cast(math_ops.argmax(first, 1), dtypes.int32), 1)
            return tags, math_ops.reduce_max(first, 1)

        def multi():
            steps = math_ops.maximum(0, lengths - 1)
            backpointers, last = dynamic_rnn(CrfDecodeForwardRnnCell(transition_params), potentials[:, 1:, :],
                                             sequence_length=steps, initial_state=potentials[:, 0, :],
                                             dtype=dtypes.int32, scope="crf_decode_forward")
            backpointers = reverse_sequence(backpointers, steps, seq_axis=1, batch_axis=0)
            best_last = array_ops.expand_dims(math_ops.cast(math_ops.argmax(last, 1), dtypes.int32), 1)
            tags, _ = dynamic_rnn(CrfDecodeBackwardRnnCell(n), backpointers, sequence_length=steps,
                                  initial_state=best_last, dtype=dtypes.int32, scope="crf_decode_backward")
            tags = array_ops.concat([best_last, array_ops.squeeze(tags, [2])], 1)
            return reverse_sequence(tags, lengths, seq_axis=1, batch_axis=0), math_ops.reduce_max(last, 1)
        return _smart_cond(_single_step(potentials), single, multi)


