"""A discrete-event model of the coordination protocols, in virtual time (`actorflow sim model`).

It runs the protocols of actorflow's distributed training, asynchronous, and synchronous with N
aggregated of N + b workers (SyncReplicasOptimizer), with the parameters sharded over P parameter
servers, on an event queue (heapq) in virtual time, far beyond one machine: 1,000 workers and 100
PS tasks take seconds.

One training step of a worker: fetch the parameters from every PS shard (the shard's CPU, then its
network link out), compute (a draw from the step-time distribution, with stragglers), push the
gradients (the worker's link out, the shard's link in, the shard's CPU to apply or accumulate
them). Asynchronous: every worker loops on its own. Synchronous: a step's first N gradients are
accepted, later ones still cost the PS their bandwidth and CPU and are dropped; the N-th starts the
chief's update on every shard, and the next step's tokens release the waiting workers (a worker whose
gradient comes after its step ended catches up at once, as SyncReplicasOptimizer's stale workers do).

Costs come from a calibration measured on this machine (actorflow/sim/calibration.py): CPU per
step of the client, worker and PS processes, the transport's cost per MB, an update's cost per MB.
Two settings:

- `local`: the calibration's own setting, used to check the model against real runs: every task is
  a process of one machine and they share its cores (processor sharing among the busy processes,
  less the cores other programs kept busy meanwhile); all clients share one process (the harness's);
- `cluster`: every task has a machine of its own, with a full-duplex link; the figures use it.

The shapes it reproduces: the paper's Figure 8 (backup workers: step time and normalized speedup
against b) and Figure 9 (throughput against the number of PS tasks, for several worker counts).

`simulate_protocol` is the finer model, checked against the real code in virtual time
(actorflow/sim/figures.py, tests/test_sim_model_agreement.py): asynchronous training message by
message as actorflow's protocol sends them (`Protocol`: the master's run_graph calls and replies,
a value, a gradient and a control token per variable, the global step's token), each message
costing what the simulated network charges (actorflow/sim/network.py). The coarse
`simulate_cluster` (one fetch and one push per shard and step) misses those round trips: on the
null model at 100 workers it predicted a step 4x shorter than the real code's.
`simulate_sync_protocol` does the same for SyncReplicasOptimizer (docs/sim_figures.md).
"""
from __future__ import annotations

import heapq
import itertools
import time
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Workload", "Result", "Protocol", "simulate_local", "simulate_cluster", "simulate_protocol",
           "simulate_sync_protocol", "sync_messages_per_step", "figure8",
           "figure9", "validate", "main"]


@dataclass(frozen=True)
class Workload:
    """What one step costs in the `cluster` setting. Times in ms, sizes in MB."""
    compute_ms: float = 1000.0         # a worker's forward and backward pass (median)
    log_sigma: float = 0.05            # its noise: lognormal sigma
    straggle_p: float = 0.0            # a step straggles with this probability...
    straggle_ms: float = 0.0           # ...by this much more (median; lognormal, sigma 0.5)
    model_mb: float = 95.0             # parameters fetched and gradients pushed per step
    ps_compute_ms: float = 0.0         # work done on the PS per worker step (e.g. a sharded softmax)
    net_ms_per_mb: float = 8.0         # per link; 1 Gb/s is about 8 ms/MB
    latency_ms: float = 0.1            # one message hop
    update_ms_per_mb: float = 0.35     # applying (or accumulating) a gradient on the PS
    ps_fixed_ms: float = 0.5           # a PS's CPU per message, whatever its size
    client_ms: float = 0.5             # the client's (master's) CPU per step, beside its worker
    # simulate_protocol only (the simulated network's costs, actorflow/sim/network.py NetCosts):
    msg_cpu_ms: float = 0.01           # a machine's CPU per message it sends or receives
    msg_cpu_ms_per_mb: float = 0.0     # ...and per MB of it
    latency_jitter: float = 0.0        # a hop's latency is latency_ms * (1 + jitter * U[0, 1))
    book_on_arrival: bool = False      # the receiver's CPU booked on arrival, not at send time (_Wire)

    @classmethod
    def from_calibration(cls, cal: dict, **over) -> "Workload":
        """The calibrated costs (transport, update, per-message CPU), with `over` for the rest."""
        base = dict(net_ms_per_mb=cal["net_ms_per_mb"], update_ms_per_mb=cal["update_ms_per_mb"],
                    ps_fixed_ms=cal["ps_cpu_ms"] / 2, client_ms=cal["client_cpu_ms"])
        base.update(over)
        return cls(**base)

    @classmethod
    def from_sim_costs(cls, costs, **over) -> "Workload":
        """The simulated world's costs (actorflow/sim/world.py `Costs`, its network's `NetCosts`), for
        simulate_protocol: the same step compute, client time, latency and per-message costs."""
        n = costs.net
        base = dict(compute_ms=costs.compute_s * 1e3, log_sigma=costs.log_sigma, client_ms=costs.client_s * 1e3,
                    latency_ms=n.latency_s * 1e3, latency_jitter=n.jitter, net_ms_per_mb=n.s_per_mb * 1e3,
                    msg_cpu_ms=n.cpu_per_msg_s * 1e3, msg_cpu_ms_per_mb=n.cpu_per_mb_s * 1e3,
                    ps_fixed_ms=n.cpu_per_msg_s * 1e3, update_ms_per_mb=n.cpu_per_mb_s * 1e3, model_mb=0.0184)
        base.update(over)
        return cls(**base)


@dataclass
class Result:
    step_ms: np.ndarray                 # per worker step (async) or per global step (sync)
    global_steps: int
    virtual_s: float
    events: int
    wall_s: float
    dropped: int = 0
    worker_step_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def median_ms(self) -> float:
        return float(np.median(self.step_ms)) if len(self.step_ms) else float("nan")

    @property
    def throughput(self) -> float:
        """Global steps per second of virtual time."""
        return self.global_steps / self.virtual_s if self.virtual_s > 0 else float("nan")


class _Events:
    """The event queue: (time, sequence, callback, args), time in ms."""

    def __init__(self):
        self.q: list = []
        self.now = 0.0
        self.count = 0
        self._seq = itertools.count()

    def at(self, t: float, fn, *args) -> None:
        heapq.heappush(self.q, (t, next(self._seq), fn, args))

    def run(self, stop) -> None:
        q = self.q
        while q and not stop():
            t, _, fn, args = heapq.heappop(q)
            self.now = t
            self.count += 1
            fn(*args)


# -- the local setting: processes sharing a machine's cores ---------------------------------------------

class _Machine:
    """Cores shared by the busy processes (processor sharing), each process a FIFO of CPU jobs.
    While the busy processes outnumber the cores, CPU work costs more (context switches, cold
    caches), up to `inflation` more (measured by the calibration)."""

    def __init__(self, ev: _Events, cores: float, inflation: float = 0.0):
        self.ev = ev
        self.cores = max(cores, 0.05)
        self.inflation = inflation
        self.busy: dict = {}           # process -> [remaining work, callback]
        self.last = 0.0
        self.version = 0

    def _advance(self) -> None:
        now = self.ev.now
        if self.busy:
            rate = self._rate()
            for job in self.busy.values():
                job[0] -= (now - self.last) * rate
        self.last = now

    def _reschedule(self) -> None:
        self.version += 1
        if not self.busy:
            return
        rate = self._rate()
        proc, job = min(self.busy.items(), key=lambda kv: kv[1][0])
        self.ev.at(self.ev.now + max(job[0], 0.0) / rate, self._finish, proc, self.version)

    def _rate(self) -> float:
        n = len(self.busy)
        # The overhead grows with the excess of runnable processes over cores, up to `inflation`
        # once they are twice as many.
        excess = min(1.0, max(0.0, n - self.cores) / self.cores)
        return min(1.0, self.cores / n) / (1.0 + self.inflation * excess)

    def start(self, proc, work: float, done) -> None:
        self._advance()
        self.busy[proc] = [work, done]
        self._reschedule()

    def _finish(self, proc, version) -> None:
        if version != self.version:
            return
        self._advance()
        _, done = self.busy.pop(proc)
        self._reschedule()
        proc._done(done)


class _Proc:
    """A single-threaded process (one event loop, or one GIL) of a machine: CPU jobs in FIFO order."""

    def __init__(self, machine: _Machine, name: str):
        self.m = machine
        self.name = name
        self.queue: list = []
        self.running = False

    def submit(self, work: float, done) -> None:
        if self.running:
            self.queue.append((work, done))
        else:
            self.running = True
            self.m.start(self, work, done)

    def _done(self, done) -> None:
        if self.queue:
            work, nxt = self.queue.pop(0)
            self.m.start(self, work, nxt)
        else:
            self.running = False
        done()


def local_costs(cal: dict) -> dict:
    """Per-step CPU (ms) of the client, worker and PS processes; the fraction of it that is off a
    step's critical path (the processes overlap: the PS sends the parameters while the worker
    takes its request, the client's bookkeeping follows the reply...); and the latency of each of
    the step's four message hops. With one worker, a step takes its on-path CPU, at the speed the
    cores other programs left free allowed, plus the hops: one equation, two unknowns, so the
    fraction is what the CPU leaves over the step time, and the hops what the step leaves over it."""
    c, w, p = cal["client_cpu_ms"], cal["worker_cpu_ms"], cal["ps_cpu_ms"]
    solo = cal.get("real", {}).get("1", {})
    rate = min(1.0, max(cal["machine"]["cores"] - solo.get("background_cores", 0.0), 0.05))
    cpu = c + w + p
    step = cal["solo_step_ms"]
    off = min(0.9, max(0.0, 1.0 - step * rate / cpu))
    hop = max(0.0, (step - cpu / rate) / 4.0)
    return {"client": c, "worker": w, "ps": p, "off_path": off, "hop": hop, "log_sigma": cal.get("log_sigma", 0.1),
            "inflation": cal.get("contention_inflation", 0.0)}


def simulate_local(cal: dict, workers: int, steps_per_worker: int = 200, background_cores: float = 0.0,
                   cores: float | None = None, seed: int = 0) -> Result:
    """Asynchronous training with one PS on one machine, as the calibration measured it: the
    client process (every client's master) -> PS (send the parameters) -> worker (compute) -> PS
    (apply) -> client, each a CPU job of the calibrated size in its process, with a hop latency
    between them; the processes share the machine's free cores."""
    t0 = time.perf_counter()
    k = local_costs(cal)
    ev = _Events()
    machine = _Machine(ev, (cores or cal["machine"]["cores"]) - background_cores, k["inflation"])
    on, off = 1.0 - k["off_path"], k["off_path"]

    def stage(proc, work, then):
        # The on-path part of a process's work holds up the step; the rest keeps the process (and a
        # core) busy after it, delaying whatever that process does next.
        def done():
            if off > 0:
                proc.submit(work * off, lambda: None)
            then()
        proc.submit(work * on, done)
    client, ps = _Proc(machine, "client"), _Proc(machine, "ps")
    procs = [_Proc(machine, f"worker{w}") for w in range(workers)]
    rng = np.random.default_rng(seed)
    # The worker's CPU is the noisy part: drawn so that its median stays the calibrated one.
    noise = rng.lognormal(0.0, k["log_sigma"], size=(workers, steps_per_worker + 1))
    durations = []
    left = [steps_per_worker] * workers
    total = [0]

    def begin(w):
        start = ev.now
        i = steps_per_worker - left[w]

        def after_client():
            ev.at(ev.now + k["hop"], stage, ps, k["ps"] / 2, after_send)

        def after_send():
            ev.at(ev.now + k["hop"], stage, procs[w], k["worker"] * noise[w, i], after_compute)

        def after_compute():
            ev.at(ev.now + k["hop"], stage, ps, k["ps"] / 2, after_apply)

        def after_apply():
            ev.at(ev.now + k["hop"], stage, client, k["client"] / 2, finish)

        def finish():
            durations.append(ev.now - start)
            total[0] += 1
            left[w] -= 1
            if left[w] > 0:
                begin(w)
        stage(client, k["client"] / 2, after_client)

    for w in range(workers):
        ev.at(0.0, begin, w)
    ev.run(lambda: False)
    d = np.array(durations[workers * 3:])      # leave out the first steps, as the real runs do
    return Result(d, total[0], ev.now / 1e3, ev.count, time.perf_counter() - t0)


# -- the cluster setting: every task on its own machine -------------------------------------------------

def simulate_cluster(wl: Workload, workers: int, ps: int, mode: str = "async", backup: int = 0,
                     steps: int = 100, seed: int = 0) -> Result:
    """`steps` global steps of asynchronous or synchronous (workers - backup aggregated) training.

    The P shards are vectors: a message to every shard at one time is one event, each shard's CPU
    and links FIFO queues (their next free time), so 1,000 workers and 100 shards stay cheap.
    """
    if mode not in ("async", "sync"):
        raise ValueError("mode is 'async' or 'sync'")
    if mode == "sync" and not 0 <= backup < workers:
        raise ValueError("backup workers must leave at least one worker to aggregate")
    t_wall = time.perf_counter()
    ev = _Events()
    rng = np.random.default_rng(seed)
    P = ps
    mb = wl.model_mb / P
    xfer = mb * wl.net_ms_per_mb
    cpu = np.zeros(P)                  # each shard's CPU: free from this time
    link_out = np.zeros(P)
    link_in = np.zeros(P)
    send_cpu = wl.ps_fixed_ms
    apply_cpu = wl.ps_fixed_ms + mb * wl.update_ms_per_mb + wl.ps_compute_ms / P
    N = workers - backup if mode == "sync" else 1
    lat = wl.latency_ms
    state = {"step": 0, "accepted": 0, "dropped": 0, "t_step": 0.0, "done": False}
    step_times: list = []
    worker_times: list = []
    waiting: list = []                 # sync: workers waiting for the next token
    started = [0.0] * workers
    their_step = [0] * workers

    def compute_ms():
        c = wl.compute_ms * rng.lognormal(0.0, wl.log_sigma) + wl.client_ms
        if wl.straggle_p and rng.random() < wl.straggle_p:
            c += wl.straggle_ms * rng.lognormal(0.0, 0.5)
        return c

    def fetch(w):
        started[w] = ev.now
        their_step[w] = state["step"]
        ev.at(ev.now + lat, fetch_at_ps, w)

    def fetch_at_ps(w):
        nonlocal cpu, link_out
        cpu = np.maximum(cpu, ev.now) + send_cpu
        link_out = np.maximum(link_out, cpu) + xfer
        ev.at(float(link_out.max()) + lat, computed_start, w)

    def computed_start(w):
        # The worker's own link is not a bottleneck (it pushes what P shards send to it); it sends
        # the gradients once computed, shard by shard: the last part leaves after the whole model.
        ev.at(ev.now + compute_ms() + wl.model_mb * wl.net_ms_per_mb / max(P, 1) + lat, push_at_ps, w)

    def push_at_ps(w):
        nonlocal cpu, link_in
        link_in = np.maximum(link_in, ev.now) + xfer
        cpu = np.maximum(cpu, link_in) + apply_cpu
        ev.at(float(cpu.max()), arrived, w)

    def arrived(w):
        worker_times.append(ev.now - started[w])
        if mode == "async":
            step_times.append(ev.now - started[w])
            state["step"] += 1
            if state["step"] >= steps:
                state["done"] = True
            else:
                fetch(w)
            return
        if their_step[w] == state["step"] and state["accepted"] < N:
            state["accepted"] += 1
            if state["accepted"] == N:
                apply_update()
        elif their_step[w] != state["step"]:
            # Stale (its step is over): dropped, and the worker catches up at once with a token of
            # the current step it enqueues itself (SyncReplicasOptimizer's "catch_up").
            state["dropped"] += 1
            ev.at(ev.now + lat, fetch, w)
            return
        else:
            state["dropped"] += 1          # late: the chief releases a token for it with the step
        waiting.append(w)

    def apply_update():
        nonlocal cpu
        # The chief's update on every shard: the N-gradient average applied (one more update's work).
        cpu = np.maximum(cpu, ev.now) + mb * wl.update_ms_per_mb + wl.ps_fixed_ms
        ev.at(float(cpu.max()) + lat, release)

    def release():
        step_times.append(ev.now - state["t_step"])
        state["t_step"] = ev.now
        state["step"] += 1
        state["accepted"] = 0
        if state["step"] >= steps:
            state["done"] = True
            return
        ready, waiting[:] = list(waiting), []
        for w in ready:
            ev.at(ev.now + lat, fetch, w)

    for w in range(workers):
        ev.at(0.0, fetch, w)
    ev.run(lambda: state["done"])
    warm = min(len(step_times) // 10, 5 * (workers if mode == "async" else 1))
    return Result(np.array(step_times[warm:]), state["step"], ev.now / 1e3, ev.count, time.perf_counter() - t_wall,
                  dropped=state["dropped"], worker_step_ms=np.array(worker_times))


# -- the real protocol, message by message ------------------------------------------------------------------

HEADER_BYTES = 120                     # a frame's header (msgpack), beside its tensors


@dataclass(frozen=True)
class Protocol:
    """The messages of one asynchronous training step of actorflow's between-graph replication, as the
    real code sends them (counted in the simulated network: `run_deterministic(count_kinds=True)`):

    1. the client's master calls `run_graph` on its worker (the feeds travel with the call) and on
       every PS task that holds a variable;
    2. each PS sends its variables' values to the worker (one Send/Recv tensor per variable);
    3. the worker computes, and sends each variable's gradient to its PS;
    4. each PS applies it and sends a control token back to the worker (the apply's edge to the
       optimizer's group, which is on the worker);
    5. once every token is in, the worker sends one control token to the global step's PS, which
       increments the global step;
    6. every task replies to the master when its partition is done (the global step's PS with the
       step's value, the worker with the loss).

    Per step: 2 (1 + used PS) RPC messages, 2 per variable and 1 more per variable, and 1: for the
    digits MLP (4 variables and the global step) over 2 PS tasks, 6 + 8 + 4 + 1 = 19 messages.
    `var_bytes`: each trainable variable's size; `var_ps`: its PS task; `gs_ps`: the global step's."""
    var_bytes: tuple
    var_ps: tuple
    gs_ps: int = 0
    feed_bytes: int = 0                # what the master's call to the worker carries (the batch)
    fetch_bytes: int = 8               # what each reply carries
    # Where the optimizer's group of the updates runs: "worker" (as TF and actorflow place it: the
    # device function's task), or "gs_ps" (colocated with the global step, a what-if: every apply's
    # token goes straight to the global step's PS, one hop and n + 1 messages fewer per step).
    finish: str = "worker"
    # The master calls the PS tasks in the order their variables appear in the graph, and its worker
    # among them, after this many PS calls (where the worker's first op comes: after the first layer).
    worker_call_after: int = 0

    def __post_init__(self):
        if self.finish not in ("worker", "gs_ps"):
            raise ValueError(f"Protocol.finish is 'worker' or 'gs_ps', not {self.finish!r}")
        if len(self.var_bytes) != len(self.var_ps):
            raise ValueError("Protocol: one PS task per variable")

    @classmethod
    def replica_device_setter(cls, var_bytes, ps: int, feed_bytes: int = 0, first_layer_vars: int = 2) -> "Protocol":
        """Variables placed as `replica_device_setter` places them: round-robin over the PS tasks,
        in creation order, the global step (created first) on PS 0; the worker's first op follows
        the first layer's variables."""
        var_ps = tuple((i + 1) % ps for i in range(len(var_bytes)))
        before = len(set((0,) + var_ps[:first_layer_vars]))
        return cls(tuple(int(b) for b in var_bytes), var_ps, 0, int(feed_bytes), worker_call_after=before)

    @classmethod
    def digits_mlp(cls, ps: int, hidden=(64,), batch: int = 32) -> "Protocol":
        """The scenarios' model (actorflow/sim/workload.py): dense layers 64 -> hidden -> 10, float32,
        fed a batch of 64 floats and an int64 label per example."""
        sizes, prev = [], 64
        for units in tuple(hidden) + (10,):
            sizes += [prev * units * 4, units * 4]
            prev = units
        return cls.replica_device_setter(sizes, ps, feed_bytes=batch * (64 * 4 + 8) + 8)

    @property
    def used_ps(self) -> list:
        return sorted(set(self.var_ps) | {self.gs_ps})

    @property
    def call_order(self) -> list:
        """The master's run_graph calls in the order it sends them: PS indices, and "worker"."""
        order = list(dict.fromkeys((self.gs_ps,) + self.var_ps))
        return order[:self.worker_call_after] + ["worker"] + order[self.worker_call_after:]

    @property
    def push_order(self) -> list:
        """The variables in the order the worker's gradients leave: computed last layer first, each
        queued on its PS's connection, whose writer sends all it holds when its turn comes (so they
        leave grouped by connection, in the order each connection got its first one)."""
        by: dict = {}
        for v in reversed(range(len(self.var_bytes))):
            by.setdefault(self.var_ps[v], []).append(v)
        return [v for vs in by.values() for v in vs]

    def messages_per_step(self) -> dict:
        """{(from, to, kind): messages per step}, in the simulated network's terms (SimNetwork.count_kinds)."""
        n, used = len(self.var_bytes), len(self.used_ps)
        out = {("client", "worker", "call:run_graph"): 1, ("worker", "client", "reply:run_graph"): 1,
               ("client", "ps", "call:run_graph"): used, ("ps", "client", "reply:run_graph"): used}
        if self.finish == "worker":
            out.update({("ps", "worker", "tensor"): 2 * n, ("worker", "ps", "tensor"): n + 1})
        else:
            remote = sum(1 for p in self.var_ps if p != self.gs_ps)
            out.update({("ps", "worker", "tensor"): n, ("worker", "ps", "tensor"): n})
            if remote:
                out[("ps", "ps", "tensor")] = remote
        return out


class _Node:
    """A machine in simulate_protocol: its CPU and its link each way (next free times), as in the
    simulated network."""
    __slots__ = ("cpu", "link_out", "link_in")

    def __init__(self):
        self.cpu = self.link_out = self.link_in = 0.0


class _Wire:
    """The simulated network's costs (actorflow/sim/network.py `SimNetwork._schedule`), in ms: a
    message costs its sender's CPU and link out, the hop's latency, the receiver's link in and CPU.
    As there, the receiver's CPU is booked when the message is sent, for when it arrives (so a
    machine's CPU counts as taken during its incoming messages' flight); `Workload.book_on_arrival`
    books it when the message arrives instead (a what-if for the simulated network)."""

    def __init__(self, ev: _Events, wl: Workload, rng):
        self.ev, self.rng = ev, rng
        self.lat, self.jit = wl.latency_ms, wl.latency_jitter
        self.cpu_msg, self.cpu_mb, self.net = wl.msg_cpu_ms, wl.msg_cpu_ms_per_mb, wl.net_ms_per_mb
        self.on_arrival = wl.book_on_arrival

    def send(self, a: _Node, b: _Node, nbytes: int, fn, *args) -> None:
        ev = self.ev
        mb = (nbytes + HEADER_BYTES) / 1e6
        cpu = self.cpu_msg + mb * self.cpu_mb
        a.cpu = max(a.cpu, ev.now) + cpu
        a.link_out = max(a.link_out, a.cpu) + mb * self.net
        t = a.link_out + self.lat * (1.0 + self.jit * self.rng.random())
        if self.on_arrival:
            ev.at(t, self._arrive, b, mb, cpu, fn, args)
            return
        b.link_in = max(b.link_in, t) + mb * self.net
        b.cpu = max(b.cpu, b.link_in) + cpu
        ev.at(b.cpu, fn, *args)

    def _arrive(self, b: _Node, mb: float, cpu: float, fn, args) -> None:
        ev = self.ev
        b.link_in = max(b.link_in, ev.now) + mb * self.net
        b.cpu = max(b.cpu, b.link_in) + cpu
        ev.at(b.cpu, fn, *args)


def simulate_protocol(wl: Workload, proto: Protocol, workers: int, steps: int = 200, seed: int = 0) -> Result:
    """`steps` global steps of asynchronous training, message by message as the real protocol sends
    them (`Protocol`), each message costing what the simulated network charges: the sender's CPU
    (`msg_cpu_ms`, plus `msg_cpu_ms_per_mb`), its link out (`net_ms_per_mb`), the hop's latency (with
    its jitter), the receiver's link in and CPU. A worker's client and its worker service share a
    machine; each PS task has one. Kernels cost nothing but the step's compute, which the worker
    spends when the master's call reaches it, while the parameters are on their way (as the worker's
    step seam does); the client's own time (`client_ms`) is spent before each step's call.

    Result.step_ms holds each worker step's whole cycle (the client's time and the step), as a
    client sees it; warm-up steps (each worker's first) left out."""
    if not proto.var_bytes:
        raise ValueError("simulate_protocol: the protocol has no variables")
    t_wall = time.perf_counter()
    ev = _Events()
    rng = np.random.default_rng(seed)
    nps = max(proto.used_ps) + 1
    wnode = [_Node() for _ in range(workers)]
    pnode = [_Node() for _ in range(nps)]
    wproc = [0.0] * workers            # each worker process's compute: free from this time
    nvar = len(proto.var_bytes)
    by_ps = {p: [v for v in range(nvar) if proto.var_ps[v] == p] for p in proto.used_ps}
    used = proto.used_ps
    push_order, call_order = proto.push_order, proto.call_order
    on_worker = proto.finish == "worker"
    state = {"gs": 0, "done": False}
    cycles: list = []
    per_worker = [0] * workers

    send = _Wire(ev, wl, rng).send

    class _Step:
        __slots__ = ("w", "t0", "start", "ready", "reads", "tokens", "replies")

    def begin(w: int, start: float) -> None:
        s = _Step()
        s.w, s.start, s.t0 = w, start, ev.now
        s.ready = False
        s.reads = s.tokens = s.replies = 0
        me = wnode[w]
        for p in call_order:
            if p == "worker":
                send(me, me, proto.feed_bytes, worker_call, s)
            else:
                send(me, pnode[p], 0, ps_call, s, p)

    def worker_call(s) -> None:
        c = wl.compute_ms * rng.lognormal(0.0, wl.log_sigma) if wl.compute_ms else 0.0
        wproc[s.w] = max(wproc[s.w], ev.now) + c
        ev.at(wproc[s.w], worker_ready, s)

    def worker_ready(s) -> None:
        s.ready = True
        maybe_push(s)

    def ps_call(s, p: int) -> None:
        for v in by_ps[p]:
            send(pnode[p], wnode[s.w], proto.var_bytes[v], value_in, s)

    def value_in(s) -> None:
        s.reads += 1
        maybe_push(s)

    def maybe_push(s) -> None:
        if s.ready and s.reads == nvar:
            for v in push_order:
                send(wnode[s.w], pnode[proto.var_ps[v]], proto.var_bytes[v], grad_in, s, v)
            if not on_worker:
                # The worker's partition is done with its last gradient sent (the group is elsewhere).
                send(wnode[s.w], wnode[s.w], proto.fetch_bytes, reply_in, s)

    def grad_in(s, v: int) -> None:
        p = proto.var_ps[v]
        if on_worker:
            send(pnode[p], wnode[s.w], 0, token_in, s)
        elif p != proto.gs_ps:
            send(pnode[p], pnode[proto.gs_ps], 0, gs_token_in, s)
        else:
            gs_token_in(s)
        if p != proto.gs_ps and v == by_ps[p][0]:
            # The PS's partition is done with its last apply (applied in the order the gradients came).
            send(pnode[p], wnode[s.w], proto.fetch_bytes, reply_in, s)

    def token_in(s) -> None:
        s.tokens += 1
        if s.tokens == nvar:
            me = wnode[s.w]
            send(me, pnode[proto.gs_ps], 0, gs_in, s)
            send(me, me, proto.fetch_bytes, reply_in, s)

    def gs_token_in(s) -> None:
        s.tokens += 1
        if s.tokens == nvar:
            gs_in(s)

    def gs_in(s) -> None:
        state["gs"] += 1
        send(pnode[proto.gs_ps], wnode[s.w], proto.fetch_bytes, reply_in, s)

    def reply_in(s) -> None:
        s.replies += 1
        if s.replies < 1 + len(used):
            return
        w = s.w
        per_worker[w] += 1
        if per_worker[w] > 1:
            cycles.append(ev.now - s.start)
        if state["gs"] >= steps:
            state["done"] = True
            return
        ev.at(ev.now + wl.client_ms, begin, w, ev.now)

    for w in range(workers):
        ev.at(wl.client_ms, begin, w, 0.0)
    ev.run(lambda: state["done"])
    return Result(np.array(cycles), state["gs"], ev.now / 1e3, ev.count, time.perf_counter() - t_wall,
                  worker_step_ms=np.array(cycles))


def sync_messages_per_step(proto: "Protocol", workers: int) -> dict:
    """SyncReplicasOptimizer's messages per global step when all `workers` contribute to every step
    (`simulate_sync_protocol`; in the simulated network's terms): each worker's step, and the
    chief's sync loop's run (its queue runner: one run per global step)."""
    n, used = len(proto.var_bytes), len(proto.used_ps)
    remote = sum(1 for p in proto.var_ps if p != proto.gs_ps)
    runs = workers + 1
    out = {("client", "worker", "call:run_graph"): runs, ("worker", "client", "reply:run_graph"): runs,
           ("client", "ps", "call:run_graph"): runs * used, ("ps", "client", "reply:run_graph"): runs * used,
           ("ps", "worker", "tensor"): workers * (n + 1) + n, ("worker", "ps", "tensor"): workers * (n + 1) + 1}
    pp = workers * (2 * remote + used - 1)
    if pp:
        out[("ps", "ps", "tensor")] = pp
    return out


def simulate_sync_protocol(wl: Workload, proto: Protocol, workers: int, backup: int = 0, steps: int = 50,
                           seed: int = 0) -> Result:
    """`steps` global steps of synchronous training (SyncReplicasOptimizer, workers - backup
    aggregated), message by message as the real code sends them, with simulate_protocol's costs.

    A worker's step: the master's calls; the values; the compute (with stragglers: `straggle_p`,
    `straggle_ms`); the local step to the gate (beside the global step) and each gradient to its
    variable's PS, where it *arrives* (a token from each other PS to the gate's); the gate admits it
    (one of the first N of its step), refuses it as late (the step has N) or stale (its step is
    over), and sends the decision to every other PS, whose accumulators take it (a token per
    variable back to the gate's PS); then the worker waits for the token of its next step (a stale
    one takes its own at once). The chief's sync loop, one run per global step: each PS takes its
    accumulators' N-averages once they hold N, applies them and sends a token per variable to the
    chief's worker (the optimizer's group), which sends one to the global step's PS: the step ends
    and a token goes to every worker waiting for it (the N admitted and the late). Each run ends
    with a reply to the master from every task it ran on.

    Result.step_ms: the global steps' durations; `dropped`: gradients refused."""
    if not 0 <= backup < workers:
        raise ValueError("backup workers must leave at least one worker to aggregate")
    t_wall = time.perf_counter()
    ev = _Events()
    rng = np.random.default_rng(seed)
    N = workers - backup
    nps = max(proto.used_ps) + 1
    wnode = [_Node() for _ in range(workers)]
    pnode = [_Node() for _ in range(nps)]
    wproc = [0.0] * workers
    nvar = len(proto.var_bytes)
    used, gsp = proto.used_ps, proto.gs_ps
    by_ps = {p: [v for v in range(nvar) if proto.var_ps[v] == p] for p in used}
    others = [p for p in used if p != gsp]
    call_order = proto.call_order
    # The worker's sends: the local step first (to the gate's PS), then the gradients by connection.
    push_order = proto.push_order
    st = {"step": 0, "admitted": 0, "applied": {p: 0 for p in used}, "late": [], "dropped": 0, "done": False,
          "t_step": 0.0, "qr": None}
    step_times: list = []

    send = _Wire(ev, wl, rng).send

    class _Run:
        __slots__ = ("w", "ls", "ready", "values", "arrived", "decided", "acc", "replies", "start", "kind")

    # -- a worker's step ---------------------------------------------------------------------------------
    def begin(w: int, ls: int, start: float) -> None:
        r = _Run()
        r.w, r.ls, r.start = w, ls, start
        r.ready, r.values, r.arrived, r.acc, r.replies, r.decided = False, 0, 0, 0, 0, None
        me = wnode[w]
        for p in call_order:
            if p == "worker":
                send(me, me, proto.feed_bytes, worker_call, r)
            else:
                send(me, pnode[p], 0, ps_call, r, p)

    def worker_call(r) -> None:
        c = wl.compute_ms * rng.lognormal(0.0, wl.log_sigma) if wl.compute_ms else 0.0
        if wl.straggle_p and rng.random() < wl.straggle_p:
            c += wl.straggle_ms * rng.lognormal(0.0, 0.5)
        wproc[r.w] = max(wproc[r.w], ev.now) + c
        ev.at(wproc[r.w], worker_ready, r)

    def worker_ready(r) -> None:
        r.ready = True
        maybe_push(r)

    def ps_call(r, p: int) -> None:
        for v in by_ps[p]:
            send(pnode[p], wnode[r.w], proto.var_bytes[v], value_in, r)

    def value_in(r) -> None:
        r.values += 1
        maybe_push(r)

    def maybe_push(r) -> None:
        if not (r.ready and r.values == nvar):
            return
        me = wnode[r.w]
        send(me, pnode[gsp], 8, gate_in, r)                    # the local step
        for v in push_order:
            p = proto.var_ps[v]
            send(me, pnode[p], proto.var_bytes[v], gate_in if p == gsp else grad_in, r, p)

    def grad_in(r, p: int) -> None:
        send(pnode[p], pnode[gsp], 0, gate_in, r)               # arrived: the gate's control input

    def gate_in(r, p: int = -1) -> None:
        r.arrived += 1
        if r.arrived < nvar + 1:
            return
        if r.ls < st["step"]:
            r.decided = "stale"
        elif st["admitted"] < N:
            r.decided = "admitted"
            st["admitted"] += 1
        else:
            r.decided = "late"
        if r.decided != "admitted":
            st["dropped"] += 1
        for q in others:
            send(pnode[gsp], pnode[q], 8, keep_in, r, q)
        accumulate(r, gsp)
        if not others:
            gate_after(r)

    def accumulate(r, p: int) -> None:
        if r.decided == "admitted":
            st["applied"][p] += 1
            qr_check()

    def keep_in(r, q: int) -> None:
        accumulate(r, q)
        for _v in by_ps[q]:
            send(pnode[q], pnode[gsp], 0, acc_in, r)
        send(pnode[q], wnode[r.w], proto.fetch_bytes, reply_in, r)

    def acc_in(r) -> None:
        r.acc += 1
        if r.acc == sum(len(by_ps[q]) for q in others):
            gate_after(r)

    def gate_after(r) -> None:
        # catch_up, then the token of the next step: a stale worker's own, or the chief's release.
        if r.decided == "stale":
            give_token(r, st["step"])
        else:
            st["late"].append(r)

    def give_token(r, step: int) -> None:
        send(pnode[gsp], wnode[r.w], 8, token_in, r, step)
        send(pnode[gsp], wnode[r.w], proto.fetch_bytes, reply_in, r)

    def token_in(r, step: int) -> None:
        r.ls = step
        send(wnode[r.w], wnode[r.w], proto.fetch_bytes, reply_in, r)

    def reply_in(r) -> None:
        r.replies += 1
        if r.replies < 1 + len(used) or st["done"]:
            return
        ev.at(ev.now + wl.client_ms, begin, r.w, r.ls, ev.now)

    # -- the chief's sync loop ----------------------------------------------------------------------------
    def qr_begin() -> None:
        q = {"taken": set(), "tokens": 0, "replies": 0}
        st["qr"] = q
        me = wnode[0]
        for p in used:
            send(me, pnode[p], 0, qr_call, q, p)
        send(me, me, 0, qr_worker_call, q)

    def qr_worker_call(q) -> None:
        pass                               # the chief's worker waits for the PS tasks' tokens

    def qr_call(q, p: int) -> None:
        q.setdefault("called", set()).add(p)
        qr_check()

    def qr_check() -> None:
        q = st["qr"]
        if q is None:
            return
        for p in sorted(q.get("called", ())):
            if p not in q["taken"] and st["applied"][p] >= N and by_ps[p]:
                q["taken"].add(p)
                for _v in by_ps[p]:
                    send(pnode[p], wnode[0], 0, qr_token_in, q)
                if p != gsp:
                    send(pnode[p], wnode[0], proto.fetch_bytes, qr_reply_in, q)

    def qr_token_in(q) -> None:
        q["tokens"] += 1
        if q["tokens"] == nvar:
            send(wnode[0], pnode[gsp], 0, release, q)
            send(wnode[0], wnode[0], proto.fetch_bytes, qr_reply_in, q)

    def release(q) -> None:
        step_times.append(ev.now - st["t_step"])
        st["t_step"] = ev.now
        st["step"] += 1
        st["admitted"] = 0
        st["applied"] = {p: 0 for p in used}
        waiting, st["late"] = st["late"], []
        if st["step"] >= steps:
            st["done"] = True
            return
        for r in waiting:
            give_token(r, st["step"])
        send(pnode[gsp], wnode[0], proto.fetch_bytes, qr_reply_in, q)

    def qr_reply_in(q) -> None:
        q["replies"] += 1
        if q["replies"] == 1 + len(used):
            qr_begin()

    for w in range(workers):
        ev.at(wl.client_ms, begin, w, 0, 0.0)
    ev.at(0.0, qr_begin)
    ev.run(lambda: st["done"])
    warm = min(len(step_times) // 10, 5)
    return Result(np.array(step_times[warm:]), st["step"], ev.now / 1e3, ev.count, time.perf_counter() - t_wall,
                  dropped=st["dropped"])


# -- the paper's figures ----------------------------------------------------------------------------------

FIG8_WORKLOAD = dict(compute_ms=1000.0, log_sigma=0.08, straggle_p=0.02, straggle_ms=500.0, model_mb=95.0,
                     net_ms_per_mb=1.0)
FIG9_WORKLOAD = dict(compute_ms=100.0, log_sigma=0.05, model_mb=2.0, ps_compute_ms=400.0, net_ms_per_mb=1.0)


def figure8(cal: dict, n: int = 50, backups=range(0, 6), ps: int = 20, steps: int = 150, seed: int = 0) -> list:
    """Synchronous training with N workers aggregated and b backups: median step time, throughput,
    and speedup normalized by the machines used ((N + b) / N), as in the paper's Figure 8(c)."""
    wl = Workload.from_calibration(cal, **FIG8_WORKLOAD)
    rows = []
    base = None
    for b in backups:
        r = simulate_cluster(wl, n + b, ps, "sync", b, steps, seed)
        if base is None:
            base = r.median_ms
        speedup = base / r.median_ms
        rows.append({"backup": b, "median_step_s": r.median_ms / 1e3, "steps_per_s": r.throughput,
                     "speedup": speedup, "normalized_speedup": speedup * n / (n + b), "dropped": r.dropped,
                     "events": r.events, "wall_s": r.wall_s})
    return rows


def figure9(cal: dict, workers=(4, 32, 256), ps_counts=(1, 2, 4, 8, 16, 32), steps_per_worker: int = 20,
            sampled: bool = False, seed: int = 0) -> dict:
    """Asynchronous training whose PS tasks do part of the step (a sharded softmax): global steps per
    second against the number of PS tasks, for several worker counts (the paper's Figure 9)."""
    over = dict(FIG9_WORKLOAD)
    if sampled:
        over["ps_compute_ms"] = over["ps_compute_ms"] / 20
    wl = Workload.from_calibration(cal, **over)
    out = {}
    for w in workers:
        out[w] = {p: simulate_cluster(wl, w, p, "async", 0, steps_per_worker * w, seed).throughput for p in ps_counts}
    return out


def validate(cal: dict, measured: dict | None = None, seed: int = 0) -> list:
    """The model beside real runs (the calibration's, or `measured`): median step time per worker count."""
    real = measured or cal["real"]
    rows = []
    for w in sorted(int(k) for k in real):
        r = real[str(w)]
        bg = r.get("background_cores", 0.0)
        pred = simulate_local(cal, w, background_cores=bg, seed=seed).median_ms
        rows.append({"workers": w, "real_ms": r["median_step_ms"], "model_ms": pred,
                     "error": (pred - r["median_step_ms"]) / r["median_step_ms"], "background_cores": bg})
    return rows


# -- the command --------------------------------------------------------------------------------------------

def _print_validation(rows, echo) -> None:
    echo("Model against real runs (asynchronous, 1 PS, digits MLP; median step time of a worker)")
    echo(f"{'workers':>8s} {'real (ms)':>10s} {'model (ms)':>11s} {'error':>8s} {'busy elsewhere':>15s}")
    for r in rows:
        echo(f"{r['workers']:>8d} {r['real_ms']:>10.2f} {r['model_ms']:>11.2f} {r['error'] * 100:>+7.1f}% "
             f"{r['background_cores']:>11.2f} cores")


def main(args) -> int:
    """`actorflow sim model`."""
    import logging

    from actorflow.sim.calibration import load_calibration, measure
    echo = print
    cal = load_calibration(args.calibration)
    fig = args.figure
    if fig in ("validate", "all"):
        measured = None
        if args.measure:
            logging.getLogger("actorflow").addHandler(logging.NullHandler())
            logging.getLogger("actorflow").propagate = False
            measured = measure(echo=echo)["real"]
        _print_validation(validate(cal, measured, args.seed), echo)
        echo(f"(calibration measured {cal['machine'].get('measured')} on {cal['machine']['cores']} cores; the model "
             "gets the cores other programs kept busy during each real run)")
        echo("")
    if fig in ("8", "all"):
        n = args.workers or 50
        rows = figure8(cal, n=n, steps=args.steps or 150, seed=args.seed)
        echo(f"Figure 8: synchronous training, N = {n} aggregated, b backups; "
             f"compute 1 s/step (sigma {FIG8_WORKLOAD['log_sigma']:g}), stragglers on "
             f"{FIG8_WORKLOAD['straggle_p'] * 100:g}% of steps +~{FIG8_WORKLOAD['straggle_ms'] / 1e3:g} s; "
             f"{FIG8_WORKLOAD['model_mb']:g} MB over 20 PS, links {FIG8_WORKLOAD['net_ms_per_mb']:g} ms/MB")
        echo(f"{'b':>3s} {'median step (s)':>16s} {'steps/s':>9s} {'speedup':>8s} {'normalized':>11s} {'dropped':>8s}")
        for r in rows:
            echo(f"{r['backup']:>3d} {r['median_step_s']:>16.3f} {r['steps_per_s']:>9.3f} {r['speedup']:>8.3f} "
                 f"{r['normalized_speedup']:>11.3f} {r['dropped']:>8d}")
        echo("")
    if fig in ("9", "all"):
        ps_counts = (1, 2, 4, 8, 16, 32)
        for sampled in (False, True):
            res = figure9(cal, ps_counts=ps_counts, steps_per_worker=args.steps or 20, sampled=sampled, seed=args.seed)
            echo(f"Figure 9: asynchronous training, PS tasks sharing a {'sampled' if sampled else 'full'} softmax "
                 f"({FIG9_WORKLOAD['ps_compute_ms'] / (20 if sampled else 1):g} ms of PS work per step): global steps/s")
            echo(f"{'PS tasks':>9s} " + " ".join(f"{f'{w} workers':>12s}" for w in res))
            for p in ps_counts:
                echo(f"{p:>9d} " + " ".join(f"{res[w][p]:>12.1f}" for w in res))
            echo("")
    if fig in ("scale", "all"):
        wl = Workload.from_calibration(cal, **FIG8_WORKLOAD)
        r = simulate_cluster(wl, 1000, 100, "sync", 50, steps=args.steps or 20, seed=args.seed)
        echo(f"Scale: 1,000 workers (950 aggregated), 100 PS tasks, {r.global_steps} steps: median step "
             f"{r.median_ms / 1e3:.3f} s; {r.events} events in {r.wall_s:.2f} s of wall time")
    return 0
