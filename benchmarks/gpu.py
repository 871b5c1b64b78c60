"""GPU figures (issue 9), actorflow beside PyTorch on the same GPU, in the same run:

- the MLP training step of the training issue (784-1024-1024-10, ReLU, softmax cross-entropy, SGD,
  loss fetched every step) with batch 256 and batch 4096;
- the LeNet-like convnet step (batch 64);
- an 8192x8192 float32 matmul: TFLOP/s of actorflow's MatMul op through Session.run, against
  `cupy.matmul` called directly (the target is >= 90% of it) and torch.matmul.

Inputs live on the GPU for both frameworks (actorflow is fed CuPy arrays; a second actorflow row
feeds numpy arrays, so the batch crosses to the GPU every step through the copy node). Both use
float32 without TF32. Steps are timed one by one in rounds that interleave the contenders; the
figure is the median. Targets: MLP and convnet at most 1.3x PyTorch's step time.

Run: python benchmarks/gpu.py [--rounds N] [--quick]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_step import CONV_BATCH, actorflow_step, make_problem, torch_step  # noqa: E402


def af_gpu_step(model, prob, feed_gpu=True):
    import cupy as cp
    step, close = actorflow_step(model, prob)
    if not feed_gpu:
        return step, close
    # Rebind the feeds to CuPy arrays: same session, same graph, inputs already on the GPU.
    cell = step.__closure__
    feed = next(c.cell_contents for c in cell if isinstance(c.cell_contents, dict))
    for k in list(feed):
        feed[k] = cp.asarray(feed[k])
    return step, close


def _copy_nodes(step):
    """The host<->device copy nodes of a stepper's executable (each is a potential GPU wait)."""
    cells = {type(c.cell_contents).__name__: c.cell_contents for c in step.__closure__}
    sess, fetches = cells["Session"], cells["list"]
    exe = sess._prepare(fetches, cells["dict"])[0]
    return sorted(c.name for c in exe._copies.values())


def timed_rounds(steppers: dict, rounds: int, per_round: int) -> dict:
    for s in steppers.values():          # warm-up: compile kernels, fill memory pools
        for _ in range(5):
            s()
    times = {k: [] for k in steppers}
    for _ in range(rounds):
        for k, s in steppers.items():
            for _ in range(per_round):
                t = time.perf_counter()
                s()
                times[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in times.items()}


def bench_model(model, batch, rounds, per_round):
    prob = make_problem(model, batch=batch)
    af_step, af_close = af_gpu_step(model, prob)
    af_np_step, af_np_close = af_gpu_step(model, prob, feed_gpu=False)
    t_step = torch_step(model, prob, "cuda")
    l0, l1, l2 = af_step(), af_np_step(), t_step()
    copies = _copy_nodes(af_step)
    res = timed_rounds({"actorflow": af_step, "actorflow (numpy feeds)": af_np_step, "pytorch": t_step},
                       rounds, per_round)
    af_close()
    af_np_close()
    name = f"{model} batch {batch}"
    print(f"\n{name}: first-step losses actorflow {l0:.5f}, numpy-fed {l1:.5f}, pytorch {l2:.5f}")
    print(f"  copy nodes in the actorflow step: {copies or 'none'}")
    base = res["pytorch"]
    for k, v in res.items():
        print(f"  {k:26s} {v * 1e3:8.3f} ms   {v / base:5.2f}x pytorch")
    return res["actorflow"] / base


def bench_matmul(n, reps):
    import cupy as cp
    import torch

    import actorflow as af
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((n, n), dtype=np.float32)
    b_np = rng.standard_normal((n, n), dtype=np.float32)
    a, b = cp.asarray(a_np), cp.asarray(b_np)
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [n, n])
        y = af.placeholder(af.float32, [n, n])
        z = af.matmul(x, y)
    sess = af.Session(graph=g)
    opts = af.RunOptions(output_device="gpu")
    feed = {x: a, y: b}
    ta, tb = torch.from_numpy(a_np).cuda(), torch.from_numpy(b_np).cuda()

    def run_af():
        return sess.run(z, feed, options=opts)

    def run_cp():
        return cp.matmul(a, b)

    def run_torch():
        return torch.matmul(ta, tb)

    flops = 2.0 * n ** 3
    out = {}
    ref = run_cp()
    np.testing.assert_allclose(cp.asnumpy(run_af()[:4, :4]), cp.asnumpy(ref[:4, :4]), rtol=1e-3, atol=1e-2)
    for _ in range(2):                    # interleaved passes; keep the best of each
        for name, fn, sync in (("actorflow MatMul", run_af, cp.cuda.Device().synchronize),
                               ("cupy.matmul", run_cp, cp.cuda.Device().synchronize),
                               ("torch.matmul", run_torch, torch.cuda.synchronize)):
            fn()
            sync()
            t = time.perf_counter()
            for _ in range(reps):
                fn()
            sync()
            dt = (time.perf_counter() - t) / reps
            out[name] = max(out.get(name, 0.0), flops / dt / 1e12)
    sess.close()
    print(f"\nmatmul {n}x{n} float32 (no TF32), TFLOP/s:")
    for k, v in out.items():
        print(f"  {k:18s} {v:7.1f}   {v / out['cupy.matmul'] * 100:5.1f}% of cupy.matmul")
    return out["actorflow MatMul"] / out["cupy.matmul"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    import cupy as cp
    os.environ.setdefault("CUPY_TF32", "0")
    props = cp.cuda.runtime.getDeviceProperties(0)
    print(f"GPU: {props['name'].decode() if isinstance(props['name'], bytes) else props['name']}, "
          f"CuPy {cp.__version__}")
    per = 10 if args.quick else 20
    ratios = {"mlp256": bench_model("mlp", 256, args.rounds, per),
              "mlp4096": bench_model("mlp", 4096, args.rounds, per),
              "convnet": bench_model("convnet", CONV_BATCH, args.rounds, per)}
    mm = bench_matmul(8192, 10 if args.quick else 20)
    print("\nsummary (targets: steps <= 1.30x pytorch, matmul >= 90% of cupy.matmul):")
    for k, v in ratios.items():
        print(f"  {k:8s} {v:5.2f}x pytorch  {'met' if v <= 1.3 else 'MISSED'}")
    print(f"  matmul   {mm * 100:5.1f}% of cupy.matmul  {'met' if mm >= 0.9 else 'MISSED'}")


if __name__ == "__main__":
    main()
