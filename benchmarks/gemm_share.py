"""How much of a training step is GEMM (issue 18: "the MLP step is bound by its GEMMs: get its non-GEMM
time under 10% of the step").

Runs the MLP (or convnet) training step of benchmarks/train_step.py on the synchronous training path
(actors/sync_step.py) and records every cblas GEMM call (kernels/cpu/blas.py) with its thread, start,
end and thread CPU time. Per step it splits the wall time into:

- both threads in a GEMM (the cores doing what the step is for),
- one GEMM running alone (the other thread is waking up, finishing an epilogue, waiting at the end
  of a split kernel, or the kernel was not split),
- no GEMM running at all (everything else: small kernels, epilogues, Python, hand-offs).

"non-GEMM time" is the last; the share of the step where not every core is in a GEMM is the last
two. It also reports the step's CPU time (every thread) against the CPU time inside the GEMMs, and
which kernels hold the no-GEMM time (the main thread's view, kernel by kernel).

Steps are timed one by one; the figures are medians over the fastest half (the least disturbed on
a shared machine) and over all. Wall-time shares mean something only on a quiet machine.

    python benchmarks/gemm_share.py [--model mlp|convnet] [--steps 60] [--jit]
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


class _Recorder:
    """GEMM intervals (start, end, thread CPU) and kernel intervals (name, start, end) of one step."""

    def __init__(self):
        self.gemms: list = []
        self.kernels: list = []
        self.lock = threading.Lock()

    def clear(self):
        self.gemms.clear()
        self.kernels.clear()


def _install(rec: _Recorder, program) -> None:
    """Wraps the cblas functions and the program's kernels so that each call is recorded."""
    from actorflow.actors import sync_step
    from actorflow.kernels.cpu import blas

    blas._functions()

    def wrap_gemm(f):
        def gemm(*args):
            t0, c0 = time.perf_counter(), time.thread_time()
            f(*args)
            t1, c1 = time.perf_counter(), time.thread_time()
            with rec.lock:
                rec.gemms.append((t0, t1, c1 - c0))
        return gemm
    for table in (blas._gemm, blas._narrow):
        for dt in list(table):
            table[dt] = wrap_gemm(table[dt])

    def timed(name, f):
        def call(*args):
            t0 = time.perf_counter()
            try:
                return f(*args)
            finally:
                rec.kernels.append((name, t0, time.perf_counter()))
        return call
    cls = sync_step.SyncTrainProgram
    big, update = cls._big, cls._update
    cls._big = lambda self, actor, args, split_ok: timed(actor.name, big)(self, actor, args, split_ok)
    cls._update = lambda self, actor, args, b, split_ok: timed(actor.name, update)(self, actor, args, b, split_ok)
    for kind, actor, *_ in program.code:
        if kind == 0:
            actor.fn = timed(actor.name, actor.fn)


def _coverage(intervals, a, b) -> tuple:
    """(time in [a, b] with >= 1 interval running, time with >= 2 running)."""
    events = sorted([(max(s, a), 1) for s, e, *_ in intervals if e > a and s < b]
                    + [(min(e, b), -1) for s, e, *_ in intervals if e > a and s < b])
    one = two = 0.0
    depth, last = 0, a
    for t, d in events:
        if depth >= 1:
            one += t - last
        if depth >= 2:
            two += t - last
        depth += d
        last = t
    return one, two


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=("mlp", "convnet"), default="mlp")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--jit", action="store_true", help="global_jit_level=ON_1 (the compiler benchmark's af-on)")
    args = ap.parse_args()
    sys.path.insert(0, HERE)
    import train_step as ts

    sess, fetches, feed, prog = ts.sync_program(args.model, jit=args.jit)
    rec = _Recorder()
    _install(rec, prog)
    for _ in range(3):
        sess.run(fetches, feed)
    rows, per_kernel = [], collections.defaultdict(list)
    for _ in range(args.steps):
        rec.clear()
        t0, c0 = time.perf_counter(), time.process_time()
        sess.run(fetches, feed)
        t1, c1 = time.perf_counter(), time.process_time()
        one, two = _coverage(rec.gemms, t0, t1)
        rows.append((t1 - t0, two, one - two, c1 - c0, sum(g[2] for g in rec.gemms)))
        kernel_gap = {}
        for name, a, b in rec.kernels:
            kernel_gap[name] = kernel_gap.get(name, 0.0) + (b - a) - _coverage(rec.gemms, a, b)[0]
        kernel_gap["(outside the kernels)"] = (t1 - t0) - one - sum(kernel_gap.values())
        per_kernel[len(rows) - 1] = kernel_gap
    r = np.array(rows)
    fast = np.argsort(r[:, 0])[: max(1, len(r) // 2)]
    print(f"{args.model} step, {args.steps} steps, {'JIT on' if args.jit else 'default config'}; "
          f"ms (share of the step)")
    for label, sel in (("fastest half", fast), ("all steps", np.arange(len(r)))):
        wall, two, alone, cpu, gcpu = (float(np.median(r[sel, i])) for i in range(5))
        none = wall - two - alone
        print(f"  {label:12s}: step {1e3 * wall:6.2f} | both threads in GEMM {1e3 * two:6.2f} ({two / wall:4.0%}) | "
              f"one GEMM alone {1e3 * alone:5.2f} ({alone / wall:4.0%}) | no GEMM {1e3 * none:5.2f} ({none / wall:4.1%})"
              f" || CPU {1e3 * cpu:6.2f}, in GEMMs {1e3 * gcpu:6.2f}, non-GEMM CPU {(cpu - gcpu) / cpu:4.1%}")
    names = per_kernel[0].keys()
    med = {n: float(np.median([per_kernel[i].get(n, 0.0) for i in fast])) for n in names}
    print("  no-GEMM time by kernel (fastest half, median), ms:")
    for n, v in sorted(med.items(), key=lambda kv: -kv[1])[:15]:
        print(f"    {1e3 * v:6.3f}  {n}")


if __name__ == "__main__":
    main()
