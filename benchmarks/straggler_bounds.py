"""Where the straggler scenarios' step-time bounds come from: the protocol's model, run on the
scenarios' own parameters (no measurement, no cluster).

`stragglers_backup.toml` (5 workers, N = 4 of 5 gradients per step) and `stragglers_no_backup.toml`
(4 workers, all 4) bound the job's median step time (`median_global_step_ms_max` / `_min`). This
script draws, per seed, each worker's step times (a base step with 15% noise, plus with the
scenario's probability a delay from its lognormal) and runs SyncReplicasOptimizer's protocol on
them: a step completes with its N-th fresh gradient; the workers that contributed wait for that
and then start the next step; a worker whose gradient is stale (its step is over) starts again at
once on the current step. It prints, over many seeds, the quantiles of the median interval between
successive global steps: the same statistic the scenario checks.

A straggle (~150 ms) spans many ~4 ms steps, so the steps are not independent: a step waits
whenever a second worker straggles before the first is back, far more often than "2 of 5 at once".

    python benchmarks/straggler_bounds.py [--seeds 5000] [--base-ms 4] [--steps 150]
"""
from __future__ import annotations

import argparse
import heapq
import math
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from actorflow.sim.scenario import load, packaged_dir  # noqa: E402

WARMUP = 2


def median_step_ms(seed: int, workers: int, n: int, steps: int, p: float, median_ms: float, sigma: float,
                   base_ms: float) -> float:
    r = random.Random(seed)
    events, admitted, done = [], [], {}
    g = 0

    def start(w, t, k):
        d = base_ms * (1 + 0.15 * r.gauss(0, 1))
        if r.random() < p:
            d += median_ms * math.exp(sigma * r.gauss(0, 1))
        heapq.heappush(events, (t + d, w, k))
    for w in range(workers):
        start(w, 0.0, 0)
    while g < steps:
        t, w, k = heapq.heappop(events)
        if k < g:                      # stale: its step is over; it starts the current one at once
            start(w, t, g)
            continue
        admitted.append(w)
        if len(admitted) == n:         # the N-th fresh gradient completes the step
            g += 1
            done[g] = t
            for a in admitted:
                start(a, t, g)
            admitted = []
    return statistics.median(done[k + 1] - done[k] for k in range(1 + WARMUP, steps))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5000)
    ap.add_argument("--base-ms", type=float, default=4.0, help="a step without a straggler (the simulated world's ~4 ms)")
    ap.add_argument("--steps", type=int, default=None, help="default: each scenario's own (and its [short])")
    args = ap.parse_args()
    for name in ("stragglers_backup", "stragglers_no_backup"):
        for short in (False, True):
            sc = load(os.path.join(packaged_dir(), f"{name}.toml"), short=short)
            [f] = [f for f in sc.faults if f["kind"] == "straggler"]
            d = f["delay"]
            workers, n = sc.workers, sc.workers - sc.workload.backup_workers
            steps = args.steps or sc.workload.steps
            ms = sorted(median_step_ms(s, workers, n, steps, float(f["probability"]), float(d["median_ms"]),
                                       float(d["sigma"]), args.base_ms) for s in range(args.seeds))
            q = {x: ms[int(x * (len(ms) - 1))] for x in (0.001, 0.01, 0.5, 0.99, 0.999)}
            bound = {k: v for k, v in sc.expect.items() if k.startswith("median_global_step_ms")}
            print(f"{name:22s} {'short' if short else 'full ':5s} {workers} workers, N={n}, {steps} steps: median step "
                  f"p0.1 {q[0.001]:.0f} p1 {q[0.01]:.0f} p50 {q[0.5]:.0f} p99 {q[0.99]:.0f} p99.9 {q[0.999]:.0f} ms; "
                  f"bound {bound}")


if __name__ == "__main__":
    main()
