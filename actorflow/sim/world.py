"""The simulated world: a whole cluster of the real actorflow code in one process, in virtual time.

One `VirtualLoop` (actorflow/sim/loop.py) runs everything. Each task of the cluster is a simulated
process: its `WorkerService` (the real one: runtime, resources, rendezvous, RPC handlers), its
connections and its tasks, all owned by one incarnation (`OWNER` in their context). Each worker's
client (MonitoredTrainingSession, its hooks, its master) is a client process on the worker's
machine; its blocking calls (`Session.run`, `time.sleep` through actorflow/clock.py) switch from its
greenlet back to the loop until what they wait for is done, so the synchronous TF-1.x API runs
unchanged, one greenlet at a time, in a deterministic order.

- The network is `SimNetwork` (in-memory websockets, actorflow/sim/network.py), installed as the
  transport's `channel.DIAL`; the tasks listen at made-up addresses, no socket is ever opened.
- Kernels that the runtime sends to its pool run on a `SyncPool`: synchronously, on the loop's
  thread, finishing after a virtual duration on one of the process's virtual cores: from the cost
  model (`Costs.kernel_s`, deterministic), or their real duration times `Costs.scale` (as chosen;
  not deterministic).
- A training step's compute costs the worker's CPU `Costs.compute_s` (lognormal, drawn from the
  seed and the step), at the worker service's step seam (`cluster.server.step_fault_hook`), where stragglers' delays
  and a crash during a checkpoint save happen too.
- The checkpoint writer's `os` is a `SimDisk` (actorflow/sim/disk.py): a power loss can lose or tear
  what was not fsynced.
- `kill(task)` ends an incarnation (nothing it scheduled runs again; its connections are reset; its
  state is gone but its disk); `restart(task)` runs its start-up again, with a new pid.

While the world runs, reading the wall clock, starting a thread or making a socket raises
`SimulationLeak` and is recorded in `World.leaks` (time stamps of log records and metrics excepted).
"""
from __future__ import annotations

import asyncio
import contextvars
import math
import random
import socket
import sys
import threading
import time as _time
import traceback
import zlib
from dataclasses import dataclass, field

import greenlet

from actorflow.sim.disk import ProcessKilled, SimDisk
from actorflow.sim.loop import OWNER, SimulationLeak, SimulationStalled, VirtualLoop
from actorflow.sim.network import NetCosts, SimNetwork

__all__ = ["World", "Costs", "SimProcess", "SimulationLeak", "SimulationStalled", "ProcessKilled"]

_EPOCH = 1_700_000_000.0         # what the simulated wall clock reads at virtual time 0
_perf = _time.perf_counter       # for `Costs.scale` (real durations) only
# Libraries whose wall-clock reads only stamp what they output (log records, the creation time of a
# Prometheus metric): allowed by the leak guard, they change nothing the simulation does.
_STAMPS_ONLY = {"logging", "prometheus_client"}


@dataclass
class Costs:
    """The virtual cost model. Times in seconds."""
    compute_s: float = 0.0018        # a worker's training step (forward and backward; calibration's compute_ms)
    log_sigma: float = 0.15          # its lognormal noise
    client_s: float = 0.0009         # the client's CPU per step (calibration's client_cpu_ms)
    kernel_s: float = 20e-6          # a kernel sent to the pool
    scale: float | None = None       # kernels: their real duration times this, instead of kernel_s
    cores: int = 2                   # virtual cores per process for pool kernels
    net: NetCosts = field(default_factory=NetCosts)

    @classmethod
    def from_calibration(cls, cal: dict | None = None, **over) -> "Costs":
        """The costs measured on this machine (actorflow/sim/calibration.json), with `over` for the rest."""
        if cal is None:
            from actorflow.sim.calibration import load_calibration
            cal = load_calibration()
        base = dict(compute_s=cal["compute_ms"] / 1e3, log_sigma=cal.get("log_sigma", 0.15),
                    client_s=cal["client_cpu_ms"] / 1e3,
                    net=NetCosts(s_per_mb=cal["net_ms_per_mb"] / 1e3, cpu_per_mb_s=cal["update_ms_per_mb"] / 1e3))
        base.update(over)
        return cls(**base)


def _stamping(frame, depth: int = 25) -> bool:
    """Whether a clock read comes from inside a log call or a metric's creation (any handler, any
    formatter: a library's logging handler stamps its records too)."""
    while frame is not None and depth:
        if frame.f_globals.get("__name__", "").split(".", 1)[0] in _STAMPS_ONLY:
            return True
        frame = frame.f_back
        depth -= 1
    return False


class Incarnation:
    """One life of a simulated process: everything it schedules runs in `ctx`, until it dies."""

    def __init__(self, proc: "SimProcess", pid: int):
        self.proc = proc
        self.name = proc.name
        self.net_task = proc.net_task
        self.machine = proc.machine
        self.token = proc.world.token
        self.pid = pid
        self.alive = True
        self.service = None
        self.ctx = contextvars.Context()
        self.ctx.run(OWNER.set, self)

    def accept(self, sock, peer: str) -> None:
        """A connection arrived at this task's listener (the worker service's /ws handler)."""
        from actorflow.transport.channel import Connection
        svc = self.service
        if svc is None or not self.alive:
            return
        conn = Connection(sock, svc.handle, f"{peer} -> {svc.name}", peer_task=peer, on_close=svc.connection_lost,
                          budget=svc.budget, inflight_limit=svc.transport_limits.inflight_per_connection,
                          on_refuse=svc.refuse_frame)
        svc.connections.add(conn)
        t = asyncio.get_running_loop().create_task(conn.serve())
        t.add_done_callback(lambda _t: svc.connections.discard(conn))

    def __repr__(self):
        return f"<{self.name} pid {self.pid}{'' if self.alive else ' dead'}>"


class SimProcess:
    """A task's process (or a worker's client) across its incarnations; `cpu` is its step CPU's next free time."""

    def __init__(self, world: "World", name: str, net_task: str, kind: str):
        self.world = world
        self.name = name
        self.net_task = net_task              # where it is on the network (a client: its worker's machine)
        self.machine = net_task
        self.kind = kind                      # "task" or "client"
        self.inc: Incarnation | None = None
        self.cpu = 0.0
        self.starts = 0

    @property
    def alive(self) -> bool:
        return self.inc is not None and self.inc.alive


class SyncPool:
    """The kernel pool of a simulated process: kernels run on the loop's thread, each finishing after
    its virtual duration on the first free one of `cores` virtual cores."""

    def __init__(self, world: "World", owner, cores: int):
        self.world = world
        self.owner = owner
        self.free = [0.0] * max(1, cores)
        self._stopping = False
        self.kernels = 0
        self.measured: dict = {}

    def submit(self, fn, deferred: bool = False) -> None:
        if self._stopping:
            raise RuntimeError("the kernel pool is shut down")
        loop = self.world.loop
        i = min(range(len(self.free)), key=self.free.__getitem__)
        start = max(loop.time(), self.free[i])
        costs = self.world.costs
        self.kernels += 1
        ctx = None if self.owner is None else self.owner.ctx
        if costs.scale is None:
            end = start + costs.kernel_s
            self.free[i] = end
            loop.call_at(end, fn, context=ctx)
            return
        # Real durations, scaled (not deterministic): a kernel takes what it took last time.
        key = _kernel_key(fn)
        end = start + self.measured.get(key, costs.kernel_s)
        self.free[i] = end

        def timed():
            t0 = _perf()
            fn()
            self.measured[key] = (_perf() - t0) * costs.scale
        loop.call_at(end, timed, context=ctx)

    def shutdown(self, wait: bool = False) -> None:
        self._stopping = True


def _kernel_key(fn):
    job = getattr(fn, "__self__", None) or getattr(getattr(fn, "func", None), "__self__", None)
    actor = getattr(job, "actor", None)
    return getattr(actor, "name", None) or repr(fn)


class _StepSeam:
    """The worker service's step seam (`cluster.server.step_fault_hook`) for every simulated task: a training step's
    compute, stragglers, and a crash at a checkpoint save."""

    def __init__(self, world: "World", marker: str, step_feed: str, task_faults: list, seed: int):
        from actorflow.sim.faults import _StepDraws
        self.world = world
        self.marker = marker
        self.step_feed = step_feed
        self.seed = seed
        self.kinds: dict = {}
        self.stragglers = [(f, {}) for f in task_faults if f["kind"] == "straggler"]
        self._draws = _StepDraws
        self.crashes = [f for f in task_faults if f["kind"] == "crash_during_save"]
        self.fired: set = set()
        self.armed: dict = {}             # task -> (crash_during_save fault, save number) due at a writer stage
        self.saves: dict = {}
        self.train_steps: dict = {}

    def _classify(self, exe):
        from actorflow.sim.faults import classify_step
        self.kinds[exe] = classify_step(exe, self.marker, self.step_feed)
        return self.kinds[exe]

    async def before_step(self, service, exe, feeds=()) -> None:
        w = self.world
        inc = OWNER.get()
        task = service.name
        kind, feed = self.kinds.get(exe) or self._classify(exe)
        if kind == "train":
            k = int(feeds[feed]) if feed is not None else self.train_steps.get(task, 0)
            if k < 0:
                return
            self.train_steps[task] = self.train_steps.get(task, 0) + 1
            r = random.Random(zlib.crc32(f"{self.seed}/compute/{task}/{k}".encode()))
            cost = w.costs.compute_s * math.exp(r.gauss(0.0, w.costs.log_sigma)) if w.costs.compute_s else 0.0
            for f, per_task in self.stragglers:
                if task not in f["tasks"]:
                    continue
                d = self._straggle(f, per_task, task, k)
                if d > 0:
                    w.emit("straggler", task=task, fault=f["id"], local_step=k, delay_ms=round(d * 1e3, 3))
                    cost += d
            if cost > 0:
                proc = inc.proc
                now = w.loop.time()
                proc.cpu = max(proc.cpu, now) + cost
                await asyncio.sleep(proc.cpu - now)
        elif kind == "save":
            n = self.saves[task] = self.saves.get(task, 0) + 1
            for f in self.crashes:
                if f["id"] not in self.fired and task in f["tasks"] and int(f.get("save", 1)) == n:
                    self.fired.add(f["id"])
                    if f.get("stage", "before") == "before":
                        self._crash(f, task, n, inc)
                    else:
                        self.armed[task] = (f, n)     # inside the shard writer, at its stage (save_hook)

    def save_hook(self, stage: str, shard: int, path: str) -> None:
        """checkpoint_format.fault_hook inside the world: a crash armed for this task's save fires at its
        stage of the shard writer ("write": the temporary file holds its header, unsynced; "rename":
        the data is fsynced, not yet renamed into place)."""
        inc = OWNER.get()
        armed = self.armed.get(inc.name) if inc is not None else None
        if armed is not None and armed[0].get("stage") == stage:
            del self.armed[inc.name]
            self._crash(armed[0], inc.name, armed[1], inc)

    def _crash(self, f, task: str, n: int, inc) -> None:
        w = self.world
        ev = w.emit("crash_during_save", task=task, fault=f["id"], save=n, pid=inc.pid,
                    restart_after_s=w.crash_restarts.get(task),
                    **({"stage": f["stage"]} if "stage" in f else {}),
                    **({"power_loss": True} if f.get("power_loss") else {}))
        lost = w.kill(task, power_loss=bool(f.get("power_loss")), expected=True)
        if lost:
            ev["disk"] = lost
        delay = w.crash_restarts.get(task)
        if delay is not None:
            w.restart_later(task, float(delay), f["id"])
        raise ProcessKilled(f"{task} crashed during its checkpoint save")

    def _straggle(self, f, per_task, task, k) -> float:
        sched = f.get("schedule")
        if sched is not None:
            return float(sched.get(task, {}).get(str(k), 0.0)) / 1e3
        draws = per_task.get(task)
        if draws is None:
            draws = per_task[task] = self._draws(self.seed, f["id"], task)
        u, ms = draws.at(k, f, self.world.costs.compute_s * 1e3)
        lo, hi = f.get("from_step"), f.get("to_step")
        if u >= float(f.get("probability", 1.0)) or (lo is not None and k < lo) or (hi is not None and k >= hi):
            return 0.0
        return max(0.0, ms) / 1e3


def _thread_locals() -> list:
    # The per-thread state of the TF-1.x API (the default graph and session stacks): greenlets share
    # their thread's, so each client keeps its own across its switches. Both stacks live in graph/.
    from actorflow.graph import graph
    return [graph._thread_local]


def _save_locals() -> list:
    return [dict(loc.__dict__) for loc in _thread_locals()]


def _restore_locals(saved) -> None:
    for i, loc in enumerate(_thread_locals()):
        loc.__dict__.clear()
        if saved is not None:
            loc.__dict__.update(saved[i])


class _Clock:
    """actorflow.clock's hook inside the world: virtual time; clients block by switching greenlets."""

    def __init__(self, world: "World"):
        self.world = world

    def time(self) -> float:
        return _EPOCH + self.world.loop.time()

    def monotonic(self) -> float:
        return self.world.loop.time()

    def sleep(self, seconds: float) -> None:
        self.block_on(asyncio.sleep(max(0.0, float(seconds))), None)

    def block_on(self, coro, timeout):
        g = greenlet.getcurrent()
        if g.parent is None:
            coro.close()
            raise RuntimeError("a blocking call (Session.run, time.sleep) on the simulation's loop itself; "
                               "only a client blocks")
        task = self.world.loop.create_task(coro)

        def wake(_t):
            if not g.dead:
                g.switch()
        task.add_done_callback(wake)
        mine = _save_locals()
        g.parent.switch()
        _restore_locals(mine)
        inc = OWNER.get()
        if inc is not None and not inc.alive:
            raise ProcessKilled(f"{inc.name} was killed")
        return task.result()

    def new_thread(self, target, args=(), name=None, daemon=None):
        return _SimThread(self.world, target, args, name, daemon)

    def run_blocking(self, fn, *args) -> asyncio.Future:
        """fn(*args), which may block, in a simulated thread of the calling process; a future of it."""
        return self.world.spawn_in(OWNER.get(), fn, *args)


class _SimThread:
    """A thread of a simulated process: a greenlet of the process that starts it (threading.Thread's
    surface: start, is_alive, join, name, daemon)."""

    def __init__(self, world, target, args, name, daemon):
        self.world = world
        self._target, self._args = target, tuple(args or ())
        self.name = name or "sim-thread"
        self.daemon = daemon
        self._fut = None

    def start(self) -> None:
        if self._fut is not None:
            raise RuntimeError("threads can only be started once")
        self._fut = self.world.spawn_in(OWNER.get(), self._target, *self._args)

    def is_alive(self) -> bool:
        return self._fut is not None and not self._fut.done()

    def join(self, timeout=None) -> None:
        if self._fut is None:
            raise RuntimeError("cannot join thread before it is started")
        if not self._fut.done():
            _Clock(self.world).block_on(asyncio.wait([self._fut], timeout=timeout), None)


class _SeededSecrets:
    """The `secrets` module of the checkpoint writer inside the world: token_hex from the seed."""

    def __init__(self, rng: random.Random, real):
        self._rng, self._real = rng, real

    def token_hex(self, nbytes: int = 32) -> str:
        return self._rng.getrandbits(8 * nbytes).to_bytes(nbytes, "big").hex()

    def __getattr__(self, name):
        return getattr(self._real, name)


class World:
    """A cluster of `ps` parameter servers and `workers` workers, and one client per worker."""

    def __init__(self, ps: int, workers: int, seed: int = 0, costs: Costs | None = None,
                 limit_s: float | None = None, task_faults=(), crash_restarts=None,
                 marker: str = "sim/loss", step_feed: str = "sim/step:0"):
        self.seed = int(seed)
        self.costs = costs or Costs()
        self.loop = VirtualLoop(self.seed, limit_s)
        self.loop.set_exception_handler(self._loop_exception)
        self.events: list = []
        self.net = SimNetwork(self.loop, self.seed, self.costs.net, log=self.emit)
        self.disk = SimDisk(now=self.loop.time)
        self.token = "sim-token"
        self.spec = {"ps": [f"ps-{i}.sim:2222" for i in range(ps)],
                     "worker": [f"worker-{i}.sim:2222" for i in range(workers)]}
        self.procs: dict = {}
        for job, n in (("ps", ps), ("worker", workers)):
            for i in range(n):
                t = f"/job:{job}/task:{i}"
                self.procs[t] = SimProcess(self, t, t, "task")
        self.clients = {w: SimProcess(self, f"client:{w}", f"/job:worker/task:{w}", "client") for w in range(workers)}
        self.crash_restarts = dict(crash_restarts or {})
        self.seam = _StepSeam(self, marker, step_feed, list(task_faults), self.seed)
        self.rng = random.Random(f"actorflow-sim-world-{self.seed}")
        self._pids = 100
        self.leaks: list = []
        self.leak_stacks: list = []
        self.loop_errors: list = []
        self._saved: list = []
        self.runtime = None
        self.greenlets: list = []
        self._main = greenlet.getcurrent()   # the loop's greenlet: every client's parent
        self.killed: set = set()

    # -- the record -----------------------------------------------------------------------------------
    def emit(self, kind: str, **fields) -> dict:
        ev = {"t": round(self.loop.time(), 6), "kind": kind, **fields}
        self.events.append(ev)
        return ev

    def _loop_exception(self, loop, context) -> None:
        exc = context.get("exception")
        if isinstance(exc, (ProcessKilled, asyncio.CancelledError)):
            return
        msg = context.get("message", "")
        if "Task was destroyed but it is pending" in msg:
            return
        self.loop_errors.append(f"{msg}: {exc!r}" if exc is not None else msg)

    # -- processes ------------------------------------------------------------------------------------
    def target(self, w: int) -> str:
        from actorflow.cluster.spec import make_target
        return make_target(self.spec["worker"][w], self.token)

    def start(self, task: str) -> Incarnation:
        """Runs a task's start-up in a new incarnation: its worker service, listening at its address."""
        from actorflow.cluster.server import WorkerService
        from actorflow.cluster.spec import ClusterSpec
        proc = self.procs[task]
        self._pids += 1
        inc = proc.inc = Incarnation(proc, self._pids)
        proc.starts += 1
        proc.cpu = self.loop.time()
        job, idx = task.split("/")[1][4:], int(task.split("/")[2][5:])

        def startup():
            svc = WorkerService(ClusterSpec(self.spec), job, idx, self.token, self.loop)
            svc.pid = inc.pid
            inc.service = svc
            self.net.listeners[self.spec[job][idx]] = inc
        inc.ctx.run(startup)
        return inc

    def kill(self, task: str, power_loss: bool = False, expected: bool = True) -> list:
        """kill -9 of a task (with `power_loss`, of its machine: unsynced disk writes may be lost)."""
        proc = self.procs[task]
        inc = proc.inc
        if inc is None or not inc.alive:
            return []
        inc.alive = False
        self.killed.add(task)
        self.net.process_died(inc)
        inc.service = None
        if power_loss:
            return self.disk.crash(proc.machine, self.rng)
        return []

    def restart(self, task: str, fault=None) -> None:
        self.emit("restart", task=task, fault=fault)
        inc = self.start(task)
        self.emit("restarted", task=task, fault=fault, pid=inc.pid)

    def restart_later(self, task: str, delay: float, fault=None) -> None:
        self.loop.call_later(delay, self.restart, task, fault, context=contextvars.Context())

    # -- clients ---------------------------------------------------------------------------------------
    def spawn(self, w: int, fn, *args) -> asyncio.Future:
        """Runs `fn(*args)` as worker `w`'s client (a greenlet; its blocking calls wait on the loop).
        Returns a future of its result."""
        proc = self.clients[w]
        if proc.inc is None:
            self._pids += 1
            proc.inc = Incarnation(proc, self._pids)
        return self.spawn_in(proc.inc, fn, *args)

    def spawn_in(self, inc, fn, *args) -> asyncio.Future:
        """Runs `fn(*args)` in a new greenlet of incarnation `inc` (a client, or a client's thread)."""
        fut = self.loop.create_future()
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())

        def body():
            _restore_locals(None)
            try:
                res = fn(*args)
            except BaseException as e:  # noqa: BLE001 - handed to whoever awaits the client
                if not fut.done():
                    fut.set_exception(e)
            else:
                if not fut.done():
                    fut.set_result(res)
        g = greenlet.greenlet(body, parent=self._main)
        g.gr_context = inc.ctx.copy()
        self.greenlets.append(g)
        self.loop.call_soon(g.switch, context=inc.ctx)
        return fut

    # -- entering and leaving -----------------------------------------------------------------------------
    def __enter__(self):
        from actorflow import checkpoint_format as ckpt_io
        from actorflow import clock
        from actorflow.actors import dispatcher
        from actorflow.cluster import server
        from actorflow.sim import faults
        from actorflow.transport import channel
        dispatcher._limit_blas_threads()       # its one thread, before the guard
        from actorflow.kernels.registry import registered_ops
        registered_ops("CPU")
        self._saved = [(clock, "_hook", clock._hook), (dispatcher, "POOL", dispatcher.POOL),
                       (dispatcher, "_default_runtime", dispatcher._default_runtime),
                       (channel, "DIAL", channel.DIAL), (faults, "STEP", faults.STEP),
                       (faults, "TRANSPORT", faults.TRANSPORT), (channel, "fault_hook", channel.fault_hook),
                       (server, "step_fault_hook", server.step_fault_hook),
                       (ckpt_io, "fault_hook", ckpt_io.fault_hook), (ckpt_io, "secrets", ckpt_io.secrets)]
        self._random_state = random.getstate()
        random.seed(f"actorflow-sim-{self.seed}")
        clock.install(_Clock(self))
        dispatcher.POOL = lambda threads: SyncPool(self, OWNER.get(), self.costs.cores)
        self.runtime = dispatcher.Runtime(self.loop, pool=SyncPool(self, None, self.costs.cores))
        dispatcher._default_runtime = self.runtime
        channel.DIAL = self.net.dial
        faults.set_injectors(None, self.seam)       # the worker services' step seam; the network is simulated
        ckpt_io.fault_hook = self.seam.save_hook
        # Temporary file names from the seed (the real ones are random): a power loss draws its damage
        # file by file in name order, and the record names them.
        ckpt_io.secrets = _SeededSecrets(random.Random(f"actorflow-sim-names-{self.seed}"), ckpt_io.secrets)
        self.disk.install()
        self._guard_on()
        asyncio.set_event_loop(self.loop)
        return self

    def __exit__(self, *exc):
        self._guard_off()
        self.disk.uninstall()
        for mod, name, old in reversed(self._saved):
            setattr(mod, name, old)
        random.setstate(self._random_state)
        asyncio.set_event_loop(None)
        for p in list(self.procs.values()) + list(self.clients.values()):
            if p.inc is not None:
                p.inc.alive = False
        return False

    def run(self, coro):
        """Runs `coro` (the world's main coroutine) on the loop until it ends; raises
        SimulationStalled on a deadlock or when virtual time passes `limit_s`."""
        self._main = greenlet.getcurrent()
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        # Suspended clients (a run that stalled) are dropped without running their clean-up.
        for g in self.greenlets:
            if not g.dead:
                try:
                    g.throw(greenlet.GreenletExit)
                except BaseException:  # noqa: BLE001
                    pass
        self.greenlets.clear()
        try:
            self.loop.close()
        except Exception:  # noqa: BLE001
            pass

    # -- the leak guard -----------------------------------------------------------------------------------
    def _guard_on(self) -> None:
        world = self
        saved = self._guards = []

        def refuse(what, real):
            def f(*a, **k):
                mod = sys._getframe(1).f_globals.get("__name__", "")
                if threading.get_ident() != world._thread or _stamping(sys._getframe(1)):
                    return real(*a, **k)
                world.leaks.append(f"{what} from {mod}")
                world.leak_stacks.append("".join(traceback.format_stack(limit=12)))
                raise SimulationLeak(f"{what} inside a simulation (from {mod})")
            return f
        self._thread = threading.get_ident()
        for name in ("time", "monotonic", "perf_counter", "sleep", "time_ns", "monotonic_ns", "perf_counter_ns"):
            real = getattr(_time, name)
            saved.append((_time, name, real))
            setattr(_time, name, refuse(f"time.{name}()", real))
        saved.append((threading.Thread, "start", threading.Thread.start))
        threading.Thread.start = refuse("threading.Thread.start()", threading.Thread.start)
        saved.append((socket, "socket", socket.socket))
        real_socket = socket.socket

        class _NoSocket(real_socket):
            def __init__(self, *a, **k):
                world.leaks.append("socket.socket()")
                world.leak_stacks.append("".join(traceback.format_stack(limit=12)))
                raise SimulationLeak("a real socket inside a simulation")
        socket.socket = _NoSocket

    def _guard_off(self) -> None:
        for obj, name, real in reversed(getattr(self, "_guards", [])):
            setattr(obj, name, real)
        self._guards = []
