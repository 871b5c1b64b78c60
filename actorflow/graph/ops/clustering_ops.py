"""Clustering ops (TF's clustering_ops): NearestNeighbors and KmeansPlusPlusInitialization, which
tf.contrib.factorization's KMeans is built on.

- NearestNeighbors(points [n, d], centers [m, d], k): for each point the indices (int64) of its k
  nearest centers and their squared Euclidean distances, nearest first (ties: the lower index).
- KmeansPlusPlusInitialization(points [n, d], num_to_sample, seed, num_retries_per_sample): k-means++
  seeding: the first center uniformly at random, each next one drawn with probability proportional
  to a point's squared distance to its nearest chosen center; with retries, that many extra
  candidates are drawn and the one that lowers the total squared distance most is kept
  (`num_retries_per_sample` -1 means 2 + floor(log(num_to_sample))). The same seed draws the same
  centers.
Neither has a gradient, as in TF.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["NearestNeighbors", "KmeansPlusPlusInitialization"]


def _points(t, what):
    if not t.dtype.is_floating:
        raise InferenceError(f"{what} must be a floating-point matrix, got {t.dtype.name}")
    if t.shape.ndims not in (None, 2):
        raise InferenceError(f"{what} must be a matrix [n, d], got shape {t.shape}")


def _scalar_int(t, what):
    if not t.dtype.is_integer:
        raise InferenceError(f"{what} must be an integer scalar, got {t.dtype.name}")
    if t.shape.ndims not in (None, 0):
        raise InferenceError(f"{what} must be a scalar, got shape {t.shape}")


def _infer_nearest(inputs, attrs):
    points, centers, k = inputs
    _points(points, "points")
    _points(centers, "centers")
    if points.dtype is not centers.dtype:
        raise InferenceError(f"points ({points.dtype.name}) and centers ({centers.dtype.name}) must have one dtype")
    _scalar_int(k, "k")
    if points.shape.ndims == 2 and centers.shape.ndims == 2:
        a, b = points.shape.dims[1], centers.shape.dims[1]
        if a is not None and b is not None and a != b:
            raise InferenceError(f"points have {a} features but centers {b}")
    n = points.shape.dims[0] if points.shape.ndims == 2 else None
    return [(dtypes.int64, TensorShape([n, None])), (points.dtype, TensorShape([n, None]))]


def _infer_kmeans_pp(inputs, attrs):
    points, num, seed, retries = inputs
    _points(points, "points")
    for t, what in ((num, "num_to_sample"), (seed, "seed"), (retries, "num_retries_per_sample")):
        _scalar_int(t, what)
    d = points.shape.dims[1] if points.shape.ndims == 2 else None
    return [(points.dtype, TensorShape([None, d]))]


NearestNeighbors = define_op("NearestNeighbors", _infer_nearest)
NearestNeighbors.gradient(lambda op, *grads: [None] * 3)
KmeansPlusPlusInitialization = define_op("KmeansPlusPlusInitialization", _infer_kmeans_pp)
KmeansPlusPlusInitialization.gradient(lambda op, grad: [None] * 4)
