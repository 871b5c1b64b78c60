"""CPU kernels of graph/ops/hash_ops.py: the legacy and strong string buckets and Fingerprint."""
from __future__ import annotations

import numpy as np

from actorflow.kernels.cpu.farmhash import fingerprint64
from actorflow.kernels.cpu.string_hashes import hash64, siphash24
from actorflow.kernels.registry import register_kernel


def _per_string(fn):
    def apply(x):
        x = np.asarray(x, dtype=object)
        return np.array([fn(s) for s in x.reshape(-1)], dtype=np.int64).reshape(x.shape)
    return apply


@register_kernel("StringToHashBucket", "CPU")
def hash_bucket_kernel(attrs):
    """Hash64(s) mod num_buckets."""
    n = int(attrs["num_buckets"])
    return _per_string(lambda s: hash64(s) % n)


@register_kernel("StringToHashBucketStrong", "CPU")
def hash_bucket_strong_kernel(attrs):
    """SipHash-2-4(key, s) mod num_buckets."""
    n = int(attrs["num_buckets"])
    k0, k1 = (int(k) for k in attrs["key"])
    return _per_string(lambda s: siphash24(k0, k1, s) % n)


def _fp(b: bytes) -> bytes:
    return fingerprint64(b).to_bytes(8, "little")


@register_kernel("Fingerprint", "CPU")
def fingerprint_kernel(attrs):
    """Fingerprint64 per row: of its bytes (numeric), its one string, or its strings' fingerprints."""
    def fn(data, method):
        method = method.item() if isinstance(method, np.ndarray) else method
        if method != b"farmhash64":
            raise ValueError(f"Fingerprint: unsupported fingerprint method {method!r}; only b'farmhash64'")
        data = np.asarray(data)
        if data.ndim == 0:
            raise ValueError("Fingerprint: data must have rank at least one, got a scalar")
        rows = data.shape[0]
        flat = data.reshape(rows, -1)
        if data.dtype == object:
            if flat.shape[1] == 1:
                out = [_fp(r[0]) for r in flat]
            else:
                out = [_fp(b"".join(_fp(s) for s in r)) for r in flat]
        else:
            flat = np.ascontiguousarray(flat)
            out = [_fp(r.tobytes()) for r in flat]
        return np.frombuffer(b"".join(out), dtype=np.uint8).reshape(rows, 8).copy()
    return fn
