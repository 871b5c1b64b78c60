"""The GEMM kernels on this machine: where their buffers start (kernels/cpu/aligned.py: on a 64-byte
boundary, or 16 bytes past one, as numpy's large arrays do), what two cores give on one product,
and when a product is worth splitting (kernels/cpu/matmul.py MIN_SPLIT_MACS).

1. The MLP's big product, 256x1024 @ 1024x1024 float32, through the kernels' GEMM (blas.matmul:
   MKL or OpenBLAS, one thread), every operand at each offset; best of 30 calls, three rounds.
2. Two cores on one product: one column half of that product alone, and both halves at once on
   two threads (raw threads meeting at a barrier, nothing of actorflow's pool): how far from 2x
   this machine's two cores get on a GEMM, which bounds what any split of the MLP's GEMMs can do.
3. The MLP training step (benchmarks/train_step.py's graph, global_jit_level ON_1) with the
   kernels' buffers aligned and not (`aligned._SMALL` set past any size: `empty` is then
   np.empty), the fed batch aligned or 16 bytes off to match, alternating every 5 steps in one
   process (the same heap and the same machine state for both: what differs is the alignment
   alone); the median over turns of each turn's best step, and of the per-turn ratios [25%, 75%].
4. The same A/B of `matmul.MIN_SPLIT_MACS`: products under it per thread run whole, against every
   product worth the pool split over its threads.

Run: python benchmarks/gemm_align.py [--turns 40]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _at(shape, off, dtype=np.float32):
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(n + 128, np.uint8)
    start = -raw.ctypes.data % 64 + off
    return raw[start:start + n].view(dtype).reshape(shape)


def gemm_offsets() -> None:
    from actorflow.kernels.cpu.blas import matmul
    rng = np.random.default_rng(0)
    res: dict = {}
    for _ in range(3):
        for off in (0, 16, 32):
            a = _at((256, 1024), off)
            b = _at((1024, 1024), off)
            c = _at((256, 1024), off)
            a[:] = rng.standard_normal(a.shape)
            b[:] = rng.standard_normal(b.shape)
            best = float("inf")
            for _ in range(30):
                t = time.perf_counter()
                matmul(a, b, out=c)
                best = min(best, time.perf_counter() - t)
            res.setdefault(off, []).append(best * 1e3)
    print("256x1024 @ 1024x1024 float32, one thread, best of 30 (ms), three rounds:")
    for off, v in res.items():
        print(f"  operands {off:2d} bytes past a 64-byte boundary: " + ", ".join(f"{x:.3f}" for x in v))


def two_cores(reps: int = 50) -> None:
    import threading

    from actorflow.kernels.cpu.blas import matmul
    rng = np.random.default_rng(0)
    x, w, out = _at((256, 1024), 0), _at((1024, 1024), 0), _at((256, 1024), 0)
    x[:] = rng.standard_normal(x.shape)
    w[:] = rng.standard_normal(w.shape)
    halves = [(w[:, :512], out[:, :512]), (w[:, 512:], out[:, 512:])]
    bar = threading.Barrier(2)

    def other():
        b, o = halves[1]
        for _ in range(reps):
            bar.wait()
            matmul(x, b, out=o)
            bar.wait()
    t = threading.Thread(target=other)
    t.start()
    both = []
    b, o = halves[0]
    for _ in range(reps):
        bar.wait()
        t0 = time.perf_counter()
        matmul(x, b, out=o)
        bar.wait()
        both.append(time.perf_counter() - t0)
    t.join()
    alone = float("inf")
    for _ in range(30):
        t0 = time.perf_counter()
        matmul(x, b, out=o)
        alone = min(alone, time.perf_counter() - t0)
    print(f"one column half (256x1024 @ 1024x512) alone {alone * 1e3:.3f} ms; both halves at once on two threads "
          f"{min(both) * 1e3:.3f} ms best, {np.median(both) * 1e3:.3f} median (2x would be {alone * 1e3:.3f})")


def _mlp_session():
    sys.path.insert(0, HERE)
    import train_step as ts

    import actorflow as af
    prob = ts.make_problem("mlp")
    g, init, fetches, feed = ts.actorflow_graph("mlp", prob)
    oo = af.OptimizerOptions(global_jit_level=af.OptimizerOptions.ON_1)
    s = af.Session(graph=g, config=af.ConfigProto(graph_options=af.GraphOptions(optimizer_options=oo)))
    s.run(init)
    for _ in range(5):
        s.run(fetches, feed)
    return s, fetches, feed


def _alternate(s, fetches, modes: dict, turns: int) -> dict:
    """{mode: per-turn best step}: `modes` maps a name to (switch on, feed); turns of 5 steps each."""
    res: dict = {name: [] for name in modes}
    for _ in range(turns):
        for name, (switch, feed) in modes.items():
            switch()
            best = float("inf")
            for _ in range(5):
                t = time.perf_counter()
                s.run(fetches, feed)
                best = min(best, time.perf_counter() - t)
            res[name].append(best)
    return res


def _report(what: str, turns: int, res: dict, a: str, b: str) -> None:
    q = np.quantile([x / y for x, y in zip(res[a], res[b])], [0.25, 0.5, 0.75])
    print(f"MLP training step, {what}, {turns} turns of 5 steps: {a} {np.median(res[a]) * 1e3:.2f} ms, "
          f"{b} {np.median(res[b]) * 1e3:.2f} ms; {a}/{b} {q[1]:.3f} [{q[0]:.3f}, {q[2]:.3f}]")


def step_ab(turns: int) -> None:
    """The kernels' buffers aligned or not (`aligned._SMALL` past any size: `empty` is np.empty)."""
    from actorflow.kernels.cpu import aligned as al
    s, fetches, feed = _mlp_session()
    feeds = {"aligned": {}, "numpy": {}}
    for k, v in feed.items():
        big = isinstance(v, np.ndarray) and v.nbytes >= 4096
        for name, off in (("aligned", 0), ("numpy", 16)):
            if big:
                x = _at(v.shape, off, v.dtype)
                x[...] = v
                feeds[name][k] = x
            else:
                feeds[name][k] = v
    small = al._SMALL

    def switch(v):
        return lambda: setattr(al, "_SMALL", v)
    try:
        res = _alternate(s, fetches, {"aligned": (switch(small), feeds["aligned"]),
                                      "numpy": (switch(1 << 62), feeds["numpy"])}, turns)
    finally:
        al._SMALL = small
    _report("buffers", turns, res, "aligned", "numpy")


def split_ab(turns: int) -> None:
    """Products under MIN_SPLIT_MACS a thread run whole, or every product worth the pool is split."""
    from actorflow.kernels.cpu import matmul
    s, fetches, feed = _mlp_session()
    limit = matmul.MIN_SPLIT_MACS

    def switch(v):
        return lambda: setattr(matmul, "MIN_SPLIT_MACS", v)
    try:
        res = _alternate(s, fetches, {"whole": (switch(limit), feed), "split": (switch(0), feed)}, turns)
    finally:
        matmul.MIN_SPLIT_MACS = limit
    _report(f"products under {limit:,} multiply-adds a thread", turns, res, "whole", "split")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=40)
    args = ap.parse_args()
    gemm_offsets()
    two_cores()
    step_ab(args.turns)
    split_ab(args.turns)


if __name__ == "__main__":
    main()
