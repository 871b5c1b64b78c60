"""af.train.ProgressBarHook: a tqdm bar over the global step in MonitoredTrainingSession (issue 19)."""
from __future__ import annotations

import io

import numpy as np
import pytest

import actorflow as af

pytestmark = pytest.mark.usefixtures("graph")


def _model():
    x = af.placeholder(af.float32, [8, 3], name="x")
    w = af.Variable(np.zeros((3, 1), np.float32), name="w")
    loss = af.reduce_mean(af.square(af.matmul(x, w) - 1.0), name="loss")
    gs = af.train.get_or_create_global_step()
    train = af.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
    return loss, train, {x: np.ones((8, 3), np.float32)}


def test_bar_reaches_last_step_and_shows_tensors():
    loss, train, feed = _model()
    out = io.StringIO()
    bar = af.train.ProgressBarHook(last_step=12, tensors={"loss": loss}, every_n_steps=4, file=out, desc="fit")
    runs = 0
    with af.train.MonitoredTrainingSession(hooks=[bar, af.train.StopAtStepHook(last_step=12)],
                                           log_step_count_steps=None) as sess:
        while not sess.should_stop():
            sess.run(train, feed)
            runs += 1
            assert bar.bar.n == runs           # one step per run, counted after the update
    assert runs == 12
    assert bar.bar.n == bar.bar.total == 12
    text = out.getvalue()
    assert "fit" in text and "12/12" in text and "loss=" in text


def test_num_steps_counts_from_the_restored_step(tmp_path):
    loss, train, feed = _model()
    with af.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), save_checkpoint_steps=5,
                                           hooks=[af.train.StopAtStepHook(last_step=5)],
                                           log_step_count_steps=None) as sess:
        while not sess.should_stop():
            sess.run(train, feed)
    out = io.StringIO()
    bar = af.train.ProgressBarHook(num_steps=3, file=out)
    with af.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), save_checkpoint_steps=5,
                                           hooks=[bar, af.train.StopAtStepHook(num_steps=3)],
                                           log_step_count_steps=None) as sess:
        while not sess.should_stop():
            sess.run(train, feed)
    assert bar.bar.total == 8 and bar.bar.n == 8
    assert "8/8" in out.getvalue()


def test_bad_arguments():
    with pytest.raises(ValueError, match="Exactly one of num_steps and last_step"):
        af.train.ProgressBarHook()
    with pytest.raises(ValueError, match="Exactly one of num_steps and last_step"):
        af.train.ProgressBarHook(last_step=3, num_steps=3)
    with pytest.raises(ValueError, match="every_n_steps"):
        af.train.ProgressBarHook(last_step=3, every_n_steps=0)
    af.placeholder(af.float32, [1])
    with pytest.raises(RuntimeError, match="global step"):
        with af.train.MonitoredTrainingSession(hooks=[af.train.ProgressBarHook(last_step=3)]):
            pass
