"""Calibrates the offload cost model (kernels/registry.py MAC_NS and ELEMENT_NS, actors/node.py
POOL_HANDOFF_NS): one core's time per unit of kernel cost, and what a hand-off to the kernel pool
costs, on the machine it runs on.

- ns per multiply-add of single-threaded GEMMs (blas.matmul) and convolutions, on the MLP's and
  LeNet's shapes and on small ones near the offload threshold;
- ns per element of common element-wise kernels on a 256x1024 float32 tensor (per unit of each
  kernel's own cost function);
- the pool's hand-off: a no-op's round trip through a KernelPool thread, and the wake-up latency
  of an idle pool thread (what a split kernel waits for its second half).

Figures are the minimum and median of repeated calls; on a shared machine the median of the
hand-off grows with the load (a loaded 2-core VM: 30-100 us), so say what the load was.

    python benchmarks/offload_cost.py
"""
from __future__ import annotations

import os
import statistics
import threading
import time

import numpy as np


def _times(fn, n, *args):
    fn(*args)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn(*args)
        out.append(time.perf_counter() - t0)
    return min(out), statistics.median(out)


def main() -> None:
    from threadpoolctl import threadpool_limits
    threadpool_limits(1, user_api="blas")                  # as the runtime runs BLAS
    from actorflow.actors.node import OFFLOAD_NS, POOL_HANDOFF_NS
    from actorflow.actors.pool import KernelPool
    from actorflow.kernels.registry import ELEMENT_NS, MAC_NS, get_kernel

    print(f"load average {os.getloadavg()[0]:.2f}; current constants: MAC_NS {MAC_NS}, ELEMENT_NS {ELEMENT_NS}, "
          f"POOL_HANDOFF_NS {POOL_HANDOFF_NS}, OFFLOAD_NS {OFFLOAD_NS}")
    rng = np.random.default_rng(0)

    print("GEMM-bound kernels, one thread: us, ns per multiply-add (min, median)")
    gemms = [((256, 784), (784, 1024), {}), ((256, 1024), (1024, 1024), {}), ((256, 1024), (1024, 10), {}),
             ((256, 10), (1024, 10), {"transpose_b": True}), ((256, 1024), (256, 10), {"transpose_a": True}),
             ((64, 64), (64, 64), {}), ((128, 128), (128, 128), {})]
    for sa, sb, attrs in gemms:
        a, b = rng.standard_normal(sa, dtype=np.float32), rng.standard_normal(sb, dtype=np.float32)
        k = get_kernel("MatMul", "CPU")
        fn = k.factory(attrs)
        mn, md = _times(fn, 30, a, b)
        c = k.cost(a.T if attrs.get("transpose_a") else a, b)
        print(f"  MatMul {sa}x{sb} {attrs or ''}: {mn * 1e6:8.1f} {md * 1e6:8.1f} | {mn * 1e9 / c:.4f} {md * 1e9 / c:.4f}")
    conv_attrs = {"strides": (1, 1, 1, 1), "padding": "SAME", "data_format": "NHWC", "dilations": (1, 1, 1, 1)}
    for xs, fs in (((64, 28, 28, 1), (5, 5, 1, 32)), ((64, 14, 14, 32), (5, 5, 32, 64)), ((4, 8, 8, 16), (3, 3, 16, 16))):
        x, f = rng.random(xs, dtype=np.float32), rng.random(fs, dtype=np.float32)
        k = get_kernel("Conv2D", "CPU")
        fn = k.factory(conv_attrs)
        mn, md = _times(fn, 10, x, f)
        c = k.cost(x, f)
        print(f"  Conv2D {xs} * {fs}: {mn * 1e6:8.1f} {md * 1e6:8.1f} | {mn * 1e9 / c:.4f} {md * 1e9 / c:.4f}")

    print("element-wise kernels on 256x1024 float32: us, ns per unit of their cost (min, median)")
    x, y = rng.standard_normal((2, 256, 1024), dtype=np.float32)
    bias = rng.standard_normal(1024, dtype=np.float32)
    for op, args, attrs in (("AddV2", (x, y), {}), ("Mul", (x, y), {}), ("Relu", (x,), {}), ("ReluGrad", (x, y), {}),
                            ("BiasAdd", (x, bias), {}), ("BiasAddGrad", (x,), {}), ("Exp", (x,), {}),
                            ("Sum", (x, np.int32(1)), {"keep_dims": False}), ("Cast", (x,), {"DstT": np.dtype(np.float64)})):
        k = get_kernel(op, "CPU")
        fn = k.factory(attrs)
        c = k.cost(*args) if k.cost is not None else sum(a.size for a in args)
        mn, md = _times(fn, 50, *args)
        print(f"  {op:12s}: {mn * 1e6:8.1f} {md * 1e6:8.1f} | {mn * 1e9 / c:.3f} {md * 1e9 / c:.3f}")

    pool = KernelPool(1, name="offload-cost")
    done = threading.Event()

    def round_trip():
        done.clear()
        pool.submit(done.set)
        done.wait()
    mn, md = _times(round_trip, 300)
    wake = []
    for _ in range(300):
        started = [0.0]

        def mark(started=started):
            started[0] = time.perf_counter()
            done.set()
        done.clear()
        time.sleep(0.0005)                                  # the pool thread goes idle
        t0 = time.perf_counter()
        pool.submit(mark)
        done.wait()
        wake.append(started[0] - t0)
    pool.shutdown()
    wake.sort()
    print(f"pool hand-off: round trip {mn * 1e6:.1f} us min, {md * 1e6:.1f} us median; idle thread's wake-up "
          f"{wake[30] * 1e6:.1f} / {wake[150] * 1e6:.1f} / {wake[270] * 1e6:.1f} us (10th / 50th / 90th percentile)")


if __name__ == "__main__":
    main()
