"""af.contrib.summary (TF 1.x's op-based summaries): writers, recording conditions, the ops' tags and
steps, read back with TensorBoard's own EventAccumulator."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing import event_accumulator as ea  # noqa: E402

cs = af.contrib.summary


def _accumulator(logdir):
    acc = ea.EventAccumulator(str(logdir), size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0, ea.TENSORS: 0,
                                                          ea.IMAGES: 0})
    acc.Reload()
    return acc


def test_a_writer_records_scalars_and_histograms_at_the_global_step(tmp_path):
    step = af.train.get_or_create_global_step()
    x = af.placeholder(af.float32, [])
    writer = cs.create_file_writer(str(tmp_path), flush_millis=10)
    with writer.as_default(), cs.always_record_summaries():
        loss_op = cs.scalar("loss", x * 2.0)
        hist_op = cs.histogram("weights", af.stack([x, x + 1.0, x + 2.0]), family="params")
        fixed = cs.scalar("at_seven", 1.5, step=7)
    assert set(cs.all_summary_ops()) == {loss_op, hist_op, fixed}
    inc = af.assign_add(step, 1)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        cs.initialize(session=sess, graph=sess.graph)
        for v in (1.0, 2.0, 3.0):
            sess.run(cs.all_summary_ops(), {x: v})
            sess.run(inc)
        sess.run(writer.flush())
        sess.run(writer.close())
    acc = _accumulator(tmp_path)
    scalars = {e.step: e.value for e in acc.Scalars("loss")}
    assert scalars == {0: 2.0, 1: 4.0, 2: 6.0}
    assert [(e.step, e.value) for e in acc.Scalars("at_seven")] == [(7, 1.5)] * 3
    hist = acc.Histograms("params/weights")
    assert [h.step for h in hist] == [0, 1, 2] and hist[-1].histogram_value.max == 5.0
    assert acc.Graph() is not None


def test_recording_every_n_steps_never_and_without_a_writer(tmp_path):
    step = af.train.get_or_create_global_step()
    writer = cs.create_file_writer(str(tmp_path))
    assert isinstance(cs.scalar("no_writer", 1.0), af.Operation)          # no default writer: a no-op
    with writer.as_default():
        with cs.never_record_summaries():
            assert cs.scalar("never", 1.0).type == "NoOp"
        with cs.record_summaries_every_n_global_steps(2):
            every_other = cs.scalar("every_other", af.cast(step, af.float32))
    inc = af.assign_add(step, 1)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        written = []
        for _ in range(5):
            written.append(bool(sess.run(every_other)))
            sess.run(inc)
        sess.run(writer.close())
    assert written == [True, False, True, False, True]
    assert [(e.step, e.value) for e in _accumulator(tmp_path).Scalars("every_other")] == \
        [(0, 0.0), (2, 2.0), (4, 4.0)]


def test_errors_name_what_is_missing(tmp_path):
    with af.Graph().as_default():
        writer = cs.create_file_writer(str(tmp_path))
        with writer.as_default(), cs.always_record_summaries():
            with pytest.raises(ValueError, match="'loss'.*no global step"):
                cs.scalar("loss", 1.0)
            with pytest.raises(ValueError, match="no global step"), cs.record_summaries_every_n_global_steps(3):
                pass
    with pytest.raises(NotImplementedError, match="create_db_writer"):
        cs.create_db_writer("/tmp/x.db")
    assert cs.eval_dir("/m") == "/m/eval" and cs.eval_dir("/m", "dev") == "/m/eval_dev"
    np.testing.assert_equal(cs.should_record_summaries(), False)


def test_a_tpu_estimator_host_call_writes_contrib_summaries_each_step(tmp_path):
    """The usual TPU program: host_call = (fn, [global_step, loss]) whose fn writes tf.contrib.summary
    scalars; on the CPU it runs with every step and its writer is flushed at the end."""
    from actorflow.estimator import tpu
    x = np.linspace(-1, 1, 32, dtype=np.float32)[:, None]

    def input_fn(params):
        return af.data.Dataset.from_tensor_slices((x, 3 * x)).repeat().batch(params["batch_size"])

    def model_fn(features, labels, mode, params):
        pred = af.layers.dense(features, 1)
        loss = af.losses.mean_squared_error(labels, pred)
        step = af.train.get_global_step()
        train_op = af.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)

        def host_fn(gs, loss):
            with cs.create_file_writer(params["logdir"]).as_default(), cs.always_record_summaries():
                return cs.all_summary_ops() + [cs.scalar("loss", loss[0], step=gs[0])]
        return tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op,
                                    host_call=(host_fn, [af.reshape(step, [1]), af.reshape(loss, [1])]))
    logdir = tmp_path / "host"
    est = tpu.TPUEstimator(model_fn, config=tpu.RunConfig(model_dir=str(tmp_path / "m")), use_tpu=False,
                           train_batch_size=8, params={"logdir": str(logdir)})
    est.train(input_fn, steps=5)
    losses = _accumulator(logdir).Scalars("loss")
    assert [e.step for e in losses] == [0, 1, 2, 3, 4]
    assert losses[-1].value < losses[0].value
