"""Which GEMM library is fastest on this machine, for the products of the training steps.

Prints GFLOP/s of `blas.matmul` through each installed library (MKL's cblas_sgemm, numpy's bundled
OpenBLAS through its cblas symbol, actorflow's own AVX-512 SGEMM, kernels/cpu/sgemm.py, every product
through it) and of plain `np.matmul`, on one thread, for the 8 GEMMs of the
MLP 784-1024-1024-10 batch-256 step (benchmarks/train_step.py; forward, input gradients with a
transposed weight, weight gradients with a transposed activation accumulated into the weight with
beta=1 as the fused SGD update does) and the dense layers of the LeNet-like convnet (batch 64).
The last column, "auto", is `blas.matmul` as AF_BLAS=auto sets it up (on CPUs that are not Intel's,
with both installed: MKL, and OpenBLAS for products of fewer than 32 columns; on AVX-512 CPUs
actorflow's SGEMM for float32 where it measured faster, the library for narrow products).

The libraries alternate within each shape (rounds x repeats), and each figure is the best run. By
default time is the calling thread's CPU time (`time.thread_time`), which other processes on a
shared machine disturb far less than wall time does; --wall times wall-clock instead.

Run: python benchmarks/blas_backends.py [--rounds 5] [--reps 10] [--wall]
"""
from __future__ import annotations

import argparse
import functools
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from actorflow.kernels.cpu import blas  # noqa: E402

# (name, m, k, n, transpose a, transpose b, beta)
SHAPES = (
    ("mlp fwd  x@W0       256x784x1024", 256, 784, 1024, False, False, 0.0),
    ("mlp fwd  h1@W1      256x1024x1024", 256, 1024, 1024, False, False, 0.0),
    ("mlp fwd  h2@W2      256x1024x10", 256, 1024, 10, False, False, 0.0),
    ("mlp dX   g@W2^T     256x10x1024", 256, 10, 1024, False, True, 0.0),
    ("mlp dX   g@W1^T     256x1024x1024", 256, 1024, 1024, False, True, 0.0),
    ("mlp dW2  h2^T@g +=  1024x256x10", 1024, 256, 10, True, False, 1.0),
    ("mlp dW1  h1^T@g +=  1024x256x1024", 1024, 256, 1024, True, False, 1.0),
    ("mlp dW0  x^T@g +=   784x256x1024", 784, 256, 1024, True, False, 1.0),
    ("lenet fwd  64x3136x1024", 64, 3136, 1024, False, False, 0.0),
    ("lenet dX   64x1024x3136", 64, 1024, 3136, False, True, 0.0),
    ("lenet dW   3136x64x1024 +=", 3136, 64, 1024, True, False, 1.0),
    ("lenet fwd  64x1024x10", 64, 1024, 10, False, False, 0.0),
    ("lenet dW   1024x64x10 +=", 1024, 64, 10, True, False, 1.0),
)


def _libraries():
    libs = {}
    for name, load in (("mkl", blas._load_mkl), ("openblas", blas._load_openblas)):
        fns = load()
        if fns is not None:
            libs[name] = fns
    own = blas._load_own()
    if own is not None:
        libs["actorflow"] = {np.dtype(np.float32): own}
    return libs


def _product(name, libs, a, b, out, beta):
    if name == "np.matmul":
        if beta:
            out += np.matmul(a, b)          # what numpy needs for the accumulation
        else:
            np.matmul(a, b, out=out)
    else:
        blas._gemm, blas._narrow = libs[name] if name == "auto" else (libs[name], {})
        blas.matmul(a, b, out, 1.0, beta)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--wall", action="store_true", help="wall-clock time instead of thread CPU time")
    args = ap.parse_args(argv)
    clock = time.perf_counter if args.wall else time.thread_time
    libs = _libraries()
    print(f"CPU vendor {blas.cpu_vendor() or '?'}; AF_BLAS=auto uses {blas.backend()}; "
          f"{'wall' if args.wall else 'thread CPU'} time, one thread, best of {args.rounds}x{args.reps}")
    blas.backend()
    libs["auto"] = (blas._gemm, blas._narrow)
    names = [n for n in libs if n != "auto"] + ["np.matmul", "auto"]
    print(f"{'product (m x k x n)':36s}" + "".join(f"{n:>12s}" for n in names) + "   GFLOP/s")
    rng = np.random.default_rng(0)
    saved = blas._gemm, blas._narrow
    try:
        for label, m, k, n, ta, tb, beta in SHAPES:
            a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
            b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
            a2, b2 = (a.T if ta else a), (b.T if tb else b)
            out = np.zeros((m, n), np.float32)
            run = functools.partial(_product, libs=libs, a=a2, b=b2, out=out, beta=beta)
            best = dict.fromkeys(names, float("inf"))
            for r in range(args.rounds):
                for name in names if r % 2 == 0 else reversed(names):
                    run(name)
                    for _ in range(args.reps):
                        t0 = clock()
                        run(name)
                        best[name] = min(best[name], clock() - t0)
            flops = 2.0 * m * k * n
            print(f"{label:36s}" + "".join(f"{flops / best[nm] / 1e9:12.1f}" for nm in names))
    finally:
        blas._gemm, blas._narrow = saved


if __name__ == "__main__":
    main()
