"""An embedding bag's step through the sparse segment ops against the same math built from dense
ops, in one run (alternating, so load hits both alike): forward and gradient of

    sparse:    tf.sparse_segment_sqrt_n(table, ids, rows)       (SparseSegmentSqrtN + ...Grad)
    composite: segment_sum(gather(table, ids), rows) / sqrt(counts)   (GatherV2, SegmentSum, ...)

on a float32 table [vocab, dim] with `nnz` ids spread over `batch` rows. Reports the median of each
and their ratio (composite / sparse; above 1 means the sparse op is faster).

    python benchmarks/sparse_embedding.py [--vocab 100000] [--dim 64] [--batch 512] [--nnz 20000] [--reps 30]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import actorflow as af


def build(vocab, dim, batch, nnz, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, nnz).astype(np.int32)
    rows = np.sort(rng.integers(0, batch, nnz)).astype(np.int32)
    g = af.Graph()
    with g.as_default():
        table = af.constant(rng.standard_normal((vocab, dim)).astype(np.float32))
        sparse = af.sparse_segment_sqrt_n(table, ids, rows, num_segments=batch)
        counts = af.unsorted_segment_sum(af.ones([nnz]), rows, batch)
        composite = af.unsorted_segment_sum(af.gather(table, ids), rows, batch) / af.expand_dims(
            af.sqrt(af.maximum(counts, 1.0)), 1)
        fetch = {name: [y, af.gradients(af.reduce_sum(af.square(y)), [table])[0]]
                 for name, y in (("sparse", sparse), ("composite", composite))}
    return g, fetch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--vocab", type=int, default=100000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--nnz", type=int, default=20000)
    p.add_argument("--reps", type=int, default=30)
    a = p.parse_args()
    g, fetch = build(a.vocab, a.dim, a.batch, a.nnz)
    times = {k: [] for k in fetch}
    with af.Session(graph=g) as s:
        out = {k: s.run(v) for k, v in fetch.items()}        # warm-up, and the two agree
        np.testing.assert_allclose(out["sparse"][0], out["composite"][0], rtol=1e-4, atol=1e-4)
        for _ in range(a.reps):
            for k, v in fetch.items():
                t = time.perf_counter()
                s.run(v)
                times[k].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in med.items():
        print(f"{k:10s} median {v * 1e3:8.2f} ms")
    print(f"composite / sparse = {med['composite'] / med['sparse']:.2f}")


if __name__ == "__main__":
    main()
