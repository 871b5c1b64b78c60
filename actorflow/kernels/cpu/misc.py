"""EnsureShape, ReverseSequence, ListDiff, UnravelIndex and Qr (graph/ops/misc_ops.py)."""
from __future__ import annotations

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel


@register_kernel("EnsureShape", "CPU")
def _ensure_shape(attrs):
    want = attrs["shape"]

    def fn(x):
        shape = np.shape(x)
        if want is not None and (len(want) != len(shape) or any(w >= 0 and w != s for w, s in zip(want, shape))):
            spec = "[" + ",".join("?" if w < 0 else str(w) for w in want) + "]"
            raise InvalidArgumentError(f"EnsureShape: Shape of tensor x {list(shape)} is not compatible with "
                                       f"expected shape {spec}.")
        return x
    return fn


@register_kernel("ReverseSequence", "CPU")
def _reverse_sequence(attrs):
    seq, batch = int(attrs["seq_dim"]), int(attrs["batch_dim"])

    def fn(x, lengths):
        x = np.asarray(x)
        lens = np.asarray(lengths).reshape(-1)
        if lens.shape[0] != x.shape[batch]:
            raise InvalidArgumentError(f"ReverseSequence: Length of seq_lengths != input.dims({batch}), "
                                       f"({lens.shape[0]} vs. {x.shape[batch]})")
        if (lens < 0).any() or (lens > x.shape[seq]).any():
            bad = int(np.nonzero((lens < 0) | (lens > x.shape[seq]))[0][0])
            raise InvalidArgumentError(f"ReverseSequence: seq_lens({bad}) > input.dims({seq}): {int(lens[bad])} "
                                       f"vs. {x.shape[seq]}")
        out = x.copy()
        xs = np.moveaxis(x, (batch, seq), (0, 1))
        os_ = np.moveaxis(out, (batch, seq), (0, 1))
        for b, n in enumerate(lens):
            n = int(n)
            if n > 1:
                os_[b, :n] = xs[b, :n][::-1]
        return out
    return fn


@register_kernel("ListDiff", "CPU")
def _list_diff(attrs):
    out_idx = np.dtype(attrs.get("out_idx", np.int32))

    def fn(x, y):
        x, y = np.asarray(x).reshape(-1), np.asarray(y).reshape(-1)
        keep = ~np.isin(x, y) if x.dtype != object else np.array([v not in set(y.tolist()) for v in x], bool)
        idx = np.nonzero(keep)[0].astype(out_idx)
        return x[keep], idx
    return fn


@register_kernel("UnravelIndex", "CPU")
def _unravel_index(attrs):
    def fn(indices, dims):
        idx, d = np.asarray(indices), [int(v) for v in np.asarray(dims).reshape(-1)]
        total = int(np.prod(d)) if d else 1
        if (idx < 0).any() or (idx >= total).any():
            raise InvalidArgumentError(f"UnravelIndex: index out of bounds for dims {d}: {idx.tolist()}")
        return np.stack(np.unravel_index(idx, d)).astype(idx.dtype)
    return fn


@register_kernel("Qr", "CPU")
def _qr(attrs):
    mode = "complete" if attrs.get("full_matrices") else "reduced"

    def fn(x):
        x = np.asarray(x)
        if x.ndim < 2:
            raise InvalidArgumentError(f"Qr: input must be at least rank 2, got shape {list(x.shape)}")
        q, r = np.linalg.qr(x, mode=mode)
        return q.astype(x.dtype), r.astype(x.dtype)
    return fn


register_kernel("GuaranteeConst", "CPU")(lambda attrs: lambda x: x)


@register_kernel("Timestamp", "CPU")
def _timestamp(attrs):
    import time
    return lambda: np.float64(time.time())
