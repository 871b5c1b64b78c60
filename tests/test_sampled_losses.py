"""af.nn.nce_loss, sampled_softmax_loss, the candidate samplers and compute_accidental_hits.

tests/fixtures/sampled.json was made by tests/fixtures/make_sampled.py with TF 2.21: the losses and
their gradients for fixed weights with the samples given explicitly (`sampled_values`), for one and
two true classes, one or three weight shards ("mod" and "div"), with and without removing accidental
hits; compute_accidental_hits on the same ids; and the samplers' expected counts (unique=False).
"""
import json
import os

import numpy as np
import pytest

import actorflow as af

with open(os.path.join(os.path.dirname(__file__), "fixtures", "sampled.json")) as _f:
    FIX = json.load(_f)
W = np.array(FIX["W"], np.float32)
V = W.shape[0]


def _build_loss(key):
    fname, t, s, strat, rm = key.split("_")
    num_true, shards = int(t[1:]), int(s[1:])
    if shards == 1:
        wl = af.get_variable("w", initializer=W)
        ws = [wl]
    else:
        parts = [W[i::shards] for i in range(shards)] if strat == "mod" else np.array_split(W, shards)
        ws = wl = [af.get_variable(f"w{i}", initializer=p) for i, p in enumerate(parts)]
    b = af.get_variable("b", initializer=np.array(FIX["bias"], np.float32))
    x = af.get_variable("x", initializer=np.array(FIX["x"], np.float32))
    sv = (af.constant(FIX["sampled"], af.int64), af.constant(FIX["true_ec"][str(num_true)]),
          af.constant(FIX["sampled_ec"]))
    fn = af.nn.nce_loss if fname == "nce" else af.nn.sampled_softmax_loss
    loss = fn(wl, b, af.constant(FIX["labels"][str(num_true)], af.int64), x, num_sampled=len(FIX["sampled"]),
              num_classes=V, num_true=num_true, sampled_values=sv, remove_accidental_hits=(rm == "rm"),
              partition_strategy=strat)
    return loss, ws + [b, x]


@pytest.mark.parametrize("key", sorted(FIX["losses"]))
def test_loss_and_gradients_match_tf(key):
    ref = FIX["losses"][key]
    g = af.Graph()
    with g.as_default():
        loss, xs = _build_loss(key)
        grads = af.gradients(af.reduce_sum(loss * af.constant([1.0, 2.0, 3.0])), xs)
        # Only the rows of the true and sampled classes get a gradient: sparse, never densified.
        assert all(isinstance(gr, af.IndexedSlices) for gr in grads[:-1])
        dense = [af.convert_to_tensor(gr) for gr in grads]
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            lv, gv = s.run([loss, dense])
    assert lv.shape == (3,)
    np.testing.assert_allclose(lv, ref["loss"], rtol=1e-5, atol=1e-5)
    for got, want in zip(gv, ref["grads"]):
        np.testing.assert_allclose(got, np.array(want, np.float32), rtol=1e-4, atol=1e-5)


def test_compute_accidental_hits_matches_tf():
    with af.Graph().as_default():
        hits = af.nn.compute_accidental_hits(af.constant(FIX["labels"]["2"], af.int64),
                                             af.constant(FIX["sampled"], af.int64), num_true=2)
        with af.Session() as s:
            idx, ids, w = s.run(hits)
    ref = FIX["accidental_hits"]
    np.testing.assert_array_equal(idx, ref[0])
    np.testing.assert_array_equal(ids, ref[1])
    np.testing.assert_array_equal(w, np.array(ref[2], np.float32))
    assert idx.dtype == np.int32 and ids.dtype == np.int64 and w.dtype == np.float32


TRUE = [[0, 1], [3, 9], [11, 2]]


def _prob(name, ids):
    ids = np.asarray(ids, np.float64)
    if name == "log_uniform":
        return np.log((ids + 2) / (ids + 1)) / np.log(V + 1)
    if name == "uniform":
        return np.full(ids.shape, 1.0 / V)
    w = np.concatenate([[0.0, 0.0], np.array(FIX["unigrams"]) ** 0.75])
    return w[ids.astype(int)] / w.sum()


def _sampler(name, num_sampled, unique, seed=1, true=TRUE, **kw):
    fn = getattr(af.nn, name + "_candidate_sampler")
    if name == "fixed_unigram":
        kw.setdefault("unigrams", FIX["unigrams"])
        kw.setdefault("distortion", 0.75)
        kw.setdefault("num_reserved_ids", 2)
    return fn(true_classes=af.constant(true, af.int64), num_true=len(true[0]), num_sampled=num_sampled,
              unique=unique, range_max=V, seed=seed, **kw)


@pytest.mark.parametrize("name", ["log_uniform", "uniform", "fixed_unigram"])
def test_sampler_expected_counts_match_tf(name):
    ref = FIX["samplers"][name]
    with af.Graph().as_default():
        out = _sampler(name, 6, unique=False)
        assert [t.dtype for t in out] == [af.int64, af.float32, af.float32]
        assert out[1].shape.as_list() == [3, 2]
        with af.Session() as s:
            c, te, se = s.run(out)
    np.testing.assert_allclose(te, ref["true_expected"], rtol=1e-6)
    np.testing.assert_allclose(se, 6 * _prob(name, c), rtol=1e-6)
    # TF's own counts for its samples follow the same formula.
    np.testing.assert_allclose(ref["sampled_expected"], 6 * _prob(name, ref["sampled"]), rtol=1e-6)
    assert c.min() >= 0 and c.max() < V
    if name == "fixed_unigram":
        assert not np.isin(c, [0, 1]).any()               # reserved ids are never drawn


@pytest.mark.parametrize("name", ["log_uniform", "uniform", "fixed_unigram"])
def test_unique_sampler_counts_use_the_number_of_tries(name):
    with af.Graph().as_default():
        out = _sampler(name, 7, unique=True, seed=3)
        with af.Session() as s:
            runs = [s.run(out) for _ in range(5)]
    for c, te, se in runs:
        assert len(set(c.tolist())) == 7
        p_s, p_t = _prob(name, c), _prob(name, TRUE)
        # One integer num_tries >= num_sampled explains every count: p * 7 when no draw was rejected,
        # else 1 - (1 - p) ** num_tries.
        if np.allclose(se, 7 * p_s, rtol=1e-5):
            np.testing.assert_allclose(te, 7 * p_t, rtol=1e-5)
            continue
        t = int(round(float(np.log1p(-se[0]) / np.log1p(-p_s[0]))))
        assert t > 7
        np.testing.assert_allclose(se, -np.expm1(t * np.log1p(-p_s)), rtol=1e-4)
        np.testing.assert_allclose(te, -np.expm1(t * np.log1p(-p_t)), rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("name", ["log_uniform", "uniform", "fixed_unigram"])
def test_sampler_empirical_distribution(name):
    n = 20000
    with af.Graph().as_default():
        c, _, _ = _sampler(name, n, unique=False, seed=11)
        with af.Session() as s:
            draws = s.run(c)
    counts = np.bincount(draws, minlength=V)
    expected = n * _prob(name, np.arange(V))
    live = expected > 0
    assert counts[~live].sum() == 0
    chi2 = ((counts[live] - expected[live]) ** 2 / expected[live]).sum()
    assert chi2 < 45.0            # far beyond the 0.999 quantile of chi-square with <= 11 dof (31.3)


def test_samplers_are_seeded_and_reproducible():
    def draw(seed):
        with af.Graph().as_default():
            # tf.random's name for the same function.
            c, _, _ = af.random.log_uniform_candidate_sampler(af.constant(TRUE, af.int64), 2, 8, True, V, seed=seed)
            with af.Session() as s:
                return [s.run(c).tolist() for _ in range(2)]
    a, b, other = draw(5), draw(5), draw(6)
    assert a == b and a[0] != a[1] and a != other


def test_fixed_unigram_vocab_file_and_shards(tmp_path):
    path = tmp_path / "vocab.csv"
    path.write_text("".join(f"w{i},{u}\n" for i, u in enumerate(FIX["unigrams"])))
    with af.Graph().as_default():
        from_file = _sampler("fixed_unigram", 4, unique=False, unigrams=(), vocab_file=str(path))
        # Shard 1 of 2 keeps the odd ids (reserved 1 and unigram ids 3, 5, ..., 11), renumbered 0..5.
        shard = af.nn.fixed_unigram_candidate_sampler(af.constant([[0], [1], [5]], af.int64), 1, 3, False,
                                                      range_max=6, unigrams=FIX["unigrams"], num_reserved_ids=2,
                                                      num_shards=2, shard=1, seed=2)
        bad = _sampler("fixed_unigram", 4, unique=False, unigrams=(), vocab_file=str(tmp_path / "missing.csv"))
        with af.Session() as s:
            c, te, se = s.run(from_file)
            _, te_shard, _ = s.run(shard)
            with pytest.raises(af.errors.NotFoundError, match="missing.csv"):
                s.run(bad)
    np.testing.assert_allclose(te, 4 * _prob("fixed_unigram", TRUE), rtol=1e-6)
    w = np.array([0.0] + FIX["unigrams"][1::2])             # ids 1 (reserved), 3, 5, 7, 9, 11
    np.testing.assert_allclose(te_shard.reshape(-1), 3 * w[[0, 1, 5]] / w.sum(), rtol=1e-6)


def test_sampler_errors():
    with af.Graph().as_default():
        t = af.constant(TRUE, af.int64)
        with pytest.raises(ValueError, match="range is too small"):
            af.nn.uniform_candidate_sampler(t, 2, 20, True, range_max=V)
        with pytest.raises(ValueError, match="vocab_file or unigrams"):
            af.nn.fixed_unigram_candidate_sampler(t, 2, 3, False, range_max=V)
        with pytest.raises(ValueError, match="num_true"):
            af.nn.log_uniform_candidate_sampler(t, 3, 4, False, range_max=V)
        with pytest.raises(ValueError, match="2 columns but num_true=1"):
            af.nn.nce_loss(af.zeros([V, 4]), af.zeros([V]), t, af.zeros([3, 4]), 4, V, num_true=1)
        mismatch = af.nn.fixed_unigram_candidate_sampler(t, 2, 3, False, range_max=5, unigrams=[1.0] * V)
        with af.Session() as s, pytest.raises(af.errors.InvalidArgumentError, match="range_max"):
            s.run(mismatch)


def test_sgd_updates_only_the_sampled_rows():
    with af.Graph().as_default():
        w = af.get_variable("w", initializer=W)
        b = af.get_variable("b", initializer=np.zeros(V, np.float32))
        x = af.constant(np.array(FIX["x"], np.float32))
        labels = af.constant([[2], [5], [7]], af.int64)
        sv = af.nn.uniform_candidate_sampler(labels, 1, 3, True, range_max=V, seed=4)
        loss = af.reduce_mean(af.nn.nce_loss(w, b, labels, x, 3, V, sampled_values=sv))
        step = af.train.GradientDescentOptimizer(0.5).minimize(loss)
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            sampled, _ = s.run([sv[0], step])
            w1 = s.run(w)
    touched = np.flatnonzero(np.any(w1 != W, axis=1))
    assert set(touched.tolist()) <= {2, 5, 7} | set(sampled.tolist())
    assert {2, 5, 7} <= set(touched.tolist())


def test_skip_gram_with_nce_loss_learns():
    # A word2vec-style skip-gram on a generated corpus with structure: words come in pairs (2k, 2k+1)
    # that always appear next to each other, so a context is predictable from its centre word.
    rng = np.random.default_rng(0)
    vocab, dim, batch = 40, 8, 64
    firsts = rng.integers(0, vocab // 2, 4000) * 2
    corpus = np.stack([firsts, firsts + 1], 1).reshape(-1)
    centres = np.concatenate([corpus[:-1], corpus[1:]])
    contexts = np.concatenate([corpus[1:], corpus[:-1]])
    with af.Graph().as_default():
        af.set_random_seed(1)
        inputs = af.placeholder(af.int32, [batch])
        labels = af.placeholder(af.int64, [batch, 1])
        emb = af.Variable(af.random_uniform([vocab, dim], -1.0, 1.0))
        nce_w = af.Variable(af.truncated_normal([vocab, dim], stddev=1.0 / np.sqrt(dim)))
        nce_b = af.Variable(af.zeros([vocab]))
        embed = af.nn.embedding_lookup(emb, inputs)
        loss = af.reduce_mean(af.nn.nce_loss(nce_w, nce_b, labels, embed, num_sampled=8, num_classes=vocab))
        train = af.train.GradientDescentOptimizer(1.0).minimize(loss)
        eval_idx = rng.integers(0, len(centres), batch)
        feed_eval = {inputs: centres[eval_idx], labels: contexts[eval_idx, None]}
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            first = np.mean([s.run(loss, feed_eval) for _ in range(5)])
            for _ in range(150):
                i = rng.integers(0, len(centres), batch)
                s.run(train, {inputs: centres[i], labels: contexts[i, None]})
            last = np.mean([s.run(loss, feed_eval) for _ in range(5)])
    assert last < 0.6 * first


def test_learned_unigram_sampler_learns_from_true_classes():
    # TF 2.21 gives exactly these counts for this program: uniform at first, then each call's true
    # classes add 1 to their weight (all weights start at 1).
    with af.Graph().as_default():
        t = af.constant([[0], [0], [3]], af.int64)
        out = af.nn.learned_unigram_candidate_sampler(t, 1, 4, False, range_max=5, seed=1)
        with af.Session() as s:
            runs = [s.run(out) for _ in range(3)]
    for (c, te, se), w in zip(runs, ([1, 1, 1, 1, 1], [3, 1, 1, 2, 1], [5, 1, 1, 3, 1])):
        p = np.array(w, np.float64) / sum(w)
        np.testing.assert_allclose(te.reshape(-1), 4 * p[[0, 0, 3]], rtol=1e-6)
        np.testing.assert_allclose(se, 4 * p[c], rtol=1e-6)


def test_partitioned_variable_weights():
    # A PartitionedVariable of 3 row blocks is the "div" layout: the same numbers as TF's div shards.
    ref = FIX["losses"]["nce_t1_s3_div_keep"]
    with af.Graph().as_default():
        w = af.get_variable("w", initializer=af.constant_initializer(W), shape=[V, W.shape[1]],
                            partitioner=af.fixed_size_partitioner(3))
        b = af.constant(np.array(FIX["bias"], np.float32))
        x = af.constant(np.array(FIX["x"], np.float32))
        sv = (af.constant(FIX["sampled"], af.int64), af.constant(FIX["true_ec"]["1"]), af.constant(FIX["sampled_ec"]))
        loss = af.nn.nce_loss(w, b, af.constant(FIX["labels"]["1"]), x, 5, V, sampled_values=sv,
                              partition_strategy="div")
        grads = af.gradients(af.reduce_sum(loss), list(w))
        assert all(isinstance(gr, af.IndexedSlices) for gr in grads)
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            lv = s.run(loss)
    np.testing.assert_allclose(lv, ref["loss"], rtol=1e-5, atol=1e-5)
