"""CPU kernels of the set ops (graph/ops/set_ops.py): each set a Python set of a row's values,
the results sorted per set and packed as (indices, values, dense_shape)."""
from __future__ import annotations

import numpy as np

from actorflow.kernels.registry import register_kernel


def _dense_groups(x):
    x = np.asarray(x)
    if x.ndim < 2:
        raise ValueError(f"a dense set must have rank at least 2, got shape {list(x.shape)}")
    lead = x.shape[:-1]
    rows = x.reshape(-1, x.shape[-1])
    return list(lead), {idx: set(rows[k].tolist()) for k, idx in enumerate(np.ndindex(*lead))}


def _sparse_groups(indices, values, shape, validate):
    indices, values, shape = np.asarray(indices), np.asarray(values), np.asarray(shape).reshape(-1)
    if shape.size < 2:
        raise ValueError(f"a sparse set must have rank at least 2, got dense_shape {shape.tolist()}")
    if indices.shape[0] != values.shape[0]:
        raise ValueError(f"a sparse set has {indices.shape[0]} indices but {values.shape[0]} values")
    if validate and len(indices):
        if np.any(indices < 0) or np.any(indices >= shape):
            bad = int(np.flatnonzero(np.any((indices < 0) | (indices >= shape), axis=1))[0])
            raise ValueError(f"sparse set index {indices[bad].tolist()} is out of bounds of dense_shape "
                             f"{shape.tolist()}")
        keys = [tuple(r) for r in indices.tolist()]
        for k in range(1, len(keys)):
            if keys[k] <= keys[k - 1]:
                raise ValueError(f"sparse set indices are out of order: {list(keys[k - 1])} then {list(keys[k])} "
                                 "(reorder them with tf.sparse.reorder)")
    groups: dict = {}
    vals = values.tolist()
    for row, v in zip(indices[:, :-1].tolist(), vals):
        groups.setdefault(tuple(row), set()).add(v)
    return [int(d) for d in shape[:-1]], groups


def _pack(lead, sets, dtype):
    keys = sorted(k for k, s in sets.items() if s)
    width = max((len(sets[k]) for k in keys), default=0)
    idx, vals = [], []
    for k in keys:
        for j, v in enumerate(sorted(sets[k])):
            idx.append(list(k) + [j])
            vals.append(v)
    rank = len(lead) + 1
    indices = np.array(idx, dtype=np.int64).reshape(len(idx), rank)
    if dtype.kind == "O":
        values = np.empty(len(vals), dtype=object)
        values[:] = vals
    else:
        values = np.array(vals, dtype=dtype).reshape(len(vals))
    return indices, values, np.array(lead + [width], dtype=np.int64)


def _combine(lead_a, ga, lead_b, gb, op, dtype):
    if lead_a != lead_b:
        raise ValueError(f"the sets' leading shapes differ: {lead_a} and {lead_b}")
    out = {}
    for k in set(ga) | set(gb):
        a, b = ga.get(k, set()), gb.get(k, set())
        out[k] = {"a-b": a - b, "b-a": b - a, "intersection": a & b, "union": a | b}[op]
    return _pack(lead_a, out, dtype)


@register_kernel("SetSize", "CPU")
def set_size_kernel(attrs):
    """The number of distinct values per set: int32 of shape dense_shape[:-1]."""
    validate = bool(attrs.get("validate_indices", True))

    def fn(indices, values, shape):
        lead, groups = _sparse_groups(indices, values, shape, validate)
        out = np.zeros(lead, dtype=np.int32)
        for k, s in groups.items():
            out[k] = len(s)
        return out
    return fn


@register_kernel("DenseToDenseSetOperation", "CPU")
def dense_dense_kernel(attrs):
    op = attrs["set_operation"]

    def fn(a, b):
        (la, ga), (lb, gb) = _dense_groups(a), _dense_groups(b)
        return _combine(la, ga, lb, gb, op, np.asarray(a).dtype)
    return fn


@register_kernel("DenseToSparseSetOperation", "CPU")
def dense_sparse_kernel(attrs):
    op, validate = attrs["set_operation"], bool(attrs.get("validate_indices", True))

    def fn(a, bi, bv, bs):
        (la, ga), (lb, gb) = _dense_groups(a), _sparse_groups(bi, bv, bs, validate)
        return _combine(la, ga, lb, gb, op, np.asarray(a).dtype)
    return fn


@register_kernel("SparseToSparseSetOperation", "CPU")
def sparse_sparse_kernel(attrs):
    op, validate = attrs["set_operation"], bool(attrs.get("validate_indices", True))

    def fn(ai, av, as_, bi, bv, bs):
        (la, ga), (lb, gb) = _sparse_groups(ai, av, as_, validate), _sparse_groups(bi, bv, bs, validate)
        return _combine(la, ga, lb, gb, op, np.asarray(av).dtype)
    return fn
