"""CPU kernels for variable updates: Assign, AssignAdd/Sub, the Scatter family and
ScatterNd{Add,Sub,Update}.

Input 0 is the variable's buffer, handed over writable and exclusively owned by its resource actor;
every kernel updates it in place and returns it. The one exception is an Assign that changes the
variable's shape (validate_shape=False): a buffer cannot change shape in place, so that kernel
returns a new array and the caller must store it as the variable's buffer.

Scatter kernels cost O(len(indices)) whatever the variable's size: one numba loop checks every index
and then applies the rows in index order, so duplicate indices accumulate (Add/Sub/Mul/Max/Min) or
the last one wins (Update).
"""
from __future__ import annotations

import numpy as np

from actorflow.errors import InvalidArgumentError, OutOfRangeError
from actorflow.kernels.cpu.scatter_nd import _check_updates, _index_tuple
from actorflow.kernels.lazy_numba import njit
from actorflow.kernels.registry import register_kernel


def value_of(op_name, ref, value, xp=np):
    """`value` as an array of module `xp` (numpy; the GPU kernels pass CuPy), checked castable to ref."""
    value = xp.asarray(value)
    if value.dtype != ref.dtype and not np.can_cast(value.dtype, ref.dtype, casting="same_kind"):
        raise TypeError(f"{op_name}: cannot update a {ref.dtype} variable with a {value.dtype} value")
    return value


def assign_fn(validate: bool, xp=np):
    """Assign's kernel over array module `xp`: copies value into the variable's buffer and returns it.

    With validate_shape=False a value of another shape replaces the buffer: the kernel then returns
    a fresh array (a copy of value), and the caller must store that array as the variable.
    A ref of None (an uninitialized variable with no buffer yet) is handled the same way.
    """
    def fn(ref, value):
        if ref is None:
            return xp.array(value, copy=True)
        value = value_of("Assign", ref, value, xp)
        if value.shape == ref.shape:
            xp.copyto(ref, value, casting="same_kind")
            return ref
        if validate:
            raise ValueError(f"Assign: shapes must match with validate_shape=True: variable has shape "
                             f"{ref.shape}, value has shape {value.shape}")
        return xp.array(value, dtype=ref.dtype, copy=True)
    return fn


@register_kernel("Assign", "CPU")
def assign(attrs):
    """tf.raw_ops.Assign: copies value into the variable's buffer and returns it (see assign_fn)."""
    return assign_fn(bool(attrs.get("validate_shape", True)))


def update_in_place(op_name, ufunc, xp=np):
    """``ref = ufunc(ref, value)`` in place (value may broadcast to ref's shape), over module `xp`."""
    def fn(ref, value):
        value = value_of(op_name, ref, value, xp)
        try:
            shape = np.broadcast_shapes(ref.shape, value.shape)
        except ValueError:
            shape = None
        if shape != ref.shape:
            raise ValueError(f"{op_name}: value of shape {value.shape} does not match variable of shape {ref.shape}")
        ufunc(ref, value.astype(ref.dtype, copy=False), out=ref)
        return ref
    return fn


@register_kernel("AssignAdd", "CPU")
def assign_add(attrs):
    """tf.raw_ops.AssignAdd: ``ref += value`` in place (value may broadcast to ref's shape)."""
    return update_in_place("AssignAdd", np.add)


@register_kernel("AssignSub", "CPU")
def assign_sub(attrs):
    """tf.raw_ops.AssignSub: ``ref -= value`` in place (value may broadcast to ref's shape)."""
    return update_in_place("AssignSub", np.subtract)


# Scatter modes, one numba kernel for all seven so they share one compiled loop per dtype.
_ADD, _SUB, _UPDATE, _MUL, _MAX, _MIN, _DIV = range(7)


@njit(cache=True, nogil=True, error_model="numpy")  # x / 0.0 is inf, not an exception
def _scatter(ref, indices, updates, mode):
    """Applies updates[i] to row indices[i] of ref (2-D views); returns -1, or the position of the
    first out-of-range index (then ref is untouched)."""
    rows, width = ref.shape
    # Check every index before touching ref, so a bad index leaves the variable unchanged.
    for i in range(indices.shape[0]):
        if indices[i] < 0 or indices[i] >= rows:
            return i
    for i in range(indices.shape[0]):
        r = indices[i]
        # mode is one of _ADD.._MIN; branching per row keeps each inner loop vectorisable.
        if mode == 0:
            for j in range(width):
                ref[r, j] += updates[i, j]
        elif mode == 1:
            for j in range(width):
                ref[r, j] -= updates[i, j]
        elif mode == 2:
            for j in range(width):
                ref[r, j] = updates[i, j]
        elif mode == 3:
            for j in range(width):
                ref[r, j] *= updates[i, j]
        elif mode == 4:
            for j in range(width):
                if updates[i, j] > ref[r, j]:
                    ref[r, j] = updates[i, j]
        elif mode == 5:
            for j in range(width):
                if updates[i, j] < ref[r, j]:
                    ref[r, j] = updates[i, j]
        else:
            for j in range(width):
                # Floats only: integer variables divide in _int_div (exactly, truncating).
                ref[r, j] = ref[r, j] / updates[i, j]
    return -1


def _scatter_cost(ref, indices, updates):
    return int(np.size(updates)) + int(np.size(indices))


def _int_div(op_name, ref, idx, upd, indices):
    """ScatterDiv of an integer variable: rows divided in index order, rounded toward zero like C's
    (and TF's) `/`, in integer arithmetic; a bad index or a zero divisor changes nothing."""
    bad = np.nonzero((idx < 0) | (idx >= ref.shape[0]))[0]
    if bad.size:
        raise IndexError(f"{op_name}: indices[{int(bad[0])}] = {int(idx[bad[0]])} is not in [0, {ref.shape[0]}) "
                         f"(the variable's first dimension is {ref.shape[0]})")
    if not upd.all():
        raise InvalidArgumentError(f"{op_name}: integer division by zero (an update of variable dtype {ref.dtype} is 0)")
    rows = ref.reshape(ref.shape[0], -1) if ref.flags.c_contiguous else ref.reshape(ref.shape[0], -1).copy()
    for i, r in enumerate(idx):
        a, b = rows[r], upd[i]
        q = np.abs(a) // np.abs(b) if ref.dtype.kind == "i" else a // b
        rows[r] = np.where((a < 0) != (b < 0), -q, q) if ref.dtype.kind == "i" else q
    if not ref.flags.c_contiguous:
        np.copyto(ref, rows.reshape(ref.shape))
    return ref


def _scatter_kernel(op_name, mode):
    def fn(ref, indices, updates):
        if ref.ndim == 0:
            raise ValueError(f"{op_name}: variable must have rank >= 1, got a scalar")
        indices, updates = np.asarray(indices), value_of(op_name, ref, updates)
        if indices.dtype.kind not in "iu":
            raise TypeError(f"{op_name}: indices must be integers, got {indices.dtype}")
        want = indices.shape + ref.shape[1:]
        if updates.shape != want and updates.ndim != 0:
            raise ValueError(f"{op_name}: updates must have shape indices.shape + variable.shape[1:] = "
                             f"{want} (or be a scalar), got {updates.shape}")
        idx = indices.reshape(-1).astype(np.int64, copy=False)
        width = int(np.prod(ref.shape[1:]))
        upd = np.broadcast_to(updates, want) if updates.ndim == 0 else updates
        upd = np.ascontiguousarray(upd, dtype=ref.dtype).reshape(idx.shape[0], width)
        if mode == _DIV and ref.dtype.kind in "iu":
            return _int_div(op_name, ref, idx, upd, indices)
        if ref.flags.c_contiguous:
            bad = _scatter(ref.reshape(ref.shape[0], width), idx, upd, mode)
        else:
            # A strided buffer cannot be flattened to a view; run on a copy and write it back.
            tmp = np.ascontiguousarray(ref)
            bad = _scatter(tmp.reshape(ref.shape[0], width), idx, upd, mode)
            if bad < 0:
                np.copyto(ref, tmp)
        if bad >= 0:
            pos = ", ".join(str(int(p)) for p in np.unravel_index(bad, indices.shape)) if indices.ndim > 1 else bad
            raise IndexError(f"{op_name}: indices[{pos}] = {int(idx[bad])} is not in [0, {ref.shape[0]}) "
                             f"(the variable's first dimension is {ref.shape[0]})")
        return ref
    return fn


@register_kernel("ScatterAdd", "CPU", cost=_scatter_cost)
def scatter_add(attrs):
    """tf.raw_ops.ScatterAdd: ``ref[indices] += updates``; duplicate indices accumulate."""
    return _scatter_kernel("ScatterAdd", _ADD)


@register_kernel("ScatterSub", "CPU", cost=_scatter_cost)
def scatter_sub(attrs):
    """tf.raw_ops.ScatterSub: ``ref[indices] -= updates``; duplicate indices accumulate."""
    return _scatter_kernel("ScatterSub", _SUB)


@register_kernel("ScatterUpdate", "CPU", cost=_scatter_cost)
def scatter_update(attrs):
    """tf.raw_ops.ScatterUpdate: ``ref[indices] = updates``; of duplicate indices the last wins
    (TF leaves the order unspecified)."""
    return _scatter_kernel("ScatterUpdate", _UPDATE)


@register_kernel("ScatterMul", "CPU", cost=_scatter_cost)
def scatter_mul(attrs):
    """tf.raw_ops.ScatterMul: ``ref[indices] *= updates``; duplicate indices multiply."""
    return _scatter_kernel("ScatterMul", _MUL)


@register_kernel("ScatterMax", "CPU", cost=_scatter_cost)
def scatter_max(attrs):
    """tf.raw_ops.ScatterMax: ``ref[indices] = max(ref[indices], updates)``."""
    return _scatter_kernel("ScatterMax", _MAX)


@register_kernel("ScatterMin", "CPU", cost=_scatter_cost)
def scatter_min(attrs):
    """tf.raw_ops.ScatterMin: ``ref[indices] = min(ref[indices], updates)``."""
    return _scatter_kernel("ScatterMin", _MIN)


@register_kernel("ScatterDiv", "CPU", cost=_scatter_cost)
def scatter_div(attrs):
    """tf.raw_ops.ScatterDiv: ``ref[indices] /= updates``; duplicate indices divide in turn."""
    return _scatter_kernel("ScatterDiv", _DIV)


def _scatter_nd_kernel(op_name, apply):
    def fn(ref, indices, updates):
        updates = value_of(op_name, ref, updates)
        indices = np.asarray(indices)
        _check_updates(op_name, updates, indices, ref.shape)
        index = _index_tuple(op_name, indices, ref.shape)
        apply(ref, index, updates.astype(ref.dtype, copy=False))
        return ref
    return fn


def _set(ref, index, updates):
    ref[index] = updates


@register_kernel("ScatterNdAdd", "CPU", cost=_scatter_cost)
def scatter_nd_add(attrs):
    """tf.raw_ops.ScatterNdAdd: ``ref[indices] += updates`` over the slices that the innermost index
    vectors address; duplicates accumulate."""
    return _scatter_nd_kernel("ScatterNdAdd", np.add.at)


@register_kernel("ScatterNdSub", "CPU", cost=_scatter_cost)
def scatter_nd_sub(attrs):
    """tf.raw_ops.ScatterNdSub: ``ref[indices] -= updates``; duplicates accumulate."""
    return _scatter_nd_kernel("ScatterNdSub", np.subtract.at)


@register_kernel("ScatterNdUpdate", "CPU", cost=_scatter_cost)
def scatter_nd_update(attrs):
    """tf.raw_ops.ScatterNdUpdate: ``ref[indices] = updates``; of duplicates the last wins (TF leaves the
    order unspecified)."""
    return _scatter_nd_kernel("ScatterNdUpdate", _set)


@register_kernel("CountUpToIncrement", "CPU", releases_gil=False)
def count_up_to_increment(attrs):
    """train/input.py's counter: ``ref += 1`` in place unless ref has reached `limit`, then
    OutOfRangeError (TF's CountUpTo)."""
    limit = int(attrs["limit"])

    def fn(ref):
        if int(ref) >= limit:
            raise OutOfRangeError(f"Reached limit of {limit}")
        ref += 1
        return ref
    return fn
