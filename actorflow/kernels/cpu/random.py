"""CPU kernels for random ops: normal, uniform, truncated normal and uniform integers.

RandomStandardNormal, RandomUniform, TruncatedNormal, RandomUniformInt, RandomShuffle, Multinomial,
RandomGamma and RandomPoissonV2, and the stateless uniform, normal, truncated normal and
multinomial, are TF's Philox4x32-10 streams bit for bit (philox.py): the same (seed, seed2) gives
TF's numbers (and TF's row order), and each run of a stateful op continues its stream where TF's
would. With both seeds 0 the op draws its key and counter from OS entropy, like an unseeded TF op.
The other stateless kernels own a numpy ``Generator`` over a Philox bit generator keyed by the seed
tensor: reproducible across sessions and processes, but not TF's sequences.
"""
from __future__ import annotations

import secrets

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.cpu import philox
from actorflow.kernels.lazy_numba import numba_imported
from actorflow.kernels.registry import register_kernel

_MASK64 = (1 << 64) - 1


def _seeds(attrs) -> tuple[int, int]:
    return int(attrs.get("seed", 0) or 0), int(attrs.get("seed2", 0) or 0)


def _generator(attrs) -> np.random.Generator:
    """A Philox generator keyed by the op's (seed, seed2), or by OS entropy when both are 0."""
    seed, seed2 = _seeds(attrs)
    if seed == 0 and seed2 == 0:
        return np.random.Generator(np.random.Philox())
    # Negative seeds (allowed by TF's int64 attrs) wrap to their two's-complement bit pattern.
    key = np.array([seed & _MASK64, seed2 & _MASK64], dtype=np.uint64)
    return np.random.Generator(np.random.Philox(key=key))


def _stream(attrs) -> philox.PhiloxStream:
    """The op's TF Philox stream: key `seed`, counter `seed2`; random 64-bit seeds when both are 0."""
    seed, seed2 = _seeds(attrs)
    if seed == 0 and seed2 == 0:
        seed, seed2 = secrets.randbits(64), secrets.randbits(64)
    return philox.PhiloxStream(*philox.seeds_to_key_counter(seed, seed2))


def _shape(op_name, shape) -> tuple[int, ...]:
    s = np.asarray(shape)
    if s.ndim > 1 or s.dtype.kind not in "iu":
        raise ValueError(f"{op_name}: shape must be a 1-D integer tensor, got {s.dtype} of shape {s.shape}")
    dims = tuple(int(d) for d in s.reshape(-1))
    if any(d < 0 for d in dims):
        raise ValueError(f"{op_name}: shape {list(dims)} has a negative dimension")
    return dims


def _float_dtype(op_name, attrs) -> np.dtype:
    dtype = np.dtype(attrs.get("dtype", np.float32))
    if dtype.kind != "f":
        raise TypeError(f"{op_name}: dtype must be a floating-point type, got {dtype}")
    return dtype


def _cost_from_shape(shape, *rest):
    s = np.asarray(shape).reshape(-1)
    return int(np.prod(s)) if s.size else 1


def _philox_float(op, draw, stateless=False, ready=numba_imported):
    """Registers a float op drawing `draw(key, counter, n, dtype)`: from the op's stream (stateful), or
    from the key and counter TF makes of the seed tensor (stateless)."""
    def factory(attrs):
        dtype = _float_dtype(op, attrs)
        stream = None if stateless else _stream(attrs)

        def fn(shape, seed=None):
            dims = _shape(op, shape)
            n = int(np.prod(dims)) if dims else 1
            key, counter = (philox.stateless_key_counter(*_seed_pair(seed)) if stateless
                            else (stream.key, stream.reserve(n)))
            return draw(key, counter, n, dtype).reshape(dims)
        fn.stream = stream              # (a compiled loop draws from it too: scheduler/jit/rt.py)
        return fn
    factory.__doc__ = f"tf.raw_ops.{op}, TF's Philox stream bit for bit."
    register_kernel(op, "CPU", cost=_cost_from_shape, ready=ready, session_state=not stateless)(factory)


_philox_float("RandomStandardNormal", philox.normal)
_philox_float("RandomUniform", philox.uniform, ready=None)      # integer math: numpy until numba is loaded
_philox_float("TruncatedNormal", philox.truncated_normal)


@register_kernel("RandomUniformInt", "CPU", cost=_cost_from_shape, session_state=True)
def random_uniform_int(attrs):
    """tf.raw_ops.RandomUniformInt: integers in [minval, maxval), of minval's dtype, as TF draws them."""
    stream = _stream(attrs)
    tout = attrs.get("Tout")

    def fn(shape, minval, maxval):
        dims, dtype, lo, hi = uniform_int_args(tout, shape, minval, maxval)
        n = int(np.prod(dims)) if dims else 1
        if n == 0:
            return np.empty(dims, dtype)
        return philox.uniform_int(stream.key, stream.reserve(n), n, lo, hi, dtype).reshape(dims)
    return fn


def uniform_int_args(tout, shape, minval, maxval):
    """RandomUniformInt's checked (dims, dtype, lo, hi); an empty output needs no valid range."""
    dims = _shape("RandomUniformInt", shape)
    minval, maxval = np.asarray(minval), np.asarray(maxval)
    if minval.ndim or maxval.ndim:
        raise ValueError(f"RandomUniformInt: minval and maxval must be scalars, got shapes "
                         f"{minval.shape} and {maxval.shape}")
    dtype = np.dtype(tout) if tout is not None else minval.dtype
    if dtype.kind not in "iu":
        raise TypeError(f"RandomUniformInt: output dtype must be an integer type, got {dtype}")
    lo, hi = int(minval), int(maxval)
    # As in TF, an empty output needs no valid range ("zero impossible things are fine").
    if 0 not in dims and not lo < hi:
        raise ValueError(f"RandomUniformInt: need minval < maxval, got minval={lo} and maxval={hi}")
    return dims, dtype, lo, hi


def _multinomial_draw(key, counter, out, logits, num_samples):
    """TF's MultinomialFunctor on one shard: per row, the unnormalized CDF of exp(logit - max) over
    the finite logits (in double), then each sample the first class whose CDF exceeds u * total, u a
    double from two words of the row-after-row word stream. (TF splits big batches over threads,
    each shard starting at its own offset; up to its sharding threshold this is TF's draw exactly.)"""
    logits = np.asarray(logits)
    n = int(np.asarray(num_samples))
    if logits.ndim != 2:
        raise InvalidArgumentError(f"Multinomial: logits should be a matrix, got shape {list(logits.shape)}")
    if n < 0:
        raise InvalidArgumentError(f"Multinomial: num_samples should be nonnegative, got {n}")
    b, k = logits.shape
    if k == 0 and b and n:
        raise InvalidArgumentError("Multinomial: num_classes should be positive, got 0")
    if not b or not n:
        return np.zeros((b, n), out)
    finite = np.isfinite(logits)
    top = np.where(finite, logits, np.finfo(logits.dtype).min if logits.dtype.kind == "f" else 0).max(axis=1)
    cdf = np.cumsum(np.where(finite, np.exp(logits.astype(np.float64) - top.astype(np.float64)[:, None]), 0.0),
                    axis=1)
    words = philox.words(key, counter, 2 * b * n).astype(np.uint64).reshape(b, n, 2)
    u = (((words[..., 0] & np.uint64(0xFFFFF)) << np.uint64(32)) | words[..., 1]).astype(np.float64) * 2.0 ** -52
    res = np.empty((b, n), out)
    for i in range(b):
        res[i] = np.searchsorted(cdf[i], u[i] * cdf[i, -1], side="right")
    return res


@register_kernel("Multinomial", "CPU", session_state=True)
def multinomial(attrs):
    """tf.raw_ops.Multinomial: TF's draws for the op's seeds; each run reserves TF's blocks."""
    stream = _stream(attrs)
    out = np.dtype(attrs.get("output_dtype", np.int64))

    def fn(logits, num_samples):
        b, n = int(np.shape(logits)[0]) if np.ndim(logits) else 0, int(np.asarray(num_samples))
        # TF: ReserveRandomOutputs(batch * ceil4(num_samples) * 2, 256) -- two words a double.
        start = stream.reserve(b * (max(n, 0) + 3) // 4 * 4 * 2)
        return _multinomial_draw(stream.key, start, out, logits, num_samples)
    return fn


def _seeded(seed) -> np.random.Generator:
    """The generator of a stateless op's `seed` tensor ([2] ints): the same seed, the same stream."""
    s = _seed_pair(seed)
    key = np.array([s[0] & _MASK64, s[1] & _MASK64], dtype=np.uint64)
    return np.random.Generator(np.random.Philox(key=key))


def _seed_pair(seed) -> tuple[int, int]:
    s = np.asarray(seed).reshape(-1)
    if s.size != 2:
        raise InvalidArgumentError(f"seed must have shape [2], not {list(np.shape(seed))}")
    return int(s[0]), int(s[1])


@register_kernel("StatelessMultinomial", "CPU", session_state=True)
def stateless_multinomial(attrs):
    """tf.raw_ops.StatelessMultinomial: TF's draws for the seed tensor."""
    out = np.dtype(attrs.get("output_dtype", np.int64))
    return lambda logits, num_samples, seed: _multinomial_draw(
        *philox.stateless_key_counter(*_seed_pair(seed)), out, logits, num_samples)


_philox_float("StatelessRandomUniform", philox.uniform, stateless=True, ready=None)
_philox_float("StatelessRandomNormal", philox.normal, stateless=True)
_philox_float("StatelessTruncatedNormal", philox.truncated_normal, stateless=True)


@register_kernel("RandomGamma", "CPU", ready=numba_imported, session_state=True)
def random_gamma(attrs):
    """tf.raw_ops.RandomGamma: TF's draws (Marsaglia-Tsang on the op's stream), shape + alpha.shape."""
    stream = _stream(attrs)

    def fn(shape, alpha):
        dims = _shape("RandomGamma", shape)
        a = np.asarray(alpha)
        if (a <= 0).any():
            raise InvalidArgumentError("RandomGamma: alpha must be positive")
        per_alpha = int(np.prod(dims)) if dims else 1
        start = stream.reserve(per_alpha * a.size)
        return philox.gamma(stream.key, start, per_alpha, a).astype(a.dtype).reshape(dims + a.shape)
    return fn


@register_kernel("RandomPoissonV2", "CPU", ready=numba_imported, session_state=True)
def random_poisson(attrs):
    """tf.raw_ops.RandomPoissonV2: TF's draws (Knuth below rate 10, Hormann above) on the op's stream."""
    stream = _stream(attrs)
    out = np.dtype(attrs.get("dtype", np.float32))

    def fn(shape, rate):
        dims = _shape("RandomPoissonV2", shape)
        r = np.asarray(rate, dtype=np.float64)
        if (r < 0).any():
            raise InvalidArgumentError("RandomPoissonV2: rate must be non-negative")
        per_rate = int(np.prod(dims)) if dims else 1
        start = stream.reserve(per_rate * r.size)
        return philox.poisson(stream.key, start, per_rate, r).astype(out).reshape(dims + r.shape)
    return fn


@register_kernel("RandomShuffle", "CPU", ready=numba_imported, session_state=True)
def random_shuffle(attrs):
    """tf.raw_ops.RandomShuffle: the rows in TF's order for the op's seeds (Fisher-Yates on its stream)."""
    stream = _stream(attrs)

    def fn(value):
        v = np.asarray(value)
        if v.ndim == 0 or v.shape[0] < 2:
            return v.copy()
        n = v.shape[0]
        return v[philox.permutation(stream.key, stream.reserve_blocks(philox.shuffle_blocks(n)), n)]
    return fn


def _broadcast_param(op, x, dims):
    a = np.asarray(x)
    try:
        return np.broadcast_to(a, dims)
    except ValueError:
        raise InvalidArgumentError(f"{op}: a parameter of shape {list(a.shape)} does not broadcast to the "
                                   f"output shape {list(dims)}") from None


@register_kernel("StatelessRandomGammaV2", "CPU", cost=_cost_from_shape)
def stateless_random_gamma(attrs):
    def fn(shape, seed, alpha):
        dims = _shape("StatelessRandomGammaV2", shape)
        a = _broadcast_param("StatelessRandomGammaV2", alpha, dims)
        if (a <= 0).any():
            raise InvalidArgumentError("StatelessRandomGammaV2: alpha must be positive")
        return _seeded(seed).standard_gamma(a).astype(np.asarray(alpha).dtype)
    return fn


@register_kernel("StatelessRandomPoisson", "CPU", cost=_cost_from_shape)
def stateless_random_poisson(attrs):
    out = np.dtype(attrs.get("dtype", np.int32))

    def fn(shape, seed, lam):
        dims = _shape("StatelessRandomPoisson", shape)
        r = _broadcast_param("StatelessRandomPoisson", np.asarray(lam, np.float64), dims)
        if (r < 0).any():
            raise InvalidArgumentError("StatelessRandomPoisson: lam must be non-negative")
        return _seeded(seed).poisson(r).astype(out)
    return fn


@register_kernel("StatelessRandomBinomial", "CPU", cost=_cost_from_shape)
def stateless_random_binomial(attrs):
    out = np.dtype(attrs.get("dtype", np.int32))

    def fn(shape, seed, counts, probs):
        dims = _shape("StatelessRandomBinomial", shape)
        n = _broadcast_param("StatelessRandomBinomial", counts, dims)
        p = _broadcast_param("StatelessRandomBinomial", np.asarray(probs, np.float64), dims)
        if (n < 0).any() or (p < 0).any() or (p > 1).any():
            raise InvalidArgumentError("StatelessRandomBinomial: counts must be >= 0 and probs in [0, 1]")
        return _seeded(seed).binomial(n.astype(np.int64), p).astype(out)
    return fn


@register_kernel("StatelessParameterizedTruncatedNormal", "CPU", cost=_cost_from_shape)
def stateless_parameterized_truncated_normal(attrs):
    def fn(shape, seed, means, stddevs, minvals, maxvals):
        op = "StatelessParameterizedTruncatedNormal"
        dims = _shape(op, shape)
        m, s, lo, hi = (_broadcast_param(op, np.asarray(x, np.float64), dims)
                        for x in (means, stddevs, minvals, maxvals))
        if (s <= 0).any() or (lo >= hi).any():
            raise InvalidArgumentError(f"{op}: stddevs must be positive and minvals < maxvals")
        # Inverse-CDF sampling of the standard normal between the standardized bounds.
        from scipy.special import ndtr, ndtri
        a, b = ndtr((lo - m) / s), ndtr((hi - m) / s)
        u = _seeded(seed).random(dims)
        z = ndtri(np.clip(a + u * (b - a), 1e-300, 1 - 1e-16))
        return np.clip(m + s * z, lo, hi).astype(np.asarray(means).dtype)
    return fn


@register_kernel("StatelessRandomUniformFullInt", "CPU", cost=_cost_from_shape)
def stateless_random_uniform_full_int(attrs):
    out = np.dtype(attrs.get("dtype", np.int64))

    def fn(shape, seed):
        dims = _shape("StatelessRandomUniformFullInt", shape)
        info = np.iinfo(out)
        return _seeded(seed).integers(info.min, info.max, size=dims, dtype=out, endpoint=True)
    return fn
