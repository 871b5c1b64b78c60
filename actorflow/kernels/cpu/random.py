"""CPU kernels for random ops: normal, uniform, truncated normal and uniform integers.

Each op instance owns one numpy ``Generator`` over a Philox bit generator, built in the kernel
factory. With a non-zero (seed, seed2) the Philox key is exactly (seed, seed2), so the same graph
seed and op seed give the same stream in every session and process, as TF's Philox-based kernels
do (the streams themselves differ from TF's). With both seeds 0 the op draws its key from OS
entropy, like an unseeded TF op. Every call continues the op's stream.
"""
from __future__ import annotations

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel

_MASK64 = (1 << 64) - 1


def _generator(attrs) -> np.random.Generator:
    """A Philox generator keyed by the op's (seed, seed2), or by OS entropy when both are 0."""
    seed, seed2 = int(attrs.get("seed", 0) or 0), int(attrs.get("seed2", 0) or 0)
    if seed == 0 and seed2 == 0:
        return np.random.Generator(np.random.Philox())
    # Negative seeds (allowed by TF's int64 attrs) wrap to their two's-complement bit pattern.
    key = np.array([seed & _MASK64, seed2 & _MASK64], dtype=np.uint64)
    return np.random.Generator(np.random.Philox(key=key))


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


def _draw(dtype, fill32, fill64, dims):
    """Generate float32/float64 directly; narrower floats are drawn as float32 and cast."""
    if dtype == np.float64:
        return fill64(dims)
    out = fill32(dims)
    return out if dtype == np.float32 else out.astype(dtype)


@register_kernel("RandomStandardNormal", "CPU", cost=_cost_from_shape)
def random_standard_normal(attrs):
    """tf.raw_ops.RandomStandardNormal: N(0, 1) samples of the given shape and dtype."""
    gen, dtype = _generator(attrs), _float_dtype("RandomStandardNormal", attrs)

    def fn(shape):
        dims = _shape("RandomStandardNormal", shape)
        return _draw(dtype, lambda d: gen.standard_normal(d, dtype=np.float32),
                     lambda d: gen.standard_normal(d), dims)
    return fn


@register_kernel("RandomUniform", "CPU", cost=_cost_from_shape)
def random_uniform(attrs):
    """tf.raw_ops.RandomUniform: uniform samples in [0, 1) of the given shape and dtype."""
    gen, dtype = _generator(attrs), _float_dtype("RandomUniform", attrs)

    def fn(shape):
        dims = _shape("RandomUniform", shape)
        out = _draw(dtype, lambda d: gen.random(d, dtype=np.float32), lambda d: gen.random(d), dims)
        if dtype.itemsize < 4:
            # Rounding a float32 just below 1 to a narrower type can give exactly 1.0; keep [0, 1).
            np.minimum(out, np.nextafter(dtype.type(1), dtype.type(0)), out=out)
        return out
    return fn


@register_kernel("TruncatedNormal", "CPU", cost=_cost_from_shape)
def truncated_normal(attrs):
    """tf.raw_ops.TruncatedNormal: N(0, 1) samples, redrawing any outside [-2, 2] as TF does."""
    gen, dtype = _generator(attrs), _float_dtype("TruncatedNormal", attrs)
    work = np.float64 if dtype == np.float64 else np.float32

    def fn(shape):
        dims = _shape("TruncatedNormal", shape)
        out = gen.standard_normal(dims, dtype=work)
        flat = out.reshape(-1)
        # About 4.6% of draws fall outside two standard deviations; each pass redraws only those.
        bad = np.flatnonzero(np.abs(flat) > 2.0)
        while bad.size:
            flat[bad] = gen.standard_normal(bad.size, dtype=work)
            bad = bad[np.abs(flat[bad]) > 2.0]
        return out if out.dtype == dtype else out.astype(dtype)
    return fn


@register_kernel("RandomUniformInt", "CPU", cost=_cost_from_shape)
def random_uniform_int(attrs):
    """tf.raw_ops.RandomUniformInt: integers uniform in [minval, maxval), of minval's dtype."""
    gen = _generator(attrs)
    tout = attrs.get("Tout")

    def fn(shape, minval, maxval):
        dims, dtype, lo, hi = uniform_int_args(tout, shape, minval, maxval)
        if 0 in dims:
            return np.empty(dims, dtype)
        return gen.integers(lo, hi, size=dims, dtype=dtype)
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


def _multinomial_draw(rng, out, logits, num_samples):
    logits = np.asarray(logits, dtype=np.float64)
    n = int(np.asarray(num_samples))
    if logits.ndim != 2:
        raise InvalidArgumentError(f"Multinomial: logits should be a matrix, got shape {list(logits.shape)}")
    if n < 0:
        raise InvalidArgumentError(f"Multinomial: num_samples should be nonnegative, got {n}")
    b, k = logits.shape
    if k == 0 and b and n:
        raise InvalidArgumentError("Multinomial: num_classes should be positive, got 0")
    # Inverse CDF of softmax(logits) per row: O(k + n log k) a row, -inf logits never drawn.
    if not b or not n:
        return np.zeros((b, n), out)
    top = np.max(logits, axis=1, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    cdf = np.cumsum(np.exp(logits - top), axis=1)
    u = rng.random((b, n)) * cdf[:, -1:]
    res = np.empty((b, n), out)
    for i in range(b):
        res[i] = np.minimum(np.searchsorted(cdf[i], u[i], side="right"), k - 1)
    return res


@register_kernel("Multinomial", "CPU")
def multinomial(attrs):
    rng = _generator(attrs)
    out = np.dtype(attrs.get("output_dtype", np.int64))
    return lambda logits, num_samples: _multinomial_draw(rng, out, logits, num_samples)


def _seeded(seed) -> np.random.Generator:
    """The generator of a stateless op's `seed` tensor ([2] ints): the same seed, the same stream."""
    s = np.asarray(seed).reshape(-1)
    if s.size != 2:
        raise InvalidArgumentError(f"seed must have shape [2], not {list(np.shape(seed))}")
    key = np.array([int(s[0]) & _MASK64, int(s[1]) & _MASK64], dtype=np.uint64)
    return np.random.Generator(np.random.Philox(key=key))


@register_kernel("StatelessMultinomial", "CPU")
def stateless_multinomial(attrs):
    out = np.dtype(attrs.get("output_dtype", np.int64))
    return lambda logits, num_samples, seed: _multinomial_draw(_seeded(seed), out, logits, num_samples)


def _stateless(op, draw):
    def factory(attrs):
        dtype = _float_dtype(op, attrs)

        def fn(shape, seed):
            return draw(_seeded(seed), _shape(op, shape)).astype(dtype)
        return fn
    register_kernel(op, "CPU", cost=_cost_from_shape)(factory)


def _truncated(gen, dims):
    out = gen.standard_normal(dims)
    flat = out.reshape(-1)
    bad = np.flatnonzero(np.abs(flat) > 2.0)
    while bad.size:
        flat[bad] = gen.standard_normal(bad.size)
        bad = bad[np.abs(flat[bad]) > 2.0]
    return out


_stateless("StatelessRandomUniform", lambda gen, dims: gen.random(dims))
_stateless("StatelessRandomNormal", lambda gen, dims: gen.standard_normal(dims))
_stateless("StatelessTruncatedNormal", _truncated)


@register_kernel("RandomGamma", "CPU")
def random_gamma(attrs):
    gen = _generator(attrs)

    def fn(shape, alpha):
        dims = _shape("RandomGamma", shape)
        a = np.asarray(alpha)
        if (a <= 0).any():
            raise InvalidArgumentError("RandomGamma: alpha must be positive")
        return gen.standard_gamma(a, size=dims + a.shape).astype(a.dtype)
    return fn


@register_kernel("RandomPoissonV2", "CPU")
def random_poisson(attrs):
    gen = _generator(attrs)
    out = np.dtype(attrs.get("dtype", np.float32))

    def fn(shape, rate):
        dims = _shape("RandomPoissonV2", shape)
        r = np.asarray(rate, dtype=np.float64)
        if (r < 0).any():
            raise InvalidArgumentError("RandomPoissonV2: rate must be non-negative")
        return gen.poisson(r, size=dims + r.shape).astype(out)
    return fn


@register_kernel("RandomShuffle", "CPU")
def random_shuffle(attrs):
    rng = _generator(attrs)

    def fn(value):
        v = np.asarray(value)
        if v.ndim == 0:
            return v
        return v[rng.permutation(v.shape[0])]
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
