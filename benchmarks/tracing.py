"""What step tracing costs (issue 19). Prints, in one run, the median time of the MLP training step
of benchmarks/train_step.py (784-1024-1024-10, batch 256, SGD, loss fetched) with

- "off": no RunOptions (what every untraced step pays for the tracing hooks),
- "SOFTWARE_TRACE": RunOptions(trace_level=SOFTWARE_TRACE) with a RunMetadata (per-node times),
- "FULL_TRACE": the same plus output sizes, and the StepStats protobuf built for every step,

all three in one worker process on one session, alternating in rounds so that a change of machine
load hits them alike; and, as the baseline, "off" in a second worker process importing actorflow
from another git revision (`--baseline`, default `main`: the step before this change), exported
with `git archive`. Ratios: each mode against "off" (paired: the median over rounds of the ratio
of the round medians), and "off" against the baseline.

Targets: off within noise of the baseline; FULL_TRACE at most 1.15x off.

Run: nice -n 10 python benchmarks/tracing.py [--rounds 12] [--steps 15] [--baseline REV]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODES = ("off", "SOFTWARE_TRACE", "FULL_TRACE")


def worker() -> None:
    """Serves 'MODE N' lines on stdin with one JSON line of N step times (seconds)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from train_step import actorflow_step, make_problem

    import actorflow as af
    prob = make_problem("mlp")
    step, close = actorflow_step("mlp", prob)
    # actorflow_step's step() runs sess.run(fetches, feed); wrap the session's run to add options.
    options = {m: af.RunOptions(trace_level=getattr(af.RunOptions, m)) for m in MODES[1:]}
    sess_run = af.Session.run
    mode = {"now": "off"}

    def run(self, fetches, feed_dict=None, options_=None, run_metadata=None, timeout=None):
        if mode["now"] == "off":
            return sess_run(self, fetches, feed_dict)
        md = af.RunMetadata()
        out = sess_run(self, fetches, feed_dict, options=options[mode["now"]], run_metadata=md)
        assert md.step_stats is not None and md.step_stats.dev_stats, "tracing recorded nothing"
        return out

    af.Session.run = run
    for _ in range(3):
        step()
    print("ready", flush=True)
    for line in sys.stdin:
        name, n = line.split()
        mode["now"] = name
        times = []
        for _ in range(int(n)):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        print(json.dumps(times), flush=True)
    close()


class Worker:
    def __init__(self, pythonpath: str):
        env = dict(os.environ, PYTHONPATH=pythonpath)
        self.p = subprocess.Popen([sys.executable, __file__, "--worker"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, env=env, cwd=pythonpath)
        line = self.p.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"benchmark worker in {pythonpath} failed to start")

    def run(self, mode: str, n: int) -> list:
        self.p.stdin.write(f"{mode} {n}\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


def _export(rev: str, into: str) -> None:
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    tar_path = os.path.join(into, "src.tar")
    with open(tar_path, "wb") as f:
        f.write(data)
    with tarfile.open(tar_path) as t:
        t.extractall(into, filter="data")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--steps", type=int, default=15, help="steps per contender per round")
    ap.add_argument("--baseline", default="main", help="git revision for the baseline (off) worker")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker()
        return
    with tempfile.TemporaryDirectory() as base_dir:
        _export(args.baseline, base_dir)
        base = Worker(base_dir)
        here = Worker(str(ROOT))
        contenders = [("baseline off", base, "off")] + [(m, here, m) for m in MODES]
        rounds = {name: [] for name, _, _ in contenders}
        times = {name: [] for name, _, _ in contenders}
        for r in range(args.rounds):
            order = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
            for name, w, mode in order:
                t = w.run(mode, args.steps + 1)[1:]     # the first wakes the other worker's idle threads
                times[name] += t
                rounds[name].append(statistics.median(t))
        base.close()
        here.close()
    print(f"MLP 784-1024-1024-10 training step, {args.rounds} rounds x {args.steps} steps "
          f"(baseline: {args.baseline})")
    print(f"{'contender':<16}{'median ms/step':>16}{'vs off (paired)':>18}")
    for name, _, _ in contenders:
        med = statistics.median(times[name]) * 1e3
        ratio = statistics.median(a / b for a, b in zip(rounds[name], rounds["off"]))
        print(f"{name:<16}{med:>16.2f}{ratio:>17.3f}x")
    off_vs_base = statistics.median(a / b for a, b in zip(rounds["off"], rounds["baseline off"]))
    print(f"off vs baseline (paired): {off_vs_base:.3f}x; FULL_TRACE vs off target <= 1.15x")


if __name__ == "__main__":
    main()
