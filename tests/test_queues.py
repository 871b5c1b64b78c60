"""Queues (af.FIFOQueue, af.RandomShuffleQueue, af.PaddingFIFOQueue) and the input-pipeline
machinery around them (af.train.QueueRunner, af.train.Coordinator).

Semantics: ordering, capacity and blocking with back-pressure, close with and without cancelling
pending enqueues, OutOfRangeError on a closed and drained queue, dequeue_many / dequeue_up_to,
a blocked operation whose step times out leaving the queue intact, random-shuffle bounds and
seeded order, padding. Cross-task: a queue with shared_name on a parameter server used by two client
sessions (real processes on loopback).
"""
from __future__ import annotations

import asyncio
import os
import threading
import time

import numpy as np
import pytest

import actorflow as af
from actorflow import errors

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("graph")]


@pytest.fixture
def sess(graph):
    with af.Session(graph=graph) as s:
        yield s


def run_in_thread(fn, *args):
    """Starts fn(*args) in a thread; returns (thread, box) where box gets 'value' or 'error'."""
    box = {}

    def target():
        try:
            box["value"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["error"] = e
    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, box


def wait_until(pred, timeout=10.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def wait_blocked(sess, q, kind, n, timeout=30.0):
    """Waits until `n` enqueues (kind "enqueuers") or dequeues ("dequeuers") wait in the queue `q` of the
    local session `sess`. A fixed sleep after starting a thread only bounds how long the thread had
    to get there: on a loaded machine it may not have, and then the test sees another interleaving."""
    def blocked():
        res = sess._backend.container.get(q.queue_ref.op.name)      # created by the queue's first op
        return res is not None and len(getattr(res, kind)) == n
    wait_until(blocked, timeout, f"{n} blocked {kind}")


# ---------------------------------------------------------------------------------------------------
# Build-time checks
# ---------------------------------------------------------------------------------------------------

def test_enqueue_checks_dtype_and_count_at_build_time():
    q = af.FIFOQueue(4, [af.float32, af.int32], shapes=[[2], []], name="typed_q")
    with pytest.raises(ValueError, match="typed_q"):
        q.enqueue([np.zeros(2, np.float32), af.constant(1.5)])
    with pytest.raises(ValueError, match="2 components"):
        q.enqueue([np.zeros(2, np.float32)])
    with pytest.raises(ValueError, match="shape"):
        q.enqueue([af.constant(np.zeros(3, np.float32)), 1])
    with pytest.raises(ValueError, match="batch dimension"):
        q.enqueue_many([af.constant(np.zeros((4, 2), np.float32)), af.constant(1)])


def test_dequeue_shapes_are_inferred():
    q = af.FIFOQueue(4, [af.float32, af.int64], shapes=[[2, 3], []])
    a, b = q.dequeue()
    assert a.shape.as_list() == [2, 3] and a.dtype is af.float32
    assert b.shape.as_list() == [] and b.dtype is af.int64
    a, b = q.dequeue_many(5)
    assert a.shape.as_list() == [5, 2, 3] and b.shape.as_list() == [5]
    a, b = q.dequeue_up_to(5)
    assert a.shape.as_list() == [None, 2, 3]


def test_random_shuffle_queue_bounds_are_checked():
    with pytest.raises(ValueError, match="min_after_dequeue"):
        af.RandomShuffleQueue(4, 4, [af.float32])


def test_padding_queue_needs_shapes():
    with pytest.raises(ValueError, match="shapes"):
        af.PaddingFIFOQueue(4, [af.float32], shapes=None)


def test_named_components_must_match():
    q = af.FIFOQueue(4, [af.float32, af.int32], shapes=[[], []], names=["x", "label"])
    with pytest.raises(ValueError, match="dict"):
        q.enqueue([1.0, 2])
    with pytest.raises(ValueError, match="exactly"):
        q.enqueue({"x": 1.0})


# ---------------------------------------------------------------------------------------------------
# FIFO semantics
# ---------------------------------------------------------------------------------------------------

def test_fifo_order_and_components(sess):
    q = af.FIFOQueue(10, [af.float32, af.int32], shapes=[[2], []])
    x = af.placeholder(af.float32, [2])
    i = af.placeholder(af.int32, [])
    enq = q.enqueue([x, i])
    deq = q.dequeue()
    for k in range(6):
        sess.run(enq, {x: [k, -k], i: k})
    assert sess.run(q.size()) == 6
    for k in range(6):
        a, b = sess.run(deq)
        np.testing.assert_array_equal(a, [k, -k])
        assert b == k and a.dtype == np.float32 and b.dtype == np.int32
    assert sess.run(q.size()) == 0


def test_single_component_dequeue_is_a_tensor_not_a_tuple(sess):
    q = af.FIFOQueue(3, af.int64, shapes=[])
    sess.run(q.enqueue_many([np.array([4, 5, 6], np.int64)]))
    v = sess.run(q.dequeue())
    assert isinstance(v, np.int64) and v.shape == () and v == 4     # a numpy scalar, as TF fetches scalars
    np.testing.assert_array_equal(sess.run(q.dequeue_many(2)), [5, 6])


def test_named_components_round_trip(sess):
    q = af.FIFOQueue(4, [af.float32, af.int32], shapes=[[], []], names=["x", "label"])
    sess.run(q.enqueue({"x": 2.5, "label": 7}))
    out = sess.run(q.dequeue())
    assert set(out) == {"x", "label"} and out["x"] == 2.5 and out["label"] == 7


def test_enqueue_many_and_dequeue_many(sess):
    q = af.FIFOQueue(20, [af.float32, af.int32], shapes=[[3], []])
    xs = np.arange(30, dtype=np.float32).reshape(10, 3)
    ys = np.arange(10, dtype=np.int32)
    sess.run(q.enqueue_many([xs, ys]))
    a, b = sess.run(q.dequeue_many(4))
    np.testing.assert_array_equal(a, xs[:4])
    np.testing.assert_array_equal(b, ys[:4])
    a, b = sess.run(q.dequeue_many(6))
    np.testing.assert_array_equal(a, xs[4:])
    np.testing.assert_array_equal(b, ys[4:])


def test_enqueue_many_components_must_share_batch_size(sess):
    q = af.FIFOQueue(20, [af.float32, af.int32], shapes=[[], []], name="batchq")
    a = af.placeholder(af.float32, [None])
    b = af.placeholder(af.int32, [None])
    with pytest.raises(errors.InvalidArgumentError, match="batchq"):
        sess.run(q.enqueue_many([a, b]), {a: np.zeros(3), b: np.zeros(2, np.int32)})
    assert sess.run(q.size()) == 0


def test_runtime_shape_mismatch_names_the_queue(sess):
    q = af.FIFOQueue(4, [af.float32], shapes=[[2]], name="shapeq")
    x = af.placeholder(af.float32, None)
    with pytest.raises(errors.InvalidArgumentError, match="shapeq"):
        sess.run(q.enqueue(x), {x: np.zeros(3, np.float32)})


def test_dequeue_many_zero_gives_empty_batch(sess):
    q = af.FIFOQueue(4, [af.float32], shapes=[[2]])
    out = sess.run(q.dequeue_many(0))
    assert out.shape == (0, 2) and out.dtype == np.float32


# ---------------------------------------------------------------------------------------------------
# Capacity, blocking, back-pressure, cancellation
# ---------------------------------------------------------------------------------------------------

def test_full_queue_blocks_enqueue_until_timeout_and_stays_intact(sess):
    q = af.FIFOQueue(2, [af.int32], shapes=[[]])
    v = af.placeholder(af.int32, [])
    enq = q.enqueue(v)
    sess.run(enq, {v: 1})
    sess.run(enq, {v: 2})
    t0 = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError):
        sess.run(enq, {v: 3}, timeout=0.3)
    assert time.monotonic() - t0 >= 0.25
    assert sess.run(q.size()) == 2
    deq = q.dequeue()
    assert [int(sess.run(deq)), int(sess.run(deq))] == [1, 2]
    # The timed-out element never arrives, even once there is room.
    sess.run(enq, {v: 4})
    assert int(sess.run(deq)) == 4
    assert sess.run(q.size()) == 0


def test_blocked_dequeue_that_times_out_takes_nothing(sess):
    q = af.FIFOQueue(5, [af.int32], shapes=[[]])
    v = af.placeholder(af.int32, [])
    with pytest.raises(errors.DeadlineExceededError):
        sess.run(q.dequeue(), timeout=0.2)
    with pytest.raises(errors.DeadlineExceededError):
        sess.run(q.dequeue_many(3), timeout=0.2)
    sess.run(q.enqueue(v), {v: 42})
    sess.run(q.enqueue(v), {v: 43})
    # The abandoned waiters were ahead in line; they must not have swallowed the elements.
    assert sess.run(q.size()) == 2
    np.testing.assert_array_equal(sess.run(q.dequeue_many(2)), [42, 43])


def test_blocked_dequeue_wakes_on_enqueue_from_another_thread(sess):
    q = af.FIFOQueue(5, [af.float32], shapes=[[]])
    deq = q.dequeue()
    v = af.placeholder(af.float32, [])
    enq = q.enqueue(v)
    t, box = run_in_thread(sess.run, deq)
    wait_blocked(sess, q, "dequeuers", 1)
    assert t.is_alive(), "dequeue on an empty queue must block"
    sess.run(enq, {v: 3.5})
    t.join(10)
    assert box.get("value") == 3.5


def test_back_pressure_bounds_the_queue_and_keeps_order(sess):
    cap, n = 3, 40
    q = af.FIFOQueue(cap, [af.int32], shapes=[[]])
    v = af.placeholder(af.int32, [])
    enq = q.enqueue(v)
    deq = q.dequeue()
    size = q.size()

    def produce():
        for k in range(n):
            sess.run(enq, {v: k}, timeout=30)
    t, box = run_in_thread(produce)
    got, sizes = [], []
    while len(got) < n:
        if len(got) % 7 == 0 and n - len(got) >= cap:
            # A slow consumer: the producer runs ahead until the queue is full (waited for, not
            # slept on: a loaded machine may not schedule the producer within a fixed sleep) ...
            wait_until(lambda: int(sess.run(size)) == cap, 30, "the producer to fill the queue")
        sizes.append(int(sess.run(size)))
        got.append(int(sess.run(deq, timeout=30)))
    t.join(10)
    assert "error" not in box, box.get("error")
    assert got == list(range(n))
    assert max(sizes) <= cap             # ... and never beyond it
    assert max(sizes) == cap


def test_several_blocked_dequeuers_are_served_in_arrival_order(sess):
    q = af.FIFOQueue(5, [af.int32], shapes=[[]])
    deq = q.dequeue()
    threads = []
    for k in range(3):
        threads.append(run_in_thread(sess.run, deq))
        wait_blocked(sess, q, "dequeuers", k + 1)     # arrival order is the order they blocked in
    sess.run(q.enqueue_many([np.array([10, 20, 30], np.int32)]))
    values = []
    for t, box in threads:
        t.join(10)
        values.append(int(box["value"]))
    assert values == [10, 20, 30]


def test_dequeue_many_waits_for_enough_elements(sess):
    q = af.FIFOQueue(10, [af.int32], shapes=[[]])
    v = af.placeholder(af.int32, [None])
    enq = q.enqueue_many(v)
    t, box = run_in_thread(sess.run, q.dequeue_many(4))
    sess.run(enq, {v: [1, 2]})
    wait_blocked(sess, q, "dequeuers", 1)
    time.sleep(0.1)
    assert t.is_alive(), "dequeue_many(4) must wait for 4 elements"
    sess.run(enq, {v: [3, 4, 5]})
    t.join(10)
    np.testing.assert_array_equal(box["value"], [1, 2, 3, 4])
    assert sess.run(q.size()) == 1


def test_enqueue_many_larger_than_capacity_streams_through(sess):
    q = af.FIFOQueue(2, [af.int32], shapes=[[]])
    t, box = run_in_thread(sess.run, q.enqueue_many([np.arange(6, dtype=np.int32)]))
    got = [int(sess.run(q.dequeue(), timeout=10)) for _ in range(6)]
    t.join(10)
    assert got == list(range(6)) and "error" not in box


def test_dequeue_many_larger_than_capacity_fills_as_elements_come(sess):
    # As TF's TryDequeueMany: the batch takes elements as they arrive, which unblocks the enqueuer.
    q = af.FIFOQueue(3, [af.int32], shapes=[[]])
    t, box = run_in_thread(sess.run, q.enqueue_many([np.arange(10, dtype=np.int32)]))
    np.testing.assert_array_equal(sess.run(q.dequeue_many(10), timeout=10), np.arange(10))
    t.join(10)
    assert "error" not in box and sess.run(q.size()) == 0


def test_dequeue_many_that_fails_puts_back_what_it_took(sess):
    q = af.FIFOQueue(5, [af.int32], shapes=[[]])
    v = af.placeholder(af.int32, [None])
    sess.run(q.enqueue_many(v), {v: [7, 8]})
    with pytest.raises(errors.DeadlineExceededError):
        sess.run(q.dequeue_many(3), timeout=0.2)          # held 7 and 8 while it waited
    assert sess.run(q.size()) == 2
    t, box = run_in_thread(sess.run, q.dequeue_many(4))
    wait_blocked(sess, q, "dequeuers", 1)
    sess.run(q.enqueue_many(v), {v: [9]})
    sess.run(q.close())
    t.join(10)
    assert isinstance(box.get("error"), errors.OutOfRangeError)
    np.testing.assert_array_equal(sess.run(q.dequeue_up_to(4)), [7, 8, 9])


# ---------------------------------------------------------------------------------------------------
# Close
# ---------------------------------------------------------------------------------------------------

def test_close_then_drain_then_out_of_range(sess):
    q = af.FIFOQueue(5, [af.int32], shapes=[[]])
    sess.run(q.enqueue_many([np.array([1, 2, 3], np.int32)]))
    sess.run(q.close())
    assert sess.run(q.is_closed())
    with pytest.raises(errors.CancelledError, match="closed"):
        sess.run(q.enqueue(4))
    with pytest.raises(errors.OutOfRangeError):
        sess.run(q.dequeue_many(5))       # not enough left: fails without taking any
    assert sess.run(q.size()) == 3
    assert int(sess.run(q.dequeue())) == 1
    np.testing.assert_array_equal(sess.run(q.dequeue_up_to(10)), [2, 3])
    with pytest.raises(errors.OutOfRangeError, match="closed"):
        sess.run(q.dequeue())
    with pytest.raises(errors.OutOfRangeError):
        sess.run(q.dequeue_up_to(3))


def test_close_wakes_blocked_dequeuers_with_out_of_range(sess):
    q = af.FIFOQueue(5, [af.int32], shapes=[[]])
    t1, box1 = run_in_thread(sess.run, q.dequeue())
    t2, box2 = run_in_thread(sess.run, q.dequeue_up_to(4))
    wait_blocked(sess, q, "dequeuers", 2)            # woken by the close, not refused after it
    sess.run(q.close())
    t1.join(10)
    t2.join(10)
    assert isinstance(box1.get("error"), errors.OutOfRangeError)
    assert isinstance(box2.get("error"), errors.OutOfRangeError)


def test_close_lets_a_pending_dequeue_up_to_take_the_rest(sess):
    q = af.FIFOQueue(5, [af.int32], shapes=[[]])
    sess.run(q.enqueue_many([np.array([7, 8], np.int32)]))
    t, box = run_in_thread(sess.run, q.dequeue_up_to(4))
    wait_blocked(sess, q, "dequeuers", 1)
    assert t.is_alive()
    sess.run(q.close())
    t.join(10)
    np.testing.assert_array_equal(box["value"], [7, 8])


def test_close_without_cancel_lets_pending_enqueues_finish(sess):
    q = af.FIFOQueue(1, [af.int32], shapes=[[]])
    sess.run(q.enqueue(1))
    t, box = run_in_thread(sess.run, q.enqueue(2))
    wait_blocked(sess, q, "enqueuers", 1)            # pending before the close (else refused as closed)
    assert t.is_alive(), "enqueue on a full queue must block"
    sess.run(q.close())
    assert int(sess.run(q.dequeue())) == 1
    t.join(10)
    assert "error" not in box, box.get("error")
    assert int(sess.run(q.dequeue())) == 2
    with pytest.raises(errors.OutOfRangeError):
        sess.run(q.dequeue())


def test_close_with_cancel_pending_enqueues_fails_them(sess):
    q = af.FIFOQueue(1, [af.int32], shapes=[[]])
    sess.run(q.enqueue(1))
    t, box = run_in_thread(sess.run, q.enqueue_many([np.array([2, 3], np.int32)]))
    wait_blocked(sess, q, "enqueuers", 1)            # pending when the close cancels it
    sess.run(q.close(cancel_pending_enqueues=True))
    t.join(10)
    assert isinstance(box.get("error"), errors.CancelledError)
    assert int(sess.run(q.dequeue())) == 1
    with pytest.raises(errors.OutOfRangeError):
        sess.run(q.dequeue())


# ---------------------------------------------------------------------------------------------------
# RandomShuffleQueue
# ---------------------------------------------------------------------------------------------------

def _shuffle_order(seed, n=50, min_after=10):
    g = af.Graph()
    with g.as_default():
        q = af.RandomShuffleQueue(n, min_after, [af.int32], shapes=[[]], seed=seed)
        enq = q.enqueue_many([np.arange(n, dtype=np.int32)])
        close = q.close()
        deq = q.dequeue()
        with af.Session(graph=g) as s:
            s.run(enq)
            s.run(close)
            return [int(s.run(deq)) for _ in range(n)]


def test_random_shuffle_is_a_seeded_permutation():
    a = _shuffle_order(seed=7)
    b = _shuffle_order(seed=7)
    c = _shuffle_order(seed=8)
    assert sorted(a) == list(range(50))
    assert a == b, "the same seed must give the same order"
    assert a != c and a != list(range(50))


def test_random_shuffle_keeps_min_after_dequeue_until_closed(sess):
    q = af.RandomShuffleQueue(10, 5, [af.int32], shapes=[[]], seed=3)
    sess.run(q.enqueue_many([np.arange(7, dtype=np.int32)]))
    deq = q.dequeue()
    got = [int(sess.run(deq)), int(sess.run(deq))]
    with pytest.raises(errors.DeadlineExceededError):
        sess.run(deq, timeout=0.2)      # 5 left = min_after_dequeue: must wait
    with pytest.raises(errors.DeadlineExceededError):
        sess.run(q.dequeue_many(2), timeout=0.2)
    assert sess.run(q.size()) == 5
    sess.run(q.enqueue(100))
    got.append(int(sess.run(deq)))      # 6 > 5: one may go
    sess.run(q.close())
    got += [int(v) for v in sess.run(q.dequeue_up_to(10))]
    assert sorted(got) == list(range(7)) + [100]
    with pytest.raises(errors.OutOfRangeError):
        sess.run(deq)


def test_random_shuffle_capacity_blocks(sess):
    q = af.RandomShuffleQueue(3, 1, [af.float32], shapes=[[]], seed=1)
    v = af.placeholder(af.float32, [])
    for k in range(3):
        sess.run(q.enqueue(v), {v: k})
    with pytest.raises(errors.DeadlineExceededError):
        sess.run(q.enqueue(v), {v: 9.0}, timeout=0.2)
    assert sess.run(q.size()) == 3


# ---------------------------------------------------------------------------------------------------
# PaddingFIFOQueue
# ---------------------------------------------------------------------------------------------------

def test_padding_queue_pads_dequeue_many(sess):
    q = af.PaddingFIFOQueue(10, [af.int32, af.float32], shapes=[[None], [None, 2]])
    a = af.placeholder(af.int32, [None])
    b = af.placeholder(af.float32, [None, 2])
    enq = q.enqueue([a, b])
    sess.run(enq, {a: [1, 2, 3], b: np.ones((1, 2))})
    sess.run(enq, {a: [4], b: 2 * np.ones((3, 2))})
    x, y = sess.run(q.dequeue_many(2))
    np.testing.assert_array_equal(x, [[1, 2, 3], [4, 0, 0]])
    expect = np.zeros((2, 3, 2), np.float32)
    expect[0, :1] = 1
    expect[1] = 2
    np.testing.assert_array_equal(y, expect)


def test_padding_queue_rejects_wrong_rank(sess):
    q = af.PaddingFIFOQueue(10, [af.int32], shapes=[[None]], name="padq")
    a = af.placeholder(af.int32, None)
    with pytest.raises(errors.InvalidArgumentError, match="padq"):
        sess.run(q.enqueue(a), {a: np.zeros((2, 2), np.int32)})


def test_padding_queue_single_dequeue_keeps_shape(sess):
    q = af.PaddingFIFOQueue(10, [af.int32], shapes=[[None]])
    a = af.placeholder(af.int32, [None])
    sess.run(q.enqueue(a), {a: [5, 6]})
    np.testing.assert_array_equal(sess.run(q.dequeue()), [5, 6])


# ---------------------------------------------------------------------------------------------------
# Coordinator
# ---------------------------------------------------------------------------------------------------

def test_coordinator_stop_and_join():
    coord = af.train.Coordinator()
    assert not coord.should_stop()
    stopped = []

    def loop():
        while not coord.should_stop():
            time.sleep(0.01)
        stopped.append(True)
    threads = [threading.Thread(target=loop) for _ in range(3)]
    for t in threads:
        t.start()
    coord.request_stop()
    coord.join(threads, stop_grace_period_secs=5)
    assert coord.should_stop() and coord.joined and len(stopped) == 3


def test_coordinator_reraises_the_first_exception():
    coord = af.train.Coordinator()

    def fail():
        with coord.stop_on_exception():
            raise ValueError("boom")
    t = threading.Thread(target=fail)
    t.start()
    assert coord.wait_for_stop(5)
    coord.request_stop(RuntimeError("second"))       # not the first: ignored
    with pytest.raises(ValueError, match="boom"):
        coord.raise_requested_exception()
    with pytest.raises(ValueError, match="boom"):
        coord.join([t])


def test_coordinator_out_of_range_is_a_clean_stop():
    coord = af.train.Coordinator()
    coord.request_stop(errors.OutOfRangeError(None, None, "input exhausted"))
    assert coord.should_stop()
    coord.join([])                                    # nothing raised


def test_coordinator_join_reports_stragglers():
    coord = af.train.Coordinator()
    release = threading.Event()
    t = threading.Thread(target=release.wait, name="straggler", daemon=True)
    t.start()
    coord.request_stop()
    with pytest.raises(RuntimeError, match="straggler"):
        coord.join([t], stop_grace_period_secs=0.1)
    release.set()


def test_coordinator_wait_for_stop_times_out_and_clear_stop():
    coord = af.train.Coordinator()
    assert coord.wait_for_stop(0.05) is False
    coord.request_stop()
    assert coord.wait_for_stop(0.05) is True
    coord.clear_stop()
    assert not coord.should_stop()


def test_coordinator_looper_thread():
    coord = af.train.Coordinator()
    calls = []
    t = coord.loop(0.01, calls.append, args=(1,))
    wait_until(lambda: len(calls) >= 3, what="looper calls")
    coord.request_stop()
    coord.join([t], stop_grace_period_secs=5)


# ---------------------------------------------------------------------------------------------------
# QueueRunner
# ---------------------------------------------------------------------------------------------------

def _counting_pipeline(capacity=4):
    counter = af.Variable(0, dtype=af.int32, name="counter")
    q = af.FIFOQueue(capacity, [af.int32], shapes=[[]], name="pipeline")
    qr = af.train.QueueRunner(q, [q.enqueue(af.assign_add(counter, 1))])
    return counter, q, qr


def test_queue_runner_threads_fill_the_queue_and_stop(sess):
    counter, q, qr = _counting_pipeline()
    af.train.add_queue_runner(qr)
    sess.run(counter.initializer)
    coord = af.train.Coordinator()
    threads = af.train.start_queue_runners(sess, coord)
    assert len(threads) == 2                          # one enqueue loop + one close-on-stop
    got = [int(sess.run(q.dequeue(), timeout=10)) for _ in range(12)]
    assert got == list(range(1, 13))
    coord.request_stop()
    t0 = time.monotonic()
    coord.join(threads, stop_grace_period_secs=10)
    assert time.monotonic() - t0 < 5, "a loop blocked on a full queue must stop promptly"
    assert sess.run(q.is_closed())
    assert not any(t.is_alive() for t in threads)


def test_queue_runner_starts_once_per_session(sess):
    counter, q, qr = _counting_pipeline()
    sess.run(counter.initializer)
    coord = af.train.Coordinator()
    threads = qr.create_threads(sess, coord=coord, start=True, daemon=True)
    assert qr.create_threads(sess, coord=coord) == []
    coord.request_stop()
    coord.join(threads)


def test_queue_runner_closes_its_queue_when_the_input_ends(sess):
    # A finite source queue feeds a second queue: when the source is drained, the runner's
    # enqueue fails with OutOfRangeError and the runner closes the downstream queue.
    src = af.FIFOQueue(10, [af.int32], shapes=[[]], name="source")
    sess.run(src.enqueue_many([np.arange(5, dtype=np.int32)]))
    sess.run(src.close())
    dst = af.FIFOQueue(2, [af.int32], shapes=[[]], name="dest")
    qr = af.train.QueueRunner(dst, [dst.enqueue(src.dequeue() * 10)])
    coord = af.train.Coordinator()
    threads = qr.create_threads(sess, coord=coord, start=True, daemon=True)
    got = []
    with pytest.raises(errors.OutOfRangeError):
        while True:
            got.append(int(sess.run(dst.dequeue(), timeout=10)))
    assert got == [0, 10, 20, 30, 40]
    assert not coord.should_stop(), "running out of input is not an error"
    coord.request_stop()
    coord.join(threads)


def test_queue_runner_reports_errors_to_the_coordinator(sess):
    # An enqueue op that fails at run time (a shape that does not fit the queue).
    bad = af.FIFOQueue(4, [af.float32], shapes=[[2]], name="wrong_shape_q")
    v = af.placeholder_with_default(np.zeros(3, np.float32), [None])
    qr = af.train.QueueRunner(bad, [bad.enqueue(v)])
    coord = af.train.Coordinator()
    threads = qr.create_threads(sess, coord=coord, start=True, daemon=True)
    assert coord.wait_for_stop(10)
    with pytest.raises(errors.InvalidArgumentError, match="wrong_shape_q"):
        coord.join(threads)


def test_queue_runner_without_coordinator_records_exceptions(sess):
    bad = af.FIFOQueue(4, [af.float32], shapes=[[2]], name="bad_q2")
    v = af.placeholder_with_default(np.zeros(3, np.float32), [None])
    qr = af.train.QueueRunner(bad, [bad.enqueue(v)])
    threads = qr.create_threads(sess, start=True, daemon=True)
    for t in threads:
        t.join(10)
    assert len(qr.exceptions_raised) == 1
    assert isinstance(qr.exceptions_raised[0], errors.InvalidArgumentError)


def test_start_queue_runners_needs_a_session():
    with pytest.raises(ValueError, match="default session"):
        af.train.start_queue_runners()


async def test_queue_runner_tasks_with_arun(graph):
    counter, q, qr = _counting_pipeline(capacity=3)
    deq = q.dequeue()
    with af.Session(graph=graph) as s:
        await s.arun(counter.initializer)
        coord = af.train.Coordinator()
        async with asyncio.TaskGroup() as tg:
            tasks = qr.create_tasks(s, coord, task_group=tg)
            got = [int(await s.arun(deq, timeout=10)) for _ in range(8)]
            coord.request_stop()
        assert got == list(range(1, 9))
        assert all(t.done() and not t.cancelled() for t in tasks)
        assert await s.arun(q.is_closed())


async def test_queue_runner_tasks_end_when_input_ends(graph):
    src = af.FIFOQueue(10, [af.int32], shapes=[[]])
    dst = af.FIFOQueue(10, [af.int32], shapes=[[]])
    qr = af.train.QueueRunner(dst, [dst.enqueue(src.dequeue())])
    with af.Session(graph=graph) as s:
        await s.arun(src.enqueue_many([np.arange(4, dtype=np.int32)]))
        await s.arun(src.close())
        tasks = qr.create_tasks(s)                      # no coordinator: the tasks just end
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        np.testing.assert_array_equal(await s.arun(dst.dequeue_up_to(10)), [0, 1, 2, 3])
        assert await s.arun(dst.is_closed())


# ---------------------------------------------------------------------------------------------------
# Across tasks: a shared queue on a parameter server
# ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster():
    from actorflow.cluster import LocalCluster
    c = LocalCluster(ps=1, workers=2)
    c.start()
    yield c
    # Tasks that exchanged tensors directly can take long to shut down cleanly; nothing to keep here.
    c.stop(timeout=2)


def _client(cluster, task, shared_name, capacity=3):
    """A client with its own graph naming the PS queue `shared_name`, on worker `task`."""
    g = af.Graph()
    with g.as_default():
        with af.device("/job:ps/task:0"):
            q = af.FIFOQueue(capacity, [af.float32, af.int32], shapes=[[2], []], shared_name=shared_name,
                             name="shared_q")
        with af.device(f"/job:worker/task:{task}"):
            x = af.placeholder(af.float32, [2])
            i = af.placeholder(af.int32, [])
            ops = dict(enq=q.enqueue([x * 1.0, i]), deq=q.dequeue(), size=q.size(), close=q.close(),
                       deq_many=q.dequeue_many(2))
    return af.Session(cluster.task_target("worker", task), graph=g), ops, x, i


def test_shared_queue_across_client_sessions(cluster):
    name = f"shared_{os.getpid()}_{time.monotonic_ns()}"
    prod, p_ops, x, i = _client(cluster, 0, name)
    cons, c_ops, _, _ = _client(cluster, 1, name)
    with prod, cons:
        for k in range(3):
            prod.run(p_ops["enq"], {x: [k, k + 0.5], i: k})
        assert cons.run(c_ops["size"]) == 3
        # The queue is full: the producer blocks until the other client dequeues (back-pressure).
        t, box = run_in_thread(lambda: prod.run(p_ops["enq"], {x: [3, 3.5], i: 3}, timeout=20))
        time.sleep(0.2)
        assert t.is_alive()
        a, b = cons.run(c_ops["deq"], timeout=20)
        np.testing.assert_array_equal(a, [0, 0.5])
        assert b == 0
        t.join(20)
        assert "error" not in box, box.get("error")
        a, b = cons.run(c_ops["deq_many"], timeout=20)
        np.testing.assert_array_equal(b, [1, 2])
        # A consumer that times out on an empty queue leaves it intact.
        a, b = cons.run(c_ops["deq"], timeout=20)
        assert b == 3
        with pytest.raises(errors.DeadlineExceededError):
            cons.run(c_ops["deq"], timeout=0.3)
        prod.run(p_ops["enq"], {x: [4, 4.5], i: 4})
        assert cons.run(c_ops["size"]) == 1
        # A blocked consumer is woken by the other client's enqueue, then by its close.
        t, box = run_in_thread(lambda: [cons.run(c_ops["deq"], timeout=20) for _ in range(2)])
        time.sleep(0.2)
        prod.run(p_ops["close"])
        t.join(20)
        assert isinstance(box.get("error"), errors.OutOfRangeError)


def test_shared_queue_pipeline_between_processes_with_queue_runner(cluster):
    name = f"pipe_{os.getpid()}_{time.monotonic_ns()}"
    prod, p_ops, x, i = _client(cluster, 0, name, capacity=4)
    cons, c_ops, _, _ = _client(cluster, 1, name, capacity=4)
    g = prod.graph
    with g.as_default(), af.device("/job:ps/task:0"):
        n = af.Variable(0, dtype=af.int32, name=f"n_{name}")
        nxt = af.assign_add(n, 1)
        q = af.FIFOQueue(4, [af.float32, af.int32], shapes=[[2], []], shared_name=name, name="again")
        qr = af.train.QueueRunner(q, [q.enqueue([af.fill([2], af.cast(nxt, af.float32)), nxt])])
    with prod, cons:
        prod.run(n.initializer)
        coord = af.train.Coordinator()
        threads = qr.create_threads(prod, coord=coord, start=True, daemon=True)
        labels = [int(cons.run(c_ops["deq"], timeout=20)[1]) for _ in range(10)]
        assert labels == list(range(1, 11))
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=20)


def test_priority_queue_dequeues_lowest_priority_first():
    with af.Graph().as_default():
        q = af.io.PriorityQueue(10, [af.string, af.float32], shapes=[[], [2]])
        enq = q.enqueue_many([[5, 1, 3, 1], [b"e", b"a", b"c", b"b"], np.arange(8, dtype=np.float32).reshape(4, 2)])
        one = q.enqueue((np.int64(2), b"d", np.array([9.0, 9.5], np.float32)))
        deq = q.dequeue()
        many = q.dequeue_many(3)
        with af.Session() as s:
            s.run(enq)
            s.run(one)
            assert s.run(q.size()) == 5
            p, name, v = s.run(deq)
            assert (p, name) == (1, b"a") and v.tolist() == [2.0, 3.0]
            ps, names, vs = s.run(many)
            assert ps.tolist() == [1, 2, 3] and names.tolist() == [b"b", b"d", b"c"] and vs.shape == (3, 2)
        assert deq[0].dtype == af.int64 and many[2].shape.as_list() == [3, 2]
        assert af.PriorityQueue is af.io.PriorityQueue
