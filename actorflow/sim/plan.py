"""The fault timeline of a run: drawn from a scenario and a seed, or read back from a recorded run.

A `Plan` has two halves:
- `triggers`, what the harness does at a global step or a time: kill a task (and restart it after a
  delay), partition two sets of tasks (and heal them after a duration), drop one frame, switch a
  latency or bandwidth window on or off;
- `task_faults`, what the task processes do by themselves (actorflow/sim/faults.py): straggler
  delays per training step, a crash during a checkpoint save, latency and bandwidth
  conditions, and which tasks must watch for the harness's commands.

Every random choice is drawn here or in the task's injector from a generator seeded by (seed, fault
index, task): the same scenario and seed give the same plan. `Plan.from_events` rebuilds the plan of
a recorded run from its events.jsonl, with the recorded straggler delays in place of new draws, so
a replay injects what the recorded run injected, at the same steps.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from actorflow.sim.faults import task_seed
from actorflow.sim.scenario import Scenario

__all__ = ["Trigger", "Plan", "INJECTED", "fault_sequence"]

# Event kinds that are injected faults (the rest are observations: recoveries, summaries, exits).
INJECTED = ("kill", "restart", "partition", "heal", "drop", "condition_on", "condition_off", "straggler",
            "crash_during_save")


@dataclass(slots=True)
class Trigger:
    """One harness action: at global step `at_step`, or `at_time_s` seconds after training starts."""
    fault: int
    action: str                  # kill | partition | drop | on | off
    at_step: int | None = None
    at_time_s: float | None = None
    params: dict = field(default_factory=dict)

    def sort_key(self):
        return (self.at_step if self.at_step is not None else float("inf"),
                self.at_time_s if self.at_time_s is not None else float("inf"), self.fault)


@dataclass(slots=True)
class Plan:
    seed: int
    triggers: list
    task_faults: list
    crash_restarts: dict         # task -> seconds before the harness restarts a task that crashed itself
    replay_of: str | None = None

    # -- from a scenario ---------------------------------------------------------------------------------
    @classmethod
    def from_scenario(cls, sc: Scenario, seed: int | None = None) -> "Plan":
        """Draws the plan of `sc` with `seed` (default: the scenario's)."""
        seed = sc.seed if seed is None else int(seed)
        steps = sc.workload.steps
        triggers, task_faults, crash_restarts = [], [], {}

        def at(f):
            if "at" in f:
                return {"at_step": max(1, int(round(float(f["at"]) * steps)))}
            if "at_step" in f:
                return {"at_step": int(f["at_step"])}
            return {"at_time_s": float(f["at_time_s"])}

        def window(f):
            lo = f.get("from_step", int(round(float(f["from"]) * steps)) if "from" in f else None)
            hi = f.get("until_step", int(round(float(f["until"]) * steps)) if "until" in f else None)
            return lo, hi

        for f in sc.faults:
            kind, fid = f["kind"], f["id"]
            if kind == "kill":
                params = {"task": f["task"], "signal": int(f.get("signal", 9)), "restart_after_s": f.get("restart_after_s")}
                if f.get("power_loss"):
                    params["power_loss"] = True
                triggers.append(Trigger(fid, "kill", params=params, **at(f)))
            elif kind == "crash_during_save":
                tf = {"id": fid, "kind": kind, "tasks": [f["task"]], "save": int(f.get("save", 1))}
                for k in ("stage", "power_loss"):
                    if k in f:
                        tf[k] = f[k]
                task_faults.append(tf)
                crash_restarts[f["task"]] = f.get("restart_after_s")
            elif kind == "straggler":
                tf = {"id": fid, "kind": kind, "tasks": f["tasks"], "probability": float(f.get("probability", 1.0))}
                for k in ("delay", "slowdown", "from_step", "to_step"):
                    if k in f:
                        tf[k] = f[k]
                task_faults.append(tf)
            elif kind == "partition":
                a, b = f["between"]
                triggers.append(Trigger(fid, "partition", params={
                    "a": a, "b": b, "duration_s": f.get("duration_s"), "fail_after_s": f.get("fail_after_s")}, **at(f)))
                task_faults.append({"id": fid, "kind": kind, "tasks": a + b})
            elif kind in ("latency", "bandwidth"):
                lo, hi = window(f)
                tf = {"id": fid, "kind": kind, "tasks": f["tasks"], "controlled": lo is not None or hi is not None}
                for k in ("delay", "mb_per_s", "peers"):
                    if k in f:
                        tf[k] = f[k]
                task_faults.append(tf)
                if tf["controlled"]:
                    triggers.append(Trigger(fid, "on", at_step=lo or 0))
                    if hi is not None:
                        triggers.append(Trigger(fid, "off", at_step=hi))
            elif kind == "drop":
                task_faults.append({"id": fid, "kind": kind, "tasks": f["tasks"]})
                triggers.extend(cls._drops(f, seed, steps, window(f)))
        triggers.sort(key=Trigger.sort_key)
        return cls(seed, triggers, task_faults, crash_restarts)

    @staticmethod
    def _drops(f, seed, steps, win):
        """Drop episodes: per global step a draw of whether, from which sender and to which peer."""
        rng = np.random.default_rng(task_seed(seed, f["id"], "plan"))
        senders, peers = f["tasks"], f.get("peers")
        lo, hi = win
        lo = 1 if lo is None else max(1, lo)
        hi = steps if hi is None else min(steps, hi)
        explicit = set(int(s) for s in f.get("at_steps", ()))
        out, episode = [], 0
        for s in range(lo, hi):
            u = rng.random()
            sender = senders[int(rng.integers(len(senders)))]
            peer = peers[int(rng.integers(len(peers)))] if peers else None
            if (s in explicit) if explicit else u < float(f["per_step"]):
                out.append(Trigger(f["id"], "drop", at_step=s, params={
                    "task": sender, "peer": peer, "mode": f.get("mode", "retransmit"),
                    "rto_ms": float(f.get("rto_ms", 200.0)), "episode": episode}))
                episode += 1
        return out

    # -- from a recorded run ------------------------------------------------------------------------------
    @classmethod
    def from_events(cls, sc: Scenario, seed: int, events: list, replay_of: str | None = None) -> "Plan":
        """The recorded run's plan: its triggers at their recorded steps and its straggler delays."""
        base = cls.from_scenario(sc, seed)
        triggers = []
        schedules: dict = {}
        for ev in events:
            k = ev["kind"]
            fid = ev.get("fault")
            where = {"at_step": ev.get("at_step"), "at_time_s": ev.get("at_time_s")}
            if k == "kill":
                triggers.append(Trigger(fid, "kill", params={"task": ev["task"], "signal": ev.get("signal", 9),
                                                             "restart_after_s": ev.get("restart_after_s")}, **where))
            elif k == "partition":
                triggers.append(Trigger(fid, "partition", params={
                    "a": ev["a"], "b": ev["b"], "duration_s": ev.get("duration_s"),
                    "fail_after_s": ev.get("fail_after_s")}, **where))
            elif k == "drop":
                triggers.append(Trigger(fid, "drop", at_step=ev["at_step"], params={
                    "task": ev["task"], "peer": ev.get("peer"), "mode": ev.get("mode", "retransmit"),
                    "rto_ms": ev.get("rto_ms", 200.0), "episode": ev.get("episode")}))
            elif k in ("condition_on", "condition_off"):
                triggers.append(Trigger(fid, "on" if k == "condition_on" else "off", at_step=ev.get("at_step")))
            elif k == "straggler":
                sched = schedules.setdefault(fid, {}).setdefault(ev["task"], {})
                sched[str(ev["local_step"])] = ev["delay_ms"]
        task_faults = []
        for tf in base.task_faults:
            tf = dict(tf)
            if tf["kind"] == "straggler":
                tf["schedule"] = schedules.get(tf["id"], {})
            task_faults.append(tf)
        triggers.sort(key=Trigger.sort_key)
        return cls(seed, triggers, task_faults, base.crash_restarts, replay_of)

    def task_config(self, addresses: dict, events_dir: str, control_dir: str, base_step_ms: float, marker: str,
                    step_feed: str) -> dict:
        """The document the task processes read from $ACTORFLOW_FAULTS."""
        return {"seed": self.seed, "events_dir": events_dir, "control_dir": control_dir, "tasks": addresses,
                "marker": marker, "step_feed": step_feed, "base_step_ms": base_step_ms, "faults": self.task_faults}


def _key(ev):
    k = ev["kind"]
    f = ev.get("fault")
    if k == "kill":
        return (k, f, ev.get("task"), ev.get("at_step"), ev.get("at_time_s"))
    if k == "restart":
        return (k, f, ev.get("task"))
    if k == "partition":
        return (k, f, tuple(ev.get("a", ())), tuple(ev.get("b", ())), ev.get("at_step"), ev.get("at_time_s"),
                ev.get("duration_s"))
    if k == "heal":
        return (k, f)
    if k == "drop":
        return (k, f, ev.get("episode"), ev.get("task"), ev.get("peer"), ev.get("at_step"), ev.get("mode"))
    if k in ("condition_on", "condition_off"):
        return (k, f, ev.get("at_step"))
    if k == "straggler":
        return (k, f, ev.get("task"), ev.get("local_step"), ev.get("delay_ms"))
    if k == "crash_during_save":
        return (k, f, ev.get("task"), ev.get("save"))
    return (k, f)


def fault_sequence(events) -> list:
    """The injected faults of an event log, without their wall-clock times, in a canonical order:
    two runs of one scenario with one seed, or a run and its replay, give equal sequences. A fault
    injected again (a straggler's delay when its step is retried after a failure) counts once."""
    return sorted({_key(e) for e in events if e.get("kind") in INJECTED}, key=repr)
