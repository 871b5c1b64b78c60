"""tf.contrib.factorization.KMeans and the clustering ops, against numpy k-means steps."""
import numpy as np
import pytest

import actorflow as af
from actorflow.contrib.factorization import KMeans
from actorflow.errors import InvalidArgumentError
from actorflow.graph.ops.clustering_ops import KmeansPlusPlusInitialization, NearestNeighbors


def _blobs(seed=0, n=40):
    rng = np.random.default_rng(seed)
    means = np.array([[5, 0, 0], [0, 5, 0], [0, 0, 5], [4, 4, 4]], np.float32)
    return np.concatenate([rng.normal(m, 0.3, (n, 3)) for m in means]).astype(np.float32), means


def test_nearest_neighbors_matches_brute_force():
    rng = np.random.default_rng(1)
    p, c = rng.normal(size=(20, 5)).astype(np.float32), rng.normal(size=(7, 5)).astype(np.float32)
    c[3] = c[1]                                            # a tie: the lower index comes first
    idx, dist = af.Session().run(NearestNeighbors(p, c, af.constant(3, af.int64)))
    d = ((p[:, None, :] - c[None]) ** 2).sum(-1)
    want = np.argsort(d, axis=1, kind="stable")[:, :3]
    np.testing.assert_array_equal(idx, want)
    np.testing.assert_allclose(dist, np.take_along_axis(d, want, 1), rtol=1e-4, atol=1e-5)
    assert idx.dtype == np.int64
    with pytest.raises(ValueError, match="points have 5 features but centers 4"):
        NearestNeighbors(p, c[:, :4], af.constant(1, af.int64))


def test_kmeans_plus_plus_spreads_over_separate_clusters_and_repeats_with_its_seed():
    data, means = _blobs()
    pick = KmeansPlusPlusInitialization(data, af.constant(4, af.int64), af.constant(7, af.int64),
                                        af.constant(-1, af.int64))
    s = af.Session()
    a, b = s.run(pick), s.run(pick)
    np.testing.assert_array_equal(a, b)
    nearest_mean = np.argmin(((a[:, None] - means[None]) ** 2).sum(-1), 1)
    assert sorted(nearest_mean) == [0, 1, 2, 3]            # one seed per blob
    assert all(any(np.array_equal(r, d) for d in data) for r in a)
    with pytest.raises(InvalidArgumentError, match="num_to_sample"):
        s.run(KmeansPlusPlusInitialization(data[:3], af.constant(4, af.int64), af.constant(0, af.int64),
                                           af.constant(1, af.int64)))


def _numpy_step(data, centers, counts, mini_batch, cosine):
    x = data / np.linalg.norm(data, axis=1, keepdims=True) if cosine else data
    c = centers / np.linalg.norm(centers, axis=1, keepdims=True) if cosine else centers
    d = ((x[:, None] - c[None]) ** 2).sum(-1)
    idx = np.argmin(d, 1)
    score = d[np.arange(len(x)), idx] * (0.5 if cosine else 1.0)
    new, new_counts = centers.astype(np.float64).copy(), counts.copy()
    if mini_batch:
        for j in np.unique(idx):
            pts = x[idx == j]
            k = len(pts)
            new[j] += (pts.sum(0) - k * centers[j]) / (counts[j] + k)
            new_counts[j] += k
    else:
        for j in range(len(centers)):
            pts = x[idx == j]
            new[j] = pts.sum(0) / (len(pts) + 1e-6)
        if cosine:
            new /= np.linalg.norm(new, axis=1, keepdims=True)
    return idx, score, new, new_counts


@pytest.mark.parametrize("mini_batch", [True, False])
@pytest.mark.parametrize("metric", ["squared_euclidean", "cosine"])
def test_training_steps_match_numpy(mini_batch, metric):
    data, _ = _blobs(2)
    init = data[[0, 1, 41, 81]]                            # a poor start: two seeds in one blob
    af.reset_default_graph()
    X = af.placeholder(af.float32, [None, 3])
    km = KMeans(X, 4, initial_clusters=init, distance_metric=metric, use_mini_batch=mini_batch)
    all_scores, idx, scores, initialized, init_op, train = km.training_graph()
    cosine = metric == "cosine"
    centers = init / np.linalg.norm(init, axis=1, keepdims=True) if cosine else init.astype(np.float64)
    counts = np.ones(4, np.int64)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        assert not s.run(initialized)
        s.run(init_op, {X: data})
        s.run(init_op, {X: data[::-1]})                    # a second run keeps the centers
        assert s.run(initialized)
        for _ in range(3):
            got_idx, got_scores, got_all = s.run([idx[0], scores[0], all_scores[0]], {X: data})
            want_idx, want_scores, centers, counts = _numpy_step(data, centers, counts, mini_batch, cosine)
            np.testing.assert_array_equal(got_idx, want_idx)
            np.testing.assert_allclose(got_scores, want_scores, rtol=1e-3, atol=1e-4)
            np.testing.assert_allclose(got_all[np.arange(len(data)), got_idx], got_scores, rtol=1e-3, atol=1e-4)
            s.run(train, {X: data})
            var, = [v for v in af.global_variables() if v.op.name == "clusters"]
            np.testing.assert_allclose(s.run(var), centers, rtol=1e-4, atol=1e-5)


def test_random_init_takes_input_rows_and_training_separates_the_blobs():
    data, means = _blobs(3)
    X = af.placeholder(af.float32, [None, 3])
    _, idx, scores, _, init_op, train = KMeans(X, 4, initial_clusters="kmeans_plus_plus",
                                               use_mini_batch=True, random_seed=3).training_graph()
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        s.run(init_op, {X: data})
        first = s.run(af.reduce_mean(scores[0]), {X: data})
        for _ in range(5):
            s.run(train, {X: data})
        ix, last = s.run([idx[0], af.reduce_mean(scores[0])], {X: data})
    assert last <= first
    for blob in range(4):                                  # every blob is one cluster
        assert len(set(ix[blob * 40:(blob + 1) * 40])) == 1
    g = af.Graph()
    with g.as_default():
        X = af.placeholder(af.float32, [None, 3])
        _, _, _, _, init_op, _ = KMeans(X, 4, random_seed=5).training_graph()
        var = [v for v in af.global_variables() if v.op.name.startswith("clusters")][0]
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            s.run(init_op, {X: data})
            for row in s.run(var):
                assert any(np.array_equal(row, d) for d in data)


def test_bad_arguments_are_named():
    X = af.placeholder(af.float32, [None, None])
    with pytest.raises(ValueError, match="known d"):
        KMeans(X, 3)
    with pytest.raises(ValueError, match="distance_metric"):
        KMeans(af.placeholder(af.float32, [None, 2]), 3, distance_metric="manhattan")
    with pytest.raises(NotImplementedError, match="kmc2"):
        KMeans(af.placeholder(af.float32, [None, 2]), 3, initial_clusters="kmc2")
