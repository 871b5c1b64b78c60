"""CPU kernels of the ordering ops: TopKV2, Cumsum, Cumprod, ReverseV2, Unique, UniqueWithCounts.

All numpy: a stable sort, cumsum/cumprod and flips already run in compiled loops. Bad arguments
raise InvalidArgumentError naming the op, with TF's wording where TF has one.
"""
from __future__ import annotations

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.cpu.array import _axis, _contiguous, _int_list
from actorflow.kernels.registry import register_kernel


def _scalar_int(v, op: str, what: str) -> int:
    a = np.asarray(v)
    if a.ndim != 0 or a.dtype.kind not in "iu":
        raise InvalidArgumentError(f"{op}: {what} must be an integer scalar, got {a.dtype.name} of shape "
                                   f"{list(a.shape)}")
    return int(a)


def _sort_cost(x, *rest) -> int:
    """A sort of every row: n log2(row length) comparisons."""
    row = np.shape(x)[-1] if np.ndim(x) else 1
    return max(int(np.size(x)), 1) * max(int(row).bit_length(), 1)


def check_top_k(shape, k) -> int:
    """TopKV2's argument checks (shared with the GPU kernel); returns k as an int."""
    k = _scalar_int(k, "TopKV2", "k")
    if k < 0:
        raise InvalidArgumentError(f"TopKV2: Need k >= 0, got {k}")
    if len(shape) < 1:
        raise InvalidArgumentError(f"TopKV2: input must be >= 1-D, got shape {list(shape)}")
    if shape[-1] < k:
        raise InvalidArgumentError(f"TopKV2: input must have at least k columns. Had {shape[-1]}, needed {k}")
    return k


@register_kernel("TopKV2", "CPU", cost=_sort_cost)
def top_k_kernel(attrs):
    index_type = np.dtype(attrs.get("index_type", np.int32))

    def top_k(x, k):
        x = np.asarray(x)
        k = check_top_k(x.shape, k)
        n = x.shape[-1]
        if 0 < 4 * k <= n and n >= 64 and not (x.dtype.kind == "f" and np.isnan(x).any()):
            idx = _top_k_partial(x, k)
        else:
            idx = _descending_order(x)[..., :k]
        values = np.take_along_axis(x, idx, axis=-1)
        return _contiguous(values), idx.astype(index_type)
    return top_k


def _descending_order(x):
    """The indices that sort each row of `x` in descending order, equal values by index: a stable
    ascending sort of the reversed row, read backwards, lists ties by increasing original index."""
    n = x.shape[-1]
    return (n - 1) - np.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1]


def _top_k_partial(x, k):
    """top_k's indices for k much smaller than the row (about 4x faster than a full sort at
    30,000 x 10): select each row's k-th largest value t with a partition, keep the entries above
    t and the first entries equal to t (lowest indices, as TF) to make k, then sort those k.
    Needs no NaN (every row then has exactly k kept)."""
    n = x.shape[-1]
    flat = x.reshape(-1, n)
    t = np.partition(flat, n - k, axis=-1)[:, n - k:n - k + 1]
    above = flat > t
    need = k - above.sum(-1, keepdims=True)
    equal = flat == t
    keep = above | (equal & (np.cumsum(equal, axis=-1) <= need))
    cand = np.nonzero(keep)[1].reshape(-1, k)          # row-major: each row's k, by index
    order = _descending_order(np.take_along_axis(flat, cand, -1))
    return np.take_along_axis(cand, order, -1).reshape(x.shape[:-1] + (k,))


def _cumulative(op: str, ufunc):
    def factory(attrs):
        exclusive, reverse = bool(attrs.get("exclusive", False)), bool(attrs.get("reverse", False))

        def fn(x, axis):
            return cumulative(np, op, ufunc.accumulate, ufunc.identity, np.asarray(x), axis, exclusive, reverse)
        return fn
    register_kernel(op, "CPU")(factory)


def cumulative(xp, op: str, accumulate, identity, x, axis, exclusive: bool, reverse: bool):
    """Cumsum/Cumprod on numpy or CuPy (`xp`): `accumulate(v, axis=, dtype=)` along the axis, from
    the end when `reverse`, shifted by one (`identity` first) when `exclusive`."""
    if x.ndim < 1:
        raise InvalidArgumentError(f"{op}: x must be at least 1-D, got a scalar")
    a = _axis(axis, x.ndim, op)
    v = xp.flip(x, a) if reverse else x
    out = accumulate(v, axis=a, dtype=x.dtype)
    if exclusive and out.shape[a]:
        head = [slice(None)] * x.ndim
        head[a] = slice(0, 1)
        body = list(head)
        body[a] = slice(0, out.shape[a] - 1)
        out = xp.concatenate([xp.full_like(out[tuple(head)], identity), out[tuple(body)]], axis=a)
    if reverse:
        out = xp.flip(out, a)
    return xp.ascontiguousarray(out)


_cumulative("Cumsum", np.add)
_cumulative("Cumprod", np.multiply)
_cumulative("CumulativeLogsumexp", np.logaddexp)


@register_kernel("ReverseV2", "CPU")
def reverse_kernel(attrs):
    def reverse(x, axis):
        x = np.asarray(x)
        axes = reverse_axes(axis, x.ndim)
        return np.ascontiguousarray(np.flip(x, axes)) if axes else x
    return reverse


def reverse_axes(axis, rank: int) -> tuple:
    """ReverseV2's axes, checked (in range, none twice) and made non-negative (shared with the GPU)."""
    seen = []
    for i, a in enumerate(_int_list(axis, "ReverseV2", "axis")):
        if not -rank <= a < rank:
            raise InvalidArgumentError(f"ReverseV2: 'axis'[{i}] = {a} is out of valid range [{-rank}, {rank})")
        if a % rank in seen:
            raise InvalidArgumentError(f"ReverseV2: axis {a % rank} specified more than once")
        seen.append(a % rank)
    return tuple(sorted(seen))


def _unique(op: str, x, out_idx):
    x = np.asarray(x)
    if x.ndim != 1:
        raise InvalidArgumentError(f"{op}: x must be a vector, got shape {list(x.shape)}")
    if x.size == 0:
        return x.copy(), np.zeros(0, out_idx), np.zeros(0, out_idx)
    # np.unique sorts; reorder its values by their first occurrence, as TF lists them.
    vals, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return vals[order], rank[inverse.reshape(-1)].astype(out_idx), counts[order].astype(out_idx)


@register_kernel("Unique", "CPU")
def unique_kernel(attrs):
    out_idx = np.dtype(attrs.get("out_idx", np.int32))

    def unique(x):
        y, idx, _ = _unique("Unique", x, out_idx)
        return y, idx
    return unique


@register_kernel("UniqueWithCounts", "CPU")
def unique_with_counts_kernel(attrs):
    out_idx = np.dtype(attrs.get("out_idx", np.int32))
    return lambda x: _unique("UniqueWithCounts", x, out_idx)


def _bound(op, side):
    def factory(attrs):
        out = np.dtype(attrs.get("out_type", np.int32))

        def fn(sorted_sequence, values):
            seq, vals = np.asarray(sorted_sequence), np.asarray(values)
            if seq.ndim < 1 or vals.ndim < 1 or seq.shape[:-1] != vals.shape[:-1]:
                raise InvalidArgumentError(f"{op}: sorted_sequence {list(seq.shape)} and values {list(vals.shape)} "
                                           "must have the same leading dimensions and rank at least 1")
            if seq.shape[-1] > np.iinfo(out).max:
                raise InvalidArgumentError(f"{op}: sorted_sequence's last dimension {seq.shape[-1]} does not fit "
                                           f"out_type {out}")
            s2, v2 = seq.reshape(-1, seq.shape[-1]), vals.reshape(-1, vals.shape[-1])
            res = np.empty(v2.shape, out)
            for i in range(s2.shape[0]):
                res[i] = np.searchsorted(s2[i], v2[i], side=side)
            return res.reshape(vals.shape)
        return fn
    return factory


register_kernel("LowerBound", "CPU")(_bound("LowerBound", "left"))
register_kernel("UpperBound", "CPU")(_bound("UpperBound", "right"))
