"""Compiled while loops over values of an unknown batch size (``placeholder([None, 32])``) and
their gradient loops (actorflow/scheduler/jit/symbolic.py): the unknown dimensions get symbols,
the gradient's run-time shape ops (Shape, BroadcastGradientArgs, Sum, Reshape) fold, and both
loops become one `_JitLoop` each, which one compiled function serves for every batch size.
Compared with the interpreted graph (JIT off) for batch sizes that change between runs of one
session; a call whose sizes break what the compiled code assumed runs the interpreted loop."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import actorflow as af
from actorflow.scheduler.jit import jit_pass
from actorflow.scheduler.jit.compile import compile_stats, wait_for_compiles
from actorflow.scheduler.plan import make_plan
from tests.loop_bodies import lstm_body

OO = af.OptimizerOptions
RC = af.RewriterConfig
_RUNTIME_SHAPE_OPS = {"Shape", "BroadcastGradientArgs", "AccumulatorV2", "AccumulatorPush", "AccumulatorPop"}


@pytest.fixture(autouse=True)
def _compile_before_the_first_step(monkeypatch):
    """The tests count compiled functions and rejected calls: compile before the first step (the
    default), not on the compile thread while the interpreted ops run."""
    monkeypatch.setenv("AF_JIT_COMPILE", "wait")


def _config(jit: bool):
    return af.ConfigProto(graph_options=af.GraphOptions(
        optimizer_options=OO(global_jit_level=OO.ON_1 if jit else OO.OFF),
        rewrite_options=RC(constant_folding=RC.OFF, arithmetic_optimization=RC.OFF)))


def _loop_ops(plan):
    """{op type: count} of the ops of `plan` inside while loops (their frames' Enter..Exit)."""
    from actorflow.scheduler.rewrite import loop_frames
    frames = loop_frames(plan)
    out: dict = {}
    for op in plan.ops:
        if frames.get(op) is not None:
            out[op.type] = out.get(op.type, 0) + 1
    return out


def _lstm(width=32, batch=None):
    g = af.Graph()
    with g.as_default():
        n = af.placeholder(af.int32, [], name="n")
        w = af.placeholder(af.float32, [2 * width, 4 * width], name="w")
        b = af.placeholder(af.float32, [4 * width], name="b")
        x = af.placeholder(af.float32, [batch, width], name="x")

        body = lstm_body(x, w, b)
        zero = af.zeros_like(x)
        _, h, c = af.while_loop(lambda t, h, c: t < n, body, [af.constant(0), zero, zero])
        loss = af.reduce_sum(h * h) + af.reduce_sum(c)
        fetches = [loss] + af.gradients(loss, [w, b, x])
    return g, (n, w, b, x), fetches


def test_lstm_gradient_loop_over_an_unknown_batch_compiles():
    g, feeds, fetches = _lstm()
    plan = jit_pass(make_plan(g, list(feeds), fetches, []))
    loops = [op for op in plan.ops if op.type == "_JitLoop"]
    assert len(loops) == 2 and not _loop_ops(plan), _loop_ops(plan)    # no op left in a frame
    assert not _RUNTIME_SHAPE_OPS & {op.type for op in plan.ops if "while" in op.name}
    grad = next(op for op in loops if "grad" in op.name)
    statics = grad.attrs["spec"].input_statics
    # the batch dimension is one symbol for the gradient's variables and every saved row
    assert {st[0] for st in statics if len(st) == 2 and st[1] == 32} == {-2}, statics
    assert {st[1] for st in statics if len(st) == 3} == {-2}, statics
    # the operands of the cell's two products and the split's gate the gradient reads only for
    # their shape (BroadcastGradientArgs, folded): the forward loop does not save them
    fwd = next(op for op in loops if op is not grad).attrs["spec"]
    assert len(fwd.shape_only) == 3 and len(fwd.saves) == 10, (fwd.shape_only, len(fwd.saves))


def test_the_unknown_batch_loop_saves_what_the_static_one_does():
    """A static batch's gradient has no Shape ops (its shapes are constants): what the forward
    loop saves over an unknown batch, less what it leaves out, is what it saves over a static one."""
    def saves(batch):
        g, feeds, fetches = _lstm(batch=batch)
        plan = jit_pass(make_plan(g, list(feeds), fetches, []))
        sp = next(op.attrs["spec"] for op in plan.ops if op.type == "_JitLoop" and "grad" not in op.name)
        return len(sp.saves) - len(sp.shape_only)
    assert saves(None) == saves(3) == 7


def test_a_gradient_loop_run_interpreted_reads_the_shapes_of_unsaved_values(monkeypatch):
    """The histories the forward loop does not compute (read for their shape only) still have
    the shape of its values: the gradient loop's interpreted form (what runs for calls its
    compiled form rejects) gets the same results from them."""
    from actorflow.scheduler.jit.compile import JitKernel
    call = JitKernel.__call__
    ran = []

    def gradient_interpreted(self, *args):
        if "grad" not in self.what:
            return call(self, *args)
        ran.append(self.what)
        return self.fallback(*args)
    monkeypatch.setattr(JitKernel, "__call__", gradient_interpreted)
    rng = np.random.default_rng(7)
    g, (n, w, b, x), fetches = _lstm()
    feed = {n: 7, w: rng.standard_normal((64, 128)).astype(np.float32) * 0.1,
            b: rng.standard_normal(128).astype(np.float32) * 0.1, x: rng.standard_normal((3, 32)).astype(np.float32)}
    with af.Session(graph=g, config=_config(True)) as on, af.Session(graph=g, config=_config(False)) as off:
        got, want = on.run(fetches, feed), off.run(fetches, feed)
    assert ran
    for a, e in zip(got, want):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)


def test_lstm_gradient_with_changing_batch_sizes_matches_the_interpreted_run():
    rng = np.random.default_rng(0)
    g, (n, w, b, x), fetches = _lstm()
    wv = rng.standard_normal((64, 128)).astype(np.float32) * 0.1
    bv = rng.standard_normal(128).astype(np.float32) * 0.1
    with af.Session(graph=g, config=_config(True)) as on, af.Session(graph=g, config=_config(False)) as off:
        compiled = None
        for batch, steps in ((3, 25), (5, 25), (3, 9), (1, 12), (4, 0)):
            feed = {n: steps, w: wv, b: bv, x: rng.standard_normal((batch, 32)).astype(np.float32)}
            rejected = compile_stats["rejected"]
            got = on.run(fetches, feed)
            assert compile_stats["rejected"] == rejected, batch        # the compiled loops ran
            if compiled is None:
                compiled = compile_stats["compiled"]
            assert compile_stats["compiled"] == compiled, batch        # one function for every batch size
            want = off.run(fetches, feed)
            for a, e in zip(got, want):
                assert np.shape(a) == np.shape(e)
                np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("v_shape", [[None, 4], [None, 1]])
def test_sizes_of_one_that_broadcast_run_a_compiled_variant(v_shape, grad):
    """``h * v`` in the body: the compiled loop assumes h and v have one batch size (they do, in
    every iteration, when they do on entry). Fed v of 1 row against h of 5 (numpy broadcasting),
    the check on entry fails; the loop analyzed again with that dimension 1 compiles (once, for
    every later call of that kind), forward and gradient loop alike, and matches the interpreted
    graph; the first kind of call keeps its own function."""
    g = af.Graph()
    with g.as_default():
        v = af.placeholder(af.float64, v_shape, name="v")
        h0 = af.placeholder(af.float64, [None, 4], name="h0")
        _, h = af.while_loop(lambda t, h: t < 5, lambda t, h: (t + 1, af.tanh(h * v + 0.5)), [0, h0])
        loss = af.reduce_sum(h * h)
        fetches = [loss] + (af.gradients(loss, [v, h0]) if grad else [])
    plan = jit_pass(make_plan(g, [v, h0], fetches, []))
    loops = 2 if grad else 1
    assert [op.type for op in plan.ops].count("_JitLoop") == loops and not _loop_ops(plan)
    rng = np.random.default_rng(2)
    with af.Session(graph=g, config=_config(True)) as on, af.Session(graph=g, config=_config(False)) as off:
        for vr, hr, variants in ((3, 3, 0), (1, 5, loops), (1, 2, 0), (4, 4, 0), (1, 1, 0)):
            feed = {v: rng.standard_normal((vr, v_shape[1])), h0: rng.standard_normal((hr, 4))}
            before = dict(compile_stats)
            if variants:        # the first call of a new kind runs interpreted while its variant compiles
                first = on.run(fetches, feed)
                wait_for_compiles()
                assert compile_stats["variants"] - before["variants"] == variants, (vr, hr)
                for a, e in zip(first, off.run(fetches, feed)):
                    np.testing.assert_allclose(a, e, rtol=1e-12, atol=1e-12)
            before = dict(compile_stats)
            got = on.run(fetches, feed)
            assert compile_stats["rejected"] == before["rejected"], (vr, hr)      # compiled code ran
            assert compile_stats["variants"] == before["variants"], (vr, hr)
            for a, e in zip(got, off.run(fetches, feed)):
                assert np.shape(a) == np.shape(e)
                np.testing.assert_allclose(a, e, rtol=1e-12, atol=1e-12)


def test_sizes_no_variant_serves_run_the_interpreted_loop():
    """h0 of 1 row against v of 5: the loop variable h changes shape in the first iteration,
    which no compiled loop allows; the interpreted loop runs it (numpy broadcasting)."""
    g = af.Graph()
    with g.as_default():
        v = af.placeholder(af.float64, [None, 4], name="v")
        h0 = af.placeholder(af.float64, [None, 4], name="h0")
        _, h = af.while_loop(lambda t, h: t < 5, lambda t, h: (t + 1, af.tanh(h * v + 0.5)), [0, h0])
    rng = np.random.default_rng(5)
    feed = {v: rng.standard_normal((5, 4)), h0: rng.standard_normal((1, 4))}
    with af.Session(graph=g, config=_config(True)) as on, af.Session(graph=g, config=_config(False)) as off:
        before = dict(compile_stats)
        got = on.run(h, feed)           # interpreted, while a variant is tried on the compile thread
        np.testing.assert_allclose(got, off.run(h, feed), rtol=1e-12, atol=1e-12)
        wait_for_compiles()
        assert compile_stats["variants"] == before["variants"]      # none can serve it
        got = on.run(h, feed)
        assert compile_stats["rejected"] == before["rejected"] + 1
        np.testing.assert_allclose(got, off.run(h, feed), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("v_shape", [[4], [1, 4], [None, 1], [1, 1]])
def test_broadcasting_gradients_fold_to_static_reductions(v_shape):
    """``h * v`` with v of shape [4], [1, 4], [None, 1] (a mask of the batch) or [1, 1] against h
    of [None, 4]: BroadcastGradientArgs folds to a sum over the rows or the columns (or both: a
    scalar the Reshape makes [1, 1]) for v, whatever
    the batch size; with 1 row, where whether the kernel sums over an axis depends on the batch
    size, that axis has size 1 and the Reshape after the sum makes the shapes agree."""
    g = af.Graph()
    with g.as_default():
        v = af.placeholder(af.float32, v_shape, name="v")
        h0 = af.placeholder(af.float32, [None, 4], name="h0")
        _, h = af.while_loop(lambda t, h: t < 6, lambda t, h: (t + 1, af.sin(h * v) + h * 0.5), [0, h0])
        loss = af.reduce_sum(h * h)
        fetches = [loss] + af.gradients(loss, [v, h0])
    plan = jit_pass(make_plan(g, [v, h0], fetches, []))
    assert [op.type for op in plan.ops].count("_JitLoop") == 2 and not _loop_ops(plan)
    rng = np.random.default_rng(3)
    with af.Session(graph=g, config=_config(True)) as on, af.Session(graph=g, config=_config(False)) as off:
        for rows in (2, 1, 7):
            vs = [rows if d is None else d for d in v_shape]
            feed = {v: rng.standard_normal(vs).astype(np.float32), h0: rng.standard_normal((rows, 4)).astype(np.float32)}
            rejected = compile_stats["rejected"]
            got = on.run(fetches, feed)
            assert compile_stats["rejected"] == rejected
            for a, e in zip(got, off.run(fetches, feed)):
                assert np.shape(a) == np.shape(e)
                np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)      # (float32 sums, reordered)


def test_a_loop_that_uses_a_shape_as_data_stays_on_the_runtime():
    """A body that computes with its batch size (``Shape`` as a value, not a shape) compiles
    neither loop: both run on the actor runtime as before, with the same results."""
    g = af.Graph()
    with g.as_default():
        h0 = af.placeholder(af.float32, [None, 3], name="h0")

        def body(t, h):
            rows = af.cast(af.shape(h)[0], af.float32)
            return t + 1, af.tanh(h / rows + 0.25)
        _, h = af.while_loop(lambda t, h: t < 4, body, [0, h0])
        loss = af.reduce_sum(h * h)
        fetches = [loss] + af.gradients(loss, [h0])
    plan = jit_pass(make_plan(g, [h0], fetches, []))
    assert "_JitLoop" not in [op.type for op in plan.ops] and _loop_ops(plan).get("Shape")
    feed = {h0: np.random.default_rng(4).standard_normal((3, 3)).astype(np.float32)}
    with af.Session(graph=g, config=_config(True)) as on, af.Session(graph=g, config=_config(False)) as off:
        for a, e in zip(on.run(fetches, feed), off.run(fetches, feed)):
            np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-7)


BODY_OPS = ["add_row", "mul_v", "tanh", "max_h0", "where", "matmul"]


@st.composite
def batched_loops(draw):
    ops = [draw(st.sampled_from(BODY_OPS)) for _ in range(draw(st.integers(1, 4)))]
    steps = draw(st.integers(0, 12))
    batches = draw(st.lists(st.sampled_from([1, 2, 5]), min_size=2, max_size=3))
    return ops, steps, batches


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(batched_loops())
def test_random_batched_loop_gradients_match_the_interpreted_gradient(case):
    """Random bodies over [None, 3] values (with a [3] vector that broadcasts, a [3, 3] matrix,
    and an invariant of the batch's shape), fed batch sizes that change from run to run."""
    ops, steps, batches = case
    g = af.Graph()
    with g.as_default():
        x0 = af.placeholder(af.float64, [None, 3], name="x0")
        u = af.placeholder(af.float64, [None, 3], name="u")      # an invariant of the batch's size
        v = af.placeholder(af.float64, [3], name="v")
        m = af.placeholder(af.float64, [3, 3], name="m")

        def body(i, x):
            for op in ops:
                if op == "add_row":
                    x = x + v
                elif op == "mul_v":
                    x = x * v * 0.5
                elif op == "tanh":
                    x = af.tanh(x + u)
                elif op == "max_h0":
                    x = af.maximum(x, u * 0.3)
                elif op == "where":
                    x = af.where(x > 0.1, x * 0.5, x - u)
                else:
                    x = af.matmul(x, m) * 0.3
            return i + 1, x
        _, x = af.while_loop(lambda i, x: i < steps, body, [0, x0])
        loss = af.reduce_sum(x * x)
        fetches = [loss] + [d for d in af.gradients(loss, [x0, u, v, m]) if d is not None]
    feeds = [x0, u, v, m]
    plan = jit_pass(make_plan(g, feeds, fetches, []))
    assert [op.type for op in plan.ops].count("_JitLoop") == 2 and not _loop_ops(plan), _loop_ops(plan)
    rng = np.random.default_rng(steps)
    with af.Session(graph=g, config=_config(True)) as on, af.Session(graph=g, config=_config(False)) as off:
        for batch in batches:
            feed = {x0: rng.standard_normal((batch, 3)), u: rng.standard_normal((batch, 3)),
                    v: rng.standard_normal(3), m: rng.standard_normal((3, 3))}
            rejected = compile_stats["rejected"]
            got = on.run(fetches, feed)
            assert compile_stats["rejected"] == rejected
            for a, e in zip(got, off.run(fetches, feed)):
                assert np.shape(a) == np.shape(e)
                np.testing.assert_allclose(a, e, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("zero_steps", [True, False])
def test_empty_histories_of_unknown_rows_keep_the_batch_size(zero_steps):
    """No iteration ran: the forward loop's empty histories still have rows of the batch's shape,
    so that the gradient loop's check on entry passes and its compiled form runs (zero times)."""
    g = af.Graph()
    with g.as_default():
        n = af.placeholder(af.int32, [], name="n")
        h0 = af.placeholder(af.float32, [None, 2], name="h0")
        _, h = af.while_loop(lambda t, h: t < n, lambda t, h: (t + 1, af.sigmoid(h) * h), [0, h0])
        fetches = af.gradients(af.reduce_sum(h), [h0])
    feed = {n: 0 if zero_steps else 3, h0: np.ones((3, 2), np.float32)}
    rejected = compile_stats["rejected"]
    with af.Session(graph=g, config=_config(True)) as on, af.Session(graph=g, config=_config(False)) as off:
        got, want = on.run(fetches, feed), off.run(fetches, feed)
    assert compile_stats["rejected"] == rejected
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)


def test_a_batch_too_big_for_the_compiled_matmuls_runs_the_interpreted_loop():
    """A MatMul with a symbolic batch calls cblas from the compiled loop (blascall.py; explicit
    loops where no BLAS is loaded, fine for an RNN cell of a few rows); a batch that makes it
    bigger than a static MatMul the JIT takes (MAX_BLAS_LOOP_GEMM, or MAX_LOOP_GEMM for the
    explicit loops) runs the interpreted ops (numpy's BLAS) instead, with the same results."""
    from actorflow.scheduler.jit import blascall
    from actorflow.scheduler.jit.cluster import MAX_BLAS_LOOP_GEMM, MAX_LOOP_GEMM
    limit = MAX_BLAS_LOOP_GEMM if blascall.available() else MAX_LOOP_GEMM
    rows = limit // (64 * 128) + 1                  # the cell's product is [rows, 64] x [64, 128]
    rng = np.random.default_rng(6)
    g, (n, w, b, x), fetches = _lstm()
    feed = {n: 3, w: rng.standard_normal((64, 128)).astype(np.float32) * 0.1,
            b: rng.standard_normal(128).astype(np.float32) * 0.1}
    with af.Session(graph=g, config=_config(True)) as on, af.Session(graph=g, config=_config(False)) as off:
        for batch, big in ((2, False), (rows - 1, False), (rows, True), (2, False)):
            feed[x] = rng.standard_normal((batch, 32)).astype(np.float32)
            before = compile_stats["big"]
            got = on.run(fetches, feed)
            assert (compile_stats["big"] > before) == big, batch
            for a, e in zip(got, off.run(fetches, feed)):
                np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)
