"""CPU kernel for EditDistance (graph/ops/edit_distance_ops.py): the sequences grouped by index
prefix, one Levenshtein dynamic programme (two rows) per prefix."""
from __future__ import annotations

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel


def levenshtein(a, b) -> int:
    """Insertions, deletions and substitutions that turn sequence `a` into `b`."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


def _sequences(indices, values, shape, what):
    """The sequences of one SparseTensor, keyed by index prefix (all but the last index). As in TF's
    kernel, the last index orders nothing and is not checked against the shape: a group's values are
    its sequence in the order given (TF 1.x programs index past the last dimension,
    `tf.SparseTensor([[0, 0, 3]], ..., [1, 1, 1])`); groups are sorted by prefix, stably."""
    idx, vals, shp = np.asarray(indices), np.asarray(values), np.asarray(shape).reshape(-1)
    if idx.ndim != 2 or idx.shape[1] != shp.size or vals.shape != (idx.shape[0],):
        raise InvalidArgumentError(f"EditDistance: {what} indices {list(idx.shape)}, values {list(vals.shape)} and "
                                   f"shape {shp.tolist()} do not form a SparseTensor")
    prefix = idx[:, :-1]
    order = np.lexsort(prefix.T[::-1]) if prefix.size else np.arange(idx.shape[0])
    seqs: dict = {}
    for k in order:
        seqs.setdefault(tuple(int(v) for v in prefix[k]), []).append(vals[k])
    return seqs, shp


@register_kernel("EditDistance", "CPU", releases_gil=False)
def edit_distance(attrs):
    """tf.raw_ops.EditDistance."""
    normalize = bool(attrs.get("normalize", True))

    def fn(hypothesis_indices, hypothesis_values, hypothesis_shape, truth_indices, truth_values, truth_shape):
        hyp, hs = _sequences(hypothesis_indices, hypothesis_values, hypothesis_shape, "hypothesis")
        tru, ts = _sequences(truth_indices, truth_values, truth_shape, "truth")
        if hs.size != ts.size:
            raise InvalidArgumentError(f"EditDistance: hypothesis and truth must have the same rank, got shapes "
                                       f"{hs.tolist()} and {ts.tolist()}")
        out_shape = np.maximum(hs, ts)[:-1]
        for what, seqs in (("hypothesis", hyp), ("truth", tru)):
            bad = [k for k in seqs if any(i < 0 or i >= n for i, n in zip(k, out_shape))]
            if bad:
                raise InvalidArgumentError(f"EditDistance: {what} index prefix {list(bad[0])} lies outside the "
                                           f"output shape {out_shape.tolist()}")
        out = np.zeros(out_shape, np.float32)
        for key in set(hyp) | set(tru):
            a, b = hyp.get(key, []), tru.get(key, [])
            d = float(levenshtein(a, b))
            if normalize:
                d = d / len(b) if b else (np.inf if a else 0.0)
            out[key] = d
        return out
    return fn
