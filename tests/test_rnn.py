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


def static_bidi(cell_fn):
    def build(x_np):
        xs = af.unstack(af.constant(x_np), axis=1)
        o, sf, sb = af.nn.static_bidirectional_rnn(cell_fn(), cell_fn(), xs, sequence_length=af.constant(SEQ),
                                                   dtype=af.float32)
        return [af.stack(o, 1), sf, sb]
    return build


def dropout_one(x_np):
    cell = rc.DropoutWrapper(rc.GRUCell(3), input_keep_prob=af.constant(1.0), output_keep_prob=af.constant(1.0),
                             state_keep_prob=af.constant(1.0))
    o, s = af.nn.dynamic_rnn(cell, af.constant(x_np), dtype=af.float32)
    return [o, s]


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
    "static_bidi_gru": static_bidi(lambda: rc.GRUCell(2)),
    "dropout_keep_all": dropout_one,
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


def _lstm_graph(batch=None, steps=None, units=4, **rnn_kw):
    x = af.placeholder(af.float32, [batch, steps, D], name="x")
    cell = rc.LSTMCell(units)
    out, state = af.nn.dynamic_rnn(cell, x, dtype=af.float32, **rnn_kw)
    return x, cell, out, state


def test_unknown_batch_and_time_keep_static_shapes_and_run():
    g = af.Graph()
    with g.as_default():
        x, cell, out, state = _lstm_graph()
        assert out.shape.as_list() == [None, None, 4]
        assert isinstance(state, rc.LSTMStateTuple)
        assert state.h.shape.as_list() == [None, 4]
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            o, st = s.run([out, state], {x: np.ones((2, 7, D), np.float32)})
    assert o.shape == (2, 7, 4) and st.c.shape == (2, 4)
    np.testing.assert_allclose(o[:, -1], st.h, rtol=1e-6)


def test_state_fed_back_continues_the_sequence():
    # A long sequence run in two halves, the final state of the first fed as the initial state of
    # the second (the usual TF 1.x char-RNN loop), gives the same outputs as one run.
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((2, 6, D)).astype(np.float32)
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None, None, D])
        cell = rc.BasicLSTMCell(5)
        init = cell.zero_state(af.shape(x)[0], af.float32)
        out, state = af.nn.dynamic_rnn(cell, x, initial_state=init)
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            full = s.run(out, {x: xs})
            o1, st = s.run([out, state], {x: xs[:, :3]})
            o2 = s.run(out, {x: xs[:, 3:], init: st})
            with pytest.raises(ValueError, match="structure of 2 tensors"):
                s.run(out, {x: xs, init: st.c})
    np.testing.assert_allclose(np.concatenate([o1, o2], 1), full, rtol=1e-5, atol=1e-6)


def test_lstm_training_reduces_loss():
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((8, 6, D)).astype(np.float32)
    ys = np.cumsum(xs[:, :, 0], axis=1)[:, -1:].astype(np.float32)     # needs memory over time
    g = af.Graph()
    with g.as_default():
        af.set_random_seed(3)
        x = af.placeholder(af.float32, [None, 6, D])
        y = af.placeholder(af.float32, [None, 1])
        cell = rc.MultiRNNCell([rc.LSTMCell(8), rc.GRUCell(8)])
        out, state = af.nn.dynamic_rnn(cell, x, sequence_length=af.fill([af.shape(x)[0]], 6), dtype=af.float32)
        pred = af.layers.dense(out[:, -1], 1)
        loss = af.reduce_mean(af.square(pred - y))
        train = af.train.AdamOptimizer(0.05).minimize(loss)
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            first = s.run(loss, {x: xs, y: ys})
            for _ in range(15):
                s.run(train, {x: xs, y: ys})
            last = s.run(loss, {x: xs, y: ys})
    assert last < 0.5 * first


def test_sequence_length_zeroes_outputs_and_copies_state():
    g = af.Graph()
    with g.as_default():
        x = af.constant(np.random.default_rng(2).standard_normal((3, 5, D)).astype(np.float32))
        cell = rc.GRUCell(3)
        out, state = af.nn.dynamic_rnn(cell, x, sequence_length=[5, 0, 2], dtype=af.float32)
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            o, st = s.run([out, state])
    assert np.all(o[1] == 0) and np.all(o[2, 2:] == 0) and np.all(o[0] != 0)
    np.testing.assert_array_equal(st[1], 0)
    np.testing.assert_allclose(st[2], o[2, 1])
    np.testing.assert_allclose(st[0], o[0, 4])


def test_dropout_wrapper_drops_and_variational_mask_is_shared_over_time():
    g = af.Graph()
    with g.as_default():
        x = af.constant(np.ones((4, 6, D), np.float32))
        keep = af.placeholder_with_default(1.0, [])
        cell = rc.DropoutWrapper(rc.BasicRNNCell(16), output_keep_prob=keep, seed=5)
        out, _ = af.nn.dynamic_rnn(cell, x, dtype=af.float32, scope="plain")
        vcell = rc.DropoutWrapper(rc.BasicRNNCell(16, activation=lambda z: z * 0 + 1.0), output_keep_prob=0.5,
                                  variational_recurrent=True, dtype=af.float32, seed=7)
        vout, _ = af.nn.dynamic_rnn(vcell, x, dtype=af.float32, scope="variational")
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            kept = s.run(out)
            dropped = s.run(out, {keep: 0.5})
            v = s.run(vout)
    assert np.all(kept != 0)
    zero = dropped == 0
    assert 0.2 < zero.mean() < 0.8
    np.testing.assert_allclose(dropped[~zero], 2 * kept[~zero], rtol=1e-5)
    # One mask per sequence: every time step has the same zero pattern (values 0 or 1 / 0.5).
    assert set(np.unique(v)) <= {0.0, 2.0}
    assert np.all(v == v[:, :1])
    assert 0 < (v == 0).mean() < 1


def test_cell_scope_and_reuse_names():
    g = af.Graph()
    with g.as_default():
        x = af.zeros([2, D])
        cell = rc.BasicLSTMCell(3)
        state = cell.zero_state(2, af.float32)
        _, state = cell(x, state, scope="my_lstm")
        _, state = cell(x, state)                       # same scope, variables reused
        other = rc.BasicLSTMCell(3)
        other(x, other.zero_state(2, af.float32))
        names = [v.op.name for v in af.trainable_variables()]
    assert names == ["my_lstm/kernel", "my_lstm/bias", "basic_lstm_cell/kernel", "basic_lstm_cell/bias"]
    assert cell.state_size == (3, 3) and cell.output_size == 3


def test_errors_name_the_problem():
    g = af.Graph()
    with g.as_default():
        x = af.zeros([2, 3, D])
        with pytest.raises(ValueError, match="dtype"):
            af.nn.dynamic_rnn(rc.GRUCell(2), x)
        with pytest.raises(ValueError, match="sequence_length must be a vector"):
            af.nn.dynamic_rnn(rc.GRUCell(2), x, sequence_length=[[1, 2]], dtype=af.float32)
        with pytest.raises(TypeError, match="RNNCell"):
            af.nn.dynamic_rnn(object(), x, dtype=af.float32)
        with pytest.raises(ValueError, match="rank at least 2"):
            af.nn.dynamic_rnn(rc.GRUCell(2), af.zeros([3]), dtype=af.float32, scope="r2")
        with pytest.raises(ValueError, match="must be between 0 and 1"):
            rc.DropoutWrapper(rc.GRUCell(2), output_keep_prob=1.5)


def test_scatter_nd_ops_and_gradients():
    g = af.Graph()
    with g.as_default():
        t = af.constant(np.arange(12, dtype=np.float32).reshape(4, 3))
        u = af.constant(np.full((2, 3), -1.0, np.float32))
        idx = af.constant([[1], [3]])
        upd = af.tensor_scatter_nd_update(t, idx, u)
        gn = af.gather_nd(t, [[0, 2], [3, 1]])
        sc = af.scatter_nd([[1], [1], [0]], af.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), [3, 2])
        gt, gu = af.gradients(af.reduce_sum(upd * af.constant(np.arange(12, dtype=np.float32).reshape(4, 3))),
                              [t, u])
        bad = af.gather_nd(t, [[4, 0]])
        with af.Session() as s:
            a, b, c, dt, du = s.run([upd, gn, sc, gt, gu])
            with pytest.raises(af.errors.InvalidArgumentError, match="GatherNd"):
                s.run(bad)
    want = np.arange(12, dtype=np.float32).reshape(4, 3)
    want[[1, 3]] = -1
    np.testing.assert_array_equal(a, want)
    np.testing.assert_array_equal(b, [2.0, 10.0])
    np.testing.assert_array_equal(c, [[5, 6], [4, 6], [0, 0]])
    w = np.arange(12, dtype=np.float32).reshape(4, 3)
    mask = np.ones((4, 3), np.float32)
    mask[[1, 3]] = 0
    np.testing.assert_array_equal(dt, w * mask)
    np.testing.assert_array_equal(du, w[[1, 3]])


def test_reused_scope_shares_the_cell_variables():
    # The TF 1.x train/eval pattern: a second model under the same scope with reuse=True, new cells.
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None, 5, D])
        with af.variable_scope("model"):
            o1, _ = af.nn.dynamic_rnn(rc.GRUCell(4), x, dtype=af.float32)
        with af.variable_scope("model", reuse=True):
            o2, _ = af.nn.dynamic_rnn(rc.GRUCell(4), x, dtype=af.float32)
        names = [v.op.name for v in af.trainable_variables()]
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            a, b = s.run([o1, o2], {x: np.ones((2, 5, D), np.float32)})
    assert names == ["model/rnn/gru_cell/gates/kernel", "model/rnn/gru_cell/gates/bias",
                     "model/rnn/gru_cell/candidate/kernel", "model/rnn/gru_cell/candidate/bias"]
    np.testing.assert_array_equal(a, b)


class _HandMadeCell(rc.RNNCell):
    """A TF-1.x-style custom cell: its own __call__, variables made with get_variable on each call."""

    def __init__(self, units):
        super().__init__()
        self._units = units

    @property
    def state_size(self):
        return self._units

    @property
    def output_size(self):
        return self._units

    def __call__(self, inputs, state, scope=None):
        with af.variable_scope(scope or "hand_made", reuse=af.AUTO_REUSE):
            w = af.get_variable("w", [inputs.shape.as_list()[1] + self._units, self._units],
                                initializer=af.constant_initializer(0.1))
            h = af.tanh(af.matmul(af.concat([inputs, state], 1), w))
        return h, h


def test_variables_created_inside_the_loop_are_lifted_out_of_it():
    # get_variable in the body of dynamic_rnn's while loop creates the variable once, in the root
    # frame (TF's init_scope); the loop reads it and the gradient reaches it.
    x_np = np.random.default_rng(5).standard_normal((2, 4, D)).astype(np.float32)
    g = af.Graph()
    with g.as_default():
        out, _ = af.nn.dynamic_rnn(_HandMadeCell(3), af.constant(x_np), dtype=af.float32)
        (w,) = af.trainable_variables()
        assert w.op.name == "rnn/hand_made/w"
        (gw,) = af.gradients(af.reduce_sum(out), [w])
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            o, gv = s.run([out, gw])
    h = np.zeros((2, 3), np.float32)
    wn = np.full((D + 3, 3), 0.1, np.float32)
    for t in range(4):
        h = np.tanh(np.concatenate([x_np[:, t], h], 1) @ wn)
        np.testing.assert_allclose(o[:, t], h, rtol=1e-5)
    assert gv.shape == (D + 3, 3) and np.abs(gv).sum() > 0


def test_state_dropout_spares_the_lstm_memory():
    # The default filter drops out h, never c, in every layer of a stack (TF's behaviour).
    g = af.Graph()
    with g.as_default():
        x = af.constant(np.ones((64, 1, D), np.float32))
        cells = [rc.LSTMCell(8), rc.LSTMCell(8)]
        plain_out, plain = af.nn.dynamic_rnn(rc.MultiRNNCell(cells), x, dtype=af.float32, scope="m")
        wrapped = rc.DropoutWrapper(rc.MultiRNNCell(cells), state_keep_prob=0.5, seed=1)
        _, dropped = af.nn.dynamic_rnn(wrapped, x, dtype=af.float32, scope="m")
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            a, b = s.run([plain, dropped])
    for layer in range(2):
        np.testing.assert_allclose(b[layer].c, a[layer].c, rtol=1e-6)
        zero = b[layer].h == 0
        assert 0.2 < zero.mean() < 0.8
        np.testing.assert_allclose(b[layer].h[~zero], 2 * a[layer].h[~zero], rtol=1e-5)
