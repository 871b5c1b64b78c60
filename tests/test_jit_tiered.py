"""AF_JIT=tiered: tiered compilation (scheduler/jit/compile.py). Clusters and loops run their ops
interpreted and count what they cost; the session compiles each before a step once the estimate
passes TIER_SECONDS, at the same step every run. jit_scope() marks still compile before the first
step; OFF compiles nothing else, DEFAULT only small loops (tests/test_jit_interrupt.py); the async
compile thread drops queued compiles at exit."""
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import actorflow as af
from actorflow.scheduler.jit import compile as jc
from actorflow.scheduler.jit import jit_pass
from actorflow.scheduler.jit.kernel import make_kernel
from actorflow.scheduler.plan import make_plan

OO = af.OptimizerOptions
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _config(level):
    return af.ConfigProto(graph_options=af.GraphOptions(optimizer_options=OO(global_jit_level=level)))


def _loop_graph():
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [3], name="x")
        _, v = af.while_loop(lambda i, v: i < 200, lambda i, v: (i + 1, v * 0.99 + af.sin(v) * 0.01),
                             [af.constant(0), x])
    return g, x, v


def test_the_pass_plans_tiered_kernels_and_off_plans_none():
    g, x, v = _loop_graph()
    plan = make_plan(g, [x], [v], [])
    tiered = jit_pass(plan, level_on=True, mode="tiered")
    (op,) = [o for o in tiered.ops if o.type == "_JitLoop"]
    assert op.attrs["mode"] == "tiered"
    assert "_JitLoop" not in {o.type for o in jit_pass(plan, level_on=False).ops}


def test_a_tiered_kernel_runs_interpreted_until_its_budget_is_spent_then_compiles(monkeypatch):
    g, x, v = _loop_graph()
    (op,) = [o for o in jit_pass(make_plan(g, [x], [v], []), mode="tiered").ops if o.type == "_JitLoop"]
    xv = np.array([0.5, -1.0, 2.0], np.float32)
    monkeypatch.setattr(jc, "TIER_SECONDS", 1e9)
    never = make_kernel(op.attrs)
    interpreted = [never(np.array(0, np.int32), xv) for _ in range(3)]
    assert not never.tier_due() and never.fn is None            # the budget is not spent: no compile
    ops, elements = never.fallback.ops_run                      # counted, not timed: 3 runs, the same each
    assert ops % 3 == 0 and ops // 3 > 200 and elements % 3 == 0 and elements >= ops
    assert never._spent == pytest.approx(ops * jc.OP_SECONDS + elements * jc.ELEMENT_SECONDS)
    monkeypatch.setattr(jc, "TIER_SECONDS", 0.0)
    before = jc.compile_stats["tiered"]
    k = make_kernel(op.attrs)
    first = k(np.array(0, np.int32), xv)                        # interpreted, and spends the budget
    assert k.fn is None and k.tier_due()
    k.tier_up()
    assert k.fn is not None and k.error is None and not k.tier_due()
    assert jc.compile_stats["tiered"] == before + 1
    compiled = k(np.array(0, np.int32), xv)
    for a, b in zip(interpreted[0], first):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(first, compiled):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    k.tier_up()
    assert jc.compile_stats["tiered"] == before + 1             # once


def _cluster_graph():
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float64, [64], name="x")
        y = af.exp(af.sin(x) * 3.0 + af.cos(x) - 1.0) * 0.5
    return g, x, y


def test_tiered_sessions_compile_a_cluster_that_keeps_running_between_steps(monkeypatch):
    monkeypatch.delenv("AF_JIT", raising=False)
    g, x, y = _cluster_graph()
    xv = np.linspace(-2, 2, 64)
    with af.Session(graph=g, config=_config(OO.OFF)) as s:
        off = s.run(y, {x: xv})
    # the budget: one and a half runs' estimated cost (spent after the second run)
    (op,) = [o for o in jit_pass(make_plan(g, [x], [y], []), mode="tiered").ops if o.type == "_JitCluster"]
    probe = make_kernel(op.attrs)
    probe(xv)
    monkeypatch.setattr(jc, "TIER_SECONDS", 1.5 * probe._spent)
    before = jc.compile_stats["tiered"]
    monkeypatch.setenv("AF_JIT", "tiered")
    with af.Session(graph=g) as s:
        results = []
        for _ in range(4):
            results.append(s.run(y, {x: xv}))
            assert jc.compile_stats["tiered"] - before == (1 if len(results) >= 3 else 0)   # the same step, every run
    for r in results[:2]:
        np.testing.assert_array_equal(r, off)                   # interpreted: the same ops as OFF
    for r in results[2:]:
        np.testing.assert_allclose(r, off, rtol=1e-13)          # compiled: exp/sin's last ulp may differ


def test_default_tiers_small_loops_off_compiles_nothing_on_1_waits_and_af_jit_tiered_tiers(monkeypatch):
    g, x, v = _loop_graph()
    plan = make_plan(g, [x], [v], [])
    from actorflow.scheduler.lower import LowerOptions, _jit
    monkeypatch.delenv("AF_JIT", raising=False)
    (op,) = [o for o in _jit(plan, LowerOptions()).ops if o.type == "_JitLoop"]
    assert op.attrs["mode"] == "tiered"                                                 # DEFAULT: a small loop, tiered
    assert "_JitLoop" not in {o.type for o in _jit(plan, LowerOptions(jit_level=-1)).ops}  # OFF: nothing, as TF
    monkeypatch.setenv("AF_JIT", "0")
    assert "_JitLoop" not in {o.type for o in _jit(plan, LowerOptions()).ops}
    monkeypatch.delenv("AF_JIT")
    (op,) = [o for o in _jit(plan, LowerOptions(jit_level=1)).ops if o.type == "_JitLoop"]
    assert op.attrs["mode"] is None                                                      # ON_1: wait
    monkeypatch.setenv("AF_JIT", "tiered")
    (op,) = [o for o in _jit(plan, LowerOptions()).ops if o.type == "_JitLoop"]
    assert op.attrs["mode"] == "tiered"


async def test_arun_compiles_a_due_kernel_off_the_event_loop(monkeypatch):
    monkeypatch.setenv("AF_JIT", "tiered")
    monkeypatch.setattr(jc, "TIER_SECONDS", 0.0)
    g, x, y = _cluster_graph()
    xv = np.linspace(-2, 2, 64)
    loop_thread = threading.get_ident()
    threads = []
    real = jc.JitKernel.tier_up

    def spy(self):
        threads.append(threading.get_ident())
        return real(self)
    monkeypatch.setattr(jc.JitKernel, "tier_up", spy)
    with af.Session(graph=g) as s:
        first = await s.arun(y, {x: xv})
        second = await s.arun(y, {x: xv})
    assert threads and loop_thread not in threads
    np.testing.assert_allclose(first, second, rtol=1e-13)


def test_jit_scope_marks_compile_before_the_first_step_when_tiered(monkeypatch):
    monkeypatch.setenv("AF_JIT", "tiered")
    monkeypatch.setattr(jc, "TIER_SECONDS", 1e9)
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float64, [4], name="x")
        with af.xla.experimental.jit_scope():
            marked = af.tanh(x * 1.5 + 0.25) * 2.0
        plain = af.exp(af.sin(x) * 3.0 + af.cos(x) - 1.0)
    plan = jit_pass(make_plan(g, [x], [marked, plain], []), mode="tiered")
    modes = sorted(str(o.attrs["mode"]) for o in plan.ops if o.type == "_JitCluster")
    assert modes == ["None", "tiered"]                          # the marked cluster waits for its compile
    before = jc.compile_stats["compiled"]
    with af.Session(graph=g) as s:
        out = s.run([marked, plain], {x: np.linspace(-1, 1, 4)})
    assert jc.compile_stats["compiled"] == before + 1           # the marked one, before the step
    np.testing.assert_allclose(out[0], np.tanh(np.linspace(-1, 1, 4) * 1.5 + 0.25) * 2.0, rtol=1e-14)


def test_a_short_program_tiered_never_imports_numba():
    script = textwrap.dedent("""
        import sys
        import numpy as np, actorflow as af
        g = af.Graph()
        with g.as_default():
            x = af.placeholder(af.float32, [3], name="x")
            y = af.exp(af.sin(x) * 3.0 + af.cos(x) - 1.0)
            _, v = af.while_loop(lambda i, v: i < 50, lambda i, v: (i + 1, v * 0.5 + 1.0), [af.constant(0), x])
        with af.Session(graph=g) as s:
            for _ in range(5):
                s.run([y, v], {x: np.ones(3, np.float32)})
        from actorflow.scheduler.jit.compile import compile_stats
        print("numba" in sys.modules, compile_stats["tiered"])
    """)
    env = dict(os.environ, PYTHONPATH=ROOT, AF_JIT="tiered")
    env.pop("AF_JIT_TIER_SECONDS", None)
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["False", "0"]


def test_the_compile_thread_drops_queued_compiles_when_it_closes():
    t = jc._CompileThread()
    started, go = threading.Event(), threading.Event()

    def running():
        started.set()
        go.wait(30)
        return "done"
    f1 = t.submit(running)
    assert started.wait(30)
    f2 = t.submit(lambda: "queued")
    closer = threading.Thread(target=t.close)
    closer.start()
    go.set()                                                    # the running compile finishes
    closer.join(30)
    assert f1.result(timeout=30) == "done"
    assert f2.cancelled()
    assert t.submit(lambda: 1).cancelled()                      # nothing runs after close


@pytest.mark.parametrize("bad", ["later", "eager"])
def test_unknown_compile_modes_are_an_error(bad):
    with pytest.raises(ValueError, match="tiered"):
        jc.JitKernel("", (), (), None, mode=bad)
