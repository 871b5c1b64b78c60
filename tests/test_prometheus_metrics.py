"""Prometheus `/metrics` of every cluster task (issue 19), scraped over HTTP from a LocalCluster."""
from __future__ import annotations

import urllib.error
import urllib.request

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

import actorflow as af
from actorflow.transport.channel import TOKEN_HEADER


def scrape(address: str, token: str | None) -> dict:
    """{sample name: [(labels, value)]} of a task's /metrics."""
    headers = {TOKEN_HEADER: token} if token is not None else {}
    req = urllib.request.Request(f"http://{address}/metrics", headers=headers)
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    out: dict = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def value(samples, name, **labels):
    vals = [v for lab, v in samples.get(name, []) if all(lab.get(k) == x for k, x in labels.items())]
    assert vals, f"{name}{labels} not in the scrape"
    return sum(vals)


def test_metrics_endpoint_counts_training(graph, tmp_path):
    with af.cluster.LocalCluster(ps=1, workers=1, log_dir=str(tmp_path)) as cluster:
        worker = cluster.spec.task_address("worker", 0)
        ps = cluster.spec.task_address("ps", 0)
        with af.device("/job:ps/task:0"):
            w = af.Variable(np.zeros((32, 4), np.float32), name="w")
            q = af.FIFOQueue(10, [af.float32], shapes=[[]], name="q")
        with af.device("/job:worker/task:0"):
            x = af.placeholder(af.float32, [16, 32], name="x")
            loss = af.reduce_mean(af.square(af.matmul(x, w) - 1.0))
            train = af.train.GradientDescentOptimizer(0.1).minimize(loss)
        enq = q.enqueue([af.constant(1.0)])
        feed = {x: np.ones((16, 32), np.float32)}
        with af.Session(cluster.target) as sess:
            sess.run(af.global_variables_initializer())
            before = scrape(worker, cluster.token)
            for _ in range(5):
                sess.run(train, feed)
            sess.run(enq)
            sess.run(enq)
            sess.run(train, feed, options=af.RunOptions(trace_level=af.RunOptions.SOFTWARE_TRACE),
                     run_metadata=af.RunMetadata())
            after = scrape(worker, cluster.token)
            ps_metrics = scrape(ps, cluster.token)

        # The step counter and the latency histogram grow with training.
        grown = value(after, "actorflow_steps_total") - value(before, "actorflow_steps_total")
        assert grown == 6
        assert value(after, "actorflow_step_seconds_count") == value(after, "actorflow_steps_total")
        assert value(after, "actorflow_step_seconds_bucket", le="+Inf") == value(after, "actorflow_steps_total")
        assert value(after, "actorflow_step_seconds_sum") > 0
        # Kernel time by op type from the traced step.
        assert value(after, "actorflow_kernel_activations_total", op="MatMul") >= 1
        assert value(after, "actorflow_kernel_seconds_total", op="MatMul") >= 0
        # Tensors moved per peer: the worker receives w from the ps and sends the gradient back.
        assert value(after, "actorflow_received_bytes_total", peer="/job:ps/task:0") >= 32 * 4 * 4 * 6
        assert value(after, "actorflow_received_messages_total", peer="/job:ps/task:0") >= 6
        assert value(after, "actorflow_sent_bytes_total", peer="/job:ps/task:0") >= 32 * 4 * 4 * 6
        assert value(ps_metrics, "actorflow_sent_bytes_total", peer="/job:worker/task:0") >= 32 * 4 * 4 * 6
        # Gauges read at scrape time.
        assert value(ps_metrics, "actorflow_queue_size", queue="q") == 2
        assert value(after, "actorflow_rendezvous_pending") == 0
        assert value(after, "actorflow_active_steps") == 0
        if "process_resident_memory_bytes" in after:         # Linux
            assert value(after, "process_resident_memory_bytes") > 10 * 2 ** 20
            assert value(after, "process_start_time_seconds") > 0

        # The token protects /metrics as it protects /health.
        for token in (None, "wrong"):
            with pytest.raises(urllib.error.HTTPError) as e:
                scrape(worker, token)
            assert e.value.code == 401
        assert value(scrape(worker, cluster.token), "actorflow_refused_connections_total") >= 2


def test_each_service_has_its_own_registry():
    from actorflow.cluster.metrics import TaskMetrics

    class _Service:                          # only what the scrape-time collector reads
        def __init__(self, name):
            from actorflow.actors.resource import ResourceContainer
            from actorflow.transport.rendezvous import Rendezvous
            self.name, self.active, self.graphs, self.connections, self.refused = name, {}, {}, set(), 0
            self.rendezvous, self.container = Rendezvous(), ResourceContainer()

    a, b = TaskMetrics(_Service("/job:a/task:0")), TaskMetrics(_Service("/job:b/task:0"))
    a.steps.inc(3)
    a.sent("/job:b/task:0", 100)

    def parse(m):
        return {s.name: s.value for f in text_string_to_metric_families(m.exposition().decode()) for s in f.samples
                if not s.labels}
    assert parse(a)["actorflow_steps_total"] == 3
    assert parse(b)["actorflow_steps_total"] == 0
    assert "actorflow_sent_bytes_total" not in {s.name for f in text_string_to_metric_families(
        b.exposition().decode()) for s in f.samples}
    # Sampling: one step in trace_every is traced; 0 turns it off.
    m = TaskMetrics(_Service("/job:c/task:0"), trace_every=3)
    assert [m.sample_trace() for _ in range(6)] == [0, 0, 1, 0, 0, 1]
    assert not any(TaskMetrics(_Service("/job:d/task:0"), trace_every=0).sample_trace() for _ in range(5))
