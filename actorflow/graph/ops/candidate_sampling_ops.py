"""Candidate samplers and accidental hits (tf.random.*_candidate_sampler, tf.nn.compute_accidental_hits).

Op types defined here: UniformCandidateSampler, LogUniformCandidateSampler,
FixedUnigramCandidateSampler, AllCandidateSampler, ComputeAccidentalHits. A sampler draws
`num_sampled` class ids from its distribution over ``[0, range_max)`` (without repeats when
`unique`) and returns ``(sampled_candidates, true_expected_count, sampled_expected_count)``: how many
times each true class and each sampled class is expected to appear among the samples, with TF's
formula, ``p * num_sampled`` without `unique`, and ``1 - (1 - p) ** num_tries`` with it (num_tries:
the draws it took to find `num_sampled` distinct ids). Samplers are stateful random ops seeded like
every random op (`af.set_random_seed`, op `seed`); none has a gradient.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops.random_ops import _seed_attrs
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["uniform_candidate_sampler", "log_uniform_candidate_sampler", "fixed_unigram_candidate_sampler",
           "learned_unigram_candidate_sampler", "all_candidate_sampler", "compute_accidental_hits"]


def _check_true_classes(t, num_true):
    if t.dtype is not dtypes.int64:
        raise InferenceError(f"true_classes must be int64, got {t.dtype.name}")
    dims = t.shape.dims
    if dims is not None:
        if len(dims) != 2:
            raise InferenceError(f"true_classes must be a matrix [batch_size, num_true], got shape {t.shape}")
        if dims[1] is not None and dims[1] != num_true:
            raise InferenceError(f"true_classes must have num_true={num_true} columns, got shape {t.shape}")
        return dims[0]
    return None


def _infer_sampler(inputs, attrs):
    num_true, num_sampled = int(attrs["num_true"]), int(attrs["num_sampled"])
    if num_true < 1 or num_sampled < 1:
        raise InferenceError(f"num_true ({num_true}) and num_sampled ({num_sampled}) must be positive")
    rng = attrs.get("range_max")
    if rng is not None:
        if int(rng) < 1:
            raise InferenceError(f"range_max must be positive, got {rng}")
        if attrs.get("unique") and num_sampled > int(rng):
            raise InferenceError(f"Sampler's range is too small: range_max={rng} < num_sampled={num_sampled} "
                                 "with unique=True")
    batch = _check_true_classes(inputs[0], num_true)
    return [(dtypes.int64, TensorShape([num_sampled])), (dtypes.float32, TensorShape([batch, num_true])),
            (dtypes.float32, TensorShape([num_sampled]))]


UniformCandidateSampler = define_op("UniformCandidateSampler", _infer_sampler, stateful=True)
LogUniformCandidateSampler = define_op("LogUniformCandidateSampler", _infer_sampler, stateful=True)
FixedUnigramCandidateSampler = define_op("FixedUnigramCandidateSampler", _infer_sampler, stateful=True)
LearnedUnigramCandidateSampler = define_op("LearnedUnigramCandidateSampler", _infer_sampler, stateful=True)
AllCandidateSampler = define_op("AllCandidateSampler", _infer_sampler, stateful=True)


def _infer_accidental_hits(inputs, attrs):
    true_classes, sampled = inputs
    _check_true_classes(true_classes, int(attrs["num_true"]))
    if sampled.dtype is not dtypes.int64:
        raise InferenceError(f"sampled_candidates must be int64, got {sampled.dtype.name}")
    if sampled.shape.ndims not in (None, 1):
        raise InferenceError(f"sampled_candidates must be a vector, got shape {sampled.shape}")
    n = TensorShape([None])
    return [(dtypes.int32, n), (dtypes.int64, n), (dtypes.float32, n)]


ComputeAccidentalHits = define_op("ComputeAccidentalHits", _infer_accidental_hits)


# Sampling is not differentiable (TF: ops.NotDifferentiable).
@UniformCandidateSampler.gradient
@LogUniformCandidateSampler.gradient
@FixedUnigramCandidateSampler.gradient
@LearnedUnigramCandidateSampler.gradient
@AllCandidateSampler.gradient
def _sampler_grad(op, *grads):
    return [None]


@ComputeAccidentalHits.gradient
def _hits_grad(op, *grads):
    return [None, None]


def _sample(op_def, default_name, true_classes, num_true, num_sampled, unique, seed, name, **attrs):
    with name_scope(name, default_name, [true_classes]) as scope:
        t = convert_to_tensor(true_classes, dtype=dtypes.int64, name="true_classes")
        return op_def(t, name=scope, num_true=int(num_true), num_sampled=int(num_sampled), unique=bool(unique),
                      **attrs, **_seed_attrs(seed))


def uniform_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max, seed=None, name=None):
    """Samples classes uniformly from ``[0, range_max)`` (tf.random.uniform_candidate_sampler).

    Returns ``(sampled_candidates, true_expected_count, sampled_expected_count)``: int64
    ``[num_sampled]``, float32 ``[batch_size, num_true]`` and float32 ``[num_sampled]``.
    """
    return _sample(UniformCandidateSampler, "UniformCandidateSampler", true_classes, num_true, num_sampled,
                   unique, seed, name, range_max=int(range_max))


def log_uniform_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max, seed=None, name=None):
    """Samples classes from the log-uniform (Zipfian) distribution (tf.random.log_uniform_candidate_sampler).

    ``P(k) = (log(k + 2) - log(k + 1)) / log(range_max + 1)``: small ids (frequent words, when the
    vocabulary is sorted by frequency) are drawn most. Returns the same triple as the other samplers.
    """
    return _sample(LogUniformCandidateSampler, "LogUniformCandidateSampler", true_classes, num_true, num_sampled,
                   unique, seed, name, range_max=int(range_max))


def fixed_unigram_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max, vocab_file="",
                                    distortion=1.0, num_reserved_ids=0, num_shards=1, shard=0, unigrams=(),
                                    seed=None, name=None):
    """Samples classes in proportion to given counts (tf.random.fixed_unigram_candidate_sampler).

    The counts come from `unigrams` (one per class) or `vocab_file` (a CSV file whose lines end in the
    count, ``word,count``); each is raised to the power `distortion`. The first `num_reserved_ids`
    ids get probability 0, and with `num_shards` > 1 only this `shard`'s ids (id % num_shards ==
    shard) are kept, renumbered from 0, as in TF. `range_max` must equal the number of ids kept.
    """
    if not vocab_file and not len(unigrams):
        raise ValueError("fixed_unigram_candidate_sampler: must provide either vocab_file or unigrams")
    if vocab_file and len(unigrams):
        raise ValueError("fixed_unigram_candidate_sampler: give vocab_file or unigrams, not both")
    if not 0 <= int(shard) < int(num_shards):
        raise ValueError(f"fixed_unigram_candidate_sampler: shard {shard} is not in [0, num_shards={num_shards})")
    return _sample(FixedUnigramCandidateSampler, "FixedUnigramCandidateSampler", true_classes, num_true,
                   num_sampled, unique, seed, name, range_max=int(range_max), vocab_file=str(vocab_file or ""),
                   distortion=float(distortion), num_reserved_ids=int(num_reserved_ids),
                   num_shards=int(num_shards), shard=int(shard), unigrams=tuple(float(u) for u in unigrams))


def learned_unigram_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max, seed=None,
                                      name=None):
    """Samples classes in proportion to how often they were true classes so far
    (tf.random.learned_unigram_candidate_sampler).

    Every class starts with count 1; after each call the batch's true classes add 1 to theirs. The
    counts belong to this op in this process (TF keeps them in the kernel too) and restart with it.
    """
    return _sample(LearnedUnigramCandidateSampler, "LearnedUnigramCandidateSampler", true_classes, num_true,
                   num_sampled, unique, seed, name, range_max=int(range_max))


def all_candidate_sampler(true_classes, num_true, num_sampled, unique, seed=None, name=None):
    """The classes ``0 .. num_sampled - 1``, every expected count 1 (tf.random.all_candidate_sampler)."""
    return _sample(AllCandidateSampler, "AllCandidateSampler", true_classes, num_true, num_sampled, unique, seed,
                   name)


def compute_accidental_hits(true_classes, sampled_candidates, num_true, seed=None, name=None):
    """Where a sampled candidate equals one of a row's true classes (tf.nn.compute_accidental_hits).

    Returns ``(indices, ids, weights)``: the row (int32), the position in `sampled_candidates` (int64)
    and ``-FLT_MAX`` (float32) for every hit, for adding to the sampled logits so a true class is not
    also counted as a negative. When a candidate was sampled twice, its last position is the one hit.
    """
    with name_scope(name, "ComputeAccidentalHits", [true_classes, sampled_candidates]) as scope:
        t = convert_to_tensor(true_classes, dtype=dtypes.int64, name="true_classes")
        s = convert_to_tensor(sampled_candidates, dtype=dtypes.int64, name="sampled_candidates")
        return ComputeAccidentalHits(t, s, name=scope, num_true=int(num_true), **_seed_attrs(seed))
