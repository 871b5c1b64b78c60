"""CPU kernel for HistogramFixedWidth (graph/ops/histogram_ops.py)."""
from __future__ import annotations

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel


@register_kernel("HistogramFixedWidth", "CPU", cost=lambda values, *rest: int(np.size(values)))
def histogram_fixed_width(attrs):
    """tf.raw_ops.HistogramFixedWidth: TF's binning, bin = min((max(v, lo) - lo) / step, nbins - 1)
    truncated, the differences taken in the values' dtype and divided in float64, like TF's kernel."""
    out = np.dtype(attrs.get("dtype", np.int32))

    def fn(values, value_range, nbins):
        v, r = np.asarray(values).reshape(-1), np.asarray(value_range).reshape(-1)
        n = int(nbins)
        if n <= 0:
            raise InvalidArgumentError(f"HistogramFixedWidth: nbins should be a positive number, but got '{n}'")
        if r.size != 2 or not r[0] < r[1]:
            raise InvalidArgumentError(f"HistogramFixedWidth: value_range should satisfy value_range[0] < "
                                       f"value_range[1], got {r.tolist()}")
        step = float(r[1] - r[0]) / n
        shifted = (np.maximum(v, r[0]) - r[0]).astype(np.float64)
        index = np.minimum(shifted / step, n - 1).astype(np.int64)
        return np.bincount(index, minlength=n).astype(out, copy=False)
    return fn
