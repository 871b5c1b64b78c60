"""CPU kernels of the segment reductions: SegmentSum/Mean/Max/Min/Prod (sorted ids) and
UnsortedSegmentMax/Min/Prod (UnsortedSegmentSum is in array.py).

Both reduce each run of equal ids with one `ufunc.reduceat`; unsorted ids are first grouped by a
stable sort of the rows whose id is not negative. Empty segments get TF's values: 0 for the sorted sum, mean,
max and min, 1 for products, and the dtype's lowest (max) or highest (min) value for the unsorted
max and min (C++'s numeric_limits<T>::lowest(), a finite number for floats, as in TF).
"""
from __future__ import annotations

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.cpu.array import _out_of_range
from actorflow.kernels.registry import register_kernel


def _lowest(dt):
    return np.finfo(dt).min if dt.kind == "f" else np.iinfo(dt).min


def _highest(dt):
    return np.finfo(dt).max if dt.kind == "f" else np.iinfo(dt).max


def _check_ids(op: str, ids):
    if ids.dtype.kind not in "iu":
        raise InvalidArgumentError(f"{op}: segment_ids must be integers, got {ids.dtype.name}")


# ---------------------------------------------------------------------------------------------
# Sorted segment ids

def _sorted_segments(op: str, data, ids):
    """Checks the ids and returns (number of segments, start row of each run, the run's id)."""
    _check_ids(op, ids)
    if ids.ndim != 1:
        raise InvalidArgumentError(f"{op}: segment_ids should be a vector, got shape {list(ids.shape)}")
    if data.ndim < 1 or data.shape[0] != ids.shape[0]:
        raise InvalidArgumentError(f"{op}: segment_ids should be the same size as dimension 0 of data, "
                                   f"got {ids.shape[0]} ids for data of shape {list(data.shape)}")
    if ids.size == 0:
        return 0, np.zeros(0, np.intp), np.zeros(0, np.intp)
    if ids[0] < 0:
        raise InvalidArgumentError(f"{op}: segment ids must be >= 0, but segment_ids[0] = {int(ids[0])}")
    step = np.diff(ids)
    if (step < 0).any():
        i = int(np.flatnonzero(step < 0)[0]) + 1
        raise InvalidArgumentError(f"{op}: segment ids are not increasing: segment_ids[{i}] = {int(ids[i])} "
                                   f"follows {int(ids[i - 1])}")
    starts = np.concatenate([[0], np.flatnonzero(step) + 1])
    return int(ids[-1]) + 1, starts, ids[starts].astype(np.intp)


def _sorted_kernel(op: str, ufunc, empty):
    def fn(data, segment_ids):
        data, ids = np.asarray(data), np.asarray(segment_ids)
        num, starts, present = _sorted_segments(op, data, ids)
        out = np.full((num,) + data.shape[1:], empty, dtype=data.dtype)
        if starts.size:
            if ufunc is None:   # the mean
                sums = np.add.reduceat(data, starts, axis=0)
                counts = np.diff(np.concatenate([starts, [data.shape[0]]])).reshape((-1,) + (1,) * (data.ndim - 1))
                if data.dtype.kind in "iu":     # C++ integer division truncates toward zero
                    out[present] = np.trunc(sums / counts).astype(data.dtype)
                else:
                    out[present] = sums / counts.astype(data.dtype)
            else:
                out[present] = ufunc.reduceat(data, starts, axis=0)
        return out
    register_kernel(op, "CPU")(lambda attrs, _fn=fn: _fn)


_sorted_kernel("SegmentSum", np.add, 0)
_sorted_kernel("SegmentMean", None, 0)
_sorted_kernel("SegmentMax", np.maximum, 0)
_sorted_kernel("SegmentMin", np.minimum, 0)
_sorted_kernel("SegmentProd", np.multiply, 1)


# ---------------------------------------------------------------------------------------------
# Unsorted segment ids

def _unsorted_kernel(op: str, ufunc, empty):
    def fn(data, segment_ids, num_segments):
        data, ids = np.asarray(data), np.asarray(segment_ids)
        _check_ids(op, ids)
        num = int(num_segments)
        if num < 0:
            raise InvalidArgumentError(f"{op}: num_segments must be non-negative, got {num}")
        if data.shape[:ids.ndim] != ids.shape:
            raise InvalidArgumentError(f"{op}: data.shape = {list(data.shape)} does not start with "
                                       f"segment_ids.shape = {list(ids.shape)}")
        if ids.size and ids.max() >= num:
            raise _out_of_range(op, "segment_ids", np.where(ids < 0, 0, ids), 0, num)
        inner = data.shape[ids.ndim:]
        out = np.full((num,) + inner, empty(data.dtype), dtype=data.dtype)
        flat = ids.reshape(-1)
        rows = data.reshape((flat.size,) + inner)
        keep = flat >= 0
        if not keep.all():
            flat, rows = flat[keep], rows[keep]
        if flat.size:
            # Group the rows by id (a stable sort keeps each segment's rows in their order, as
            # TF's loop visits them) and reduce each run at once: far faster than ufunc.at.
            order = np.argsort(flat, kind="stable")
            sid = flat[order]
            starts = np.concatenate([[0], np.flatnonzero(np.diff(sid)) + 1])
            out[sid[starts]] = ufunc.reduceat(rows[order], starts, axis=0)
        return out
    register_kernel(op, "CPU")(lambda attrs, _fn=fn: _fn)


_unsorted_kernel("UnsortedSegmentMax", np.maximum, _lowest)
_unsorted_kernel("UnsortedSegmentMin", np.minimum, _highest)
_unsorted_kernel("UnsortedSegmentProd", np.multiply, lambda dt: 1)
