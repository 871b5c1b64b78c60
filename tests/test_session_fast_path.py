"""The per-run fast paths of Session (issue 18): `make_callable`, the per-signature cache of fetch and
feed interpretation, and the synchronous path that runs a plan of cheap pure kernels in the caller's
thread. Each is checked against the actor runtime's answer for the same step (a traced run always
goes through the actors), values and errors alike."""
from __future__ import annotations

import asyncio
import collections
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import actorflow as af

pytestmark = pytest.mark.usefixtures("graph")


def _traced(sess, fetches, feed_dict=None):
    """`fetches` run on the actors (a traced step never takes the synchronous path)."""
    md = af.RunMetadata()
    out = sess.run(fetches, feed_dict, options=af.RunOptions(trace_level=af.RunOptions.FULL_TRACE), run_metadata=md)
    assert md.step_stats is not None
    return out


def _executable(sess):
    (exe,) = sess._cache.values()
    return exe


def test_pure_plan_runs_synchronously_with_the_actors_values():
    x = af.placeholder(af.float32, [None], name="x")
    c = af.constant(2.0, name="c")
    y = af.tanh(x * c + 1.0)
    m = af.reduce_max(y)
    pair = af.split(af.concat([x, x], 0), 2)          # a kernel with two outputs
    Out = collections.namedtuple("Out", "y m x c idx")
    feed = {x: np.array([0.5, -1.0, 0.5], np.float32)}
    fetches = Out(y, m, x, c, pair[1])
    with af.Session() as sess:
        fast = sess.run(fetches, feed)
        assert _executable(sess).sync is not None
        slow = _traced(sess, fetches, feed)
    assert type(fast) is Out
    for a, b in zip(fast, slow):
        assert type(a) is type(b)
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(fast.y, np.tanh(feed[x] * 2 + 1), rtol=1e-6)
    np.testing.assert_array_equal(fast.idx, feed[x])


def test_chain_under_the_optimizer_and_jit_runs_synchronously():
    x = af.placeholder(af.float32, [], name="x")
    y = x
    for _ in range(50):
        y = y + 1.0
    oo = af.OptimizerOptions(global_jit_level=af.OptimizerOptions.ON_1)
    cfg = af.ConfigProto(graph_options=af.GraphOptions(optimizer_options=oo))
    with af.Session(config=cfg) as sess:
        assert sess.run(y, {x: np.float32(1.0)}) == 51.0
        assert _executable(sess).sync is not None
        assert sess.run(y, {x: 2.0}) == _traced(sess, y, {x: 2.0}) == 52.0


_BINARY = [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: af.maximum(a, b), lambda a, b: a - b,
           lambda a, b: af.where(a > b, a, b)]
_UNARY = [af.negative, af.abs, lambda a: a * 0.5, lambda a: af.reshape(a, [-1]) * 1.0 + af.reduce_sum(a)]


@st.composite
def _random_graphs(draw):
    n = draw(st.integers(1, 12))
    steps = [draw(st.tuples(st.booleans(), st.integers(0, 4), st.integers(0, 50), st.integers(0, 50)))
             for _ in range(n)]
    fetch = draw(st.lists(st.integers(0, 60), min_size=1, max_size=4))
    return steps, fetch, draw(st.integers(0, 2 ** 16))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_random_graphs())
def test_random_pure_graphs_run_synchronously_bit_for_bit(case):
    """Random DAGs of element-wise ops, a two-output split and fetches of any node (feeds included):
    the synchronous path gives exactly the actors' values."""
    steps, fetch, seed = case
    with af.Graph().as_default():
        a = af.placeholder(af.float32, [None], name="a")
        b = af.placeholder(af.float32, [None], name="b")
        lo, hi = af.split(af.concat([a, b], 0), 2)
        vals = [a, b, lo, hi]
        for unary, k, i, j in steps:
            x, y = vals[i % len(vals)], vals[j % len(vals)]
            vals.append(_UNARY[k % len(_UNARY)](x) if unary else _BINARY[k](x, af.reshape(y, [-1])))
        fetches = [vals[f % len(vals)] for f in fetch]
        rng = np.random.default_rng(seed)
        feed = {a: rng.standard_normal(3).astype(np.float32), b: rng.standard_normal(3).astype(np.float32)}
        with af.Session() as sess:
            try:
                fast = sess.run(fetches, feed)
            except af.errors.InvalidArgumentError as e:   # shapes that do not broadcast: same error
                with pytest.raises(type(e)) as slow:
                    _traced(sess, fetches, feed)
                assert str(slow.value) == str(e)
                return
            assert _executable(sess).sync is not None
            slow = _traced(sess, fetches, feed)
    for u, v in zip(fast, slow):
        assert type(u) is type(v) and np.asarray(u).dtype == np.asarray(v).dtype
        np.testing.assert_array_equal(u, v)


def test_kernel_error_names_the_op_as_the_actors_do():
    x = af.placeholder(af.float32, [None], name="x")
    r = af.reshape(x * 2.0, [2, 2], name="square")
    feed = {x: np.arange(3, dtype=np.float32)}
    with af.Session() as sess:
        with pytest.raises(af.errors.InvalidArgumentError) as fast:
            sess.run(r, feed)
        assert _executable(sess).sync is not None
        with pytest.raises(af.errors.InvalidArgumentError) as slow:
            _traced(sess, r, feed)
        # the session is still sound after the failure
        np.testing.assert_array_equal(sess.run(r, {x: np.arange(4, dtype=np.float32)}), [[0, 2], [4, 6]])
    assert "square" in str(fast.value)
    assert type(fast.value) is type(slow.value)
    assert str(fast.value) == str(slow.value)
    assert fast.value.node_def == slow.value.node_def == "square"


@pytest.mark.parametrize("kind", ["variable", "random", "cond", "assert"])
def test_plans_with_state_or_control_flow_stay_on_the_actors(kind):
    x = af.placeholder(af.float32, [], name="x")
    if kind == "variable":
        v = af.Variable(3.0)
        y = v + x
    elif kind == "random":
        y = af.random_uniform([], seed=1) * 0.0 + x
    elif kind == "cond":
        y = af.cond(x > 0.0, lambda: x * 2.0, lambda: x - 1.0)
    else:
        with af.control_dependencies([af.debugging.assert_positive(x)]):
            y = af.identity(x)
    with af.Session() as sess:
        if kind == "variable":
            sess.run(af.global_variables_initializer())
            sess._cache.clear()
        out = sess.run(y, {x: 2.0})
        sync = _executable(sess).sync
        # A plan whose only state is variables runs synchronously as a training step
        # (tests/test_sync_train_step.py); the rest stay on the actors.
        assert (sync is not None and sync.stateful) if kind == "variable" else sync is None
    assert out == {"variable": 5.0, "random": 2.0, "cond": 4.0, "assert": 2.0}[kind]


def test_a_kernel_worth_the_pool_leaves_the_loops_fast_path():
    a = af.placeholder(af.float32, [None, None], name="a")
    y = af.matmul(a, a)
    small = np.eye(2, dtype=np.float32)
    big = np.full((160, 160), 0.5, np.float32)
    with af.Session() as sess:
        np.testing.assert_array_equal(sess.run(y, {a: small}), small)
        exe = _executable(sess)
        assert exe.sync is not None
        assert exe.run_sync([small]) is not None
        assert exe.run_sync([big]) is None           # the cost known from the values says: the pool
        assert exe.sync.too_big == {(big.shape,)}     # and the next step of that shape goes there at once
        # (Session.run then runs it through in the caller's thread: the test below)
        np.testing.assert_allclose(sess.run(y, {a: big}), big @ big)
        np.testing.assert_array_equal(sess.run(y, {a: 2 * small}), 4 * small)


def _on_runtime_loop(coro):
    from actorflow.actors.dispatcher import default_runtime
    return asyncio.run_coroutine_threadsafe(coro, default_runtime().loop).result(60)


def _record_whole(monkeypatch, exe):
    """The threads that ran `exe`'s steps through (Executable.run_whole), and its actor steps."""
    threads, started = [], []
    whole, start = exe.run_whole, exe.start
    monkeypatch.setattr(exe, "run_whole", lambda fv: (threads.append(threading.current_thread().name), whole(fv))[1])
    monkeypatch.setattr(exe, "start", lambda *a, **k: (started.append(1), start(*a, **k))[1])
    return threads, started


@pytest.mark.parametrize("weights", ["fed", "variable"])
def test_a_step_worth_the_pool_runs_through_off_the_loop(monkeypatch, weights):
    # A plan that only computes, with kernels worth the pool: Session.run runs it in the caller's
    # thread, and arun (from any loop, the runtime's own included) as one task on a pool thread;
    # neither goes to the actors, and the values are the actors' bit for bit.
    rng = np.random.default_rng(0)
    a = af.placeholder(af.float32, [None, 256], name="a")
    w0 = rng.standard_normal((256, 256)).astype(np.float32)
    if weights == "fed":
        w = af.placeholder(af.float32, [256, 256], name="w")
    else:
        w = af.Variable(w0, name="w")
    y = af.reduce_sum(af.nn.relu(af.matmul(af.tanh(af.matmul(a, w)), w)), axis=1)
    x = rng.standard_normal((192, 256)).astype(np.float32)
    feed = {a: x, w: w0} if weights == "fed" else {a: x}
    with af.Session() as sess:
        if weights == "variable":
            sess.run(af.global_variables_initializer())
        want = _traced(sess, y, feed)
        exe = _executable_for(sess, y)
        assert exe.whole and exe.run_sync([x] if weights == "variable" else [x, w0], on_loop=True) is None
        threads, started = _record_whole(monkeypatch, exe)
        np.testing.assert_array_equal(sess.run(y, feed), want)
        assert threads == ([threading.current_thread().name] if weights == "fed" else [])
        if weights == "variable":     # a training-style program runs in the caller's thread already
            assert not started
        threads.clear()

        async def both():
            return await asyncio.gather(sess.arun(y, feed), sess.arun(y, feed))
        for outs in (asyncio.run(both()), _on_runtime_loop(both())):
            for out in outs:
                np.testing.assert_array_equal(out, want)
        assert len(threads) == 4 and all(t.startswith("actorflow-kernel") for t in threads), threads
        assert not started


def test_a_step_reading_variables_runs_on_the_loop_while_its_kernels_are_cheap(monkeypatch):
    # arun on the runtime's loop of a plan that reads variables: its cheap steps run right there (no
    # actors, no pool), a batch worth the pool runs as one pool task, and a step that finds the
    # variables' gate held by another thread's synchronous step waits for it on a pool thread (the
    # loop never waits for it); a step that updates a variable never runs on the loop.
    w = af.Variable(np.eye(256, dtype=np.float32) * 2.0, name="w")
    a = af.placeholder(af.float32, [None, 256], name="a")
    y = af.reduce_sum(af.matmul(a, w), axis=1)
    bump = w.assign_add(af.ones_like(w))
    small = np.ones((2, 256), np.float32)
    big = np.ones((512, 256), np.float32)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(y, {a: small}), [512.0, 512.0])
        exe = _executable_for(sess, y)
        assert exe.sync.stateful and not exe.sync.updates and exe.whole
        threads, started = _record_whole(monkeypatch, exe)
        loop_name = []

        async def run(x):
            loop_name.append(threading.current_thread().name)
            return await sess.arun(y, {a: x})
        np.testing.assert_array_equal(_on_runtime_loop(run(small)), [512.0, 512.0])
        assert threads == [] and started == []               # on the loop itself
        np.testing.assert_array_equal(_on_runtime_loop(run(big)), np.full(512, 512.0))
        assert exe.sync.too_big == {(big.shape,)}
        assert len(threads) == 1 and threads[0].startswith("actorflow-kernel") and started == []
        held, release = threading.Event(), threading.Event()

        def other_step():                                     # another thread's synchronous step
            with exe.sync.gate.sync_lock:
                held.set()
                release.wait(10)
        t = threading.Thread(target=other_step)
        t.start()
        held.wait(10)
        from actorflow.actors.dispatcher import default_runtime
        step = asyncio.run_coroutine_threadsafe(run(small), default_runtime().loop)
        _on_runtime_loop(asyncio.sleep(0.05))                # the loop is free meanwhile
        assert not step.done()
        release.set()
        np.testing.assert_array_equal(step.result(10), [512.0, 512.0])
        t.join()
        assert len(threads) == 2 and threads[1].startswith("actorflow-kernel") and started == []
        _on_runtime_loop(sess.arun(bump))
        np.testing.assert_array_equal(_on_runtime_loop(run(small)), [66048.0, 66048.0])


def _executable_for(sess, fetch):
    for exe in sess._cache.values():
        if any(t is fetch for t in exe.plan.fetches):
            return exe
    raise AssertionError("no executable fetches it")


def test_a_step_run_through_on_the_pool_keeps_deadlines_and_errors():
    a = af.placeholder(af.float32, [None, None], name="a")
    b = af.placeholder(af.float32, [None, None], name="b")
    y = a
    for i in range(6):
        y = af.matmul(y, a, name=f"mm{i}")
    bad = af.matmul(a, b, name="mismatched")
    big = np.full((1200, 1200), 1e-3, np.float32)
    with af.Session() as sess:
        sess.run(y, {a: np.eye(2, dtype=np.float32)})

        async def slow():
            return await sess.arun(y, {a: big}, options=af.RunOptions(timeout_in_ms=1))
        with pytest.raises(af.errors.DeadlineExceededError):
            _on_runtime_loop(slow())
        assert _executable_for(sess, y).whole
        np.testing.assert_allclose(_on_runtime_loop(sess.arun(y, {a: big[:300, :300]})),
                                   np.linalg.matrix_power(big[:300, :300].astype(np.float64), 7), rtol=1e-4)
        with pytest.raises(af.errors.InvalidArgumentError, match="mismatched"):
            _on_runtime_loop(sess.arun(bad, {a: big[:300, :300], b: big[:200, :300]}))
        with pytest.raises(af.errors.InvalidArgumentError, match="mismatched"):
            sess.run(bad, {a: big[:300, :300], b: big[:200, :300]})


def test_a_pool_thread_splits_kernels_without_the_spin_team(monkeypatch):
    # A whole step on a pool thread shares a big kernel's blocks through the pool, not the SpinTeam,
    # whose helpers would spin between steps on the cores a server's loop needs.
    from actorflow.actors import pool as pool_mod
    used = []
    run = pool_mod.SpinTeam.run
    monkeypatch.setattr(pool_mod.SpinTeam, "run", lambda self, thunks: (used.append(
        threading.current_thread().name), run(self, thunks))[1])
    a = af.placeholder(af.float32, [None, 512], name="a")
    w = af.constant(np.eye(512, dtype=np.float32), name="w")
    y = af.matmul(a, w)
    x = np.ones((512, 512), np.float32)
    with af.Session() as sess:
        np.testing.assert_array_equal(_on_runtime_loop(sess.arun(y, {a: x})), x)
        np.testing.assert_array_equal(_on_runtime_loop(sess.arun(y, {a: x})), x)
    assert not any(t.startswith("actorflow-kernel") for t in used), used


def test_fetching_feeds_constants_and_targets():
    x = af.placeholder(af.float32, [], name="x")
    c = af.constant([1, 2], name="c")
    y = x + 1.0
    op = af.group(y)
    with af.Session() as sess:
        out = sess.run([x, c, y, op], {x: 4.0})
        assert out[0] == 4.0 and out[2] == 5.0 and out[3] is None
        np.testing.assert_array_equal(out[1], [1, 2])
        assert sess.run(op, {x: 1.0}) is None


def test_signature_cache_keeps_feed_semantics():
    x = af.placeholder(af.float32, [2], name="x")
    k = af.placeholder(af.int32, [], name="k")
    y = x * af.cast(k, af.float32)
    with af.Session() as sess:
        for _ in range(2):                            # a fresh signature, then the kept one
            np.testing.assert_array_equal(sess.run(y, {x: [1.0, 2.0], k: 3}), [3, 6])
            np.testing.assert_array_equal(sess.run(y, {k: np.int32(2), x: np.array([1, 2], np.float32)}), [2, 4])
            # the same tensor twice (by object and by name): the first wins, as before
            np.testing.assert_array_equal(sess.run(y, {x: [1.0, 1.0], "x:0": [5.0, 5.0], k: 1}), [1, 1])
            # a float64 array for a float32 placeholder is cast; an int that does not fit is refused
            out = sess.run(y, {x: np.array([0.5, 1.5]), k: 2})
            assert out.dtype == np.float32
            np.testing.assert_array_equal(out, [1, 3])
            with pytest.raises(TypeError):
                sess.run(y, {x: [1.0, 2.0], k: 2 ** 40})
            with pytest.raises(ValueError, match="shape"):
                sess.run(y, {x: np.zeros(3, np.float32), k: 1})
            with pytest.raises(ValueError, match="shape"):
                sess.run(y, {x: [1.0, 2.0, 3.0], k: 1})
            with pytest.raises(af.errors.InvalidArgumentError, match="k"):
                sess.run(y, {x: [1.0, 2.0]})


def test_fed_array_is_not_copied_and_fetched_scalars_are_numpy_scalars():
    x = af.placeholder(af.float32, [None], name="x")
    s = af.reduce_sum(x)
    arr = np.ones(3, np.float32)
    with af.Session() as sess:
        out = sess.run([x, s], {x: arr})
    assert isinstance(out[1], np.float32) and out[1] == 3.0
    np.testing.assert_array_equal(out[0], arr)


def test_concurrent_runs_and_aruns_on_the_fast_path():
    x = af.placeholder(af.float32, [], name="x")
    y = (x * 3.0) - 1.0
    bad = []
    with af.Session() as sess:
        def worker(k):
            for i in range(200):
                if sess.run(y, {x: float(k * 1000 + i)}) != 3.0 * (k * 1000 + i) - 1.0:
                    bad.append((k, i))
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()

        async def many():
            return await asyncio.gather(*[sess.arun(y, {x: float(i)}) for i in range(50)])
        outs = asyncio.run(many())
        for t in threads:
            t.join()
    assert not bad
    assert outs == [3.0 * i - 1.0 for i in range(50)]


# -- make_callable --------------------------------------------------------------------------------

def test_make_callable_matches_run():
    x = af.placeholder(af.float32, [None], name="x")
    k = af.placeholder(af.float32, [], name="k")
    y = x * k
    s = af.reduce_sum(y)
    with af.Session() as sess:
        f = sess.make_callable({"y": y, "parts": [s, (x,)]}, [x, "k:0"])
        out = f(np.array([1.0, 2.0], np.float32), 3.0)
        ref = sess.run({"y": y, "parts": [s, (x,)]}, {x: [1.0, 2.0], k: 3.0})
        np.testing.assert_array_equal(out["y"], ref["y"])
        assert out["parts"][0] == ref["parts"][0] == 9.0
        assert isinstance(out["parts"][1], tuple)
        assert sess.make_callable(s, (x, k))([1.0], 2.0) == 2.0
        no_feeds = sess.make_callable(af.constant(7.0) * 2.0)
        assert no_feeds() == 14.0
        assert sess.make_callable(af.no_op())() is None


def test_make_callable_errors():
    x = af.placeholder(af.float32, [None], name="x")
    y = af.reshape(x, [2], name="bad_reshape")
    with af.Session() as sess:
        with pytest.raises(TypeError, match="feed_list"):
            sess.make_callable(y, x)
        with pytest.raises(TypeError):
            sess.make_callable(None)
        with pytest.raises(af.errors.InvalidArgumentError, match="nope"):
            sess.make_callable(y, ["nope:0"])
        f = sess.make_callable(y, [x])
        with pytest.raises(TypeError, match="1 tensors"):
            f()
        with pytest.raises(TypeError, match="1 tensors"):
            f(1.0, 2.0)
        with pytest.raises(af.errors.InvalidArgumentError, match="bad_reshape"):
            f([1.0])
        np.testing.assert_array_equal(f([1.0, 2.0]), [1.0, 2.0])
        with pytest.raises(TypeError):
            sess.make_callable(x * 2.0)(options=af.RunOptions())
        with pytest.raises(af.errors.InvalidArgumentError, match="x"):
            sess.make_callable(x * 2.0)()                 # needs a feed it was not given
    with pytest.raises(RuntimeError, match="closed"):
        f([1.0, 2.0])


def test_make_callable_options_trace_the_step():
    x = af.placeholder(af.float32, [], name="x")
    y = af.square(x, name="sq")
    with af.Session() as sess:
        f = sess.make_callable(y, [x], accept_options=True)
        md = af.RunMetadata()
        assert f(3.0, options=af.RunOptions(trace_level=af.RunOptions.SOFTWARE_TRACE), run_metadata=md) == 9.0
        names = [n.node_name for d in md.step_stats.dev_stats for n in d.node_stats]
        assert any("sq" in n for n in names)
        g = sess.make_callable(af.constant(2.0) + 1.0, accept_options=True)
        md2 = af.RunMetadata()
        assert g(options=af.RunOptions(trace_level=af.RunOptions.FULL_TRACE), run_metadata=md2) == 3.0
        assert md2.step_stats is not None


def test_make_callable_with_structure_feed():
    a = af.placeholder(af.float32, [], name="a")
    b = af.placeholder(af.float32, [], name="b")
    with af.Session() as sess:
        f = sess.make_callable(a - b, [(a, b)])
        assert f((5.0, 2.0)) == 3.0
        dup = sess.make_callable(a - b, [a, a, b])       # a listed twice: the last value wins, as in TF
        assert dup(1.0, 4.0, 2.0) == 2.0


def test_negative_inter_op_threads_keep_every_kernel_off_the_pool(monkeypatch):
    # TF: inter_op_parallelism_threads < 0 performs all operations in the caller's thread. A kernel
    # worth the pool by its cost then runs where its step runs: in the caller on the synchronous
    # path, on the runtime's loop on the actors (a traced step), never on the kernel pool.
    from actorflow.actors.dispatcher import default_runtime
    pool = default_runtime().pool
    submitted = []
    submit = pool.submit
    monkeypatch.setattr(pool, "submit", lambda fn, deferred=False: (submitted.append(fn), submit(fn, deferred)))
    a = af.placeholder(af.float32, [None, None], name="a")
    y = af.matmul(a, a, name="mm")
    big = np.full((160, 160), 0.5, np.float32)

    def run(config):
        submitted.clear()
        with af.Session(config=config) as sess:
            np.testing.assert_allclose(sess.run(y, {a: big}), big @ big)
            np.testing.assert_allclose(_traced(sess, y, {a: big}), big @ big)
            return _executable(sess).run_sync([big]), len(submitted)

    pooled, n = run(None)
    assert pooled is None and n > 0
    inline, n = run(af.ConfigProto(inter_op_parallelism_threads=-1))
    np.testing.assert_allclose(inline[0], big @ big)
    assert n == 0
