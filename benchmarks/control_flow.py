"""Dynamic control flow (issue 4). Prints, in one run:

(a) cost per iteration of a trivial counting loop (af.while_loop(i < n, i + 1), n = 100,000),
    beside a plain Python loop doing the same number of numpy adds (target: at most 30 us/iteration);
(b) speedup of parallel_iterations=10 over parallel_iterations=1 on a loop whose iterations are
    independent 512x512 float32 matmuls (target: at least 1.7x; bounded by the cores the kernel
    thread pool can use);
(c) for information: cost per iteration of the forward and gradient loops of a scalar loop
    (v = v * x), where the forward loop saves one value per iteration for the gradient loop.

Each figure is the best of several runs; the machine may be shared, so run it more than once.

Run: python benchmarks/control_flow.py [--repeat 5] [--iterations 100000] [--matmuls 40]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

import actorflow as af


def timeit(fn, repeat):
    """The best of `repeat` runs: on a shared machine the minimum is the least disturbed figure."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def counting_loop(n: int, repeat: int):
    g = af.Graph()
    with g.as_default():
        limit = af.placeholder(af.int32, [], name="n")
        i = af.while_loop(lambda i: i < limit, lambda i: i + 1, [af.constant(0)])
        with af.Session(graph=g) as sess:
            assert sess.run(i, {limit: n}) == n
            t_loop = timeit(lambda: sess.run(i, {limit: n}), repeat)
            t_empty = timeit(lambda: sess.run(i, {limit: 0}), repeat)
    one = np.int32(1)

    def numpy_loop():
        x = np.int32(0)
        for _ in range(n):
            x = np.add(x, one)
        return x
    t_np = timeit(numpy_loop, repeat)
    return (t_loop - t_empty) / n * 1e6, t_np / n * 1e6


def matmul_loops(n: int, repeat: int, size: int = 512):
    """Best times of the loop with parallel_iterations=1 and =10, run alternately so that a change
    in the machine's load affects both alike."""
    rng = np.random.default_rng(0)
    a_val = rng.standard_normal((size, size), dtype=np.float32)
    b_val = rng.standard_normal((size, size), dtype=np.float32)
    g = af.Graph()
    with g.as_default():
        a = af.constant(a_val)
        b = af.constant(b_val)

        def body(i, acc):
            # Each iteration's matmul depends only on loop invariants: iterations are independent
            # except for the cheap running sum.
            return i + 1, acc + af.reduce_sum(af.matmul(a, b))
        totals = [af.while_loop(lambda i, acc: i < n, body, [af.constant(0), af.constant(0.0)],
                                parallel_iterations=par)[1] for par in (1, 10)]
        with af.Session(graph=g) as sess:
            sess.run(totals[0])
            sess.run(totals[1])
            best = [float("inf"), float("inf")]
            for _ in range(repeat):
                for k, total in enumerate(totals):
                    best[k] = min(best[k], timeit(lambda t=total: sess.run(t), 1))
    return best


def numpy_reference(n: int, repeat: int, size: int = 512):
    """The same matmuls in plain numpy, one after the other and on a pool as wide as the runtime's:
    the parallelism the machine offers right now (it may be shared), to read (b) against."""
    from concurrent.futures import ThreadPoolExecutor

    from actorflow.actors.dispatcher import default_runtime
    rt = default_runtime()                # limits BLAS to one thread, as the runtime runs it
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    t_seq = timeit(lambda: [a @ a for _ in range(n)], repeat)
    with ThreadPoolExecutor(rt.threads) as pool:
        t_par = timeit(lambda: list(pool.map(lambda _: a @ a, range(n))), repeat)
    return t_seq, t_par, rt.threads


def gradient_loop(n: int, repeat: int):
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float64, [], name="x")
        limit = af.placeholder(af.int32, [], name="n")
        v = af.while_loop(lambda i, v: i < limit, lambda i, v: (i + 1, v * x),
                          [af.constant(0), af.constant(1.0, af.float64)])[1]
        gx, = af.gradients(v, [x])
        with af.Session(graph=g) as sess:
            feed = {x: 1.0, limit: n}
            assert sess.run(gx, feed) == n
            t_fwd = timeit(lambda: sess.run(v, feed), repeat) - timeit(lambda: sess.run(v, {x: 1.0, limit: 0}), repeat)
            t_all = timeit(lambda: sess.run(gx, feed), repeat) - timeit(lambda: sess.run(gx, {x: 1.0, limit: 0}), repeat)
    return t_fwd / n * 1e6, t_all / n * 1e6


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--iterations", type=int, default=100_000)
    p.add_argument("--matmuls", type=int, default=40)
    args = p.parse_args(argv)

    per_it, per_np = counting_loop(args.iterations, args.repeat)
    print(f"(a) counting loop of {args.iterations} iterations: {per_it:.1f} us/iteration; plain Python loop of "
          f"numpy adds {per_np:.2f} us/add (ratio {per_it / per_np:.1f}x; target <= 30 us/iteration)")
    t1, t10 = matmul_loops(args.matmuls, args.repeat)
    n_seq, n_par, workers = numpy_reference(args.matmuls, args.repeat)
    print(f"(b) {args.matmuls} independent 512x512 matmuls: parallel_iterations=1 {t1 * 1e3:.0f} ms, "
          f"=10 {t10 * 1e3:.0f} ms, speedup {t1 / t10:.2f}x (target >= 1.7x); plain numpy on this machine now: "
          f"sequential {n_seq * 1e3:.0f} ms, {workers} threads {n_par * 1e3:.0f} ms ({n_seq / n_par:.2f}x; "
          f"{os.cpu_count()} CPUs)")
    fwd, both = gradient_loop(args.iterations // 10, args.repeat)
    print(f"(c) scalar loop v = v * x: forward {fwd:.1f} us/iteration; forward + gradient loop {both:.1f} "
          "us/iteration")


if __name__ == "__main__":
    main()
