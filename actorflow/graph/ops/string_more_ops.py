"""More of tf.strings on dense tensors: regex_full_match (ops RegexFullMatch, StaticRegexFullMatch),
unsorted_segment_join (UnsortedSegmentJoin) and ngrams (StringNGrams over the rows of a dense
tensor; actorflow has no RaggedTensor). Not differentiable."""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.constant import constant
from actorflow.graph.ops.infer import constant_value
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["ngrams", "regex_full_match", "unsorted_segment_join"]


def _need_string(t, op, what="input"):
    if not t.dtype.is_string:
        raise InferenceError(f"{op}: {what} must be a string tensor, got {t.dtype.name} ('{t.name}')")


def _infer_regex_full_match(inputs, attrs):
    _need_string(inputs[0], "RegexFullMatch")
    if len(inputs) > 1:
        _need_string(inputs[1], "RegexFullMatch", "pattern")
        if inputs[1].shape.ndims not in (None, 0):
            raise InferenceError(f"RegexFullMatch: pattern must be a scalar, got shape {inputs[1].shape}")
    return [(dtypes.bool_, inputs[0].shape)]


def _infer_segment_join(inputs, attrs):
    data, ids, num = inputs
    _need_string(data, "UnsortedSegmentJoin", "inputs")
    if not ids.dtype.is_integer:
        raise InferenceError(f"UnsortedSegmentJoin: segment_ids must be integers, got {ids.dtype.name}")
    if not num.dtype.is_integer or num.shape.ndims not in (None, 0):
        raise InferenceError(f"UnsortedSegmentJoin: num_segments must be an integer scalar, got {num.dtype.name} "
                             f"of shape {num.shape}")
    if data.shape.dims is not None and ids.shape.dims is not None:
        if not TensorShape(data.shape.dims[:ids.shape.ndims]).is_compatible_with(ids.shape) \
                or ids.shape.ndims > data.shape.ndims:
            raise InferenceError(f"UnsortedSegmentJoin: segment_ids shape {ids.shape} must be a prefix of inputs "
                                 f"shape {data.shape}")
    n = constant_value(num)
    if data.shape.dims is None or ids.shape.ndims is None:
        return [(dtypes.string, TensorShape(None))]
    return [(dtypes.string, TensorShape([None if n is None else int(n)] + list(data.shape.dims[ids.shape.ndims:])))]


def _infer_ngrams(inputs, attrs):
    data, splits = inputs
    _need_string(data, "StringNGrams", "data")
    if data.shape.ndims not in (None, 1) or splits.shape.ndims not in (None, 1):
        raise InferenceError("StringNGrams: data and data_splits must be vectors")
    return [(dtypes.string, TensorShape([None])), (splits.dtype, splits.shape)]


RegexFullMatch = define_op("RegexFullMatch", _infer_regex_full_match)
StaticRegexFullMatch = define_op("StaticRegexFullMatch", _infer_regex_full_match)
UnsortedSegmentJoin = define_op("UnsortedSegmentJoin", _infer_segment_join)
StringNGrams = define_op("StringNGrams", _infer_ngrams)


def regex_full_match(input, pattern, name=None):  # noqa: A002 (TF's name)
    """Whether each string of `input` matches `pattern` entirely (tf.strings.regex_full_match); a
    bool tensor of input's shape. A Python string pattern is compiled once (StaticRegexFullMatch),
    a tensor one per run (RegexFullMatch). Patterns follow RE2's syntax (as TF's): matched on the
    UTF-8 text by Python's `re`; an invalid pattern, or look-around and back-references (which RE2
    lacks), fail the run with InvalidArgumentError, as TF's do."""
    x = input if isinstance(input, Tensor) else convert_to_tensor(input, dtype=dtypes.string, name="input")
    if isinstance(pattern, (str, bytes)):
        p = pattern.decode("utf-8", "surrogateescape") if isinstance(pattern, bytes) else pattern
        return StaticRegexFullMatch(x, pattern=p, name=name or "StaticRegexFullMatch")
    pattern = convert_to_tensor(pattern, dtype=dtypes.string, name="pattern")
    return RegexFullMatch(x, pattern, name=name or "RegexFullMatch")


def unsorted_segment_join(inputs, segment_ids, num_segments, separator="", name=None):
    """Joins the strings of `inputs` per segment (tf.strings.unsorted_segment_join): output
    [num_segments] + inputs.shape[segment_ids.ndim:], element i the strings whose id is i, in
    order, with `separator` between; "" for an empty segment."""
    with name_scope(name, "UnsortedSegmentJoin", [inputs, segment_ids, num_segments]) as scope:
        inputs = convert_to_tensor(inputs, dtype=dtypes.string, name="inputs")
        segment_ids = convert_to_tensor(segment_ids, name="segment_ids")
        num_segments = convert_to_tensor(num_segments, name="num_segments")
        return UnsortedSegmentJoin(inputs, segment_ids, num_segments, separator=str(separator), name=scope)


def ngrams(data, ngram_width, separator=" ", pad_values=None, padding_width=None, preserve_short_sequences=False,
           name=None):
    """The n-grams of each row (the last axis) of dense string `data` (tf.strings.ngrams): rank 1 gives
    a vector of n-grams, rank k > 1 a tensor [..., n-grams per row]. `ngram_width` an int or a list
    (each row gives its ngram_width[0]-grams, then its ngram_width[1]-grams, ...); `pad_values` a
    string or (left, right) pair padding each row by `padding_width` (default width - 1) on both
    sides; `preserve_short_sequences` makes a row too short for any n-gram give one of all its
    tokens. RaggedTensor inputs are not supported (actorflow has none)."""
    if pad_values is None:
        left = right = ""
    elif isinstance(pad_values, (list, tuple)):
        if not all(isinstance(p, (str, bytes)) for p in pad_values[:2]):
            raise TypeError("pad_values must be a string, tuple of strings, or None.")
        left, right = pad_values[0], pad_values[1]
    elif isinstance(pad_values, (str, bytes)):
        left = right = pad_values
    else:
        raise TypeError("pad_values must be a string, tuple of strings, or None.")
    if padding_width is not None and padding_width < 1:
        raise ValueError("padding_width must be greater than 0.")
    if padding_width is not None and pad_values is None:
        raise ValueError("pad_values must be provided if padding_width is set.")
    widths = list(ngram_width) if isinstance(ngram_width, (list, tuple)) else [ngram_width]
    for w in widths:
        if w < 1:
            raise ValueError(f"All ngram_widths must be greater than 0. Got {ngram_width}")
    pad = 0 if pad_values is None else (-1 if padding_width is None else int(padding_width))

    def s(v):
        return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)
    with name_scope(name, "StringNGrams", [data]):
        data = convert_to_tensor(data, dtype=dtypes.string, name="data")
        rank = data.shape.ndims
        if rank is None:
            raise ValueError("Rank of data must be known.")
        if rank == 0:
            raise ValueError("Data must have rank>0")
        shape = array_ops.shape(data, out_type=dtypes.int64)
        flat = array_ops.reshape(data, [-1])
        row = shape[-1]
        total = array_ops.size(data, out_type=dtypes.int64)
        if rank == 1:
            splits = array_ops.stack([constant(0, dtypes.int64), total])
        else:
            rows = math_ops.floordiv(total, math_ops.maximum(row, constant(1, dtypes.int64)))
            splits = array_ops.range(rows + 1, dtype=dtypes.int64) * row
        out, _ = StringNGrams(flat, splits, separator=s(separator), ngram_widths=[int(w) for w in widths],
                              left_pad=s(left), right_pad=s(right), pad_width=pad,
                              preserve_short_sequences=bool(preserve_short_sequences))
        if rank == 1:
            return out
        dense = array_ops.concat([shape[:-1], constant(np.array([-1], np.int64))], axis=0)
        out = array_ops.reshape(out, dense)
        out.set_shape(TensorShape(list(data.shape.dims[:-1]) + [None]))
        return out
