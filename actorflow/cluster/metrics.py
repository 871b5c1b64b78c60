"""Prometheus metrics of one task (served at `/metrics` by every task's server, token-protected).

Each WorkerService has its own `prometheus_client.CollectorRegistry`, so several servers in one
process (tests, the simulator) never mix their figures. Names follow Prometheus conventions:

- `actorflow_steps_total`, `actorflow_step_failures_total`; `actorflow_step_seconds` (histogram:
  `_bucket`, `_sum`, `_count`), the time from a run_graph request to its reply on this task;
- `actorflow_kernel_seconds_total{op}` and `actorflow_kernel_activations_total{op}`: kernel time
  by op type, from traced steps: the ones a client traces (RunOptions.trace_level), plus one step
  in `ACTORFLOW_METRICS_TRACE_EVERY` (default 100; 0 turns sampling off) traced at SOFTWARE_TRACE
  for the purpose (a traced step costs a few percent: benchmarks/tracing.py), so the figures are
  a sample, to be read as ratios between ops;
- `actorflow_sent_bytes_total{peer}`, `actorflow_sent_messages_total{peer}`,
  `actorflow_received_bytes_total{peer}`, `actorflow_received_messages_total{peer}`: tensors sent
  to and received from each peer task;
- gauges read when scraped: `actorflow_rendezvous_pending` (tensors waiting in the rendezvous),
  `actorflow_queue_size{queue}`, `actorflow_accumulator_count{accumulator}`,
  `actorflow_active_steps`, `actorflow_graphs_registered`, `actorflow_connections`;
  `actorflow_refused_connections_total` (requests without a valid cluster token);
- the standard `process_*` metrics (Linux): `process_resident_memory_bytes` (RSS),
  `process_start_time_seconds` (a restart shows as a change of it, and as counter resets).

Not here: heartbeats, which the master (in the client process) sends and counts, not the task.
"""
from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

__all__ = ["TaskMetrics", "CONTENT_TYPE"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_STEP_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class TaskMetrics:
    """The metrics of one WorkerService, in a registry of its own."""

    def __init__(self, service, trace_every: int | None = None):
        if trace_every is None:
            trace_every = int(os.environ.get("ACTORFLOW_METRICS_TRACE_EVERY", "100"))
        self.trace_every = max(0, trace_every)
        self._n = 0
        reg = self.registry = CollectorRegistry()
        self.steps = Counter("actorflow_steps", "Steps this task ran to completion", registry=reg)
        self.step_failures = Counter("actorflow_step_failures", "Steps that failed on this task", registry=reg)
        self.step_seconds = Histogram("actorflow_step_seconds", "Time from a run_graph request to its reply",
                                      buckets=_STEP_BUCKETS, registry=reg)
        self.kernel_seconds = Counter("actorflow_kernel_seconds", "Kernel time by op type, from traced steps",
                                      ["op"], registry=reg)
        self.kernel_activations = Counter("actorflow_kernel_activations", "Kernel runs by op type, in traced steps",
                                          ["op"], registry=reg)
        self.traced_steps = Counter("actorflow_traced_steps", "Steps traced on this task (sampled or asked for)",
                                    registry=reg)
        self.sent_bytes = Counter("actorflow_sent_bytes", "Tensor bytes sent to a peer task", ["peer"], registry=reg)
        self.sent_messages = Counter("actorflow_sent_messages", "Tensors sent to a peer task", ["peer"], registry=reg)
        self.received_bytes = Counter("actorflow_received_bytes", "Tensor bytes received from a peer task", ["peer"],
                                      registry=reg)
        self.received_messages = Counter("actorflow_received_messages", "Tensors received from a peer task",
                                         ["peer"], registry=reg)
        reg.register(_StateCollector(service))
        try:
            ProcessCollector(registry=reg)
        except Exception:  # noqa: BLE001 - no /proc (not Linux): no process metrics
            pass

    def sample_trace(self) -> int:
        """The trace level for the next step when nobody asked for one: SOFTWARE_TRACE once in
        `trace_every` steps, else 0."""
        if not self.trace_every:
            return 0
        self._n += 1
        if self._n >= self.trace_every:
            self._n = 0
            return 1
        return 0

    def add_trace(self, stats: dict) -> None:
        """Adds a traced step's kernel times (a StepTracer.to_dict() result) by op type."""
        self.traced_steps.inc()
        per_op: dict = {}
        for recs in stats["devices"].values():
            for name, _t0, op_start, op_end, _all_end, _tid, _sched, label, _outs in recs:
                if "/_block_" in name:          # blocks are inside their kernel's op time
                    continue
                first = label.split("\n", 1)[0]
                op = first.split(" = ", 1)[1].split("(", 1)[0] if " = " in first else "unknown"
                s = per_op.setdefault(op, [0.0, 0])
                s[0] += max(0, op_end - op_start) / 1e6
                s[1] += 1
        for op, (secs, n) in per_op.items():
            self.kernel_seconds.labels(op).inc(secs)
            self.kernel_activations.labels(op).inc(n)

    def sent(self, peer: str, nbytes: int) -> None:
        self.sent_messages.labels(peer).inc()
        if nbytes:
            self.sent_bytes.labels(peer).inc(nbytes)

    def received(self, peer: str, nbytes: int) -> None:
        self.received_messages.labels(peer).inc()
        if nbytes:
            self.received_bytes.labels(peer).inc(nbytes)

    def exposition(self) -> bytes:
        """The registry in Prometheus's text format."""
        return generate_latest(self.registry)


class _StateCollector:
    """Gauges read from the service's state at scrape time (the scrape runs on the service's loop)."""

    def __init__(self, service):
        self.service = service

    def collect(self):
        s = self.service
        yield _gauge("actorflow_rendezvous_pending", "Tensors waiting in the rendezvous for their Recv",
                     s.rendezvous.pending())
        yield _gauge("actorflow_active_steps", "Steps running on this task now", len(s.active))
        yield _gauge("actorflow_graphs_registered", "Graph partitions registered on this task", len(s.graphs))
        yield _gauge("actorflow_connections", "Open incoming connections", len(s.connections))
        refused = CounterMetricFamily("actorflow_refused_connections", "Requests refused for a missing or bad token")
        refused.add_metric([], s.refused)
        yield refused
        queues = GaugeMetricFamily("actorflow_queue_size", "Elements in a queue", labels=["queue"])
        accs = GaugeMetricFamily("actorflow_accumulator_count", "Gradients accumulated", labels=["accumulator"])
        for name in s.container.names():
            r = s.container.get(name)
            items = getattr(r, "items", None)
            if items is not None and hasattr(r, "dequeuers"):
                queues.add_metric([name], len(items))
            elif hasattr(r, "count") and hasattr(r, "sum"):
                accs.add_metric([name], r.count)
        yield queues
        yield accs


def _gauge(name, doc, value):
    g = GaugeMetricFamily(name, doc)
    g.add_metric([], value)
    return g
