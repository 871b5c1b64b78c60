"""An LSTM loop and its gradient loop over a batch of unknown size, compiled and interpreted.

One LSTM cell of width 32 (input 32) in a ``while_loop`` of --steps steps, with the gradient of a
loss of the final h and c with respect to the cell's weights, biases and input (forward loop +
gradient loop), timed per step for each batch size in --batches, as:

- static: ``x = placeholder(float32, [B, 32])``, JIT on (every shape known when compiling);
- dynamic: ``x = placeholder(float32, [None, 32])``, JIT on (symbolic batch dimension,
  scheduler/jit/symbolic.py: both loops compile, one function for every batch size);
- dynamic-off: the same graph, JIT off (the actor runtime interprets both loops).

All in one process, sessions built (and compiled) first, then rounds that alternate the variants;
each figure is the minimum over rounds (the machine is shared; the median is printed beside it).
The first dynamic batch size compiles; the others reuse its function (``compiled`` says how many
functions each variant compiled, ``rejected`` how many calls fell back to the interpreted ops).
A batch that makes the cell's MatMul bigger than the JIT compiles for static shapes (about 32
rows here) runs the interpreted ops inside the compiled loop's kernel ("interpreted for their
size"), as the static graph's loop stays on the runtime: compare batches past it with that in mind.

Run: python benchmarks/dynamic_loop.py [--steps 2000] [--batches 1,8] [--rounds 5]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

import actorflow as af
from actorflow.scheduler.jit.compile import compile_stats

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compiler import lstm_body  # noqa: E402 - the LSTM cell of compiler.py's workloads

WIDTH = 32


def _graph(batch, steps):
    g = af.Graph()
    with g.as_default():
        rng = np.random.default_rng(0)
        w = af.constant((rng.standard_normal((2 * WIDTH, 4 * WIDTH)) * 0.1).astype(np.float32))
        b = af.constant(np.zeros(4 * WIDTH, np.float32))
        x = af.placeholder(af.float32, [batch, WIDTH], name="x")
        zero = af.zeros_like(x)
        _, h, c = af.while_loop(lambda t, h, c: t < steps, lstm_body(af, x, w, b), [af.constant(0), zero, zero])
        loss = af.reduce_sum(h * h) + af.reduce_sum(c)
        fetches = [loss] + af.gradients(loss, [w, b, x])
    return g, x, fetches


def _config(jit):
    oo = af.OptimizerOptions(global_jit_level=af.OptimizerOptions.ON_1 if jit else af.OptimizerOptions.OFF)
    return af.ConfigProto(graph_options=af.GraphOptions(optimizer_options=oo))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    batches = [int(x) for x in a.batches.split(",")]
    rng = np.random.default_rng(1)
    feeds = {bs: rng.standard_normal((bs, WIDTH)).astype(np.float32) for bs in batches}
    runs = {}                   # (variant, batch) -> fn
    info = {}
    for variant in ("static", "dynamic", "dynamic-off"):
        for bs in batches:
            if variant == "static" or (variant != "static" and (variant, None) not in info):
                g, x, fetches = _graph(bs if variant == "static" else None, a.steps)
                sess = af.Session(graph=g, config=_config(variant != "dynamic-off"))
                if variant != "static":
                    info[(variant, None)] = (sess, x, fetches)
            else:
                sess, x, fetches = info[(variant, None)]
            c0, t0 = compile_stats["compiled"], time.perf_counter()
            sess.run(fetches, {x: feeds[bs]})
            info[(variant, bs)] = {"first_s": time.perf_counter() - t0, "compiled": compile_stats["compiled"] - c0}
            runs[(variant, bs)] = (lambda s=sess, x=x, f=fetches, v=feeds[bs]: s.run(f, {x: v}))
    times: dict = {k: [] for k in runs}
    rejected0, big0 = compile_stats["rejected"], compile_stats["big"]
    for r in range(a.rounds):
        keys = list(runs)
        keys = keys[r % len(keys):] + keys[:r % len(keys)]      # rotate the order each round
        for k in keys:
            t0 = time.perf_counter()
            runs[k]()
            times[k].append(time.perf_counter() - t0)
    print(f"LSTM width {WIDTH}, {a.steps} steps, forward loop + gradient loop; us/step "
          f"(min / median of {a.rounds} alternating rounds); calls rejected: {compile_stats['rejected'] - rejected0}, "
          f"interpreted for their size: {compile_stats['big'] - big0}")
    for bs in batches:
        base = min(times[("dynamic-off", bs)])
        for variant in ("static", "dynamic", "dynamic-off"):
            ts = times[(variant, bs)]
            i = info[(variant, bs)]
            print(f"  batch {bs:2d} {variant:12s} {min(ts) / a.steps * 1e6:9.2f} {statistics.median(ts) / a.steps * 1e6:9.2f}"
                  f"   {base / min(ts):6.1f}x vs dynamic-off   first run {i['first_s']:.2f} s, "
                  f"{i['compiled']} compiled")


if __name__ == "__main__":
    main()
