"""dynamic_rnn's loops under the JIT: GatherV2 of a time step, TensorScatterUpdate of an output row
and GatherNd of its gradient compile (scheduler/jit/codegen.py, flat.py), the scattered buffer is
written in place, and float32 exp/tanh take fastmath32's vectorizable form."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from actorflow.scheduler.jit import compile as jc
from actorflow.scheduler.jit.compile import compile_stats

OO = af.OptimizerOptions


@pytest.fixture(autouse=True)
def _compile_before_the_first_step(monkeypatch):
    monkeypatch.setenv("AF_JIT_COMPILE", "wait")


@pytest.fixture
def sources(monkeypatch):
    """The generated source of every JIT kernel compiled during the test."""
    out = []
    compile_one = jc.JitKernel._compile

    def record(self):
        out.append((self.what, self.source))
        return compile_one(self)
    monkeypatch.setattr(jc.JitKernel, "_compile", record)
    return out


def _rnn(cell_fn, batch=4, steps=7, depth=3, seq_len=False, time_major=False, embed=False):
    g = af.Graph()
    with g.as_default():
        af.set_random_seed(5)
        shape = [steps, batch, depth] if time_major else [batch, steps, depth]
        if embed:
            ids = af.placeholder(af.int32, shape[:2], name="ids")
            table = af.Variable(np.random.default_rng(1).standard_normal((11, depth)).astype(np.float32), name="table")
            x = af.nn.embedding_lookup(table, ids)
            feed_x = ids, np.random.default_rng(2).integers(0, 11, shape[:2]).astype(np.int32)
        else:
            x = af.placeholder(af.float32, shape, name="x")
            feed_x = x, np.random.default_rng(2).standard_normal(shape).astype(np.float32)
        lengths = af.placeholder(af.int32, [batch], name="lengths") if seq_len else None
        out, state = af.nn.dynamic_rnn(cell_fn(), x, sequence_length=lengths, dtype=af.float32, time_major=time_major)
        loss = af.reduce_mean(out * out) + af.reduce_mean(af.nest.flatten(state)[0])
        train = af.train.GradientDescentOptimizer(0.3).minimize(loss)
        init = af.global_variables_initializer()
        variables = af.global_variables()
    feed = dict([feed_x])
    if seq_len:
        feed[lengths] = np.array([steps, 1, steps - 2, 3][:batch], np.int32)
    return g, out, loss, train, init, variables, feed


def _run(g, out, loss, train, init, variables, feed, level, steps=3):
    cfg = af.ConfigProto(graph_options=af.GraphOptions(optimizer_options=OO(global_jit_level=level)))
    with af.Session(graph=g, config=cfg) as sess:
        sess.run(init)
        first = sess.run(out, feed)
        losses = [sess.run([loss, train], feed)[0] for _ in range(steps)]
        return first, losses, sess.run(variables)


CELLS = {
    "lstm": lambda: af.nn.rnn_cell.LSTMCell(5),
    "basic_lstm": lambda: af.nn.rnn_cell.BasicLSTMCell(6),
    "gru": lambda: af.nn.rnn_cell.GRUCell(5),
    "basic_rnn": lambda: af.nn.rnn_cell.BasicRNNCell(4),
}


@pytest.mark.parametrize("cell", sorted(CELLS))
def test_dynamic_rnn_loops_compile_and_train_as_interpreted(cell, sources):
    case = _rnn(CELLS[cell])
    before = compile_stats["rejected"]
    on = _run(*case, OO.ON_1)
    loops = {w for w, _ in sources if w.startswith("while loop")}
    # the forward loop (fetched alone, then saving what its gradient reads) and its gradient loop
    assert loops == {"while loop 'rnn/while'", "while loop 'gradients/rnn/while_grad/grad_loop'"}, loops
    assert compile_stats["rejected"] == before                 # the compiled code ran every call
    off = _run(*case, OO.OFF)
    np.testing.assert_allclose(on[0], off[0], rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(on[1], off[1], rtol=2e-5, atol=1e-6)
    for a, b in zip(on[2], off[2]):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("variant", ["time_major", "seq_len"])
def test_dynamic_rnn_variants_match_the_interpreted_run(variant, sources):
    case = _rnn(CELLS["lstm"], **{variant: True})
    on = _run(*case, OO.ON_1)
    off = _run(*case, OO.OFF)
    np.testing.assert_allclose(on[0], off[0], rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(on[1], off[1], rtol=2e-5, atol=1e-6)
    for a, b in zip(on[2], off[2]):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)


def test_the_output_buffer_is_written_in_place_and_exp_tanh_vectorize(sources):
    _run(*_rnn(CELLS["lstm"], steps=12), OO.ON_1, steps=1)
    src = dict(sources)
    fwd = next(s for w, s in src.items() if w.startswith("while loop") and "grad" not in w)
    grad = next(s for w, s in src.items() if w.startswith("while loop") and "grad" in w)
    for s in (fwd, grad):
        assert "static while loop" in s                          # flat.py's form: no arrays made per iteration
        assert "TensorScatterUpdate: index out of range" in s
        assert ".copy()" not in s                                # the [time, batch, width] buffer is not copied
    assert "_exp32(" in fwd and "_tanh32(" in fwd and "np.exp(" not in fwd and "np.tanh(" not in fwd


def test_an_index_out_of_range_in_a_compiled_loop_names_the_op():
    g = af.Graph()
    with g.as_default():
        table = af.placeholder(af.float32, [5, 3], name="table")
        n = af.placeholder(af.int32, [], name="n")
        buf0 = af.zeros([5, 3])

        def body(i, acc, buf):
            row = af.gather(table, i, name="row")
            buf = af.tensor_scatter_nd_update(buf, af.reshape(i, [1, 1]), af.expand_dims(row * 2.0, 0))
            return i + 1, acc + row, buf
        _, acc, buf = af.while_loop(lambda i, acc, buf: i < n, body, [af.constant(0), af.zeros([3]), buf0])
    cfg = af.ConfigProto(graph_options=af.GraphOptions(optimizer_options=OO(global_jit_level=OO.ON_1)))
    t = np.arange(15, dtype=np.float32).reshape(5, 3)
    with af.Session(graph=g, config=cfg) as sess:
        a, b = sess.run([acc, buf], {table: t, n: 5})
        np.testing.assert_array_equal(a, t.sum(0))
        np.testing.assert_array_equal(b, t * 2)
        with pytest.raises(af.errors.InvalidArgumentError, match="row"):
            sess.run(acc, {table: t, n: 7})                      # gather(table, 5): out of range
        np.testing.assert_array_equal(sess.run(acc, {table: t, n: 2}), t[:2].sum(0))     # and it runs on


def _ulps(a, b):
    ia = a.astype(np.float32).view(np.int32).astype(np.int64)
    ib = b.astype(np.float32).view(np.int32).astype(np.int64)
    ia = np.where(ia < 0, -(ia & 0x7FFFFFFF), ia)
    ib = np.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    return np.abs(ia - ib)


def test_fastmath32_exp_and_tanh_are_within_an_ulp_of_exact():
    from numba import njit

    from actorflow.scheduler.jit.fastmath32 import exp32, tanh32

    @njit(error_model="numpy")
    def both(x, e, t):
        for i in range(x.size):
            e[i] = exp32(x[i])
            t[i] = tanh32(x[i])
    x = np.concatenate([np.linspace(-110, 95, 400_001, dtype=np.float32), np.linspace(-2, 2, 400_001, dtype=np.float32),
                        np.float32([0.0, -0.0, 1e-30, -1e-30, 88.72, 88.73, -87.3, -103.9, 9.0, -9.0])])
    e, t = np.empty_like(x), np.empty_like(x)
    both(x, e, t)
    with np.errstate(over="ignore"):
        ref_e = np.exp(x.astype(np.float64)).astype(np.float32)
    ref_t = np.tanh(x.astype(np.float64)).astype(np.float32)
    normal = np.isfinite(ref_e) & (ref_e >= np.finfo(np.float32).tiny)
    assert _ulps(e[normal], ref_e[normal]).max() <= 1
    rest, ref_rest = e[~normal], ref_e[~normal]                  # inf, 0 and subnormals
    assert np.all((rest == ref_rest) | (np.abs(rest - np.where(np.isinf(ref_rest), 0, ref_rest)) <= np.finfo(np.float32).tiny))
    nz = np.abs(ref_t) >= np.finfo(np.float32).tiny
    assert _ulps(t[nz], ref_t[nz]).max() <= 1
    special = np.float32([np.inf, -np.inf, np.nan, -0.0])
    e, t = np.empty_like(special), np.empty_like(special)
    both(special, e, t)
    np.testing.assert_array_equal(e[:2], [np.inf, 0.0])
    np.testing.assert_array_equal(t[:2], [1.0, -1.0])
    assert np.isnan(e[2]) and np.isnan(t[2])
    assert e[3] == 1.0 and t[3] == 0.0 and np.signbit(t[3])


@pytest.mark.parametrize("perm", [(1, 0, 2), (2, 0, 1), (0, 2, 1), (3, 1, 0, 2)])
def test_transposes_in_a_cluster_copy_in_explicit_loops(perm, sources):
    shape = (2, 3, 4, 5)[: len(perm)]
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, shape, name="x")
        y = af.reduce_sum(af.transpose(x * 2.0 + 1.0, perm) * 3.0, axis=0)
    v = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    cfg = af.ConfigProto(graph_options=af.GraphOptions(optimizer_options=OO(global_jit_level=OO.ON_1)))
    with af.Session(graph=g, config=cfg) as sess:
        got = sess.run(y, {x: v})
    np.testing.assert_allclose(got, (np.transpose(v * 2 + 1, perm) * 3).sum(0), rtol=1e-6)
    src = "".join(s for _, s in sources)
    assert "_JitCluster" not in src and "np.transpose(" not in src and ".transpose(" not in src
    assert any(w.startswith("cluster") for w, _ in sources)


def test_each_loop_kernel_is_compiled_once(monkeypatch):
    """The signature compiled before the first step is the one every call uses (a loop's last
    argument, the BLAS table, once differed in being read-only: every loop compiled twice)."""
    kernels = []
    compile_one = jc.JitKernel._compile

    def record(self):
        kernels.append(self)
        return compile_one(self)
    monkeypatch.setattr(jc.JitKernel, "_compile", record)
    # (products of a cell of width 32 over a batch of 32 call cblas: the table is a real one)
    _run(*_rnn(lambda: af.nn.rnn_cell.LSTMCell(32), batch=32, steps=5, depth=8), OO.ON_1, steps=2)
    loops = [k for k in kernels if k.what.startswith("while loop")]
    assert loops
    for k in loops:
        disp = jc.load_source(k.flat.source if k.flat is not None else k.source)
        assert len(disp.signatures) == 1, (k.what, disp.signatures)


def test_an_embedding_input_trains_with_both_loops_compiled(sources):
    """dynamic_rnn over an embedding lookup: the loop's gradient for its input is one row an
    iteration, summed into the accumulator at that row (TensorScatterAdd), so the gradient loop
    compiles too, and the variables match the interpreted run's."""
    case = _rnn(CELLS["gru"], embed=True)
    on = _run(*case, OO.ON_1)
    loops = {w for w, _ in sources if w.startswith("while loop")}
    assert loops == {"while loop 'rnn/while'", "while loop 'gradients/rnn/while_grad/grad_loop'"}, loops
    grad_src = next(s for w, s in sources if "grad_loop" in w)
    assert "TensorScatterAdd: index out of range" in grad_src and ".copy()" not in grad_src
    off = _run(*case, OO.OFF)
    np.testing.assert_allclose(on[1], off[1], rtol=2e-5, atol=1e-6)
    for a, b in zip(on[2], off[2]):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)


def test_a_loop_invariants_one_row_gradient_sums_as_the_dense_one_bit_for_bit(monkeypatch):
    import actorflow.graph.control_flow_grad as cfg_grad
    results = []
    for sparse in (True, False):
        if not sparse:
            monkeypatch.setattr(cfg_grad, "_one_row", lambda grad, x: False)
        g, out, loss, train, init, variables, feed = _rnn(CELLS["lstm"], embed=True, steps=9)
        types = {op.type for op in g.get_operations()}
        assert ("TensorScatterAdd" in types) == sparse
        results.append(_run(g, out, loss, train, init, variables, feed, OO.OFF))
    (l1, v1), (l2, v2) = (r[1:] for r in results)
    assert l1 == l2
    for a, b in zip(v1, v2):
        np.testing.assert_array_equal(a, b)


def test_tensor_scatter_nd_add_sums_duplicates_and_differentiates():
    g = af.Graph()
    with g.as_default():
        t = af.constant(np.ones((4, 2), np.float32))
        u = af.constant(np.arange(6, dtype=np.float32).reshape(3, 2))
        y = af.tensor_scatter_nd_add(t, [[1], [3], [1]], u)
        w = af.constant(np.arange(8, dtype=np.float32).reshape(4, 2))
        gt, gu = af.gradients(af.reduce_sum(y * w), [t, u])
        bad = af.tensor_scatter_add(t, [[4]], u[:1])
    with af.Session(graph=g) as sess:
        np.testing.assert_array_equal(sess.run(y), [[1, 1], [5, 7], [1, 1], [3, 4]])
        np.testing.assert_array_equal(sess.run(gt), np.arange(8).reshape(4, 2))
        np.testing.assert_array_equal(sess.run(gu), [[2, 3], [6, 7], [2, 3]])
        with pytest.raises(af.errors.InvalidArgumentError, match="TensorScatterAdd"):
            sess.run(bad)


def _batch_open_rnn():
    """dynamic_rnn over inputs of unknown batch size that need a gradient (scaled by a variable
    before the loop): the loops are analyzed with symbolic shapes, the input's per-step gradient
    stays one row (GatherV2's gradient keeps the [1, ...] row shape), and both loops compile."""
    g = af.Graph()
    with g.as_default():
        af.set_random_seed(5)
        x = af.placeholder(af.float32, [None, 6, 3], name="x")
        scale = af.Variable(np.linspace(0.5, 1.5, 3).astype(np.float32), name="scale")
        out, state = af.nn.dynamic_rnn(af.nn.rnn_cell.LSTMCell(4), x * scale, dtype=af.float32)
        loss = af.reduce_mean(out * out) + af.reduce_mean(state.h)
        train = af.train.GradientDescentOptimizer(0.3).minimize(loss)
        init = af.global_variables_initializer()
        variables = af.global_variables()
    feed = {x: np.random.default_rng(3).standard_normal((5, 6, 3)).astype(np.float32)}
    return g, out, loss, train, init, variables, feed


def test_loops_over_a_batch_of_unknown_size_compile_with_the_inputs_gradient(sources):
    case = _batch_open_rnn()
    types = {op.type for op in case[0].get_operations()}
    assert "TensorScatterAdd" in types and "UnsortedSegmentSum" not in types     # one row an iteration
    on = _run(*case, OO.ON_1)
    loops = {w for w, _ in sources if w.startswith("while loop")}
    assert loops == {"while loop 'rnn/while'", "while loop 'gradients/rnn/while_grad/grad_loop'"}, loops
    off = _run(*case, OO.OFF)
    np.testing.assert_allclose(on[0], off[0], rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(on[1], off[1], rtol=2e-5, atol=1e-6)
    for a, b in zip(on[2], off[2]):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)


def test_keras_lstm_loops_compile_by_default_once_due(monkeypatch, sources):
    """A Keras LSTM's loops (the batch size open, the gate weights split before the loop) are taken
    at DEFAULT, tiered, and train as the interpreted run does."""
    from actorflow import keras
    monkeypatch.delenv("AF_JIT", raising=False)
    monkeypatch.setattr(jc, "TIER_SECONDS", 0.0)
    rng = np.random.default_rng(0)
    x = np.eye(6, dtype=np.float32)[rng.integers(0, 6, (16, 5))]

    def train(level):
        keras.backend.clear_session()
        cfg = af.ConfigProto(graph_options=af.GraphOptions(optimizer_options=OO(global_jit_level=level)))
        keras.backend.set_session(af.Session(config=cfg))
        af.set_random_seed(3)
        model = keras.Sequential([keras.layers.LSTM(4, input_shape=(5, 6)), keras.layers.RepeatVector(5),
                                  keras.layers.LSTM(6, return_sequences=True)])
        model.compile("sgd", "mse")
        return [model.train_on_batch(x, x) for _ in range(4)], model.get_weights()
    default = train(OO.DEFAULT)
    loops = {w for w, _ in sources if w.startswith("while loop")}
    assert len(loops) == 4, loops            # two forward loops and their two gradient loops
    off = train(OO.OFF)
    np.testing.assert_allclose(default[0], off[0], rtol=2e-5)
    for a, b in zip(default[1], off[1]):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)


def _wide_open_rnn(width=64, batch=96, steps=5, depth=32):
    """dynamic_rnn over a batch of unknown size whose products (96 x 96 x 256 multiply-adds) are past
    what the explicit loops take (cluster.MAX_LOOP_GEMM): the loops call cblas for them."""
    g = af.Graph()
    with g.as_default():
        af.set_random_seed(7)
        x = af.placeholder(af.float32, [None, steps, depth], name="x")
        out, state = af.nn.dynamic_rnn(af.nn.rnn_cell.BasicLSTMCell(width), x, dtype=af.float32)
        loss = af.reduce_mean(out * out) + af.reduce_mean(state.h)
        train = af.train.GradientDescentOptimizer(0.3).minimize(loss)
        init = af.global_variables_initializer()
        variables = af.global_variables()
    feed = {x: np.random.default_rng(4).standard_normal((batch, steps, depth)).astype(np.float32)}
    return g, out, loss, train, init, variables, feed


def test_wide_products_over_an_open_batch_call_cblas_and_compile_by_default(monkeypatch, sources):
    """A symbolic product calls cblas from the compiled loop, so a batch that makes it bigger than the
    explicit loops' limit still runs compiled (before, every call fell back to the interpreted ops),
    and DEFAULT takes such a loop: its products are below SMALL_LOOP_MACS."""
    from actorflow.scheduler.jit import blascall
    from actorflow.scheduler.jit.cluster import MAX_LOOP_GEMM
    if not blascall.available():
        pytest.skip("no BLAS loaded: the loops keep their explicit products")
    assert 96 * 96 * 256 > MAX_LOOP_GEMM
    monkeypatch.delenv("AF_JIT", raising=False)
    monkeypatch.setattr(jc, "TIER_SECONDS", 0.0)
    case = _wide_open_rnn()
    before = dict(compile_stats)
    default = _run(*case, OO.DEFAULT, steps=4)
    loops = {w: src for w, src in sources if w.startswith("while loop")}
    assert set(loops) == {"while loop 'rnn/while'", "while loop 'gradients/rnn/while_grad/grad_loop'"}, set(loops)
    assert all("blas_gemm(" in src for src in loops.values())
    assert compile_stats["big"] == before["big"] and compile_stats["rejected"] == before["rejected"]
    off = _run(*case, OO.OFF, steps=4)
    np.testing.assert_allclose(default[0], off[0], rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(default[1], off[1], rtol=2e-5, atol=1e-6)
    for a, b in zip(default[2], off[2]):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)


def test_default_leaves_loops_with_products_past_small_loop_macs_to_the_actors(monkeypatch):
    """One thread's cblas call is slower than the pool's split product for those (cluster.py)."""
    from actorflow.scheduler.jit import cluster
    from actorflow.scheduler.lower import LowerOptions, _jit
    from actorflow.scheduler.plan import make_plan
    monkeypatch.delenv("AF_JIT", raising=False)
    g, out, loss, train, init, variables, feed = _wide_open_rnn()

    def loops(level):
        return [o.type for o in _jit(make_plan(g, list(feed), [loss], []), LowerOptions(jit_level=level)).ops].count(
            "_JitLoop")
    assert loops(0) == 1
    # the cell's product counts the open batch as SYMBOL_SIZE rows: [rows, 32 + 64] x [96, 4 * 64]
    product = cluster.SYMBOL_SIZE * 96 * 256
    monkeypatch.setattr(cluster, "SMALL_LOOP_MACS", product - 1)
    assert loops(0) == 0 and loops(1) == 1
    monkeypatch.setattr(cluster, "SMALL_LOOP_MACS", product)
    assert loops(0) == 1


def _dropout_rnn(batch=4):
    """dynamic_rnn of a DropoutWrapper (output and state dropout: RandomUniform of a Shape in the loop's
    body) over a batch of unknown size."""
    g = af.Graph()
    with g.as_default():
        af.set_random_seed(3)
        x = af.placeholder(af.float32, [None, 6, 5], name="x")
        cell = af.nn.rnn_cell.DropoutWrapper(af.nn.rnn_cell.BasicLSTMCell(8), output_keep_prob=0.7,
                                             state_keep_prob=0.8)
        out, state = af.nn.dynamic_rnn(cell, x, dtype=af.float32)
        loss = af.reduce_mean(out * out) + af.reduce_mean(state.h)
        train = af.train.GradientDescentOptimizer(0.5).minimize(loss)
        init = af.global_variables_initializer()
        variables = af.global_variables()
    feed = {x: np.random.default_rng(0).standard_normal((batch, 6, 5)).astype(np.float32)}
    return g, out, loss, train, init, variables, feed


@pytest.mark.parametrize("level", ["on_1", "default"])
def test_dropout_in_a_loop_compiles_and_draws_the_actors_numbers(monkeypatch, sources, level):
    """The loop's RandomUniform ops draw from their session streams (rt.random_uniform_f32): the
    compiled loops drop the units the actors drop, step after step (the forward loop fetched alone
    first, then trained), and at DEFAULT the interpreted steps before the tier-up and the compiled
    ones after continue one stream."""
    monkeypatch.delenv("AF_JIT", raising=False)
    monkeypatch.setattr(jc, "TIER_SECONDS", 0.0)
    case = _dropout_rnn()
    before = dict(compile_stats)
    on = _run(*case, OO.ON_1 if level == "on_1" else OO.DEFAULT, steps=4)
    loops = {w: src for w, src in sources if w.startswith("while loop")}
    assert set(loops) == {"while loop 'rnn/while'", "while loop 'gradients/rnn/while_grad/grad_loop'"}, set(loops)
    assert "random_uniform_f32(rs0" in loops["while loop 'rnn/while'"]
    assert compile_stats["rejected"] == before["rejected"] and compile_stats["big"] == before["big"]
    off = _run(*case, OO.OFF, steps=4)
    np.testing.assert_array_equal(on[0] == 0, off[0] == 0)         # the same units dropped
    np.testing.assert_allclose(on[0], off[0], rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(on[1], off[1], rtol=2e-5, atol=1e-6)
    for a, b in zip(on[2], off[2]):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)


def test_on_1_leaves_a_loop_whose_products_are_big_at_a_typical_batch_to_the_actors(monkeypatch):
    """A product over an open batch is sized for SYMBOL_SIZE rows when the loop is analyzed: past
    MAX_BLAS_LOOP_GEMM there, every call of a usual batch would run the interpreted loop on one
    thread, slower than the actors (whose pool splits the products)."""
    from actorflow.scheduler.jit import blascall
    from actorflow.scheduler.jit.cluster import MAX_BLAS_LOOP_GEMM, SYMBOL_SIZE
    from actorflow.scheduler.lower import LowerOptions, _jit
    from actorflow.scheduler.plan import make_plan
    if not blascall.available():
        pytest.skip("no BLAS loaded: the explicit loops' limit applies")
    monkeypatch.delenv("AF_JIT", raising=False)

    def loops(width, depth):
        g, out, loss, train, init, variables, feed = _wide_open_rnn(width=width, depth=depth)
        return [o.type for o in _jit(make_plan(g, list(feed), [loss], []), LowerOptions(jit_level=1)).ops].count(
            "_JitLoop")
    assert SYMBOL_SIZE * (256 + 512) * 4 * 512 > MAX_BLAS_LOOP_GEMM >= SYMBOL_SIZE * (32 + 64) * 4 * 64
    assert loops(64, 32) == 1 and loops(512, 256) == 0


def test_a_dropout_wrapper_fed_its_keep_prob_compiles_and_wants_a_scalar(sources):
    """``keep_prob = tf.placeholder(tf.float32)`` (no shape, as char-rnn programs write it): the wrapper
    takes it as the scalar TF requires, so the loop that takes it in has known ranks and compiles; a
    fed keep_prob that is not a scalar is an error naming the wrapper's reshape."""
    g = af.Graph()
    with g.as_default():
        af.set_random_seed(5)
        keep = af.placeholder(af.float32, name="keep_prob")
        x = af.placeholder(af.float32, [None, 4, 3], name="x")
        cell = af.nn.rnn_cell.DropoutWrapper(af.nn.rnn_cell.BasicLSTMCell(6), output_keep_prob=keep)
        out, _ = af.nn.dynamic_rnn(cell, x, dtype=af.float32)
        loss = af.reduce_mean(out * out)
        train = af.train.GradientDescentOptimizer(0.5).minimize(loss)
        init = af.global_variables_initializer()
    xv = np.random.default_rng(1).standard_normal((5, 4, 3)).astype(np.float32)
    runs = {}
    for level in (OO.ON_1, OO.OFF):
        cfg = af.ConfigProto(graph_options=af.GraphOptions(optimizer_options=OO(global_jit_level=level)))
        with af.Session(graph=g, config=cfg) as s:
            s.run(init)
            runs[level] = [s.run([loss, train], {x: xv, keep: 0.6})[0] for _ in range(3)]
            if level == OO.OFF:
                with pytest.raises(af.errors.InvalidArgumentError, match="DropoutWrapperInit/keep_prob"):
                    s.run(loss, {x: xv, keep: [0.5, 0.5]})
    assert {w for w, _ in sources if w.startswith("while loop")} == {
        "while loop 'rnn/while'", "while loop 'gradients/rnn/while_grad/grad_loop'"}
    np.testing.assert_allclose(runs[OO.ON_1], runs[OO.OFF], rtol=2e-5)
