"""af.contrib.factorization: tf.contrib.factorization's KMeans (TF 1.15's clustering_ops.KMeans),
the graph-building k-means that TF-1.x programs drive with their own session loop.

`KMeans(inputs, num_clusters, ...)` builds nothing until `training_graph()`, which returns
``(all_scores, cluster_idx, scores, cluster_centers_initialized, init_op, training_op)``: per input
tensor the distances to every center, the nearest center's index and its distance (lists, one entry
per input, as in TF), a bool variable, the op that picks the initial centers from the fed points the
first time it runs (later runs do nothing), and one training step:
- mini-batch (`use_mini_batch=True`): each center moves to the running mean of the points ever
  assigned to it, ``c += (sum of its new points - k * c) / (count + k)`` with counts starting at 1;
- full batch: each center becomes the mean of the points assigned to it now (an empty cluster's
  center goes to zero, as in TF).
`distance_metric` 'squared_euclidean' (default) or 'cosine' (inputs and centers L2-normalised;
the distance is 1 - cosine similarity). `initial_clusters`: 'random' (points drawn uniformly with
`random_seed`), 'kmeans_plus_plus', a [num_clusters, d] tensor or array, or a function
``f(inputs, num_clusters)``. The variables are ``clusters``, ``initialized`` and (mini-batch) the
counts, in GLOBAL_VARIABLES, so global_variables_initializer sets them up.
"""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.control_flow import cond
from actorflow.graph.graph import Tensor, control_dependencies, convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, math_ops, nn_ops
from actorflow.graph.ops.clustering_ops import KmeansPlusPlusInitialization, NearestNeighbors
from actorflow.graph.ops.constant import group
from actorflow.graph.ops.random_ops import random_uniform
from actorflow.graph.ops.sort_ops import unique
from actorflow.graph.variables import Variable, assign, scatter_add

__all__ = ["KMeans", "SQUARED_EUCLIDEAN_DISTANCE", "COSINE_DISTANCE", "RANDOM_INIT", "KMEANS_PLUS_PLUS_INIT",
           "KMC2_INIT"]

SQUARED_EUCLIDEAN_DISTANCE = "squared_euclidean"
COSINE_DISTANCE = "cosine"
RANDOM_INIT = "random"
KMEANS_PLUS_PLUS_INIT = "kmeans_plus_plus"
KMC2_INIT = "kmc2"


class KMeans:
    """Graph-building k-means (tf.contrib.factorization.KMeans); see the module's docstring."""

    def __init__(self, inputs, num_clusters, initial_clusters=RANDOM_INIT,
                 distance_metric=SQUARED_EUCLIDEAN_DISTANCE, use_mini_batch=False, mini_batch_steps_per_iteration=1,
                 random_seed=0, kmeans_plus_plus_num_retries=2, kmc2_chain_length=200):
        if distance_metric not in (SQUARED_EUCLIDEAN_DISTANCE, COSINE_DISTANCE):
            raise ValueError(f"KMeans: distance_metric must be '{SQUARED_EUCLIDEAN_DISTANCE}' or '{COSINE_DISTANCE}', "
                             f"got {distance_metric!r}")
        if isinstance(initial_clusters, str) and initial_clusters == KMC2_INIT:
            raise NotImplementedError("KMeans: initial_clusters='kmc2' is not supported by actorflow; use "
                                      "'kmeans_plus_plus' (the exact seeding KMC2 approximates) or 'random'")
        if int(mini_batch_steps_per_iteration) != 1:
            raise NotImplementedError("KMeans: mini_batch_steps_per_iteration other than 1 is not supported by "
                                      "actorflow (every mini-batch step updates the centers)")
        self._inputs = [convert_to_tensor(x, name="inputs") for x in (inputs if isinstance(inputs, (list, tuple))
                                                                        else [inputs])]
        for x in self._inputs:
            if x.shape.ndims != 2 or x.shape[1] is None:
                raise ValueError(f"KMeans: inputs must be matrices [batch, d] with a known d, got '{x.name}' "
                                 f"of shape {x.shape}")
            if not x.dtype.is_floating:
                raise ValueError(f"KMeans: inputs must be floating point, got '{x.name}' of {x.dtype.name}")
        self._num_clusters = int(num_clusters)
        if self._num_clusters < 1:
            raise ValueError(f"KMeans: num_clusters must be positive, got {num_clusters}")
        self._initial_clusters = initial_clusters
        self._distance_metric = distance_metric
        self._use_mini_batch = bool(use_mini_batch)
        self._random_seed = random_seed
        self._num_retries = kmeans_plus_plus_num_retries

    def _normalize(self, x):
        return nn_ops.l2_normalize(x, axis=1) if self._distance_metric == COSINE_DISTANCE else x

    def _distances(self, x, centers):
        """[batch, num_clusters] distances of the metric."""
        if self._distance_metric == COSINE_DISTANCE:
            return 1.0 - math_ops.matmul(x, centers, transpose_b=True)
        return (math_ops.reduce_sum(math_ops.square(x), 1, keepdims=True)
                - 2.0 * math_ops.matmul(x, centers, transpose_b=True)
                + array_ops.reshape(math_ops.reduce_sum(math_ops.square(centers), 1), [1, -1]))

    def _initial_centers(self, points):
        k, init = self._num_clusters, self._initial_clusters
        if isinstance(init, str) and init == RANDOM_INIT:
            n = math_ops.cast(array_ops.shape(points)[0], dtypes.int64)
            idx = random_uniform([k], minval=0, maxval=n, dtype=dtypes.int64, seed=self._random_seed)
            return array_ops.gather(points, idx)
        if isinstance(init, str) and init == KMEANS_PLUS_PLUS_INIT:
            return KmeansPlusPlusInitialization(points, convert_to_tensor(k, dtype=dtypes.int64),
                                                convert_to_tensor(int(self._random_seed), dtype=dtypes.int64),
                                                convert_to_tensor(int(self._num_retries), dtype=dtypes.int64))
        if callable(init):
            return convert_to_tensor(init(points, k))
        if isinstance(init, str):
            raise ValueError(f"KMeans: unknown initial_clusters {init!r}")
        return convert_to_tensor(init if isinstance(init, Tensor) else np.asarray(init), dtype=points.dtype)

    def training_graph(self):
        """(all_scores, cluster_idx, scores, cluster_centers_initialized, init_op, training_op)."""
        x0 = self._inputs[0]
        dtype, d, k = x0.dtype, int(x0.shape[1]), self._num_clusters
        inputs = [self._normalize(x) for x in self._inputs]
        centers_var = Variable(array_ops.zeros([k, d], dtype=dtype), name="clusters")
        initialized = Variable(False, dtype=dtypes.bool_, name="initialized")
        counts = Variable(array_ops.ones([k], dtype=dtypes.int64), name="counts") if self._use_mini_batch else None

        def initialize():
            points = inputs[0] if len(inputs) == 1 else array_ops.concat(inputs, 0)
            centers = self._normalize(self._initial_centers(points))
            with control_dependencies([assign(centers_var, centers)]):
                return assign(initialized, True)
        with name_scope("kmeans_init"):
            init_op = cond(initialized, lambda: convert_to_tensor(True), initialize).op

        centers = self._normalize(centers_var.value())
        all_scores, cluster_idx, scores = [], [], []
        for x in inputs:
            all_scores.append(self._distances(x, centers))
            near, dist = NearestNeighbors(x, centers, convert_to_tensor(1, dtype=dtypes.int64))
            if self._distance_metric == COSINE_DISTANCE:
                dist = dist * 0.5                   # |x - c|^2 / 2 = 1 - cos for unit vectors
            cluster_idx.append(array_ops.squeeze(near, [1]))
            scores.append(array_ops.squeeze(dist, [1]))
        if self._use_mini_batch:
            training_op = self._mini_batch_step(inputs, cluster_idx, centers_var, counts)
        else:
            training_op = self._full_batch_step(inputs, cluster_idx, centers_var)
        return all_scores, cluster_idx, scores, initialized, init_op, training_op

    def _mini_batch_step(self, inputs, cluster_idx, centers_var, counts):
        updates = []
        for x, idx in zip(inputs, cluster_idx):
            ids, pos = unique(idx)
            m = array_ops.size(ids)
            added = array_ops.unsorted_segment_sum(array_ops.ones_like(pos, dtype=dtypes.int64), pos, m)
            old = array_ops.gather(centers_var.value(), ids)
            old_counts = array_ops.gather(counts.value(), ids)
            sums = array_ops.unsorted_segment_sum(x, pos, m)
            rate = array_ops.expand_dims(1.0 / math_ops.cast(old_counts + added, x.dtype), 1)
            delta = (sums - array_ops.expand_dims(math_ops.cast(added, x.dtype), 1) * old) * rate
            updates += [scatter_add(counts, ids, added), scatter_add(centers_var, ids, delta)]
        return group(*updates)

    def _full_batch_step(self, inputs, cluster_idx, centers_var):
        k = self._num_clusters
        sums = math_ops.add_n([array_ops.unsorted_segment_sum(x, idx, k) for x, idx in zip(inputs, cluster_idx)])
        n = math_ops.add_n([array_ops.unsorted_segment_sum(array_ops.ones_like(idx, dtype=sums.dtype), idx, k)
                            for idx in cluster_idx])
        new = self._normalize(sums / (array_ops.expand_dims(n, 1) + 1e-6))
        return assign(centers_var, new).op
