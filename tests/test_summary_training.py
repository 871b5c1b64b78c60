"""Summaries written during training (MonitoredTrainingSession, SummarySaverHook, StepCounterHook) and
served by a real TensorBoard process on loopback."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

import actorflow as af

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing import event_accumulator as ea  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_graph():
    af.reset_default_graph()
    yield
    af.summary.FileWriterCache.clear()


def _model():
    x = af.placeholder(af.float32, [None, 2], name="x")
    y = af.placeholder(af.float32, [None, 1], name="y")
    w = af.Variable(af.zeros([2, 1]), name="w")
    loss = af.reduce_mean(af.square(af.matmul(x, w) - y))
    gs = af.train.get_or_create_global_step()
    train = af.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
    rng = np.random.default_rng(0)
    xs = rng.random((32, 2)).astype(np.float32)
    feed = {x: xs, y: xs @ np.array([[1.0], [2.0]], np.float32)}
    return loss, w, train, feed


def _acc(d):
    acc = ea.EventAccumulator(d, size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0})
    acc.Reload()
    return acc


def test_monitored_training_session_writes_summaries_every_n_steps(tmp_path):
    loss, w, train, feed = _model()
    af.summary.scalar("loss", loss)
    af.summary.histogram("weights", w)
    losses = []
    with af.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), save_summaries_steps=5,
                                           log_step_count_steps=10, save_checkpoint_secs=None,
                                           hooks=[af.train.StopAtStepHook(last_step=23)]) as sess:
        while not sess.should_stop():
            losses.append(sess.run([train, loss], feed)[1])
    acc = _acc(str(tmp_path))
    # As TF's SummarySaverHook: the first run, then every 5 steps, at the step after the update.
    steps = [e.step for e in acc.Scalars("loss")]
    assert steps == [1, 6, 11, 16, 21]
    assert [e.value for e in acc.Scalars("loss")] == pytest.approx([losses[s - 1] for s in steps], rel=1e-6)
    assert [e.step for e in acc.Histograms("weights")] == steps
    rates = acc.Scalars("global_step/sec")
    assert [e.step for e in rates] == [11, 21] and all(e.value > 0 for e in rates)
    assert {"x", "w", "loss"} <= {n.name for n in acc.Graph().node}


def test_summary_dir_and_secs(tmp_path):
    loss, _, train, feed = _model()
    af.summary.scalar("loss", loss)
    sdir = str(tmp_path / "summaries")
    with af.train.MonitoredTrainingSession(summary_dir=sdir, save_summaries_secs=3600, log_step_count_steps=None,
                                           hooks=[af.train.StopAtStepHook(last_step=4)]) as sess:
        while not sess.should_stop():
            sess.run(train, feed)
    assert [e.step for e in _acc(sdir).Scalars("loss")] == [1]            # the first step, then none for an hour


def test_summary_saver_hook_with_summary_op_and_writer(tmp_path):
    loss, _, train, feed = _model()
    s = af.summary.scalar("only_this", loss, collections=[])
    af.summary.scalar("not_this", loss)
    writer = af.summary.FileWriter(str(tmp_path))
    hook = af.train.SummarySaverHook(save_steps=2, summary_writer=writer, summary_op=s)
    with af.train.MonitoredTrainingSession(hooks=[hook, af.train.StopAtStepHook(last_step=5)],
                                           log_step_count_steps=None) as sess:
        while not sess.should_stop():
            sess.run(train, feed)
    writer.close()
    acc = _acc(str(tmp_path))
    assert acc.Tags()["scalars"] == ["only_this"]
    assert [e.step for e in acc.Scalars("only_this")] == [1, 3, 5]
    with pytest.raises(ValueError, match="Exactly one of scaffold or summary_op"):
        af.train.SummarySaverHook(save_steps=1, output_dir=str(tmp_path))
    with pytest.raises(ValueError, match="every_secs or every_steps"):
        af.train.SummarySaverHook(summary_op=s, output_dir=str(tmp_path))
    with pytest.raises(ValueError, match="exactly one of every_n_steps and every_n_secs"):
        af.train.StepCounterHook(every_n_steps=None)


def _start_tensorboard(logdir, out_path):
    log = open(out_path, "w")
    proc = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", logdir, "--port", "0",
                             "--host", "127.0.0.1", "--load_fast", "false", "--reload_interval", "1"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, log


def test_tensorboard_serves_the_scalars_over_http(tmp_path):
    logdir = str(tmp_path / "logs")
    x = af.placeholder(af.float32, [None, 3], name="inputs")
    af.summary.scalar("loss", af.reduce_sum(x))
    with af.summary.FileWriter(logdir, af.get_default_graph()) as fw:
        for step, value in enumerate([0.5, 0.25, 0.125]):
            fw.add_summary(af.Summary(value=[af.Summary.Value(tag="loss", simple_value=value)]), step * 10)
    out_path = str(tmp_path / "tensorboard.out")
    proc, log = _start_tensorboard(logdir, out_path)
    try:
        deadline = time.monotonic() + 120
        port, data = None, None
        while time.monotonic() < deadline and data is None:
            assert proc.poll() is None, open(out_path).read()
            if port is None:
                m = re.search(r"http://127\.0\.0\.1:(\d+)/", open(out_path).read())
                port = int(m.group(1)) if m else None
            if port is not None:
                url = f"http://127.0.0.1:{port}/data/plugin/scalars/scalars?run=.&tag=loss"
                try:
                    with urllib.request.urlopen(url, timeout=5) as r:
                        got = json.loads(r.read())
                    data = got or None
                except OSError:          # not serving yet, or the run not loaded yet
                    pass
            if data is None:
                time.sleep(0.5)
        assert data is not None, f"TensorBoard did not serve the scalars in time:\n{open(out_path).read()}"
        assert [(step, value) for _, step, value in data] == [(0, 0.5), (10, 0.25), (20, 0.125)]
        # The graph tab's data: TensorBoard parses the GraphDef and serves it back as text.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugin/graphs/graph?run=.&conceptual=false",
                                    timeout=30) as r:
            graph = r.read().decode()
        assert 'name: "inputs"' in graph and 'op: "Placeholder"' in graph
        assert 'op: "ScalarSummary"' in graph and 'input: "Sum"' in graph
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)
        log.close()
