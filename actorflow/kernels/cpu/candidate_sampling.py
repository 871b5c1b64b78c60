"""CPU kernels for the candidate samplers and ComputeAccidentalHits (TF's range_sampler.cc semantics).

The uniform and log-uniform samplers draw TF's candidates for the op's (seed, seed2): each run reads
TF's SimplePhilox over the 2048 * num_sampled words TF's op reserves (kernels/cpu/philox.py), a
log-uniform id as ``int(exp(RandDouble() * log1p(range_max))) - 1``, a uniform one as
``Rand64() % range_max`` (TF rejects the top ``2**64 mod range_max`` values first, which a draw meets
with probability below 1e-15 for any vocabulary). The unigram samplers own a numpy Philox generator
keyed by the same seeds: reproducible, but TF's alias tables draw other ids. Expected
counts follow TF's ExpectedCountHelper: ``p * num_sampled`` when every draw was kept (always, without
`unique`), else ``-expm1(num_tries * log1p(-p))``, computed in float32 as TF does.
"""
from __future__ import annotations

import math

import numpy as np

from actorflow.errors import InvalidArgumentError, NotFoundError
from actorflow.kernels.cpu import philox
from actorflow.kernels.cpu.random import _generator, _stream
from actorflow.kernels.registry import register_kernel

_FLT_MAX = np.finfo(np.float32).max


class _Distribution:
    """A distribution over ``[0, range_max)``: `prob(ids)` (float32) and either `sample(words)`, one id
    from TF's word stream (`tf_stream`), or `draw(gen, n)`, n ids from a numpy generator."""

    range_max: int
    tf_stream = False

    def sample(self, words):
        raise NotImplementedError

    def draw(self, gen, n):
        raise NotImplementedError

    def prob(self, ids):
        raise NotImplementedError


class _Uniform(_Distribution):
    tf_stream = True

    def __init__(self, range_max):
        self.range_max = range_max

    def sample(self, words):
        return words.rand64() % self.range_max

    def prob(self, ids):
        return np.full(np.shape(ids), np.float32(1.0 / self.range_max), np.float32)


class _LogUniform(_Distribution):
    tf_stream = True

    def __init__(self, range_max):
        self.range_max = range_max
        self.log_range = math.log1p(range_max)

    def sample(self, words):
        # TF: (static_cast<int64>(exp(u * log1p(range_max))) - 1) % range_max.
        return (int(math.exp(words.double() * self.log_range)) - 1) % self.range_max

    def prob(self, ids):
        k = np.asarray(ids, np.float64)
        return (np.log((k + 2.0) / (k + 1.0)) / self.log_range).astype(np.float32)


class _Weighted(_Distribution):
    def __init__(self, weights):
        self.weights = np.asarray(weights, np.float64)
        self.range_max = self.weights.size
        total = self.weights.sum()
        if not total > 0:
            raise InvalidArgumentError("FixedUnigramCandidateSampler: the unigram counts sum to 0")
        self.p = self.weights / total
        self.cdf = np.cumsum(self.p)
        self.cdf[-1] = 1.0

    def draw(self, gen, n):
        return np.minimum(np.searchsorted(self.cdf, gen.random(n), side="right"), self.range_max - 1).astype(np.int64)

    def prob(self, ids):
        ids = np.asarray(ids, np.int64)
        ok = (ids >= 0) & (ids < self.range_max)
        out = np.zeros(ids.shape, np.float32)
        out[ok] = self.p[ids[ok]]
        return out


class _Learned(_Distribution):
    """TF's UnigramSampler: every class starts with weight 1 and gains 1 each time it is a true class."""

    def __init__(self, range_max):
        self.range_max = range_max
        self.weights = np.ones(range_max, np.float64)

    def draw(self, gen, n):
        cdf = np.cumsum(self.weights)
        return np.minimum(np.searchsorted(cdf, gen.random(n) * cdf[-1], side="right"),
                          self.range_max - 1).astype(np.int64)

    def prob(self, ids):
        ids = np.asarray(ids, np.int64)
        ok = (ids >= 0) & (ids < self.range_max)
        out = np.zeros(ids.shape, np.float32)
        out[ok] = self.weights[ids[ok]] / self.weights.sum()
        return out

    def update(self, true_classes):
        ids = np.asarray(true_classes, np.int64).reshape(-1)
        ids = ids[(ids >= 0) & (ids < self.range_max)]
        np.add.at(self.weights, ids, 1.0)


def _read_vocab(path: str, op: str) -> list:
    try:
        with open(path, encoding="utf-8") as f:
            lines = [ln.rstrip("\n") for ln in f]
    except OSError as e:
        raise NotFoundError(f"{op}: cannot read vocab_file '{path}': {e.strerror or e}") from None
    counts = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            counts.append(float(line.split(",")[-1]))
        except ValueError:
            raise InvalidArgumentError(f"{op}: line {n} of vocab_file '{path}' does not end in a count: "
                                       f"{line!r}") from None
    return counts


def _unigram_weights(attrs, op):
    """TF's FixedUnigramSampler: reserved ids weigh 0, counts ** distortion, this shard's ids only."""
    shards, shard = int(attrs.get("num_shards", 1)), int(attrs.get("shard", 0))
    reserved = int(attrs.get("num_reserved_ids", 0))
    path = attrs.get("vocab_file") or ""
    counts = _read_vocab(path, op) if path else [float(u) for u in attrs.get("unigrams", ())]
    if any(c < 0 for c in counts):
        raise InvalidArgumentError(f"{op}: unigram counts must be non-negative")
    distortion = float(attrs.get("distortion", 1.0))
    weights = [0.0 for i in range(reserved) if i % shards == shard]
    weights += [c ** distortion for i, c in enumerate(counts, reserved) if i % shards == shard]
    range_max = int(attrs["range_max"])
    if len(weights) != range_max:
        raise InvalidArgumentError(f"{op}: range_max ({range_max}) must equal the number of ids of this shard "
                                   f"(num_reserved_ids + unigrams: {len(weights)})")
    return weights


def _expected(p, num_sampled, num_tries):
    if num_tries == num_sampled:
        return p * np.float32(num_sampled)
    return -np.expm1(np.float32(num_tries) * np.log1p(-p))


def _sampler_kernel(op: str, make_dist):
    def factory(attrs):
        num_true, num_sampled = int(attrs["num_true"]), int(attrs["num_sampled"])
        unique = bool(attrs.get("unique", False))
        gen = _generator(attrs)
        stream = _stream(attrs)
        reserve = (2048 * num_sampled + 3) // 4      # TF: ReserveSamples32(2048 * num_sampled) each run
        built: list = []

        def distribution():
            # Built on the first call, so that a bad vocab_file is that step's error (NotFoundError).
            if not built:
                dist = make_dist(attrs)
                if unique and num_sampled > dist.range_max:
                    raise InvalidArgumentError(f"{op}: Sampler's range is too small: range_max={dist.range_max} "
                                               f"< num_sampled={num_sampled} with unique=True")
                if unique and isinstance(dist, _Weighted) and np.count_nonzero(dist.p) < num_sampled:
                    raise InvalidArgumentError(f"{op}: only {np.count_nonzero(dist.p)} ids have a non-zero count, "
                                               f"fewer than num_sampled={num_sampled} with unique=True")
                built.append(dist)
            return built[0]

        def fn(true_classes):
            dist = distribution()
            tc = np.asarray(true_classes)
            if tc.ndim != 2 or tc.shape[1] != num_true:
                raise InvalidArgumentError(f"{op}: true_classes must be [batch_size, num_true={num_true}], got "
                                           f"shape {list(tc.shape)}")
            if dist.tf_stream:
                words = philox.PhiloxWords.at(stream.key, stream.reserve_blocks(reserve))
                picked, seen, tries = [], set(), 0
                while len(picked) < num_sampled:
                    v = dist.sample(words)
                    tries += 1
                    if not unique or v not in seen:
                        seen.add(v)
                        picked.append(v)
                sampled = np.asarray(picked, np.int64).reshape(num_sampled)
            elif not unique:
                sampled = dist.draw(gen, num_sampled)
                tries = num_sampled
            else:
                picked: list = []
                seen: set = set()
                tries = 0
                while len(picked) < num_sampled:
                    for v in dist.draw(gen, 2 * (num_sampled - len(picked)) + 8).tolist():
                        tries += 1
                        if v not in seen:
                            seen.add(v)
                            picked.append(v)
                            if len(picked) == num_sampled:
                                break
                sampled = np.asarray(picked, np.int64)
            true_ec = _expected(dist.prob(tc), num_sampled, tries).astype(np.float32)
            sampled_ec = _expected(dist.prob(sampled), num_sampled, tries).astype(np.float32)
            if isinstance(dist, _Learned):
                # As TF: the counts learn from this batch's true classes after it has been sampled.
                dist.update(tc)
            return sampled, true_ec, sampled_ec
        return fn
    register_kernel(op, "CPU", session_state=True)(factory)


def _all_candidates(attrs):
    num_true, num_sampled = int(attrs["num_true"]), int(attrs["num_sampled"])

    def fn(true_classes):
        tc = np.asarray(true_classes)
        if tc.ndim != 2 or tc.shape[1] != num_true:
            raise InvalidArgumentError(f"AllCandidateSampler: true_classes must be [batch_size, num_true={num_true}]"
                                       f", got shape {list(tc.shape)}")
        return (np.arange(num_sampled, dtype=np.int64), np.ones(tc.shape, np.float32),
                np.ones(num_sampled, np.float32))
    return fn


_sampler_kernel("UniformCandidateSampler", lambda a: _Uniform(int(a["range_max"])))
_sampler_kernel("LogUniformCandidateSampler", lambda a: _LogUniform(int(a["range_max"])))
_sampler_kernel("FixedUnigramCandidateSampler",
                lambda a: _Weighted(_unigram_weights(a, "FixedUnigramCandidateSampler")))
_sampler_kernel("LearnedUnigramCandidateSampler", lambda a: _Learned(int(a["range_max"])))
register_kernel("AllCandidateSampler", "CPU")(_all_candidates)


@register_kernel("ComputeAccidentalHits", "CPU")
def compute_accidental_hits(attrs):
    """tf.raw_ops.ComputeAccidentalHits: (row, sampled position, -FLT_MAX) for each true class sampled."""
    num_true = int(attrs["num_true"])

    def fn(true_classes, sampled):
        tc, sc = np.asarray(true_classes), np.asarray(sampled).reshape(-1)
        if tc.ndim != 2 or tc.shape[1] != num_true:
            raise InvalidArgumentError(f"ComputeAccidentalHits: true_classes must be [batch_size, num_true="
                                       f"{num_true}], got shape {list(tc.shape)}")
        # As TF: a candidate sampled twice maps to its last position.
        pos = {int(c): j for j, c in enumerate(sc.tolist())}
        rows, ids = [], []
        for i, row in enumerate(tc.tolist()):
            for c in row:
                j = pos.get(c)
                if j is not None:
                    rows.append(i)
                    ids.append(j)
        return (np.asarray(rows, np.int32), np.asarray(ids, np.int64),
                np.full(len(rows), -_FLT_MAX, np.float32))
    return fn
