"""Convolution and pooling kernels against the machine's GEMM rate (issue 18, scope 4). Prints, in one run:

1. The machine's single-precision GEMM rate on one core: GFLOP/s of `np.matmul` (numpy's BLAS) and of
   actorflow's `blas.matmul` (MKL's sequential SGEMM when installed), on the GEMMs a LeNet convolution
   amounts to (the implicit-GEMM shapes of its layers) and on a 1024^3 square. The best of these is
   "the GEMM rate" that the kernels are measured against.
2. GFLOP/s of each CPU convolution kernel on LeNet's shapes (benchmarks/train_step.py's convnet:
   batch 64, NHWC, 5x5 SAME filters, 28x28x1 -> 32 -> 64 channels), old (a baseline commit, default
   the one before the kernels were rewritten) against new (this tree), each as % of the GEMM rate;
   pooling, which does no arithmetic to speak of, as GB/s moved and % of a memory copy's rate.
   GFLOP/s count a direct convolution's flops: the first layer's kernels run as a register-tiled
   direct convolution (kernels/cpu/vector_loops.py), the second layer's as Winograd F(2x2, 5x5)
   (kernels/cpu/winograd.py), 2.8x fewer multiplications, and pass 100% of the GEMM rate.
3. The MLP step's non-GEMM share: the step under actorflow against its 8 GEMMs alone, run as
   actorflow runs them (same BLAS, same 2-way splits, the SGD update inside the GEMM), in one process.
4. The LeNet and MLP training steps (train_step.py's models) under actorflow (old and new) and under
   TensorFlow 2.21's tf.compat.v1 (--tf-python), as ms per step and as ratios to TF.

Every contender runs in its own subprocess on one BLAS thread per process (kernels: one thread, no
intra-op split, so the rate is per core; with --threads 2, each kernel split by batch over two
threads as the kernel pool splits it, against two-thread SGEMM and memory-copy rates; training steps:
each library with its own default of 2 threads), in alternating rounds (old, new, old, new, ...) so that load from other processes hits both
alike; each figure is the minimum over rounds of a minimum over repeats (the least-disturbed run).

Run: python benchmarks/conv_kernels.py [--baseline REV] [--rounds 3] [--tf-python /work/tfvenv/bin/python]
                                        [--no-steps] [--threads 2]
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_BASELINE = "962a8d6"      # the nn.py split, before the convolution kernels were rewritten
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

CONV = {"strides": (1, 1, 1, 1), "padding": "SAME", "data_format": "NHWC", "dilations": (1, 1, 1, 1)}
POOL = {"ksize": (1, 2, 2, 1), "strides": (1, 2, 2, 1), "padding": "VALID", "data_format": "NHWC"}
FUSED = dict(CONV, fused_ops=("BiasAdd", "Relu"))
# (name, input NHWC, filter HWIO) of LeNet's two convolutions, and the inputs of its two max-pools.
LAYERS = (("conv0", (64, 28, 28, 1), (5, 5, 1, 32)), ("conv1", (64, 14, 14, 32), (5, 5, 32, 64)))
POOLS = (("pool0", (64, 28, 28, 32)), ("pool1", (64, 14, 14, 64)))


def _tmin(fn, reps):
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


# ---------------------------------------------------------------------------------------------
# Workers (each runs in its own process)
# ---------------------------------------------------------------------------------------------

def _threads_env(threads):
    return {k: str(threads) for k in ONE_THREAD}


def _copy(x, y, pool):
    """y[:] = x, split in halves over `pool`'s two threads when given."""
    if pool is None:
        np.copyto(y, x)
        return
    h = x.shape[0] // 2
    for fut in [pool.submit(np.copyto, y[:h], x[:h]), pool.submit(np.copyto, y[h:], x[h:])]:
        fut.result()


def gemm_worker(reps, threads=1):
    """{shape name: {"numpy": GFLOP/s, "blas": GFLOP/s}} for SGEMM on `threads` BLAS threads (blas.matmul
    is MKL's sequential SGEMM: one thread always), and the memory-copy rate on as many threads."""
    from concurrent.futures import ThreadPoolExecutor

    from actorflow.kernels.cpu import blas
    rng = np.random.default_rng(0)
    shapes = {"square 1024": (1024, 1024, 1024)}
    for name, xs, fs in LAYERS:
        m, k, n = xs[0] * xs[1] * xs[2], fs[0] * fs[1] * fs[2], fs[3]
        shapes[f"{name} [{m}x{k}]@[{k}x{n}]"] = (m, k, n)
    out = {"backend": blas.backend()}
    for name, (m, k, n) in shapes.items():
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        c = np.empty((m, n), np.float32)
        flops = 2.0 * m * k * n
        out[name] = {"numpy": flops / _tmin(functools.partial(np.matmul, a, b, out=c), reps) / 1e9,
                     "blas": flops / _tmin(functools.partial(blas.matmul, a, b, c), reps) / 1e9}
    x = rng.standard_normal(POOLS[0][1], dtype=np.float32)
    y = np.empty_like(x)
    pool = ThreadPoolExecutor(2) if threads == 2 else None
    out["copy GB/s"] = 2 * x.nbytes / _tmin(lambda: _copy(x, y, pool), reps) / 1e9
    return out


def kernel_worker(reps, batch, threads=1):
    """{kernel name: {"s": seconds, "flops" | "bytes": work}} for the current `actorflow` on one thread,
    or (threads=2) each kernel split by batch over two threads as the kernel pool runs it."""
    from concurrent.futures import ThreadPoolExecutor

    from actorflow.kernels.registry import get_kernel, has_kernel
    rng = np.random.default_rng(0)
    executor = ThreadPoolExecutor(2) if threads == 2 else None

    def k(op, attrs):
        kdef = get_kernel(op, "CPU")
        fn = kdef.factory(attrs)
        if executor is None or kdef.split is None:
            return fn
        split = kdef.split(attrs)

        def run(*args):         # as actors/pool.py runs a split kernel: its blocks on two threads
            parts = split(2, *args)
            if parts is None:
                return fn(*args)
            for fut in [executor.submit(t) for t in parts[1]]:
                fut.result()
            return parts[2]() if len(parts) == 3 else parts[0]
        return run
    conv, fused = k("Conv2D", CONV), k("_FusedConv2D", FUSED)
    bp_in, bp_f = k("Conv2DBackpropInput", CONV), k("Conv2DBackpropFilter", CONV)
    pool, pool_grad = k("MaxPool", POOL), k("MaxPoolGrad", POOL)
    fused_pool = fused_pool_grad = None
    if has_kernel("_FusedMaxPoolGrad", "CPU"):
        fused_pool = k("_FusedConv2D", dict(FUSED, fused_ops=("BiasAdd", "Relu", "MaxPool"), pool_ksize=POOL["ksize"]))
        fused_pool_grad = k("_FusedMaxPoolGrad", dict(POOL, fused_ops=("ReluGrad", "BiasAddGrad")))
    res = {}
    for name, xs, fs in LAYERS:
        xs = (batch,) + xs[1:]
        x = rng.standard_normal(xs, dtype=np.float32)
        f = rng.standard_normal(fs, dtype=np.float32) * 0.1
        bias = rng.standard_normal(fs[3], dtype=np.float32)
        dy = rng.standard_normal(xs[:3] + (fs[3],), dtype=np.float32)
        flops = 2.0 * xs[0] * xs[1] * xs[2] * fs[0] * fs[1] * fs[2] * fs[3]
        cases = {f"Conv2D {name}": functools.partial(conv, x, f),
                 f"_FusedConv2D+Relu {name}": functools.partial(fused, x, f, bias),
                 f"Conv2DBackpropFilter {name}": functools.partial(bp_f, x, np.array(fs, np.int32), dy)}
        if name != "conv0":         # the first layer's input gradient is never computed
            cases[f"Conv2DBackpropInput {name}"] = functools.partial(bp_in, np.array(xs, np.int32), f, dy)
        for case, fn in cases.items():
            res[case] = {"s": _tmin(fn, reps), "flops": flops}
        if fused_pool is not None:      # trees without the conv + max-pool fusion skip it
            res[f"_FusedConv2D+Relu+MaxPool {name}"] = {"s": _tmin(functools.partial(fused_pool, x, f, bias), reps),
                                                        "flops": flops}
    for name, xs in POOLS:
        x = np.maximum(rng.standard_normal((batch,) + xs[1:], dtype=np.float32), 0)    # a ReLU's output
        y = pool(x)
        g = rng.standard_normal(y.shape, dtype=np.float32)
        res[f"MaxPool {name}"] = {"s": _tmin(functools.partial(pool, x), reps), "bytes": x.nbytes + y.nbytes}
        res[f"MaxPoolGrad {name}"] = {"s": _tmin(functools.partial(pool_grad, x, y, g), reps),
                                      "bytes": 2 * x.nbytes + 2 * y.nbytes}
        if fused_pool_grad is not None:     # MaxPoolGrad + ReluGrad + BiasAddGrad in one pass
            res[f"_FusedMaxPoolGrad+Relu+Bias {name}"] = {
                "s": _tmin(functools.partial(fused_pool_grad, x, y, g), reps), "bytes": 2 * x.nbytes + 2 * y.nbytes}
    return res


def mlp_share_worker(steps, rounds):
    """{"step": min ms, "gemms": min ms} of the MLP step under actorflow and of its 8 GEMMs alone,
    run as actorflow runs them (blas.matmul, big ones split in two blocks over 2 threads, the SGD
    update accumulated into the weights by the GEMM), alternating in one process."""
    from concurrent.futures import ThreadPoolExecutor

    from actorflow.kernels.cpu.blas import matmul as gemm
    from actorflow.kernels.cpu.matmul import gemm_block_operands, gemm_blocks
    sys.path.insert(0, HERE)
    import train_step
    prob = train_step.make_problem("mlp")
    pool = ThreadPoolExecutor(2)

    def mm(a, b, out=None, beta=0.0):
        if out is None:
            out = np.empty((a.shape[0], b.shape[1]), np.float32)
        blocks = gemm_blocks(a.shape[0], b.shape[1], a.shape[1], 2)
        if blocks is None:
            return gemm(a, b, out, beta=beta)
        axis, bounds = blocks
        for fut in [pool.submit(gemm, *gemm_block_operands(axis, lo, hi, a, b, out), 1.0, beta) for lo, hi in bounds]:
            fut.result()
        return out
    x, w = prob["x"], [prob[f"w{i}"].copy() for i in range(3)]

    def gemms():
        h1 = mm(x, w[0])
        h2 = mm(h1, w[1])
        lg = mm(h2, w[2])
        d2 = mm(lg, w[2].T)
        mm(h2.T, lg, w[2], beta=1.0)
        d1 = mm(d2, w[1].T)
        mm(h1.T, d2, w[1], beta=1.0)
        mm(x.T, d1, w[0], beta=1.0)
    step, close = train_step.actorflow_step("mlp", prob)
    best = {"step": float("inf"), "gemms": float("inf")}
    try:
        for fn in (step, gemms):
            for _ in range(3):
                fn()
        for _ in range(rounds):
            for name, fn in (("step", step), ("gemms", gemms)):
                for _ in range(steps):
                    t0 = time.perf_counter()
                    fn()
                    best[name] = min(best[name], (time.perf_counter() - t0) * 1e3)
    finally:
        close()
        pool.shutdown()
    return best


def step_worker(lib, model, steps):
    """{"ms": [per-step ms], "loss": first loss} of train_step.py's `model` under `lib` ("af" | "tf")."""
    sys.path.insert(0, HERE)
    import train_step
    prob = train_step.make_problem(model)
    if lib == "tf":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        step, close = train_step.tf_step(model, prob)
    else:
        step, close = train_step.actorflow_step(model, prob)
    try:
        first = step()
        for _ in range(3):
            step()
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e3)
    finally:
        close()
    return {"ms": times, "loss": first}


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------

def _extract(rev, dest):
    """The actorflow package of git revision `rev`, unpacked under `dest`."""
    with tempfile.NamedTemporaryFile(suffix=".tar") as tmp:
        subprocess.run(["git", "-C", ROOT, "archive", "-o", tmp.name, rev, "actorflow"], check=True)
        with tarfile.open(tmp.name) as t:
            t.extractall(dest, filter="data")
    return dest


def _run(python, src, *args, threads_one=True, timeout=900, threads=1):
    env = dict(os.environ, PYTHONPATH=src)
    if threads_one:
        env.update(ONE_THREAD if threads == 1 else _threads_env(threads))
    p = subprocess.run([python, os.path.abspath(__file__), "--worker", *args], env=env, capture_output=True,
                       text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"worker {args} under {python} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--baseline", default=DEFAULT_BASELINE, help="git revision of the old kernels")
    p.add_argument("--rounds", type=int, default=3, help="alternating old/new rounds")
    p.add_argument("--reps", type=int, default=10, help="timed repeats per kernel per round")
    p.add_argument("--steps", type=int, default=20, help="timed training steps per contender per round")
    p.add_argument("--tf-python", default=os.environ.get("AF_BENCH_TF_PYTHON", "/work/tfvenv/bin/python"))
    p.add_argument("--no-steps", action="store_true", help="kernels only")
    p.add_argument("--no-kernels", action="store_true", help="the MLP share and the training steps only")
    p.add_argument("--batch", type=int, default=64,
                   help="batch of the kernel shapes (LeNet's is 64; 8 makes the big kernels short enough, about "
                        "1.5 ms, to run between two preemptions on a machine loaded by other processes)")
    p.add_argument("--threads", type=int, choices=(1, 2), default=1,
                   help="kernels and GEMM on one thread, or split over two (as the kernel pool runs them)")
    p.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        kind, *rest = args.worker
        if kind == "gemm":
            out = gemm_worker(int(rest[0]), int(rest[1]))
        elif kind == "kernels":
            out = kernel_worker(int(rest[0]), int(rest[1]), int(rest[2]))
        elif kind == "mlp-share":
            out = mlp_share_worker(int(rest[0]), int(rest[1]))
        else:
            out = step_worker(rest[0], rest[1], int(rest[2]))
        print(json.dumps(out))
        return

    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="af-conv-bench-") as tmp:
        old_src = _extract(args.baseline, tmp)
        trees = {"old": old_src, "new": ROOT}
        gemm, kern = None, {"old": {}, "new": {}}
        for r in range(0 if args.no_kernels else args.rounds):
            g = _run(py, ROOT, "gemm", str(args.reps), str(args.threads), threads=args.threads)
            gemm = g if gemm is None else {k: (max(v, gemm[k]) if isinstance(v, float) else
                                               {kk: max(vv, gemm[k][kk]) for kk, vv in v.items()}
                                               if isinstance(v, dict) else v) for k, v in g.items()}
            for side in ("old", "new") if r % 2 == 0 else ("new", "old"):
                for name, v in _run(py, trees[side], "kernels", str(args.reps), str(args.batch), str(args.threads),
                                    threads=args.threads).items():
                    best = kern[side].get(name)
                    if best is None or v["s"] < best["s"]:
                        kern[side][name] = v
        if gemm is not None:
            _print_kernels(gemm, kern, args.threads)
        if args.no_steps:
            return
        _steps(args, py, trees, old_src)


def _print_kernels(gemm, kern, threads=1):
    """The GEMM rates and the old/new kernel table."""
    rate = max(max(v.values()) for v in gemm.values() if isinstance(v, dict))
    on = "one-thread" if threads == 1 else f"{threads}-thread"
    print(f"GEMM backend of actorflow: {gemm['backend']}; {on} SGEMM, GFLOP/s "
          f"(numpy's BLAS / actorflow blas.matmul, which is sequential):")
    for name, v in gemm.items():
        if isinstance(v, dict):
            print(f"  {name:34s} {v['numpy']:7.1f} / {v['blas']:7.1f}")
    print(f"  GEMM rate (best of the above): {rate:.1f} GFLOP/s; memory copy: {gemm['copy GB/s']:.1f} GB/s\n")
    print(f"{'kernel (LeNet shape, ' + on + ')':36s} {'old ms':>8s} {'new ms':>8s} {'old':>14s} {'new':>14s} "
          f"{'new/old':>8s}")
    for name, new in kern["new"].items():
        old = kern["old"].get(name)
        if "flops" in new:
            def fmt(v):
                gf = v["flops"] / v["s"] / 1e9
                return f"{gf:5.1f}GF {100 * gf / rate:4.0f}%"
        else:
            def fmt(v):
                gb = v["bytes"] / v["s"] / 1e9
                return f"{gb:5.1f}GB/s {100 * gb / gemm['copy GB/s']:3.0f}%"
        old_ms = f"{old['s'] * 1e3:8.3f}" if old else f"{'-':>8s}"
        print(f"{name:36s} {old_ms} {new['s'] * 1e3:8.3f} {fmt(old) if old else '-':>14s} {fmt(new):>14s} "
              f"{(old['s'] / new['s']) if old else float('nan'):7.2f}x")
    print("(conv: GFLOP/s and % of the GEMM rate; pooling: GB/s read+written and % of the copy rate)")
    print("(GFLOP/s count a direct convolution's 2*N*OH*OW*KH*KW*C*O flops; conv0 runs as a register-tiled direct\n"
          " convolution (kernels/cpu/vector_loops.py), conv1 as Winograd F(2x2, 5x5), 2.8x fewer multiplications,\n"
          " so it can pass 100% of the GEMM rate)\n")


def _steps(args, py, trees, old_src):
    """The MLP step's non-GEMM share, and the training steps of old, new and TF."""
    contenders = {"af old": (py, old_src, "af"), "af new": (py, ROOT, "af")}
    if args.tf_python and os.path.exists(args.tf_python):
        contenders["tf"] = (args.tf_python, ROOT, "tf")
    else:
        print(f"TensorFlow interpreter {args.tf_python!r} not found: steps without TF")
    share = {side: _run(py, trees[side], "mlp-share", str(args.steps), str(args.rounds), threads_one=False)
             for side in ("old", "new")}
    for side, v in share.items():
        print(f"MLP step ({side}): {v['step']:.2f} ms; its 8 GEMMs alone, as actorflow runs them: {v['gemms']:.2f} ms; "
              f"non-GEMM time {v['step'] - v['gemms']:.2f} ms = {100 * (1 - v['gemms'] / v['step']):.1f}% of the step")
    for model in ("mlp", "convnet"):
        best, loss = {}, {}
        for r in range(args.rounds):
            names = list(contenders) if r % 2 == 0 else list(reversed(contenders))
            for name in names:
                python, src, lib = contenders[name]
                env_src = src if lib == "af" else ""
                out = _run(python, env_src, "step", lib, model, str(args.steps), threads_one=False)
                best[name] = min(best.get(name, float("inf")), min(out["ms"]))
                loss[name] = out["loss"]
        line = ", ".join(f"{n} {best[n]:.2f} ms (loss {loss[n]:.4f})" for n in contenders)
        print(f"{model} step, min over {args.rounds} rounds x {args.steps} steps: {line}")
        if "tf" in best:
            print(f"  ratio to TF: af old {best['af old'] / best['tf']:.2f}x, af new {best['af new'] / best['tf']:.2f}x")


if __name__ == "__main__":
    main()
