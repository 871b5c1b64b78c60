"""af.nn.rnn_cell, dynamic_rnn, static_rnn and bidirectional_dynamic_rnn against TF 2.21's numbers.

tests/fixtures/rnn.json was made by tests/fixtures/make_rnn.py with TF 2.21 (tf.compat.v1 cells over
tf_keras): the same graphs, every variable loaded from a fixed array, the fetched outputs, final
states and (for most cases) the gradients of a weighted sum of them with respect to every variable.
Each case here builds the same graph with actorflow, checks the variables' names and shapes are TF's,
loads the same weights by name and compares.
"""
import json
import os

import numpy as np
import pytest

import actorflow as af

rc = af.nn.rnn_cell
with open(os.path.join(os.path.dirname(__file__), "fixtures", "rnn.json")) as _f:
    FIX = json.load(_f)
B, T, D, SEQ = FIX["B"], FIX["T"], FIX["D"], FIX["seq"]


def _flat(x):
    return [x] if not isinstance(x, (tuple, list)) else [y for z in x for y in _flat(z)]


def dyn(cell_fn, time_major=False, seq=True, initial=False):
    def build(x_np):
        x = af.constant(x_np)
        if time_major:
            x = af.transpose(x, [1, 0, 2])
        cell = cell_fn()
        init = None
        if initial:
            init = af.nest.map_structure(lambda t: t + 0.25, cell.zero_state(B, af.float32))
        o, s = af.nn.dynamic_rnn(cell, x, sequence_length=af.constant(SEQ) if seq else None,
                                 initial_state=init, dtype=af.float32, time_major=time_major)
        return [o, s]
    return build


def static(cell_fn):
    def build(x_np):
        xs = af.unstack(af.constant(x_np), axis=1)
        o, s = af.nn.static_rnn(cell_fn(), xs, sequence_length=af.constant(SEQ), dtype=af.float32)
        return [af.stack(o, 1), s]
    return build


def bidi(cell_fn):
    def build(x_np):
        (of, ob), (sf, sb) = af.nn.bidirectional_dynamic_rnn(cell_fn(), cell_fn(), af.constant(x_np),
                                                             sequence_length=af.constant(SEQ), dtype=af.float32)
        return [of, ob, sf, sb]
    return build


CASES = {
    "basic_rnn": dyn(lambda: rc.BasicRNNCell(3)),
    "basic_lstm": dyn(lambda: rc.BasicLSTMCell(3, forget_bias=1.0)),
    "basic_lstm_nostate_tuple": dyn(lambda: rc.BasicLSTMCell(3, forget_bias=0.5, state_is_tuple=False), seq=False),
    "lstm_peep_proj": dyn(lambda: rc.LSTMCell(4, use_peepholes=True, num_proj=2, cell_clip=0.5, proj_clip=0.3),
                          time_major=True),
    "lstm_plain_initial": dyn(lambda: rc.LSTMCell(3), initial=True),
    "gru": dyn(lambda: rc.GRUCell(3)),
    "multi": dyn(lambda: rc.MultiRNNCell([rc.LSTMCell(3), rc.GRUCell(2)])),
    "residual_gru": dyn(lambda: rc.ResidualWrapper(rc.GRUCell(D)), seq=False),
    "static_lstm": static(lambda: rc.BasicLSTMCell(3)),
    "bidi_lstm": bidi(lambda: rc.LSTMCell(3)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_tf(name):
    ref = FIX["cases"][name]
    g = af.Graph()
    with g.as_default():
        flat = _flat(CASES[name](np.array(ref["x"], np.float32)))
        tv = af.trainable_variables()
        assert [v.op.name for v in tv] == ref["var_names"]
        assert [v.shape.as_list() for v in tv] == ref["var_shapes"]
        grads = None
        if "grads" in ref:
            loss = af.add_n([af.reduce_sum(f * (i + 1.0)) for i, f in enumerate(flat)])
            grads = af.gradients(loss, tv)
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            for v in tv:
                v.load(np.array(ref["weights"][v.op.name], np.float32), s)
            vals = s.run(flat)
            for got, want in zip(vals, ref["fetches"]):
                np.testing.assert_allclose(got, np.array(want, np.float32), rtol=1e-5, atol=1e-5)
            if grads is not None:
                for v, gv in zip(tv, s.run(grads)):
                    np.testing.assert_allclose(gv, np.array(ref["grads"][v.op.name], np.float32),
                                               rtol=1e-4, atol=1e-5, err_msg=v.op.name)
