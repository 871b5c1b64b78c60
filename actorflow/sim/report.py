"""A run's report.md and its timeline plot (step time and loss over time, faults marked).

matplotlib is optional (the `sim` extra): without it the report says the plot was skipped.
"""
from __future__ import annotations

import os

__all__ = ["write_report", "plot_timeline"]

_MARKS = {  # event kind -> (colour, label)
    "kill": ("tab:red", "kill -9"),
    "crash_during_save": ("darkred", "crash during save"),
    "restart": ("tab:green", "restart"),
    "partition": ("tab:purple", "partition"),
    "heal": ("tab:olive", "heal"),
    "drop": ("tab:orange", "dropped frame"),
    "recovery": ("tab:blue", "recovery"),
    "unexpected_exit": ("black", "unexpected exit"),
}


def plot_timeline(res, path: str) -> str | None:
    """Writes the timeline PNG; returns None, or why it could not."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install 'actorflow[sim]'): no plot"
    m = res.metrics
    steps = m.get("steps", [])
    t0 = next((e["t"] for e in res.events if e["kind"] == "run_start"), None)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(11, 6), sharex=True)
    workers = sorted({s[0] for s in steps})
    for w in workers:
        mine = [s for s in steps if s[0] == w]
        ax1.plot([s[4] for s in mine], [(s[4] - s[3]) * 1e3 for s in mine], ".", ms=3, label=f"worker {w}")
        # A worker's loss curve is broken where it made no step for a while (a fault), not bridged.
        xs, ys = [], []
        for a, b in zip([None] + mine, mine):
            if a is not None and b[4] - a[4] > 0.5:
                xs.append(float("nan"))
                ys.append(float("nan"))
            xs.append(b[4])
            ys.append(b[5])
        ax2.plot(xs, ys, "-", lw=0.8, label=f"worker {w}")
    ax1.set_yscale("log")
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
                    ax.axvspan(start, x, color="tab:purple", alpha=0.12)
            if k == "straggler":
                continue
            if k in _MARKS:
                colour, label = _MARKS[k]
                for ax in (ax1, ax2):
                    ax.axvline(x, color=colour, lw=1.0, ls="--" if k in ("recovery", "drop") else "-",
                               label=None if (k in seen or ax is ax2) else label)
                seen.add(k)
    ax1.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, borderaxespad=0.0)
    ax1.set_title(f"{res.scenario.name} (seed {m.get('seed')}): "
                  f"{'passed' if res.passed else 'FAILED'}", fontsize=10)
    fig.tight_layout()
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
