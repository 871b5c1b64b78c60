"""Same-process A/B of the offload rule on the training steps of benchmarks/train_step.py.

Builds the step twice in one process, each session's actors made under one rule, and times them
alternating step by step (the order flips every pair), so both see the same machine minute:

- ``old``: the rule before the cost model had units (offload when cost > 400,000, whatever the
  cost counts: multiply-adds for GEMMs, elements otherwise);
- ``ns:N``: the current model with OFFLOAD_NS = N (actors/node.py; kernels/registry.py unit_ns).

Prints each side's median and minimum and the median of the paired ratios B/A with its quartiles.
On a shared machine, run it under ``chrt -f 10`` (as root) for figures close to a quiet machine's.

    python benchmarks/offload_ab.py [--model mlp|convnet] [--steps 100] [A] [B]    (default: old ns:100000)
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=("mlp", "convnet"), default="mlp")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("modes", nargs="*", default=["old", "ns:100000"])
    args = ap.parse_args()
    if len(args.modes) != 2:
        sys.exit("give two modes (old, ns:N)")
    sys.path.insert(0, HERE)
    import train_step as ts

    import actorflow as af
    from actorflow.actors import node
    from actorflow.kernels import registry

    registry._load("CPU")
    prob = ts.make_problem(args.model)

    def build(mode):
        kernels, limit = dict(registry._REGISTRY), node.OFFLOAD_NS
        try:
            if mode == "old":
                node.OFFLOAD_NS = 400_000
                for key, kdef in kernels.items():
                    registry._REGISTRY[key] = dataclasses.replace(kdef, unit_ns=1.0)
            elif mode.startswith("ns:"):
                node.OFFLOAD_NS = float(mode[3:])
            else:
                sys.exit(f"unknown mode {mode!r}: old or ns:N")
            g, initializer, fetches, feed = ts.actorflow_graph(args.model, prob)
            sess = af.Session(graph=g)
            sess.run(initializer)
            for _ in range(2):
                sess.run(fetches, feed)
        finally:                          # the actors keep their limits; the next build starts clean
            registry._REGISTRY.clear()
            registry._REGISTRY.update(kernels)
            node.OFFLOAD_NS = limit
        return lambda: sess.run(fetches, feed)

    a, b = args.modes
    steps = {a: build(a), b: build(b)}
    times: dict = {a: [], b: []}
    load = os.getloadavg()[0]
    for i in range(args.steps):
        for m in ((a, b) if i % 2 else (b, a)):
            t0 = time.perf_counter()
            steps[m]()
            times[m].append(time.perf_counter() - t0)
    ratios = [y / x for x, y in zip(times[a], times[b])]
    q = statistics.quantiles(ratios, n=4)
    print(f"{args.model}, {args.steps} pairs, load {load:.1f} -> {os.getloadavg()[0]:.1f}; ms per step:")
    for m in (a, b):
        print(f"  {m:12s} median {1e3 * statistics.median(times[m]):7.2f}  min {1e3 * min(times[m]):7.2f}")
    print(f"  {b}/{a}: paired median {statistics.median(ratios):.3f} [{q[0]:.3f}, {q[2]:.3f}]")


if __name__ == "__main__":
    main()
