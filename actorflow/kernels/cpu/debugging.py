"""CPU kernels of the runtime checks: CheckNumerics and Assert.

CheckNumerics scans its input once with a nogil numba loop (no temporary bool array, unlike
``np.isfinite(x).all()``) and stops as soon as it has seen both a NaN and an infinity; float16,
which numba cannot load, goes through numpy. Both kernels fail with InvalidArgumentError in
TensorFlow's words; the node actor adds the op's name.

Assert formats its data as TensorFlow's ``Tensor::SummarizeValue`` does (the first `summarize`
elements, nested brackets for rank >= 2, "..." when cut), so messages match TF's character for
character. Literal strings of the data list arrive as the ``data_strings`` attribute (actorflow has
no string tensors): a string for a literal, None where the next data input goes.
"""
from __future__ import annotations

import math

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.lazy_numba import njit
from actorflow.kernels.registry import register_kernel

__all__ = ["summarize_value", "format_element"]


@njit(nogil=True, cache=True)
def _scan(flat):
    """(index of the first NaN or infinity or -1, saw a NaN, saw an infinity)."""
    first = -1
    nan = False
    inf = False
    for i in range(flat.size):
        v = flat[i]
        if math.isnan(v):
            nan = True
        elif math.isinf(v):
            inf = True
        else:
            continue
        if first < 0:
            first = i
        if nan and inf:
            break
    return first, nan, inf


def _scan_numpy(flat):
    bad = ~np.isfinite(flat)
    if not bad.any():
        return -1, False, False
    return int(np.argmax(bad)), bool(np.isnan(flat).any()), bool(np.isinf(flat).any())


def _check_numerics_factory(attrs):
    message = attrs.get("message", "")

    def check_numerics(tensor):
        x = np.asarray(tensor)
        flat = x.reshape(-1)
        if x.dtype.kind != "f":
            raise InvalidArgumentError(f"CheckNumerics: expects a floating-point tensor, got {x.dtype}")
        first, nan, inf = (_scan if x.dtype.itemsize >= 4 else _scan_numpy)(flat)
        if first < 0:
            return tensor
        what = "Inf and NaN" if nan and inf else ("NaN" if nan else "Inf")
        where = list(np.unravel_index(first, x.shape)) if x.ndim else []
        raise InvalidArgumentError(
            f"{message} : Tensor had {what} values; the first, {format_element(flat[first])}, is at index "
            f"{[int(i) for i in where]} of shape {list(x.shape)} (element {first} of {x.size})")
    return check_numerics


register_kernel("CheckNumerics", "CPU", cost=lambda x: np.size(x))(_check_numerics_factory)


# -- Assert ---------------------------------------------------------------------------------------

def format_element(v) -> str:
    """One element as TF's PrintOneElement writes it: shortest %g that round-trips, bools as 1/0."""
    if isinstance(v, (bool, np.bool_)):
        return "1" if v else "0"
    if isinstance(v, (np.floating, float)):
        if isinstance(v, np.float64) or type(v) is float:
            d = float(v)
            s = f"{d:.15g}"
            return s if float(s) == d else f"{d:.17g}"
        f = np.float32(v)   # float16 prints as a float, as in TF
        s = f"{float(f):.6g}"
        return s if np.float32(s) == f else f"{float(f):.9g}"
    if isinstance(v, (bytes, np.bytes_)):
        return v.decode("utf-8", "backslashreplace")
    return str(v)


def _print_one_dim(dim, shape, limit, flat, idx, out) -> int:
    """TF's PrintOneDim: appends dimension `dim` of the flat data from `idx`; returns the new idx."""
    if idx >= limit:
        return idx
    n = shape[dim]
    if dim == len(shape) - 1:
        for i in range(n):
            if idx >= limit:
                if dim != 0 and i < n:
                    out.append("...")
                return idx
            if i > 0:
                out.append(" ")
            out.append(format_element(flat[idx]))
            idx += 1
        return idx
    for _ in range(n):
        opened = idx < limit
        if opened:
            out.append("[")
        idx = _print_one_dim(dim + 1, shape, limit, flat, idx, out)
        if idx < limit or opened:
            out.append("]")
    return idx


def summarize_value(x, summarize: int = 3) -> str:
    """The first `summarize` elements of `x` (all when negative) as TF's Tensor::SummarizeValue."""
    x = np.asarray(x)
    n = x.size
    limit = n if summarize < 0 else min(summarize, n)
    flat = x.reshape(-1)
    if x.ndim == 0:
        out = [format_element(flat[i]) for i in range(limit)]
        s = " ".join(out)
    else:
        parts: list = []
        _print_one_dim(0, x.shape, limit, flat, 0, parts)
        s = "".join(parts)
    return s + "..." if n > limit else s


def _legacy_scalar(shape) -> bool:
    return len(shape) == 0 or (len(shape) == 1 and shape[0] == 1)


def _assert_factory(attrs):
    summarize = int(attrs.get("summarize", 3))
    template = attrs.get("data_strings")

    def assert_(condition, *data):
        cond = np.asarray(condition)
        if not _legacy_scalar(cond.shape):
            raise InvalidArgumentError(f"In[0] should be a scalar: {list(cond.shape)}")
        if cond.reshape(-1)[0]:
            return None
        items = []
        it = iter(data)
        for entry in (template if template is not None else (None,) * len(data)):
            items.append(entry if entry is not None else summarize_value(next(it), summarize))
        raise InvalidArgumentError("assertion failed: " + " ".join(f"[{s}]" for s in items))
    return assert_


register_kernel("Assert", "CPU", cost=lambda c, *data: 1, releases_gil=False)(_assert_factory)
