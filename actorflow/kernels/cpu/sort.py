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


@register_kernel("TopKV2", "CPU", cost=_sort_cost)
def top_k_kernel(attrs):
    index_type = np.dtype(attrs.get("index_type", np.int32))

    def top_k(x, k):
        x = np.asarray(x)
        k = _scalar_int(k, "TopKV2", "k")
        if k < 0:
            raise InvalidArgumentError(f"TopKV2: Need k >= 0, got {k}")
        if x.ndim < 1:
            raise InvalidArgumentError(f"TopKV2: input must be >= 1-D, got shape {list(x.shape)}")
        n = x.shape[-1]
        if n < k:
            raise InvalidArgumentError(f"TopKV2: input must have at least k columns. Had {n}, needed {k}")
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
            x = np.asarray(x)
            if x.ndim < 1:
                raise InvalidArgumentError(f"{op}: x must be at least 1-D, got a scalar")
            a = _axis(axis, x.ndim, op)
            v = np.flip(x, a) if reverse else x
            out = ufunc.accumulate(v, axis=a, dtype=x.dtype)
            if exclusive and out.shape[a]:
                ident = np.full_like(np.take(out, [0], axis=a), ufunc.identity)
                out = np.concatenate([ident, np.take(out, np.arange(out.shape[a] - 1), axis=a)], axis=a)
            if reverse:
                out = np.flip(out, a)
            return np.ascontiguousarray(out)
        return fn
    register_kernel(op, "CPU")(factory)


_cumulative("Cumsum", np.add)
_cumulative("Cumprod", np.multiply)


@register_kernel("ReverseV2", "CPU")
def reverse_kernel(attrs):
    def reverse(x, axis):
        x = np.asarray(x)
        axes = _int_list(axis, "ReverseV2", "axis")
        r = x.ndim
        seen = set()
        for i, a in enumerate(axes):
            if not -r <= a < r:
                raise InvalidArgumentError(f"ReverseV2: 'axis'[{i}] = {a} is out of valid range [{-r}, {r})")
            if a % r in seen:
                raise InvalidArgumentError(f"ReverseV2: axis {a % r} specified more than once")
            seen.add(a % r)
        if not seen:
            return x
        return np.ascontiguousarray(np.flip(x, tuple(sorted(seen))))
    return reverse


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
