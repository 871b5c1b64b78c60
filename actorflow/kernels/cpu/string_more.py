"""Kernels of graph/ops/string_more_ops.py: RegexFullMatch, StaticRegexFullMatch, UnsortedSegmentJoin,
StringNGrams (TF's string_ngrams_op.cc, on the flat values and row splits)."""
from __future__ import annotations

import re

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel


def _text(b) -> str:
    return b.decode("utf-8", "surrogateescape")


def _strings(values, shape) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape)


def _full_match(rx, x):
    x = np.asarray(x, dtype=object)
    return np.array([rx.fullmatch(_text(s)) is not None for s in x.reshape(-1)], dtype=bool).reshape(x.shape)


def _re2_only(items, pattern):
    """Rejects what RE2 (TF's regex engine) lacks and Python's `re` has: look-around, back-references."""
    try:
        from re import _parser as sre_parse  # the stdlib's parser: the one way to see a pattern's structure
    except ImportError:                       # Python < 3.11
        import sre_parse
    for op, av in items:
        if str(op) in ("ASSERT", "ASSERT_NOT", "GROUPREF", "GROUPREF_EXISTS"):
            raise InvalidArgumentError(f"Invalid pattern: {pattern}, error: RE2 syntax has no look-around or "
                                       "back-references")
        for sub in (av if isinstance(av, (list, tuple)) else [av]):
            for s in (sub if isinstance(sub, (list, tuple)) else [sub]):
                if isinstance(s, sre_parse.SubPattern):
                    _re2_only(s, pattern)


def _compile(pattern: str):
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise InvalidArgumentError(f"Invalid pattern: {pattern}, error: {e}") from None
    try:
        from re import _parser as sre_parse
    except ImportError:
        import sre_parse
    _re2_only(sre_parse.parse(pattern), pattern)
    return rx


@register_kernel("StaticRegexFullMatch", "CPU")
def static_regex_full_match_kernel(attrs):
    rx = _compile(attrs["pattern"])
    return lambda x: _full_match(rx, x)


@register_kernel("RegexFullMatch", "CPU")
def regex_full_match_kernel(attrs):
    def run(x, pattern):
        return _full_match(_compile(_text(np.asarray(pattern, dtype=object).reshape(())[()])), x)
    return run


@register_kernel("UnsortedSegmentJoin", "CPU")
def unsorted_segment_join_kernel(attrs):
    sep = attrs.get("separator", "").encode("utf-8", "surrogateescape")

    def run(data, ids, num):
        data = np.asarray(data, dtype=object)
        ids = np.asarray(ids)
        n = int(np.asarray(num))
        if n < 0:
            raise InvalidArgumentError(f"UnsortedSegmentJoin: num_segments must be non-negative, got {n}")
        if data.shape[:ids.ndim] != ids.shape:
            raise InvalidArgumentError(f"UnsortedSegmentJoin: segment_ids shape {list(ids.shape)} is not a prefix "
                                       f"of inputs shape {list(data.shape)}")
        inner = data.shape[ids.ndim:]
        rows = data.reshape((ids.size,) + inner).reshape(ids.size, -1)
        parts = [[[] for _ in range(rows.shape[1])] for _ in range(n)]
        for i, seg in enumerate(ids.reshape(-1)):
            seg = int(seg)
            if not 0 <= seg < n:
                raise InvalidArgumentError(f"UnsortedSegmentJoin: segment_ids are not allowed to exceed "
                                           f"num_segments or to have negative values. (segment_ids[{i}] = {seg}, "
                                           f"num_segments = {n})")
            for j in range(rows.shape[1]):
                parts[seg][j].append(rows[i, j])
        return _strings([sep.join(p) for seg in parts for p in seg], (n,) + inner)
    return run


@register_kernel("StringNGrams", "CPU")
def string_ngrams_kernel(attrs):
    def enc(v):
        return v.encode("utf-8", "surrogateescape")
    sep, left, right = enc(attrs.get("separator", " ")), enc(attrs.get("left_pad", "")), enc(attrs.get("right_pad", ""))
    widths = list(attrs["ngram_widths"])
    pad_attr = int(attrs.get("pad_width", -1))
    preserve = bool(attrs.get("preserve_short_sequences", False))

    def pad_width(w):
        return min(w - 1 if pad_attr < 0 else pad_attr, w - 1)

    def grams(tokens, count, width, out):
        pw = pad_width(width)
        for k in range(count):
            lp = max(0, pw - k)
            rp = max(0, pw - (count - (k + 1)))
            n_tok = width - (lp + rp)
            start = 0 if lp > 0 else k - pw
            pieces = [left] * lp + list(tokens[start:start + n_tok]) + [right] * rp
            out.append(sep.join(pieces))

    def run(data, splits):
        data = np.asarray(data, dtype=object).reshape(-1)
        splits = np.asarray(splits).reshape(-1)
        if splits.size and (splits[0] != 0 or splits[-1] != data.size or np.any(np.diff(splits) < 0)):
            raise InvalidArgumentError(f"StringNGrams: invalid data_splits {splits.tolist()} for {data.size} values")
        out, out_splits = [], [0]
        for r in range(max(0, splits.size - 1)):
            tokens = data[splits[r]:splits[r + 1]]
            before = len(out)
            for w in widths:
                count = max(0, len(tokens) + 2 * pad_width(w) - w + 1)
                grams(tokens, count, w, out)
            if preserve and len(out) == before and len(tokens):
                grams(tokens, 1, len(tokens) + 2 * max(pad_attr, 0), out)
            out_splits.append(len(out))
        return _strings(out, (len(out),)), np.asarray(out_splits, dtype=splits.dtype)
    return run
