"""More of tf.math, built from existing ops as TF builds them: reduce_variance, reduce_std,
reduce_euclidean_norm, norm, confusion_matrix, bincount, reciprocal_no_nan, saturate_cast."""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, math_ops

__all__ = ["reduce_variance", "reduce_std", "reduce_euclidean_norm", "norm", "confusion_matrix", "bincount",
           "reciprocal_no_nan", "saturate_cast"]


def reduce_variance(input_tensor, axis=None, keepdims=False, name=None):
    """The variance of the elements across `axis` (tf.math.reduce_variance): the mean of the squared
    deviations from the mean."""
    with name_scope(name or "reduce_variance"):
        x = convert_to_tensor(input_tensor, name="input_tensor")
        if not x.dtype.is_floating:
            raise TypeError(f"reduce_variance: input_tensor must be of a floating dtype, got {x.dtype.name}")
        means = math_ops.reduce_mean(x, axis=axis, keepdims=True)
        return math_ops.reduce_mean(math_ops.square(x - means), axis=axis, keepdims=keepdims)


def reduce_std(input_tensor, axis=None, keepdims=False, name=None):
    """The standard deviation of the elements across `axis` (tf.math.reduce_std)."""
    with name_scope(name or "reduce_std"):
        return math_ops.sqrt(reduce_variance(input_tensor, axis=axis, keepdims=keepdims))


def reduce_euclidean_norm(input_tensor, axis=None, keepdims=False, name=None):
    """sqrt(sum(x ** 2)) across `axis` (tf.math.reduce_euclidean_norm)."""
    with name_scope(name or "reduce_euclidean_norm"):
        x = convert_to_tensor(input_tensor, name="input_tensor")
        return math_ops.sqrt(math_ops.reduce_sum(x * x, axis=axis, keepdims=keepdims))


def norm(tensor, ord="euclidean", axis=None, keepdims=None, name=None, keep_dims=None):  # noqa: A002
    """A vector or matrix norm (tf.norm): `ord` "euclidean"/"fro"/2, 1, np.inf or a positive number for
    vectors; "fro"/"euclidean", 1 or np.inf for matrices (axis a pair)."""
    keep = bool(keepdims if keepdims is not None else keep_dims)
    with name_scope(name or "norm"):
        x = convert_to_tensor(tensor, name="tensor")
        is_matrix = isinstance(axis, (list, tuple)) and len(axis) == 2
        if axis is not None and not is_matrix and isinstance(axis, (list, tuple)):
            if len(axis) != 1:
                raise ValueError(f"'axis' must be None, an integer, or a tuple of 2 unique integers, got {axis}")
            axis = axis[0]
        if is_matrix:
            if ord in ("euclidean", "fro"):
                out = math_ops.sqrt(math_ops.reduce_sum(x * x, axis=list(axis), keepdims=True))
            elif ord in (1, np.inf):
                r, c = axis
                inner, outer = (r, c) if ord == 1 else (c, r)
                out = math_ops.reduce_max(math_ops.reduce_sum(math_ops.abs(x), axis=inner, keepdims=True),
                                          axis=outer, keepdims=True)
            else:
                raise ValueError(f"'ord' must be a supported matrix norm in ['euclidean', 'fro', 1, inf], got {ord}")
        else:
            red = axis if axis is not None else None
            if ord in ("euclidean", 2, 2.0):
                out = math_ops.sqrt(math_ops.reduce_sum(x * x, axis=red, keepdims=True))
            elif ord == "fro":
                if axis is not None:
                    raise ValueError("'ord' 'fro' needs a matrix (axis a pair)")
                out = math_ops.sqrt(math_ops.reduce_sum(x * x, axis=red, keepdims=True))
            elif ord == 1:
                out = math_ops.reduce_sum(math_ops.abs(x), axis=red, keepdims=True)
            elif ord == np.inf:
                out = math_ops.reduce_max(math_ops.abs(x), axis=red, keepdims=True)
            elif isinstance(ord, (int, float)) and ord > 0:
                p = math_ops.cast(ord, x.dtype)
                out = math_ops.pow(math_ops.reduce_sum(math_ops.pow(math_ops.abs(x), p), axis=red, keepdims=True),
                                   1.0 / p)
            else:
                raise ValueError(f"'ord' must be a supported vector norm, got {ord}")
        if not keep:
            if axis is None:
                out = array_ops.reshape(out, [])
            else:
                out = array_ops.squeeze(out, list(axis) if is_matrix else [axis])
        return out


def confusion_matrix(labels, predictions, num_classes=None, dtype=dtypes.int32, name=None, weights=None):
    """The [num_classes, num_classes] counts (or summed weights) of (label, prediction) pairs
    (tf.math.confusion_matrix); `num_classes` defaults to the largest label or prediction + 1."""
    with name_scope(name or "confusion_matrix"):
        labels = math_ops.cast(convert_to_tensor(labels, name="labels"), dtypes.int64)
        predictions = math_ops.cast(convert_to_tensor(predictions, name="predictions"), dtypes.int64)
        if num_classes is None:
            num_classes = math_ops.maximum(math_ops.reduce_max(predictions), math_ops.reduce_max(labels)) + 1
        n = math_ops.cast(convert_to_tensor(num_classes), dtypes.int64)
        dtype = dtypes.as_dtype(dtype)
        values = array_ops.ones_like(predictions, dtype=dtype) if weights is None else \
            math_ops.cast(convert_to_tensor(weights), dtype)
        flat = labels * n + predictions
        counts = array_ops.unsorted_segment_sum(values, flat, n * n)
        return array_ops.reshape(counts, array_ops.stack([n, n]))


def bincount(arr, weights=None, minlength=None, maxlength=None, dtype=dtypes.int32, name=None):
    """Counts of each value of the non-negative integers `arr` (summed weights with `weights`)
    (tf.math.bincount): length max(arr) + 1, at least `minlength`, at most `maxlength`."""
    with name_scope(name or "bincount"):
        arr = math_ops.cast(convert_to_tensor(arr, name="arr"), dtypes.int32)
        flat = array_ops.reshape(arr, [-1])
        size = math_ops.maximum(math_ops.reduce_max(array_ops.concat([flat, [-1]], 0)) + 1, 0)
        if minlength is not None:
            size = math_ops.maximum(size, convert_to_tensor(minlength, dtype=dtypes.int32))
        if maxlength is not None:
            size = math_ops.minimum(size, convert_to_tensor(maxlength, dtype=dtypes.int32))
        if weights is None:
            values = array_ops.ones_like(flat, dtype=dtypes.as_dtype(dtype))
        else:
            values = array_ops.reshape(convert_to_tensor(weights, name="weights"), [-1])
        keep = math_ops.less(flat, size)
        return array_ops.unsorted_segment_sum(array_ops.boolean_mask(values, keep), array_ops.boolean_mask(flat, keep),
                                              size)


def reciprocal_no_nan(x, name=None):
    """1 / x, and 0 where x is 0 (tf.math.reciprocal_no_nan)."""
    with name_scope(name or "reciprocal_no_nan"):
        x = convert_to_tensor(x, name="x")
        return math_ops.div_no_nan(array_ops.ones_like(x), x)


def saturate_cast(value, dtype, name=None):
    """`value` cast to `dtype`, clamped to its range first so that nothing wraps (tf.dtypes.saturate_cast);
    a limit the input's dtype cannot hold exactly is nudged inside the range, as TF does (float32's
    nearest value to int32's maximum is 2**31, which would overflow)."""
    dtype = dtypes.as_dtype(dtype)
    with name_scope(name or "saturate_cast"):
        x = convert_to_tensor(value, name="value")
        in_dt = x.dtype
        if in_dt.is_bool or dtype.is_bool or (in_dt.is_floating and dtype.is_floating and dtype.size >= in_dt.size):
            return math_ops.cast(x, dtype)
        np_in = in_dt.as_numpy_dtype
        promoted = np.promote_types(np_in, dtype.as_numpy_dtype)
        lo = np_in(np.maximum(in_dt.min, dtype.min))
        if np.array(lo, promoted) < np.array(dtype.min, promoted):
            lo = np.nextafter(lo, np_in(0), dtype=np_in)
        hi = np_in(np.minimum(float(in_dt.max), float(dtype.max)))
        if np.array(hi, promoted) > np.array(dtype.max, promoted):
            hi = np.nextafter(hi, np_in(0), dtype=np_in)
        x = math_ops.minimum(math_ops.maximum(x, convert_to_tensor(lo, dtype=in_dt)), convert_to_tensor(hi, dtype=in_dt))
        return math_ops.cast(x, dtype)
