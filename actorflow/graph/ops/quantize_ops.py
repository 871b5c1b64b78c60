"""Quantizing floats into TF's quantized types and back (tf.quantize, tf.quantize_v2,
tf.dequantize; TF's QuantizeV2 and Dequantize ops), with TF's three modes:

- MIN_COMBINED: [min, max] mapped linearly onto the type's whole range (signed types shifted by
  half of it);
- MIN_FIRST: like MIN_COMBINED but with the scaled minimum rounded first (no drift on repeated
  round trips);
- SCALED: symmetric around 0, the scale the largest that keeps both ends in range (`narrow_range`
  drops the type's lowest value), the range returned adjusted to it.

The range is first widened to contain 0 and made at least `ensure_minimum_range` times the larger
of 1 and its largest magnitude wide, as TF does. With `axis`, min_range and max_range are vectors,
one range per slice along that axis. The float32 arithmetic follows TF's kernels step for step
(kernels/cpu/quantize.py); the values equal TensorFlow's (tests/fixtures/quantize.json). No
gradients, as in TF.
"""
from __future__ import annotations

import collections

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops.array_ops._args import _op_scope
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["QuantizeV2Result", "dequantize", "quantize", "quantize_v2"]

_MODES = ("MIN_COMBINED", "MIN_FIRST", "SCALED")
_ROUND_MODES = ("HALF_AWAY_FROM_ZERO", "HALF_TO_EVEN")

QuantizeV2Result = collections.namedtuple("QuantizeV2", ["output", "output_min", "output_max"])


class _QuantizeTypeError(InferenceError, TypeError):
    """A dtype a quantize op cannot take: a ValueError like every inference error, a TypeError as in TF."""


def _check_mode(op, attrs):
    mode = attrs.get("mode", "MIN_COMBINED")
    if mode not in _MODES:
        raise InferenceError(f"{op}: Mode string must be 'MIN_COMBINED', 'MIN_FIRST', or 'SCALED', is '{mode}'")
    return mode


def _range_shape(x, mn, mx, axis, op):
    for t, what in ((mn, "min_range"), (mx, "max_range")):
        if t.dtype is not dtypes.float32:
            raise _QuantizeTypeError(f"{op}: {what} must be float32, got {t.dtype.name} ('{t.name}')")
        want = 0 if axis == -1 else 1
        if t.shape.ndims is not None and t.shape.ndims != want:
            raise InferenceError(f"{op}: {what} must be {'a scalar' if want == 0 else 'a vector'} "
                                 f"{'' if axis == -1 else f'(one per slice along axis {axis}) '}, got shape {t.shape}")
    if axis == -1:
        return TensorShape([])
    if x.shape.ndims is not None and not 0 <= axis < x.shape.ndims:
        raise InferenceError(f"{op}: axis {axis} is out of range for input of rank {x.shape.ndims}")
    depth = x.shape.as_list()[axis] if x.shape.ndims is not None else None
    for t in (mn, mx):
        n = t.shape.as_list()[0] if t.shape.ndims == 1 else None
        if n is not None and depth is not None and n != depth:
            raise InferenceError(f"{op}: {n} ranges for the {depth} slices along axis {axis}")
    return TensorShape([depth])


def _infer_quantize(inputs, attrs):
    x, mn, mx = inputs
    mode = _check_mode("QuantizeV2", attrs)
    t = dtypes.as_dtype(attrs["T"])
    if not t.is_quantized:
        raise _QuantizeTypeError(f"QuantizeV2: T must be a quantized type (qint8, quint8, qint16, quint16, qint32), "
                                 f"got {t.name}")
    if x.dtype is not dtypes.float32:
        raise _QuantizeTypeError(f"QuantizeV2: input must be float32, got {x.dtype.name} ('{x.name}')")
    rm = attrs.get("round_mode", "HALF_AWAY_FROM_ZERO")
    if rm not in _ROUND_MODES:
        raise InferenceError(f"QuantizeV2: Round mode string must be 'HALF_AWAY_FROM_ZERO' or 'HALF_TO_EVEN', is '{rm}'")
    if rm == "HALF_TO_EVEN" and mode != "SCALED":
        raise InferenceError(f"QuantizeV2: Round mode 'HALF_TO_EVEN' only supported for mode 'SCALED', but mode is "
                             f"'{mode}'.")
    rshape = _range_shape(x, mn, mx, int(attrs.get("axis", -1)), "QuantizeV2")
    return [(t, x.shape), (dtypes.float32, rshape), (dtypes.float32, rshape)]


def _infer_dequantize(inputs, attrs):
    x, mn, mx = inputs
    _check_mode("Dequantize", attrs)
    if not x.dtype.is_quantized:
        raise _QuantizeTypeError(f"Dequantize: input must be of a quantized type, got {x.dtype.name} ('{x.name}')")
    out = dtypes.as_dtype(attrs.get("dtype", dtypes.float32))
    if out is not dtypes.float32:
        raise _QuantizeTypeError(f"Dequantize: dtype must be float32, got {out.name}")
    _range_shape(x, mn, mx, int(attrs.get("axis", -1)), "Dequantize")
    return [(out, x.shape)]


QuantizeV2 = define_op("QuantizeV2", _infer_quantize)
Dequantize = define_op("Dequantize", _infer_dequantize)
# (no gradients: differentiating through them is a LookupError, as in TF)


def _axis(axis):
    return -1 if axis is None else int(axis)


def quantize_v2(input, min_range, max_range, T, mode="MIN_COMBINED", name=None,  # noqa: A002, N803 (TF's names)
                round_mode="HALF_AWAY_FROM_ZERO", narrow_range=False, axis=None, ensure_minimum_range=0.01):
    """Quantizes float32 `input` to the quantized type T over [min_range, max_range]; returns
    (output, output_min, output_max), the range actually used (tf.quantize_v2; see the module
    docstring for the modes)."""
    with _op_scope(name, "QuantizeV2") as sc:
        outs = sc.op(QuantizeV2, convert_to_tensor(input, dtype=dtypes.float32),
                     convert_to_tensor(min_range, dtype=dtypes.float32, name="min_range"),
                     convert_to_tensor(max_range, dtype=dtypes.float32, name="max_range"),
                     T=dtypes.as_dtype(T), mode=mode, round_mode=round_mode, narrow_range=bool(narrow_range),
                     axis=_axis(axis), ensure_minimum_range=float(ensure_minimum_range))
    return QuantizeV2Result(*outs)


def quantize(input, min_range, max_range, T, mode="MIN_COMBINED", round_mode="HALF_AWAY_FROM_ZERO",  # noqa: A002, N803
             name=None, narrow_range=False, axis=None, ensure_minimum_range=0.01):
    """tf.quantize (tf.quantization.quantize): quantize_v2 with TF's other argument order."""
    return quantize_v2(input, min_range, max_range, T, mode=mode, name=name or "quantize", round_mode=round_mode,
                       narrow_range=narrow_range, axis=axis, ensure_minimum_range=ensure_minimum_range)


def dequantize(input, min_range, max_range, mode="MIN_COMBINED", name=None, axis=None,  # noqa: A002
               narrow_range=False, dtype=dtypes.float32):
    """The float32 values a quantized `input` stands for over [min_range, max_range], in the mode it
    was quantized with (tf.dequantize)."""
    with _op_scope(name, "Dequantize") as sc:
        return sc.op(Dequantize, convert_to_tensor(input),
                     convert_to_tensor(min_range, dtype=dtypes.float32, name="min_range"),
                     convert_to_tensor(max_range, dtype=dtypes.float32, name="max_range"),
                     mode=mode, narrow_range=bool(narrow_range), axis=_axis(axis), dtype=dtypes.as_dtype(dtype))
