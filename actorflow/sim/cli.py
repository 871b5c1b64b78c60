"""`actorflow sim ...`: list, run and replay scenarios; the discrete-event model and its calibration.

Registered by actorflow/cli.py (`add_parser`). Every import beyond argparse happens inside the
commands: `actorflow worker` processes load this module too.
"""
from __future__ import annotations

import argparse
import os
import sys

__all__ = ["add_parser"]


def _list(args) -> int:
    from actorflow.console import print_table
    from actorflow.sim.scenario import ScenarioError, available, load, search_dirs
    if args.dir and not os.path.isdir(args.dir):
        print(f"actorflow sim list: {args.dir}: no such directory", file=sys.stderr)
        return 2
    found = available(args.dir)
    if not found:
        print(f"no scenarios in {', '.join(search_dirs(args.dir)) or args.dir}", file=sys.stderr)
        return 1
    bad = 0
    rows, notes = [], []
    for name, f in found.items():
        try:
            sc = load(f)
        except ScenarioError as e:
            rows.append((name, "INVALID", "", "", ""))
            notes.append(str(e))
            bad += 1
            continue
        mode = sc.workload.mode + (f"+{sc.workload.backup_workers} backup" if sc.workload.backup_workers else "")
        kinds = ",".join(sorted({f['kind'] for f in sc.faults})) or "none"
        rows.append((name, f"{sc.ps} ps, {sc.workers} workers", mode, kinds,
                     sc.description + (f" KNOWN ISSUE: {sc.known_issue}" if sc.known_issue else "")))
    print_table(["scenario", "cluster", "mode", "faults", "description"], rows)
    print(f"from {', '.join(search_dirs(args.dir))}; run one with `actorflow sim run NAME`")
    for n in notes:
        print(f"INVALID {n}", file=sys.stderr)
    return 1 if bad else 0


def _pin_hash_seed() -> None:
    """Deterministic runs need one string hash order: re-runs this command with PYTHONHASHSEED=0
    (a set of task names iterates in the same order in every process)."""
    if os.environ.get("PYTHONHASHSEED") != "0":
        env = dict(os.environ, PYTHONHASHSEED="0")
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, "-m", "actorflow.cli"] + sys.argv[1:], env)


def _seeds(text: str) -> list:
    """'1-1000' or '1,5,9' or '3' -> seeds."""
    out = []
    for part in text.split(","):
        lo, sep, hi = part.partition("-")
        try:
            out.extend(range(int(lo), int(hi) + 1) if sep else [int(lo)])
        except ValueError:
            raise SystemExit(f"--seeds: '{part}' is not a seed or a range like 1-1000") from None
    return out


def _deterministic(args) -> bool:
    if args.deterministic:
        return True
    from actorflow.sim.scenario import ScenarioError, load
    try:
        return load(args.scenario).mode == "deterministic"
    except (ScenarioError, OSError):
        return False


def _run(args) -> int:
    from actorflow.sim.scenario import ScenarioError, find
    try:
        args.scenario = find(args.scenario, args.dir)     # a name, or a file
        if args.seeds is not None or _deterministic(args):
            _pin_hash_seed()
            if args.seeds is not None:
                return _sweep(args)
            from actorflow.sim.detrun import run_scenario_deterministic
            res = run_scenario_deterministic(args.scenario, seed=args.seed, out_dir=args.out, short=args.short)
            _summary(res)
            if not res.passed:
                print(f"replay: actorflow sim replay {res.out_dir}")
            return 0 if res.passed else 1
        from actorflow.sim.runner import run_scenario
        res = run_scenario(args.scenario, seed=args.seed, out_dir=args.out, short=args.short,
                           progress=not args.quiet)
    except ScenarioError as e:
        print(f"actorflow sim run: {e}", file=sys.stderr)
        return 2
    _summary(res)
    return 0 if res.passed else 1


def _sweep(args) -> int:
    import time

    from actorflow.sim.detrun import sweep
    seeds = _seeds(args.seeds)
    root = args.out or os.path.join("runs", f"sweep-{os.path.splitext(os.path.basename(args.scenario))[0]}")
    t0 = time.perf_counter()

    def progress(seed, res, d):
        if not res.passed and not args.quiet:
            failed = ", ".join(c.name for c in res.checks if not c.ok)
            print(f"seed {seed}: FAILED ({failed}); replay: actorflow sim replay {d}", flush=True)
    results = sweep(args.scenario, seeds, root, short=args.short, progress=progress)
    bad = [r for r in results if not r[1]]
    wall = time.perf_counter() - t0
    print(f"{len(results) - len(bad)} of {len(results)} seeds passed in {wall:.1f} s "
          f"({len(results) / max(wall, 1e-9) * 60:.0f} seeds per minute)")
    for seed, _, d, failed in bad:
        print(f"  seed {seed}: {', '.join(failed)}  ->  actorflow sim replay {d}")
    return 1 if bad else 0


def _recorded_mode(run_dir: str) -> str:
    import json
    try:
        with open(os.path.join(run_dir, "scenario.json")) as f:
            return json.load(f).get("mode", "real")
    except (OSError, ValueError):
        return "real"


def _replay(args) -> int:
    from actorflow.sim.scenario import ScenarioError
    if not os.path.isfile(os.path.join(args.dir, "scenario.json")):
        print(f"actorflow sim replay: {args.dir}: not a recorded run (no scenario.json; give the --out "
              "directory of an `actorflow sim run`)", file=sys.stderr)
        return 2
    if _recorded_mode(args.dir) == "deterministic":
        _pin_hash_seed()
        from actorflow.sim.detrun import replay_deterministic
        try:
            res = replay_deterministic(args.dir, out_dir=args.out)
        except (ScenarioError, ValueError, OSError) as e:
            print(f"actorflow sim replay: {e}", file=sys.stderr)
            return 2
        _summary(res)
        print(f"replay {'matches' if res.metrics.get('replay_matches') else 'DIFFERS FROM'} the recorded events")
        return 0 if res.passed else 1
    from actorflow.sim.runner import replay
    try:
        res = replay(args.dir, out_dir=args.out, progress=not args.quiet)
    except (ScenarioError, ValueError, OSError) as e:
        print(f"actorflow sim replay: {e}", file=sys.stderr)
        return 2
    _summary(res)
    return 0 if res.passed else 1


def _shrink(args) -> int:
    _pin_hash_seed()
    from actorflow.sim.detrun import shrink

    def progress(plan, fails):
        if not args.quiet:
            print(f"  {len(plan.triggers)} triggers, {len(plan.task_faults)} task faults: "
                  f"{'still fails' if fails else 'passes'}", flush=True)
    plan, res = shrink(args.dir, out_dir=args.out, progress=progress)
    print(f"minimal plan: {len(plan.triggers)} trigger(s) {[(t.action, t.fault, t.at_step, t.at_time_s) for t in plan.triggers]}, "
          f"task faults {[f['id'] for f in plan.task_faults]}")
    _summary(res)
    print(f"replay: actorflow sim replay {res.out_dir}")
    return 0


def _summary(res) -> None:
    from actorflow.console import print_table
    print_table(["result", "expectation", "observed", "bound", "note"],
                [("PASS" if c.ok else "FAIL", c.name, c.observed_text, c.bound_text, c.note) for c in res.checks])
    if getattr(res, "plot_note", None):
        print(f"note: the report has no timeline plot: {res.plot_note}")
    print(f"{'passed' if res.passed else 'FAILED'}: {res.scenario.name}; report in {os.path.join(res.out_dir, 'report.md')}")


def _model(args) -> int:
    from actorflow.sim.model import main as model_main
    return model_main(args)


def _calibrate(args) -> int:
    from actorflow.sim.calibration import main as calibrate_main
    return calibrate_main(args)


def add_parser(sub) -> argparse.ArgumentParser:
    """Adds `sim` and its subcommands to the `actorflow` command's subparsers."""
    from actorflow.console import HelpFormatter, subparser
    s = sub.add_parser("sim", help="the simulator harness: fault-injection scenarios and a discrete-event model",
                       description="Fault-injection scenarios on a local cluster, their replay, and a "
                                   "discrete-event model of the coordination protocols.", formatter_class=HelpFormatter)
    ssub = s.add_subparsers(dest="sim_cmd", required=True)
    ls = subparser(ssub, "list", "the scenarios that `sim run NAME` finds: ./sims, then the packaged ones")
    ls.add_argument("--dir", help="a scenario directory searched first")
    ls.set_defaults(fn=_list)
    r = subparser(ssub, "run", "run a scenario on a local cluster; exit status 1 if an expectation fails, 2 if "
                               "the scenario is invalid")
    r.add_argument("scenario", help="a scenario name (e.g. worker_crash; `actorflow sim list` shows them) or a "
                                    "scenario file")
    r.add_argument("--dir", help="a scenario directory searched first for NAME")
    r.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    r.add_argument("--out", default=None, help="output directory (default runs/NAME-SEED-TIME)")
    r.add_argument("--short", action="store_true", help="the scenario's [short] version (the test suite's)")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.add_argument("--deterministic", action="store_true",
                   help="in the simulated world: the real code in one process in virtual time, one seed one history")
    r.add_argument("--seeds", default=None, metavar="A-B",
                   help="deterministic sweep over seeds (1-1000, or 1,5,9): reports the failing seeds and their replays")
    r.set_defaults(fn=_run)
    rp = subparser(ssub, "replay", "run a recorded run's fault timeline again, exactly")
    rp.add_argument("dir", help="the recorded run's output directory")
    rp.add_argument("--out", default=None, help="output directory (default DIR/replay-TIME)")
    rp.add_argument("--quiet", action="store_true", help="no progress bar")
    rp.set_defaults(fn=_replay)
    sh = subparser(ssub, "shrink", "reduce a failing deterministic run's faults to a minimal plan that still fails")
    sh.add_argument("dir", help="the failing run's output directory")
    sh.add_argument("--out", default=None, help="output directory of the minimal run (default DIR/shrunk)")
    sh.add_argument("--quiet", action="store_true", help="print only the result")
    sh.set_defaults(fn=_shrink)
    m = subparser(ssub, "model", "discrete-event model of the coordination protocols, in virtual time")
    m.add_argument("--calibration", default=None, help="calibration JSON (default: the one shipped, measured here)")
    m.add_argument("--figure", choices=["8", "9", "validate", "all"], default="all",
                   help="8: backup workers; 9: PS scaling; validate: against real runs (table)")
    m.add_argument("--workers", type=int, default=None, help="figure 8: workers to aggregate (N; default 50)")
    m.add_argument("--steps", type=int, default=None, help="simulated steps per point (default: each figure's)")
    m.add_argument("--seed", type=int, default=0, help="seed of the model's random draws")
    m.add_argument("--measure", action="store_true",
                   help="validate: measure real runs now (2, 4, 8 workers) instead of the calibration file's")
    m.set_defaults(fn=_model)
    c = subparser(ssub, "calibrate", "measure step, PS-update and network costs on a local cluster")
    c.add_argument("--out", default=None, help="calibration JSON to write (default: print only)")
    c.add_argument("--steps", type=int, default=150, help="steps per measurement")
    c.add_argument("--validate", default="2,4,8", help="worker counts of the real runs to store for validation")
    c.set_defaults(fn=_calibrate)
    return s
