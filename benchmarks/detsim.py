"""The deterministic simulation's speed and its agreement with the discrete-event model.

    PYTHONHASHSEED=0 python benchmarks/detsim.py [--steps-per-worker 4] [--quick]

1. Simulated seconds per wall second of the real code (async training of the digits MLP, no faults,
   MonitoredTrainingSession clients) for 4, 16 and 100 workers with 1, 2 and 10 PS tasks, for three
   virtual compute costs per step: none (the null model: a step is all coordination, the paper's
   Figure 6), 100 ms, and 1 s (an Inception-sized step, the paper's Figure 8 workload). The wall time counts everything: building each client's graph, creating
   the sessions, registering the partitions, training, evaluating.
2. At 100 workers and 10 PS, for each compute cost (the null model first): the median worker step time and the throughput (global
   steps per virtual second) of the real code in virtual time, against the discrete-event model
   (actorflow/sim/model.py, `simulate_cluster`) with the same costs; the ratio is printed.
3. Seeds per CPU-minute of every scenario in sims/ (its [short] version, one process): how many
   seeds a sweep covers in a minute of one core.
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from actorflow.sim.detrun import run_deterministic  # noqa: E402
from actorflow.sim.model import Workload, simulate_cluster  # noqa: E402
from actorflow.sim.network import NetCosts  # noqa: E402
from actorflow.sim.plan import Plan  # noqa: E402
from actorflow.sim.scenario import load, parse  # noqa: E402
from actorflow.sim.world import Costs  # noqa: E402

_MODEL_MB = 0.0184        # the digits MLP's parameters (calibration.json's model_mb)


def _null(workers: int, ps: int, steps: int) -> object:
    return parse({"name": f"null-{workers}w-{ps}ps", "seed": 1, "cluster": {"ps": ps, "workers": workers},
                  "workload": {"steps": steps, "mode": "async"}, "expect": {"wall_clock_max_s": 100000}})


def _costs(compute_s: float) -> Costs:
    return Costs(compute_s=compute_s, log_sigma=0.05, client_s=0.0009, kernel_s=20e-6,
                 net=NetCosts(latency_s=100e-6, jitter=0.5, s_per_mb=4.5e-3, cpu_per_msg_s=10e-6,
                              cpu_per_mb_s=0.115e-3))


def _run(workers, ps, steps, compute_s, tmp):
    sc = _null(workers, ps, steps)
    t0 = time.perf_counter()
    c0 = time.process_time()
    res = run_deterministic(sc, Plan.from_scenario(sc), os.path.join(tmp, sc.name), costs=_costs(compute_s),
                            write=False)
    return res, time.perf_counter() - t0, time.process_time() - c0


def _model(workers, ps, steps, compute_s):
    c = _costs(compute_s)
    wl = Workload(compute_ms=compute_s * 1e3, log_sigma=c.log_sigma, model_mb=_MODEL_MB,
                  net_ms_per_mb=c.net.s_per_mb * 1e3, latency_ms=c.net.latency_s * 1e3 * (1 + c.net.jitter / 2),
                  update_ms_per_mb=c.net.cpu_per_mb_s * 1e3, ps_fixed_ms=c.net.cpu_per_msg_s * 1e3,
                  client_ms=c.client_s * 1e3)
    return simulate_cluster(wl, workers, ps, "async", steps=steps, seed=1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps-per-worker", type=int, default=4)
    ap.add_argument("--quick", action="store_true", help="skip the 100 ms step cost and the scenario seeds")
    ap.add_argument("--tmp", default="/tmp/actorflow-detsim-bench")
    args = ap.parse_args(argv)
    if os.environ.get("PYTHONHASHSEED") != "0":
        print("note: PYTHONHASHSEED is not 0; runs are deterministic within this process only", file=sys.stderr)
    import logging
    logging.getLogger("actorflow").setLevel(logging.ERROR)

    print("== simulated seconds per wall second (real code, async, no faults) ==")
    print(f"{'workers':>7s} {'ps':>3s} {'step cost':>9s} {'steps':>6s} {'virtual s':>9s} {'wall s':>7s} "
          f"{'sim-s/wall-s':>12s} {'wall ms/step':>12s}")
    shapes = [(4, 1), (16, 2), (100, 10)]
    results = {}
    costs = (0.0, 1.0) if args.quick else (0.0, 0.1, 1.0)
    for compute_s in costs:
        for workers, ps in shapes:
            steps = workers * args.steps_per_worker
            res, wall, _ = _run(workers, ps, steps, compute_s, args.tmp)
            m = res.metrics
            v = m["virtual_s"]
            results[(workers, ps, compute_s)] = res
            print(f"{workers:7d} {ps:3d} {compute_s * 1e3:7.0f}ms {m['global_step']:6d} {v:9.2f} {wall:7.2f} "
                  f"{v / wall:12.2f} {wall / max(m['global_step'], 1) * 1e3:12.2f}"
                  + ("" if res.passed else f"  FAILED: {[c.name for c in res.checks if not c.ok]}"))

    print("\n== the null model at 100 workers, 10 PS: real code in virtual time against the discrete-event model ==")
    for compute_s in costs:
        res = results[(100, 10, compute_s)]
        m = res.metrics
        steps = m["global_step"]
        des = _model(100, 10, steps, compute_s)
        # The real run's throughput over its training span (after every client's first step).
        sts = sorted(s[4] for s in m["steps"])
        warm = min(len(sts) // 10, 100)
        span = sts[-1] - sts[warm] if len(sts) > warm + 1 else float("nan")
        real_tp = (len(sts) - 1 - warm) / span if span > 0 else float("nan")
        real_med = m["median_step_ms"] + 0.9       # the DES's compute includes the client's CPU
        print(f"step cost {compute_s * 1e3:4.0f} ms: median worker step  real {real_med:8.2f} ms   model "
              f"{des.median_ms:8.2f} ms   ratio {real_med / des.median_ms:.3f}")
        print(f"{'':19s} throughput          real {real_tp:8.2f} /s   model {des.throughput:8.2f} /s   "
              f"ratio {real_tp / des.throughput:.3f}")

    if args.quick:
        return 0
    print("\n== seeds per CPU-minute, per scenario ([short] version) ==")
    sims = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sims")
    for path in sorted(glob.glob(os.path.join(sims, "*.toml"))):
        sc = load(path, short=True)
        cpu = 0.0
        n = 2
        passed = 0
        for seed in range(1, n + 1):
            c0 = time.process_time()
            res = run_deterministic(sc, Plan.from_scenario(sc, seed), os.path.join(args.tmp, sc.name), write=False)
            cpu += time.process_time() - c0
            passed += res.passed
        print(f"{sc.name:24s} {60.0 * n / cpu:7.1f} seeds per CPU-minute  ({cpu / n:.2f} CPU-s per seed; "
              f"{passed}/{n} passed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
