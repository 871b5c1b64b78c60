"""The paper's Figures 6, 8 and 9 with the real protocols in virtual time, beside the discrete-event model
(`actorflow sim figures`, `benchmarks/detsim_figures.py`).

Each point runs the scenarios' training job (the digits MLP, between-graph, MonitoredTrainingSession
clients) in the simulated world (actorflow/sim/detrun.py) with a virtual cost model, and the
discrete-event model (actorflow/sim/model.py) with the same costs:

- asynchronous points against `simulate_protocol`, which sends the real protocol's messages one by
  one (`Protocol`); the messages per step the real run counted are printed beside the protocol's;
- synchronous points (Figure 8) against `simulate_sync_protocol`, SyncReplicasOptimizer's messages
  one by one, and `simulate_cluster`'s coarse synchronous mode (one fetch and one push per shard and
  worker step) calibrated with the messages the real run counted.

The real run's numbers come from its steady state: the window from the moment every worker has
finished a step to the moment the first worker stops (start-up is staggered: the chief initializes
the variables before the others may start). Models are kept small (the digits MLP, up to 100
workers) so that a figure takes minutes on a loaded 2-core machine.

- Figure 6: the null model (no compute: a step is all coordination): median step time against the
  number of workers, asynchronous ("6") and synchronous as in the paper ("6s").
- Figure 8: synchronous training with N aggregated and b backup workers: step time against b.
- Figure 9: asynchronous training: global steps per second against the number of PS tasks.
"""
from __future__ import annotations

import dataclasses
import os
import time

import numpy as np

from actorflow.sim.model import Protocol, Workload, simulate_cluster, simulate_protocol, simulate_sync_protocol
from actorflow.sim.network import NetCosts

__all__ = ["sim_costs", "steady", "real_run", "compare_async", "compare_sync", "figure6", "figure6_sync", "figure8",
           "figure9",
           "write_table", "format_table", "plot", "sync_step_ms", "messages_per_step", "main"]

FIG_COMPUTE_S = 0.0             # Figure 6's null model
FIG9_COMPUTE_S = 0.010          # Figure 9: a step's compute on the worker (virtual)
FIG8_COMPUTE_S = 0.100          # Figure 8: a worker step (virtual), with stragglers


def sim_costs(compute_s: float = 0.0, log_sigma: float = 0.05):
    """The figures' virtual costs (the same as benchmarks/detsim.py's): a 100 µs hop (with up to 50%
    jitter), 10 µs of CPU per message at each end, links of 4.5 ms/MB, the client's 0.9 ms per step."""
    from actorflow.sim.world import Costs
    return Costs(compute_s=compute_s, log_sigma=log_sigma, client_s=0.0009, kernel_s=20e-6,
                 net=NetCosts(latency_s=100e-6, jitter=0.5, s_per_mb=4.5e-3, cpu_per_msg_s=10e-6,
                              cpu_per_mb_s=0.115e-3))


def steady(m: dict, client_s: float = 0.0) -> dict:
    """A real run's steady state from its `step_spans` (run_deterministic(measure=True)): the median
    step as a client sees it (sess.run plus the client's own `client_s`) and global steps per
    virtual second, between the moment every worker has finished a step and the moment the first
    stops. Falls back to the steps after the first tenth when that window holds too few."""
    spans = m["step_spans"]
    first, last = {}, {}
    for w, _t0, t1, _gs in spans:
        first.setdefault(w, t1)
        last[w] = t1
    lo, hi = max(first.values()), min(last.values())
    inside = [(t0, t1) for _w, t0, t1, _gs in spans if t0 >= lo and t1 <= hi]
    if len(inside) < max(10, len(first)):
        ends = sorted(t1 for _w, _t0, t1, _gs in spans)
        lo, hi = ends[len(ends) // 10], ends[-1]
        inside = [(t0, t1) for _w, t0, t1, _gs in spans if t0 >= lo]
    n_done = sum(1 for _w, _t0, t1, _gs in spans if lo < t1 <= hi)
    return {"median_ms": float(np.median([t1 - t0 for t0, t1 in inside]) + client_s) * 1e3,
            "steps_per_s": n_done / (hi - lo) if hi > lo else float("nan"), "window_steps": len(inside)}


def _scenario(workers: int, ps: int, steps: int, mode: str = "async", backup: int = 0):
    from actorflow.sim.scenario import parse
    return parse({"name": f"fig-{mode}-{workers}w-{ps}ps-{backup}b", "seed": 1,
                  "cluster": {"ps": ps, "workers": workers},
                  "workload": {"steps": steps, "mode": mode, "backup_workers": backup},
                  "expect": {"wall_clock_max_s": 100000}})


def real_run(workers: int, ps: int, steps: int, costs, mode: str = "async", backup: int = 0, tmp: str | None = None,
             task_faults=()):
    """The real code in virtual time: (metrics, CPU seconds)."""
    from actorflow.sim.detrun import run_deterministic
    from actorflow.sim.plan import Plan
    sc = _scenario(workers, ps, steps, mode, backup)
    plan = Plan.from_scenario(sc)
    if task_faults:
        plan = Plan(plan.seed, plan.triggers, list(task_faults), plan.crash_restarts, None)
    tmp = tmp or os.path.join("/tmp", "actorflow-figures")
    c0 = time.process_time()
    res = run_deterministic(sc, plan, os.path.join(tmp, sc.name), costs=costs, write=False, measure=True,
                            count_kinds=True)
    if not res.passed:
        bad = [f"{c.name}: {c.detail or c.observed}" for c in res.checks if not c.ok]
        raise RuntimeError(f"the real run {sc.name} failed its checks: {bad}")
    return res.metrics, time.process_time() - c0


def messages_per_step(m: dict, start: dict | None = None) -> dict:
    """The real run's messages per global step by (from, to, kind), training only: the run's counts
    less a shorter run's (`start`: start-up and evaluation cancel out), or the run's own when
    `start` is None."""
    steps = m["global_step"] - (start["global_step"] if start else 0)
    out = {}
    for k, n in m["messages_by_kind"].items():
        d = n - (start["messages_by_kind"].get(k, 0) if start else 0)
        if d:
            out[k] = d / max(steps, 1)
    return out


def compare_async(workers: int, ps: int, compute_s: float, steps_per_worker: int = 12, seed: int = 0,
                  tmp: str | None = None) -> dict:
    """One asynchronous point: the real code against `simulate_protocol` (and against
    `simulate_cluster` as configured, the model before it sent the real protocol's messages)."""
    costs = sim_costs(compute_s)
    m, cpu = real_run(workers, ps, workers * steps_per_worker, costs, tmp=tmp)
    real = steady(m, costs.client_s)
    wl = Workload.from_sim_costs(costs)
    proto = Protocol.digits_mlp(ps)
    model = simulate_protocol(wl, proto, workers, workers * steps_per_worker, seed)
    coarse = simulate_cluster(wl, workers, ps, "async", steps=workers * steps_per_worker, seed=seed)
    return {"workers": workers, "ps": ps, "compute_ms": compute_s * 1e3,
            "real_ms": real["median_ms"], "model_ms": model.median_ms, "coarse_ms": coarse.median_ms,
            "real_steps_per_s": real["steps_per_s"], "model_steps_per_s": _steady_rate(model, workers),
            "coarse_steps_per_s": coarse.throughput, "ps_used": len(proto.used_ps),
            "real_window_steps": real["window_steps"], "real_cpu_s": cpu, "model_wall_s": model.wall_s}


def _steady_rate(r, workers: int) -> float:
    # The model's workers all start at once and never stop early: its rate is the workers over their
    # mean cycle (the mean, not the median: a rate counts the slow cycles at their length).
    return workers / (float(np.mean(r.step_ms)) / 1e3) if len(r.step_ms) else float("nan")


def compare_sync(workers: int, ps: int, backup: int, compute_s: float, steps: int = 20, straggle=None,
                 seed: int = 0, tmp: str | None = None, start: dict | None = None) -> dict:
    """One synchronous point (SyncReplicasOptimizer, workers - backup aggregated): the real code
    against `simulate_sync_protocol` with the same costs, and against `simulate_cluster`'s coarse
    synchronous mode, its per-message CPU scaled to the messages per step the real run counted
    (`start`: a shorter run's metrics, to leave start-up out of those counts). `straggle`:
    (probability, extra ms) of a worker step, in all three."""
    costs = sim_costs(compute_s)
    faults = []
    if straggle:
        # The model's stragglers: + straggle_ms * lognormal(0, 0.5)
        faults = [{"id": 1, "kind": "straggler", "tasks": [f"/job:worker/task:{i}" for i in range(workers)],
                   "probability": straggle[0], "delay": {"dist": "lognormal", "median_ms": straggle[1], "sigma": 0.5}}]
    m, cpu = real_run(workers, ps, steps, costs, "sync", backup, tmp=tmp, task_faults=faults)
    real_step_ms = sync_step_ms(m)
    per = messages_per_step(m, start) if start else messages_per_step(m)
    ps_msgs = sum(v for k, v in per.items() if "ps" in k.split(" ")[0]) / max(1, min(ps, 5))
    wl = Workload.from_sim_costs(costs, straggle_p=straggle[0] if straggle else 0.0,
                                 straggle_ms=straggle[1] if straggle else 0.0)
    # The real run and the model draw their stragglers from different random numbers: the model's
    # step is the mean over five seeds, to leave one run's sampling noise (the real one's) in the error.
    proto = Protocol.digits_mlp(ps)
    runs = [simulate_sync_protocol(wl, proto, workers, backup, steps, seed + i) for i in range(5)]
    coarse = simulate_cluster(dataclasses.replace(wl, ps_fixed_ms=costs.net.cpu_per_msg_s * 1e3 * ps_msgs / 2),
                              workers, min(ps, 5), "sync", backup, steps, seed)
    # The real step is virtual time over global steps (a mean): against the models' mean steps.
    return {"workers": workers, "ps": ps, "backup": backup, "compute_ms": compute_s * 1e3,
            "real_step_ms": real_step_ms, "model_step_ms": float(np.mean([np.mean(r.step_ms) for r in runs])),
            "model_seed_range_ms": [float(min(np.mean(r.step_ms) for r in runs)),
                                    float(max(np.mean(r.step_ms) for r in runs))],
            "coarse_step_ms": float(np.mean(coarse.step_ms)),
            "real_dropped": m.get("gradients_dropped_counter"), "model_dropped": runs[0].dropped,
            "ps_messages_per_step": ps_msgs, "real_cpu_s": cpu}


def sync_step_ms(m: dict) -> float:
    """A synchronous run's global step time: virtual time over global steps in the run's second half
    (the first holds the staggered start), from `step_spans`."""
    spans = sorted(m["step_spans"], key=lambda s: s[2])
    mid = spans[len(spans) // 2]
    end = spans[-1]
    if end[3] <= mid[3]:
        return float("nan")
    return (end[2] - mid[2]) / (end[3] - mid[3]) * 1e3


# -- the figures --------------------------------------------------------------------------------------------

def _steps_per_worker(workers: int, least: int) -> int:
    # Enough steps in the steady window at small worker counts too (a few hundred in all).
    return max(least, 300 // workers)


def figure6(workers=(1, 4, 16, 50, 100), ps: int = 10, steps_per_worker: int = 12, progress=None) -> list:
    """The null model: median step time against the number of workers (asynchronous)."""
    rows = []
    for w in workers:
        rows.append(compare_async(w, ps, FIG_COMPUTE_S, _steps_per_worker(w, steps_per_worker)))
        if progress:
            progress(rows[-1])
    return rows


def figure6_sync(workers=(4, 16, 50), ps: int = 10, steps: int = 40, progress=None) -> list:
    """The null model as the paper's Figure 6 runs it: synchronous (all workers aggregated, no
    backups), global step time against the number of workers."""
    rows = []
    for w in workers:
        rows.append(compare_sync(w, ps, 0, FIG_COMPUTE_S, steps))
        if progress:
            progress(rows[-1])
    return rows


def figure9(workers=(16, 100), ps_counts=(1, 2, 3, 5), steps_per_worker: int = 12, progress=None) -> list:
    """Global steps per virtual second against the number of PS tasks (asynchronous, 10 ms steps).
    The digits MLP has 4 variables and the global step: 5 PS tasks is as far as sharding goes."""
    rows = []
    for w in workers:
        for p in ps_counts:
            rows.append(compare_async(w, p, FIG9_COMPUTE_S, _steps_per_worker(w, steps_per_worker)))
            if progress:
                progress(rows[-1])
    return rows


def figure8(n: int = 8, backups=(0, 1, 2, 3), ps: int = 2, steps: int = 60, straggle=(0.05, 100.0),
            progress=None) -> list:
    """Synchronous training, `n` gradients aggregated of n + b workers: global step time against b,
    with stragglers (a worker step is `straggle[1]` ms longer, lognormal, with probability
    `straggle[0]`), and the speedup normalized by the machines used."""
    rows = []
    base = None
    for b in backups:
        r = compare_sync(n + b, ps, b, FIG8_COMPUTE_S, steps, straggle)
        if base is None:
            base = r
        for k in ("real", "model"):
            r[f"{k}_normalized_speedup"] = base[f"{k}_step_ms"] / r[f"{k}_step_ms"] * n / (n + b)
        rows.append(r)
        if progress:
            progress(rows[-1])
    return rows


_COLUMNS = {
    "6": [("workers", "workers", "d"), ("ps_used", "PS used", "d"), ("real_ms", "real (ms)", ".3f"),
          ("model_ms", "model (ms)", ".3f"), ("coarse_ms", "coarse (ms)", ".3f"), ("err", "model err", "+.1%"),
          ("real_window_steps", "steps measured", "d"), ("real_cpu_s", "real CPU s", ".1f")],
    "6s": [("workers", "workers", "d"), ("real_step_ms", "real step (ms)", ".3f"),
           ("model_step_ms", "model step (ms)", ".3f"), ("err", "model err", "+.1%"),
           ("coarse_step_ms", "coarse step (ms)", ".3f"), ("real_cpu_s", "real CPU s", ".1f")],
    "9": [("workers", "workers", "d"), ("ps", "PS", "d"), ("real_steps_per_s", "real steps/s", ".0f"),
          ("model_steps_per_s", "model steps/s", ".0f"), ("coarse_steps_per_s", "coarse steps/s", ".0f"),
          ("err", "model err", "+.1%"), ("real_window_steps", "steps measured", "d"),
          ("real_cpu_s", "real CPU s", ".1f")],
    "8": [("backup", "b", "d"), ("workers", "workers", "d"), ("real_step_ms", "real step (ms)", ".1f"),
          ("model_step_ms", "model step (ms)", ".1f"), ("err", "model err", "+.1%"),
          ("coarse_step_ms", "coarse step (ms)", ".1f"), ("real_normalized_speedup", "real norm. speedup", ".3f"),
          ("model_normalized_speedup", "model norm. speedup", ".3f"), ("real_dropped", "real dropped", "d"),
          ("model_dropped", "model dropped", "d"), ("real_cpu_s", "real CPU s", ".1f")],
}
_ERR = {"6": ("model_ms", "real_ms"), "6s": ("model_step_ms", "real_step_ms"),
        "9": ("model_steps_per_s", "real_steps_per_s"),
        "8": ("model_step_ms", "real_step_ms")}


def _with_error(fig: str, row: dict) -> dict:
    a, b = _ERR[fig]
    return {**row, "err": row[a] / row[b] - 1.0}


def format_table(fig: str, rows: list) -> str:
    """A figure's rows as a fixed-width table (with the model's relative error against the real run)."""
    cols = _COLUMNS[fig]
    head = " ".join(f"{title:>{max(len(title), 8)}s}" for _k, title, _f in cols)
    lines = [head]
    for row in rows:
        row = _with_error(fig, row)
        cells = []
        for k, title, f in cols:
            v = row.get(k)
            cells.append(f"{'-' if v is None else format(v, f):>{max(len(title), 8)}s}")
        lines.append(" ".join(cells))
    return "\n".join(lines)


def write_table(path: str, figures: dict) -> None:
    """figures: {"6": rows, ...} as markdown-ish text, one table per figure."""
    with open(path, "w") as f:
        for fig, rows in figures.items():
            f.write(f"Figure {fig}\n{format_table(fig, rows)}\n\n")


def plot(path: str, figures: dict) -> bool:
    """The figures side by side (real: solid, model: dashed); False when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figs = [f for f in ("6", "6s", "8", "9") if f in figures]
    fig, axes = plt.subplots(1, len(figs), figsize=(5 * len(figs), 4), squeeze=False)
    for ax, f in zip(axes[0], figs):
        rows = figures[f]
        if f == "6":
            x = [r["workers"] for r in rows]
            ax.plot(x, [r["real_ms"] for r in rows], "o-", label="real code, virtual time")
            ax.plot(x, [r["model_ms"] for r in rows], "s--", label="model (real protocol)")
            ax.plot(x, [r["coarse_ms"] for r in rows], "x:", label="model (one fetch, one push)")
            ax.set(xlabel="workers", ylabel="median step (ms)", title="Fig. 6: null model (async)")
        elif f == "6s":
            x = [r["workers"] for r in rows]
            ax.plot(x, [r["real_step_ms"] for r in rows], "o-", label="real code, virtual time")
            ax.plot(x, [r["model_step_ms"] for r in rows], "s--", label="model (real protocol)")
            ax.plot(x, [r["coarse_step_ms"] for r in rows], "x:", label="coarse model")
            ax.set(xlabel="workers", ylabel="global step (ms)", title="Fig. 6: null model (sync)", yscale="log")
        elif f == "8":
            x = [r["backup"] for r in rows]
            ax.plot(x, [r["real_step_ms"] for r in rows], "o-", label="real step")
            ax.plot(x, [r["model_step_ms"] for r in rows], "s--", label="model step (real protocol)")
            if all("coarse_step_ms" in r for r in rows):
                ax.plot(x, [r["coarse_step_ms"] for r in rows], "x:", label="coarse model step")
            ax.set(xlabel="backup workers", ylabel="global step (ms)", title="Fig. 8: backup workers (sync)")
        else:
            for w in sorted({r["workers"] for r in rows}):
                rr = [r for r in rows if r["workers"] == w]
                x = [r["ps"] for r in rr]
                ax.plot(x, [r["real_steps_per_s"] for r in rr], "o-", label=f"real, {w} workers")
                ax.plot(x, [r["model_steps_per_s"] for r in rr], "s--", label=f"model, {w} workers")
            ax.set(xlabel="PS tasks", ylabel="global steps / virtual s", title="Fig. 9: PS tasks (async)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    """`python -m actorflow.sim.figures` / benchmarks/detsim_figures.py."""
    import argparse
    import json
    import logging
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--figures", default="6,6s,9,8",
                    help="which figures, in order (default 6,6s,9,8; 6s: Figure 6 synchronous)")
    ap.add_argument("--out", default="runs/figures", help="directory for figures.txt, figures.json, figures.png")
    ap.add_argument("--quick", action="store_true", help="fewer points (a minute or two)")
    args = ap.parse_args(argv)
    logging.getLogger("actorflow").setLevel(logging.ERROR)
    os.makedirs(args.out, exist_ok=True)
    done: dict = {}
    for fig in args.figures.split(","):
        print(f"== Figure {fig} ==", flush=True)

        def progress(row, fig=fig):
            print(format_table(fig, [row]).splitlines()[1], flush=True)
        print(format_table(fig, []), flush=True)
        if fig == "6":
            done[fig] = figure6((1, 4, 16) if args.quick else (1, 4, 16, 50, 100), progress=progress)
        elif fig == "6s":
            done[fig] = figure6_sync((4, 16) if args.quick else (4, 16, 50), progress=progress)
        elif fig == "9":
            done[fig] = figure9((16,) if args.quick else (16, 100), progress=progress)
        elif fig == "8":
            done[fig] = figure8(backups=(0, 2) if args.quick else (0, 1, 2, 3), progress=progress)
        else:
            raise SystemExit(f"unknown figure {fig!r} (6, 6s, 8 or 9)")
    write_table(os.path.join(args.out, "figures.txt"), done)
    with open(os.path.join(args.out, "figures.json"), "w") as f:
        json.dump(done, f, indent=1)
    if plot(os.path.join(args.out, "figures.png"), done):
        print(f"plot: {os.path.join(args.out, 'figures.png')}")
    print(f"table: {os.path.join(args.out, 'figures.txt')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
