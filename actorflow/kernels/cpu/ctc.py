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


@register_kernel("CTCGreedyDecoder", "CPU", releases_gil=True)
def ctc_greedy_decoder(attrs):
    """tf.raw_ops.CTCGreedyDecoder: the best class of each frame, blanks dropped (and repeats merged
    when `merge_repeated`); log_probability [batch, 1] is minus the sum of each frame's largest logit, as TF."""
    merge = bool(attrs.get("merge_repeated", True))
    blank_attr = int(attrs.get("blank_index", -1))

    def fn(inputs, sequence_length):
        x = np.asarray(inputs)
        if x.ndim != 3:
            raise InvalidArgumentError(f"CTCGreedyDecoder: inputs must be 3-D [max_time, batch, num_classes], got "
                                       f"{list(x.shape)}")
        T, B, C = x.shape
        seq = _check_seq(sequence_length, B, T, "CTCGreedyDecoder")
        blank = blank_attr + C if blank_attr < 0 else blank_attr
        if not 0 <= blank < C:
            raise InvalidArgumentError(f"CTCGreedyDecoder: blank_index {blank_attr} is outside [-{C}, {C})")
        best = x.argmax(axis=2) if C else np.zeros((T, B), np.int64)
        logp = np.zeros((B, 1), x.dtype)
        seqs = []
        for b in range(B):
            n = int(seq[b])
            logp[b, 0] = -x[:n, b].max(axis=1).sum() if n else 0
            out, prev = [], -1
            for c in best[:n, b].tolist():
                if c != blank and not (merge and c == prev):
                    out.append(c)
                prev = c
            seqs.append(out)
        return (*_to_sparse(seqs), logp)
    return fn


def _check_seq(sequence_length, B, T, op):
    seq = np.asarray(sequence_length).reshape(-1)
    if seq.shape != (B,):
        raise InvalidArgumentError(f"{op}: len(sequence_length) != batch_size: {seq.size} vs. {B}")
    if seq.size and (seq.min() < 0 or seq.max() > T):
        raise InvalidArgumentError(f"{op}: sequence_length {seq.tolist()} must lie in [0, max_time = {T}]")
    return seq


def _to_sparse(seqs):
    idx = np.array([[b, i] for b, s in enumerate(seqs) for i in range(len(s))], np.int64).reshape(-1, 2)
    vals = np.array([v for s in seqs for v in s], np.int64)
    shape = np.array([len(seqs), max((len(s) for s in seqs), default=0)], np.int64)
    return idx, vals, shape


class _Beam:
    """A node of TF's beam tree (ctc_beam_entry.h): a prefix, its probabilities at the previous
    (old) and the current (new) frame, each split into ending in a blank or in its label."""
    __slots__ = ("parent", "label", "children", "old", "new")

    def __init__(self, parent, label):
        self.parent, self.label, self.children = parent, label, {}
        self.old = [_NEG_INF, _NEG_INF, _NEG_INF]     # total, blank, label
        self.new = [_NEG_INF, _NEG_INF, _NEG_INF]

    def active(self):
        return self.new[0] != _NEG_INF

    def labels(self, merge):
        out, prev, c = [], -1, self
        while c.parent is not None:
            if not merge or c.label != prev:
                out.append(c.label)
            prev, c = c.label, c.parent
        return out[::-1]


def _beam_search(frames, beam_width, blank):
    """TF's CTCBeamSearchDecoder::Step over the frames [n, C] of one sequence, in the frames'
    precision (its log-sum-exp's inner terms in single precision, as TF's), with its default
    scorer (no language model); returns the leaves."""
    _F32 = frames.dtype.type
    f32 = np.float32

    def _lse32(a, b):
        if a == _NEG_INF:
            return b
        if b == _NEG_INF:
            return a
        hi, lo = (a, b) if a > b else (b, a)
        return _F32(hi + _F32(f32(math.log1p(f32(math.exp(f32(lo - hi)))))))

    root = _Beam(None, -1)
    root.new = [_F32(0.0), _F32(0.0), _NEG_INF]
    leaves = [root]
    C = frames.shape[1]
    order = [c for c in range(C) if c != blank]

    bot = [None]                    # the lowest leaf, cached while the leaves do not change

    def bottom():
        if bot[0] is None:
            bot[0] = min(leaves, key=lambda e: e.new[0])
        return bot[0]

    def candidate(total):
        return total > _NEG_INF and (len(leaves) < beam_width or total > bottom().new[0])

    for row in frames:
        # TF's kernel steps over each frame's log-softmax (in float), so that the scores are log
        # probabilities of the label sequences.
        row = row - row.max()
        row = row - np.log(np.exp(row).sum())
        mx = _F32(0.0)
        branches = sorted(leaves, key=lambda e: -e.new[0])
        leaves = []
        bot[0] = None
        for e in branches:
            e.old = list(e.new)
        for e in branches:
            if e.parent is not None:
                if e.parent.active():
                    prev = e.parent.old[1] if e.label == e.parent.label else e.parent.old[0]
                    e.new[2] = _lse32(e.new[2], prev)
                e.new[2] = _F32(e.new[2] + _F32(row[e.label] - mx))
            e.new[1] = _F32(e.old[0] + _F32(row[blank] - mx))
            e.new[0] = _lse32(e.new[1], e.new[2])
            leaves.append(e)
        bot[0] = None
        for e in branches:
            if not candidate(e.old[0]):
                continue
            for lab in order:
                c = e.children.get(lab)
                if c is None:
                    c = e.children[lab] = _Beam(e, lab)
                if c.active():
                    continue
                prev = e.old[1] if lab == e.label else e.old[0]
                c.new = [_NEG_INF, _NEG_INF, _F32(_F32(row[lab] - mx) + prev)]
                c.new[0] = c.new[2]
                if candidate(c.new[0]):
                    if len(leaves) == beam_width:
                        b = bottom()
                        b.new = [_NEG_INF, _NEG_INF, _NEG_INF]
                        leaves.remove(b)
                    leaves.append(c)
                    bot[0] = None
                else:
                    c.old = [_NEG_INF, _NEG_INF, _NEG_INF]
                    c.new = [_NEG_INF, _NEG_INF, _NEG_INF]
    return leaves


@register_kernel("CTCBeamSearchDecoder", "CPU", releases_gil=False)
def ctc_beam_search_decoder(attrs):
    """tf.raw_ops.CTCBeamSearchDecoder: TF's prefix beam search (the blank is the last class), the
    `top_paths` best prefixes per sequence and their log probabilities [batch, top_paths]."""
    beam_width = int(attrs.get("beam_width", 100))
    top_paths = int(attrs.get("top_paths", 1))
    merge = bool(attrs.get("merge_repeated", True))

    def fn(inputs, sequence_length):
        x = np.asarray(inputs)
        if x.ndim != 3:
            raise InvalidArgumentError(f"CTCBeamSearchDecoder: inputs must be 3-D [max_time, batch, num_classes], "
                                       f"got {list(x.shape)}")
        T, B, C = x.shape
        seq = _check_seq(sequence_length, B, T, "CTCBeamSearchDecoder")
        if top_paths > beam_width:
            raise InvalidArgumentError(f"CTCBeamSearchDecoder: requested more paths ({top_paths}) than the beam width "
                                       f"({beam_width})")
        paths = [[] for _ in range(top_paths)]
        logp = np.zeros((B, top_paths), x.dtype)
        for b in range(B):
            leaves = _beam_search(x[: int(seq[b]), b], beam_width, C - 1)
            if len(leaves) < top_paths:
                raise InvalidArgumentError(f"CTCBeamSearchDecoder: less leaves in the beam search ({len(leaves)}) than "
                                           f"requested ({top_paths}) in batch {b}")
            best = sorted(leaves, key=lambda e: -e.new[0])[:top_paths]
            for p, e in enumerate(best):
                paths[p].append(e.labels(merge))
                logp[b, p] = e.new[0]
        outs = [_to_sparse(p) for p in paths]
        return (*[o[0] for o in outs], *[o[1] for o in outs], *[o[2] for o in outs], logp)
    return fn
