"""tf.contrib.losses: the old argument order over af.losses, the unreduced hinge loss, and the
metric-learning losses against loops written from their definitions."""
import numpy as np
import pytest

import actorflow as af

L = af.contrib.losses


@pytest.fixture(autouse=True)
def _fresh_graph():
    with af.Graph().as_default():
        yield


def test_old_argument_order_matches_tf_losses():
    rng = np.random.default_rng(0)
    p, y = rng.uniform(0.1, 0.9, (4, 3)), rng.integers(0, 2, (4, 3)).astype(np.float64)
    w = rng.uniform(0, 1, (4, 1))
    logits = rng.normal(size=(4, 3))
    onehot = np.eye(3)[[0, 2, 1, 1]]
    pairs = [
        (L.mean_squared_error(p, y, w), af.losses.mean_squared_error(y, p, w)),
        (L.absolute_difference(p, y), af.losses.absolute_difference(y, p)),
        (L.log_loss(p, y, w), af.losses.log_loss(y, p, w)),
        (L.softmax_cross_entropy(logits, onehot, label_smoothing=0.1),
         af.losses.softmax_cross_entropy(onehot, logits, label_smoothing=0.1)),
        (L.sparse_softmax_cross_entropy(logits, [0, 2, 1, 1]), af.losses.sparse_softmax_cross_entropy([0, 2, 1, 1],
                                                                                                      logits)),
        (L.sigmoid_cross_entropy(logits, y), af.losses.sigmoid_cross_entropy(y, logits)),
    ]
    with af.Session() as s:
        for got, want in pairs:
            np.testing.assert_allclose(*s.run([got, want]), rtol=1e-12)
        np.testing.assert_allclose(s.run(L.hinge_loss(logits, y)), np.maximum(0, 1 - (2 * y - 1) * logits))
    assert len(L.get_losses()) == 12           # each weighted loss collected (both APIs); hinge_loss is not


def _sq_dist(x):
    return ((x[:, None] - x[None]) ** 2).sum(-1)


def test_triplet_semihard_loss_matches_its_definition():
    rng = np.random.default_rng(1)
    emb = rng.normal(size=(10, 4))
    labels = np.array([0, 0, 1, 1, 1, 2, 2, 0, 3, 3])
    margin = 1.0
    d = _sq_dist(emb)
    total, count = 0.0, 0
    for a in range(10):
        for p in range(10):
            if a == p or labels[a] != labels[p]:
                continue
            negs = [d[a, n] for n in range(10) if labels[n] != labels[a]]
            farther = [x for x in negs if x > d[a, p]]
            dn = min(farther) if farther else max(negs)
            total += max(margin + d[a, p] - dn, 0.0)
            count += 1
    x = af.constant(emb)
    loss = L.metric_learning.triplet_semihard_loss(labels, x, margin)
    g, = af.gradients(loss, [x])
    got, grad = af.Session().run([loss, g])
    np.testing.assert_allclose(got, total / count, rtol=1e-10)
    assert np.all(np.isfinite(grad))


def test_contrastive_loss_and_pairwise_distance():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(6, 3)), rng.normal(size=(6, 3))
    y = np.array([1, 0, 1, 0, 0, 1])
    d = np.sqrt(((a - b) ** 2).sum(1))
    want = np.mean(y * d ** 2 + (1 - y) * np.maximum(1.5 - d, 0) ** 2)
    got = af.Session().run(L.metric_learning.contrastive_loss(y, a, b, margin=1.5))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    pd = af.Session().run(L.metric_learning.pairwise_distance(a))
    np.testing.assert_allclose(pd, np.sqrt(_sq_dist(a)), rtol=1e-10, atol=1e-12)
    assert np.all(np.diag(pd) == 0)
