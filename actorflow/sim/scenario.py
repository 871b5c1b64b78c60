"""Scenario files: one TOML file per experiment, shipped in actorflow/sim/scenarios/ (found by name:
`actorflow sim run worker_crash`; a ./sims folder of a project's own comes first).

    name = "worker_crash"
    description = "kill -9 of a worker mid-training; restarted after 1 s, it rejoins"
    seed = 7

    [cluster]                       # the local cluster's shape
    ps = 1
    workers = 3

    [workload]                      # the digits MLP, trained between-graph by one client per worker
    steps = 400                     # global steps
    mode = "async"                  # or "sync" (SyncReplicasOptimizer)
    backup_workers = 0              # sync: aggregate workers - backup_workers gradients per step
    checkpoint_every = 50           # global steps; omit for no checkpoints

    [[faults]]                      # the fault timeline, or fault distributions
    kind = "kill"
    task = "worker:1"
    at = 0.4                        # a fraction of workload.steps; or at_step = 160; or at_time_s = 3.0
                                    # (seconds after the clients start)
    restart_after_s = 1.0

    [expect]                        # what "the system held up" means for this experiment
    final_accuracy_min = 0.9
    max_steps_lost = 60
    max_recovery_s = 10
    wall_clock_max_s = 120          # no hang
    nothing_lost = true

    [short]                         # the test suite's version: tables merged over the ones above
    workload = { steps = 150 }

`mode = "deterministic"` (top level) runs it in the simulated world (actorflow/sim/detrun.py) by
default; `actorflow sim run --deterministic` does so for any scenario. A kill or a
crash_during_save with `power_loss = true` is a power loss of the task's machine: what it had not
fsynced may be lost or torn; a crash_during_save's `stage` ("before" the save step, the default;
"write" or "rename" inside the shard writer) says where in the save it hits (both deterministic
mode only).

A scenario that exposes a bug not yet fixed says so in a top-level `known_issue = "..."`: the test
suite expects it to fail (xfail), and `actorflow sim list` shows it.

Every key and the type of every value are checked against a typed schema first (actorflow/sim/schema.py):
`steps = "600"` is an error naming the file, the key and the expected type, not a crash later.

Task names are "worker:1", "ps:0" (or "/job:worker/task:1"); `tasks` also takes "workers", "ps"
and "all". Fault kinds and their fields are listed in `FAULT_KINDS`; every error names the file and
the key at fault.
"""
from __future__ import annotations

import copy
import os
import tomllib
from dataclasses import dataclass, field

__all__ = ["Scenario", "Workload", "load", "parse", "FAULT_KINDS", "EXPECTATIONS", "resolve_task",
           "resolve_tasks", "ScenarioError", "find", "available", "packaged_dir"]

# Where a crash_during_save hits: before the task's save step runs, or inside its shard writer with
# the temporary file's header written and unsynced ("write"), or its data fsynced and not yet renamed.
SAVE_STAGES = ("before", "write", "rename")

# kind -> (required fields, optional fields)
FAULT_KINDS = {
    "kill": ({"task"}, {"at", "at_step", "at_time_s", "restart_after_s", "signal", "power_loss"}),
    "crash_during_save": ({"task"}, {"save", "restart_after_s", "stage", "power_loss"}),
    "straggler": ({"tasks"}, {"delay", "slowdown", "probability", "from_step", "to_step"}),
    "partition": ({"between"}, {"at", "at_step", "at_time_s", "duration_s", "fail_after_s"}),
    "latency": ({"tasks", "delay"}, {"peers", "from", "until", "from_step", "until_step"}),
    "bandwidth": ({"tasks", "mb_per_s"}, {"peers", "from", "until", "from_step", "until_step"}),
    "drop": ({"tasks"}, {"peers", "per_step", "at_steps", "mode", "rto_ms", "from", "until", "from_step",
                         "until_step"}),
}

EXPECTATIONS = {
    "final_accuracy_min": "test accuracy at the end at least this",
    "final_loss_max": "test loss at the end at most this",
    "max_steps_lost": "global steps rolled back by a restore, at most this",
    "max_recovery_s": "seconds from a fault's end (a partition healed, a restarted task up: its start-up is "
                      "measured apart, as restart_startup_s) to the affected workers' next steps, at most this",
    "wall_clock_max_s": "the run finishes within this many seconds (no hang)",
    "nothing_lost": "every step done, no client lost, the latest checkpoint good, every gradient accounted for",
    "min_recoveries": "session recoveries after the first step, at least this (the fault really hit)",
    "max_recoveries": "session recoveries after the first step, at most this",
    "max_startup_recoveries": "session recoveries in a client's first step (no fault causes those), at most this",
    "median_step_ms_max": "median time of a worker's step, at most this",
    "median_step_ms_min": "median time of a worker's step, at least this",
    "median_global_step_ms_max": "median interval between global steps, at most this",
    "median_global_step_ms_min": "median interval between global steps, at least this",
    "min_injected": "injected fault events, at least this (or every timed fault the seed's plan drew, when it drew fewer)",
}

_DELAY_FIELDS = {"constant": {"ms"}, "uniform": {"low_ms", "high_ms"}, "normal": {"mean_ms", "std_ms"},
                 "lognormal": {"median_ms", "sigma"}, "exponential": {"mean_ms"}, "pareto": {"scale_ms", "alpha"}}


class ScenarioError(ValueError):
    """A scenario file is not valid; the message names the file and the key."""


@dataclass(frozen=True, slots=True)
class Workload:
    """The training job of a scenario (the [workload] table)."""
    model: str = "digits_mlp"
    steps: int = 300
    mode: str = "async"
    backup_workers: int = 0
    batch_size: int = 32
    learning_rate: float = 0.1
    optimizer: str = "sgd"
    hidden: tuple = (64,)
    checkpoint_every: int | None = None
    max_wait_s: float = 60.0
    data_seed: int = 0


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    seed: int
    ps: int
    workers: int
    workload: Workload
    faults: tuple            # normalized fault tables (task names resolved, fractions kept)
    expect: dict
    path: str | None = None
    short: bool = False
    known_issue: str = ""    # a scenario that currently exposes a bug says which, until it is fixed
    mode: str = "real"       # "real" processes on loopback, or "deterministic" (the simulated world)
    doc: dict = field(default_factory=dict, compare=False)   # the merged document, for the run's record

    def task_names(self) -> list:
        return [f"/job:ps/task:{i}" for i in range(self.ps)] + [f"/job:worker/task:{i}" for i in range(self.workers)]


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def resolve_task(ref, ps: int, workers: int, where: str) -> str:
    """'worker:1' or '/job:worker/task:1' -> '/job:worker/task:1', checked against the cluster."""
    if not isinstance(ref, str):
        raise ScenarioError(f"{where}: a task is a string like 'worker:1', got {ref!r}")
    if ref.startswith("/job:"):
        try:
            job = ref.split("/")[1][4:]
            idx = int(ref.split("/")[2][5:])
        except (IndexError, ValueError):
            raise ScenarioError(f"{where}: cannot read task '{ref}'") from None
    else:
        job, _, i = ref.partition(":")
        try:
            idx = int(i)
        except ValueError:
            raise ScenarioError(f"{where}: task '{ref}' must be job:index, e.g. 'worker:1' or 'ps:0'") from None
    size = {"ps": ps, "worker": workers}.get(job)
    if size is None:
        raise ScenarioError(f"{where}: no job '{job}' in the cluster (jobs: ps, worker)")
    if not 0 <= idx < size:
        raise ScenarioError(f"{where}: task '{ref}' is outside the cluster ({size} {job} task(s))")
    return f"/job:{job}/task:{idx}"


def resolve_tasks(refs, ps: int, workers: int, where: str) -> list:
    """A list of task references, or "workers", "ps", "all" -> task names."""
    groups = {"workers": [f"/job:worker/task:{i}" for i in range(workers)],
              "ps": [f"/job:ps/task:{i}" for i in range(ps)]}
    groups["all"] = groups["ps"] + groups["workers"]
    if isinstance(refs, str):
        if refs in groups:
            return groups[refs]
        refs = [refs]
    if not isinstance(refs, list) or not refs:
        raise ScenarioError(f"{where}: expected a task list, or one of 'workers', 'ps', 'all'")
    out = []
    for r in refs:
        for t in (groups[r] if r in groups else [resolve_task(r, ps, workers, where)]):
            if t not in out:
                out.append(t)
    return out


def _check_delay(d, where):
    if not isinstance(d, dict):
        raise ScenarioError(f"{where}: a delay is a table like {{ dist = \"lognormal\", median_ms = 20, sigma = 0.5 }}")
    dist = d.get("dist", "constant")
    need = _DELAY_FIELDS.get(dist)
    if need is None:
        raise ScenarioError(f"{where}: unknown dist '{dist}' (one of {', '.join(_DELAY_FIELDS)})")
    missing = need - set(d)
    if missing:
        raise ScenarioError(f"{where}: dist '{dist}' needs {', '.join(sorted(missing))}")


def _fault(raw, i, ps, workers, steps, where) -> dict:
    w = f"{where}: faults[{i}]"
    if not isinstance(raw, dict) or "kind" not in raw:
        raise ScenarioError(f"{w}: every [[faults]] table needs a kind ({', '.join(FAULT_KINDS)})")
    kind = raw["kind"]
    if kind not in FAULT_KINDS:
        raise ScenarioError(f"{w}: unknown kind '{kind}' (one of {', '.join(FAULT_KINDS)})")
    req, opt = FAULT_KINDS[kind]
    missing = req - set(raw)
    if missing:
        raise ScenarioError(f"{w} ({kind}): missing {', '.join(sorted(missing))}")
    unknown = set(raw) - req - opt - {"kind"}
    if unknown:
        raise ScenarioError(f"{w} ({kind}): unknown field(s) {', '.join(sorted(unknown))}; "
                            f"allowed: {', '.join(sorted(req | opt))}")
    from actorflow.sim.schema import check_fault
    check_fault(raw, kind, f"faults[{i}]", where)
    f = dict(raw)
    f["id"] = i
    if "task" in f:
        f["task"] = resolve_task(f["task"], ps, workers, f"{w}.task")
    if "tasks" in f:
        f["tasks"] = resolve_tasks(f["tasks"], ps, workers, f"{w}.tasks")
    if "peers" in f:
        f["peers"] = resolve_tasks(f["peers"], ps, workers, f"{w}.peers")
    if kind == "partition":
        b = f["between"]
        if not (isinstance(b, list) and len(b) == 2):
            raise ScenarioError(f"{w}.between: two sides, e.g. [[\"worker:1\"], [\"ps:0\"]]")
        f["between"] = [resolve_tasks(side, ps, workers, f"{w}.between") for side in b]
        if set(f["between"][0]) & set(f["between"][1]):
            raise ScenarioError(f"{w}.between: a task cannot be on both sides")
    if kind in ("kill", "partition"):
        if sum(k in f for k in ("at", "at_step", "at_time_s")) != 1:
            raise ScenarioError(f"{w} ({kind}): give exactly one of at (fraction of the steps), at_step, at_time_s")
    if "at" in f and not 0.0 <= float(f["at"]) <= 1.0:
        raise ScenarioError(f"{w}.at: a fraction of workload.steps, between 0 and 1")
    if kind == "straggler":
        if ("delay" in f) == ("slowdown" in f):
            raise ScenarioError(f"{w} (straggler): give delay (a distribution) or slowdown (a factor), not both")
        if "slowdown" in f and float(f["slowdown"]) < 1.0:
            raise ScenarioError(f"{w}.slowdown: a factor >= 1")
        if not 0.0 <= float(f.get("probability", 1.0)) <= 1.0:
            raise ScenarioError(f"{w}.probability: between 0 and 1")
    if "delay" in f:
        _check_delay(f["delay"], f"{w}.delay")
    if kind == "drop":
        if ("per_step" in f) == ("at_steps" in f):
            raise ScenarioError(f"{w} (drop): give per_step (a probability per global step) or at_steps, not both")
        if f.get("mode", "retransmit") not in ("retransmit", "reset"):
            raise ScenarioError(f"{w}.mode: 'retransmit' (held for rto_ms, as TCP) or 'reset' (the connection fails)")
    if kind == "bandwidth" and float(f["mb_per_s"]) <= 0:
        raise ScenarioError(f"{w}.mb_per_s: positive")
    if kind == "crash_during_save":
        if not f["task"].startswith("/job:ps/"):
            raise ScenarioError(f"{w}.task: checkpoints are written by parameter servers; name a ps task")
        if int(f.get("save", 1)) < 1:
            raise ScenarioError(f"{w}.save: the n-th save on that task, from 1")
        if f.get("stage", "before") not in SAVE_STAGES:
            raise ScenarioError(f"{w}.stage: one of {', '.join(SAVE_STAGES)}, got {f['stage']!r}")
    return f


def parse(doc: dict, path: str | None = None, short: bool = False) -> Scenario:
    """A Scenario from a parsed TOML document; `short` merges its [short] table first."""
    where = path or "<scenario>"
    from actorflow.sim.schema import check
    check(doc, where)      # every key known, every value of its type: one line naming the key otherwise
    doc = dict(doc)
    short_doc = doc.pop("short", None)
    if short:
        if short_doc is None:
            raise ScenarioError(f"{where}: has no [short] table (the test suite's version of the scenario)")
        doc = _merge(doc, short_doc)
    unknown = set(doc) - {"name", "description", "seed", "cluster", "workload", "faults", "expect", "known_issue",
                          "mode"}
    if unknown:
        raise ScenarioError(f"{where}: unknown top-level key(s) {', '.join(sorted(unknown))}")
    cl = doc.get("cluster", {})
    ps, workers = int(cl.get("ps", 1)), int(cl.get("workers", 2))
    if ps < 1 or workers < 1:
        raise ScenarioError(f"{where}: [cluster] needs ps >= 1 and workers >= 1")
    wl_doc = dict(doc.get("workload", {}))
    known = set(Workload.__dataclass_fields__)
    bad = set(wl_doc) - known
    if bad:
        raise ScenarioError(f"{where}: [workload] unknown key(s) {', '.join(sorted(bad))}; allowed: "
                            f"{', '.join(sorted(known))}")
    if "hidden" in wl_doc:
        wl_doc["hidden"] = tuple(int(h) for h in wl_doc["hidden"])
    wl = Workload(**wl_doc)
    if wl.mode not in ("async", "sync"):
        raise ScenarioError(f"{where}: workload.mode is 'async' or 'sync', got '{wl.mode}'")
    if wl.model != "digits_mlp":
        raise ScenarioError(f"{where}: workload.model: only 'digits_mlp' is available")
    if wl.optimizer not in ("sgd", "momentum", "adam"):
        raise ScenarioError(f"{where}: workload.optimizer is sgd, momentum or adam")
    if not 0 <= wl.backup_workers < workers:
        raise ScenarioError(f"{where}: workload.backup_workers must leave at least one worker to aggregate")
    if wl.backup_workers and wl.mode != "sync":
        raise ScenarioError(f"{where}: backup workers only make sense with mode = 'sync'")
    faults = tuple(_fault(f, i, ps, workers, wl.steps, where) for i, f in enumerate(doc.get("faults", [])))
    expect = dict(doc.get("expect", {}))
    bad = set(expect) - set(EXPECTATIONS)
    if bad:
        raise ScenarioError(f"{where}: [expect] unknown key(s) {', '.join(sorted(bad))}; allowed: "
                            f"{', '.join(EXPECTATIONS)}")
    name = doc.get("name") or (os.path.splitext(os.path.basename(path))[0] if path else "scenario")
    mode = doc.get("mode", "real")
    if mode not in ("real", "deterministic"):
        raise ScenarioError(f"{where}: mode is 'real' (processes on loopback) or 'deterministic' (the simulated "
                            f"world), got {mode!r}")
    return Scenario(name=name, description=doc.get("description", ""), seed=int(doc.get("seed", 0)), ps=ps,
                    workers=workers, workload=wl, faults=faults, expect=expect, path=path, short=short,
                    known_issue=str(doc.get("known_issue", "")), mode=mode, doc=doc)


def load(path: str, short: bool = False) -> Scenario:
    """Reads and validates a scenario file; ScenarioError naming the file when it is missing, unreadable,
    not TOML or not a valid scenario."""
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file") from None
    except IsADirectoryError:
        raise ScenarioError(f"{path}: a directory, not a scenario file") from None
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read it: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path}: not valid TOML: {e}") from None
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{path}: not a text file ({e.reason})") from None
    return parse(doc, path, short)


def packaged_dir() -> str:
    """The scenarios shipped inside the package (actorflow/sim/scenarios), in a wheel and in a checkout."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "scenarios")


def search_dirs(extra: str | None = None) -> list:
    """Where scenario names are looked up, first match wins: `extra` (a --dir), ./sims (a project's own
    scenarios), then the packaged ones."""
    dirs = [extra] if extra else []
    dirs += [os.path.join(os.getcwd(), "sims"), packaged_dir()]
    out = []
    for d in dirs:
        if d and os.path.isdir(d) and os.path.abspath(d) not in [os.path.abspath(x) for x in out]:
            out.append(d)
    return out


def available(extra: str | None = None) -> dict:
    """{scenario name: file} over `search_dirs`, earlier directories shadowing later ones."""
    found: dict = {}
    for d in search_dirs(extra):
        for name in sorted(os.listdir(d)):
            if name.endswith(".toml"):
                found.setdefault(name[:-5], os.path.join(d, name))
    return found


def find(ref: str, extra: str | None = None) -> str:
    """The file of scenario `ref`: a path to a file as given, else a name (`worker_crash`, or
    `worker_crash.toml`) looked up in `search_dirs`. ScenarioError listing the known names otherwise."""
    if os.path.isfile(ref):
        return ref
    looks_like_path = os.sep in ref or (os.altsep and os.altsep in ref)
    name = os.path.basename(ref)
    name = name[:-5] if name.endswith(".toml") else name
    known = available(extra)
    if name in known and not looks_like_path:
        return known[name]
    if looks_like_path:
        raise ScenarioError(f"{ref}: no such scenario file" + (f" (a packaged scenario is named {name}: "
                                                                f"`actorflow sim run {name}`)" if name in known else ""))
    raise ScenarioError(f"no scenario named '{ref}'; known: {', '.join(known) or 'none'}")
