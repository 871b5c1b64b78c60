"""The two other string hashes of TensorFlow's bucketing ops, besides FarmHash's Fingerprint64
(farmhash.py):

- `hash64`: TensorFlow's own `Hash64(data, n, seed=0xDECAFCAFFE)` (tensorflow/core/platform/hash.cc,
  a MurmurHash64A), the hash of the legacy `StringToHashBucket`;
- `siphash24`: SipHash-2-4 with a 128-bit key given as two 64-bit words, TF's `StrongKeyedHash`
  (highwayhash's SipHash), the hash of `StringToHashBucketStrong`.

Pure Python on ints masked to 64 bits; the values equal TensorFlow's (tests/fixtures/misc_names.json).
"""
from __future__ import annotations

import struct

__all__ = ["hash64", "siphash24"]

_M = (1 << 64) - 1
_MURMUR = 0xC6A4A7935BD1E995


def hash64(data: bytes, seed: int = 0xDECAFCAFFE) -> int:
    """TensorFlow's Hash64 of `data` (MurmurHash64A with TF's default seed)."""
    n = len(data)
    h = (seed ^ (n * _MURMUR)) & _M
    full = n - n % 8
    for (k,) in struct.iter_unpack("<Q", data[:full]):
        k = (k * _MURMUR) & _M
        k ^= k >> 47
        k = (k * _MURMUR) & _M
        h ^= k
        h = (h * _MURMUR) & _M
    rest = data[full:]
    if rest:
        for i in range(len(rest) - 1, -1, -1):
            h ^= rest[i] << (8 * i)
        h = (h * _MURMUR) & _M
    h ^= h >> 47
    h = (h * _MURMUR) & _M
    h ^= h >> 47
    return h


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _M


def siphash24(key0: int, key1: int, data: bytes) -> int:
    """SipHash-2-4 of `data` under the key (key0, key1) (little-endian words, as highwayhash takes it)."""
    v0 = key0 ^ 0x736F6D6570736575
    v1 = key1 ^ 0x646F72616E646F6D
    v2 = key0 ^ 0x6C7967656E657261
    v3 = key1 ^ 0x7465646279746573

    def rounds(v0, v1, v2, v3, n):
        for _ in range(n):
            v0 = (v0 + v1) & _M
            v1 = _rotl(v1, 13) ^ v0
            v0 = _rotl(v0, 32)
            v2 = (v2 + v3) & _M
            v3 = _rotl(v3, 16) ^ v2
            v0 = (v0 + v3) & _M
            v3 = _rotl(v3, 21) ^ v0
            v2 = (v2 + v1) & _M
            v1 = _rotl(v1, 17) ^ v2
            v2 = _rotl(v2, 32)
        return v0, v1, v2, v3

    n = len(data)
    full = n - n % 8
    for (m,) in struct.iter_unpack("<Q", data[:full]):
        v3 ^= m
        v0, v1, v2, v3 = rounds(v0, v1, v2, v3, 2)
        v0 ^= m
    last = ((n & 0xFF) << 56) | int.from_bytes(data[full:], "little")
    v3 ^= last
    v0, v1, v2, v3 = rounds(v0, v1, v2, v3, 2)
    v0 ^= last
    v2 ^= 0xFF
    v0, v1, v2, v3 = rounds(v0, v1, v2, v3, 4)
    return v0 ^ v1 ^ v2 ^ v3
