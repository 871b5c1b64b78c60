"""The standard normal's CDF and its log, and the Laplace log-CDF, in forms that stay accurate in the
tails (TF's distributions/special_math.py): ndtr through erf or erfc by region, log_ndtr through
an asymptotic series below -20 (float64; -10 for float32) and -ndtr(-x) above 8 (5)."""
from __future__ import annotations

import numpy as np

from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import math_ops

__all__ = ["ndtr", "log_ndtr", "log_cdf_laplace"]

_LOG_NDTR_BOUNDS = {np.dtype(np.float64): (-20.0, 8.0), np.dtype(np.float32): (-10.0, 5.0)}


def _check_float(x, what):
    if np.dtype(x.dtype.as_numpy_dtype) not in _LOG_NDTR_BOUNDS:
        raise TypeError(f"{what}: x.dtype={x.dtype.name} is not handled (float32 or float64)")


def ndtr(x, name="ndtr"):
    """The standard normal CDF: 1/2 (1 + erf(x / sqrt 2)), through erfc for |x| > 1."""
    with name_scope(name):
        x = convert_to_tensor(x, name="x")
        _check_float(x, "ndtr")
        return _ndtr(x)


def _ndtr(x):
    half_sqrt_2 = np.array(0.5 * np.sqrt(2.0), x.dtype.as_numpy_dtype)
    w = x * half_sqrt_2
    z = math_ops.abs(w)
    y = math_ops.where_v2(math_ops.less(z, half_sqrt_2), 1.0 + math_ops.erf(w),
                          math_ops.where_v2(math_ops.greater(w, 0.0), 2.0 - math_ops.erfc(z), math_ops.erfc(z)))
    return 0.5 * y


def log_ndtr(x, series_order=3, name="log_ndtr"):
    """log(ndtr(x)), accurate far into both tails (TF's special_math.log_ndtr)."""
    if not isinstance(series_order, int):
        raise TypeError("series_order must be a Python integer.")
    if not 0 <= series_order <= 30:
        raise ValueError(f"series_order must be in [0, 30], got {series_order}.")
    with name_scope(name):
        x = convert_to_tensor(x, name="x")
        _check_float(x, "log_ndtr")
        lower, upper = (np.array(b, x.dtype.as_numpy_dtype) for b in _LOG_NDTR_BOUNDS[np.dtype(x.dtype.as_numpy_dtype)])
        return math_ops.where_v2(
            math_ops.greater(x, upper), -_ndtr(-x),
            math_ops.where_v2(math_ops.greater(x, lower), math_ops.log(_ndtr(math_ops.maximum(x, lower))),
                              _log_ndtr_lower(math_ops.minimum(x, lower), series_order)))


def _log_ndtr_lower(x, series_order):
    log_scale = -0.5 * math_ops.square(x) - math_ops.log(-x) - 0.5 * np.log(2.0 * np.pi)
    return log_scale + math_ops.log(_log_ndtr_asymptotic_series(x, series_order))


def _log_ndtr_asymptotic_series(x, series_order):
    dtype = x.dtype.as_numpy_dtype
    if series_order <= 0:
        return np.array(1, dtype)
    x_2 = math_ops.square(x)
    even_sum = odd_sum = 0.0
    x_2n = x_2
    for n in range(1, series_order + 1):
        y = np.array(np.prod(np.arange(2 * n - 1, 1, -2)), dtype) / x_2n
        if n % 2:
            odd_sum = odd_sum + y
        else:
            even_sum = even_sum + y
        x_2n = x_2n * x_2
    return 1.0 + even_sum - odd_sum


def log_cdf_laplace(x, name="log_cdf_laplace"):
    """log of the standard Laplace CDF: x - log 2 below 0, log1p(-exp(-x) / 2) above."""
    with name_scope(name):
        x = convert_to_tensor(x, name="x")
        lower = -np.log(2.0) + x
        upper = math_ops.log1p(-0.5 * math_ops.exp(-math_ops.abs(x)))
        return math_ops.where_v2(x < 0.0, lower, upper)
