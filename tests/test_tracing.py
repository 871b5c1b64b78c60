"""Step traces (issue 19): RunOptions(trace_level) -> RunMetadata.step_stats, and the Chrome trace
of af.client.timeline, locally and across a 2-task cluster."""
from __future__ import annotations

import collections
import json

import numpy as np
import pytest

import actorflow as af
from actorflow.client import timeline

N = 512        # a MatMul this size goes to the kernel pool, split into row blocks
ITERS = 4


def _stats_by_name(stats):
    out = collections.defaultdict(list)
    for ds in stats.dev_stats:
        for ns in ds.node_stats:
            out[ns.node_name].append((ds, ns))
    return out


def _frame(ns):
    return next((line[len("frame "):] for line in ns.timeline_label.split("\n") if line.startswith("frame ")), "")


def _model():
    x = af.placeholder(af.float32, [N, N], name="x")
    w = af.Variable(np.full((N, N), 0.01, np.float32), name="w")
    y = af.nn.relu(af.matmul(x, w, name="mm"), name="act")
    total = af.reduce_sum(y, name="total")
    i = af.constant(0)
    acc = af.constant(1.0)
    _, loop_out = af.while_loop(lambda i, a: i < ITERS, lambda i, a: (i + 1, a * 2.0), [i, acc], name="loop")
    return x, total, loop_out


def _traced_run(level):
    x, total, loop_out = _model()
    # the JIT off: at its DEFAULT level the small loop would run as one kernel call, one record
    off = af.ConfigProto(graph_options=af.GraphOptions(
        optimizer_options=af.OptimizerOptions(global_jit_level=af.OptimizerOptions.OFF)))
    with af.Session(config=off) as sess:
        sess.run(af.global_variables_initializer())
        md = af.RunMetadata()
        vals = sess.run([total, loop_out], {x: np.ones((N, N), np.float32)},
                        options=af.RunOptions(trace_level=level), run_metadata=md)
    return vals, md


def test_untraced_run_leaves_step_stats_empty(graph):
    x, total, _ = _model()
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        md = af.RunMetadata()
        sess.run(total, {x: np.ones((N, N), np.float32)}, run_metadata=md)
        assert md.step_stats is None
        sess.run(total, {x: np.ones((N, N), np.float32)}, options=af.RunOptions(), run_metadata=md)
        assert md.step_stats is None


def test_every_node_once_per_iteration_and_times_nest(graph):
    (total, loop_out), md = _traced_run(af.RunOptions.FULL_TRACE)
    assert total == pytest.approx(N * N * N * 0.01, rel=1e-4)
    assert loop_out == 2.0 ** ITERS
    stats = md.step_stats
    assert [ds.device for ds in stats.dev_stats] == ["/job:localhost/replica:0/task:0/device:CPU:0"]
    by_name = _stats_by_name(stats)
    for name in ("w", "w/read", "mm", "act", "total"):
        assert len(by_name[name]) == 1, name
        assert _frame(by_name[name][0][1]) == ""
    # Loop nodes: one activation per (frame, iteration); the condition runs ITERS + 1 times.
    seen = collections.Counter((name, _frame(ns)) for name, recs in by_name.items() for _, ns in recs)
    assert all(c == 1 for c in seen.values()), [k for k, c in seen.items() if c > 1]
    less = sorted(_frame(ns) for _, ns in by_name["loop/Less"])
    assert less == [f"loop:{k}" for k in range(ITERS + 1)]
    mul = {_frame(ns) for _, ns in by_name["loop/mul"]}
    assert {f"loop:{k}" for k in range(ITERS)} <= mul
    for recs in by_name.values():
        for _, ns in recs:
            assert ns.all_start_micros > 0
            assert 0 <= ns.op_start_rel_micros <= ns.op_end_rel_micros <= ns.all_end_rel_micros, ns.node_name


def test_split_kernel_blocks_run_on_pool_threads(graph):
    _, md = _traced_run(af.RunOptions.FULL_TRACE)
    by_name = _stats_by_name(md.step_stats)
    ds, mm = by_name["mm"][0]
    assert "mm = MatMul(x:0, w/read:0)" in mm.timeline_label
    blocks = [ns for name, recs in by_name.items() if name.startswith("mm/_block_") for _, ns in recs]
    assert len(blocks) >= 2
    names = dict(ds.thread_names)
    start = mm.all_start_micros + mm.op_start_rel_micros
    end = mm.all_start_micros + mm.op_end_rel_micros
    for b in blocks:
        assert b.thread_id != 0
        assert names[b.thread_id].startswith("actorflow-kernel_")
        assert start <= b.all_start_micros + b.op_start_rel_micros
        assert b.all_start_micros + b.op_end_rel_micros <= end
    # FULL_TRACE records output sizes, TF-shaped.
    out = mm.output[0].tensor_description
    assert out.allocation_description.requested_bytes == N * N * 4
    assert [d.size for d in out.shape.dim] == [N, N]


def test_software_trace_has_times_without_output_sizes(graph):
    _, md = _traced_run(af.RunOptions.SOFTWARE_TRACE)
    by_name = _stats_by_name(md.step_stats)
    assert by_name["mm"] and not by_name["mm"][0][1].output


async def test_arun_fills_step_stats(graph):
    x, total, _ = _model()
    with af.Session() as sess:
        await sess.arun(af.global_variables_initializer())
        md = af.RunMetadata()
        await sess.arun(total, {x: np.ones((N, N), np.float32)},
                        options=af.RunOptions(trace_level=af.RunOptions.FULL_TRACE), run_metadata=md)
    assert "total" in _stats_by_name(md.step_stats)


# -- Chrome trace-event format ------------------------------------------------------------------------

_REQUIRED = {  # per phase, the fields the trace-event format document requires
    "X": {"name", "ph", "ts", "dur", "pid", "tid"},
    "M": {"name", "ph", "pid", "args"},
    "s": {"name", "cat", "ph", "id", "ts", "pid", "tid"},
    "f": {"name", "cat", "ph", "id", "ts", "pid", "tid"},
    "C": {"name", "ph", "ts", "pid", "args"},
}


def validate_chrome_trace(text: str) -> dict:
    """Checks a trace against the Trace Event Format: the JSON object form, required fields per
    phase, numeric times, metadata names, flow starts matched by ends, and properly nested
    complete events on every thread. Returns the parsed trace."""
    trace = json.loads(text)
    assert isinstance(trace, dict) and isinstance(trace["traceEvents"], list)
    flows = collections.defaultdict(dict)
    slices = collections.defaultdict(list)
    for e in trace["traceEvents"]:
        ph = e["ph"]
        assert ph in _REQUIRED, e
        missing = _REQUIRED[ph] - e.keys()
        assert not missing, (missing, e)
        assert isinstance(e["pid"], int)
        if "tid" in e:
            assert isinstance(e["tid"], int)
        if "ts" in e:
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        if ph == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
            slices[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
        elif ph == "M":
            assert e["name"] in ("process_name", "thread_name", "process_sort_index", "thread_sort_index")
        elif ph in "sf":
            flows[(e["cat"], e["id"])][ph] = e
        elif ph == "C":
            assert all(isinstance(v, (int, float)) for v in e["args"].values())
    for key, pair in flows.items():
        assert set(pair) == {"s", "f"}, key
        assert pair["s"]["ts"] <= pair["f"]["ts"], key
    for key, spans in slices.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for b, e in spans:
            while stack and stack[-1] <= b:
                stack.pop()
            assert not stack or e <= stack[-1], f"slices overlap on {key}"
            stack.append(e)
    return trace


def test_chrome_trace_is_valid_and_shows_threads_and_flows(graph):
    _, md = _traced_run(af.RunOptions.FULL_TRACE)
    text = timeline.Timeline(md.step_stats).generate_chrome_trace_format(show_memory=True, show_dataflow=True)
    trace = validate_chrome_trace(text)
    events = trace["traceEvents"]
    x = [e for e in events if e["ph"] == "X"]
    ops = {e["args"]["name"]: e for e in x}
    assert ops["mm"]["name"] == "MatMul" and ops["mm"]["args"]["input0"] == "x:0"
    threads = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "event loop" in threads and any(t.startswith("actorflow-kernel_") for t in threads)
    flows = [e for e in events if e["ph"] == "s"]
    assert any(e["args"]["name"] == "mm" for e in flows)            # mm -> act
    assert any(e["ph"] == "C" for e in events)
    # TF's Timeline module path works too, and so does a RunMetadata.
    assert af.client.timeline.Timeline(md).generate_chrome_trace_format()
    with pytest.raises(ValueError, match="trace_level"):
        timeline.Timeline(None)


def test_validator_rejects_broken_traces():
    with pytest.raises(AssertionError):
        validate_chrome_trace(json.dumps({"traceEvents": [{"ph": "X", "name": "a", "pid": 0, "tid": 0, "ts": 1}]}))
    overlap = [{"ph": "X", "name": "a", "pid": 0, "tid": 0, "ts": 0, "dur": 10},
               {"ph": "X", "name": "b", "pid": 0, "tid": 0, "ts": 5, "dur": 10}]
    with pytest.raises(AssertionError, match="overlap"):
        validate_chrome_trace(json.dumps({"traceEvents": overlap}))
    with pytest.raises(AssertionError):
        validate_chrome_trace(json.dumps({"traceEvents": [
            {"ph": "s", "name": "t", "cat": "c", "id": 1, "pid": 0, "tid": 0, "ts": 0}]}))


# -- across a cluster -----------------------------------------------------------------------------------

def test_cluster_step_returns_every_task_stats_aligned(graph, tmp_path):
    with af.cluster.LocalCluster(ps=1, workers=1, log_dir=str(tmp_path)) as cluster:
        with af.device("/job:ps/task:0"):
            w = af.Variable(np.full((64, 64), 0.5, np.float32), name="w")
        with af.device("/job:worker/task:0"):
            x = af.placeholder(af.float32, [8, 64], name="x")
            z = af.reduce_sum(af.matmul(x, w, name="mm"), name="z")
        with af.Session(cluster.target) as sess:
            sess.run(af.global_variables_initializer())
            md = af.RunMetadata()
            got = sess.run(z, {x: np.ones((8, 64), np.float32)},
                           options=af.RunOptions(trace_level=af.RunOptions.FULL_TRACE), run_metadata=md)
    assert got == pytest.approx(8 * 64 * 64 * 0.5)
    devices = {ds.device: ds for ds in md.step_stats.dev_stats}
    assert set(devices) == {"/job:ps/task:0/device:CPU:0", "/job:worker/task:0/device:CPU:0"}
    ps_nodes = {ns.node_name: ns for ns in devices["/job:ps/task:0/device:CPU:0"].node_stats}
    wk_nodes = {ns.node_name: ns for ns in devices["/job:worker/task:0/device:CPU:0"].node_stats}
    assert "w" in ps_nodes and "mm" in wk_nodes and "z" in wk_nodes
    send = next(ns for n, ns in ps_nodes.items() if n.startswith("_send/"))
    recv = next(ns for n, ns in wk_nodes.items() if n.startswith("_recv/"))
    assert f"send {64 * 64 * 4} bytes to /job:worker/task:0" in send.timeline_label
    assert f"recv {64 * 64 * 4} bytes from /job:ps/task:0" in recv.timeline_label
    # Both tasks run on this machine's clock: the NTP estimate is off by at most half the round trip.
    assert set(md.clock_offsets) == {"/job:ps/task:0", "/job:worker/task:0"}
    for task, off in md.clock_offsets.items():
        assert off["round_trip_us"] >= 0
        assert abs(off["offset_us"]) <= off["round_trip_us"], (task, off)
    validate_chrome_trace(timeline.Timeline(md.step_stats).generate_chrome_trace_format())


def test_failed_traced_step_raises_and_tracing_goes_on(graph):
    a = af.placeholder(af.float32, [None, None], name="a")
    b = af.placeholder(af.float32, [None, None], name="b")
    c = af.matmul(a, b, name="bad_mm")
    with af.Session() as sess:
        md = af.RunMetadata()
        opts = af.RunOptions(trace_level=af.RunOptions.FULL_TRACE)
        with pytest.raises(af.errors.InvalidArgumentError, match="bad_mm"):
            sess.run(c, {a: np.ones((2, 3), np.float32), b: np.ones((4, 2), np.float32)}, options=opts,
                     run_metadata=md)
        assert md.step_stats is None
        sess.run(c, {a: np.ones((2, 3), np.float32), b: np.ones((3, 2), np.float32)}, options=opts, run_metadata=md)
        assert "bad_mm" in _stats_by_name(md.step_stats)


def test_step_stats_without_tensorboard_are_dataclasses_with_tf_names(graph, monkeypatch):
    from actorflow.actors import tracing
    monkeypatch.setattr(tracing, "_proto_module", lambda: None)
    _, md = _traced_run(af.RunOptions.FULL_TRACE)
    stats = md.step_stats
    assert isinstance(stats, tracing.StepStats)
    mm = _stats_by_name(stats)["mm"][0][1]
    assert mm.output[0].tensor_description.allocation_description.requested_bytes == N * N * 4
    validate_chrome_trace(timeline.Timeline(stats).generate_chrome_trace_format(show_memory=True))


def test_file_writer_stores_traced_run_metadata(graph, tmp_path):
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.compat.proto import config_pb2
    _, md = _traced_run(af.RunOptions.FULL_TRACE)
    writer = af.summary.FileWriter(str(tmp_path))
    writer.add_run_metadata(md, "step_1", global_step=1)
    writer.close()
    acc = ea.EventAccumulator(str(tmp_path))
    acc.Reload()
    got = acc.RunMetadata("step_1")
    assert isinstance(got, config_pb2.RunMetadata)
    names = {ns.node_name for ds in got.step_stats.dev_stats for ns in ds.node_stats}
    assert {"mm", "act", "total"} <= names
