"""A while loop run as one kernel call stops at its step's deadline or cancellation
(kernels/interrupt.py), compiled or interpreted; and the JIT's DEFAULT level runs small loops so
(tiered) and nothing else (scheduler/lower.py `_jit`, cluster.py `small_loop`)."""
import asyncio
import threading
import time

import numpy as np
import pytest

import actorflow as af
from actorflow.kernels import interrupt
from actorflow.scheduler.jit import compile as jc
from actorflow.scheduler.jit import jit_pass
from actorflow.scheduler.jit.cluster import small_loop
from actorflow.scheduler.jit.kernel import make_kernel
from actorflow.scheduler.lower import LowerOptions, _jit
from actorflow.scheduler.plan import make_plan

OO = af.OptimizerOptions
HUGE = 10 ** 15                     # iterations no test waits for


def _session(g, level=None):
    if level is None:
        return af.Session(graph=g)
    return af.Session(graph=g, config=af.ConfigProto(
        graph_options=af.GraphOptions(optimizer_options=OO(global_jit_level=level))))


def _counting_loop():
    """n, and (i, x) of a loop counting both to n: the ops, in the default graph."""
    n = af.placeholder(af.int64, [], name="n")
    i, x = af.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x + 1.0),
                         [af.constant(0, af.int64), af.constant(0.0)])
    return n, i, x


def _scalar_loop():
    g = af.Graph()
    with g.as_default():
        n, i, x = _counting_loop()
    return g, n, i, x


def _vector_loop():
    """A loop over a fixed-shape vector: the static (flat) form of a compiled loop."""
    g = af.Graph()
    with g.as_default():
        n = af.placeholder(af.int64, [], name="n")
        v0 = af.placeholder(af.float32, [4], name="v0")
        i, v = af.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * 0.5 + 1.0),
                             [af.constant(0, af.int64), v0])
    return g, n, v0, i, v


def _idle_cpu(seconds=0.4) -> float:
    """CPU seconds this process spends over `seconds` of sleep: about 0 when no loop runs on (after
    any compile an earlier test left on the compile thread has ended)."""
    jc.wait_for_compiles()
    c0 = time.process_time()
    time.sleep(seconds)
    return time.process_time() - c0


@pytest.mark.parametrize("level,env", [(OO.ON_1, None), (None, None), (None, "tiered")],
                         ids=["compiled", "default", "interpreted"])
def test_a_loop_in_one_kernel_call_stops_at_its_step_deadline(monkeypatch, level, env):
    if env:
        monkeypatch.setenv("AF_JIT", env)
        monkeypatch.setattr(jc, "TIER_SECONDS", 1e9)           # stays interpreted
    else:
        monkeypatch.delenv("AF_JIT", raising=False)
    g, n, i, x = _scalar_loop()
    with _session(g, level) as s:
        assert s.run([i, x], {n: 1000}) == [1000, 1000.0]
        t0 = time.monotonic()
        with pytest.raises(af.errors.DeadlineExceededError):
            s.run([i, x], {n: HUGE}, options=af.RunOptions(timeout_in_ms=200))
        assert time.monotonic() - t0 < 5.0
        assert _idle_cpu() < 0.2                                # the kernel stopped: no thread runs on
        assert s.run([i, x], {n: 70000}) == [70000, 70000.0]    # and the session goes on


def test_a_loop_of_unknown_shapes_stops_at_its_deadline(monkeypatch):
    """The general (not flat) compiled loop: its vector's length is known only at run time."""
    monkeypatch.delenv("AF_JIT", raising=False)
    g = af.Graph()
    with g.as_default():
        n = af.placeholder(af.int64, [], name="n")
        v0 = af.placeholder(af.float32, [None], name="v0")
        i, v = af.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, af.tanh(v) + 0.5),
                             [af.constant(0, af.int64), v0])
    (op,) = [o for o in jit_pass(make_plan(g, [n, v0], [i, v], [])).ops if o.type == "_JitLoop"]
    k = make_kernel(op.attrs)
    assert k.flat is None and "_stopped(stop)" in k.source          # the general loop, and it checks
    with _session(g, OO.ON_1) as s:
        before = jc.compile_stats["rejected"]
        got = s.run(v, {n: 3, v0: np.zeros(5, np.float32)})
        np.testing.assert_allclose(got, np.tanh(np.tanh(np.tanh(np.zeros(5)) + 0.5) + 0.5) + 0.5, rtol=1e-6)
        assert jc.compile_stats["rejected"] == before                # the compiled code ran
        with pytest.raises(af.errors.DeadlineExceededError):
            s.run(v, {n: HUGE, v0: np.zeros(5, np.float32)}, options=af.RunOptions(timeout_in_ms=200))
        assert _idle_cpu() < 0.2


def test_a_static_compiled_loop_stops_and_the_next_step_runs_whole(monkeypatch):
    monkeypatch.delenv("AF_JIT", raising=False)
    g, n, v0, i, v = _vector_loop()
    start = np.array([1, 2, 3, 4], np.float32)
    with _session(g, OO.ON_1) as s:
        kinds = {o.type for o in jit_pass(make_plan(g, [n, v0], [i, v], [])).ops}
        assert "_JitLoop" in kinds
        with pytest.raises(af.errors.DeadlineExceededError):
            s.run(v, {n: HUGE, v0: start}, options=af.RunOptions(timeout_in_ms=200))
        assert _idle_cpu() < 0.2
        got_i, got_v = s.run([i, v], {n: 30, v0: start})
        want = start.copy()
        for _ in range(30):
            want = want * np.float32(0.5) + np.float32(1.0)
        assert got_i == 30
        np.testing.assert_allclose(got_v, want, rtol=1e-6)


async def test_cancelling_arun_stops_the_loop(monkeypatch):
    monkeypatch.delenv("AF_JIT", raising=False)
    g, n, i, x = _scalar_loop()
    with _session(g, OO.ON_1) as s:
        assert await s.arun([i, x], {n: 10}) == [10, 10.0]
        task = asyncio.ensure_future(s.arun([i, x], {n: HUGE}))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.1)
        assert await asyncio.to_thread(_idle_cpu) < 0.2


def test_another_ops_failure_stops_the_loop(monkeypatch):
    monkeypatch.delenv("AF_JIT", raising=False)
    g = af.Graph()
    with g.as_default():
        n, i, x = _counting_loop()
        bad = af.placeholder(af.float32, [None], name="bad")
        checked = af.debugging.check_numerics(bad, "the fed vector")
    with _session(g, OO.ON_1) as s:
        s.run(i, {n: 5})
        with pytest.raises(af.errors.InvalidArgumentError, match="the fed vector"):
            # the check fails while the loop runs (both start at once; the loop never ends alone)
            s.run([i, checked], {n: HUGE, bad: np.array([1.0, np.nan], np.float32)})
        assert _idle_cpu() < 0.2


def test_the_runtime_loop_stays_free_while_a_loop_kernel_runs(monkeypatch):
    """A loop kernel never runs on the runtime's event loop (its cost is unknown): another step
    keeps running beside it, and the deadline fires on time."""
    monkeypatch.delenv("AF_JIT", raising=False)
    g, n, i, x = _scalar_loop()
    with g.as_default():
        y = af.constant(2.0) * af.placeholder(af.float32, [], name="z")
    with _session(g, OO.ON_1) as s:
        s.run(i, {n: 3})
        errs = []

        def long():
            try:
                s.run(i, {n: HUGE}, options=af.RunOptions(timeout_in_ms=1500))
            except af.errors.DeadlineExceededError as e:
                errs.append(e)
        t = threading.Thread(target=long)
        t.start()
        time.sleep(0.2)
        t0 = time.monotonic()
        assert s.run(y, {"z:0": 3.0}) == 6.0
        assert time.monotonic() - t0 < 1.0
        t.join(10)
        assert not t.is_alive() and len(errs) == 1


def test_stop_cells():
    c = interrupt.new_cell()
    prev = interrupt.enter(c)
    try:
        assert interrupt.current() is c
        interrupt.raise_if_stopped(c, "loop 'w'")               # not set: nothing
        interrupt.stop(c, interrupt.DEADLINE)
        interrupt.stop(c, interrupt.CANCELLED)                  # the first reason stays
        with pytest.raises(af.errors.DeadlineExceededError, match="loop 'w' stopped mid-run"):
            interrupt.raise_if_stopped(c, "loop 'w'")
    finally:
        interrupt.leave(prev)
    assert interrupt.current() is interrupt.NEVER
    interrupt.stop(interrupt.NEVER, interrupt.CANCELLED)         # never set
    assert not interrupt.NEVER[0]
    c2 = interrupt.new_cell()
    interrupt.stop(c2, interrupt.FAILED)
    with pytest.raises(af.errors.AbortedError):
        interrupt.raise_if_stopped(c2, "x")


def _loop_of(width, unknown=False):
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None if unknown else width], name="x")
        _, v = af.while_loop(lambda i, v: i < 10, lambda i, v: (i + 1, v * 0.5), [af.constant(0), x])
    return make_plan(g, [x], [v], [])


def test_default_takes_small_static_loops_only_and_no_cluster(monkeypatch):
    monkeypatch.delenv("AF_JIT", raising=False)
    small = _jit(_loop_of(16), LowerOptions())
    (op,) = [o for o in small.ops if o.type == "_JitLoop"]
    assert op.attrs["mode"] == "tiered" and small_loop(op.attrs["spec"])
    assert "_JitLoop" not in {o.type for o in _jit(_loop_of(1 << 19), LowerOptions()).ops}   # big values
    assert "_JitLoop" not in {o.type for o in _jit(_loop_of(16, unknown=True), LowerOptions()).ops}
    # ON_1 takes them all
    assert "_JitLoop" in {o.type for o in _jit(_loop_of(1 << 15), LowerOptions(jit_level=1)).ops}
    g = af.Graph()
    with g.as_default():
        a = af.placeholder(af.float32, [8], name="a")
        y = af.exp(af.sin(a) * 2.0 + 1.0)
    plan = make_plan(g, [a], [y], [])
    assert "_JitCluster" not in {o.type for o in _jit(plan, LowerOptions()).ops}             # no cluster at DEFAULT
    assert "_JitCluster" in {o.type for o in _jit(plan, LowerOptions(jit_level=1)).ops}


def test_default_loop_matches_off_and_compiles_once_due(monkeypatch):
    monkeypatch.delenv("AF_JIT", raising=False)
    monkeypatch.setattr(jc, "TIER_SECONDS", 0.0)
    g, n, v0, i, v = _vector_loop()
    start = np.array([1, -2, 3, 0.25], np.float32)
    with _session(g, OO.OFF) as off:
        want = off.run([i, v], {n: 50, v0: start})
    before = jc.compile_stats["tiered"]
    with _session(g) as s:
        first = s.run([i, v], {n: 50, v0: start})              # interpreted: the same kernels as OFF
        assert first[0] == want[0]
        np.testing.assert_array_equal(first[1], want[1])
        second = s.run([i, v], {n: 50, v0: start})             # compiled before this step
        assert jc.compile_stats["tiered"] - before == 1
        np.testing.assert_allclose(second[1], want[1], rtol=1e-6)


@pytest.mark.parametrize("level", [OO.DEFAULT, OO.ON_1], ids=["default", "on_1"])
def test_an_op_failing_in_a_loop_kernel_is_named_with_its_iteration(monkeypatch, level):
    """As the actors name it (OFF): the op and the iteration, not the loop's kernel alone."""
    monkeypatch.delenv("AF_JIT", raising=False)
    g = af.Graph()
    with g.as_default():
        d = af.placeholder(af.int32, [], name="d")
        _, v = af.while_loop(lambda i, v: i < 5, lambda i, v: (i + 1, v + af.math.floordiv(i, d - i)),
                             [af.constant(0), af.constant(0)], name="w")
    assert "_JitLoop" in {o.type for o in _jit(make_plan(g, [d], [v], []), LowerOptions(jit_level=level)).ops}
    with _session(g, level) as s:
        assert s.run(v, {d: 10}) == sum(i // (10 - i) for i in range(5))
        with pytest.raises(af.errors.InvalidArgumentError, match="division by zero") as err:
            s.run(v, {d: 2})
    assert "[[node w/FloorDiv (FloorDiv) in iteration 2 of loop 'w']]" in str(err.value)
    assert err.value.node_def == "w/FloorDiv"


def test_default_takes_a_small_loop_and_its_gradient_loop(monkeypatch):
    """A gradient loop reads the forward loop's histories, whose first dimension (the trip count)
    is unknown: `small_loop` counts them by their rows."""
    monkeypatch.delenv("AF_JIT", raising=False)
    g = af.Graph()
    with g.as_default():
        n = af.placeholder(af.int32, [], name="n")
        v0 = af.placeholder(af.float32, [4], name="v0")
        _, v = af.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, af.tanh(v) * 0.9 + 0.1),
                             [af.constant(0), v0])
        loss = af.reduce_sum(v * v)
        (dv0,) = af.gradients(loss, [v0])
    plan = _jit(make_plan(g, [n, v0], [loss, dv0], []), LowerOptions())
    assert [o.type for o in plan.ops].count("_JitLoop") == 2
    feed = {n: 6, v0: np.array([0.5, -1.0, 2.0, 0.0], np.float32)}
    with _session(g, OO.OFF) as off, _session(g) as on:
        want = off.run([loss, dv0], feed)
        got = on.run([loss, dv0], feed)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5)


def test_an_inline_session_still_runs_a_loop_kernel_off_its_loop(monkeypatch):
    """inter_op_parallelism_threads < 0 runs every kernel inline, but a loop kernel, whose length is
    unknown, still goes to the pool, where its step's deadline can stop it."""
    monkeypatch.delenv("AF_JIT", raising=False)
    g, n, i, x = _scalar_loop()
    cfg = af.ConfigProto(inter_op_parallelism_threads=-1, graph_options=af.GraphOptions(
        optimizer_options=OO(global_jit_level=OO.ON_1)))
    with af.Session(graph=g, config=cfg) as s:
        assert s.run([i, x], {n: 100}) == [100, 100.0]
        t0 = time.monotonic()
        with pytest.raises(af.errors.DeadlineExceededError):
            s.run(i, {n: HUGE}, options=af.RunOptions(timeout_in_ms=200))
        assert time.monotonic() - t0 < 5.0
        assert _idle_cpu() < 0.2
