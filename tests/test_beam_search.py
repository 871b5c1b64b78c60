"""tf.contrib.seq2seq's beam search: gather_tree against a loop written from its definition, and
BeamSearchDecoder against a numpy beam search over the same cell, against greedy decoding at
beam width 1, with a length penalty, and under an attention wrapper."""
import numpy as np
import pytest

import actorflow as af
from actorflow.errors import InvalidArgumentError

seq2seq = af.contrib.seq2seq


def _gather_tree_loop(step_ids, parent_ids, lengths, end):
    t_max, batch, beam = step_ids.shape
    out = np.full_like(step_ids, end)
    for b in range(batch):
        n = min(t_max, lengths[b])
        for k in range(beam):
            if n <= 0:
                continue
            out[n - 1, b, k] = step_ids[n - 1, b, k]
            p = parent_ids[n - 1, b, k]
            for t in range(n - 2, -1, -1):
                out[t, b, k] = step_ids[t, b, p]
                p = parent_ids[t, b, p]
            done = False
            for t in range(n):
                if done:
                    out[t, b, k] = end
                elif out[t, b, k] == end:
                    done = True
    return out


@pytest.mark.parametrize("seed", range(4))
def test_gather_tree_matches_its_definition(seed):
    rng = np.random.default_rng(seed)
    t_max, batch, beam, end = 7, 3, 4, 2
    step = rng.integers(0, 6, (t_max, batch, beam)).astype(np.int32)
    parent = rng.integers(0, beam, (t_max, batch, beam)).astype(np.int32)
    lengths = np.array([7, 4, 0], np.int32)
    out = af.Session().run(seq2seq.gather_tree(step, parent, lengths, end))
    np.testing.assert_array_equal(out, _gather_tree_loop(step, parent, lengths, end))
    assert out.dtype == np.int32


def test_gather_tree_rejects_a_parent_outside_the_beam():
    step = np.zeros((3, 1, 2), np.int32)
    parent = np.zeros((3, 1, 2), np.int32)
    parent[2, 0, 1] = 5
    with pytest.raises(InvalidArgumentError, match="GatherTree: parent id 5"):
        af.Session().run(seq2seq.gather_tree(step, parent, [3], 9))
    with pytest.raises(ValueError, match="max_sequence_lengths has 2 entries"):
        seq2seq.gather_tree(step, parent, [3, 3], 9)


class _ToyCell(af.nn.rnn_cell.RNNCell):
    """h' = tanh(x W + h U); output h' V: fixed weights, so numpy can run the same cell."""

    def __init__(self, W, U, V):
        super().__init__()
        self.W, self.U, self.V = W, U, V

    @property
    def state_size(self):
        return self.U.shape[0]

    @property
    def output_size(self):
        return self.V.shape[1]

    def call(self, inputs, state):
        h = af.tanh(af.matmul(inputs, af.constant(self.W)) + af.matmul(state, af.constant(self.U)))
        return af.matmul(h, af.constant(self.V)), h


def _log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def _numpy_beam_search(emb, W, U, V, h0, start, end, beam, max_iter, penalty=0.0):
    """Beam search per batch entry, written from the decoder's contract (not from its code)."""
    results = []
    for b in range(h0.shape[0]):
        beams = [dict(h=h0[b], lp=0.0 if k == 0 else -np.inf, fin=k != 0, length=0, tok=start, ids=[])
                 for k in range(beam)]
        for _ in range(max_iter):
            cands = []
            for k, s in enumerate(beams):
                h = np.tanh(emb[s["tok"]] @ W + s["h"] @ U)
                lp = _log_softmax((h @ V).astype(np.float64))
                for w in range(V.shape[1]):
                    if s["fin"]:
                        step = 0.0 if w == end else np.finfo(np.float32).min
                    else:
                        step = lp[w]
                    total = s["lp"] + step
                    length = s["length"] + (0 if s["fin"] or w == end else 1)
                    score = total / (((5.0 + length) / 6.0) ** penalty) if penalty else total
                    cands.append((score, k, w, total, h))
            order = sorted(range(len(cands)), key=lambda i: (-cands[i][0], i))[:beam]
            nxt = []
            for i in order:
                score, k, w, total, h = cands[i]
                s = beams[k]
                nxt.append(dict(h=h, lp=total, fin=s["fin"] or w == end, length=s["length"] + (0 if s["fin"] else 1),
                                tok=w, ids=s["ids"] + [w], score=score))
            beams = nxt
            if all(s["fin"] for s in beams):
                break
        results.append(beams)
    return results


def _problem(seed, batch=2, vocab=7, depth=5, units=6):
    rng = np.random.default_rng(seed)
    f = np.float32
    return (rng.normal(size=(vocab, depth)).astype(f), rng.normal(size=(depth, units)).astype(f),
            rng.normal(size=(units, units)).astype(f) * 0.5, (rng.normal(size=(units, vocab)) * 2).astype(f),
            rng.normal(size=(batch, units)).astype(f))


def _decode(emb, W, U, V, h0, beam, max_iter, end=1, penalty=0.0):
    cell = _ToyCell(W, U, V)
    init = seq2seq.tile_batch(af.constant(h0), beam)
    dec = seq2seq.BeamSearchDecoder(cell, af.constant(emb), af.fill([h0.shape[0]], 0), end, init, beam,
                                    length_penalty_weight=penalty)
    out, state, lengths = seq2seq.dynamic_decode(dec, maximum_iterations=max_iter)
    return af.Session().run([out, state, lengths])


@pytest.mark.parametrize("seed,beam,penalty", [(0, 3, 0.0), (1, 4, 0.0), (2, 3, 0.8), (3, 2, 1.5)])
def test_beam_search_matches_a_numpy_search(seed, beam, penalty):
    emb, W, U, V, h0 = _problem(seed)
    out, state, _ = _decode(emb, W, U, V, h0, beam, max_iter=6, penalty=penalty)
    ref = _numpy_beam_search(emb, W, U, V, h0, 0, 1, beam, 6, penalty)
    pred = out.predicted_ids                                   # [batch, time, beam]
    assert pred.shape[0] == 2 and pred.shape[2] == beam
    raw = out.beam_search_decoder_output
    for b, beams in enumerate(ref):
        for k, s in enumerate(beams):
            ids = s["ids"]
            n = len(ids)
            got = list(pred[b, :n, k])
            # gather_tree writes end_token after a beam's first end_token
            want = list(ids)
            if 1 in want:
                want = want[:want.index(1) + 1] + [1] * (n - want.index(1) - 1)
            assert got == want, (b, k)
            np.testing.assert_allclose(state.log_probs[b, k], s["lp"], rtol=1e-4)
            np.testing.assert_allclose(raw.scores[b, n - 1, k], s["score"], rtol=1e-4)
            assert state.lengths[b, k] == s["length"]
            assert state.finished[b, k] == s["fin"]
    assert np.all(np.diff(state.log_probs if not penalty else raw.scores[:, -1], axis=-1) <= 1e-6)


def test_beam_width_one_is_greedy_decoding():
    emb, W, U, V, h0 = _problem(5, batch=3)
    out, _, lengths = _decode(emb, W, U, V, h0, 1, max_iter=8)
    g = af.Graph()
    with g.as_default():
        helper = seq2seq.GreedyEmbeddingHelper(af.constant(emb), af.fill([3], 0), 1)
        dec = seq2seq.BasicDecoder(_ToyCell(W, U, V), helper, af.constant(h0))
        gout, _, glengths = seq2seq.dynamic_decode(dec, maximum_iterations=8)
        greedy, glen = af.Session().run([gout.sample_id, glengths])
    for b in range(3):
        n = glen[b]
        np.testing.assert_array_equal(out.predicted_ids[b, :n, 0], greedy[b, :n])


def test_beam_search_under_attention_and_lstm_runs_and_keeps_shapes():
    batch, beam, vocab, t_in = 2, 3, 9, 5
    rng = np.random.default_rng(0)
    memory = af.constant(rng.normal(size=(batch, t_in, 4)).astype(np.float32))
    tiled = seq2seq.tile_batch(memory, beam)
    mech = seq2seq.LuongAttention(6, tiled, memory_sequence_length=seq2seq.tile_batch(af.constant([5, 3]), beam))
    cell = seq2seq.AttentionWrapper(af.nn.rnn_cell.LSTMCell(6), mech, attention_layer_size=6)
    init = cell.zero_state(batch * beam, af.float32)
    emb = af.get_variable("emb", [vocab, 4])
    dec = seq2seq.BeamSearchDecoder(cell, emb, af.fill([batch], 0), 1, init, beam,
                                    output_layer=af.layers.Dense(vocab, use_bias=False))
    out, state, lengths = seq2seq.dynamic_decode(dec, maximum_iterations=7)
    assert isinstance(out, seq2seq.FinalBeamSearchDecoderOutput)
    assert isinstance(state, seq2seq.BeamSearchDecoderState)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        pred, lp, c = s.run([out.predicted_ids, state.log_probs, state.cell_state.cell_state.c])
    assert pred.shape[0] == batch and pred.shape[2] == beam and pred.shape[1] <= 7
    assert c.shape == (batch, beam, 6)
    assert np.all(np.diff(lp, axis=1) <= 1e-6)               # best beam first


def test_beam_search_decoder_checks_its_arguments():
    emb, W, U, V, h0 = _problem(0)
    with pytest.raises(ValueError, match="tile it with tile_batch"):
        seq2seq.BeamSearchDecoder(_ToyCell(W, U, V), emb, af.fill([2], 0), 1, af.constant(h0), 3)
    with pytest.raises(NotImplementedError, match="coverage_penalty_weight"):
        seq2seq.BeamSearchDecoder(_ToyCell(W, U, V), emb, af.fill([2], 0), 1,
                                  seq2seq.tile_batch(af.constant(h0), 3), 3, coverage_penalty_weight=0.5)


def test_hardmax_custom_and_inference_helpers():
    x = np.array([[0.1, 3.0, -1.0], [2.0, 2.0, 1.0]], np.float32)
    np.testing.assert_array_equal(af.Session().run(seq2seq.hardmax(x)), [[0, 1, 0], [1, 0, 0]])
    # An InferenceHelper feeding the cell's own one-hot outputs back, ending on token 2.
    emb, W, U, V, h0 = _problem(1, batch=2, vocab=5, depth=5)
    helper = seq2seq.InferenceHelper(sample_fn=lambda o: seq2seq.hardmax(o), sample_shape=[5],
                                     sample_dtype=af.float32, start_inputs=af.one_hot([0, 0], 5),
                                     end_fn=lambda s: af.equal(af.argmax(s, -1), 2))
    dec = seq2seq.BasicDecoder(_ToyCell(np.eye(5, dtype=np.float32) @ emb @ W, U, V), helper, af.constant(h0))
    out, _, lengths = seq2seq.dynamic_decode(dec, maximum_iterations=6)
    ids = af.Session().run(out.sample_id)
    assert ids.shape[0] == 2 and ids.shape[2] == 5
    custom = seq2seq.CustomHelper(lambda: (af.constant([False, False]), af.one_hot([0, 0], 5)),
                                  lambda time, outputs, state: af.cast(af.argmax(outputs, -1), af.int32),
                                  lambda time, outputs, state, sample_ids: (af.equal(sample_ids, 2),
                                                                            af.one_hot(sample_ids, 5), state))
    dec = seq2seq.BasicDecoder(_ToyCell(emb @ W, U, V), custom, af.constant(h0))
    out2, _, _ = seq2seq.dynamic_decode(dec, maximum_iterations=6)
    ids2 = af.Session().run(out2.sample_id)
    np.testing.assert_array_equal(ids2, np.argmax(ids, -1))
