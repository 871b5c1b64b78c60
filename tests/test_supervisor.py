"""af.train.Supervisor and SessionManager, as TF-1.x training programs use them."""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

import actorflow as af


def _model():
    x = af.constant(np.ones((4, 2), np.float32))
    w = af.Variable(np.zeros((2, 1), np.float32), name="w")
    step = af.train.get_or_create_global_step()
    loss = af.reduce_mean(af.square(af.matmul(x, w) - 1.0))
    af.summary.scalar("loss", loss)
    train = af.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    return w, step, loss, train


def test_managed_session_trains_saves_and_resumes(tmp_path):
    logdir = str(tmp_path)
    with af.Graph().as_default():
        w, step, loss, train = _model()
        sv = af.train.Supervisor(logdir=logdir, save_model_secs=0.2, save_summaries_secs=0.2)
        with sv.managed_session() as sess:
            first = sess.run(loss)
            deadline = time.time() + 5
            while not sv.should_stop() and (sess.run(step) < 30 or time.time() < deadline - 4.5):
                sess.run(train)
            last = sess.run(loss)
        assert last < first
        assert af.train.latest_checkpoint(logdir) is not None
        assert any(f.startswith("events.out.tfevents") for f in os.listdir(logdir))
        with pytest.raises(RuntimeError, match="finalized"):
            af.constant(1.0)                                     # Supervisor finalizes the graph, as TF's does
    with af.Graph().as_default():
        w, step, loss, train = _model()
        sv = af.train.Supervisor(logdir=logdir, save_model_secs=0)
        with sv.managed_session() as sess:
            assert sess.run(step) >= 30                           # restored, not initialized again
            np.testing.assert_allclose(sess.run(loss), last, rtol=1e-5, atol=1e-7)


def test_queue_runners_out_of_range_and_other_errors():
    with af.Graph().as_default():
        (item,) = af.train.slice_input_producer([af.constant(np.arange(6))], num_epochs=1, shuffle=False)
        total = af.Variable(0, name="total", dtype=af.int64)
        add = af.assign_add(total, af.cast(item, af.int64))
        sv = af.train.Supervisor(logdir=None)
        seen = 0
        with sv.managed_session() as sess:
            while not sv.should_stop():
                sess.run(add)                                    # OutOfRangeError ends the body cleanly
                seen += 1
        assert seen == 6
    with af.Graph().as_default():
        af.Variable(1.0)
        sv = af.train.Supervisor(logdir=None)
        with pytest.raises(ValueError, match="boom"):
            with sv.managed_session():
                raise ValueError("boom")


def test_session_manager_errors():
    with af.Graph().as_default():
        v = af.Variable(1.0, name="v")
        ready = af.report_uninitialized_variables()
        sm = af.train.SessionManager(ready_op=ready, recovery_wait_secs=0.05)
        with pytest.raises(RuntimeError, match="no init_op or init_fn"):
            sm.prepare_session("")
        with pytest.raises(af.errors.DeadlineExceededError, match="not ready after waiting.*v"):
            sm.wait_for_session("", max_wait_secs=0.2)
        sess = sm.prepare_session("", init_op=af.global_variables_initializer())
        assert sess.run(v) == 1.0
        sess.close()
        sess, ok = sm.recover_session("", saver=af.train.Saver(), checkpoint_dir=None)
        assert ok is False
        sess.close()
