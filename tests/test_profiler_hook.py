"""af.train.ProfilerHook (tf.compat.v1.train.ProfilerHook): traces every n-th step under a
MonitoredSession and writes its Chrome trace-event timeline."""
from __future__ import annotations

import json

import pytest

import actorflow as af


def test_profiler_hook_writes_timelines_of_the_traced_steps(tmp_path):
    with af.Graph().as_default():
        gs = af.train.get_or_create_global_step()
        x = af.Variable(1.0, name="x")
        train = af.group(af.assign_add(x, 1.0, name="bump"), af.assign_add(gs, 1))
        hook = af.train.ProfilerHook(save_steps=2, output_dir=str(tmp_path))
        with af.train.MonitoredSession(hooks=[hook]) as sess:
            for _ in range(5):
                sess.run(train)
    # the first run only starts the timer (at step 0); the runs reaching global steps 2 and 4 are traced
    assert [p.rsplit("/", 1)[-1] for p in hook.written] == ["timeline-2.json", "timeline-4.json"]
    trace = json.loads((tmp_path / "timeline-2.json").read_text())
    names = {e.get("args", {}).get("name") for e in trace["traceEvents"] if e.get("ph") == "X"}
    assert "bump" in names


def test_profiler_hook_needs_exactly_one_trigger():
    with pytest.raises(ValueError, match="exactly one"):
        af.train.ProfilerHook()
    with pytest.raises(ValueError, match="exactly one"):
        af.train.ProfilerHook(save_steps=1, save_secs=1)
