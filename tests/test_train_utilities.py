"""tf.train's smaller utilities: checkpoint helpers, summary_iterator, match_filenames_once, the
FinalOps / FeedFn / GlobalStepWaiter hooks, basic_train_loop; and tf.io's aliases."""
from __future__ import annotations

import os

import numpy as np

import actorflow as af


def test_checkpoint_helpers(tmp_path):
    with af.Graph().as_default():
        v = af.Variable(1.0, name="v")
        saver = af.train.Saver(max_to_keep=5)
        with af.Session() as s:
            s.run(v.initializer)
            first = saver.save(s, str(tmp_path / "m"), global_step=1)
            it = af.train.checkpoints_iterator(str(tmp_path), timeout=0.3)
            assert next(it) == first
            second = saver.save(s, str(tmp_path / "m"), global_step=2)
            assert next(it) == second
            assert list(it) == []                                     # nothing new within the timeout
    assert len(af.train.get_checkpoint_mtimes([first, second, str(tmp_path / "none")])) == 2
    af.train.remove_checkpoint(first)
    assert not os.path.exists(first + ".index") and af.train.latest_checkpoint(str(tmp_path)) == second


def test_summary_iterator_and_match_filenames_once(tmp_path):
    for n in ("b.txt", "a.txt", "c.csv"):
        (tmp_path / n).write_text("x")
    with af.Graph().as_default():
        files = af.io.match_filenames_once(str(tmp_path / "*.txt"))
        w = af.summary.FileWriter(str(tmp_path / "logs"))
        w.add_summary(af.summary.Summary(value=[af.summary.Summary.Value(tag="loss", simple_value=0.5)]), 7)
        w.close()
        with af.Session() as s:
            s.run(af.local_variables_initializer())
            assert [os.path.basename(f.decode()) for f in s.run(files)] == ["a.txt", "b.txt"]
    (event_file,) = os.listdir(tmp_path / "logs")
    events = list(af.train.summary_iterator(str(tmp_path / "logs" / event_file)))
    assert events[0].file_version.startswith("brain.Event")
    tagged = [(e.step, v.tag, v.simple_value) for e in events for v in e.summary.value]
    assert tagged == [(7, "loss", 0.5)]


def test_hooks_and_basic_train_loop():
    with af.Graph().as_default():
        step = af.train.get_or_create_global_step()
        x = af.placeholder(af.float32, [])
        total = af.Variable(0.0, name="total")
        add = af.assign_add(total, x)
        inc = af.assign_add(step, 1)
        final = af.train.FinalOpsHook(total)
        feeds = iter([1.0, 2.0, 3.0])
        hooks = [af.train.FeedFnHook(lambda: {x: next(feeds)}), final, af.train.GlobalStepWaiterHook(0),
                 af.train.StopAtStepHook(last_step=3)]
        with af.train.MonitoredTrainingSession(hooks=hooks) as sess:
            while not sess.should_stop():
                sess.run([add, inc])
        assert final.final_ops_values == 6.0
    with af.Graph().as_default():
        counter = af.Variable(0, name="counter")
        bump = af.assign_add(counter, 1)
        sv = af.train.Supervisor(logdir=None)
        seen = []

        def train_step(sess):
            seen.append(int(sess.run(bump)))
            if seen[-1] >= 4:
                sv.request_stop()
        af.train.basic_train_loop(sv, train_step)
        assert seen == [1, 2, 3, 4]
    assert af.io.RandomShuffleQueue is af.RandomShuffleQueue and callable(af.io.write_graph)
    _ = np
