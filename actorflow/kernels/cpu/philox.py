"""TensorFlow's Philox4x32-10 generator and its distributions, bit for bit.

TF's stateful random ops (RandomUniform, RandomStandardNormal, TruncatedNormal, RandomUniformInt)
and its stateless ones draw from a counter-based Philox4x32-10 generator (Salmon et al., SC 2011):
a 64-bit key and a 128-bit counter, where each counter value gives one block of four uint32 words.
This module reproduces TF's stream and its conversions exactly, so a program seeded with
`set_random_seed` starts from the same initial weights and the same dropout masks as under TF:

- the key is the op's `seed` and the counter's high half its `seed2` (stateless ops mix their seed
  tensor through one Philox round first);
- fixed-size distributions (uniform, normal, integers) turn block ``base + g`` into output group
  ``g`` (four float32 or two float64 values);
- the truncated normal, which rejects, gives each group of outputs its own range of 256 blocks
  (128 for float64) and reads words in order until the group is full;
- each run of a stateful op then moves the op's counter on by 256 blocks per output element, as
  TF's `GuardedPhiloxRandom::ReserveRandomOutputs(n, 256)`.

Floats come from the low mantissa bits (``(x & 0x7fffff) * 2**-23`` equals TF's bit trick exactly);
normals from Box-Muller in the output precision with the C library's `logf`/`sinf`/`cosf`, which is
what TF's kernels call. The loops are numba kernels compiled on first use and cached on disk.
"""
from __future__ import annotations

import math
import threading

import numpy as np

from actorflow.kernels.lazy_numba import njit, numba_imported

__all__ = ["PhiloxStream", "PhiloxWords", "RESERVED_BLOCKS_PER_OUTPUT", "gamma", "normal", "permutation",
           "philox_blocks", "philox_blocks_numpy", "poisson", "seeds_to_key_counter", "shuffle_blocks", "stateless_key_counter",
           "truncated_normal", "uniform", "uniform_int", "words"]

RESERVED_BLOCKS_PER_OUTPUT = 256
_MASK32 = 0xFFFFFFFF
_MASK64 = (1 << 64) - 1
_MASK128 = (1 << 128) - 1

_M0 = np.uint64(0xD2511F53)
_M1 = np.uint64(0xCD9E8D57)
_W0 = np.uint64(0x9E3779B9)
_W1 = np.uint64(0xBB67AE85)
_LO = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)
_ONE = np.uint64(1)
_ZERO = np.uint64(0)


@njit(cache=True, nogil=True)
def _rounds(k0, k1, x0, x1, x2, x3):
    """The block of counter (x0..x3) under key (k0, k1): ten Philox rounds, the key raised between."""
    for _ in range(10):
        p0 = _M0 * x0
        p1 = _M1 * x2
        y0 = (p1 >> _S32) ^ x1 ^ k0
        y2 = (p0 >> _S32) ^ x3 ^ k1
        x1 = p1 & _LO
        x3 = p0 & _LO
        x0 = y0
        x2 = y2
        k0 = (k0 + _W0) & _LO
        k1 = (k1 + _W1) & _LO
    return x0, x1, x2, x3


@njit(cache=True, nogil=True)
def _increment(c0, c1, c2, c3):
    """The 128-bit counter plus one (PhiloxRandom::SkipOne)."""
    c0 = (c0 + _ONE) & _LO
    if c0 == _ZERO:
        c1 = (c1 + _ONE) & _LO
        if c1 == _ZERO:
            c2 = (c2 + _ONE) & _LO
            if c2 == _ZERO:
                c3 = (c3 + _ONE) & _LO
    return c0, c1, c2, c3


@njit(cache=True, nogil=True)
def _fill_words(k0, k1, c0, c1, c2, c3, out):
    """The first out.size words of the blocks from counter c on, as uint32."""
    n = out.shape[0]
    for b in range(n // 4):
        w0, w1, w2, w3 = _rounds(k0, k1, c0, c1, c2, c3)
        c0, c1, c2, c3 = _increment(c0, c1, c2, c3)
        out[4 * b] = w0
        out[4 * b + 1] = w1
        out[4 * b + 2] = w2
        out[4 * b + 3] = w3
    if n % 4:
        w = np.array(_rounds(k0, k1, c0, c1, c2, c3))
        for j in range(n % 4):
            out[n - n % 4 + j] = w[j]


def _split_counter(counter: int):
    return tuple(np.uint64((counter >> (32 * i)) & _MASK32) for i in range(4))


def _split_key(key: int):
    return np.uint64(key & _MASK32), np.uint64((key >> 32) & _MASK32)


def philox_blocks_numpy(key: int, counter: int, n: int) -> np.ndarray:
    """`philox_blocks` in numpy, the rounds vectorized over the blocks. Word-by-word readers (shuffle
    buffers, queues, samplers, stateless seeds) and, until numba is loaded in the process, the
    integer-only distributions (uniform floats and integers) use it, so that a parameter server
    initializing Glorot-uniform variables needs no numba (its first import takes 0.3-1 s)."""
    n = int(n)
    lo64, hi64 = counter & _MASK64, (counter >> 64) & _MASK64
    lo = np.uint64(lo64) + np.arange(n, dtype=np.uint64)       # wraps modulo 2**64
    hi = np.uint64(hi64) + (lo < np.uint64(lo64)).astype(np.uint64)
    x0, x1, x2, x3 = lo & _LO, lo >> _S32, hi & _LO, hi >> _S32
    k0, k1 = np.uint64(key & _MASK32), np.uint64((key >> 32) & _MASK32)
    for _ in range(10):
        p0, p1 = _M0 * x0, _M1 * x2
        x0, x1, x2, x3 = (p1 >> _S32) ^ x1 ^ k0, p1 & _LO, (p0 >> _S32) ^ x3 ^ k1, p0 & _LO
        k0, k1 = (k0 + _W0) & _LO, (k1 + _W1) & _LO
    return np.stack([x0, x1, x2, x3], axis=1).astype(np.uint32)


def philox_blocks(key: int, counter: int, n: int) -> np.ndarray:
    """`n` Philox blocks as a uint32 array of shape [n, 4], for the 64-bit `key` and the 128-bit
    `counter` of the first block (later blocks count up from it)."""
    out = np.empty(4 * int(n), np.uint32)
    if n:
        _fill_words(*_split_key(key), *_split_counter(counter), out)
    return out.reshape(-1, 4)


# -- Box-Muller, in the output's precision (TF's BoxMullerFloat / BoxMullerDouble) -------------------
_TWO_PI = 2.0 * math.pi
_F_EPS = np.float32(1.0e-7)
_F_MINUS2 = np.float32(-2.0)
_F_MANT = np.float32(2.0 ** -23)
_D_MANT = 2.0 ** -52
_MANT23 = np.uint64(0x7FFFFF)
_MANT20 = np.uint64(0xFFFFF)


@njit(cache=True, nogil=True)
def _box_muller_f32(x0, x1):
    u1 = np.float32(x0 & _MANT23) * _F_MANT
    if u1 < _F_EPS:
        u1 = _F_EPS
    # TF writes 2.0f * M_PI * u: M_PI is a double, so the angle is rounded from a double product.
    v1 = np.float32(_TWO_PI * np.float64(np.float32(x1 & _MANT23) * _F_MANT))
    u2 = np.float32(math.sqrt(_F_MINUS2 * np.float32(math.log(u1))))
    return np.float32(math.sin(v1)) * u2, np.float32(math.cos(v1)) * u2


@njit(cache=True, nogil=True)
def _u64_to_double(x0, x1):
    return np.float64(((x0 & _MANT20) << _S32) | x1) * _D_MANT


@njit(cache=True, nogil=True)
def _box_muller_f64(x0, x1, x2, x3):
    u1 = _u64_to_double(x0, x1)
    if u1 < 1.0e-7:
        u1 = 1.0e-7
    v1 = 2.0 * math.pi * _u64_to_double(x2, x3)
    u2 = math.sqrt(-2.0 * math.log(u1))
    return math.sin(v1) * u2, math.cos(v1) * u2


@njit(cache=True, nogil=True)
def _uniform_f32(k0, k1, c0, c1, c2, c3, out):
    """Four floats a block, straight from the rounds (no array of words in between)."""
    n = out.shape[0]
    for b in range((n + 3) // 4):
        w0, w1, w2, w3 = _rounds(k0, k1, c0, c1, c2, c3)
        c0, c1, c2, c3 = _increment(c0, c1, c2, c3)
        i = 4 * b
        out[i] = np.float32(w0 & _MANT23) * _F_MANT
        if i + 3 < n:
            out[i + 1] = np.float32(w1 & _MANT23) * _F_MANT
            out[i + 2] = np.float32(w2 & _MANT23) * _F_MANT
            out[i + 3] = np.float32(w3 & _MANT23) * _F_MANT
        else:
            if i + 1 < n:
                out[i + 1] = np.float32(w1 & _MANT23) * _F_MANT
            if i + 2 < n:
                out[i + 2] = np.float32(w2 & _MANT23) * _F_MANT


@njit(cache=True, nogil=True)
def _uniform_f64(words, out):
    for i in range(out.shape[0]):
        out[i] = _u64_to_double(words[2 * i], words[2 * i + 1])


@njit(cache=True, nogil=True)
def _normal_f32(words, out):
    """Four normals per block from the word pairs (w0, w1) and (w2, w3)."""
    n = out.shape[0]
    for p in range(0, n, 2):
        a, b = _box_muller_f32(words[p], words[p + 1])
        out[p] = a
        if p + 1 < n:
            out[p + 1] = b


@njit(cache=True, nogil=True)
def _normal_f64(words, out):
    """Two normals per block, each pair from the block's four words."""
    n = out.shape[0]
    for p in range(0, n, 2):
        a, b = _box_muller_f64(words[2 * p], words[2 * p + 1], words[2 * p + 2], words[2 * p + 3])
        out[p] = a
        if p + 1 < n:
            out[p + 1] = b


@njit(cache=True, nogil=True)
def _add_counter(c0, c1, c2, c3, count):
    """counter + count for a count below 2**64 (PhiloxRandom::Skip)."""
    lo = count & _LO
    hi = count >> _S32
    c0 = c0 + lo
    if c0 > _LO:
        hi += _ONE
    c0 &= _LO
    c1 = c1 + hi
    if c1 > _LO:
        c2 = (c2 + _ONE) & _LO
        if c2 == _ZERO:
            c3 = (c3 + _ONE) & _LO
    c1 &= _LO
    return c0, c1, c2, c3


@njit(cache=True, nogil=True)
def _truncated_f32(k0, k1, c0, c1, c2, c3, out):
    """Groups of four accepted Box-Muller values (|x| < 2), group g reading blocks from c + 256 g."""
    n = out.shape[0]
    for g in range((n + 3) // 4):
        d0, d1, d2, d3 = _add_counter(c0, c1, c2, c3, np.uint64(g) * np.uint64(256))
        filled = 0
        used = 4
        w = (_ZERO, _ZERO, _ZERO, _ZERO)
        while filled < 4:
            if used == 4:
                w = _rounds(k0, k1, d0, d1, d2, d3)
                d0, d1, d2, d3 = _increment(d0, d1, d2, d3)
                used = 0
            a, b = _box_muller_f32(w[used], w[used + 1])
            used += 2
            for f in (a, b):
                if filled < 4 and abs(f) < np.float32(2.0):
                    i = 4 * g + filled
                    if i < n:
                        out[i] = f
                    filled += 1


@njit(cache=True, nogil=True)
def _truncated_f64(k0, k1, c0, c1, c2, c3, out):
    """Groups of two accepted values, group g reading blocks from c + 128 g (one block a pair)."""
    n = out.shape[0]
    for g in range((n + 1) // 2):
        d0, d1, d2, d3 = _add_counter(c0, c1, c2, c3, np.uint64(g) * np.uint64(128))
        filled = 0
        while filled < 2:
            w = _rounds(k0, k1, d0, d1, d2, d3)
            d0, d1, d2, d3 = _increment(d0, d1, d2, d3)
            a, b = _box_muller_f64(w[0], w[1], w[2], w[3])
            for f in (a, b):
                if filled < 2 and abs(f) < 2.0:
                    i = 2 * g + filled
                    if i < n:
                        out[i] = f
                    filled += 1


# -- distributions ---------------------------------------------------------------------------------
_PER_BLOCK = {np.dtype(np.float64): 2}   # outputs per block; 4 for every other float type


def _per_block(dtype) -> int:
    return _PER_BLOCK.get(np.dtype(dtype), 4)


def words(key: int, counter: int, n: int) -> np.ndarray:
    """The stream's first `n` words from `counter` on, as uint32 (the order SingleSampleAdapter reads);
    in numpy until numba is loaded in the process."""
    if not numba_imported():
        return philox_blocks_numpy(key, counter, -(-int(n) // 4)).reshape(-1)[:int(n)]
    out = np.empty(int(n), np.uint32)
    if n:
        _fill_words(*_split_key(key), *_split_counter(counter), out)
    return out


def uniform(key: int, counter: int, size: int, dtype) -> np.ndarray:
    """TF's UniformDistribution: [0, 1) from the low mantissa bits of each word (two words a double)."""
    dtype = np.dtype(dtype)
    if dtype == np.float32 and numba_imported():
        out = np.empty(size, np.float32)
        if size:
            _uniform_f32(*_split_key(key), *_split_counter(counter), out)
        return out
    w = words(key, counter, 4 * -(-size // _per_block(dtype)))
    if dtype == np.float64:
        if numba_imported():
            out = np.empty(size, np.float64)
            _uniform_f64(w, out)
            return out
        w = w.astype(np.uint64)
        return (((w[0::2] & _MANT20) << _S32) | w[1::2])[:size].astype(np.float64) * _D_MANT
    if dtype == np.float32:
        return (w[:size] & np.uint32(0x7FFFFF)).astype(np.float32) * _F_MANT
    if dtype == np.float16:
        return ((w[:size] & np.uint32(0x3FF)).astype(np.float32) * np.float32(2.0 ** -10)).astype(np.float16)
    if dtype.itemsize == 2:   # bfloat16: a 7-bit mantissa, exact in any float type
        return ((w[:size] & np.uint32(0x7F)).astype(np.float32) * np.float32(2.0 ** -7)).astype(dtype)
    raise TypeError(f"uniform: no Philox conversion to {dtype}")


def normal(key: int, counter: int, size: int, dtype) -> np.ndarray:
    """TF's NormalDistribution: Box-Muller on word pairs (float32; narrower types round from it) or
    on whole blocks (float64)."""
    dtype = np.dtype(dtype)
    w = words(key, counter, 4 * -(-size // _per_block(dtype)))
    if dtype == np.float64:
        out = np.empty(size, np.float64)
        _normal_f64(w, out)
        return out
    out = np.empty(size, np.float32)
    _normal_f32(w, out)
    return out if dtype == np.float32 else out.astype(dtype)


def truncated_normal(key: int, counter: int, size: int, dtype) -> np.ndarray:
    """TF's TruncatedNormalDistribution: Box-Muller values with |x| >= 2 rejected, per output group."""
    dtype = np.dtype(dtype)
    k0, k1 = np.uint64(key & _MASK32), np.uint64((key >> 32) & _MASK32)
    if dtype == np.float64:
        out = np.empty(size, np.float64)
        if size:
            _truncated_f64(k0, k1, *_split_counter(counter), out)
        return out
    out = np.empty(size, np.float32)
    if size:
        _truncated_f32(k0, k1, *_split_counter(counter), out)
    return out if dtype == np.float32 else out.astype(dtype)


def uniform_int(key: int, counter: int, size: int, lo: int, hi: int, dtype) -> np.ndarray:
    """TF's integer UniformDistribution: ``lo + word % (hi - lo)``, one word an int32 and two (low
    word first) an int64. Like TF's, it has a slight modulo bias for ranges that do not divide 2**32."""
    dtype = np.dtype(dtype)
    if dtype.itemsize == 8:
        w = words(key, counter, 4 * -(-size // 2)).astype(np.uint64)
        bits = w[0::2] | (w[1::2] << np.uint64(32))
        r = bits[:size] % np.uint64((hi - lo) & 0xFFFFFFFFFFFFFFFF)
        return (r.view(np.int64) + np.int64(lo)).astype(dtype)
    w = words(key, counter, 4 * -(-size // 4))[:size]
    r = w % np.uint32((hi - lo) & _MASK32)
    return (r.astype(np.int64) + lo).astype(dtype)


@njit(cache=True, nogil=True)
def _next_of_pair(normal, k0, k1, d0, d1, d2, d3, left, a0, a1):
    """The next value of a double distribution that makes two values a block and hands them out last
    first (TF's NormalDistribution / UniformDistribution<double> behind its gamma and Poisson
    kernels' UNIFORM()): (value, the counter, values left, the pair)."""
    if left == 0:
        w0, w1, w2, w3 = _rounds(k0, k1, d0, d1, d2, d3)
        d0, d1, d2, d3 = _increment(d0, d1, d2, d3)
        if normal:
            a0, a1 = _box_muller_f64(w0, w1, w2, w3)
        else:
            a0, a1 = _u64_to_double(w0, w1), _u64_to_double(w2, w3)
        left = 2
    return (a1 if left == 2 else a0), d0, d1, d2, d3, left - 1, a0, a1


@njit(cache=True, nogil=True)
def _gamma(k0, k1, c0, c1, c2, c3, alphas, per_alpha, out):
    """TF's RandomGamma: output o (alpha-major: alpha o // per_alpha) reads blocks from c + 256 o;
    Marsaglia-Tsang on double normals and uniforms from that one stream, an exponential for
    alpha == 1, and alpha < 1 boosted by u ** (1 / alpha)."""
    na = alphas.shape[0]
    for o in range(na * per_alpha):
        a = o // per_alpha
        alpha = alphas[a]
        d0, d1, d2, d3 = _add_counter(c0, c1, c2, c3, np.uint64(o) * np.uint64(256))
        n_left = u_left = 0
        n0 = n1 = u0 = u1 = 0.0
        if alpha == 1.0:
            u, d0, d1, d2, d3, u_left, u0, u1 = _next_of_pair(False, k0, k1, d0, d1, d2, d3, u_left, u0, u1)
            res = -math.log1p(-u)
        else:
            small = alpha < 1.0
            d = alpha + (2.0 / 3.0 if small else -1.0 / 3.0)
            c = 1.0 / 3.0 / math.sqrt(d)
            while True:
                x, d0, d1, d2, d3, n_left, n0, n1 = _next_of_pair(True, k0, k1, d0, d1, d2, d3, n_left, n0, n1)
                v = 1.0 + c * x
                if v <= 0.0:
                    continue
                v = v * v * v
                u, d0, d1, d2, d3, u_left, u0, u1 = _next_of_pair(False, k0, k1, d0, d1, d2, d3, u_left, u0, u1)
                if u < 1.0 - 0.0331 * (x * x) * (x * x) or math.log(u) < 0.5 * x * x + d * (1.0 - v + math.log(v)):
                    res = d * v
                    if small:
                        b, d0, d1, d2, d3, u_left, u0, u1 = _next_of_pair(False, k0, k1, d0, d1, d2, d3, u_left,
                                                                          u0, u1)
                        res *= math.pow(b, 1.0 / alpha)
                    break
        out[(o % per_alpha) * na + a] = res


@njit(cache=True, nogil=True)
def _poisson(k0, k1, c0, c1, c2, c3, rates, per_rate, out):
    """TF's RandomPoisson: output o (rate-major) reads blocks from c + 256 o; Knuth's product of
    uniforms below rate 10, Hormann's transformed rejection from 10 on; doubles throughout."""
    nr = rates.shape[0]
    for o in range(nr * per_rate):
        r = o // per_rate
        rate = rates[r]
        d0, d1, d2, d3 = _add_counter(c0, c1, c2, c3, np.uint64(o) * np.uint64(256))
        left = 0
        u0 = u1 = 0.0
        res = 0.0
        if rate < 10.0:
            e = math.exp(-rate)
            prod = 1.0
            while True:
                u, d0, d1, d2, d3, left, u0, u1 = _next_of_pair(False, k0, k1, d0, d1, d2, d3, left, u0, u1)
                prod = prod * u
                if prod <= e:
                    break
                res += 1.0
        else:
            log_rate = math.log(rate)
            b = 0.931 + 2.53 * math.sqrt(rate)
            a = -0.059 + 0.02483 * b
            inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
            v_r = 0.9277 - 3.6224 / (b - 2.0)
            while True:
                u, d0, d1, d2, d3, left, u0, u1 = _next_of_pair(False, k0, k1, d0, d1, d2, d3, left, u0, u1)
                u -= 0.5
                v, d0, d1, d2, d3, left, u0, u1 = _next_of_pair(False, k0, k1, d0, d1, d2, d3, left, u0, u1)
                us = 0.5 - abs(u)
                res = math.floor((2.0 * a / us + b) * u + rate + 0.43)
                if res < 0.0:
                    continue
                if us >= 0.07 and v <= v_r:
                    break
                if math.log(v * inv_alpha / (a / (us * us) + b)) <= -rate + res * log_rate - math.lgamma(res + 1.0):
                    break
        out[(o % per_rate) * nr + r] = res


def poisson(key: int, counter: int, per_rate: int, rates) -> np.ndarray:
    """TF's RandomPoisson draws as doubles: [per_rate, rates.size], sample-major as TF lays them out."""
    rates = np.ascontiguousarray(rates, np.float64).reshape(-1)
    out = np.empty(int(per_rate) * rates.size, np.float64)
    if out.size:
        _poisson(*_split_key(key), *_split_counter(counter), rates, int(per_rate), out)
    return out.reshape(int(per_rate), rates.size)


def gamma(key: int, counter: int, per_alpha: int, alphas) -> np.ndarray:
    """TF's RandomGamma draws in double: [per_alpha, alphas.size], sample-major as TF lays them out."""
    alphas = np.ascontiguousarray(alphas, np.float64).reshape(-1)
    out = np.empty(int(per_alpha) * alphas.size, np.float64)
    if out.size:
        _gamma(*_split_key(key), *_split_counter(counter), alphas, int(per_alpha), out)
    return out.reshape(int(per_alpha), alphas.size)


# -- permutations and single words ------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _shuffle(k0, k1, c0, c1, c2, c3, perm):
    """TF's RandomShuffle: position i swaps with i + word % (n - i), one word each, in stream order."""
    n = perm.shape[0]
    w = np.empty(4, np.uint64)
    used = 4
    for i in range(n - 1):
        if used == 4:
            w[0], w[1], w[2], w[3] = _rounds(k0, k1, c0, c1, c2, c3)
            c0, c1, c2, c3 = _increment(c0, c1, c2, c3)
            used = 0
        j = i + np.int64(w[used] % np.uint64(n - i))
        used += 1
        t = perm[i]
        perm[i] = perm[j]
        perm[j] = t


def shuffle_blocks(n: int) -> int:
    """The blocks a shuffle of n rows reserves: one word per swap (TF's ReserveSamples32(n - 1))."""
    return max(int(n) - 1 + 3, 0) // 4


def permutation(key: int, counter: int, n: int) -> np.ndarray:
    """The order TF's RandomShuffle gives n rows (int64 indices), for rows fewer than 2**32."""
    perm = np.arange(int(n), dtype=np.int64)
    if n > 1:
        _shuffle(*_split_key(key), *_split_counter(counter), perm)
    return perm


class PhiloxWords:
    """The stream's uint32 words one at a time, as TF's SingleSampleAdapter<PhiloxRandom> hands them
    out (tf.data's shuffle buffer and seed generators): generated 64 blocks ahead."""

    __slots__ = ("key", "counter", "_words", "_i")

    def __init__(self, seed: int, seed2: int):
        self.key, self.counter = seeds_to_key_counter(seed, seed2)
        self._words: list = []
        self._i = 0

    @classmethod
    def at(cls, key: int, counter: int) -> "PhiloxWords":
        """The words from block `counter` of key `key` on (a run's reserved blocks)."""
        w = cls(0, 0)
        w.key, w.counter = key, counter
        return w

    def double(self) -> float:
        """SimplePhilox::RandDouble: [0, 1) from the next two words (52 mantissa bits)."""
        x0 = self()
        return (((x0 & 0xFFFFF) << 32) | self()) * 2.0 ** -52

    def rand64(self) -> int:
        """SimplePhilox::Rand64: the next two words, the second the high half."""
        lo = self()
        return (self() << 32) | lo

    def __call__(self) -> int:
        if self._i == len(self._words):
            self._words = philox_blocks_numpy(self.key, self.counter, 64).reshape(-1).tolist()
            self.counter += 64
            self._i = 0
        w = self._words[self._i]
        self._i += 1
        return w


# -- seeds -----------------------------------------------------------------------------------------
def seeds_to_key_counter(seed: int, seed2: int) -> tuple[int, int]:
    """A stateful op's (key, counter) from its attrs: the key is `seed`, the counter's high 64 bits
    `seed2` (both as unsigned 64-bit patterns), as TF's PhiloxRandom(seed, seed2)."""
    return seed & 0xFFFFFFFFFFFFFFFF, (seed2 & 0xFFFFFFFFFFFFFFFF) << 64


_STATELESS_KEY = (0x3EC8F720, 0x02461E29)


def stateless_key_counter(seed0: int, seed1: int) -> tuple[int, int]:
    """A stateless op's (key, counter) from its [2] seed tensor: the seeds, as a counter, go through
    one Philox block under a fixed key; its words give the key and the counter's high half."""
    s0, s1 = seed0 & 0xFFFFFFFFFFFFFFFF, seed1 & 0xFFFFFFFFFFFFFFFF
    mix = philox_blocks_numpy(_STATELESS_KEY[0] | (_STATELESS_KEY[1] << 32), s0 | (s1 << 64), 1)[0]
    key = int(mix[0]) | (int(mix[1]) << 32)
    counter = (int(mix[2]) | (int(mix[3]) << 32)) << 64
    return key, counter


class PhiloxStream:
    """One stateful op's generator: its key and a counter that moves on by 256 blocks per output
    element each run, so successive runs never share blocks (TF's GuardedPhiloxRandom)."""

    __slots__ = ("key", "counter", "_lock")

    def __init__(self, key: int, counter: int):
        self.key, self.counter = key, counter
        self._lock = threading.Lock()   # concurrent steps may run the same kernel on two threads

    def reserve(self, n_outputs: int) -> int:
        """The counter this run starts at; later runs start past its reserved blocks."""
        return self.reserve_blocks(int(n_outputs) * RESERVED_BLOCKS_PER_OUTPUT)

    def reserve_blocks(self, n_blocks: int) -> int:
        """The counter this run starts at, the stream moved on by `n_blocks`."""
        with self._lock:
            start = self.counter
            self.counter = (start + int(n_blocks)) & _MASK128
        return start
