"""Session semantics: fetch structures, partial execution, feeds, errors, concurrency, variables."""
from __future__ import annotations

import asyncio
import collections
import threading
import time

import numpy as np
import pytest

import actorflow as af

pytestmark = pytest.mark.usefixtures("graph")


def test_fetch_structures_are_preserved():
    a = af.constant(1.0)
    b = af.constant([2, 3])
    Pair = collections.namedtuple("Pair", "x y")
    with af.Session() as sess:
        out = sess.run({"a": a, "rest": [b, (a, Pair(a, b))], "op": af.no_op()})
    assert out["a"] == 1.0 and out["op"] is None
    np.testing.assert_array_equal(out["rest"][0], [2, 3])
    assert isinstance(out["rest"][1], tuple) and isinstance(out["rest"][1][1], Pair)
    np.testing.assert_array_equal(out["rest"][1][1].y, [2, 3])


def test_fetch_by_name_and_bad_fetch():
    x = af.placeholder(af.float32, [], name="x")
    af.identity(x * 2.0, name="double")
    with af.Session() as sess:
        assert sess.run("double:0", {"x:0": 3.0}) == 6.0
        with pytest.raises(TypeError):
            sess.run(None)
        with pytest.raises((TypeError, ValueError, KeyError)):
            sess.run("nope:0")


def test_partial_execution_runs_only_what_fetches_need():
    x = af.placeholder(af.float32, [], name="x")
    hit = af.Variable(0.0, name="hit")
    with af.control_dependencies([hit.assign_add(1.0)]):
        side = af.identity(x, name="side")
    y = x + 1.0
    with af.Session() as sess:
        sess.run(hit.initializer)
        assert sess.run(y, {x: 1.0}) == 2.0
        assert sess.run(hit) == 0.0            # the side branch did not run
        sess.run(side, {x: 1.0})
        assert sess.run(hit) == 1.0


def test_a_fed_tensor_cuts_off_its_producer():
    x = af.placeholder(af.float32, [], name="x")     # never fed here
    y = x * 2.0
    z = y + 1.0
    with af.Session() as sess:
        assert sess.run(z, {y: 10.0}) == 11.0        # x is not needed
        with pytest.raises(af.errors.InvalidArgumentError, match="must feed a value for placeholder tensor 'x:0'"):
            sess.run(z)


def test_bad_feeds_name_the_placeholder():
    x = af.placeholder(af.float32, [None, 3], name="images")
    y = x * 2.0
    with af.Session() as sess:
        with pytest.raises(ValueError, match=r"images:0.*\(\?, 3\)") as e:
            sess.run(y, {x: np.zeros((2, 4))})
        assert isinstance(e.value, af.errors.InvalidArgumentError)
        with pytest.raises(af.errors.InvalidArgumentError, match="images"):
            sess.run(y, {x: [["a", "b", "c"]]})
        i = af.placeholder(af.int32, [], name="count")
        with pytest.raises(af.errors.InvalidArgumentError, match="int32.*count"):
            sess.run(i + 1, {i: 2**40})     # a float would be truncated, as TF does; an overflow is refused


def test_kernel_error_fails_only_its_step_and_names_the_op():
    idx = af.placeholder(af.int32, [], name="idx")
    with af.device("/cpu:0"):          # the CPU Gather checks its indices (a GPU one does not, as in TF)
        table = af.constant(np.arange(5.0))
        out = af.gather(table, idx, name="lookup")
    with af.Session() as sess:
        with pytest.raises(af.errors.InvalidArgumentError, match="lookup") as e:
            sess.run(out, {idx: 9})
        assert "lookup" in str(e.value)
        assert sess.run(out, {idx: 2}) == 2.0          # the session is still usable


def test_uninitialized_variable_and_assignment_semantics():
    v = af.Variable([1.0, 2.0], name="v")
    inc = v.assign_add([1.0, 1.0])
    reset = v.assign([0.0, 0.0])
    with af.Session() as sess:
        with pytest.raises(af.errors.FailedPreconditionError, match="uninitialized value v"):
            sess.run(v)
        sess.run(af.global_variables_initializer())
        before = sess.run(v)
        np.testing.assert_array_equal(sess.run(inc), [2.0, 3.0])
        np.testing.assert_array_equal(before, [1.0, 2.0])      # a fetched value is a snapshot
        np.testing.assert_array_equal(sess.run(reset), [0.0, 0.0])
        assert sess.run(af.is_variable_initialized(v))
        w = af.Variable(np.ones((2, 2), np.float32), name="w")
        with pytest.raises((ValueError, af.errors.InvalidArgumentError)):
            w.assign(np.ones((3, 3), np.float32))


def test_initialized_value_initializes_one_variable_from_another():
    """tf.Variable.initialized_value: the variable's value once initialized, else its initial value,
    whatever order the initializers run in (one run of the random initial value feeds both)."""
    w = af.Variable(af.random_normal([3], seed=1), name="w")
    w2 = af.Variable(w.initialized_value() * 2.0, name="w2")
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        a, b = sess.run([w, w2])
        np.testing.assert_allclose(b, 2 * a)
        sess.run(w.assign([1.0, 2.0, 3.0]))
        np.testing.assert_allclose(sess.run(w.initialized_value()), [1.0, 2.0, 3.0])
    with af.Session() as sess:          # not initialized: the initial value, nothing assigned
        np.testing.assert_allclose(sess.run(w2.initialized_value()).shape, [3])
        assert not sess.run(af.is_variable_initialized(w2))


def test_read_value_under_a_control_dependency_sees_the_update():
    v = af.Variable([1.0, 2.0], name="v")
    inc = v.assign_add([10.0, 10.0])
    with af.control_dependencies([inc]):
        after = v.read_value()
    before = v.read_value()
    with af.Session() as sess:
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run(before), [1.0, 2.0])
        np.testing.assert_array_equal(sess.run(after), [11.0, 12.0])
        np.testing.assert_array_equal(sess.run(v), [11.0, 12.0])


def test_local_sessions_own_their_variables():
    v = af.Variable(5.0, name="v")
    with af.Session() as s1, af.Session() as s2:
        s1.run(v.initializer)
        assert s1.run(v) == 5.0
        with pytest.raises(af.errors.FailedPreconditionError):
            s2.run(v)


def test_graph_may_grow_after_the_session_is_created():
    x = af.constant(2.0)
    with af.Session() as sess:
        assert sess.run(x) == 2.0
        y = x * 3.0
        assert sess.run(y) == 6.0


def test_timeout_raises_deadline_exceeded_and_session_recovers():
    q = af.FIFOQueue(1, af.float32, shapes=[[]])
    deq = q.dequeue()
    with af.Session() as sess:
        t0 = time.monotonic()
        with pytest.raises(af.errors.DeadlineExceededError):
            sess.run(deq, timeout=0.2)
        assert time.monotonic() - t0 < 5
        with pytest.raises(af.errors.DeadlineExceededError):
            sess.run(deq, options=af.RunOptions(timeout_in_ms=100))
        sess.run(q.enqueue(1.0))
        assert sess.run(deq) == 1.0


async def test_fifty_concurrent_aruns_get_their_own_results():
    x = af.placeholder(af.float32, [None], name="x")
    y = af.reduce_sum(af.square(x)) + af.reduce_max(x)
    async with af.Session() as sess:
        feeds = [np.arange(i + 1, dtype=np.float32) for i in range(50)]
        results = await asyncio.gather(*(sess.arun(y, {x: f}) for f in feeds))
    for f, r in zip(feeds, results):
        assert r == pytest.approx(float(np.sum(f * f) + f.max()))


async def test_arun_does_not_block_the_callers_loop():
    q = af.FIFOQueue(1, af.float32, shapes=[[]])
    deq, enq = q.dequeue(), q.enqueue(7.0)
    with af.Session() as sess:
        waiting = asyncio.ensure_future(sess.arun(deq))
        ticks = 0
        for _ in range(5):
            await asyncio.sleep(0.01)
            ticks += 1
        assert ticks == 5 and not waiting.done()
        await sess.arun(enq)
        assert await asyncio.wait_for(waiting, 5) == 7.0


def test_concurrent_threads_do_not_see_each_others_values():
    x = af.placeholder(af.float32, [], name="x")
    y = x
    for _ in range(50):
        y = y + 1.0
    errors = []
    with af.Session() as sess:
        def worker(k):
            for _ in range(20):
                if sess.run(y, {x: float(k)}) != k + 50:
                    errors.append(k)
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors


def test_default_session_eval_and_make_callable():
    x = af.placeholder(af.float32, [], name="x")
    y = x * 4.0
    with af.Session() as sess:
        assert y.eval({x: 2.0}) == 8.0
        f = sess.make_callable(y, [x])
        assert f(3.0) == 12.0
    sess = af.InteractiveSession()
    try:
        assert af.get_default_session() is sess
        assert (x + 1.0).eval({x: 1.0}) == 2.0
    finally:
        sess.close()


def test_closed_session_refuses_to_run():
    sess = af.Session()
    sess.close()
    with pytest.raises(RuntimeError, match="closed"):
        sess.run(af.constant(1.0))
