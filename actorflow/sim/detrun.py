"""Scenarios in the simulated world (`actorflow sim run --deterministic`, `mode = "deterministic"`).

The same scenario files and plans as real-process mode (actorflow/sim/runner.py), run by the real
code in one process on a virtual-time loop (actorflow/sim/world.py). One seed gives one history:
events.jsonl is byte-identical between two runs with one seed (in one Python, with the same
PYTHONHASHSEED, which the CLI pins), and `replay` of a recorded run reproduces it, failures
included. Times in the record are virtual seconds.

Besides the scenario's own expectations, every run checks these properties:

- `no_hang`: the clients finished before the virtual time limit, and the loop never stalled (a
  deadlock: nothing ready, no timer, someone waiting);
- `exactly_once`: every gradient a client saw accepted was applied, and none twice: the global step
  is at least the accepted runs and at most those plus the runs that failed (a failed run may have
  been applied before its reply was lost); checked when no parameter server lost its state;
- `progress`: training reached its last step within `progress_bound_s` of the last fault's end;
- `checkpoint_safe`: the latest checkpoint is complete and restores; every restore read the index
  of a save that had completed (its shards' checksums are verified by the restore itself), so the
  restored state is a durably saved one; and right after each power loss the newest completed save
  is intact and is the latest checkpoint (actorflow/sim/disk.py keeps this ledger);
- `recovery_exercised`: every killed or crashed task that was restarted took part in a step after
  it came back (a restarted worker's client completed a step; a restarted PS served one);
- `no_leaks`: no wall-clock read, thread or socket from the simulated code.

`sweep` runs many seeds and reports the failing ones with their replay commands; `shrink` removes
faults from a failing run's plan while it still fails, down to a minimal plan.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
from dataclasses import dataclass

import numpy as np

from actorflow.sim.plan import Plan, Trigger, fault_sequence
from actorflow.sim.runner import Check, RunResult, _metrics, check_expectations, load_events, recovery_exercised
from actorflow.sim.scenario import Scenario, load, parse

__all__ = ["run_deterministic", "run_scenario_deterministic", "replay_deterministic", "sweep", "shrink",
           "PROGRESS_BOUND_S"]

PROGRESS_BOUND_S = 30.0       # virtual seconds from the last fault's end to the last step, at most


@dataclass
class _Record:
    """What runner._metrics reads of a run."""
    plan: Plan
    steps: list
    client_errors: dict
    hung: bool
    t_start: float = 0.0


class _Harness:
    def __init__(self, sc: Scenario, plan: Plan, out_dir: str, costs=None, planted: bool = False):
        from actorflow.sim.workload import MARKER, STEP_FEED
        from actorflow.sim.world import Costs, World
        self.sc, self.plan, self.out, self.wl = sc, plan, out_dir, sc.workload
        limit = float(sc.expect.get("wall_clock_max_s", 600))
        self.limit = limit
        self.world = World(sc.ps, sc.workers, seed=plan.seed, costs=costs or Costs.from_calibration(),
                           limit_s=None, task_faults=plan.task_faults, crash_restarts=plan.crash_restarts,
                           marker=MARKER, step_feed=STEP_FEED)
        self.ckpt_dir = _fixed_length_dir(os.path.join(out_dir, "checkpoints")) if self.wl.checkpoint_every else None
        self.steps: list = []
        self.gs_max = 0
        self.pending = list(plan.triggers)
        self.client_errors: dict = {}
        self.recoveries: dict = {}
        self.failed_runs = 0
        self.planted = planted
        self.outstanding = 0          # restarts and heals not done yet
        self.stop = False

    # -- the plan --------------------------------------------------------------------------------------
    def poll(self) -> None:
        now = self.world.loop.time()
        for tr in list(self.pending):
            if (tr.at_step is not None and self.gs_max >= tr.at_step) or \
                    (tr.at_step is None and tr.at_time_s is not None and now >= tr.at_time_s):
                self.pending.remove(tr)
                self.fire(tr)

    def fire(self, tr: Trigger) -> None:
        w, p = self.world, tr.params
        base = {"fault": tr.fault, "at_step": tr.at_step, "at_time_s": tr.at_time_s, "step": self.gs_max,
                "elapsed_s": round(w.loop.time(), 6)}
        if tr.action == "kill":
            pid = w.procs[p["task"]].inc.pid if w.procs[p["task"]].alive else None
            lost = w.kill(p["task"], power_loss=bool(p.get("power_loss")))
            w.emit("kill", task=p["task"], pid=pid, signal=p.get("signal", 9), restart_after_s=p.get("restart_after_s"),
                   **({"disk": lost} if lost else {}), **base)
            if p.get("restart_after_s") is not None:
                self._later(float(p["restart_after_s"]), lambda: w.restart(p["task"], tr.fault))
        elif tr.action == "partition":
            w.net.partition(tr.fault, p["a"], p["b"], p.get("fail_after_s"))
            w.emit("partition", task=None, a=p["a"], b=p["b"], duration_s=p.get("duration_s"),
                   fail_after_s=p.get("fail_after_s"), **base)
            if p.get("duration_s") is not None:
                def heal():
                    w.net.heal(tr.fault)
                    w.emit("heal", task=None, fault=tr.fault, step=self.gs_max, elapsed_s=round(w.loop.time(), 6))
                self._later(float(p["duration_s"]), heal)
        elif tr.action == "drop":
            w.net.drop({"fault": tr.fault, **p})
            w.emit("drop", task=p["task"], peer=p.get("peer"), mode=p["mode"], rto_ms=p["rto_ms"],
                   episode=p["episode"], **base)
        elif tr.action in ("on", "off"):
            spec = next(f for f in self.plan.task_faults if f["id"] == tr.fault)
            w.net.set_condition(spec, tr.action == "on")
            w.emit("condition_" + tr.action, task=None, **base)

    def _later(self, delay: float, fn) -> None:
        import contextvars
        self.outstanding += 1

        def run():
            self.outstanding -= 1
            fn()
        self.world.loop.call_later(delay, run, context=contextvars.Context())

    # -- a client -------------------------------------------------------------------------------------------
    def client(self, w: int, data) -> None:
        import actorflow as af
        from actorflow import clock
        from actorflow.sim.workload import build_replica
        task = f"/job:worker/task:{w}"
        x_tr, _, y_tr, _ = data
        world = self.world
        try:
            rep = build_replica(self.wl, world.spec, w, self.sc.workers, seed=self.sc.seed)
            rng = np.random.default_rng([self.wl.data_seed, w])
            with rep.graph.as_default():
                hooks = [af.train.StopAtStepHook(last_step=self.wl.steps)] + rep.hooks
                chief = w == 0
                kw = {}
                if chief and self.ckpt_dir:
                    # No TensorBoard summaries: their writer is a thread with its own clock.
                    kw = dict(checkpoint_dir=self.ckpt_dir, save_checkpoint_steps=self.wl.checkpoint_every,
                              save_checkpoint_secs=None, save_summaries_steps=None, save_summaries_secs=None)
                fetches = [rep.train_op, rep.loss, rep.global_step]
                if rep.status is not None:
                    fetches += [rep.status, rep.dropped]
                with af.train.MonitoredTrainingSession(master=world.target(w), is_chief=chief, hooks=hooks,
                                                       max_wait_secs=self.wl.max_wait_s, log_step_count_steps=0,
                                                       **kw) as sess:
                    sess._planted_double_apply = self.planted
                    local = recoveries = 0
                    while not sess.should_stop() and not self.stop:
                        idx = rng.integers(0, len(x_tr), self.wl.batch_size)
                        clock.sleep(world.costs.client_s)
                        t0 = clock.monotonic()
                        out = sess.run(fetches, {rep.x: x_tr[idx], rep.y: y_tr[idx], rep.step: local})
                        t1 = clock.monotonic()
                        gs = int(out[2])
                        status = int(out[3]) if len(out) > 3 else None
                        dropped = int(out[4]) if len(out) > 4 else None
                        self.steps.append((w, local, gs, t0, t1, float(out[1]), status, dropped))
                        world.emit("train_step", task=task, worker=w, local_step=local, step=gs, t0=round(t0, 6),
                                   loss=float(out[1]), **({} if status is None else {"status": status}))
                        self.gs_max = max(self.gs_max, gs)
                        self.poll()
                        if sess.recoveries != recoveries:
                            world.emit("recovery", task=task, worker=w, recoveries=sess.recoveries - recoveries,
                                       local_step=local, step=gs, duration_s=round(t1 - t0, 6))
                            recoveries = sess.recoveries
                        local += 1
                        if rep.sync_opt is not None and int(out[0]) >= self.wl.steps:
                            break
                    self.recoveries[w] = sess.recoveries
        except BaseException as e:  # noqa: BLE001 - a client that dies is a finding, recorded
            msg = getattr(e, "message", None) or str(e)
            self.client_errors[w] = f"{type(e).__name__}: {msg.splitlines()[0][:300] if msg else ''}"
            world.emit("client_failed", task=task, worker=w, error=self.client_errors[w])

    def evaluate(self, data) -> dict:
        import actorflow as af
        from actorflow.sim.workload import build_replica
        _, x_te, _, y_te = data
        out: dict = {}
        sync = self.wl.mode == "sync"
        rep = build_replica(self.wl, self.world.spec, 0, self.sc.workers, seed=self.sc.seed, train=sync)
        try:
            with rep.graph.as_default(), af.Session(self.world.target(0)) as sess:
                acc, loss, gs = sess.run([rep.accuracy, rep.loss, rep.global_step], {rep.x: x_te, rep.y: y_te},
                                         timeout=30.0)
                if sync:
                    out["gradients_dropped_counter"] = int(sess.run(rep.dropped, timeout=30.0))
            out.update(final_accuracy=float(acc), final_loss=float(loss), final_step=int(gs))
        except Exception as e:  # noqa: BLE001
            out["evaluation_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        return out

    # -- the run ------------------------------------------------------------------------------------------------
    async def main(self, data) -> dict:
        import asyncio
        w = self.world
        for t in self.sc.task_names():
            w.start(t)
        w.emit("run_start", seed=self.plan.seed, short=self.sc.short,
               mode="deterministic")
        for f in self.plan.task_faults:
            if f["kind"] in ("latency", "bandwidth") and not f.get("controlled"):
                w.net.set_condition(f, True)
        for tr in self.plan.triggers:
            if tr.at_step is None and tr.at_time_s is not None:
                w.loop.call_at(tr.at_time_s, self.poll)
        clients = [w.spawn(i, self.client, i, data) for i in range(self.sc.workers)]
        done, pending = await asyncio.wait(clients, timeout=self.limit)
        hung = bool(pending)
        if hung:
            self.stop = True
            w.emit("wall_clock_limit", step=self.gs_max, limit_s=self.limit)
        self.t_train_end = w.loop.time()
        while self.outstanding and not hung:
            await asyncio.sleep(0.1)          # a restart or heal still due: the cluster whole for evaluation
        final = {"hung": hung}
        if not hung:
            final.update(await w.spawn(0, self.evaluate, data))
        final["unfired_triggers"] = [dataclasses.asdict(t) for t in self.pending]
        final["train_s"] = round(self.t_train_end, 6)
        return final


def _fixed_length_dir(real: str) -> str:
    """A name for directory `real` whose length does not depend on where the run is recorded: a
    symbolic link in the temporary directory. The checkpoint paths travel in messages, whose sizes
    the simulated network charges for, so a replay recorded elsewhere (`RUN/replay`) with a longer
    path would drift by nanoseconds and differ in its event times."""
    import hashlib
    import tempfile
    real = os.path.abspath(real)
    os.makedirs(real, exist_ok=True)
    base = os.path.join(tempfile.gettempdir(), "actorflow-sim")
    os.makedirs(base, exist_ok=True)
    link = os.path.join(base, hashlib.sha256(real.encode()).hexdigest()[:16])
    try:
        if os.path.islink(link) and os.readlink(link) == real:
            return link
        os.unlink(link)
    except FileNotFoundError:
        pass
    os.symlink(real, link)
    return link


def _check_checkpoint(sc: Scenario, ckpt_dir: str | None) -> dict:
    """The latest checkpoint restores into a local session (after the world, on the real runtime)."""
    if not ckpt_dir:
        return {}
    import actorflow as af
    from actorflow.sim.workload import build_replica
    from actorflow.train.saver import latest_checkpoint
    prefix = latest_checkpoint(ckpt_dir)
    res = {"latest_checkpoint": os.path.basename(prefix) if prefix else None}
    if prefix is None:
        res["checkpoint_error"] = "no good checkpoint"
        return res
    try:
        rep = build_replica(sc.workload, None, 0, sc.workers, seed=sc.seed, train=False)
        with rep.graph.as_default():
            saver = af.train.Saver()
            with af.Session() as sess:
                saver.restore(sess, prefix)
                res["checkpoint_step"] = int(sess.run(rep.global_step))
    except Exception as e:  # noqa: BLE001
        res["checkpoint_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
    return res


def _properties(sc: Scenario, h: _Harness, m: dict, events: list) -> list:
    out = []
    w = h.world
    stalled = m.get("stalled")
    out.append(Check("no_hang_virtual", f"{h.limit:g} s virtual", m.get("train_s"), not m["hung"] and not stalled,
                     stalled or ("the clients did not finish in time" if m["hung"] else "")))
    ps_lost_state = any(e["kind"] in ("kill", "crash_during_save") and e.get("task", "").startswith("/job:ps/")
                        for e in events)
    acked = len(h.steps)
    failed = sum(h.recoveries.values())
    gs = m.get("final_step")
    if sc.workload.mode == "async" and not ps_lost_state and gs is not None:
        ok = acked <= gs <= acked + failed
        out.append(Check("exactly_once", f"{acked}..{acked + failed}", gs, ok,
                         "" if ok else (f"global step {gs} > {acked} accepted runs + {failed} failed: a gradient was "
                                        "applied twice" if gs > acked else f"global step {gs} < {acked} accepted "
                                        "runs: an accepted gradient was lost")))
    last_fault_end = max((e["t"] for e in events if e["kind"] in ("restarted", "heal", "kill", "partition",
                                                                   "crash_during_save")), default=0.0)
    end = max((s[4] for s in h.steps), default=0.0)
    prog_ok = (gs is not None and gs >= sc.workload.steps and end - last_fault_end <= PROGRESS_BOUND_S) or \
        (gs is not None and gs >= sc.workload.steps and end <= last_fault_end)
    out.append(Check("progress", f"{PROGRESS_BOUND_S:g} s after the last fault", round(end - last_fault_end, 3),
                     prog_ok, "" if prog_ok else f"global step {gs} of {sc.workload.steps}"))
    if sc.workload.checkpoint_every:
        why = ([m["checkpoint_error"]] if "checkpoint_error" in m else []) + w.disk.checkpoint_safety()
        out.append(Check("checkpoint_safe", "restores a durably saved state", not why, not why, "; ".join(why)[:600]))
    exercised = recovery_exercised(h.steps, events)
    if exercised is not None:
        out.append(exercised)
    out.append(Check("no_leaks", 0, len(w.leaks), not w.leaks, "; ".join(sorted(set(w.leaks)))[:300]))
    return out


def run_deterministic(sc: Scenario, plan: Plan | None = None, out_dir: str | None = None, costs=None,
                      planted: bool = False, write: bool = True, measure: bool = False,
                      count_kinds: bool = False) -> RunResult:
    """Runs `sc` under `plan` (default: drawn from the scenario's seed) in the simulated world.
    For comparisons with the discrete-event model (actorflow/sim/figures.py): with `measure`, the
    metrics give every training step's exact virtual span (`step_spans`: [worker, t0, t1, global
    step]); with `count_kinds`, they count the messages by sender, receiver and kind
    (`messages_by_kind`, SimNetwork.count_kinds: it decodes every frame's header, at some CPU cost)."""
    from actorflow.sim.loop import SimulationStalled
    from actorflow.sim.report import write_report
    from actorflow.sim.workload import load_digits_data
    plan = plan or Plan.from_scenario(sc)
    if out_dir is None:
        out_dir = os.path.join("runs", f"{sc.name}-{plan.seed}-det")
    os.makedirs(out_dir, exist_ok=True)
    for d in ("checkpoints", "events", "control", "logs"):
        shutil.rmtree(os.path.join(out_dir, d), ignore_errors=True)
    for name in ("events.jsonl", "metrics.json", "report.md", "timeline.png"):
        try:
            os.unlink(os.path.join(out_dir, name))
        except FileNotFoundError:
            pass
    if write:
        with open(os.path.join(out_dir, "scenario.json"), "w") as f:
            json.dump({"doc": sc.doc, "path": sc.path, "short": sc.short, "seed": plan.seed, "mode": "deterministic",
                       "planted": planted}, f, indent=1, default=str)
        with open(os.path.join(out_dir, "plan.json"), "w") as f:
            json.dump({"seed": plan.seed, "replay_of": plan.replay_of,
                       "triggers": [dataclasses.asdict(t) for t in plan.triggers], "task_faults": plan.task_faults,
                       "crash_restarts": plan.crash_restarts}, f, indent=1)
    data = load_digits_data(sc.workload.data_seed)
    h = _Harness(sc, plan, out_dir, costs, planted)
    w = h.world
    if count_kinds:
        w.net.count_kinds()
    stalled = None
    try:
        with w:
            try:
                final = w.run(h.main(data))
            except SimulationStalled as e:
                stalled = str(e)
                final = {"hung": True}
                w.emit("stalled", error=stalled)
    finally:
        w.close()
    w.emit("run_end", virtual_s=round(w.loop.time(), 6), callbacks=w.loop.callbacks)
    final.update(_check_checkpoint(sc, h.ckpt_dir))
    if h.ckpt_dir:
        try:
            os.unlink(h.ckpt_dir)
        except OSError:
            pass
    final["stalled"] = stalled
    final.setdefault("train_s", round(w.loop.time(), 6))
    final["warnings"] = 0
    events = w.events
    for e in events:
        e.setdefault("step", None)
    rec = _Record(plan, [(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]) for s in h.steps], h.client_errors,
                  bool(final.get("hung")))
    m = _metrics(sc, rec, final, events)
    m["mode"] = "deterministic"
    m["virtual_s"] = round(w.loop.time(), 6)
    m["callbacks"] = w.loop.callbacks
    m["messages"] = w.net.messages
    m["messages_by_task"] = {t: [n.sent, n.received] for t, n in sorted(w.net.nodes.items())}
    if w.net.kinds is not None:
        m["messages_by_kind"] = {f"{a}>{b} {k}": n for (a, b, k), n in sorted(w.net.kinds.items())}
    if measure:
        m["step_spans"] = [[s[0], s[3], s[4], s[2]] for s in h.steps]
    m["leaks"] = sorted(set(w.leaks))
    m["checkpoints_completed"] = len(w.disk.completed)
    m["checkpoint_restores"] = [[t, os.path.basename(p)] for t, p, _ in w.disk.restores]
    m["power_losses"] = w.disk.power_losses
    m["loop_errors"] = w.loop_errors[:20]
    checks = check_expectations(sc, m, events) + _properties(sc, h, m, events)
    passed = all(c.ok for c in checks)
    m["passed"] = passed
    m["checks"] = [dataclasses.asdict(c) for c in checks]
    seq = fault_sequence(events)
    if plan.replay_of:
        try:
            recorded = load_events(plan.replay_of)
            m["replay_matches"] = _canonical(events) == _canonical(recorded)
            m["replay_recorded_faults"] = len(fault_sequence(recorded))
        except OSError:
            pass
    if write:
        with open(os.path.join(out_dir, "events.jsonl"), "w") as f:
            f.write(_canonical(events))
        with open(os.path.join(out_dir, "metrics.json"), "w") as f:
            json.dump(m, f, indent=1, default=str)
    res = RunResult(sc, out_dir, m, checks, events, passed, seq)
    if write:
        write_report(res)
    return res


def _canonical(events: list) -> str:
    return "".join(json.dumps(e, sort_keys=True) + "\n" for e in events)


def run_scenario_deterministic(path: str, seed: int | None = None, out_dir: str | None = None, short: bool = False,
                               planted: bool = False) -> RunResult:
    sc = load(path, short=short)
    return run_deterministic(sc, Plan.from_scenario(sc, seed), out_dir, planted=planted)


def _read_record(run_dir: str):
    with open(os.path.join(run_dir, "scenario.json")) as f:
        rec = json.load(f)
    sc = parse(rec["doc"], rec.get("path"), short=False)
    sc = dataclasses.replace(sc, short=rec.get("short", False))
    with open(os.path.join(run_dir, "plan.json")) as f:
        p = json.load(f)
    plan = Plan(p["seed"], [Trigger(**t) for t in p["triggers"]], p["task_faults"],
                p.get("crash_restarts", {}), None)
    return rec, sc, plan


def replay_deterministic(run_dir: str, out_dir: str | None = None) -> RunResult:
    """Runs a recorded deterministic run again from its plan and seed: the same history, failures
    included (`metrics["replay_matches"]` says whether the event logs are identical)."""
    rec, sc, plan = _read_record(run_dir)
    plan = dataclasses.replace(plan, replay_of=os.path.abspath(run_dir))
    if out_dir is None:
        out_dir = os.path.join(run_dir, "replay")
    if os.path.abspath(out_dir) == os.path.abspath(run_dir):
        raise ValueError(f"replay: the output directory must not be the recorded run's own ({run_dir})")
    return run_deterministic(sc, plan, out_dir, planted=rec.get("planted", False))


def replay_command(run_dir: str) -> str:
    return f"actorflow sim replay {run_dir}"


def sweep(path, seeds, out_root: str, short: bool = False, planted: bool = False, keep_passing: bool = False,
          progress=None) -> list:
    """Runs the scenario (a file, or a Scenario) with every seed in `seeds`; returns [(seed, passed, run_dir, failed check names)].
    Failing runs keep their directory (with the replay command in the report); passing ones are removed
    unless `keep_passing`."""
    sc = load(path, short=short) if isinstance(path, str) else path
    out = []
    for seed in seeds:
        d = os.path.join(out_root, f"{sc.name}-{seed}")
        res = run_deterministic(sc, Plan.from_scenario(sc, seed), d, planted=planted)
        failed = [c.name for c in res.checks if not c.ok]
        out.append((seed, res.passed, d, failed))
        if res.passed and not keep_passing:
            shutil.rmtree(d, ignore_errors=True)
        if progress is not None:
            progress(seed, res, d)
    return out


def _failed_names(res) -> set:
    return {c.name for c in res.checks if not c.ok}


def shrink(run_dir: str, out_dir: str | None = None, progress=None) -> tuple:
    """Reduces a failing run's fault plan to a minimal one that still fails the same way (a check
    that failed still fails): drops whole faults, then single triggers, while the run fails.
    Returns (minimal plan, its RunResult); the minimal run is recorded in `out_dir`."""
    rec, sc, plan = _read_record(run_dir)
    planted = rec.get("planted", False)
    out_dir = out_dir or os.path.join(run_dir, "shrunk")
    base = run_deterministic(sc, plan, os.path.join(out_dir, "try"), planted=planted, write=False)
    target = _failed_names(base)
    if not target:
        raise ValueError(f"shrink: {run_dir} passes when run again; nothing to shrink")

    def fails(p: Plan) -> bool:
        r = run_deterministic(sc, p, os.path.join(out_dir, "try"), planted=planted, write=False)
        ok = bool(_failed_names(r) & target)
        if progress is not None:
            progress(p, ok)
        return ok

    def without_fault(p: Plan, fid) -> Plan:
        return dataclasses.replace(p, triggers=[t for t in p.triggers if t.fault != fid],
                                   task_faults=[f for f in p.task_faults if f["id"] != fid],
                                   crash_restarts={k: v for k, v in p.crash_restarts.items()
                                                   if not any(f["id"] == fid and k in f.get("tasks", ())
                                                              for f in p.task_faults)})
    cur = plan
    for fid in sorted({t.fault for t in cur.triggers} | {f["id"] for f in cur.task_faults}):
        cand = without_fault(cur, fid)
        if fails(cand):
            cur = cand
    i = 0
    while i < len(cur.triggers):
        cand = dataclasses.replace(cur, triggers=cur.triggers[:i] + cur.triggers[i + 1:])
        if fails(cand):
            cur = cand
        else:
            i += 1
    shutil.rmtree(os.path.join(out_dir, "try"), ignore_errors=True)
    res = run_deterministic(sc, cur, out_dir, planted=planted)
    return cur, res
