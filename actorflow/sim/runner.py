"""Runs a scenario: the real system, on a real LocalCluster, under the faults of its plan.

One client thread per worker drives a MonitoredTrainingSession (between-graph replication, with
recovery) on its worker's task; the harness thread fires the plan's triggers at their global steps
or times (kill -9 and restart, partitions and heals, dropped frames, latency windows), restarts a
task that crashed itself on purpose, notices one that crashed by accident, and enforces the
wall-clock limit. Afterwards it evaluates the model, checks the latest checkpoint, measures steps
lost and recovery times, checks the expectations, and writes:

    events.jsonl   every injected fault and every recovery and exit, in time order
    metrics.json   the measurements (and every step: worker, local step, global step, times, loss)
    report.md      which expectations passed or failed, and why
    timeline.png   step time and loss over time, faults marked (when matplotlib is installed)
    plan.json, scenario.json, faults.json, logs/, events/, control/, checkpoints/   the raw record

`replay(dir)` runs the recorded plan again (Plan.from_events): same triggers at the same steps,
same straggler delays at the same local steps.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from actorflow.sim import faults
from actorflow.sim.plan import INJECTED, Plan, fault_sequence
from actorflow.sim.scenario import Scenario, ScenarioError, load, parse

__all__ = ["RunResult", "Check", "run_scenario", "run", "replay", "load_events", "recovery_exercised"]

log = logging.getLogger(__name__)

_TICK_S = 0.01
_RUN_DIRS = ("events", "control", "logs", "checkpoints")
_RUN_FILES = ("events.jsonl", "metrics.json", "report.md", "timeline.png", "warnings.jsonl")
_STOP_TIMEOUT_S = 3.0        # a task with peers still connected takes 10 s to stop on SIGTERM
_WARMUP_STEPS = 3            # per worker, left out of step-time statistics (first runs compile and register)


@dataclass
class Check:
    """One expectation: its bound, what was observed, and whether it held."""
    name: str
    bound: object
    observed: object
    ok: bool
    note: str = ""

    @property
    def bound_text(self) -> str:
        return _fmt(self.bound)

    @property
    def observed_text(self) -> str:
        return _fmt(self.observed)


def _fmt(v) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    return "-" if v is None else str(v)


@dataclass
class RunResult:
    scenario: Scenario
    out_dir: str
    metrics: dict
    checks: list
    events: list
    passed: bool
    sequence: list = field(default_factory=list)     # fault_sequence(events)
    plot_note: str | None = None                      # why report.md has no timeline plot, if it has none


class _Warnings(logging.Handler):
    """Collects actorflow's warnings during a run (and keeps them off the terminal's progress bar)."""

    def __init__(self, limit=5000):
        super().__init__(logging.WARNING)
        self.records = []
        self.limit = limit

    def emit(self, record):
        if len(self.records) < self.limit:
            self.records.append({"t": record.created, "logger": record.name, "thread": record.threadName,
                                 "message": record.getMessage().splitlines()[0][:300]})


def _calibrated_step_ms() -> float:
    try:
        from actorflow.sim.calibration import load_calibration
        return float(load_calibration()["compute_ms"])
    except Exception:  # noqa: BLE001 - a missing calibration only changes what slowdown=2 means
        return 10.0


def _warm_kernels(wl, data) -> float:
    """Runs three training steps of the workload in a local session (the harness's process); the
    kernels it compiles land in numba's disk cache, which the task processes share. Returns the
    seconds it took (the cold start that a restarted task no longer pays)."""
    import actorflow as af
    from actorflow.sim.workload import build_replica
    t0 = time.perf_counter()
    x_tr, _, y_tr, _ = data
    try:
        rep = build_replica(dataclasses.replace(wl, mode="async", backup_workers=0), None, 0, 1)
        with rep.graph.as_default(), af.Session() as sess:
            sess.run(af.global_variables_initializer())
            for _ in range(3):
                sess.run(rep.train_op, {rep.x: x_tr[:wl.batch_size], rep.y: y_tr[:wl.batch_size]})
    except Exception as e:  # noqa: BLE001 - a warm-up that fails only leaves the cache cold
        log.warning("sim: kernel warm-up failed: %s", e)
    return time.perf_counter() - t0


def _parse_task(task: str):
    return task.split("/")[1][4:], int(task.split("/")[2][5:])


class _Run:
    def __init__(self, sc: Scenario, plan: Plan, out_dir: str, progress: bool):
        self.sc = sc
        self.plan = plan
        self.out = out_dir
        self.progress = progress
        self.wl = sc.workload
        # A reused output directory must not leak an earlier run's checkpoints (the chief would
        # restore them), commands, markers or events into this one.
        for d in _RUN_DIRS:
            shutil.rmtree(os.path.join(out_dir, d), ignore_errors=True)
            os.makedirs(os.path.join(out_dir, d))
        for name in _RUN_FILES:
            try:
                os.unlink(os.path.join(out_dir, name))
            except FileNotFoundError:
                pass
        self.ckpt_dir = os.path.join(out_dir, "checkpoints") if self.wl.checkpoint_every else None
        self.hlog = faults.FaultLog(os.path.join(out_dir, "events", "harness-main.jsonl"), "harness")
        self.lock = threading.Lock()
        self.gs_max = 0
        self.steps: list = []                 # (worker, local, gs, t0, t1, loss, status, dropped)
        self.stop = threading.Event()
        self.client_errors: dict = {}
        self.killed: dict = {}                # task -> pid the harness killed (expected exits)
        self.restarting: set = set()
        self.timed: list = []                 # (time, fn) actions: heals, restarts
        self.pending = list(plan.triggers)    # triggers not fired yet
        self.tlock = threading.RLock()        # pending, timed: clients fire step triggers too
        self.threads: list = []
        self.t_start = None
        self.hung = False

    # -- the clients ----------------------------------------------------------------------------------------
    def _client(self, w: int, data) -> None:
        import actorflow as af
        from actorflow.sim.workload import build_replica
        task = f"/job:worker/task:{w}"
        faults.ROLE.set(task)
        x_tr, _, y_tr, _ = data
        try:
            rep = build_replica(self.wl, self.cluster.spec.as_dict(), w, self.sc.workers, seed=self.sc.seed)
            rng = np.random.default_rng([self.wl.data_seed, w])
            with rep.graph.as_default():
                hooks = [af.train.StopAtStepHook(last_step=self.wl.steps)] + rep.hooks
                chief = w == 0
                kw = {}
                if chief and self.ckpt_dir:
                    kw = dict(checkpoint_dir=self.ckpt_dir, save_checkpoint_steps=self.wl.checkpoint_every,
                              save_checkpoint_secs=None)
                fetches = [rep.train_op, rep.loss, rep.global_step]
                if rep.status is not None:
                    fetches += [rep.status, rep.dropped]
                with af.train.MonitoredTrainingSession(master=self.cluster.task_target("worker", w), is_chief=chief,
                                                       hooks=hooks, max_wait_secs=self.wl.max_wait_s,
                                                       log_step_count_steps=0, **kw) as sess:
                    local = 0
                    recoveries = 0
                    while not sess.should_stop() and not self.stop.is_set():
                        idx = rng.integers(0, len(x_tr), self.wl.batch_size)
                        t0 = time.time()
                        out = sess.run(fetches, {rep.x: x_tr[idx], rep.y: y_tr[idx], rep.step: local})
                        t1 = time.time()
                        gs = int(out[2])
                        status = int(out[3]) if len(out) > 3 else None
                        dropped = int(out[4]) if len(out) > 4 else None
                        with self.lock:
                            self.steps.append((w, local, gs, t0, t1, float(out[1]), status, dropped))
                            self.gs_max = max(self.gs_max, gs)
                        # Fired here, as soon as a step reaches it, not at the harness's next tick.
                        self._poll_triggers()
                        if sess.recoveries != recoveries:
                            self.hlog.emit("recovery", task=task, worker=w, recoveries=sess.recoveries - recoveries,
                                           local_step=local, step=gs, duration_s=round(t1 - t0, 3))
                            recoveries = sess.recoveries
                        local += 1
                        if rep.sync_opt is not None and int(out[0]) >= self.wl.steps:
                            # The train op gives the step this worker computes next (the
                            # documented sync loop: `while step < last_step`). StopAtStepHook
                            # guesses it from the global step read when the run began, which a
                            # straggler's run outlives: it would compute, and have admitted, a
                            # gradient for a step after the last, which is never applied.
                            break
        except BaseException as e:  # noqa: BLE001 - a client that dies is a finding, recorded
            self.client_errors[w] = f"{type(e).__name__}: {getattr(e, 'message', str(e)).splitlines()[0][:300]}"
            self.hlog.emit("client_failed", task=task, worker=w, error=self.client_errors[w])

    # -- the harness ------------------------------------------------------------------------------------------
    def _command(self, tasks, cmd: dict) -> None:
        for t in tasks:
            with open(os.path.join(self.out, "control", faults.task_slug(t) + ".jsonl"), "a") as f:
                f.write(json.dumps(cmd) + "\n")

    def _poll_triggers(self) -> None:
        now = time.time()
        with self.tlock:
            for tr in list(self.pending):
                if (tr.at_step is not None and self.gs_max >= tr.at_step) or \
                        (tr.at_step is None and tr.at_time_s is not None and now - self.t_start >= tr.at_time_s):
                    self.pending.remove(tr)
                    self._fire(tr, now)

    def _fire(self, tr, now: float) -> None:
        p = tr.params
        base = {"fault": tr.fault, "at_step": tr.at_step, "at_time_s": tr.at_time_s, "step": self.gs_max,
                "elapsed_s": round(now - self.t_start, 3)}
        if tr.action == "kill":
            job, idx = _parse_task(p["task"])
            self.killed[p["task"]] = self.cluster.procs[(job, idx)].pid
            pid = self.cluster.kill(job, idx, p.get("signal", 9))
            self.hlog.emit("kill", task=p["task"], pid=pid, signal=p.get("signal", 9),
                           restart_after_s=p.get("restart_after_s"), **base)
            if p.get("restart_after_s") is not None:
                self._schedule_restart(p["task"], float(p["restart_after_s"]), tr.fault)
        elif tr.action == "partition":
            cmd = {"op": "partition", "fault": tr.fault, "a": p["a"], "b": p["b"], "fail_after_s": p.get("fail_after_s")}
            self._command(p["a"] + p["b"], cmd)
            self.hlog.emit("partition", task=None, a=p["a"], b=p["b"], duration_s=p.get("duration_s"),
                           fail_after_s=p.get("fail_after_s"), **base)
            if p.get("duration_s") is not None:
                def heal(tr=tr):
                    self._command(p["a"] + p["b"], {"op": "heal", "fault": tr.fault})
                    self.hlog.emit("heal", task=None, fault=tr.fault, step=self.gs_max,
                                   elapsed_s=round(time.time() - self.t_start, 3))
                with self.tlock:
                    self.timed.append((now + float(p["duration_s"]), heal))
        elif tr.action == "drop":
            self._command([p["task"]], {"op": "drop", "fault": tr.fault, **p})
            self.hlog.emit("drop", task=p["task"], peer=p.get("peer"), mode=p["mode"], rto_ms=p["rto_ms"],
                           episode=p["episode"], **base)
        elif tr.action in ("on", "off"):
            tasks = next(f["tasks"] for f in self.plan.task_faults if f["id"] == tr.fault)
            self._command(tasks, {"op": tr.action, "fault": tr.fault})
            self.hlog.emit("condition_" + tr.action, task=None, **base)

    def _schedule_restart(self, task: str, delay: float, fault) -> None:
        self.restarting.add(task)

        def restart():
            def go():
                job, idx = _parse_task(task)
                t0 = time.time()
                self.hlog.emit("restart", task=task, fault=fault, step=self.gs_max,
                               elapsed_s=round(t0 - self.t_start, 3))
                try:
                    self.cluster.restart_task(job, idx)
                    self.hlog.emit("restarted", task=task, fault=fault, pid=self.cluster.procs[(job, idx)].pid,
                                   startup_s=round(time.time() - t0, 3))
                except Exception as e:  # noqa: BLE001
                    self.hlog.emit("restart_failed", task=task, fault=fault, error=str(e)[:300])
                finally:
                    self.restarting.discard(task)
            th = threading.Thread(target=go, name=f"sim-restart-{faults.task_slug(task)}", daemon=True)
            self.threads.append(th)
            th.start()
        with self.tlock:
            self.timed.append((time.time() + delay, restart))

    def _watch_processes(self) -> None:
        for (job, idx), p in list(self.cluster.procs.items()):
            task = f"/job:{job}/task:{idx}"
            if task in self.restarting or p.poll() is None:
                continue
            if self.killed.get(task) == p.pid:
                continue
            crashed_on_purpose = task in self.plan.crash_restarts
            self.hlog.emit("task_exited", task=task, pid=p.pid, code=p.returncode, expected=crashed_on_purpose,
                           step=self.gs_max, elapsed_s=round(time.time() - self.t_start, 3))
            self.killed[task] = p.pid
            if crashed_on_purpose:
                delay = self.plan.crash_restarts[task]
                if delay is not None:
                    fault = next((f["id"] for f in self.plan.task_faults
                                  if f["kind"] == "crash_during_save" and task in f["tasks"]), None)
                    self._schedule_restart(task, float(delay), fault)
            else:
                self.hlog.emit("unexpected_exit", task=task, pid=p.pid, code=p.returncode)
                self._schedule_restart(task, 0.5, None)

    def execute(self) -> dict:
        from actorflow.cluster.local import LocalCluster
        from actorflow.sim.workload import MARKER, STEP_FEED, load_digits_data
        sc, wl = self.sc, self.wl
        data = load_digits_data(wl.data_seed)
        # Before the clock: compile the workload's kernels once, so that numba's on-disk cache is
        # warm and a task restarted mid-run loads them instead of compiling them (seconds, cold).
        self.warmup_s = _warm_kernels(wl, data)
        config_path = os.path.join(self.out, "faults.json")
        base_ms = _calibrated_step_ms()
        config = self.plan.task_config({}, os.path.join(self.out, "events"), os.path.join(self.out, "control"),
                                       base_ms, MARKER, STEP_FEED)
        with open(config_path, "w") as f:
            json.dump(config, f, indent=1)
        env = {faults.ENV: config_path} if self.plan.task_faults else {}
        wlog = _Warnings()
        af_log = logging.getLogger("actorflow")
        af_log.addHandler(wlog)
        bar = None
        t_wall0 = time.time()
        self.cluster = LocalCluster(ps=sc.ps, workers=sc.workers, restart="never", env=env,
                                    log_dir=os.path.join(self.out, "logs"))
        try:
            self.cluster.start()
            addresses = {f"/job:{j}/task:{i}": self.cluster.spec.task_address(j, i) for j, i in self.cluster.spec.tasks()}
            roles = [f"/job:worker/task:{w}" for w in range(sc.workers)]
            faults.install(dict(config, tasks=addresses), None, roles)
            if self.progress:
                import sys

                from tqdm import tqdm
                bar = tqdm(total=wl.steps, desc=sc.name, unit="step", file=sys.stderr, dynamic_ncols=True)
            self.t_start = time.time()
            self.hlog.emit("run_start", seed=self.plan.seed, replay_of=self.plan.replay_of, short=sc.short,
                           addresses=addresses)
            clients = [threading.Thread(target=self._client, args=(w, data), name=f"sim-client-{w}", daemon=True)
                       for w in range(sc.workers)]
            for c in clients:
                c.start()
            limit = float(sc.expect.get("wall_clock_max_s", 600))
            deadline = self.t_start + limit
            while any(c.is_alive() for c in clients):
                now = time.time()
                if now > deadline:
                    self.hung = True
                    self.hlog.emit("wall_clock_limit", step=self.gs_max, limit_s=limit)
                    break
                self._poll_triggers()
                with self.tlock:
                    due = [x for x in self.timed if x[0] <= now]
                    for item in due:
                        self.timed.remove(item)
                for item in due:
                    item[1]()
                self._watch_processes()
                if bar is not None and min(self.gs_max, wl.steps) != bar.n:
                    bar.set_postfix(faults=len(self.plan.triggers) - len(self.pending), refresh=False)
                    bar.update(min(self.gs_max, wl.steps) - bar.n)
                time.sleep(_TICK_S)
            self.t_train_end = time.time()
            # Actions still due (a heal, a restart) run now, so the cluster is whole for evaluation.
            with self.tlock:
                late, self.timed = sorted(self.timed, key=lambda x: x[0]), []
            for _, fn in late:
                fn()
            if self.hung:
                self.stop.set()
                for c in clients:
                    c.join(10.0)
            for th in self.threads:
                th.join(60.0)
            faults.uninstall()
            # Evaluated after a hang too: the variables are on the PS, whatever a client waits for.
            final = self._evaluate(data)
            if bar is not None:
                # The bar ends at the global step read after training (a client's last fetch may have
                # raced its own increment and read one less), so a finished run shows steps/steps.
                done = max(self.gs_max, int(final.get("final_step", 0)))
                bar.update(max(0, min(done, wl.steps) - bar.n))
                bar.close()
                bar = None
            final["unfired_triggers"] = [dataclasses.asdict(t) for t in self.pending]
        finally:
            if bar is not None:
                bar.close()
            faults.uninstall()
            # The state is read and checked by now: a task that does not stop promptly is killed.
            self.cluster.stop(timeout=_STOP_TIMEOUT_S)
            af_log.removeHandler(wlog)
            self.hlog.emit("run_end", wall_s=round(time.time() - t_wall0, 3))
            self.hlog.close()
        final["wall_s"] = round(time.time() - t_wall0, 3)
        final["train_s"] = round(self.t_train_end - self.t_start, 3)
        final["warnings"] = len(wlog.records)
        with open(os.path.join(self.out, "warnings.jsonl"), "w") as f:
            for r in wlog.records:
                f.write(json.dumps(r) + "\n")
        return final

    def _evaluate(self, data) -> dict:
        """Test accuracy and loss of the trained variables on the PS, and whether the latest
        checkpoint restores cleanly (into a process-local session) and is recent."""
        import actorflow as af
        from actorflow.sim.workload import build_replica
        _, x_te, _, y_te = data
        out: dict = {}
        sync = self.wl.mode == "sync"
        # In sync mode the graph includes the SyncReplicasOptimizer, for its drop counter on the PS.
        rep = build_replica(self.wl, self.cluster.spec.as_dict(), 0, self.sc.workers, seed=self.sc.seed, train=sync)
        try:
            with rep.graph.as_default(), af.Session(self.cluster.target) as sess:
                acc, loss, gs = sess.run([rep.accuracy, rep.loss, rep.global_step], {rep.x: x_te, rep.y: y_te},
                                         timeout=30.0)
                if sync:
                    out["gradients_dropped_counter"] = int(sess.run(rep.dropped, timeout=30.0))
            out.update(final_accuracy=float(acc), final_loss=float(loss), final_step=int(gs))
        except Exception as e:  # noqa: BLE001
            out["evaluation_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        if self.ckpt_dir:
            out.update(self._check_checkpoint())
        return out

    def _check_checkpoint(self) -> dict:
        import actorflow as af
        from actorflow.sim.workload import build_replica
        from actorflow.train.saver import latest_checkpoint
        prefix = latest_checkpoint(self.ckpt_dir)
        res = {"latest_checkpoint": os.path.basename(prefix) if prefix else None}
        if prefix is None:
            res["checkpoint_error"] = "no good checkpoint"
            return res
        try:
            rep = build_replica(self.wl, None, 0, self.sc.workers, seed=self.sc.seed, train=False)
            with rep.graph.as_default():
                saver = af.train.Saver()
                with af.Session() as sess:
                    saver.restore(sess, prefix)
                    res["checkpoint_step"] = int(sess.run(rep.global_step))
        except Exception as e:  # noqa: BLE001
            res["checkpoint_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        return res


def load_events(run_dir: str) -> list:
    """A run's events.jsonl."""
    with open(os.path.join(run_dir, "events.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def _collect_events(out_dir: str, steps: list) -> list:
    evs = []
    d = os.path.join(out_dir, "events")
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name)) as f:
            for line in f:
                if line.strip():
                    try:
                        evs.append(json.loads(line))
                    except ValueError:
                        pass        # a line cut by kill -9
    evs.sort(key=lambda e: e["t"])
    # The global step each event happened at: the highest step completed before it.
    done = sorted((s[4], s[2]) for s in steps)
    times = np.array([t for t, _ in done]) if done else np.zeros(0)
    best = np.maximum.accumulate(np.array([g for _, g in done])) if done else np.zeros(0)
    for e in evs:
        if "step" not in e:
            i = int(np.searchsorted(times, e["t"], side="right")) - 1
            e["step"] = int(best[i]) if i >= 0 else 0
    return evs


def _disruptions(sc: Scenario, events: list) -> list:
    """(fault, kind, start time, end time, affected workers) of the faults that interrupt training."""
    workers = list(range(sc.workers))
    out = []
    ends = {}
    # A killed task's fault ends when it is up again (`restarted`), not when its restart began: its
    # start-up (a new process, imports, kernels from numba's cache, warmed before the clock started)
    # depends on the machine's load and is measured apart (`restart_startup_s`), so recovery times
    # and their bounds count what actorflow's recovery itself takes.
    for e in events:
        if e["kind"] == "restart":
            ends.setdefault((e.get("fault"), e["task"]), e["t"])
        elif e["kind"] == "restarted":
            ends[(e.get("fault"), e["task"])] = e["t"]
        elif e["kind"] == "heal":
            ends[(e.get("fault"), None)] = e["t"]
    for e in events:
        k = e["kind"]
        if k in ("kill", "crash_during_save"):
            job, idx = _parse_task(e["task"])
            affected = workers if job == "ps" else [idx]
            end = ends.get((e.get("fault"), e["task"]), e["t"])
            out.append((e.get("fault"), k, e["t"], end, affected))
        elif k == "partition":
            tasks = e["a"] + e["b"]
            ws = sorted({_parse_task(t)[1] for t in tasks if t.startswith("/job:worker/")})
            end = ends.get((e.get("fault"), None), e["t"])
            out.append((e.get("fault"), k, e["t"], end, ws or workers))
    return out


def _metrics(sc: Scenario, run: _Run, final: dict, events: list) -> dict:
    steps = run.steps
    m: dict = dict(final)
    m["scenario"] = sc.name
    m["seed"] = run.plan.seed
    m["short"] = sc.short
    m["replay_of"] = run.plan.replay_of
    # A run reads the global step as it starts: the last one reached is the evaluation's.
    m["global_step"] = m.get("final_step", max((s[2] + 1 for s in steps), default=0))
    m["runs"] = len(steps)
    durations = [s[4] - s[3] for s in steps if s[1] >= _WARMUP_STEPS]
    m["median_step_ms"] = float(np.median(durations) * 1e3) if durations else None
    m["p90_step_ms"] = float(np.percentile(durations, 90) * 1e3) if durations else None
    m["mean_step_ms"] = float(np.mean(durations) * 1e3) if durations else None
    m["median_global_step_ms"] = _global_step_ms(steps)
    m["steps_per_s"] = m["global_step"] / m["train_s"] if m.get("train_s") else None
    # A recovery in a client's first run happened while the cluster was still starting (a heartbeat
    # that timed out while a task compiled its kernels): no fault caused it. Counted apart.
    recs = [e for e in events if e["kind"] == "recovery"]
    m["recoveries"] = sum(e.get("recoveries", 1) for e in recs if e.get("local_step", 1) > 0)
    m["startup_recoveries"] = sum(e.get("recoveries", 1) for e in recs if e.get("local_step", 1) == 0)
    m["injected"] = sum(1 for e in events if e["kind"] in INJECTED)
    m["planned_triggers"] = len(run.plan.triggers)
    m["seam_faults"] = sum(1 for f in run.plan.task_faults if f["kind"] in ("straggler", "crash_during_save"))
    m["unexpected_exits"] = [e["task"] for e in events if e["kind"] == "unexpected_exit"]
    # A restarted task's start-up (process, imports, kernels from the warm cache): part of every
    # recovery time below, measured rather than assumed.
    m["warmup_s"] = round(getattr(run, "warmup_s", 0.0), 3)
    m["restart_startup_s"] = max((e.get("startup_s", 0.0) for e in events if e["kind"] == "restarted"), default=None)
    m["client_errors"] = {str(k): v for k, v in run.client_errors.items()}
    m["hung"] = run.hung
    by_worker: dict = {}
    for s in steps:
        by_worker.setdefault(s[0], []).append(s)
    faults_m = []
    saved = _completed_checkpoints(getattr(run, "ckpt_dir", None))
    interval = sc.workload.checkpoint_every or 0
    for fid, kind, t_start, t_end, affected in _disruptions(sc, events):
        before = [s[2] for s in steps if s[4] <= t_start]
        # Steps begun after the fault: one in flight across it reports the global step it read before
        # (a worker slowed down on a loaded machine read step 408 and finished after others reached
        # 421: 13 steps "lost" with nothing rolled back). Without a restore, every read after the
        # fault sees at least what every read before it saw.
        after = [s[2] for s in steps if s[3] >= t_start]
        lost = max(0, max(before, default=0) - min(after, default=max(before, default=0)))
        # A restore can go back no further than the newest checkpoint completed before the fault. When
        # that one is more than an interval behind the last step (the chief saved late, or its save
        # was still being written: on a loaded machine a save can take as long as many steps of the
        # other workers), the steps beyond the interval were lost to the save's lateness, not to the
        # recovery; max_steps_lost bounds what is left (a restore of any older checkpoint still fails).
        newest = max((st for st, t in saved if t <= t_start), default=None)
        late = max(0, max(before, default=0) - newest - interval) if newest is not None and interval else 0
        rec = []
        for w in affected:
            nxt = [s[4] for s in by_worker.get(w, []) if s[4] > t_end]
            rec.append(min(nxt) - t_end if nxt else None)
        recovery = None if any(r is None for r in rec) or not rec else max(rec)
        faults_m.append({"fault": fid, "kind": kind, "at_s": round(t_start - run.t_start, 3),
                         "ended_s": round(t_end - run.t_start, 3), "affected_workers": affected,
                         "steps_lost": lost, "recovery_s": None if recovery is None else round(recovery, 3),
                         "checkpoint_step": newest, "late_checkpoint_steps": late})
    m["disruptions"] = faults_m
    m["max_steps_lost"] = max((f["steps_lost"] for f in faults_m), default=0)
    m["max_steps_lost_beyond_late_saves"] = max((f["steps_lost"] - f["late_checkpoint_steps"] for f in faults_m),
                                                default=0)
    recs = [f["recovery_s"] for f in faults_m]
    m["max_recovery_s"] = None if any(r is None for r in recs) else max(recs, default=0.0)
    # Sync: every gradient a worker contributed was applied or reported dropped.
    if sc.workload.mode == "sync" and steps:
        statuses = [s[6] for s in steps if s[6] is not None]
        m["gradients_accepted"] = sum(1 for s in statuses if s == 0)
        m["gradients_dropped_seen"] = sum(1 for s in statuses if s != 0)
        m.setdefault("gradients_dropped_counter", max((s[7] for s in steps if s[7] is not None), default=0))
    m["steps"] = [[s[0], s[1], s[2], round(s[3] - run.t_start, 4), round(s[4] - run.t_start, 4), s[5]]
                  + ([s[6]] if s[6] is not None else []) for s in sorted(steps, key=lambda s: s[4])]
    return m


def _completed_checkpoints(ckpt_dir: str | None) -> list:
    """(global step, completion time) of the checkpoints the state file in `ckpt_dir` still lists (the
    Saver's time.time() at each save's end, the clock of the events); [] when there is none."""
    if not ckpt_dir or not os.path.isdir(ckpt_dir):
        return []
    from actorflow.train.saver import get_checkpoint_state
    try:
        st = get_checkpoint_state(ckpt_dir)
    except Exception:  # noqa: BLE001 - a metric: an unreadable state file only means no adjustment
        log.debug("no checkpoint state in %s", ckpt_dir, exc_info=True)
        return []
    if st is None:
        return []
    out = []
    for path, t in zip(st.all_model_checkpoint_paths, st.all_model_checkpoint_timestamps or ()):
        tail = str(path).rsplit("-", 1)[-1]
        if tail.isdigit():
            out.append((int(tail), float(t)))
    return out


def _global_step_ms(steps) -> float | None:
    """The job's step time: the median interval between the completions of successive global steps
    (global step k completes when the first run that read k returns; runs read the step at their
    start). Workers' own run times hide a backup worker's effect: the straggler's run is long."""
    first: dict = {}
    for s in steps:
        first[s[2]] = min(first.get(s[2], s[4]), s[4])
    ks = sorted(first)
    gaps = [first[b] - first[a] for a, b in zip(ks, ks[1:]) if b == a + 1 and a >= _WARMUP_STEPS]
    return float(np.median(gaps) * 1e3) if gaps else None


def _nothing_lost(sc: Scenario, m: dict, process_faults: bool) -> tuple:
    why = []
    if m.get("hung"):
        why.append("the run hit its wall-clock limit")
    if m.get("final_step", m["global_step"]) < sc.workload.steps:
        why.append(f"training stopped at global step {m.get('final_step', m['global_step'])} < {sc.workload.steps}")
    if m["client_errors"]:
        why.append(f"client(s) failed: {m['client_errors']}")
    if m["unexpected_exits"]:
        why.append(f"task(s) exited unexpectedly: {m['unexpected_exits']}")
    if "evaluation_error" in m:
        why.append(m["evaluation_error"])
    if sc.workload.checkpoint_every:
        if "checkpoint_error" in m:
            why.append(f"latest checkpoint: {m['checkpoint_error']}")
        elif m.get("checkpoint_step", -1) < m.get("final_step", 0) - sc.workers:
            why.append(f"latest good checkpoint is at step {m.get('checkpoint_step')}, the run ended at "
                       f"{m.get('final_step')}")
    if sc.workload.mode == "sync" and not process_faults and "gradients_accepted" in m:
        n = sc.workers - sc.workload.backup_workers
        steps = m.get("final_step", m["global_step"])
        if m["gradients_accepted"] != n * steps:
            why.append(f"{m['gradients_accepted']} gradients accepted for {steps} steps of {n}")
        if m["gradients_dropped_counter"] != m["gradients_dropped_seen"]:
            why.append(f"workers saw {m['gradients_dropped_seen']} gradients refused, the PS counted "
                       f"{m['gradients_dropped_counter']} dropped")
    return not why, "; ".join(why)


def check_expectations(sc: Scenario, m: dict, events: list) -> list:
    """The scenario's [expect] table against the metrics, plus the implicit ones (no hang, no
    client lost, no task crashing by itself)."""
    e = sc.expect
    out = []

    def bound(name, observed, ok, note=""):
        out.append(Check(name, e[name], observed, bool(ok), note))

    process_faults = any(ev["kind"] in ("kill", "crash_during_save", "unexpected_exit") for ev in events)
    out.append(Check("no_hang", f"{e.get('wall_clock_max_s', 600)} s", m.get("train_s"), not m["hung"],
                     "hit the wall-clock limit" if m["hung"] else ""))
    out.append(Check("clients_survived", 0, len(m["client_errors"]), not m["client_errors"],
                     "; ".join(f"worker {k}: {v}" for k, v in m["client_errors"].items())))
    out.append(Check("no_unexpected_exits", 0, len(m["unexpected_exits"]), not m["unexpected_exits"],
                     ", ".join(m["unexpected_exits"])))
    if "final_accuracy_min" in e:
        acc = m.get("final_accuracy")
        bound("final_accuracy_min", acc, acc is not None and acc >= e["final_accuracy_min"])
    if "final_loss_max" in e:
        loss = m.get("final_loss")
        bound("final_loss_max", loss, loss is not None and loss <= e["final_loss_max"])
    if "max_steps_lost" in e:
        # Beyond what a late save already cost (see _metrics): a restore from the newest completed checkpoint.
        beyond = m.get("max_steps_lost_beyond_late_saves", m["max_steps_lost"])
        bound("max_steps_lost", m["max_steps_lost"], beyond <= e["max_steps_lost"],
              f"({m['max_steps_lost'] - beyond} of them after a late checkpoint)" if beyond != m["max_steps_lost"] else "")
    if "max_recovery_s" in e:
        r = m["max_recovery_s"]
        cold = m.get("restart_startup_s")
        bound("max_recovery_s", r, r is not None and r <= e["max_recovery_s"],
              ("" if r is not None else "an affected worker never completed a step after the fault") +
              (f" (from the restarted task up; its start-up, up to {cold:.2f} s, measured apart)" if cold else ""))
    if "nothing_lost" in e:
        ok, why = _nothing_lost(sc, m, process_faults)
        bound("nothing_lost", ok, ok == bool(e["nothing_lost"]), why)
    if "min_recoveries" in e:
        bound("min_recoveries", m["recoveries"], m["recoveries"] >= e["min_recoveries"])
    if "max_recoveries" in e:
        bound("max_recoveries", m["recoveries"], m["recoveries"] <= e["max_recoveries"])
    if "median_step_ms_max" in e:
        v = m["median_step_ms"]
        bound("median_step_ms_max", v, v is not None and v <= e["median_step_ms_max"])
    if "median_step_ms_min" in e:
        v = m["median_step_ms"]
        bound("median_step_ms_min", v, v is not None and v >= e["median_step_ms_min"])
    if "median_global_step_ms_max" in e:
        v = m["median_global_step_ms"]
        bound("median_global_step_ms_max", v, v is not None and v <= e["median_global_step_ms_max"])
    if "median_global_step_ms_min" in e:
        v = m["median_global_step_ms"]
        bound("median_global_step_ms_min", v, v is not None and v >= e["median_global_step_ms_min"])
    if "max_startup_recoveries" in e:
        bound("max_startup_recoveries", m["startup_recoveries"], m["startup_recoveries"] <= e["max_startup_recoveries"])
    if "min_injected" in e:
        # A plan that drew fewer timed faults than the bound (drops drawn per step: a binomial count)
        # must fire every one of them instead; the seed, not the injectors, was short of faults.
        want, planned = e["min_injected"], m.get("planned_triggers")
        drew_fewer = planned is not None and not m.get("seam_faults") and planned < want
        need = planned if drew_fewer else want
        out.append(Check("min_injected", need, m["injected"], m["injected"] >= need,
                         f"the seed's plan drew {planned} faults (fewer than {want}): every one must fire"
                         if drew_fewer else ""))
    return out


def recovery_exercised(steps, events) -> "Check | None":
    """Whether every fault's recovery was exercised: each task killed or crashed with a restart due
    came back (a `restarted` event), and took part in a step after it did (a restarted worker's
    client completed a run; a restarted parameter server served one). None when no task was killed.
    Both modes: `steps` are (worker, local step, global step, t0, t1, ...) on the events' clock."""
    if not any(e["kind"] in ("kill", "crash_during_save") for e in events):
        return None
    unexercised = []
    for e in events:
        if e["kind"] != "restarted":
            continue
        t, task = e["t"], e["task"]
        if task.startswith("/job:worker/"):
            idx = int(task.rsplit(":", 1)[1])
            if not any(s[0] == idx and s[4] > t for s in steps):
                unexercised.append(task)
        elif not any(s[4] > t for s in steps):
            unexercised.append(task)
    never = [e["task"] for e in events if e["kind"] in ("kill", "crash_during_save")
             and e.get("restart_after_s", 0) is not None
             and not any(r["kind"] == "restarted" and r["task"] == e["task"] and r["t"] >= e["t"] for r in events)]
    ok = not unexercised and not never
    note = "; ".join(x for x in (("no step after the restart of " + ", ".join(unexercised)) if unexercised else "",
                                 ("never restarted: " + ", ".join(never)) if never else "") if x)
    return Check("recovery_exercised", "every restarted task steps again", ok, ok, note)


def run(sc: Scenario, plan: Plan | None = None, out_dir: str | None = None, progress: bool = True) -> RunResult:
    """Runs `sc` under `plan` (default: drawn from the scenario's seed) and writes the outputs."""
    from actorflow.sim.report import write_report
    sim_only = [f"faults[{i}].{k}" for i, f in enumerate(sc.faults) for k in ("power_loss", "stage")
                if f.get(k) not in (None, False, "before")]
    if sim_only:
        raise ScenarioError(f"{sc.path or sc.name}: {', '.join(sim_only)}: a power loss and a crash inside the "
                            "shard writer exist in the simulated world only; run it with --deterministic "
                            "(or mode = \"deterministic\")")
    plan = plan or Plan.from_scenario(sc)
    if out_dir is None:
        out_dir = os.path.join("runs", f"{sc.name}-{plan.seed}-{time.strftime('%Y%m%d-%H%M%S')}")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "scenario.json"), "w") as f:
        json.dump({"doc": sc.doc, "path": sc.path, "short": sc.short, "seed": plan.seed}, f, indent=1, default=str)
    with open(os.path.join(out_dir, "plan.json"), "w") as f:
        json.dump({"seed": plan.seed, "replay_of": plan.replay_of,
                   "triggers": [dataclasses.asdict(t) for t in plan.triggers], "task_faults": plan.task_faults,
                   "crash_restarts": plan.crash_restarts}, f, indent=1)
    r = _Run(sc, plan, out_dir, progress)
    final = r.execute()
    events = _collect_events(out_dir, r.steps)
    with open(os.path.join(out_dir, "events.jsonl"), "w") as f:
        for e in events:
            f.write(json.dumps(e, sort_keys=True) + "\n")
    m = _metrics(sc, r, final, events)
    checks = check_expectations(sc, m, events)
    exercised = recovery_exercised(r.steps, events)
    if exercised is not None:
        checks.append(exercised)
    passed = all(c.ok for c in checks)
    m["passed"] = passed
    m["checks"] = [dataclasses.asdict(c) for c in checks]
    seq = fault_sequence(events)
    if plan.replay_of:
        try:
            recorded = fault_sequence(load_events(plan.replay_of))
            m["replay_matches"] = seq == recorded
            m["replay_recorded_faults"] = len(recorded)
        except OSError:
            pass
    with open(os.path.join(out_dir, "metrics.json"), "w") as f:
        json.dump(m, f, indent=1, default=str)
    res = RunResult(sc, out_dir, m, checks, events, passed, seq)
    res.plot_note = write_report(res)
    return res


def run_scenario(path: str, seed: int | None = None, out_dir: str | None = None, short: bool = False,
                 progress: bool = True) -> RunResult:
    """Loads the scenario file and runs it (`actorflow sim run`)."""
    sc = load(path, short=short)
    return run(sc, Plan.from_scenario(sc, seed), out_dir, progress)


def replay(run_dir: str, out_dir: str | None = None, progress: bool = True) -> RunResult:
    """Runs a recorded run's fault timeline again (`actorflow sim replay`): its triggers at the
    recorded steps and its straggler delays, instead of new draws."""
    with open(os.path.join(run_dir, "scenario.json")) as f:
        rec = json.load(f)
    sc = parse(rec["doc"], rec.get("path"), short=False)
    sc = dataclasses.replace(sc, short=rec.get("short", False))
    plan = Plan.from_events(sc, rec["seed"], load_events(run_dir), replay_of=os.path.abspath(run_dir))
    if out_dir is None:
        out_dir = os.path.join(run_dir, f"replay-{time.strftime('%Y%m%d-%H%M%S')}")
    if os.path.abspath(out_dir) == os.path.abspath(run_dir):
        raise ValueError(f"replay: the output directory must not be the recorded run's own ({run_dir})")
    return run(sc, plan, out_dir, progress)
