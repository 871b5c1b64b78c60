"""CPU kernels of the clustering ops (graph/ops/clustering_ops.py)."""
from __future__ import annotations

import math

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel


def squared_distances(points, centers):
    """[n, m] squared Euclidean distances (by ||x||^2 - 2 x.c + ||c||^2, clipped at 0)."""
    d = (np.einsum("ij,ij->i", points, points)[:, None] - 2.0 * (points @ centers.T)
         + np.einsum("ij,ij->i", centers, centers)[None, :])
    return np.maximum(d, 0, out=d)


@register_kernel("NearestNeighbors", "CPU")
def nearest_neighbors(attrs):
    """tf.raw_ops.NearestNeighbors."""
    def fn(points, centers, k):
        k = int(k)
        if points.ndim != 2 or centers.ndim != 2 or points.shape[1] != centers.shape[1]:
            raise InvalidArgumentError(f"NearestNeighbors: points {list(points.shape)} and centers "
                                       f"{list(centers.shape)} must be matrices with one number of columns")
        if k < 0:
            raise InvalidArgumentError(f"NearestNeighbors: k must be non-negative, got {k}")
        k = min(k, centers.shape[0])
        d = squared_distances(points, centers)
        idx = np.argsort(d, axis=1, kind="stable")[:, :k]
        return idx.astype(np.int64), np.take_along_axis(d, idx, axis=1).astype(points.dtype)
    return fn


@register_kernel("KmeansPlusPlusInitialization", "CPU")
def kmeans_plus_plus(attrs):
    """tf.raw_ops.KmeansPlusPlusInitialization."""
    def fn(points, num_to_sample, seed, num_retries_per_sample):
        n = points.shape[0]
        m = int(num_to_sample)
        if points.ndim != 2:
            raise InvalidArgumentError(f"KmeansPlusPlusInitialization: points must be a matrix, got shape "
                                       f"{list(points.shape)}")
        if m < 0 or m > n:
            raise InvalidArgumentError(f"KmeansPlusPlusInitialization: num_to_sample ({m}) must be in [0, "
                                       f"{n}] (the number of points)")
        retries = int(num_retries_per_sample)
        if retries < 0:
            retries = 2 + int(math.log(max(m, 1)))
        rng = np.random.default_rng(int(seed) & 0xFFFFFFFFFFFFFFFF)
        if m == 0:
            return np.zeros((0, points.shape[1]), points.dtype)
        x = points.astype(np.float64)
        chosen = [int(rng.integers(n))]
        best = squared_distances(x, x[chosen[0]][None, :])[:, 0]
        for _ in range(1, m):
            total = best.sum()
            if total <= 0:                          # every point sits on a center: take any other
                cands = rng.integers(n, size=retries + 1)
            else:
                cands = np.minimum(np.searchsorted(np.cumsum(best), rng.random(retries + 1) * total, side="right"),
                                   n - 1)
            d = squared_distances(x, x[cands])      # [n, candidates]
            after = np.minimum(best[:, None], d).sum(axis=0)
            pick = int(np.argmin(after))
            chosen.append(int(cands[pick]))
            best = np.minimum(best, d[:, pick])
        return points[chosen]
    return fn
