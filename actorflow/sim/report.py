"""A run's report.md and its timeline plot (step time and loss over time, faults marked).

matplotlib is optional (the `sim` extra): without it the report says the plot was skipped.
"""
from __future__ import annotations

import os

__all__ = ["write_report", "plot_timeline", "timeline_figure", "robust_range", "worker_colour"]

# Event kind -> (colour, label, line style). None of these colours is a worker's (_WORKER_COLOURS), so a
# restart or a recovery marker is never read as one worker's points.
_MARKS = {
    "kill": ("#d62728", "kill -9", "-"),
    "crash_during_save": ("#8b0000", "crash during save", "-"),
    "restart": ("#2ca02c", "restart", "-"),
    "partition": ("#9467bd", "partition", "-"),
    "heal": ("#4b0082", "heal", ":"),
    "drop": ("#ff7f0e", "dropped frame", "--"),
    "recovery": ("#17becf", "recovery", "--"),
    "unexpected_exit": ("#000000", "unexpected exit", "-"),
}
_WORKER_COLOURS = ["#1f77b4", "#8c564b", "#7f7f7f", "#bcbd22", "#e377c2", "#393b79", "#637939", "#8c6d31",
                   "#843c39", "#7b4173", "#3182bd", "#636363"]
_OUTLIER_COLOUR = "#c51b7d"


def worker_colour(i: int) -> str:
    """The colour of the i-th worker's points and loss curve (cycling after 12)."""
    return _WORKER_COLOURS[i % len(_WORKER_COLOURS)]


def robust_range(values_ms) -> tuple[float, float, list]:
    """(low, high, outliers) of the step-time axis (log scale). The range comes from the quartiles of
    log(step time), three interquartile ranges beyond them (at least 4x the median above), so that the
    few steps that compile kernels or wait out a fault (seconds, where the others take milliseconds)
    do not squash every other point to the bottom; the values above `high` come back as outliers, to
    be drawn at the top edge and counted."""
    import numpy as np
    v = np.asarray([x for x in values_ms if x > 0], dtype=float)
    if v.size == 0:
        return 0.1, 10.0, []
    logs = np.log10(v)
    q25, q50, q75 = np.percentile(logs, [25, 50, 75])
    iqr = max(q75 - q25, 0.05)
    hi = 10 ** max(q75 + 3 * iqr, q50 + np.log10(4.0))
    lo = v.min() / 1.3
    if v.max() <= hi * 1.5:          # nothing far out: show everything
        return lo, v.max() * 1.5, []
    return lo, hi, [float(x) for x in v if x > hi]


def timeline_figure(res):
    """The timeline as a matplotlib Figure (two panels: step time, loss; faults marked); ImportError
    without matplotlib."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    m = res.metrics
    steps = m.get("steps", [])
    t0 = next((e["t"] for e in res.events if e["kind"] == "run_start"), None)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(11, 6), sharex=True)
    workers = sorted({s[0] for s in steps})
    all_ms = [(s[4] - s[3]) * 1e3 for s in steps]
    lo, hi, outliers = robust_range(all_ms)
    for i, w in enumerate(workers):
        colour = worker_colour(i)
        mine = [s for s in steps if s[0] == w]
        xs_in = [s[4] for s in mine if (s[4] - s[3]) * 1e3 <= hi]
        ys_in = [(s[4] - s[3]) * 1e3 for s in mine if (s[4] - s[3]) * 1e3 <= hi]
        ax1.plot(xs_in, ys_in, ".", ms=3, color=colour, label=f"worker {w}")
        # A worker's loss curve is broken where it made no step for a while (a fault), not bridged.
        xs, ys = [], []
        for a, b in zip([None] + mine, mine):
            if a is not None and b[4] - a[4] > 0.5:
                xs.append(float("nan"))
                ys.append(float("nan"))
            xs.append(b[4])
            ys.append(b[5])
        ax2.plot(xs, ys, "-", lw=0.8, color=colour, label=f"worker {w}")
    if outliers:
        # Off the scale: a triangle at the top edge where each one happened, and how many and how far.
        out_x = [s[4] for s in steps if (s[4] - s[3]) * 1e3 > hi]
        ax1.plot(out_x, [hi * 1.1] * len(out_x), "^", ms=6, color=_OUTLIER_COLOUR, mfc="none",
                 label=f"{len(outliers)} off the scale (max {max(outliers):.0f} ms)", gid="outliers")
    ax1.set_yscale("log")
    ax1.set_ylim(lo, hi * (1.2 if outliers else 1.0))   # headroom for the outliers' marks
    ax1.set_ylabel("step time (ms)")
    ax2.set_ylabel("training loss")
    ax2.set_xlabel("time since training started (s)")
    seen = set()
    if t0 is not None:
        parts = {}
        for e in res.events:
            k = e["kind"]
            x = e["t"] - t0
            if k == "partition":
                parts[e.get("fault")] = x
            elif k == "heal" and e.get("fault") in parts:
                start = parts.pop(e.get("fault"))
                for ax in (ax1, ax2):
                    ax.axvspan(start, x, color=_MARKS["partition"][0], alpha=0.12)
            if k == "straggler":
                continue
            if k in _MARKS:
                colour, label, style = _MARKS[k]
                for ax in (ax1, ax2):
                    ax.axvline(x, color=colour, lw=1.0, ls=style, gid=f"mark:{k}",
                               label=None if (k in seen or ax is ax2) else label)
                seen.add(k)
    ax1.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, borderaxespad=0.0)
    ax1.set_title(f"{res.scenario.name} (seed {m.get('seed')}): "
                  f"{'passed' if res.passed else 'FAILED'}", fontsize=10)
    fig.tight_layout()
    return fig


def plot_timeline(res, path: str) -> str | None:
    """Writes the timeline PNG; returns None, or why it could not."""
    try:
        fig = timeline_figure(res)
    except ImportError:
        return "matplotlib is not installed (pip install 'actorflow[sim]'): no plot"
    import matplotlib.pyplot as plt
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def write_report(res) -> str | None:
    """Writes report.md (and timeline.png) into the run's directory; returns why there is no plot
    (matplotlib missing), or None."""
    m = res.metrics
    sc = res.scenario
    lines = [f"# {sc.name}: {'PASSED' if res.passed else 'FAILED'}", ""]
    if sc.description:
        lines += [sc.description, ""]
    lines += [f"- cluster: {sc.ps} ps, {sc.workers} workers; {sc.workload.mode}"
              + (f" with {sc.workload.backup_workers} backup worker(s)" if sc.workload.backup_workers else "")
              + f"; {sc.workload.steps} global steps" + (" (short version)" if sc.short else ""),
              f"- seed {m.get('seed')}" + (f"; replay of {m['replay_of']}" if m.get("replay_of") else ""),
              f"- wall time {m.get('wall_s')} s, training {m.get('train_s')} s, "
              f"{m.get('global_step')} global steps, {m.get('runs')} worker steps",
              f"- median step {_f(m.get('median_step_ms'))} ms, p90 {_f(m.get('p90_step_ms'))} ms, "
              f"{_f(m.get('steps_per_s'))} global steps/s",
              f"- final test accuracy {_f(m.get('final_accuracy'))}, loss {_f(m.get('final_loss'))}",
              f"- injected faults {m.get('injected')}, session recoveries {m.get('recoveries')}", ""]
    if m.get("startup_recoveries"):
        lines += [f"Note: {m['startup_recoveries']} session recover{'y' if m['startup_recoveries'] == 1 else 'ies'} "
                  "in a client's first step, before any fault (see warnings.jsonl: usually a heartbeat that timed "
                  "out while a task was busy starting); not counted above.", ""]
    if "replay_matches" in m:
        lines += [f"Replay: the injected fault sequence {'matches' if m['replay_matches'] else 'DIFFERS FROM'} "
                  f"the recorded one ({m.get('replay_recorded_faults')} recorded faults).", ""]
    lines += ["## Expectations", "", "| expectation | bound | observed | result | note |", "|---|---|---|---|---|"]
    for c in res.checks:
        lines.append(f"| {c.name} | {c.bound_text} | {c.observed_text} | {'pass' if c.ok else '**FAIL**'} | "
                     f"{c.note.replace('|', '/')} |")
    if m.get("disruptions"):
        lines += ["", "## Disruptions", "", "| fault | kind | at (s) | ended (s) | workers | steps lost | recovery (s) |",
                  "|---|---|---|---|---|---|---|"]
        for d in m["disruptions"]:
            lines.append(f"| {d['fault']} | {d['kind']} | {d['at_s']} | {d['ended_s']} | {d['affected_workers']} | "
                         f"{d['steps_lost']} | {_f(d['recovery_s'])} |")
    shown = [e for e in res.events if e["kind"] not in ("straggler", "run_start", "run_end", "injectors_installed")]
    stragglers = [e for e in res.events if e["kind"] == "straggler"]
    lines += ["", "## Events", ""]
    if stragglers:
        lines.append(f"{len(stragglers)} straggler delays (see events.jsonl), total "
                     f"{sum(e['delay_ms'] for e in stragglers) / 1e3:.2f} s.")
        lines.append("")
    t0 = next((e["t"] for e in res.events if e["kind"] == "run_start"), None)
    for e in shown[:200]:
        rest = {k: v for k, v in e.items() if k not in ("t", "kind", "task", "step")}
        when = f"{e['t'] - t0:8.3f} s" if t0 else ""
        lines.append(f"- {when} step {e.get('step')}: **{e['kind']}** {e.get('task') or ''} {rest}")
    if len(shown) > 200:
        lines.append(f"- ... {len(shown) - 200} more in events.jsonl")
    why = plot_timeline(res, os.path.join(res.out_dir, "timeline.png"))
    lines += ["", "## Timeline", ""]
    lines.append(f"_{why}_" if why else "![step time and loss over time](timeline.png)")
    with open(os.path.join(res.out_dir, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return why


def _f(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)
