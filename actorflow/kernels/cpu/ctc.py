"""CPU kernels for the CTC ops (graph/ops/ctc_ops.py): CTCLoss (the forward-backward algorithm in
log space, one batch entry at a time, as TF's ctc_loss_calculator.cc), CTCGreedyDecoder and
CTCBeamSearchDecoder."""
from __future__ import annotations

import math

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.lazy_numba import njit
from actorflow.kernels.registry import register_kernel

_NEG_INF = -np.inf


@njit(cache=True, nogil=True)
def _lse(a, b):
    # TF's LogSumExp (ctc_loss_util.h) takes log1pf(expf(.)) in single precision whatever T is;
    # the same rounding here keeps float64 losses equal to TF's to ~1e-15 rather than ~1e-8.
    if a == -np.inf:
        return b
    if b == -np.inf:
        return a
    if a > b:
        return a + np.float32(math.log1p(np.float32(math.exp(np.float32(b - a)))))
    return b + np.float32(math.log1p(np.float32(math.exp(np.float32(a - b)))))


@njit(cache=True, nogil=True)
def _ctc_one(logits, labels, blank, merge, grad):
    """-log p(labels | logits) for one sequence (logits [T, C], float64), writing d loss / d logits
    (softmax minus the state posteriors) into `grad` [T, C]. TF's recurrences: alpha includes the
    frame's own emission, beta does not; without `merge` a label state does not repeat itself and
    may follow an equal label directly."""
    T, C = logits.shape
    L = labels.shape[0]
    U = 2 * L + 1
    y = np.empty((T, C))
    ly = np.empty((T, C))
    for t in range(T):              # TF: softmax by exp and divide, then log of it
        m = logits[t, 0]
        for c in range(1, C):
            m = max(m, logits[t, c])
        s = 0.0
        for c in range(C):
            y[t, c] = math.exp(logits[t, c] - m)
            s += y[t, c]
        for c in range(C):
            y[t, c] /= s
            ly[t, c] = math.log(y[t, c])
    lp = np.empty(U, np.int64)
    for u in range(U):
        lp[u] = blank if u % 2 == 0 else labels[u // 2]
    alpha = np.full((T, U), -np.inf)
    beta = np.full((T, U), -np.inf)
    alpha[0, 0] = ly[0, blank]
    if U > 1:
        alpha[0, 1] = ly[0, lp[1]]
    for t in range(1, T):
        start = max(0, U - 2 * (T - t))
        end = min(U, 2 * (t + 1))
        for u in range(start, end):
            v = alpha[t - 1, u] if merge or lp[u] == blank else -np.inf
            if u > 0:
                v = _lse(v, alpha[t - 1, u - 1])
            if u > 1 and lp[u] != blank and not (merge and lp[u - 2] == lp[u]):
                v = _lse(v, alpha[t - 1, u - 2])
            alpha[t, u] = v + ly[t, lp[u]]
    beta[T - 1, U - 1] = 0.0
    if U > 1:
        beta[T - 1, U - 2] = 0.0
    for t in range(T - 2, -1, -1):
        start = max(0, U - 2 * (T - t))
        end = min(U, 2 * (t + 1))
        for u in range(start, end):
            v = beta[t + 1, u] + ly[t + 1, lp[u]] if merge or lp[u] == blank else -np.inf
            if u + 1 < U:
                v = _lse(v, beta[t + 1, u + 1] + ly[t + 1, lp[u + 1]])
            if u + 2 < U and lp[u] != blank and not (merge and lp[u] == lp[u + 2]):
                v = _lse(v, beta[t + 1, u + 2] + ly[t + 1, lp[u + 2]])
            beta[t, u] = v
    logp = -np.inf
    for u in range(U):
        logp = _lse(logp, alpha[0, u] + beta[0, u])
    if logp == -np.inf:             # no valid path: TF's gradient is the softmax
        grad[:, :] = y
        return np.inf
    post = np.empty(C)
    for t in range(T):
        for c in range(C):
            post[c] = -np.inf
        for u in range(U):
            post[lp[u]] = _lse(post[lp[u]], alpha[t, u] + beta[t, u])
        for c in range(C):
            grad[t, c] = y[t, c] - np.float32(math.exp(np.float32(post[c] - logp)))     # TF: expf
    return -logp


def _labels_by_batch(indices, values, batch, op):
    idx, vals = np.asarray(indices, np.int64), np.asarray(values)
    if idx.ndim != 2 or idx.shape[1] != 2 or vals.shape != (idx.shape[0],):
        raise InvalidArgumentError(f"{op}: labels_indices must be a matrix [n, 2] and labels_values a vector [n], got "
                                   f"{list(idx.shape)} and {list(vals.shape)}")
    if idx.size and (idx[:, 0].min() < 0 or idx[:, 0].max() >= batch):
        raise InvalidArgumentError(f"{op}: labels batch index out of range [0, {batch}): {idx[:, 0].tolist()}")
    order = np.lexsort((idx[:, 1], idx[:, 0])) if idx.shape[0] else np.zeros(0, np.int64)
    out = [[] for _ in range(batch)]
    for k in order:
        out[int(idx[k, 0])].append(int(vals[k]))
    return out


@register_kernel("CTCLoss", "CPU", releases_gil=True)
def ctc_loss(attrs):
    """tf.raw_ops.CTCLoss: (loss [batch], gradient [max_time, batch, num_classes])."""
    collapse = bool(attrs.get("preprocess_collapse_repeated", False))
    merge = bool(attrs.get("ctc_merge_repeated", True))
    ignore = bool(attrs.get("ignore_longer_outputs_than_inputs", False))

    def fn(inputs, labels_indices, labels_values, sequence_length):
        x = np.asarray(inputs)
        if x.ndim != 3:
            raise InvalidArgumentError(f"CTCLoss: inputs must be 3-D [max_time, batch, num_classes], got {list(x.shape)}")
        T, B, C = x.shape
        seq = np.asarray(sequence_length).reshape(-1)
        if seq.shape != (B,):
            raise InvalidArgumentError(f"CTCLoss: len(sequence_length) != batch_size: {seq.size} vs. {B}")
        if C < 1:
            raise InvalidArgumentError("CTCLoss: num_classes must be at least 1")
        blank = C - 1
        labels = _labels_by_batch(labels_indices, labels_values, B, "CTCLoss")
        loss = np.zeros(B, x.dtype)
        grad = np.zeros(x.shape, x.dtype)
        xd = x.astype(np.float64)
        for b in range(B):
            n = int(seq[b])
            if n < 0 or n > T:
                raise InvalidArgumentError(f"CTCLoss: sequence_length({b}) = {n} is not in [0, max_time = {T}]")
            raw = labels[b]
            if not raw:
                raise InvalidArgumentError(f"CTCLoss: labels length is zero in batch {b}")
            lab, finished = [], False      # TF: a label >= num_classes - 1 ends the sequence
            for i, v in enumerate(raw):
                if i and collapse and v == raw[i - 1]:
                    continue
                if v >= blank:
                    finished = True
                elif finished:
                    raise InvalidArgumentError(f"CTCLoss: saw a non-null label (index >= num_classes - 1) following a "
                                               f"null label, batch {b}, num_classes {C}, labels {raw}")
                else:
                    lab.append(v)
            if any(v < 0 for v in lab):
                raise InvalidArgumentError(f"CTCLoss: all labels must be nonnegative integers, batch {b}: {lab}")
            if not ignore and len(raw) > n:
                raise InvalidArgumentError(
                    f"CTCLoss: not enough time for target transition sequence (required: {len(raw)}, available: {n}) "
                    f"in batch {b}; ignore_longer_outputs_than_inputs=True turns this error into a zero loss")
            if n == 0 or (ignore and len(raw) > n):
                continue
            g = np.zeros((n, C))
            loss[b] = _ctc_one(np.ascontiguousarray(xd[:n, b]), np.asarray(lab, np.int64), blank, merge, g)
            grad[:n, b] = g
        return loss, grad
    return fn
