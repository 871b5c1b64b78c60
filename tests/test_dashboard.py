"""The live cluster dashboard (issue 19), driven in a real browser: headless Chromium (Debian's
`chromium`, through Playwright) against a LocalCluster that trains while the test watches.

Set ACTORFLOW_UPDATE_SCREENSHOTS=1 to write docs/dashboard.png from the run (the README shows it).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import actorflow as af
from actorflow.cluster.local import free_port
from actorflow.dashboard import Dashboard
from actorflow.dashboard.graph_picture import to_dot
from actorflow.transport.channel import TOKEN_HEADER

DOCS = Path(__file__).resolve().parent.parent / "docs"


def chromium_path() -> str:
    """Debian's chromium (Playwright's own browser download needs the internet, which CI lacks)."""
    path = os.environ.get("ACTORFLOW_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail("the dashboard test needs Chromium: apt-get install -y chromium (or set ACTORFLOW_CHROMIUM)")
    return path


class Trainer(threading.Thread):
    """Trains a small model on the cluster until stopped: variables, a queue and an accumulator on the
    ps, one tower per worker; a checkpoint every 40 steps; a failed step (a task restarting) is retried."""

    def __init__(self, cluster, ckpt_dir):
        super().__init__(name="dashboard-test-trainer", daemon=True)
        self.cluster, self.ckpt_dir = cluster, ckpt_dir
        self.stop = threading.Event()
        self.steps = 0
        self.failures = 0
        self.error = None

    def run(self):
        try:
            g = af.Graph()
            with g.as_default():
                with af.device("/job:ps/task:0"):
                    w = af.Variable(np.zeros((64, 8), np.float32), name="w")
                    q = af.FIFOQueue(1_000_000, [af.float32], shapes=[[]], name="batches")
                    acc = af.ConditionalAccumulator(af.float32, shape=(64, 8), shared_name="grads", name="grads")
                losses = []
                for i in range(2):
                    with af.device(f"/job:worker/task:{i}"), af.name_scope(f"tower_{i}"):
                        x = af.random_normal([128, 64])
                        h = af.nn.relu(af.matmul(x, w))
                        losses.append(af.reduce_mean(af.square(h - 1.0)))
                loss = af.add_n(losses, name="loss")
                opt = af.train.GradientDescentOptimizer(0.01)
                grads = opt.compute_gradients(loss, [w])
                train = opt.apply_gradients(grads)
                enq = q.enqueue([loss])
                apply = acc.apply_grad(grads[0][0], local_step=0)
                saver = af.train.Saver([w])
                with af.Session(self.cluster.target) as sess:
                    sess.run(af.global_variables_initializer())
                    while not self.stop.is_set():
                        try:
                            sess.run([train, enq, apply] if self.steps < 150 else [train, enq], options=af.RunOptions(
                                timeout_in_ms=10000))
                            self.steps += 1
                            if self.steps % 40 == 0:
                                saver.save(sess, os.path.join(self.ckpt_dir, "model"), global_step=self.steps)
                        except af.errors.OpError:
                            self.failures += 1        # a task was killed: the next step re-registers
                            time.sleep(0.2)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e


def test_dashboard_in_chromium_follows_training(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    cluster = af.cluster.LocalCluster(ps=1, workers=2, restart="on-failure", log_dir=str(tmp_path / "logs"),
                                      env={"ACTORFLOW_METRICS_TRACE_EVERY": "5"})
    with cluster:
        dash = Dashboard(cluster.spec, cluster.token, port=free_port(), interval=0.5,
                         restarts=lambda: {f"/job:{j}/task:{t}": n for (j, t), n in cluster.restarts.items()})
        trainer = Trainer(cluster, str(tmp_path / "ckpt"))
        with dash, sync_playwright() as pw:
            trainer.start()
            browser = pw.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1500, "height": 1000})
                urls = []
                page.on("request", lambda r: urls.append(r.url))

                # Without the token: 401 and a login form; a wrong token is refused too.
                resp = page.goto(dash.url)
                assert resp.status == 401
                expect(page.locator("form input[name=token]")).to_be_visible()
                page.fill("input[name=token]", "not-the-token")
                page.click("button[type=submit]")
                expect(page.locator(".why")).to_contain_text("not the cluster token")
                page.fill("input[name=token]", cluster.token)
                page.click("button[type=submit]")

                # Every task healthy, its steps counting up while training runs.
                for task in ("/job:ps/task:0", "/job:worker/task:0", "/job:worker/task:1"):
                    expect(page.locator(f'tr[data-task="{task}"] td.health')).to_have_text("healthy", timeout=30000)
                expect(page.locator("#live")).to_have_class(re.compile("on"))
                w0 = page.locator('tr[data-task="/job:worker/task:0"] td.steps')
                page.wait_for_function("() => document.body.dataset.polls > 2", timeout=30000)

                def count(loc):
                    return int(loc.inner_text().replace(",", "").replace("–", "0") or 0)
                first = count(w0)
                page.wait_for_function(
                    f"""() => Number(document.querySelector('tr[data-task="/job:worker/task:0"] td.steps')
                        .textContent.replace(/,/g, '')) > {first}""", timeout=30000)
                page.wait_for_function(
                    """() => Number(document.querySelector('tr[data-task="/job:worker/task:1"] td.rate')
                        .textContent) > 0""", timeout=30000)
                # The charts: uPlot canvases, and a steps/s series that has points above zero.
                expect(page.locator("#rate-chart canvas")).to_have_count(1)
                expect(page.locator("#hist-chart canvas")).to_have_count(1)
                # Top ops from the sampled traces, traffic per pair of tasks, the queue and accumulator
                # filling up, checkpoints, the placed graph as SVG.
                expect(page.locator("#ops tbody")).to_contain_text("MatMul", timeout=30000)
                expect(page.locator("#ops tbody")).not_to_contain_text("_Recv")
                expect(page.locator("#pairs tbody")).to_contain_text("/job:ps/task:0", timeout=30000)
                expect(page.locator("#queues tbody")).to_contain_text("batches", timeout=30000)
                expect(page.locator("#queues tbody")).to_contain_text("grads")
                q0 = int(page.locator("#queues td.qsize").first.inner_text().replace(",", ""))
                page.wait_for_function(
                    f"() => Number(document.querySelector('#queues td.qsize').textContent.replace(/,/g, '')) > {q0}",
                    timeout=30000)
                expect(page.locator("#checkpoints tbody")).to_contain_text("model-", timeout=60000)
                expect(page.locator("#graph svg")).to_have_count(1, timeout=60000)
                svg = page.locator("#graph svg").inner_html()
                assert "cluster_/job:ps/task:0" in svg and "MatMul" in svg

                # A worker dies and its launcher restarts it: the dashboard shows the restart, the
                # task healthy again, and its steps counting again.
                cluster.kill("worker", 1)
                expect(page.locator('tr[data-task="/job:worker/task:1"] td.restarts')).to_have_text("1", timeout=30000)
                expect(page.locator("#events")).to_contain_text("/job:worker/task:1 restarted", timeout=30000)
                expect(page.locator('tr[data-task="/job:worker/task:1"] td.health')).to_have_text("healthy",
                                                                                                 timeout=60000)
                before = trainer.steps
                deadline = time.monotonic() + 60
                while trainer.steps < before + 20 and time.monotonic() < deadline:
                    time.sleep(0.2)
                assert trainer.steps >= before + 20, f"training did not go on after the restart: {trainer.error}"
                page.wait_for_function(
                    """() => Number(document.querySelector('tr[data-task="/job:worker/task:1"] td.rate')
                        .textContent) > 0""", timeout=30000)
                time.sleep(2)
                shot = tmp_path / "dashboard.png"
                page.screenshot(path=str(shot), full_page=True)
                assert shot.stat().st_size > 20000
                if os.environ.get("ACTORFLOW_UPDATE_SCREENSHOTS"):
                    shutil.copy(shot, DOCS / "dashboard.png")

                # The token never travelled in a URL; the API refuses a request without it.
                assert urls and not any(cluster.token in u for u in urls)
                ctx = browser.new_context()
                other = ctx.new_page()
                assert other.goto(dash.url + "api/snapshot").status == 401
                assert "needs the cluster token" in other.content()
                ctx.close()
            finally:
                trainer.stop.set()
                trainer.join(30)
                browser.close()
        assert trainer.error is None, trainer.error


def test_dashboard_api_with_token_header(tmp_path):
    """The JSON API with the token header; refusals without it; the CLI's errors."""
    with af.cluster.LocalCluster(ps=0, workers=1) as cluster:
        with Dashboard(cluster.spec, cluster.token, port=free_port(), interval=0.2) as dash:
            def get(path, token):
                req = urllib.request.Request(dash.url + path, headers={TOKEN_HEADER: token} if token else {})
                with urllib.request.urlopen(req, timeout=10) as r:
                    return r.status, r.read()
            # Until the collector's first poll of the task has answered (a fixed 0.6 s sleep raced it
            # on a loaded machine).
            deadline = time.monotonic() + 30
            while True:
                status, body = get("api/snapshot", cluster.token)
                snap = json.loads(body)
                if snap["tasks"][0]["up"] or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert status == 200 and snap["tasks"][0]["task"] == "/job:worker/task:0" and snap["tasks"][0]["up"]
            for token in (None, "wrong"):
                with pytest.raises(urllib.error.HTTPError) as e:
                    get("api/snapshot", token)
                assert e.value.code == 401
            with pytest.raises(urllib.error.HTTPError) as e:       # no graph yet: says so
                get("api/graph.svg", cluster.token)
            assert e.value.code == 503 and b"no graph is registered" in e.value.read()
            # The static files carry nothing secret and load without the token (the login page's style).
            assert get("static/vendor/uPlot.iife.min.js", None)[0] == 200
    with pytest.raises(ValueError, match="loopback"):
        Dashboard({"worker": ["127.0.0.1:1"]}, "t", host="0.0.0.0")
    bad = tmp_path / "spec.json"
    bad.write_text(json.dumps({"worker": ["127.0.0.1:1"]}))
    with pytest.raises(ValueError, match="token"):
        Dashboard(spec_file=str(bad))
    r = subprocess.run([sys.executable, "-m", "actorflow.cli", "dashboard", "--cluster", str(tmp_path / "none.json")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "none.json" in r.stderr


def test_graph_picture_joins_send_and_recv():
    graphs = {"/job:ps/task:0": [{"nodes": [["w", "VariableV2", [], []],
                                            ["_send/w_0/0", "_Send", ["w"], [], {"key": "w:0;ps->wk", "send": "ps",
                                                                                  "recv": "wk"}]]}],
              "/job:worker/task:0": [{"nodes": [["_recv/w_0/0", "_Recv", [], [], {"key": "w:0;ps->wk", "send": "ps",
                                                                                   "recv": "wk"}],
                                                ["m", "MatMul", ["_recv/w_0/0", "_recv/w_0/0"], []]]}]}
    dot = to_dot(graphs)
    assert '"/job:ps/task:0|_send/w_0/0" -> "/job:worker/task:0|_recv/w_0/0" [penwidth=2' in dot
    assert '"/job:worker/task:0|_recv/w_0/0" -> "/job:worker/task:0|m";' in dot
    # Large graphs are drawn by name scope, with op counts.
    big = {"/job:worker/task:0": [{"nodes": [[f"scope{i % 3}/op{i}", "Add", [], []] for i in range(300)]}]}
    grouped = to_dot(big)
    assert grouped.count("[label=") == 3 and "100 ops" in grouped


def test_cluster_up_with_dashboard(tmp_path):
    """`actorflow cluster up --dashboard` serves the dashboard of the cluster it started."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "actorflow.cli", "cluster", "up", "--ps", "0", "--workers", "1",
                             "--dir", str(tmp_path), "--dashboard", "--dashboard-port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("Ctrl-C"):
                break
        out = "".join(lines)
        assert f"dashboard: http://127.0.0.1:{port}/" in out, out
        token = json.loads((tmp_path / "cluster.json").read_text())["token"]
        assert token not in out
        deadline = time.monotonic() + 30
        while True:
            req = urllib.request.Request(f"http://127.0.0.1:{port}/api/snapshot", headers={TOKEN_HEADER: token})
            snap = json.loads(urllib.request.urlopen(req, timeout=10).read())
            if snap["tasks"][0]["up"] or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert snap["tasks"][0]["up"] and snap["tasks"][0]["task"] == "/job:worker/task:0"
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10)
        assert e.value.code == 401 and b"cluster token" in e.value.read()
    finally:
        proc.terminate()
        proc.wait(30)
        proc.stdout.close()
