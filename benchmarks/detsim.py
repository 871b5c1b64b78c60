"""The deterministic simulation's speed and its agreement with the discrete-event model.

    PYTHONHASHSEED=0 python benchmarks/detsim.py [--steps-per-worker 4] [--quick]

1. Simulated seconds per wall second of the real code (async training of the digits MLP, no faults,
   MonitoredTrainingSession clients) for 4, 16 and 100 workers with 1, 2 and 10 PS tasks, for three
   virtual compute costs per step: none (the null model: a step is all coordination, the paper's
   Figure 6), 100 ms, and 1 s (an Inception-sized step, the paper's Figure 8 workload). The wall time counts everything: building each client's graph, creating
   the sessions, registering the partitions, training, evaluating.
2. At 100 workers and 10 PS, for each compute cost (the null model first): the median worker step time and the throughput (global
   steps per virtual second) of the real code in virtual time (in its steady state: every worker
   started, none stopped), against the discrete-event model with the same costs: `simulate_protocol`
   (the real protocol's messages, one by one; the issue's target: within 20% on the null model), and
   `simulate_cluster` as configured (one fetch and one push per shard) and calibrated on the real
   run's message counts. The ratios are printed. (The paper's figures: benchmarks/detsim_figures.py.)
3. Seeds per CPU-minute of every packaged scenario (actorflow/sim/scenarios/) (its [short] version, one process): how many
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
from actorflow.sim.figures import steady  # noqa: E402
from actorflow.sim.model import Protocol, Workload, simulate_cluster, simulate_protocol  # noqa: E402
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
                            write=False, measure=True)
    return res, time.perf_counter() - t0, time.process_time() - c0


def _model(workers, ps, steps, compute_s, ps_fixed_ms=None):
    c = _costs(compute_s)
    wl = Workload(compute_ms=compute_s * 1e3, log_sigma=c.log_sigma, model_mb=_MODEL_MB,
                  net_ms_per_mb=c.net.s_per_mb * 1e3, latency_ms=c.net.latency_s * 1e3 * (1 + c.net.jitter / 2),
                  update_ms_per_mb=c.net.cpu_per_mb_s * 1e3,
                  ps_fixed_ms=c.net.cpu_per_msg_s * 1e3 if ps_fixed_ms is None else ps_fixed_ms,
                  client_ms=c.client_s * 1e3)
    return simulate_cluster(wl, workers, ps, "async", steps=steps, seed=1)


def _span_rate(m):
    """Global steps per virtual second over the run's training span (after its first tenth)."""
    sts = sorted(s[4] for s in m["steps"])
    warm = min(len(sts) // 10, 100)
    span = sts[-1] - sts[warm] if len(sts) > warm + 1 else float("nan")
    return (len(sts) - 1 - warm) / span if span > 0 else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", default="2,12", help="steps per worker of the two runs per point (the marginal "
                                                   "rate is their difference: start-up cancels out)")
    ap.add_argument("--quick", action="store_true", help="no 100 ms point, no scenario seeds")
    ap.add_argument("--tmp", default="/tmp/actorflow-detsim-bench")
    args = ap.parse_args(argv)
    if os.environ.get("PYTHONHASHSEED") != "0":
        print("note: PYTHONHASHSEED is not 0; runs are deterministic within this process only", file=sys.stderr)
    import logging
    logging.getLogger("actorflow").setLevel(logging.ERROR)
    k1, k2 = (int(x) for x in args.steps.split(","))
    _run(2, 1, 4, 0.0, args.tmp)           # imports and kernel compilation, outside the figures

    print("== simulated seconds per wall second (real code, async, no faults) ==")
    print(f"marginal: between runs of {k1} and {k2} steps per worker (start-up cancels out), on this process's CPU")
    print("time (the wall clock of a shared machine counts other programs too)")
    print(f"{'workers':>7s} {'ps':>3s} {'compute':>8s} {'steps':>6s} {'virtual s':>9s} {'wall s':>7s} {'CPU s':>7s} "
          f"{'sim-s/wall-s':>12s} {'sim-s/CPU-s':>11s} {'marginal':>9s} {'CPU ms/step':>11s}")
    shapes = [(4, 1), (16, 2), (100, 10)]
    costs = (0.0, 1.0) if args.quick else (0.0, 0.1, 1.0)
    results = {}
    for compute_s in costs:
        for workers, ps in shapes:
            r1, _, c1 = _run(workers, ps, workers * k1, compute_s, args.tmp)
            r2, w2, c2 = _run(workers, ps, workers * k2, compute_s, args.tmp)
            v1, v2 = r1.metrics["virtual_s"], r2.metrics["virtual_s"]
            n1, n2 = r1.metrics["global_step"], r2.metrics["global_step"]
            results[(workers, ps, compute_s)] = r2
            print(f"{workers:7d} {ps:3d} {compute_s * 1e3:6.0f}ms {n2:6d} {v2:9.2f} {w2:7.2f} {c2:7.2f} "
                  f"{v2 / w2:12.2f} {v2 / c2:11.2f} "
                  f"{(v2 - v1) / max(c2 - c1, 1e-9):9.2f} {(c2 - c1) / max(n2 - n1, 1) * 1e3:11.2f}"
                  + ("" if r2.passed else f"  FAILED: {[c.name for c in r2.checks if not c.ok]}"))

    print("\n== 100 workers, 10 PS: real code in virtual time against the discrete-event model ==")
    print("model: as configured (one fetch and one push message per step and shard, over all 10 shards);")
    print("calibrated: the shards the variables really use, and the messages per step the real protocol sends")
    for compute_s in costs:
        res = results[(100, 10, compute_s)]
        m = res.metrics
        steps = m["global_step"]
        used = [t for t, (sent, recv) in m["messages_by_task"].items() if t.startswith("/job:ps/") and recv]
        per_step = sum(sum(m["messages_by_task"][t]) for t in used) / max(steps, 1) / max(len(used), 1)
        c = _costs(compute_s)
        des = _model(100, 10, steps, compute_s)
        cal = _model(100, len(used), steps, compute_s, ps_fixed_ms=per_step / 2 * c.net.cpu_per_msg_s * 1e3)
        real = steady(m, c.client_s)                       # the model's step includes the client's time
        real_med, real_tp = real["median_ms"], real["steps_per_s"]
        proto = simulate_protocol(Workload.from_sim_costs(c), Protocol.digits_mlp(10), 100, steps, seed=1)
        proto_tp = 100 / (float(proto.step_ms.mean()) / 1e3)     # workers over their mean cycle
        print(f"compute {compute_s * 1e3:4.0f} ms: median worker step real {real_med:8.2f} ms | protocol model "
              f"{proto.median_ms:8.2f} ms ratio {real_med / proto.median_ms:5.2f} | model {des.median_ms:8.2f} ms "
              f"ratio {real_med / des.median_ms:5.2f} | calibrated {cal.median_ms:8.2f} ms "
              f"ratio {real_med / cal.median_ms:5.2f}")
        print(f"{'':18s}throughput        real {real_tp:8.1f} /s | protocol model {proto_tp:8.1f} /s ratio "
              f"{real_tp / proto_tp:5.2f} | model {des.throughput:8.1f} /s ratio "
              f"{real_tp / des.throughput:5.2f} | calibrated {cal.throughput:8.1f} /s ratio "
              f"{real_tp / cal.throughput:5.2f}   ({len(used)} PS used, {per_step:.1f} messages per step per PS)")

    if args.quick:
        return 0
    print("\n== seeds per CPU-minute, per scenario ([short] version) ==")
    from actorflow.sim.scenario import packaged_dir
    sims = packaged_dir()
    for path in sorted(glob.glob(os.path.join(sims, "*.toml"))):
        sc = load(path, short=True)
        cpu = 0.0
        n = 3
        passed = 0
        for seed in range(1, n + 1):
            c0 = time.process_time()
            res = run_deterministic(sc, Plan.from_scenario(sc, seed), os.path.join(args.tmp, sc.name), write=False)
            cpu += time.process_time() - c0
            passed += res.passed
        print(f"{sc.name:24s} {60.0 * n / cpu:7.1f} seeds per CPU-minute  ({cpu / n:.2f} CPU-s per seed, "
              f"{res.metrics['virtual_s']:.1f} virtual s; {passed}/{n} passed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
