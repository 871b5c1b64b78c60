"""Dynamic control flow (issue 4): cond, case, while_loop and the raw primitives against the equivalent
Python computation; dead-tensor propagation; gradients through cond and loops against central finite
differences; bounded memory of long loops; errors inside loop bodies; concurrent steps of one loop."""
from __future__ import annotations

import asyncio
import collections
import gc
import importlib.util
import pathlib
import sys
import threading
import time

import numpy as np
import pytest

import actorflow as af
from actorflow.graph import control_flow_grad  # noqa: F401  (registers the primitives' gradients)
from actorflow.graph.ops import accumulator_ops
from actorflow.graph.ops import control_flow_ops as cfo
from tests.conftest import run
from tests.gradcheck import check_gradients

pytestmark = pytest.mark.usefixtures("graph")

RNG = np.random.default_rng(4)
f64 = af.float64

# Known runtime bugs reported to the lead (see the report of issue 4, parts 4-5).




# ---------------------------------------------------------------------------------------------
# cond and case
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("xv", [-2.0, 0.0, 3.0])
def test_cond_matches_python(xv):
    x = af.placeholder(f64, [])
    y = af.cond(x > 0, lambda: x * x + 1.0, lambda: af.sin(x) - 1.0)
    expect = xv * xv + 1.0 if xv > 0 else np.sin(xv) - 1.0
    assert run(y, {x: xv}) == pytest.approx(expect)


def test_cond_with_nested_structures_and_outside_values():
    x = af.placeholder(f64, [2])
    k = af.constant(np.array([10.0, 20.0]))
    Pair = collections.namedtuple("Pair", "a b")
    out = af.cond(af.reduce_sum(x) > 0,
                  lambda: {"p": Pair(x + k, x * 2.0), "q": (k,)},
                  lambda: {"p": Pair(x - k, x), "q": (x,)})
    xv = np.array([1.0, 2.0])
    r = run(out, {x: xv})
    np.testing.assert_allclose(r["p"].a, xv + [10, 20])
    np.testing.assert_allclose(r["p"].b, xv * 2)
    np.testing.assert_allclose(r["q"][0], [10, 20])
    r = run(out, {x: -xv})
    np.testing.assert_allclose(r["p"].a, -xv - [10, 20])
    np.testing.assert_allclose(r["q"][0], -xv)


def test_cond_builds_both_branches_but_runs_one():
    x = af.placeholder(f64, [None])
    # The false branch would fail at run time (a reshape of 3 elements to 7): it must not run.
    y = af.cond(af.reduce_sum(x) > 0, lambda: x * 2.0, lambda: af.reshape(x, [7])[:3])
    np.testing.assert_allclose(run(y, {x: np.ones(3)}), [2, 2, 2])
    with pytest.raises(af.errors.InvalidArgumentError):
        run(y, {x: -np.ones(3)})


def test_nested_cond():
    x = af.placeholder(f64, [])

    def f(v):
        return af.cond(v > 0, lambda: af.cond(v > 10, lambda: v * 100.0, lambda: v * 10.0), lambda: -v)
    y = f(x)
    for xv, expect in ((20.0, 2000.0), (5.0, 50.0), (-3.0, 3.0)):
        assert run(y, {x: xv}) == pytest.approx(expect)


def test_cond_errors_name_the_problem():
    x = af.placeholder(f64, [])
    with pytest.raises(TypeError, match="bool"):
        af.cond(x, lambda: x, lambda: x)
    with pytest.raises(TypeError, match="different dtypes"):
        af.cond(x > 0, lambda: x, lambda: af.cast(x, af.float32))
    with pytest.raises(ValueError, match="same structure"):
        af.cond(x > 0, lambda: (x, x), lambda: x)


@pytest.mark.parametrize("xv", [-5, 0, 1, 2, 7])
def test_case_matches_python(xv):
    x = af.placeholder(af.int32, [])
    y = af.case([(x < 0, lambda: af.constant(-1)), (af.equal(x, 0), lambda: af.constant(0)),
                 (x < 2, lambda: x * 10)], default=lambda: x * x)
    expect = -1 if xv < 0 else 0 if xv == 0 else xv * 10 if xv < 2 else xv * xv
    assert run(y, {x: xv}) == expect


def test_case_dict_and_no_default():
    x = af.placeholder(af.int32, [])
    y = af.case({x > 3: lambda: af.constant(1), x <= 3: lambda: af.constant(2)})
    assert run(y, {x: 5}) == 1
    assert run(y, {x: 1}) == 2


# ---------------------------------------------------------------------------------------------
# Raw primitives and dead tensors
# ---------------------------------------------------------------------------------------------

def test_raw_switch_and_merge():
    x = af.placeholder(f64, [])
    p = af.placeholder(af.bool, [])
    f, t = cfo.switch(x, p)
    value, index = cfo.merge([f * 2.0, t + 100.0])
    assert run([value, index], {x: 1.0, p: True}) == [101.0, 1]
    assert run([value, index], {x: 1.0, p: False}) == [2.0, 0]


def test_dead_tensors_propagate_through_chains():
    x = af.placeholder(f64, [None])
    p = af.placeholder(af.bool, [])
    f, t = cfo.switch(x, p)
    # Long chains on both sides; the untaken one would fail if it ran (reshape to 7 elements).
    a = t
    for i in range(20):
        a = af.exp(a * 0.01) + float(i)
    b = af.reshape(f, [7])
    for _ in range(20):
        b = af.tanh(b) * 2.0
    b = b[:3]
    out, idx = cfo.merge([b, a])
    ref = np.ones(3)
    for i in range(20):
        ref = np.exp(ref * 0.01) + i
    got, which = run([out, idx], {x: np.ones(3), p: True})
    np.testing.assert_allclose(got, ref)
    assert which == 1
    # A control dependency on a dead op makes the dependent op dead too; merge picks the live side.
    with af.control_dependencies([b.op]):
        c = af.identity(x) * 3.0
    out2, _ = cfo.merge([c, a])
    np.testing.assert_allclose(run(out2, {x: np.ones(3), p: True}), ref)


def test_fetching_a_dead_tensor_is_an_error_naming_it():
    x = af.placeholder(f64, [])
    p = af.placeholder(af.bool, [])
    f, t = cfo.switch(x, p)
    y = af.square(f, name="on_false_side")
    with pytest.raises(af.errors.InvalidArgumentError, match="on_false_side"):
        run(y, {x: 2.0, p: True})
    assert run(y, {x: 2.0, p: False}) == 4.0


def test_hand_built_loop_runs_and_refuses_gradients():
    x = af.placeholder(f64, [])
    e = cfo.enter(x, "hand_loop")
    m, _ = cfo.merge([e, e])
    c = cfo.loop_cond(m < 100.0)
    f, t = cfo.switch(m, c)
    nxt = cfo.next_iteration(af.identity(t) * 2.0)
    m.op._update_input(1, nxt)
    out = cfo.exit(f)
    assert run(out, {x: 3.0}) == 192.0
    with pytest.raises(LookupError, match="hand-built loop"):
        af.gradients(out, [x])


# ---------------------------------------------------------------------------------------------
# while_loop
# ---------------------------------------------------------------------------------------------

def test_while_loop_counts():
    n = af.placeholder(af.int32, [])
    i = af.while_loop(lambda i: i < n, lambda i: i + 1, [af.constant(0)])
    assert isinstance(i, af.Tensor)            # one loop variable: a tensor, as in TF 1.x
    for nv in (0, 1, 17):
        assert run(i, {n: nv}) == nv


@pytest.mark.parametrize("par", [1, 2, 10])
def test_while_loop_fibonacci_matches_python(par):
    n = af.placeholder(af.int32, [])
    _, a, b = af.while_loop(lambda i, a, b: i < n, lambda i, a, b: (i + 1, b, a + b),
                            [af.constant(0), af.constant(0, af.int64), af.constant(1, af.int64)],
                            parallel_iterations=par)
    a_py, b_py = 0, 1
    for _ in range(50):
        a_py, b_py = b_py, a_py + b_py
    assert run(a, {n: 50}) == a_py


def test_while_loop_nested_structure_of_loop_vars():
    State = collections.namedtuple("State", "step total")
    x = af.placeholder(f64, [2])

    def body(s, d):
        return State(s.step + 1, s.total + d["v"]), {"v": d["v"] * 2.0}
    s, d = af.while_loop(lambda s, d: s.step < 4, body, [State(af.constant(0), af.zeros([2], f64)), {"v": x}])
    step, total, v = run([s.step, s.total, d["v"]], {x: np.array([1.0, -1.0])})
    assert step == 4
    np.testing.assert_allclose(total, [15, -15])
    np.testing.assert_allclose(v, [16, -16])


def test_while_loop_shape_invariants():
    x = af.placeholder(f64, [1])
    _, v = af.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, af.concat([v, v], 0)), [af.constant(0), x],
                         shape_invariants=[af.TensorShape([]), af.TensorShape([None])])
    assert v.shape.as_list() == [None]
    assert run(v, {x: [2.0]}).shape == (8,)
    with pytest.raises(ValueError, match="shape_invariants|not an invariant"):
        af.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, af.concat([v, v], 0)), [af.constant(0), x])


def test_nested_loops_match_python():
    n = af.placeholder(af.int32, [])

    def outer(i, acc):
        def inner(j, a):
            return j + 1, a + i * j
        _, acc = af.while_loop(lambda j, a: j < i, inner, [af.constant(0), acc])
        return i + 1, acc
    _, total = af.while_loop(lambda i, a: i < n, outer, [af.constant(0), af.constant(0)])
    for nv in (0, 1, 6, 13):
        assert run(total, {n: nv}) == sum(i * j for i in range(nv) for j in range(i))


def test_cond_inside_loop_collatz():
    x = af.placeholder(af.int64, [])

    def body(steps, v):
        v = af.cond(af.equal(af.floormod(v, 2), 0), lambda: af.floordiv(v, 2), lambda: 3 * v + 1)
        return steps + 1, v
    steps, _ = af.while_loop(lambda s, v: v > 1, body, [af.constant(0), x])

    def collatz(v):
        s = 0
        while v > 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            s += 1
        return s
    for xv in (1, 6, 27, 97):
        assert run(steps, {x: xv}) == collatz(xv)


def test_loop_inside_cond():
    x = af.placeholder(af.int32, [])
    y = af.cond(x > 0,
                lambda: af.while_loop(lambda i, a: i < x, lambda i, a: (i + 1, a * 2), [af.constant(0), af.constant(1)])[1],
                lambda: af.constant(-1))
    assert run(y, {x: 10}) == 1024
    assert run(y, {x: -3}) == -1


def test_maximum_iterations():
    x = af.placeholder(f64, [])
    m = af.placeholder(af.int32, [])
    # cond alone would never stop; maximum_iterations does.
    y = af.while_loop(lambda v: v > -1.0, lambda v: v + 1.0, [x], maximum_iterations=m)
    assert run(y, {x: 0.0, m: 7}) == 7.0
    assert run(y, {x: 0.0, m: 0}) == 0.0
    # cond stops first
    z = af.while_loop(lambda v: v < 3.0, lambda v: v + 1.0, [x], maximum_iterations=100)
    assert run(z, {x: 0.0}) == 3.0
    with pytest.raises(TypeError, match="maximum_iterations"):
        af.while_loop(lambda v: v < 3.0, lambda v: v + 1.0, [x], maximum_iterations=2.5)


def test_loop_with_side_effects_ordered_by_control_dependencies():
    v = af.Variable(0.0, dtype=f64)
    log = af.Variable(np.zeros(5), dtype=f64)

    def body(i):
        total = af.assign_add(v, af.cast(i, f64))          # the running sum 0, 1, 3, 6, 10
        upd = af.scatter_update(log, i[None], total[None])
        with af.control_dependencies([upd]):
            return i + 1
    r = af.while_loop(lambda i: i < 5, body, [af.constant(0)], parallel_iterations=1)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        assert sess.run(r) == 5
        assert sess.run(v) == 10.0
        np.testing.assert_allclose(sess.run(log), [0, 1, 3, 6, 10])


@pytest.mark.timeout(30)
def test_variable_read_inside_loop_sees_this_iterations_update():
    v = af.Variable(0.0, dtype=f64)

    def body(i, s):
        with af.control_dependencies([af.assign_add(v, 1.0)]):
            return i + 1, s + v.read_value()
    _, s = af.while_loop(lambda i, s: i < 5, body, [af.constant(0), af.constant(0.0, f64)], parallel_iterations=1)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        assert sess.run(s) == 1.0 + 2.0 + 3.0 + 4.0 + 5.0


def test_variable_update_in_cond_runs_only_on_taken_branch():
    v = af.Variable(1.0, dtype=f64)
    x = af.placeholder(f64, [])
    y = af.cond(x > 0, lambda: af.assign_add(v, x), lambda: af.identity(v.read_value()))
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        assert sess.run(y, {x: 2.0}) == 3.0
        assert sess.run(y, {x: -5.0}) == 3.0
        assert sess.run(v) == 3.0


def test_loop_updates_with_constant_only_values_run_every_iteration():
    # assign_add(v, 1.0): the update's only message input is a Const inside the loop.
    v = af.Variable(0.0, dtype=f64)

    def body(i):
        with af.control_dependencies([af.assign_add(v, 1.0)]):
            return i + 1
    r = af.while_loop(lambda i: i < 6, body, [af.constant(0)])
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        assert sess.run(r) == 6
        assert sess.run(v) == 6.0


def test_error_in_loop_body_names_the_op():
    # Pinned to the CPU: its Gather checks indices (a GPU Gather does not, as in TF).
    with af.device("/cpu:0"):
        p = af.constant(np.arange(3.0))
        _, s = af.while_loop(lambda i, s: i < 5, lambda i, s: (i + 1, s + af.gather(p, i, name="pick")),
                             [af.constant(0), af.constant(0.0, f64)])
    with pytest.raises(af.errors.InvalidArgumentError, match="pick") as info:
        run(s)
    assert "pick" in info.value.node_def


def test_error_in_loop_body_names_the_iteration():
    # Pinned to the CPU: its Gather checks indices (a GPU Gather does not, as in TF).
    with af.device("/cpu:0"):
        p = af.constant(np.arange(3.0))
        _, s = af.while_loop(lambda i, s: i < 5, lambda i, s: (i + 1, s + af.gather(p, i, name="pick")),
                             [af.constant(0), af.constant(0.0, f64)])
    with pytest.raises(af.errors.InvalidArgumentError, match="iteration 3"):
        run(s)


def _loop_peak_blocks(n_iter: int) -> int:
    """Peak growth of the Python heap (allocated blocks, sampled by a thread) while a counting loop
    runs: as informative as a tracemalloc peak here, without tracing's ten-fold slowdown."""
    g = af.Graph()
    with g.as_default():
        n = af.placeholder(af.int32, [])
        _, s = af.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s + 1.0),
                             [af.constant(0), af.constant(0.0, f64)])
        with af.Session() as sess:
            assert sess.run(s, {n: 10}) == 10.0       # build the actors before measuring
            gc.collect()
            base = sys.getallocatedblocks()
            peak = [0]
            stop = threading.Event()

            def sample():
                while not stop.is_set():
                    peak[0] = max(peak[0], sys.getallocatedblocks() - base)
                    time.sleep(0.005)
            sampler = threading.Thread(target=sample)
            sampler.start()
            try:
                assert sess.run(s, {n: n_iter}) == float(n_iter)
            finally:
                stop.set()
                sampler.join()
            return peak[0]


def test_100k_iteration_loop_runs_in_bounded_memory():
    small = _loop_peak_blocks(10_000)
    big = _loop_peak_blocks(100_000)
    # Frames forget finished iterations: ten times the iterations, (nearly) the same peak; keeping
    # even one object per iteration would add 100,000 blocks.
    assert big < 2 * small + 5_000, (small, big)


@pytest.mark.asyncio
async def test_concurrent_steps_of_one_loop_do_not_mix():
    n = af.placeholder(af.int32, [])
    x = af.placeholder(f64, [])
    _, s = af.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s + x * af.cast(i, f64)),
                         [af.constant(0), af.constant(0.0, f64)], parallel_iterations=4)
    async with af.Session() as sess:
        feeds = [(k * 7 % 23, float(k)) for k in range(20)]
        results = await asyncio.gather(*[sess.arun(s, {n: nv, x: xv}) for nv, xv in feeds])
    for (nv, xv), r in zip(feeds, results):
        assert float(r) == pytest.approx(xv * sum(range(nv)))


# ---------------------------------------------------------------------------------------------
# Gradients
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_gradient(sign):
    def build(x, a):
        return af.cond(af.reduce_sum(x) > 0, lambda: af.sin(x) * a, lambda: x * x * a + a)
    check_gradients(build, [sign * np.abs(RNG.normal(size=(3,))), RNG.normal(size=(3,))])


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_gradient_when_one_branch_ignores_the_input(sign):
    def build(x, a):
        # The true branch does not use `a`: its gradient must be zero there, not missing or dead.
        return af.cond(af.reduce_sum(x) > 0, lambda: x * 2.0, lambda: x * a) + x
    _, numeric = check_gradients(build, [sign * np.abs(RNG.normal(size=(2,))), RNG.normal(size=(2,))])
    if sign > 0:
        np.testing.assert_allclose(numeric[1], 0.0, atol=1e-9)


@pytest.mark.parametrize("xv", [-3.0, 0.5, 4.0])
def test_case_and_nested_cond_gradients(xv):
    def build(x, a):
        return af.case([(x < 0.0, lambda: a * x * x), (x < 1.0, lambda: af.cond(a > 0, lambda: af.exp(x * a),
                                                                               lambda: af.sin(a)))],
                       default=lambda: x * a * 3.0)
    check_gradients(build, [np.array(xv), np.array(0.7)])


def test_while_loop_gradient_of_power():
    def build(x):
        return af.while_loop(lambda i, v: i < 5, lambda i, v: (i + 1, v * x), [af.constant(0), af.ones_like(x)])[1]
    analytic, _ = check_gradients(build, [RNG.normal(size=(3,))])


@pytest.mark.parametrize("par", [1, 10])
def test_rnn_loop_gradient(par):
    def build(h0, w, b):
        def body(i, h):
            return i + 1, af.tanh(af.matmul(h, w) + b)
        _, h = af.while_loop(lambda i, h: i < 4, body, [af.constant(0), h0], parallel_iterations=par)
        return af.reduce_sum(h * h)
    check_gradients(build, [RNG.normal(size=(2, 3)), RNG.normal(size=(3, 3)) * 0.5, RNG.normal(size=(3,))])


def test_loop_gradient_with_dynamic_trip_count_and_maximum_iterations():
    def build(x, n):
        return af.while_loop(lambda v: af.reduce_sum(v) < 1e9, lambda v: af.sin(v) * 1.5 + x,
                             [x], maximum_iterations=n)
    for n in (0, 1, 6):
        check_gradients(build, [RNG.normal(size=(3,)), np.array(n, dtype=np.int32)])


def test_nested_loop_gradient():
    def build(x, a):
        def outer(i, v):
            def inner(j, u):
                return j + 1, u * a + af.cast(j, f64)
            _, v2 = af.while_loop(lambda j, u: j < i, inner, [af.constant(0), v])
            return i + 1, af.sin(v2)
        return af.while_loop(lambda i, v: i < 4, outer, [af.constant(0), x])[1]
    check_gradients(build, [RNG.normal(size=(3,)), RNG.normal(size=(3,)) * 0.5])


@pytest.mark.parametrize("par", [1, 10])
def test_cond_inside_loop_gradient(par):
    def build(x, a):
        def body(i, v):
            def even():
                return af.cond(i > 2, lambda: v * a, lambda: v + a)
            v = af.cond(af.equal(af.floormod(i, 2), 0), even, lambda: af.exp(v * 0.1) * a)
            return i + 1, v
        return af.while_loop(lambda i, v: i < 6, body, [af.constant(0), x], parallel_iterations=par)[1]
    check_gradients(build, [RNG.normal(size=(3,)), RNG.normal(size=(3,))])


def test_loop_gradient_with_iterations_finishing_out_of_order():
    # Matmuls big enough for the thread pool: iterations run in parallel and finish out of order,
    # so values must be saved and restored by iteration index, not by arrival order.
    av, bv = RNG.normal(size=(128, 128)) / 10, RNG.normal(size=(128, 128)) / 10
    a = af.placeholder(f64, [128, 128])
    b = af.constant(bv)

    def body(i, acc):
        f = af.cast(i + 1, f64) / 10.0
        return i + 1, acc + af.reduce_sum(af.tanh(af.matmul(a * f, b)))
    _, total = af.while_loop(lambda i, acc: i < 12, body, [af.constant(0), af.constant(0.0, f64)])
    ga, = af.gradients(total, [a])
    expect = np.zeros_like(av)
    for i in range(12):
        f = (i + 1) / 10
        m = np.tanh((av * f) @ bv)
        expect += f * ((1 - m * m) @ bv.T)
    with af.Session() as sess:
        for _ in range(3):
            np.testing.assert_allclose(sess.run(ga, {a: av}), expect, rtol=1e-10)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_loop_inside_cond_gradient(sign):
    def build(x, a):
        def loop():
            return af.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * a), [af.constant(0), x])[1]
        return af.cond(af.reduce_sum(x) > 0, loop, lambda: x * 2.0)
    check_gradients(build, [sign * np.abs(RNG.normal(size=(2,))), RNG.normal(size=(2,))])


def test_loop_gradient_with_shape_changing_variable():
    def build(x):
        def body(i, v):
            return i + 1, af.concat([af.sin(v), x * af.cast(i + 1, f64)], 0)
        _, v = af.while_loop(lambda i, v: i < 3, body, [af.constant(0), x],
                             shape_invariants=[af.TensorShape([]), af.TensorShape([None])])
        return af.reduce_sum(v * v)
    check_gradients(build, [RNG.normal(size=(2,))])


def test_loop_gradient_through_gather_of_an_invariant():
    def build(p, x):
        def body(i, v):
            return i + 1, v + af.gather(p, af.floormod(i, 3)) * v
        return af.while_loop(lambda i, v: i < 4, body, [af.constant(0), x])[1]
    check_gradients(build, [RNG.normal(size=(3, 2)), RNG.normal(size=(2,))])


def test_loop_gradient_with_unused_and_pass_through_variables():
    def build(x, y):
        def body(i, a, b, c, d):
            return i + 1, a * y, b + 1.0, c * 2.0, d        # d passes through unchanged
        _, a, b, c, d = af.while_loop(lambda i, *_: i < 3, body, [af.constant(0), x, x, y, y])
        return a + b + d * 3.0
    check_gradients(build, [RNG.normal(size=(2,)), RNG.normal(size=(2,))])


def test_loop_gradient_with_zero_iterations():
    def build(x):
        return af.while_loop(lambda i, v: i < 0, lambda i, v: (i + 1, v * v), [af.constant(0), x])[1] * 3.0
    analytic, _ = check_gradients(build, [RNG.normal(size=(2,))])
    np.testing.assert_allclose(analytic[0], 3.0)


def test_two_gradient_computations_of_one_loop_and_forward_only_runs():
    x = af.placeholder(f64, [2])
    a = af.placeholder(f64, [2])
    _, v = af.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, af.sin(v) * a), [af.constant(0), x])
    gx, = af.gradients(af.reduce_sum(v), [x])
    ga, = af.gradients(af.reduce_sum(v * v), [a])
    xv, av = RNG.normal(size=2), RNG.normal(size=2)
    with af.Session() as sess:
        feed = {x: xv, a: av}
        r1 = sess.run(v, feed)
        g1, g2 = sess.run([gx, ga], feed)
        r2 = sess.run(v, feed)          # forward only again: the pushes are pruned away
        g1b = sess.run(gx, feed)
    ref = xv
    for _ in range(3):
        ref = np.sin(ref) * av
    np.testing.assert_allclose(r1, ref)
    np.testing.assert_allclose(r2, ref)
    np.testing.assert_allclose(g1, g1b)
    # d/dx of sum(sin(sin(sin(x)*a)*a)*a)
    u1 = np.sin(xv) * av
    u2 = np.sin(u1) * av
    np.testing.assert_allclose(g1, av * np.cos(u2) * av * np.cos(u1) * av * np.cos(xv))
    assert g2.shape == (2,)


def test_gradient_of_variable_read_in_loop_trains():
    w = af.Variable(RNG.normal(size=(3, 3)) * 0.4, dtype=f64)
    h0 = af.constant(RNG.normal(size=(4, 3)))
    target = af.constant(RNG.normal(size=(4, 3)) * 0.3)
    _, h = af.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, af.tanh(af.matmul(h, w))), [af.constant(0), h0])
    loss = af.reduce_mean(af.square(h - target))
    gw, = af.gradients(loss, [w])
    step = af.assign_sub(w, 0.5 * gw)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        first = sess.run(loss)
        for _ in range(30):
            sess.run(step)
        assert sess.run(loss) < 0.7 * first


def test_back_prop_false_stops_gradients():
    x = af.placeholder(f64, [])
    y = af.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2.0), [af.constant(0), x], back_prop=False)[1]
    assert af.gradients(y + x, [x])[0] is not None
    assert af.gradients(y, [x])[0] is None


def test_gradients_with_respect_to_a_loop_body_value_are_refused():
    x = af.placeholder(f64, [])
    inside = []

    def body(i, v):
        w = v * 2.0
        inside.append(w)
        return i + 1, w
    y = af.while_loop(lambda i, v: i < 3, body, [af.constant(0), x])[1]
    with pytest.raises(ValueError, match="inside the body of while loop"):
        af.gradients(y, [inside[0]])


@pytest.mark.asyncio
async def test_concurrent_gradient_steps_use_their_own_saved_values():
    x = af.placeholder(f64, [])
    n = af.placeholder(af.int32, [])
    v = af.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * x), [af.constant(0), af.constant(1.0, f64)],
                      parallel_iterations=3)[1]
    gx, = af.gradients(v, [x])
    async with af.Session() as sess:
        feeds = [(1.0 + k / 10, k % 7) for k in range(20)]
        results = await asyncio.gather(*[sess.arun(gx, {x: xv, n: nv}) for xv, nv in feeds])
    for (xv, nv), r in zip(feeds, results):
        assert float(r) == pytest.approx(nv * xv ** (nv - 1) if nv else 0.0)


# ---------------------------------------------------------------------------------------------
# Accumulator ops
# ---------------------------------------------------------------------------------------------

def test_accumulator_ops_infer_and_fail_clearly():
    h = accumulator_ops.accumulator(tensor_name="x:0")
    assert h.dtype.name == "resource"
    with pytest.raises(ValueError, match="indices"):
        accumulator_ops.accumulator_push(h, af.constant(1.0), [af.constant(1.0)])
    with pytest.raises(ValueError, match="handle"):
        accumulator_ops.accumulator_pop(af.constant(1.0), [af.constant(0)], f64)
    p = accumulator_ops.accumulator_pop(h, [af.constant(0), af.constant(1)], f64, [2], name="pop_it")
    assert p.shape.as_list() == [2] and p.dtype is f64
    with pytest.raises(af.errors.InvalidArgumentError, match="pop_it"):
        run(p)


def test_accumulator_push_then_pop():
    h = accumulator_ops.accumulator()
    v = af.constant(np.array([1.0, 2.0]))
    push = accumulator_ops.accumulator_push(h, v, [af.constant(3)])
    with af.control_dependencies([push]):
        p = accumulator_ops.accumulator_pop(h, [af.constant(3)], f64, [2])
    np.testing.assert_allclose(run(p), [1.0, 2.0])


# ---------------------------------------------------------------------------------------------
# The LSTM example
# ---------------------------------------------------------------------------------------------

def test_rnn_while_loop_example_learns_binary_addition(capsys):
    path = pathlib.Path(__file__).resolve().parent.parent / "examples" / "rnn_while_loop.py"
    spec = importlib.util.spec_from_file_location("example_rnn_while_loop", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    loss = module.main(["--quiet", "--steps", "300", "--seed", "0"])
    assert loss < module.TARGET_LOSS
    assert "final loss" in capsys.readouterr().out


def test_second_order_gradients_through_a_loop_are_refused_clearly():
    x = af.placeholder(f64, [])
    v = af.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * x), [af.constant(0), af.constant(1.0, f64)])[1]
    gx, = af.gradients(v, [x])
    with pytest.raises(NotImplementedError, match="Gradients of gradients"):
        af.gradients(gx, [x])


def test_an_edge_into_a_loop_without_enter_is_rejected_when_the_plan_is_built():
    # A graph rewired by hand (or imported) so that a loop body reads a value of the root frame
    # directly used to wait forever for it; it is rejected, naming the op and both frames.
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [], name="x")
        outside = af.multiply(x, 2.0, name="outside")
        _, v = af.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v + 1.0), [af.constant(0), x])
        add = next(o for o in g.get_operations()
                   if o.type == "AddV2" and o.name.startswith("while/") and o.inputs[0].dtype == af.float32)
        with af.Session() as s:
            assert s.run(v, {x: 1.0}) == 4.0
        add._update_input(1, outside)
        with af.Session() as s:
            with pytest.raises(af.errors.InvalidArgumentError, match="inputs from different frames") as e:
                s.run(v, {x: 1.0})
    msg = str(e.value)
    assert f"'{add.name}'" in msg and "'outside' is in frame ''" in msg and "in frame 'while'" in msg


def test_a_value_leaving_a_loop_without_exit_is_rejected():
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [], name="x")
        _, v = af.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2.0), [af.constant(0), x])
        inner = next(o for o in g.get_operations() if o.type == "Mul" and o.name.startswith("while/"))
        y = af.add(v, af.identity(x), name="after")
        y.op._update_input(1, inner.outputs[0])
        with af.Session() as s:
            with pytest.raises(af.errors.InvalidArgumentError, match="'after' .* inputs from different frames"):
                s.run(y, {x: 1.0})
