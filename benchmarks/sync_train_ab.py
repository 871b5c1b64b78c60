"""A/B of one training step on the actors against the synchronous training path
(actors/sync_step.py, SyncTrainProgram), in one process, steps alternating, so that a loaded
machine's noise falls on both alike.

Three sessions of the same graph: `actors` (AF_SYNC_TRAIN off when built), `sync` (the caller's
thread runs the step, split kernels shared with the pool), and `kernels` (the synchronous path with
no splitting and no pool: the kernels alone, one after another in one thread, i.e. the step's work
without any runtime overhead or parallelism). Reports wall time per step (median, p10, min), CPU
time per step (process_time: every thread), and CPU per step by thread (main, runtime loop, pool)
read from /proc, whose sums are less noisy than wall time on a shared machine.

    python benchmarks/sync_train_ab.py --model mlp --reps 60
    python benchmarks/sync_train_ab.py --model convnet --reps 20
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _thread_cpu_ticks() -> dict:
    """{"main" | "loop" | "pool" | "other": CPU clock ticks so far} of this process's threads (Linux)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        name = names.get(int(tid), "")
        group = ("main" if name == "MainThread" else "pool" if name.startswith("actorflow-kernel")
                 else "loop" if name == "actorflow-runtime" else "other")
        out[group] = out.get(group, 0) + int(fields[11]) + int(fields[12])
    return out


def build(model):
    sys.path.insert(0, HERE)
    import train_step as ts
    return ts.actorflow_graph(model, ts.make_problem(model))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=("mlp", "convnet"), default="mlp")
    ap.add_argument("--reps", type=int, default=40, help="steps per variant")
    args = ap.parse_args()
    import actorflow as af
    import actorflow.actors.sync_step as ss

    class KernelsOnly(ss.SyncTrainProgram):
        __slots__ = ()

        def _big(self, actor, a, split_ok):
            return actor.fn(*a)

    g, initializer, fetches, feed = build(args.model)
    sessions = {}
    for name in ("actors", "sync", "kernels"):
        ss.TRAINING_STEPS = name != "actors"
        s = af.Session(graph=g)
        s.run(initializer)
        for _ in range(3):
            s.run(fetches, feed)
        kinds = {type(e.sync).__name__ for e in s._cache.values()}
        if name == "kernels":
            for e in s._cache.values():
                if type(e.sync) is ss.SyncTrainProgram:
                    e.sync.__class__ = KernelsOnly
        sessions[name] = s
        print(f"{name}: programs {sorted(kinds)}")
    names = list(sessions)
    wall = {n: [] for n in names}
    cpu = {n: [] for n in names}
    ticks = {n: {} for n in names}
    for r in range(args.reps):
        for n in names[r % 3:] + names[:r % 3]:
            s = sessions[n]
            t0 = _thread_cpu_ticks()
            w0, c0 = time.perf_counter(), time.process_time()
            s.run(fetches, feed)
            wall[n].append((time.perf_counter() - w0) * 1e3)
            cpu[n].append((time.process_time() - c0) * 1e3)
            t1 = _thread_cpu_ticks()
            for k, v in t1.items():
                ticks[n][k] = ticks[n].get(k, 0) + v - t0.get(k, 0)
    hz = os.sysconf("SC_CLK_TCK")
    print(f"{args.model}, {args.reps} steps each, alternating; load average {os.getloadavg()[0]:.1f}")
    for n in names:
        w = sorted(wall[n])
        by_thread = {k: round(v * 1e3 / hz / args.reps, 2) for k, v in sorted(ticks[n].items()) if v}
        print(f"  {n:8s} wall median {statistics.median(w):7.2f} p10 {w[len(w) // 10]:7.2f} min {w[0]:7.2f} ms; "
              f"cpu median {statistics.median(cpu[n]):7.2f} ms/step; cpu by thread {by_thread}")


if __name__ == "__main__":
    main()
