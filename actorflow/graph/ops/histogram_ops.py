"""Fixed-width histograms (tf.histogram_fixed_width, tf.histogram_fixed_width_bins).

Op type defined here: HistogramFixedWidth. Values below value_range[0] count in the first bin,
values at or above value_range[1] in the last, as in TF. histogram_fixed_width_bins is TF's
composition of element-wise ops (scale, floor, clip), so it computes the bins the same way.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import array_ops, clip_ops, math_ops
from actorflow.graph.ops.array_ops._infer import _static_int
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["histogram_fixed_width", "histogram_fixed_width_bins"]


def _infer_histogram(inputs, attrs):
    values, value_range, nbins = inputs
    if not (values.dtype.is_floating or values.dtype.is_integer):
        raise InferenceError(f"values must be a real number tensor, got {values.dtype.name}")
    if value_range.dtype is not values.dtype:
        raise InferenceError(f"value_range ({value_range.dtype.name}) must have the values' dtype {values.dtype.name}")
    if value_range.shape.ndims is not None and value_range.shape.dims != (2,) and value_range.shape.dims[0] is not None:
        raise InferenceError(f"value_range must have shape [2], got {value_range.shape}")
    if nbins.dtype is not dtypes.int32 or nbins.shape.ndims not in (None, 0):
        raise InferenceError(f"nbins must be an int32 scalar, got {nbins.dtype.name} of shape {nbins.shape}")
    n = _static_int(nbins)
    if n is not None and n <= 0:
        raise InferenceError(f"nbins must be positive, got {n}")
    out = dtypes.as_dtype(attrs.get("dtype", dtypes.int32))
    if out not in (dtypes.int32, dtypes.int64):
        raise InferenceError(f"dtype must be int32 or int64, got {out.name}")
    return [(out, TensorShape([n]))]


HistogramFixedWidth = define_op("HistogramFixedWidth", _infer_histogram)


def histogram_fixed_width(values, value_range, nbins=100, dtype=dtypes.int32, name=None):
    """Counts of `values` in `nbins` equal bins spanning `value_range` ([lo, hi]); values outside
    count in the first or last bin (tf.histogram_fixed_width; op HistogramFixedWidth)."""
    with name_scope(name, "histogram_fixed_width", [values, value_range, nbins]) as scope:
        v = convert_to_tensor(values, name="values")
        r = convert_to_tensor(value_range, dtype=v.dtype, name="value_range")
        n = convert_to_tensor(nbins, dtype=dtypes.int32, name="nbins")
        return HistogramFixedWidth(v, r, n, dtype=dtypes.as_dtype(dtype), name=scope)


def histogram_fixed_width_bins(values, value_range, nbins=100, dtype=dtypes.int32, name=None):
    """The bin (0 .. nbins - 1) of each of `values` in `nbins` equal bins over `value_range`, an int32
    tensor of the values' shape (tf.histogram_fixed_width_bins; `dtype` is ignored, as in TF)."""
    with name_scope(name, "histogram_fixed_width_bins", [values, value_range, nbins]):
        v = convert_to_tensor(values, name="values")
        shape = array_ops.shape(v)
        v = array_ops.reshape(v, [-1])
        r = convert_to_tensor(value_range, dtype=v.dtype, name="value_range")
        n = convert_to_tensor(nbins, dtype=dtypes.int32, name="nbins")
        n_float = math_ops.cast(n, v.dtype)
        scaled = math_ops.truediv(v - r[0], r[1] - r[0], name="scaled_values")
        indices = math_ops.floor(n_float * scaled, name="indices")
        indices = math_ops.cast(clip_ops.clip_by_value(indices, 0, n_float - 1), dtypes.int32)
        return array_ops.reshape(indices, shape)
