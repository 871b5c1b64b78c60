"""The serial stretch of a training step between its forward and backward GEMMs (issue 18: the MLP
step's non-GEMM time).

Runs the MLP (or convnet) training step of benchmarks/train_step.py on the synchronous training
path (actors/sync_step.py), JIT and optimizer as `benchmarks/compiler.py` runs "af-on" (--jit-off:
as "af-off"), and times every kernel call of the step. The stretch runs from the end of the last
forward GEMM kernel to the start of the first GEMM kernel of the backward pass (the loss, its
gradient and whatever the plan puts between); nothing in it can run beside it. Prints the kernels
of the stretch in program order with their median per-call times, and the stretch's median.

    python benchmarks/loss_stretch.py [--model mlp|convnet] [--steps 60] [--jit-off]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
_GEMMS = frozenset({"MatMul", "_FusedMatMul", "_MatMulApplyGradientDescent", "Conv2D", "_FusedConv2D",
                    "Conv2DBackpropInput", "Conv2DBackpropFilter"})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=("mlp", "convnet"), default="mlp")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--jit-off", action="store_true", help="global_jit_level=OFF (compiler.py's af-off)")
    args = ap.parse_args()
    sys.path.insert(0, HERE)
    import train_step as ts

    sess, fetches, feed, prog = ts.sync_program(args.model, jit=not args.jit_off)
    code = prog.code
    types = [getattr(a, "op_type", "") or "" for _kind, a, *_ in code]
    names = [a.name for _kind, a, *_ in code]
    gemm = [t in _GEMMS for t in types]
    # the backward pass's ops are named gradients/... (a fused one keeps its last part's name)
    second = next((k for k in range(len(code)) if gemm[k] and names[k].startswith("gradients/")), None)
    if second is None:
        sys.exit("no backward GEMM found")
    first = max(k for k in range(second) if gemm[k])
    spans: dict = {}

    def timed(k, f):
        def call(*a):
            t0 = time.perf_counter()
            try:
                return f(*a)
            finally:
                spans[k] = (t0, time.perf_counter())
        return call
    cls = type(prog)
    entry = cls._entry

    def timed_entry(self, k, outs, feed_values, split_ok):
        t0 = time.perf_counter()
        try:
            return entry(self, k, outs, feed_values, split_ok)
        finally:
            spans[k] = (t0, time.perf_counter())
    cls._entry = timed_entry
    for _ in range(3):
        sess.run(fetches, feed)
    rows = []
    for _ in range(args.steps):
        spans.clear()
        sess.run(fetches, feed)
        rows.append([spans[second][0] - spans[first][1]]
                    + [spans[k][1] - spans[k][0] for k in range(first + 1, second)])
    cls._entry = entry
    r = np.array(rows) * 1e6
    load = os.getloadavg()[0]
    print(f"{args.model} step, JIT {'off' if args.jit_off else 'on'}, {args.steps} steps, load {load:.1f}: "
          f"stretch from '{names[first]}' to '{names[second]}'")
    print(f"  stretch: median {np.median(r[:, 0]):7.1f} us, fastest quarter {np.percentile(r[:, 0], 25):7.1f} us, "
          f"{second - first - 1} kernels")
    for j, k in enumerate(range(first + 1, second)):
        print(f"    {np.median(r[:, j + 1]):7.1f} us  {names[k]} ({types[k]})")


if __name__ == "__main__":
    main()
