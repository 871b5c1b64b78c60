"""What the dashboard knows about a cluster: polled from each task's `/metrics` and `/status`.

State kept (one `Collector`, on the dashboard's event loop):
- per task (`TaskView`): the last scrape of its Prometheus metrics (cluster/metrics.py) and its
  status document (WorkerService.status), whether it answered, its pid (a new pid is a restart),
  and a short history of its step counter, from which steps per second come;
- `events`: task restarts (new pid), losses (no answer) and recoveries (answers again), newest last;
- `series`: the time axis and each task's steps/s over the last `history` polls, for the chart.

Everything the page shows is computed from these by `snapshot()`, a JSON-able dict; nothing here
is sent anywhere by itself (dashboard/app.py pushes snapshots over a websocket).
"""
from __future__ import annotations

import asyncio
import collections
import logging
import time
from dataclasses import dataclass, field

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from actorflow.cluster.spec import ClusterSpec, task_key
from actorflow.transport.channel import TOKEN_HEADER

__all__ = ["Collector", "TaskView", "parse_metrics"]

log = logging.getLogger(__name__)


def parse_metrics(text: str) -> dict:
    """{sample name: [(labels dict, value)]} of a Prometheus text exposition."""
    out: dict = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def _total(samples: dict, name: str) -> float:
    return sum(v for _, v in samples.get(name, ()))


def _by(samples: dict, name: str, label: str) -> dict:
    out: dict = {}
    for labels, v in samples.get(name, ()):
        k = labels.get(label)
        if k is not None:
            out[k] = out.get(k, 0.0) + v
    return out


@dataclass
class TaskView:
    """One task as the dashboard last saw it."""
    name: str
    address: str
    up: bool = False
    seen: bool = False                 # answered at least once
    pid: int = 0
    restarts: int = 0
    last_ok: float = 0.0
    error: str = ""
    metrics: dict = field(default_factory=dict)
    status: dict = field(default_factory=dict)
    steps: collections.deque = field(default_factory=lambda: collections.deque(maxlen=8))   # (time, steps total)

    def steps_per_second(self) -> float:
        """Steps per second over the last few polls (0 when down or when the counter reset)."""
        if not self.up or len(self.steps) < 2:
            return 0.0
        (t0, n0), (t1, n1) = self.steps[0], self.steps[-1]
        if t1 <= t0 or n1 < n0:
            return 0.0
        return (n1 - n0) / (t1 - t0)


class Collector:
    """Polls every task of `spec` with `token` every `interval` seconds (each request bounded by
    `timeout`); `restarts()` may add restarts a launcher counted itself (LocalCluster.restarts)."""

    def __init__(self, spec: ClusterSpec, token: str, interval: float = 1.0, timeout: float = 2.0,
                 history: int = 300, ssl=None, restarts=None):
        self.spec = spec
        self.token = token
        self.interval = interval
        self.timeout = timeout
        self.ssl = ssl
        self.scheme = "https" if ssl is not None else "http"
        self.launcher_restarts = restarts
        self.tasks = {task_key(j, t): TaskView(task_key(j, t), spec.task_address(j, t)) for j, t in spec.tasks()}
        self.events: collections.deque = collections.deque(maxlen=200)
        self.times: collections.deque = collections.deque(maxlen=history)
        self.rates = {name: collections.deque(maxlen=history) for name in self.tasks}
        self.polls = 0
        self.graph_key: tuple = ()       # changes when any task's registered graphs (or process) change
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self):
        self._session = aiohttp.ClientSession(headers={TOKEN_HEADER: self.token},
                                              timeout=aiohttp.ClientTimeout(total=self.timeout))
        return self

    async def __aexit__(self, *exc):
        await self._session.close()

    async def _get(self, address: str, path: str, json: bool):
        async with self._session.get(f"{self.scheme}://{address}{path}", ssl=self.ssl) as r:
            if r.status != 200:
                raise RuntimeError(f"{path} answered {r.status}: {(await r.text())[:200]}")
            return await (r.json() if json else r.text())

    async def _poll_task(self, view: TaskView, now: float) -> None:
        try:
            text, status = await asyncio.gather(self._get(view.address, "/metrics", False),
                                                self._get(view.address, "/status", True))
        except Exception as e:  # noqa: BLE001 - any failure is the task being unreachable; shown, not raised
            if view.up:
                self.events.append({"time": now, "task": view.name, "kind": "lost",
                                    "text": f"{view.name} stopped answering: {e}"})
            view.up = False
            view.error = str(e) or type(e).__name__
            view.steps.clear()
            return
        pid = int(status.get("pid", 0))
        if view.seen and pid != view.pid:
            view.restarts += 1
            view.steps.clear()
            self.events.append({"time": now, "task": view.name, "kind": "restart",
                                "text": f"{view.name} restarted (pid {view.pid} -> {pid})"})
        elif view.seen and not view.up:
            self.events.append({"time": now, "task": view.name, "kind": "recovered",
                                "text": f"{view.name} answers again"})
        view.pid, view.up, view.seen, view.last_ok, view.error = pid, True, True, now, ""
        view.metrics = parse_metrics(text)
        view.status = status
        view.steps.append((now, _total(view.metrics, "actorflow_steps_total")))

    async def poll(self) -> None:
        """One round: every task at once."""
        now = time.time()
        await asyncio.gather(*(self._poll_task(v, now) for v in self.tasks.values()))
        self.polls += 1
        self.times.append(now)
        for name, v in self.tasks.items():
            self.rates[name].append(v.steps_per_second())
        self.graph_key = tuple((v.name, v.pid, tuple(v.status.get("graph_handles", ()))) for v in self.tasks.values())

    async def graphs(self) -> dict:
        """{task: [partition, ...]} of the tasks that answer (their /status?graphs=1)."""
        out = {}
        for v in self.tasks.values():
            try:
                out[v.name] = (await self._get(v.address, "/status?graphs=1", True)).get("graphs", [])
            except Exception as e:  # noqa: BLE001 - a task that does not answer has no picture
                log.info("dashboard: no graphs from %s: %s", v.name, e)
        return out

    # -- what the page shows -------------------------------------------------------------------------------
    def snapshot(self) -> dict:
        extra = {}
        if self.launcher_restarts is not None:
            try:
                extra = dict(self.launcher_restarts())
            except Exception:  # noqa: BLE001 - the launcher's count is a bonus
                extra = {}
        tasks = []
        for v in self.tasks.values():
            m = v.metrics
            tasks.append({
                "task": v.name, "address": v.address, "up": v.up, "pid": v.pid, "error": v.error,
                "restarts": max(v.restarts, int(extra.get(v.name, 0))),
                "steps": int(_total(m, "actorflow_steps_total")) if v.up else None,
                "failures": int(_total(m, "actorflow_step_failures_total")) if v.up else None,
                "steps_per_second": round(v.steps_per_second(), 3),
                "active_steps": v.status.get("active_steps") if v.up else None,
                "uptime": v.status.get("uptime") if v.up else None,
                "rss": _total(m, "process_resident_memory_bytes") or None,
                "rendezvous_pending": int(_total(m, "actorflow_rendezvous_pending")) if v.up else None,
                "connections": int(_total(m, "actorflow_connections")) if v.up else None,
                "last_ok": v.last_ok,
            })
        return {"time": time.time(), "polls": self.polls, "tasks": tasks, "graph_version": repr(self.graph_key), "events": list(self.events)[-30:],
                "series": {"time": list(self.times), "rates": {k: list(d) for k, d in self.rates.items()}},
                "step_histogram": self._histogram(), "top_ops": self._top_ops(), "pairs": self._pairs(),
                "queues": self._gauges("actorflow_queue_size", "queue"),
                "accumulators": self._gauges("actorflow_accumulator_count", "accumulator"),
                "checkpoints": self._checkpoints()}

    def _histogram(self) -> dict:
        """The step-time histogram of every task together: counts per bucket (not cumulative)."""
        cum: dict = {}
        for v in self.tasks.values():
            for labels, n in v.metrics.get("actorflow_step_seconds_bucket", ()):
                le = float(labels["le"])
                cum[le] = cum.get(le, 0.0) + n
        bounds = sorted(cum)
        counts, prev = [], 0.0
        for le in bounds:
            counts.append(max(0.0, cum[le] - prev))
            prev = cum[le]
        return {"le": [b if b != float("inf") else None for b in bounds], "counts": counts}

    def _top_ops(self, n: int = 12) -> list:
        secs: dict = {}
        acts: dict = {}
        for v in self.tasks.values():
            for op, s in _by(v.metrics, "actorflow_kernel_seconds_total", "op").items():
                secs[op] = secs.get(op, 0.0) + s
            for op, a in _by(v.metrics, "actorflow_kernel_activations_total", "op").items():
                acts[op] = acts.get(op, 0.0) + a
        # A _Recv's "kernel" time is its wait for the tensor, not work: it would top every list.
        secs.pop("_Recv", None)
        total = sum(secs.values()) or 1.0
        rows = sorted(secs.items(), key=lambda kv: -kv[1])[:n]
        return [{"op": op, "seconds": s, "share": s / total, "activations": int(acts.get(op, 0)),
                 "mean_us": 1e6 * s / acts[op] if acts.get(op) else None} for op, s in rows]

    def _pairs(self) -> list:
        """Tensor traffic per ordered pair of tasks: bytes and messages as the sender counted them
        (sent) and as the receiver counted them (received)."""
        pairs: dict = {}

        def row(src, dst):
            return pairs.setdefault((src, dst), {"src": src, "dst": dst, "sent_bytes": 0.0, "sent_messages": 0.0,
                                                 "received_bytes": 0.0, "received_messages": 0.0})
        for v in self.tasks.values():
            m = v.metrics
            for peer, b in _by(m, "actorflow_sent_bytes_total", "peer").items():
                row(v.name, peer)["sent_bytes"] += b
            for peer, b in _by(m, "actorflow_sent_messages_total", "peer").items():
                row(v.name, peer)["sent_messages"] += b
            for peer, b in _by(m, "actorflow_received_bytes_total", "peer").items():
                row(peer, v.name)["received_bytes"] += b
            for peer, b in _by(m, "actorflow_received_messages_total", "peer").items():
                row(peer, v.name)["received_messages"] += b
        return sorted(pairs.values(), key=lambda r: -max(r["sent_bytes"], r["received_bytes"]))

    def _gauges(self, name: str, label: str) -> list:
        return [{"task": v.name, "name": k, "value": val}
                for v in self.tasks.values() if v.up for k, val in sorted(_by(v.metrics, name, label).items())]

    def _checkpoints(self, n: int = 20) -> list:
        """The latest checkpoint shards written by any task, newest first."""
        rows = [dict(c, task=v.name) for v in self.tasks.values() for c in v.status.get("checkpoints", ())]
        rows.sort(key=lambda c: -c["time"])
        return rows[:n]
