"""Conditional accumulators (af.ConditionalAccumulator, af.SparseConditionalAccumulator): TF's
semantics (stale gradients dropped, take_grad blocks for num_required fresh ones, averages, resets
and increments the step), build-time checks, and the actorflow extensions: drop counters and log
lines naming worker/step/batch, `max_accumulated`, try_apply_grad's status, withdrawal.
"""
from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest

import actorflow as af
from actorflow import errors
from actorflow.graph.ops import conditional_accumulator_ops as cao

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("graph")]

# The public names, once actorflow/__init__.py exports them; the module's until then.
ConditionalAccumulator = getattr(af, "ConditionalAccumulator", cao.ConditionalAccumulator)
SparseConditionalAccumulator = getattr(af, "SparseConditionalAccumulator", cao.SparseConditionalAccumulator)


@pytest.fixture
def sess(graph):
    with af.Session(graph=graph) as s:
        yield s


def dense(shape=(2,), **kw):
    acc = ConditionalAccumulator(af.float32, shape=list(shape), **kw)
    g = af.placeholder(af.float32, list(shape))
    step = af.placeholder(af.int64, [])
    return acc, g, step


# ---------------------------------------------------------------------------------------------------
# Build time
# ---------------------------------------------------------------------------------------------------

def test_build_time_checks_name_the_op():
    acc = ConditionalAccumulator(af.float32, shape=[2, 3], name="acc_a")
    with pytest.raises(ValueError, match="Shape mismatch"):
        acc.apply_grad(np.zeros((3, 3), np.float32))
    with pytest.raises(ValueError, match="float32"):
        acc.apply_grad(af.constant(np.zeros((2, 3), np.float64)))
    with pytest.raises(ValueError, match="floating-point"):
        ConditionalAccumulator(af.int32, shape=[2])
    with pytest.raises(ValueError, match="reduction_type"):
        ConditionalAccumulator(af.float32, reduction_type="MAX")
    assert acc.take_grad(2).shape.as_list() == [2, 3]
    assert acc.take_grad(2).dtype is af.float32
    assert acc.num_accumulated().dtype is af.int32
    sparse = SparseConditionalAccumulator(af.float32, shape=[10, 4])
    with pytest.raises(ValueError, match="SparseConditionalAccumulator"):
        cao.AccumulatorApplyGradient(sparse.accumulator_ref, af.constant(0, dtype=af.int64),
                                     af.constant(np.zeros((10, 4), np.float32)))
    idx, vals, shape = sparse.take_grad(1)
    assert vals.shape.as_list() == [None, 4] and idx.dtype is af.int64 and shape.shape.as_list() == [2]


def test_local_step_is_cast_to_int64():
    acc = ConditionalAccumulator(af.float32, shape=[1])
    op = acc.apply_grad([1.0], local_step=af.constant(3))
    assert op.inputs[1].dtype is af.int64


# ---------------------------------------------------------------------------------------------------
# TF semantics
# ---------------------------------------------------------------------------------------------------

def test_take_averages_resets_and_increments_step(sess):
    acc, g, step = dense()
    apply = acc.apply_grad(g, local_step=step)
    take = acc.take_grad(2)
    for v in ([1, 2], [3, 6]):
        sess.run(apply, {g: v, step: 0})
    assert sess.run(acc.num_accumulated()) == 2
    np.testing.assert_allclose(sess.run(take), [2, 4])
    assert sess.run(acc.num_accumulated()) == 0
    # The accumulator is now at step 1: a step-0 gradient is stale.
    sess.run(apply, {g: [100, 100], step: 0})
    assert sess.run(acc.num_accumulated()) == 0
    for v in ([1, 1], [2, 2], [3, 3]):
        sess.run(apply, {g: v, step: 1})
    np.testing.assert_allclose(sess.run(take), [2, 2])     # all three fresh ones count


def test_sum_reduction(sess):
    acc, g, step = dense(reduction_type="SUM")
    apply = acc.apply_grad(g, local_step=step)
    sess.run(apply, {g: [1, 2], step: 0})
    sess.run(apply, {g: [3, 4], step: 5})           # a later step is fresh too
    np.testing.assert_allclose(sess.run(acc.take_grad(2)), [4, 6])


def test_take_blocks_until_enough_and_timeout_leaves_state(sess):
    acc, g, step = dense()
    apply = acc.apply_grad(g, local_step=step)
    take = acc.take_grad(2)
    sess.run(apply, {g: [1, 1], step: 0})
    with pytest.raises(errors.DeadlineExceededError):
        sess.run(take, timeout=0.2)
    # The abandoned take took nothing and did not advance the step.
    assert sess.run(acc.num_accumulated()) == 1
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("v", sess.run(take, timeout=10)))
    t.start()
    time.sleep(0.1)
    assert t.is_alive()
    sess.run(apply, {g: [3, 3], step: 0})
    t.join(10)
    np.testing.assert_allclose(box["v"], [2, 2])


def test_set_global_step_makes_older_gradients_stale(sess):
    acc, g, step = dense()
    apply = acc.apply_grad(g, local_step=step)
    sess.run(acc.set_global_step(10))
    sess.run(apply, {g: [1, 1], step: 9})
    sess.run(apply, {g: [5, 5], step: 10})
    assert sess.run(acc.num_accumulated()) == 1
    np.testing.assert_allclose(sess.run(acc.take_grad(1)), [5, 5])


def test_num_required_must_be_positive(sess):
    acc, _, _ = dense()
    with pytest.raises(errors.InvalidArgumentError, match="num_required must be positive"):
        sess.run(acc.take_grad(0))


def test_runtime_shape_mismatch(sess):
    acc = ConditionalAccumulator(af.float32, shape=None, name="anyshape")
    g = af.placeholder(af.float32, None)
    apply = acc.apply_grad(g)
    sess.run(apply, {g: np.ones(3)})
    with pytest.raises(errors.InvalidArgumentError, match="Shape mismatch"):
        sess.run(apply, {g: np.ones(4)})


def test_shared_name_is_one_accumulator(sess):
    a = ConditionalAccumulator(af.float32, shape=[1], shared_name="shared_acc", name="a")
    b = ConditionalAccumulator(af.float32, shape=[1], shared_name="shared_acc", name="b")
    sess.run(a.apply_grad([2.0]))
    sess.run(b.apply_grad([4.0]))
    np.testing.assert_allclose(sess.run(a.take_grad(2)), [3.0])


def test_sparse_accumulator_row_wise_average(sess):
    acc = SparseConditionalAccumulator(af.float32, shape=[6, 2])
    idx = af.placeholder(af.int64, [None])
    vals = af.placeholder(af.float32, [None, 2])
    step = af.placeholder(af.int64, [])
    apply = acc.apply_grad(idx, vals, grad_shape=[6, 2], local_step=step)
    sess.run(apply, {idx: [4, 1], vals: [[1, 1], [2, 2]], step: 0})
    sess.run(apply, {idx: [1, 0], vals: [[4, 4], [3, 3]], step: 0})
    sess.run(apply, {idx: [5], vals: [[9, 9]], step: -5 + 4})     # withdrawn (negative): not counted
    out = acc.take_indexed_slices_grad(2)
    i, v, shape = sess.run([out.indices, out.values, out.dense_shape])
    np.testing.assert_array_equal(i, [0, 1, 4])
    # Each row averaged over the gradients that contained it (TF's semantics).
    np.testing.assert_allclose(v, [[3, 3], [3, 3], [1, 1]])
    np.testing.assert_array_equal(shape, [6, 2])


def test_sparse_duplicate_indices_in_one_gradient_are_summed(sess):
    acc = SparseConditionalAccumulator(af.float64, shape=[4, 1])
    grad = af.IndexedSlices(af.constant(np.array([[1.0], [2.0], [5.0]])), af.constant(np.array([2, 2, 0])),
                            af.constant(np.array([4, 1])))
    sess.run(acc.apply_indexed_slices_grad(grad))
    sess.run(acc.apply_indexed_slices_grad(grad))
    i, v, _ = sess.run(acc.take_grad(2))
    np.testing.assert_array_equal(i, [0, 2])
    np.testing.assert_allclose(v, [[5.0], [3.0]])


def test_sparse_checks_indices_and_rows(sess):
    acc = SparseConditionalAccumulator(af.float32, shape=[3, 2], name="sp")
    idx = af.placeholder(af.int64, [None])
    vals = af.placeholder(af.float32, [None, 2])
    apply = acc.apply_grad(idx, vals, grad_shape=[3, 2])
    with pytest.raises(errors.InvalidArgumentError, match="out of range"):
        sess.run(apply, {idx: [3], vals: [[1, 1]]})
    with pytest.raises(errors.InvalidArgumentError, match="non-empty input values"):
        sess.run(apply, {idx: [0, 1], vals: [[1, 1]]})


# ---------------------------------------------------------------------------------------------------
# actorflow extensions: reporting drops, quotas, status
# ---------------------------------------------------------------------------------------------------

def test_dropped_stale_gradients_are_counted_and_logged(sess, caplog):
    acc, g, step = dense(name="reported")
    worker = af.placeholder(af.int64, [])
    batch = af.placeholder(af.int64, [])
    apply = acc.apply_grad(g, local_step=step, worker=worker, batch_id=batch)
    sess.run(acc.set_global_step(4))
    with caplog.at_level(logging.INFO, logger="actorflow.actors.accumulator"):
        sess.run(apply, {g: [1, 1], step: 3, worker: 2, batch: 1234})
        sess.run(apply, {g: [1, 1], step: 4, worker: 1, batch: 7})
    assert sess.run(acc.num_dropped()) == 1
    assert sess.run(acc.num_dropped("stale")) == 1
    assert sess.run(acc.num_dropped("late")) == 0
    lines = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(lines) == 1
    assert "worker 2" in lines[0] and "batch 1234" in lines[0] and "step 3" in lines[0] and "step 4" in lines[0]
    assert "reported" in lines[0]


def test_max_accumulated_drops_late_gradients(sess, caplog):
    acc, g, step = dense(max_accumulated=2)
    status, at = acc.try_apply_grad(g, local_step=step, worker=af.constant(5, dtype=af.int64))
    outcomes = []
    with caplog.at_level(logging.INFO, logger="actorflow.actors.accumulator"):
        for v in ([1, 1], [3, 3], [100, 100]):
            outcomes.append(tuple(int(x) for x in sess.run([status, at], {g: v, step: 0})))
    assert outcomes == [(cao.ACCEPTED, 0), (cao.ACCEPTED, 0), (cao.LATE, 0)]
    np.testing.assert_allclose(sess.run(acc.take_grad(2)), [2, 2])
    assert sess.run(acc.num_dropped("late")) == 1
    assert sess.run(acc.num_dropped("late_last_take")) == 1
    assert any("late gradient from worker 5" in r.getMessage() for r in caplog.records)
    # A step-0 gradient after the take is stale; the status says so and gives the new step.
    assert tuple(int(x) for x in sess.run([status, at], {g: [1, 1], step: 0})) == (cao.STALE, 1)
    assert tuple(int(x) for x in sess.run([status, at], {g: [1, 1], step: -1})) == (cao.WITHDRAWN, 1)
    assert sess.run(acc.num_dropped()) == 2


def test_withdrawn_gradients_are_not_counted(sess):
    acc, g, step = dense()
    apply = acc.apply_grad(g, local_step=step)
    sess.run(apply, {g: [1, 1], step: -1})
    assert sess.run(acc.num_accumulated()) == 0 and sess.run(acc.num_dropped()) == 0
