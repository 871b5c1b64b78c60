"""Soak: 1 PS and 4 workers training for minutes under a fault a minute, watching every process.

A LocalCluster (real `actorflow worker` processes on loopback) trains the digits MLP
asynchronously, between-graph: four client threads, one per worker task, each in its own
MonitoredTrainingSession, the chief saving a checkpoint every `--checkpoint-steps` global steps.
Every `--fault-every` seconds (first at half that) the harness injects the next fault of the
rotation, through the simulator's seams (actorflow/sim/faults.py, driven by actorflow/sim/runner.py's
harness):

- kill:  kill -9 of a worker task (rotating 1, 2, 3, 0), restarted after 1 s;
- drop:  one connection reset (TCP RST) on the next frame from a worker to the PS, or from the PS to
         a worker (alternating);
- slow:  a slow peer: every frame a worker sends (its task's and its client's) is delayed
         (lognormal, median `--slow-ms`) for `--slow-s` seconds;
- ps:    (only with `--faults ...,ps`) kill -9 of the PS, restarted after 1 s: the chief restores
         the latest checkpoint, so up to a checkpoint interval of steps is redone.

Every `--sample-s` seconds it prints a row: steps done, steps/s, errors and recoveries so far, and
the RSS (VmRSS of /proc/PID/status) and open descriptors (/proc/PID/fd) of every process, the
client process included. At the end:

- faults: per fault, the global step before it, the lowest step a run started after it read, the
  latest checkpoint's step at the time, and how long until the affected worker stepped again;
- errors by class (recovered inside MonitoredTrainingSession, or raised to the client);
- verdict 1, nothing lost beyond the checkpoint interval: after every fault the global step stays
  at or above the latest checkpoint's step and drops by at most `--checkpoint-steps` (plus two runs
  per worker in flight while a save starts), the affected worker steps again, no client hangs and
  no task exits by itself, the final model is accurate (>= 0.85), and the latest checkpoint
  restores and is recent;
- verdict 2, no growth after warm-up: the least-squares slope of each process's RSS and descriptor
  count over the samples after the warm-up (2 minutes, or half of a shorter run), per process
  incarnation, is at most `--rss-slope` MiB/min and `--fd-slope` descriptors/min.

Run: nice -n 10 python benchmarks/soak.py [--minutes 10] [--out DIR]
It is a benchmark: it prints, and exits 1 when a verdict fails; no test asserts its numbers.
"""
from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import time

import numpy as np

import actorflow as af
from actorflow.sim import faults
from actorflow.sim.plan import Plan, Trigger
from actorflow.sim.runner import _STOP_TIMEOUT_S, _calibrated_step_ms, _Run
from actorflow.sim.scenario import parse
from actorflow.sim.workload import MARKER, STEP_FEED, build_replica, load_digits_data

WORKERS = 4
PS = "/job:ps/task:0"
KINDS = ("kill", "drop", "slow")          # the default rotation; "ps" adds kill -9 of the PS
KILL_ORDER = (1, 2, 3, 0)
DROP_FAULT = 0                       # fault ids: 0 the drops, 1 + w worker w's slow window
MIB = 1024.0 * 1024.0


def _worker(w: int) -> str:
    return f"/job:worker/task:{w}"


def make_plan(args) -> Plan:
    """The fault timeline: one fault every `fault_every` s, rotating kill, drop, slow."""
    task_faults = [{"id": DROP_FAULT, "kind": "drop", "tasks": [PS] + [_worker(w) for w in range(WORKERS)]}]
    for w in range(WORKERS):
        task_faults.append({"id": 1 + w, "kind": "latency", "tasks": [_worker(w)], "controlled": True,
                            "delay": {"dist": "lognormal", "median_ms": args.slow_ms, "sigma": 0.3}})
    triggers = []
    t = args.fault_every / 2.0
    i = 0
    # No fault in the last 25 s, and slow windows that close 10 s before the end and before the
    # next fault: every fault's recovery must be seen, and be that fault's alone.
    end = args.minutes * 60.0 - 25.0
    slow_s = min(args.slow_s, args.fault_every - 5.0)
    kinds = args.faults
    while t < end:
        kind = kinds[i % len(kinds)]
        rnd = i // len(kinds)
        if kind == "slow" and t + slow_s > args.minutes * 60.0 - 10.0:
            break
        if kind == "ps":
            triggers.append(Trigger(100 + i, "kill", at_time_s=t, params={
                "task": PS, "signal": 9, "restart_after_s": 1.0}))
        elif kind == "kill":
            w = KILL_ORDER[rnd % len(KILL_ORDER)]
            triggers.append(Trigger(100 + i, "kill", at_time_s=t, params={
                "task": _worker(w), "signal": 9, "restart_after_s": 1.0}))
        elif kind == "drop":
            w = 1 + rnd % (WORKERS - 1)
            sender, peer = (_worker(w), PS) if rnd % 2 == 0 else (PS, _worker(w))
            triggers.append(Trigger(DROP_FAULT, "drop", at_time_s=t, params={
                "task": sender, "peer": peer, "mode": "reset", "rto_ms": 200.0, "episode": rnd}))
        else:
            w = (rnd + 2) % WORKERS
            triggers.append(Trigger(1 + w, "on", at_time_s=t, params={"duration_s": slow_s}))
            triggers.append(Trigger(1 + w, "off", at_time_s=t + slow_s))
        t += args.fault_every
        i += 1
    return Plan(args.seed, triggers, task_faults, {})


def proc_stats(pid: int):
    """(RSS bytes, open descriptors, threads) of a live process, or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            status = f.read()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    rss = int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.M).group(1)) * 1024
    threads = int(re.search(r"^Threads:\s+(\d+)", status, re.M).group(1))
    return rss, fds, threads


def slope_per_min(points) -> float:
    """Least-squares slope of (seconds, value) points, per minute."""
    t = np.array([p[0] for p in points], float)
    v = np.array([p[1] for p in points], float)
    return float(np.polyfit(t / 60.0, v, 1)[0])


class _Counter(logging.Handler):
    """Counts actorflow's warnings and keeps them in the run's log file, off the terminal."""

    def __init__(self, path):
        super().__init__(logging.INFO)
        self.warnings = 0
        self._f = open(path, "a", buffering=1)

    def emit(self, record):
        if record.levelno >= logging.WARNING:
            self.warnings += 1
        self._f.write(f"{record.created:.3f} {record.levelname} {record.name}: "
                      f"{record.getMessage().splitlines()[0][:400]}\n")

    def close(self):
        self._f.close()
        super().close()


class Soak(_Run):
    """The scenario runner's harness (triggers, kills and restarts, commands to the injectors,
    process watch, evaluation, checkpoint check) with time-boxed clients and resource sampling."""

    def __init__(self, sc, plan, out_dir, args):
        super().__init__(sc, plan, out_dir, progress=False)
        self.args = args
        self.steps_done = 0
        self.step_times: dict = {w: [] for w in range(WORKERS)}     # per worker: completion times (bounded)
        self.recovered: dict = {}              # error class -> count, recovered inside the session
        self.raised: dict = {}                 # error class -> count, raised to the client
        self.sessions = 0                      # MonitoredTrainingSessions created
        self.injected: list = []               # one dict per fault
        self.samples: list = []                # (t, {name: (pid, rss, fds, threads)})
        self.run_timeout_ms = int(args.run_timeout_s * 1000)
        self.startup_errors = None             # errors counted before the first fault (tasks still compiling)
        # (completion time, global step) of the last seconds' runs: the step a fault interrupts.
        # (Not the highest step ever seen: after the PS restores a checkpoint the step goes back.)
        self.recent: collections.deque = collections.deque(maxlen=4096)

    # -- clients ------------------------------------------------------------------------------------------
    def _client(self, w: int, data) -> None:
        task = _worker(w)
        faults.ROLE.set(task)
        x_tr, _, y_tr, _ = data
        rep = build_replica(self.wl, self.cluster.spec.as_dict(), w, self.sc.workers, seed=self.sc.seed)
        rng = np.random.default_rng([self.wl.data_seed, w])
        opts = af.RunOptions(timeout_in_ms=self.run_timeout_ms)
        chief = w == 0
        local = 0
        with rep.graph.as_default():
            while not self.stop.is_set():
                kw = dict(checkpoint_dir=self.ckpt_dir, save_checkpoint_steps=self.wl.checkpoint_every,
                          save_checkpoint_secs=None) if chief else {}
                seen: dict = {}
                try:
                    with af.train.MonitoredTrainingSession(master=self.cluster.task_target("worker", w),
                                                           is_chief=chief, max_wait_secs=self.wl.max_wait_s,
                                                           log_step_count_steps=0, **kw) as sess:
                        with self.lock:
                            self.sessions += 1
                        while not self.stop.is_set():
                            idx = rng.integers(0, len(x_tr), self.wl.batch_size)
                            t0 = time.time()
                            _, _, gs = sess.run([rep.train_op, rep.loss, rep.global_step],
                                                {rep.x: x_tr[idx], rep.y: y_tr[idx], rep.step: local},
                                                options=opts)
                            self._record(w, t0, time.time(), int(gs))
                            local += 1
                            if sess.recovered_errors != seen:
                                self._count_recovered(sess.recovered_errors, seen)
                                seen = dict(sess.recovered_errors)
                except Exception as e:  # noqa: BLE001 - counted by class; the client starts a new session
                    name = type(e).__name__
                    with self.lock:
                        self.raised[name] = self.raised.get(name, 0) + 1
                    self.hlog.emit("client_error", task=task, worker=w, error=name,
                                   message=str(getattr(e, "message", e)).splitlines()[0][:300] if str(e) else "")
                    self.stop.wait(1.0)

    def _count_recovered(self, now: dict, seen: dict) -> None:
        with self.lock:
            for k, n in now.items():
                self.recovered[k] = self.recovered.get(k, 0) + n - seen.get(k, 0)

    def _record(self, w, t0, t1, gs) -> None:
        with self.lock:
            self.steps_done += 1
            self.gs_max = max(self.gs_max, gs)
            self.recent.append((t1, gs))
            times = self.step_times[w]
            times.append(t1)
            if len(times) > 64:
                del times[:32]
            for f in self.injected:
                if f["closed"]:
                    continue
                if t0 > f["t_end"]:
                    f["gs_after_min"] = gs if f["gs_after_min"] is None else min(f["gs_after_min"], gs)
                    if (f["affected"] is None or w in f["affected"]) and f["recovery_s"] is None:
                        f["recovery_s"] = round(t1 - f["t_end"], 3)
                if t1 > f["t_end"] + 30.0 and f["recovery_s"] is not None:
                    f["closed"] = True

    # -- faults -------------------------------------------------------------------------------------------
    def _latest_ckpt_step(self):
        prefix = af.train.latest_checkpoint(self.ckpt_dir)
        m = re.search(r"-(\d+)$", prefix or "")
        return int(m.group(1)) if m else None

    def _fire(self, tr, now: float) -> None:
        super()._fire(tr, now)
        if tr.action == "off":
            return
        p = tr.params
        if self.startup_errors is None:
            with self.lock:
                self.startup_errors = sum(self.recovered.values()) + sum(self.raised.values())
        if tr.action == "kill" and p["task"] == PS:
            kind, target, w = "kill -9 PS + restart", PS, None
        elif tr.action == "kill":
            kind, target, w = "kill -9 + restart", p["task"], int(p["task"].rsplit(":", 1)[1])
        elif tr.action == "drop":
            kind, target = "connection reset", f"{p['task']} -> {p['peer']}"
            w = int((p["peer"] if p["task"] == PS else p["task"]).rsplit(":", 1)[1])
        else:
            kind, w = f"slow peer {p['duration_s']:g} s", tr.fault - 1
            target = _worker(w)
        # A fault ends when its task is restarted (kill) or its window closes (slow).
        t_end = now + (1.0 if tr.action == "kill" else p["duration_s"] if tr.action == "on" else 0.0)
        with self.lock:
            gs_before = max((g for t, g in self.recent if t > now - 5.0), default=self.gs_max)
            self.injected.append({
                "kind": kind, "target": target, "at_s": round(now - self.t_start, 1), "t_end": t_end,
                "gs_before": gs_before, "ckpt_step": self._latest_ckpt_step(),
                "affected": None if w is None else {w},
                "gs_after_min": None, "recovery_s": None, "closed": False})

    # -- resources ----------------------------------------------------------------------------------------
    def _sample(self, t: float) -> dict:
        row = {}
        for (job, idx), p in sorted(self.cluster.procs.items()):
            s = proc_stats(p.pid) if p.poll() is None else None
            if s is not None:
                row[f"{job}{idx}"] = (p.pid, *s)
        s = proc_stats(os.getpid())
        row["client"] = (os.getpid(), *s)
        self.samples.append((t, row))
        return row

    def _print_header(self) -> None:
        names = ["ps0"] + [f"worker{w}" for w in range(WORKERS)] + ["client"]
        print(f"{'time':>6} {'gstep':>7} {'steps':>7} {'st/s':>6} {'err':>4} {'rec':>4}  "
              + "  ".join(f"{n + ' MiB/fd':>15}" for n in names), flush=True)
        self._names = names

    def _print_row(self, t, row, last) -> None:
        dt = t - last[0]
        rate = (self.steps_done - last[1]) / dt if dt > 0 else 0.0
        errors = sum(self.raised.values()) + sum(self.recovered.values())
        cells = []
        for n in self._names:
            v = row.get(n)
            cells.append(f"{'down':>15}" if v is None else f"{v[1] / MIB:>9.1f}/{v[2]:<5d}")
        gs = self.recent[-1][1] if self.recent else 0
        print(f"{t - self.t_start:>6.0f} {gs:>7d} {self.steps_done:>7d} {rate:>6.1f} {errors:>4d} "
              f"{sum(self.recovered.values()):>4d}  " + "  ".join(cells), flush=True)

    # -- the run ------------------------------------------------------------------------------------------
    def execute(self) -> dict:
        from actorflow.cluster.local import LocalCluster
        args = self.args
        data = load_digits_data(self.wl.data_seed)
        config = self.plan.task_config({}, os.path.join(self.out, "events"), os.path.join(self.out, "control"),
                                       _calibrated_step_ms(), MARKER, STEP_FEED)
        config_path = os.path.join(self.out, "faults.json")
        with open(config_path, "w") as f:
            json.dump(config, f, indent=1)
        counter = _Counter(os.path.join(self.out, "actorflow.log"))
        af_log = logging.getLogger("actorflow")
        af_log.addHandler(counter)
        af_log.setLevel(logging.INFO)
        af_log.propagate = False
        self.cluster = LocalCluster(ps=1, workers=WORKERS, restart="never", env={faults.ENV: config_path},
                                    log_dir=os.path.join(self.out, "logs"))
        t_wall0 = time.time()
        final: dict = {}
        try:
            self.cluster.start()
            addresses = {f"/job:{j}/task:{i}": self.cluster.spec.task_address(j, i)
                         for j, i in self.cluster.spec.tasks()}
            faults.install(dict(config, tasks=addresses), None, [_worker(w) for w in range(WORKERS)])
            self.t_start = time.time()
            self.hlog.emit("run_start", seed=self.plan.seed, addresses=addresses)
            clients = [threading.Thread(target=self._client, args=(w, data), name=f"soak-client-{w}", daemon=True)
                       for w in range(WORKERS)]
            for c in clients:
                c.start()
            self._print_header()
            end = self.t_start + args.minutes * 60.0
            next_sample = self.t_start
            last = (self.t_start, 0)
            while time.time() < end:
                now = time.time()
                self._poll_triggers()
                with self.tlock:
                    due = [x for x in self.timed if x[0] <= now]
                    for item in due:
                        self.timed.remove(item)
                for item in due:
                    item[1]()
                self._watch_processes()
                if now >= next_sample:
                    row = self._sample(now)
                    self._print_row(now, row, last)
                    last = (now, self.steps_done)
                    next_sample += args.sample_s
                time.sleep(0.05)
            row = self._sample(time.time())
            self._print_row(time.time(), row, last)
            self.t_train_end = time.time()
            self.stop.set()
            with self.tlock:
                late, self.timed = sorted(self.timed, key=lambda x: x[0]), []
            for _, fn in late:
                fn()
            for c in clients:
                c.join(args.run_timeout_s + 30.0)
            final["hung_clients"] = [c.name for c in clients if c.is_alive()]
            for th in self.threads:
                th.join(60.0)
            faults.uninstall()
            final.update(self._evaluate(data))
        finally:
            faults.uninstall()
            self.cluster.stop(timeout=_STOP_TIMEOUT_S)
            af_log.removeHandler(counter)
            af_log.propagate = True
            counter.close()
            self.hlog.emit("run_end", wall_s=round(time.time() - t_wall0, 3))
            self.hlog.close()
        final["warnings"] = counter.warnings
        final["unexpected_exits"] = self._events("unexpected_exit")
        return final

    def _events(self, kind: str) -> list:
        out = []
        with open(os.path.join(self.out, "events", "harness-main.jsonl")) as f:
            for line in f:
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if ev.get("kind") == kind:
                    out.append(ev.get("task"))
        return out


def report(soak: Soak, final: dict, args) -> bool:
    print()
    print("faults:")
    print(f"  {'at s':>6}  {'fault':<22} {'target':<42} {'gs before':>9} {'ckpt':>6} {'gs after':>8} "
          f"{'recovery s':>10}")
    lost_ok = True
    why = []
    for f in soak.injected:
        after = f["gs_after_min"]
        ok = after is not None and f["recovery_s"] is not None
        if not ok and soak.t_train_end - f["t_end"] < 30.0:
            # Planned to end 25 s before the run does; a restart that took longer is not a loss.
            print(f"  {f['at_s']:>6.1f}  {f['kind']:<22} {f['target']:<42} {f['gs_before']:>9}   "
                  f"unverified: the run ended {soak.t_train_end - f['t_end']:.0f} s after the fault did")
            continue
        if ok and f["ckpt_step"] is not None and after < f["ckpt_step"]:
            ok = False
        # A save starts when the chief sees the step pass the interval; the other workers' runs in
        # flight meanwhile are the slack.
        if ok and f["gs_before"] - after > args.checkpoint_steps + 2 * WORKERS:
            ok = False
        if not ok:
            lost_ok = False
            why.append(f"{f['kind']} at {f['at_s']} s: before {f['gs_before']}, after {after}, checkpoint "
                       f"{f['ckpt_step']}, recovery {f['recovery_s']}")
        print(f"  {f['at_s']:>6.1f}  {f['kind']:<22} {f['target']:<42} {f['gs_before']:>9} "
              f"{'-' if f['ckpt_step'] is None else f['ckpt_step']:>6} {'-' if after is None else after:>8} "
              f"{'never' if f['recovery_s'] is None else f['recovery_s']:>10}")
    errs = sorted(set(soak.recovered) | set(soak.raised))
    print()
    print("errors by class: " + (", ".join(f"{k} {soak.recovered.get(k, 0) + soak.raised.get(k, 0)} "
                                          f"(recovered in session {soak.recovered.get(k, 0)}, raised to the client "
                                          f"{soak.raised.get(k, 0)})" for k in errs) or "none"))
    print(f"recoveries: {sum(soak.recovered.values())} inside sessions, {soak.sessions - WORKERS} new sessions; "
          f"{soak.startup_errors or 0} of the errors came before the first fault (heartbeats missed while the "
          f"tasks started); {len(soak.injected)} faults injected; {final.get('warnings', 0)} warnings logged")
    train_s = soak.t_train_end - soak.t_start
    print(f"steps done: {soak.steps_done} runs, global step {final.get('final_step', soak.gs_max)} in "
          f"{train_s:.0f} s ({soak.steps_done / train_s:.1f} runs/s)")
    acc = final.get("final_accuracy")
    print(f"final test accuracy {acc if acc is None else round(acc, 4)}; latest checkpoint "
          f"{final.get('latest_checkpoint')} (step {final.get('checkpoint_step')})")

    if final.get("evaluation_error"):
        lost_ok = False
        why.append(final["evaluation_error"])
    if final.get("checkpoint_error"):
        lost_ok = False
        why.append(f"latest checkpoint: {final['checkpoint_error']}")
    elif final.get("checkpoint_step", -1) < final.get("final_step", 0) - args.checkpoint_steps - WORKERS:
        lost_ok = False
        why.append(f"latest checkpoint at step {final.get('checkpoint_step')}, the run ended at {final.get('final_step')}")
    if acc is not None and acc < 0.85:
        lost_ok = False
        why.append(f"final accuracy {acc:.3f} < 0.85")
    if final.get("hung_clients"):
        lost_ok = False
        why.append(f"clients still running {args.run_timeout_s + 30:g} s after the stop: {final['hung_clients']}")
    if final.get("unexpected_exits"):
        lost_ok = False
        why.append(f"tasks exited by themselves: {final['unexpected_exits']}")

    # Growth: per process incarnation (a restarted worker is a new pid), samples after the warm-up.
    warm = min(120.0, args.minutes * 60.0 / 2.0)
    series: dict = {}
    for t, row in soak.samples:
        if t - soak.t_start < warm:
            continue
        for name, (pid, rss, fds, _threads) in row.items():
            series.setdefault((name, pid), []).append((t - soak.t_start, rss, fds))
    print()
    print(f"growth after the first {warm:.0f} s (least-squares slope per process incarnation; bounds "
          f"{args.rss_slope:g} MiB/min, {args.fd_slope:g} fds/min):")
    growth_ok = True
    measured = 0
    for (name, pid), pts in sorted(series.items()):
        span = pts[-1][0] - pts[0][0] if pts else 0.0
        if len(pts) < 3:
            print(f"  {name:<8} pid {pid:<8} {len(pts)} samples over {span:.0f} s: too few to fit")
            continue
        measured += 1
        rss_s = slope_per_min([(t, r / MIB) for t, r, _ in pts])
        fd_s = slope_per_min([(t, d) for t, _, d in pts])
        ok = rss_s <= args.rss_slope and fd_s <= args.fd_slope
        growth_ok &= ok
        print(f"  {name:<8} pid {pid:<8} RSS {pts[0][1] / MIB:7.1f} -> {pts[-1][1] / MIB:7.1f} MiB "
              f"({rss_s:+6.2f} MiB/min), fds {pts[0][2]:4d} -> {pts[-1][2]:4d} ({fd_s:+5.2f}/min) "
              f"{'ok' if ok else 'GROWS'}")
    if measured == 0:
        growth_ok = False
        print("  no process has enough samples after the warm-up: run longer or sample more often")
    print()
    print(f"verdict: nothing lost beyond the checkpoint interval ({args.checkpoint_steps} steps): "
          f"{'PASS' if lost_ok else 'FAIL'}" + ("" if lost_ok else " (" + "; ".join(why) + ")"))
    print(f"verdict: no growth after warm-up: {'PASS' if growth_ok else 'FAIL'}")
    return lost_ok and growth_ok


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--fault-every", type=float, default=60.0, help="seconds between faults")
    p.add_argument("--sample-s", type=float, default=30.0, help="seconds between resource rows")
    p.add_argument("--checkpoint-steps", type=int, default=200, help="the chief's checkpoint interval")
    p.add_argument("--slow-s", type=float, default=20.0, help="how long a slow peer stays slow")
    p.add_argument("--slow-ms", type=float, default=30.0, help="median delay of a slow peer's frames")
    p.add_argument("--rss-slope", type=float, default=2.0, help="bound on RSS growth, MiB per minute")
    p.add_argument("--fd-slope", type=float, default=1.0, help="bound on descriptor growth, per minute")
    p.add_argument("--run-timeout-s", type=float, default=60.0, help="timeout of one training step")
    p.add_argument("--faults", default=",".join(KINDS), type=lambda v: tuple(v.split(",")),
                   help="the rotation, from kill, drop, slow, ps (kill -9 of the PS)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", help="directory for events, logs and checkpoints (default: a temporary one)")
    args = p.parse_args(argv)
    bad = set(args.faults) - {"kill", "drop", "slow", "ps"}
    if bad or not args.faults:
        p.error(f"--faults: unknown kind(s) {', '.join(sorted(bad))}; choose from kill, drop, slow, ps")
    sc = parse({"name": "soak", "description": "benchmarks/soak.py", "seed": args.seed,
                "cluster": {"ps": 1, "workers": WORKERS},
                "workload": {"steps": 1 << 40, "mode": "async", "learning_rate": 0.05, "batch_size": 32,
                             "checkpoint_every": args.checkpoint_steps, "max_wait_s": 120.0},
                "expect": {}})
    out = args.out or tempfile.mkdtemp(prefix="actorflow-soak-")
    os.makedirs(out, exist_ok=True)
    plan = make_plan(args)
    print(f"soak: 1 PS + {WORKERS} workers, digits MLP (async SGD), {args.minutes:g} min, a fault every "
          f"{args.fault_every:g} s ({len([t for t in plan.triggers if t.action != 'off'])} planned: "
          f"{', '.join(args.faults)} in turn), checkpoint every {args.checkpoint_steps} steps; output in {out}",
          flush=True)
    soak = Soak(sc, plan, out, args)
    final = soak.execute()
    ok = report(soak, final, args)
    if args.out is None and ok:
        shutil.rmtree(out, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
