"""Fault injectors at the runtime's seams.

The runtime checks two hooks, each owned by its layer, and does nothing else while they are None,
the default; `install` sets them (and keeps them here as `TRANSPORT` and `STEP`):

- `actorflow.transport.channel.fault_hook`, awaited by `Connection._write_loop` before each frame:
  delays the frame (latency drawn from a distribution; a bandwidth cap on the task's egress), holds
  it (a partition: frames between the two sides wait until it heals, and the connection fails if
  they have waited `fail_after_s`), or drops it ("retransmit": held for a retransmission timeout,
  as TCP does with a lost segment; "reset": the connection fails, as after a TCP reset).
- `actorflow.cluster.server.step_fault_hook`, awaited by `WorkerService.rpc_run_graph` before a
  step starts:
  delays the training steps of a straggler, or kills the process at a checkpoint save.

Killing and restarting processes at a step or a time is the harness's part (actorflow/sim/runner.py).

A task process installs its injectors at startup from $ACTORFLOW_FAULTS (a JSON document, or the
path of one; `install_from_env`, called by `actorflow worker`). The harness process installs a
transport injector too (`install(config)`), for the connections of the masters its client threads
drive: each client thread says whose it is with `ROLE.set("/job:worker/task:1")`, and connections
opened from that thread inherit it (asyncio copies the context into the tasks it creates).

Faults that start at a training step (a partition, a dropped frame, a latency window) come from the
harness, which alone knows the global step, through one append-only command file per task
(<control_dir>/<job>-<task>.jsonl), polled every few milliseconds by the injectors that need it.

Determinism: every draw comes from a generator seeded by (scenario seed, fault index, task), and a
straggler's delay at step k is its generator's k-th draw, k being the step number the client feeds
with the step, so one seed gives one sequence of straggler delays, retries and restarts included. Per-frame latency draws depend on how many frames a run sends (heartbeats depend
on timing): latency is a condition of the run, summarized when it ends, not a sequence of events.

Every injected fault is logged as one JSON line (t, task, kind, fault, parameters) to
<events_dir>/<job>-<task>-<pid>.jsonl, flushed at once so that a kill -9 loses nothing.
"""
from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import os
import signal
import threading
import time
import zlib

__all__ = ["TRANSPORT", "STEP", "ROLE", "ENV", "install", "install_from_env", "uninstall", "set_injectors", "task_slug",
           "task_seed", "draw_ms", "FaultLog", "StepInjector", "TransportInjector"]

log = logging.getLogger(__name__)

TRANSPORT = None    # TransportInjector installed as actorflow.transport.channel.fault_hook, or None
STEP = None         # StepInjector installed as actorflow.cluster.server.step_fault_hook, or None

ENV = "ACTORFLOW_FAULTS"
# Whose connections a harness thread opens ("/job:worker/task:1"): a client thread stands in for its
# worker task's process, as a TF client and its master live in the worker's process.
ROLE: contextvars.ContextVar = contextvars.ContextVar("actorflow_sim_role", default=None)

_CONTROL_POLL_S = 0.005
_HOLD_POLL_S = 0.005


def task_slug(task: str) -> str:
    """'/job:worker/task:1' -> 'worker-1' (file names)."""
    job, _, idx = task.strip("/").partition("/")
    return f"{job.split(':', 1)[-1]}-{idx.split(':', 1)[-1]}"


def task_seed(seed: int, fault: int, task: str) -> list:
    """The entropy of one fault's generator on one task: a pure function of its inputs (no `hash`,
    which Python salts per process)."""
    return [int(seed) & 0xFFFFFFFF, int(fault), zlib.crc32(task.encode())]


def draw_ms(spec: dict, rng) -> float:
    """One draw, in milliseconds, from a delay distribution given as a scenario table:
    constant (ms), uniform (low_ms, high_ms), normal (mean_ms, std_ms; clipped at 0), lognormal
    (median_ms, sigma), exponential (mean_ms), pareto (scale_ms, alpha: scale * (1 + Lomax(alpha)))."""
    d = spec.get("dist", "constant")
    if d == "constant":
        return float(spec["ms"])
    if d == "uniform":
        return float(rng.uniform(spec["low_ms"], spec["high_ms"]))
    if d == "normal":
        return max(0.0, float(rng.normal(spec["mean_ms"], spec["std_ms"])))
    if d == "lognormal":
        import math
        return float(rng.lognormal(math.log(spec["median_ms"]), spec["sigma"]))
    if d == "exponential":
        return float(rng.exponential(spec["mean_ms"]))
    if d == "pareto":
        return float(spec["scale_ms"] * (1.0 + rng.pareto(spec["alpha"])))
    raise ValueError(f"unknown delay distribution '{d}' (constant, uniform, normal, lognormal, exponential, pareto)")


class FaultLog:
    """Appends one JSON line per event; thread-safe, flushed per line."""

    def __init__(self, path: str | None, task: str | None):
        self.task = task
        self._lock = threading.Lock()
        self._f = None
        if path:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            self._f = open(path, "a", buffering=1)

    def emit(self, kind: str, task: str | None = None, **fields) -> dict:
        ev = {"t": time.time(), "task": task or self.task, "kind": kind, **fields}
        if self._f is not None:
            line = json.dumps(ev, sort_keys=True)
            with self._lock:
                self._f.write(line + "\n")
                self._f.flush()
        return ev

    def close(self) -> None:
        with self._lock:
            if self._f is not None:
                self._f.close()
                self._f = None


def _rng(seed, fault, task):
    import numpy as np
    return np.random.default_rng(task_seed(seed, fault, task))


def classify_step(exe, marker: str, step_feed: str) -> tuple:
    """(kind, feed index) of a registered executable: "save" when it writes a checkpoint shard, "train"
    when it runs the workload's training marker op, else "other"; and the index of the feed that
    carries the global step (None when it has none)."""
    kind = "other"
    for op in exe.plan.ops:
        if op.type == "SaveShard":
            kind = "save"
            break
        if op.name == marker:
            kind = "train"
    feed = next((i for i, t in enumerate(exe.plan.feeds) if t.name == step_feed), None)
    return kind, feed


class StepInjector:
    """Delays training steps of straggler tasks, and kills a task during a checkpoint save.

    A run is a training step when its partition holds the op named `marker` (the workload's loss);
    a checkpoint save when it holds a SaveShard op. A training step's number is the value fed to the
    `step_feed` placeholder (the client's own count of its steps), or else this process's count of
    training steps. Step k gets the k-th draws of each straggler fault's generator, whatever
    happened before (a step retried after a failure gets its delay again), or in a replay the delay
    the recorded run had at that step (`schedule`).
    """

    def __init__(self, task: str, faults: list, seed: int, log_: FaultLog, marker: str, base_step_ms: float,
                 control_dir: str | None, step_feed: str | None = None):
        self.task = task
        self.log = log_
        self.marker = marker
        self.step_feed = step_feed
        self.base_step_ms = float(base_step_ms)
        self.control_dir = control_dir
        self.stragglers = []
        self.crashes = []
        for f in faults:
            if f["kind"] == "straggler":
                self.stragglers.append((f, _StepDraws(seed, f["id"], task)))
            elif f["kind"] == "crash_during_save" and not self._fired(f):
                self.crashes.append(f)
        self._kinds: dict = {}
        self.train_steps = 0
        self.saves = 0

    def _fired(self, f) -> bool:
        # A fault that killed an earlier incarnation of this task must not kill the restarted one.
        return bool(self.control_dir) and os.path.exists(os.path.join(self.control_dir, f"fired-{f['id']}"))

    def _classify(self, exe) -> tuple:
        self._kinds[exe] = classify_step(exe, self.marker, self.step_feed)
        return self._kinds[exe]

    async def before_step(self, service, exe, feeds=()) -> None:
        """Called by the worker service before it starts a step of `exe` with `feeds`."""
        kind, feed = self._kinds.get(exe) or self._classify(exe)
        if kind == "train":
            if feed is not None:
                k = int(feeds[feed])
                if k < 0:
                    return              # not fed: not one of the harness's training steps
            else:
                k = self.train_steps
            self.train_steps += 1
            delay = 0.0
            for f, draws in self.stragglers:
                d = self._straggle(f, draws, k)
                if d > 0:
                    self.log.emit("straggler", fault=f["id"], local_step=k, delay_ms=round(d * 1e3, 3))
                    delay += d
            if delay > 0:
                await asyncio.sleep(delay)
        elif kind == "save":
            self.saves += 1
            for f in self.crashes:
                if int(f.get("save", 1)) == self.saves:
                    self._crash(f)

    def _straggle(self, f, draws, k) -> float:
        sched = f.get("schedule")
        if sched is not None:
            # A replay: the delays the recorded run had, by step, in ms.
            return float(sched.get(self.task, {}).get(str(k), 0.0)) / 1e3
        u, ms = draws.at(k, f, self.base_step_ms)
        lo, hi = f.get("from_step"), f.get("to_step")
        if u >= float(f.get("probability", 1.0)) or (lo is not None and k < lo) or (hi is not None and k >= hi):
            return 0.0
        return max(0.0, ms) / 1e3

    def _crash(self, f) -> None:
        if self.control_dir:
            os.makedirs(self.control_dir, exist_ok=True)
            with open(os.path.join(self.control_dir, f"fired-{f['id']}"), "w") as fh:
                fh.write(str(os.getpid()))
        self.log.emit("crash_during_save", fault=f["id"], save=self.saves, pid=os.getpid())
        self.log.close()
        os.kill(os.getpid(), signal.SIGKILL)


class _StepDraws:
    """Step k's draws of one straggler fault on one task: the k-th (uniform, delay) pair of its
    generator, whichever steps were drawn before (pairs are generated in order and kept)."""

    def __init__(self, seed, fault, task):
        self.rng = _rng(seed, fault, task)
        self.pairs: list = []

    def at(self, k: int, f: dict, base_step_ms: float) -> tuple:
        while len(self.pairs) <= k:
            u = float(self.rng.random())
            ms = draw_ms(f["delay"], self.rng) if "delay" in f else (float(f.get("slowdown", 1.0)) - 1.0) * base_step_ms
            self.pairs.append((u, ms))
        return self.pairs[k]


class _Condition:
    """A latency or bandwidth fault on some senders' frames, always on or switched by the harness."""

    __slots__ = ("spec", "senders", "peers", "rngs", "active", "frames", "added_s")

    def __init__(self, spec, seed, senders):
        self.spec = spec
        self.senders = set(spec["tasks"]) & set(senders) if senders is not None else set(spec["tasks"])
        self.peers = set(spec["peers"]) if spec.get("peers") else None
        self.rngs = {t: _rng(seed, spec["id"], t) for t in self.senders}
        self.active = not spec.get("controlled", False)
        self.frames = 0
        self.added_s = 0.0

    def applies(self, local, remote) -> bool:
        return self.active and local in self.senders and (self.peers is None or remote in self.peers)


class TransportInjector:
    """Delays, holds or drops frames on their way out of this process (see the module docstring).

    `local` is this process's task; in the harness (local None) a connection's task is the ROLE of
    the thread that opened it, and connections without one pass untouched. The remote end is the
    task the connection names (its peer_task, or a cluster address); a connection whose far end is
    a client's master names none, and passes: the client's own frames are held in the harness.
    """

    def __init__(self, local: str | None, faults: list, seed: int, log_: FaultLog, addresses: dict,
                 control_dir: str | None, roles: list | None = None):
        self.local = local
        self.log = log_
        self.by_address = {a: t for t, a in addresses.items()}
        senders = [local] if local else roles
        self.conditions = {f["id"]: _Condition(f, seed, senders) for f in faults
                           if f["kind"] in ("latency", "bandwidth")}
        self._partitions: dict = {}          # fault id -> (side a, side b, fail_after_s); replaced, never mutated
        self._drops: list = []               # pending drop commands, consumed by the next matching frame
        self._busy_until = 0.0               # the egress link, for bandwidth caps
        self._stop = threading.Event()
        self._watch = None
        files = [local] if local else list(roles or [])
        if control_dir and any(f["kind"] in ("partition", "drop") or f.get("controlled") for f in faults):
            self._watch = threading.Thread(target=self._watch_loop, args=(control_dir, files),
                                           name="actorflow-sim-control", daemon=True)
            self._watch.start()

    # -- the seam --------------------------------------------------------------------------------------
    async def before_send(self, conn, frame) -> None:
        """Called by a connection's writer before it sends `frame` (a list of websocket messages)."""
        local = self.local or ROLE.get()
        if local is None:
            return
        remote = self._remote(conn)
        if self._partitions:
            await self._hold(local, remote, conn)
        if self._drops and self.local is not None:
            await self._maybe_drop(local, remote, conn, frame)
        loop = asyncio.get_running_loop()
        for c in self.conditions.values():
            if not c.applies(local, remote):
                continue
            c.frames += 1
            if c.spec["kind"] == "bandwidth":
                n = sum(len(m) for m in frame)
                now = loop.time()
                start = max(now, self._busy_until)
                self._busy_until = start + n / (float(c.spec["mb_per_s"]) * 1e6)
                wait = self._busy_until - now
            else:
                wait = draw_ms(c.spec["delay"], c.rngs[local]) / 1e3
            if wait > 0:
                c.added_s += wait
                await asyncio.sleep(wait)

    def _remote(self, conn):
        for name in (getattr(conn, "peer_task", None), conn.name):
            if name:
                if name.startswith("/job:"):
                    return name
                if name in self.by_address:
                    return self.by_address[name]
        return None

    async def _hold(self, local, remote, conn) -> None:
        loop = asyncio.get_running_loop()
        start = held_by = None
        while True:
            cut = self._cut(local, remote)
            if cut is None:
                if start is not None:
                    self.log.emit("partition_released", task=local, fault=held_by, peer=remote,
                                  held_ms=round((loop.time() - start) * 1e3, 1))
                return
            held_by, fail_after = cut
            now = loop.time()
            if start is None:
                start = now
            if fail_after is not None and now - start >= fail_after:
                self.log.emit("partition_failed_connection", task=local, fault=held_by, peer=remote,
                              held_ms=round((now - start) * 1e3, 1))
                raise ConnectionResetError(f"sim: partition {held_by} between {local} and {remote} lasted "
                                           f"over {fail_after:g} s")
            await asyncio.sleep(_HOLD_POLL_S)

    def _cut(self, local, remote):
        for fid, (a, b, fail_after) in self._partitions.items():
            if (local in a and remote in b) or (local in b and remote in a):
                return fid, fail_after
        return None

    async def _maybe_drop(self, local, remote, conn, frame) -> None:
        for cmd in list(self._drops):
            if cmd.get("task") == local and (cmd.get("peer") is None or cmd["peer"] == remote):
                try:
                    self._drops.remove(cmd)
                except ValueError:
                    continue            # another writer took it
                mode = cmd.get("mode", "retransmit")
                self.log.emit("drop_applied", task=local, fault=cmd["fault"], episode=cmd.get("episode"),
                              peer=remote, mode=mode, bytes=sum(len(m) for m in frame))
                if mode == "reset":
                    raise ConnectionResetError(f"sim: connection from {local} to {remote} reset (fault {cmd['fault']})")
                await asyncio.sleep(float(cmd.get("rto_ms", 200.0)) / 1e3)
                return

    # -- commands from the harness ---------------------------------------------------------------------
    def command(self, cmd: dict) -> None:
        """Applies one harness command: on/off (a controlled condition), partition/heal, drop."""
        op = cmd["op"]
        if op in ("on", "off"):
            c = self.conditions.get(cmd["fault"])
            if c is not None and c.active != (op == "on"):
                c.active = op == "on"
                if op == "off":
                    self._summarize(cmd["fault"], c)
        elif op == "partition":
            parts = dict(self._partitions)
            parts[cmd["fault"]] = (frozenset(cmd["a"]), frozenset(cmd["b"]), cmd.get("fail_after_s"))
            self._partitions = parts
        elif op == "heal":
            self._partitions = {k: v for k, v in self._partitions.items() if k != cmd["fault"]}
        elif op == "drop":
            if not any(d.get("fault") == cmd["fault"] and d.get("episode") == cmd.get("episode") for d in self._drops):
                self._drops.append(cmd)
        else:
            log.warning("sim: ignoring unknown command %r", cmd)

    def _watch_loop(self, control_dir: str, tasks: list) -> None:
        offsets = {t: 0 for t in tasks}
        partial = {t: b"" for t in tasks}
        while not self._stop.wait(_CONTROL_POLL_S):
            for t in tasks:
                path = os.path.join(control_dir, task_slug(t) + ".jsonl")
                try:
                    if os.path.getsize(path) <= offsets[t]:
                        continue
                    with open(path, "rb") as fh:
                        fh.seek(offsets[t])
                        data = fh.read()
                except OSError:
                    continue
                offsets[t] += len(data)
                data = partial[t] + data
                lines = data.split(b"\n")
                partial[t] = lines.pop()
                for line in lines:
                    if line.strip():
                        try:
                            self.command(json.loads(line))
                        except (ValueError, KeyError) as e:
                            log.warning("sim: bad command line in %s: %s", path, e)

    def _summarize(self, fid, c) -> None:
        if c.frames:
            # In the harness, one line for the connections of every client thread it delayed.
            self.log.emit(f"{c.spec['kind']}_summary", task=self.local or "harness", senders=sorted(c.senders),
                          fault=fid, frames=c.frames, added_ms=round(c.added_s * 1e3, 1))
        c.frames, c.added_s = 0, 0.0

    def close(self) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.join(1.0)
        for fid, c in self.conditions.items():
            self._summarize(fid, c)


# -- installation ------------------------------------------------------------------------------------------

def _load(value: str) -> dict:
    value = value.strip()
    if value.startswith("{"):
        return json.loads(value)
    with open(value) as fh:
        return json.load(fh)


def install(config: dict, task: str | None = None, roles: list | None = None) -> tuple:
    """Installs the injectors `config` asks of `task` (a task process), or, with task None, the
    harness's transport injector for the client threads named in `roles`. Returns (TRANSPORT, STEP)."""
    uninstall()
    seed = int(config.get("seed", 0))
    if task is not None:
        mine = [f for f in config.get("faults", ()) if task in f.get("tasks", ())]
    else:
        # Drops are the task processes' own: one frame is dropped once, by the process that sends it.
        mine = [f for f in config.get("faults", ()) if set(f.get("tasks", ())) & set(roles or ()) and
                f["kind"] in ("latency", "bandwidth", "partition")]
    if not mine:
        return None, None
    events_dir = config.get("events_dir")
    name = task_slug(task) if task else "harness"
    flog = FaultLog(os.path.join(events_dir, f"{name}-{os.getpid()}.jsonl") if events_dir else None, task)
    step_faults = [f for f in mine if f["kind"] in ("straggler", "crash_during_save")]
    net_faults = [f for f in mine if f["kind"] in ("latency", "bandwidth", "partition", "drop")]
    transport = step = None
    if task is not None and step_faults:
        step = StepInjector(task, step_faults, seed, flog, config.get("marker", "sim/loss"),
                            config.get("base_step_ms", 10.0), config.get("control_dir"), config.get("step_feed"))
    if net_faults:
        transport = TransportInjector(task, net_faults, seed, flog, config.get("tasks", {}),
                                      config.get("control_dir"), roles)
    set_injectors(transport, step)
    if TRANSPORT is not None or STEP is not None:
        flog.emit("injectors_installed", pid=os.getpid(), transport=TRANSPORT is not None, step=STEP is not None,
                  faults=[f["id"] for f in mine])
    return TRANSPORT, STEP


def install_from_env(job: str, task: int) -> None:
    """Installs this task process's injectors from $ACTORFLOW_FAULTS; nothing when it is unset."""
    value = os.environ.get(ENV)
    if not value:
        return
    install(_load(value), f"/job:{job}/task:{int(task)}")
    if TRANSPORT is not None:
        import atexit
        atexit.register(TRANSPORT.close)


def set_injectors(transport, step) -> None:
    """Installs `transport` and `step` (either may be None) in the hooks of the transport and the
    worker server, and records them here as TRANSPORT and STEP."""
    global TRANSPORT, STEP
    from actorflow.cluster import server
    from actorflow.transport import channel
    TRANSPORT, STEP = transport, step
    channel.fault_hook = transport
    server.step_fault_hook = step


def uninstall() -> None:
    """Removes the injectors (the hooks become None again)."""
    t = TRANSPORT
    set_injectors(None, None)
    if t is not None:
        t.close()
