"""CPU kernels for shape and array-manipulation ops (TF's `array_ops`, plus segment and stitch ops).

Tensors are immutable by contract, so kernels that only re-view their input (Identity, Reshape,
ExpandDims, Squeeze, and Slice/Split/Unpack pieces that are contiguous anyway) return numpy
views instead of copies. Anything that would be a strided view is made contiguous: downstream
kernels, numba loops and the transport all prefer, or need, contiguous buffers.

Index errors (out-of-range gather indices, segment ids, slice bounds) raise
InvalidArgumentError with TF's wording; numpy would wrap negative indices silently.
"""
from __future__ import annotations

import math
import operator
from functools import lru_cache

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.lazy_numba import njit
from actorflow.kernels.registry import register_kernel


def _register_fn(op_type: str, fn, **kw) -> None:
    """Registers a kernel that needs no attributes: its factory returns `fn` itself."""
    register_kernel(op_type, "CPU", **kw)(lambda attrs, _fn=fn: _fn)


def _unit_cost(*inputs) -> int:
    """Work of a kernel that only re-views or inspects its input."""
    return 1


def _contiguous(a):
    # np.ascontiguousarray would turn a 0-d array into shape (1,).
    return a if a.flags.c_contiguous else a.copy()


def _int_list(v, op: str, what: str) -> list:
    """A 1-D integer tensor (a shape, begin, multiples...) as a list of Python ints."""
    v = np.asarray(v)
    if v.ndim != 1:
        raise InvalidArgumentError(f"{op}: {what} must be a 1-D tensor, got shape {list(v.shape)}")
    if v.dtype.kind not in "iu":
        raise InvalidArgumentError(f"{op}: {what} must be an integer tensor, got {v.dtype.name}")
    return v.tolist()


def _axis(value, ndim: int, op: str, name: str = "axis") -> int:
    """A scalar axis normalized into ``[0, ndim)``."""
    try:
        a = operator.index(value)  # Python and numpy integers, 0-d integer arrays
    except TypeError:
        v = np.asarray(value)
        if v.size != 1 or v.dtype.kind not in "iu":
            raise InvalidArgumentError(f"{op}: {name} must be an integer scalar, got "
                                       f"{v.dtype.name} of shape {list(v.shape)}") from None
        a = int(v.reshape(()))
    if not -ndim <= a < ndim:
        raise InvalidArgumentError(f"{op}: Expected {name} in the range [{-ndim}, {ndim}), but got {a}")
    return a + ndim if a < 0 else a


def _out_of_range(op: str, name: str, values, lo: int, hi: int):
    """InvalidArgumentError naming the first entry of `values` outside ``[lo, hi)``."""
    flat = np.asarray(values).reshape(-1)
    i = int(np.flatnonzero((flat < lo) | (flat >= hi))[0])
    where = ",".join(str(int(k)) for k in np.unravel_index(i, np.shape(values))) if np.ndim(values) else ""
    return InvalidArgumentError(f"{op}: {name}[{where}] = {flat[i]} is not in [{lo}, {hi})")


# ---------------------------------------------------------------------------------------------
# Identity and re-views.

def identity(x):
    """Returns its input; tf.identity, tf.stop_gradient, tf.placeholder_with_default."""
    return x


for _op in ("Identity", "StopGradient", "PlaceholderWithDefault", "Snapshot"):
    _register_fn(_op, identity, cost=_unit_cost, releases_gil=False)


def reshape(tensor, shape):
    """tf.reshape: one dimension may be -1 and is inferred; returns a view when it can."""
    dims = _int_list(shape, "Reshape", "shape")
    try:
        return tensor.reshape(dims)
    except ValueError:
        known = math.prod(d for d in dims if d != -1)
        if dims.count(-1) > 1:
            msg = f"can only specify one unknown dimension, got shape {dims}"
        elif any(d < -1 for d in dims):
            msg = f"size {min(dims)} must be non-negative, got shape {dims}"
        else:
            msg = (f"Input to reshape is a tensor with {tensor.size} values, but the requested "
                   f"shape {dims} has {known}" + (" (times the inferred dimension)" if -1 in dims else ""))
        raise InvalidArgumentError(f"Reshape: {msg}") from None


_register_fn("Reshape", reshape, cost=_unit_cost, releases_gil=False)


def transpose(x, perm):
    """tf.transpose: permutes dimensions; output dimension i is input dimension perm[i]."""
    p = _int_list(perm, "Transpose", "perm")
    if sorted(p) != list(range(np.ndim(x))):
        raise InvalidArgumentError(f"Transpose: perm {p} is not a permutation of the {x.ndim} "
                                   f"dimensions of a tensor of shape {list(x.shape)}")
    return _contiguous(np.transpose(x, p))


_register_fn("Transpose", transpose)


def expand_dims(x, axis):
    """tf.expand_dims: inserts a size-1 dimension at `axis` in ``[-rank-1, rank]``; a view."""
    shape = x.shape
    a = _axis(axis, len(shape) + 1, "ExpandDims")
    return x.reshape(shape[:a] + (1,) + shape[a:])


_register_fn("ExpandDims", expand_dims, cost=_unit_cost, releases_gil=False)


@register_kernel("Squeeze", "CPU", cost=_unit_cost, releases_gil=False)
def squeeze_kernel(attrs):
    """tf.squeeze: drops the size-1 dimensions listed in `squeeze_dims` (all of them if empty)."""
    dims = tuple(attrs.get("squeeze_dims", attrs.get("axis", ())) or ())

    def squeeze(x):
        shape = np.shape(x)
        if not dims:
            return np.reshape(x, tuple(d for d in shape if d != 1))
        drop = set()
        for d in dims:
            if not -len(shape) <= d < len(shape):
                raise InvalidArgumentError(f"Squeeze: Tried to squeeze dim index {d} for a tensor "
                                           f"of shape {list(shape)}")
            d %= len(shape)
            if shape[d] != 1:
                raise InvalidArgumentError(f"Squeeze: Can not squeeze dim[{d}], expected a "
                                           f"dimension of 1, got {shape[d]}")
            drop.add(d)
        return np.reshape(x, tuple(s for i, s in enumerate(shape) if i not in drop))
    return squeeze


# ---------------------------------------------------------------------------------------------
# Concatenation, splitting, stacking.

def concat_v2(*inputs):
    """tf.concat (raw op ConcatV2): the last input is the axis."""
    values, axis = inputs[:-1], inputs[-1]
    ndim = np.ndim(values[0])
    if ndim == 0:
        raise InvalidArgumentError("ConcatV2: Can't concatenate scalars (use tf.stack instead)")
    a = _axis(axis, ndim, "ConcatV2")
    if len(values) == 1:
        return values[0]
    try:
        return np.concatenate(values, axis=a)
    except ValueError:
        shapes = [list(np.shape(v)) for v in values]
        raise InvalidArgumentError(f"ConcatV2: Dimensions of inputs should match except on axis "
                                   f"{a}: shapes {shapes}") from None


_register_fn("ConcatV2", concat_v2)


def _split_cost(axis, value, *rest):
    # Splitting along the first axis only creates views.
    return 1 if int(np.asarray(axis).reshape(())) in (0, -value.ndim) else value.size


def _splitv_cost(value, size_splits, axis):
    return _split_cost(axis, value)


@register_kernel("Split", "CPU", cost=_split_cost)
def split_kernel(attrs):
    """tf.split with a number of splits (raw op Split; inputs axis, value)."""
    num = int(attrs["num_split"])

    def split(axis, value):
        a = _axis(axis, value.ndim, "Split")
        n = value.shape[a]
        if num <= 0 or n % num:
            raise InvalidArgumentError(
                f"Split: Number of ways to split should evenly divide the split dimension, but got "
                f"split_dim {a} (size = {n}) and num_split {num}")
        if num == 1:        # one output: the runtime takes a single-output kernel's value bare, not in a tuple
            return value
        return tuple(_contiguous(p) for p in np.split(value, num, axis=a))
    return split


@register_kernel("SplitV", "CPU", cost=_splitv_cost)
def split_v_kernel(attrs):
    """tf.split with explicit sizes (raw op SplitV); one size may be -1 (inferred)."""
    num = int(attrs.get("num_split", 0))

    def split_v(value, size_splits, axis):
        a = _axis(axis, value.ndim, "SplitV")
        sizes = _int_list(size_splits, "SplitV", "size_splits")
        n = value.shape[a]
        if num and len(sizes) != num:
            raise InvalidArgumentError(f"SplitV: size_splits has {len(sizes)} entries, "
                                       f"but num_split is {num}")
        if sizes.count(-1) > 1:
            raise InvalidArgumentError("SplitV: There can only be one -1 in the input size_splits")
        if -1 in sizes:
            sizes[sizes.index(-1)] = n - (sum(sizes) + 1)
        if any(s < 0 for s in sizes) or sum(sizes) != n:
            raise InvalidArgumentError(
                f"SplitV: Determined shape must either match input shape along split_dim exactly "
                f"if fully specified, or be less than the size of the input along split_dim if not "
                f"fully specified. Got size_splits {_int_list(size_splits, 'SplitV', 'size_splits')} "
                f"for dimension {a} of size {n}")
        if len(sizes) == 1:     # one output: returned bare, as every single-output kernel's
            return value
        bounds = np.cumsum(sizes[:-1]).tolist()
        return tuple(_contiguous(p) for p in np.split(value, bounds, axis=a))
    return split_v


@register_kernel("Pack", "CPU")
def pack_kernel(attrs):
    """tf.stack (raw op Pack): stacks N equal-shaped tensors along a new `axis`."""
    axis = int(attrs.get("axis", 0))

    def pack(*values):
        ndim = np.ndim(values[0])
        if not -ndim - 1 <= axis <= ndim:
            raise InvalidArgumentError(f"Pack: axis {axis} is out of range [{-ndim - 1}, {ndim}] for "
                                       f"values of rank {ndim}")
        shape = np.shape(values[0])
        for i, v in enumerate(values):
            if np.shape(v) != shape:
                raise InvalidArgumentError(f"Pack: Shapes of all inputs must match: values[0].shape = "
                                           f"{list(shape)} != values[{i}].shape = {list(np.shape(v))}")
        return np.stack(values, axis=axis)
    return pack


@register_kernel("Unpack", "CPU", releases_gil=False)
def unpack_kernel(attrs):
    """tf.unstack (raw op Unpack): splits along `axis` into `num` tensors of one rank less."""
    num = attrs.get("num")
    axis = int(attrs.get("axis", 0))

    def unpack(value):
        a = _axis(axis, value.ndim, "Unpack")
        n = value.shape[a]
        if num is not None and n != int(num):
            raise InvalidArgumentError(f"Unpack: Input shape axis {a} must equal {num}, got shape "
                                       f"{list(value.shape)}")
        if n == 1:          # one output: returned bare, as every single-output kernel's
            return _contiguous(np.squeeze(value, a))
        if a == 0:
            return tuple(value)
        return tuple(_contiguous(v) for v in np.moveaxis(value, a, 0))
    return unpack


# ---------------------------------------------------------------------------------------------
# Slicing.

def _slice_spec(x, begin, size) -> tuple:
    b = _int_list(begin, "Slice", "begin")
    s = _int_list(size, "Slice", "size")
    shape = np.shape(x)
    if len(b) != len(shape) or len(s) != len(shape):
        raise InvalidArgumentError(f"Slice: Expected begin and size arguments to be 1-D tensors of "
                                   f"size {len(shape)}, but got shapes [{len(b)}] and [{len(s)}] instead")
    spec = []
    for i, (bi, si, d) in enumerate(zip(b, s, shape)):
        if si == -1:
            si = d - bi
        if not 0 <= bi <= d:
            raise InvalidArgumentError(f"Slice: Expected begin[{i}] in [0, {d}], but got {bi}")
        if not 0 <= si <= d - bi:
            raise InvalidArgumentError(f"Slice: Expected size[{i}] in [0, {d - bi}], but got {si}")
        spec.append(slice(bi, bi + si))
    return tuple(spec)


def slice_(x, begin, size):
    """tf.slice (raw op Slice): `size` -1 means "to the end of that dimension"."""
    return _contiguous(np.asarray(x)[_slice_spec(x, begin, size)])


def _slice_cost(x, begin, size):
    try:
        return np.asarray(x)[_slice_spec(x, begin, size)].size
    except InvalidArgumentError:
        return 1


_register_fn("Slice", slice_, cost=_slice_cost)

_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def strided_slice_spec(rank: int, begin, end, strides, masks) -> tuple:
    """The numpy index tuple equivalent to a TF strided slice (raw op StridedSlice).

    `begin`, `end`, `strides` are sequences of ints; `masks` maps begin_mask, end_mask,
    ellipsis_mask, new_axis_mask and shrink_axis_mask to ints (absent = 0), e.g. the op's attrs.
    The result holds ``slice`` objects, ints (shrunk axes) and None (new axes), with the ellipsis
    expanded for an input of `rank` dimensions, so ``x[spec]`` is the forward result and
    ``dx[spec] = dy`` scatters its gradient.

    Entry i is, in TF's order of precedence: the ellipsis if bit i of ellipsis_mask is set, a new
    axis if bit i of new_axis_mask is, an index ``begin[i]`` if bit i of shrink_axis_mask is, and
    otherwise ``begin[i]:end[i]:strides[i]`` with begin (end) left open where begin_mask
    (end_mask) has bit i set. Python's slice clamping of out-of-range bounds is exactly TF's.
    Raises InvalidArgumentError for TF's spec errors (several ellipses, zero strides, a
    non-positive stride on a shrunk axis, more indexed dimensions than `rank`). A shrunk index
    out of range is caught when the spec is applied.
    """
    m = [int(masks.get(k, 0) or 0) for k in _MASKS]
    return _strided_slice_spec(int(rank), tuple(int(v) for v in begin), tuple(int(v) for v in end),
                               tuple(int(v) for v in strides), tuple(m))


@lru_cache(maxsize=1024)
def _strided_slice_spec(rank, begin, end, strides, masks) -> tuple:
    begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_mask = masks
    n = len(strides)
    if len(begin) != n or len(end) != n:
        raise InvalidArgumentError(
            f"StridedSlice: Expected begin, end, and strides to be 1D equal size tensors, but got "
            f"shapes [{len(begin)}], [{len(end)}], and [{n}] instead.")
    if ellipsis_mask & (ellipsis_mask - 1):
        raise InvalidArgumentError("StridedSlice: Multiple ellipses in slice spec not allowed")
    # Entries that consume an input dimension: neither the ellipsis nor a new axis.
    n_real = sum(1 for i in range(n) if not (ellipsis_mask >> i) & 1 and not (new_axis_mask >> i) & 1)
    if n_real > rank:
        raise InvalidArgumentError(f"StridedSlice: Index out of range using input dim {rank}; "
                                   f"input has only {rank} dims")
    spec = []
    for i in range(n):
        if (ellipsis_mask >> i) & 1:
            spec.extend([slice(None)] * (rank - n_real))
        elif (new_axis_mask >> i) & 1:
            spec.append(None)
        else:
            s = strides[i]
            if s == 0:
                raise InvalidArgumentError(f"StridedSlice: strides[{i}] must be non-zero")
            if (shrink_mask >> i) & 1:
                if s < 0:
                    raise InvalidArgumentError(
                        "StridedSlice: only stride 1 allowed on non-range indexing.")
                spec.append(begin[i])
            else:
                spec.append(slice(None if (begin_mask >> i) & 1 else begin[i],
                                  None if (end_mask >> i) & 1 else end[i], s))
    return tuple(spec)


def _apply_spec_error(op: str, spec, shape) -> InvalidArgumentError:
    dim = 0
    for entry in spec:
        if entry is None:
            continue
        if type(entry) is int and not -shape[dim] <= entry < shape[dim]:
            return InvalidArgumentError(f"{op}: slice index {entry} of dimension {dim} out of bounds.")
        dim += 1
    return InvalidArgumentError(f"{op}: cannot apply slice spec {spec} to shape {list(shape)}")


def _masks(attrs) -> tuple:
    return tuple(int(attrs.get(k, 0) or 0) for k in _MASKS)


# No cost function: it could not see the masks, and the input size is a safe upper bound.
@register_kernel("StridedSlice", "CPU")
def strided_slice_kernel(attrs):
    """tf.strided_slice (raw op StridedSlice) with TF's begin/end/ellipsis/new-axis/shrink masks."""
    masks = _masks(attrs)

    def strided_slice(x, begin, end, strides):
        x = np.asarray(x)
        spec = _strided_slice_spec(x.ndim, tuple(begin.tolist()), tuple(end.tolist()),
                                   tuple(strides.tolist()), masks)
        try:
            r = x[spec]
        except IndexError:
            raise _apply_spec_error("StridedSlice", spec, x.shape) from None
        return _contiguous(r) if type(r) is np.ndarray else r
    return strided_slice


def _strided_slice_grad_cost(shape, begin, end, strides, dy):
    return int(np.prod(shape)) + dy.size


@register_kernel("StridedSliceGrad", "CPU", cost=_strided_slice_grad_cost)
def strided_slice_grad_kernel(attrs):
    """Gradient of StridedSlice (raw op StridedSliceGrad): scatters dy into zeros of `shape`."""
    masks = _masks(attrs)

    def strided_slice_grad(shape, begin, end, strides, dy):
        dims = tuple(_int_list(shape, "StridedSliceGrad", "shape"))
        spec = _strided_slice_spec(len(dims), tuple(begin.tolist()), tuple(end.tolist()),
                                   tuple(strides.tolist()), masks)
        dx = np.zeros(dims, dtype=np.asarray(dy).dtype)
        try:
            view_shape = np.shape(dx[spec])
            if view_shape != np.shape(dy):
                raise InvalidArgumentError(
                    f"StridedSliceGrad: shape of dy {list(np.shape(dy))} does not match the shape "
                    f"{list(view_shape)} of the slice")
            dx[spec] = dy
        except IndexError:
            raise _apply_spec_error("StridedSliceGrad", spec, dims) from None
        return dx
    return strided_slice_grad


# ---------------------------------------------------------------------------------------------
# Tiling, padding, broadcasting, filling.

def _tile_cost(x, multiples):
    return np.size(x) * math.prod(int(m) for m in np.asarray(multiples).reshape(-1))


def tile(x, multiples):
    """tf.tile: repeats the input `multiples[i]` times along dimension i."""
    reps = _int_list(multiples, "Tile", "multiples")
    if len(reps) != np.ndim(x):
        raise InvalidArgumentError(f"Tile: Expected multiples argument to be a vector of length "
                                   f"{np.ndim(x)} but got length {len(reps)}")
    if any(r < 0 for r in reps):
        raise InvalidArgumentError(f"Tile: Expected multiples to be non-negative, got {reps}")
    if all(r == 1 for r in reps):
        return x
    return np.tile(x, reps)


_register_fn("Tile", tile, cost=_tile_cost)


def _pad(op: str, x, paddings, value, xp=np):
    """Pad/PadV2 on numpy arrays, or with `xp` another array module's (the GPU kernels pass CuPy)."""
    if xp is np:
        x = np.asarray(x)
    p = np.asarray(paddings)
    if p.shape != (x.ndim, 2):
        raise InvalidArgumentError(f"{op}: The first dimension of paddings must be the rank of "
                                   f"inputs [{x.ndim}, 2], got {list(p.shape)}")
    pads = p.tolist()
    if any(a < 0 or b < 0 for a, b in pads):
        raise InvalidArgumentError(f"{op}: Paddings must be non-negative: {pads}")
    if not any(a or b for a, b in pads):
        return x
    shape = tuple(d + a + b for d, (a, b) in zip(x.shape, pads))
    # np.pad walks the array in Python; one fill plus one block copy is several times faster.
    out = xp.zeros(shape, x.dtype) if value == 0 else xp.full(shape, value, x.dtype)
    out[tuple(slice(a, a + d) for d, (a, _) in zip(x.shape, pads))] = x
    return out


def _pad_cost(x, paddings, *rest):
    p = np.asarray(paddings)
    shape = np.shape(x)
    if p.shape != (len(shape), 2):
        return 1
    return math.prod(d + int(a) + int(b) for d, (a, b) in zip(shape, p.tolist()))


def pad(x, paddings):
    """tf.pad with zeros (raw op Pad): `paddings` is [rank, 2] of (before, after) counts."""
    return _pad("Pad", x, paddings, 0)


def pad_v2(x, paddings, constant_values):
    """tf.pad with a constant (raw op PadV2)."""
    return _pad("PadV2", x, paddings, np.asarray(constant_values).reshape(()))


_register_fn("Pad", pad, cost=_pad_cost)
_register_fn("PadV2", pad_v2, cost=_pad_cost)


def _shape_arg_size(shape) -> int:
    return max(1, math.prod(max(int(d), 0) for d in np.asarray(shape).reshape(-1)))


def broadcast_to(x, shape):
    """tf.broadcast_to: numpy broadcasting to `shape`, materialized as a contiguous array."""
    dims = tuple(_int_list(shape, "BroadcastTo", "shape"))
    if np.shape(x) == dims:
        return x
    try:
        return np.broadcast_to(x, dims).copy()
    except ValueError:
        raise InvalidArgumentError(f"BroadcastTo: Incompatible shapes: {list(np.shape(x))} "
                                   f"vs. {list(dims)}") from None


_register_fn("BroadcastTo", broadcast_to, cost=lambda x, shape: _shape_arg_size(shape))


def fill(dims, value):
    """tf.fill: a tensor of shape `dims` filled with the scalar `value` (of value's dtype)."""
    shape = tuple(_int_list(dims, "Fill", "dims"))
    if any(d < 0 for d in shape):
        raise InvalidArgumentError(f"Fill: dims must be non-negative, got {list(shape)}")
    v = np.asarray(value)
    if v.ndim != 0:
        raise InvalidArgumentError(f"Fill: value must be a scalar, got shape {list(v.shape)}")
    return np.full(shape, v, dtype=v.dtype)


_register_fn("Fill", fill, cost=lambda dims, value: _shape_arg_size(dims))


def zeros_like(x):
    """tf.zeros_like: zeros of x's shape and dtype (for a tensor list, a list of unset elements)."""
    if x.dtype.kind == "O" and x.ndim == 0:
        from actorflow.kernels.cpu.tensor_list import TensorList, zeros_list
        if isinstance(x[()], TensorList):
            return zeros_list(x)
    if x.dtype.kind == "O":               # strings: the empty string
        return np.full(x.shape, b"", dtype=object)
    return np.zeros_like(x)


def ones_like(x):
    """tf.ones_like: ones of x's shape and dtype."""
    return np.ones_like(x)


_register_fn("ZerosLike", zeros_like)
_register_fn("OnesLike", ones_like)


@register_kernel("OneHot", "CPU",
                 cost=lambda indices, depth, on, off: np.size(indices) * max(1, int(depth)))
def one_hot_kernel(attrs):
    """tf.one_hot (raw op OneHot): a new dimension of size `depth` at `axis` (-1 = last).

    Indices outside ``[0, depth)`` give a row of `off_value`, as in TF.
    """
    axis = int(attrs.get("axis", -1))

    def one_hot(indices, depth, on_value, off_value):
        idx = np.asarray(indices)
        d = int(depth)
        if d < 0:
            raise InvalidArgumentError(f"OneHot: depth must be non-negative, got {d}")
        if not -1 <= axis <= idx.ndim:
            raise InvalidArgumentError(f"OneHot: Expected axis to be -1 or between [0, {idx.ndim}]. "
                                       f"But received: {axis}")
        a = idx.ndim if axis == -1 else axis
        classes = np.arange(d).reshape((d,) + (1,) * (idx.ndim - a))
        hot = idx.reshape(idx.shape[:a] + (1,) + idx.shape[a:]) == classes
        return np.where(hot, on_value, off_value)
    return one_hot


def range_(start, limit, delta):
    """tf.range (raw op Range): ``start + i * delta`` for i in ``[0, ceil((limit - start) / delta))``.

    The dtype is the inputs' dtype; the size and the values are computed in that dtype, as TF does.
    """
    dt = np.result_type(start, limit, delta)
    start, limit, delta = (np.asarray(v, dtype=dt).reshape(()) for v in (start, limit, delta))
    if delta == 0:
        raise InvalidArgumentError("Range: Requires delta != 0")
    if delta > 0 and start > limit:
        raise InvalidArgumentError(f"Range: Requires start <= limit when delta > 0: {start}/{limit}")
    if delta < 0 and start < limit:
        raise InvalidArgumentError(f"Range: Requires start >= limit when delta < 0: {start}/{limit}")
    if dt.kind in "iu":
        span, step = abs(int(limit) - int(start)), abs(int(delta))
        return np.arange(int(start), int(start) + (span + step - 1) // step * int(delta), int(delta),
                         dtype=dt)
    size = int(np.ceil(np.abs((limit - start) / delta)))
    out = np.arange(size, dtype=dt)
    out *= delta
    out += start
    return out


def _range_cost(start, limit, delta):
    try:
        return max(1, int(abs((float(limit) - float(start)) / float(delta))))
    except (ZeroDivisionError, ValueError, OverflowError):
        return 1


_register_fn("Range", range_, cost=_range_cost)


# ---------------------------------------------------------------------------------------------
# Shape inspection.

@register_kernel("Shape", "CPU", cost=_unit_cost, releases_gil=False, metadata_only=True)
def shape_kernel(attrs):
    """tf.shape (raw op Shape): the input's shape as a 1-D `out_type` tensor (default int32)."""
    out_type = np.dtype(attrs.get("out_type", np.int32))

    def shape(x):
        return np.array(np.shape(x), dtype=out_type)
    return shape


@register_kernel("Size", "CPU", cost=_unit_cost, releases_gil=False, metadata_only=True)
def size_kernel(attrs):
    """tf.size (raw op Size): the number of elements, as an `out_type` scalar (default int32)."""
    scalar = np.dtype(attrs.get("out_type", np.int32)).type

    def size(x):
        return scalar(np.size(x))
    return size


def rank(x):
    """tf.rank (raw op Rank): the number of dimensions, as an int32 scalar."""
    return np.int32(np.ndim(x))


_register_fn("Rank", rank, cost=_unit_cost, releases_gil=False, metadata_only=True)


def broadcast_gradient_args(s0, s1):
    """The axes to sum a broadcast result's gradient over, for each operand (BroadcastGradientArgs).

    Follows TF's BCast exactly: identical shapes need no reduction; otherwise an axis is reduced
    for an operand whose (1-extended) dimension is 1 where the output's is not, and for *both*
    operands where both are 1. Outputs have the inputs' integer dtype (int32 as a rule).
    """
    x = _int_list(s0, "BroadcastGradientArgs", "s0")
    y = _int_list(s1, "BroadcastGradientArgs", "s1")
    dt = np.asarray(s0).dtype if np.asarray(s0).dtype == np.int64 else np.dtype(np.int32)
    if x == y:
        return np.empty(0, dt), np.empty(0, dt)
    n = max(len(x), len(y))
    x = [1] * (n - len(x)) + x
    y = [1] * (n - len(y)) + y
    rx, ry = [], []
    for i, (a, b) in enumerate(zip(x, y)):
        if a == b:
            if a == 1:
                rx.append(i)
                ry.append(i)
        elif a == 1:
            rx.append(i)
        elif b == 1:
            ry.append(i)
        else:
            raise InvalidArgumentError(f"BroadcastGradientArgs: Incompatible shapes: "
                                       f"{_int_list(s0, '', '')} vs. {_int_list(s1, '', '')}")
    return np.array(rx, dtype=dt), np.array(ry, dtype=dt)


_register_fn("BroadcastGradientArgs", broadcast_gradient_args, cost=_unit_cost, releases_gil=False)


def broadcast_args(s0, s1):
    """tf.raw_ops.BroadcastArgs: the shape `s0` and `s1` broadcast to, in their dtype."""
    x = _int_list(s0, "BroadcastArgs", "s0")
    y = _int_list(s1, "BroadcastArgs", "s1")
    try:
        out = np.broadcast_shapes(tuple(x), tuple(y))
    except ValueError:
        raise InvalidArgumentError(f"BroadcastArgs: Incompatible shapes: {x} vs. {y}") from None
    return np.array(out, dtype=np.asarray(s0).dtype)


_register_fn("BroadcastArgs", broadcast_args, cost=_unit_cost, releases_gil=False)


# ---------------------------------------------------------------------------------------------
# Gather.

# Below this many indices np.take is as fast and a first call never pays numba's compilation.
_NUMBA_GATHER_MIN = 1024
# Gathered by bit pattern: one compiled loop per element size serves every dtype of that size.
_UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@njit(cache=True, nogil=True)
def _gather_rows(params, indices, out):  # pragma: no cover - compiled
    """out[i, :] = params[indices[i], :]; returns the position of the first bad index, or -1."""
    n = params.shape[0]
    r = params.shape[1]
    for i in range(indices.shape[0]):
        j = indices[i]
        if j < 0 or j >= n:
            return i
        for k in range(r):
            out[i, k] = params[j, k]
    return -1


@njit(cache=True, nogil=True)
def _gather_elements(params, indices, out):  # pragma: no cover - compiled
    """out[i] = params[indices[i]]; returns the position of the first bad index, or -1."""
    n = params.shape[0]
    for i in range(indices.shape[0]):
        j = indices[i]
        if j < 0 or j >= n:
            return i
        out[i] = params[j]
    return -1


def _gather_axis0_numba(params, indices):
    n = params.shape[0]
    row = params.size // n
    udt = _UINT_OF_SIZE[params.dtype.itemsize]
    idx = indices.reshape(-1)
    out = np.empty((idx.shape[0], row), dtype=params.dtype)
    src = params.reshape(n, row).view(udt)
    dst = out.view(udt)
    bad = _gather_elements(src.reshape(-1), idx, dst.reshape(-1)) if row == 1 else _gather_rows(src, idx, dst)
    if bad >= 0:
        raise _out_of_range("GatherV2", "indices", indices, 0, n)
    return out.reshape(indices.shape + params.shape[1:])


def _gather_cost(params, indices, axis):
    # The output size, ignoring batch_dims (which only make the output smaller).
    try:
        n = np.shape(params)[int(np.asarray(axis).reshape(()))]
    except (IndexError, ValueError, TypeError):
        return np.size(indices)
    return np.size(indices) * (np.size(params) // n if n else 0) + np.size(indices)


@register_kernel("GatherV2", "CPU", cost=_gather_cost)
def gather_v2_kernel(attrs):
    """tf.gather (raw op GatherV2) with `batch_dims`.

    Output shape: ``params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis+1:]``.
    Indices outside ``[0, params.shape[axis])`` raise InvalidArgumentError (TF's CPU behaviour;
    numpy would wrap negative indices).
    """
    batch_dims = int(attrs.get("batch_dims", 0))

    def gather(params, indices, axis):
        params = np.asarray(params)
        indices = np.asarray(indices)
        if params.ndim == 0:
            raise InvalidArgumentError("GatherV2: params must be at least 1-D, got a scalar")
        a = _axis(axis, params.ndim, "GatherV2")
        bd = batch_dims + indices.ndim if batch_dims < 0 else batch_dims
        n = params.shape[a]
        if bd == 0:
            if (a == 0 and indices.size >= _NUMBA_GATHER_MIN and params.flags.c_contiguous
                    and params.size and indices.dtype.kind == "i" and indices.dtype.itemsize >= 4):
                return _gather_axis0_numba(params, indices)
            # np.take rejects indices >= n itself but would wrap negative ones.
            if indices.size and indices.min() < 0:
                raise _out_of_range("GatherV2", "indices", indices, 0, n)
            try:
                return np.take(params, indices, axis=a)
            except IndexError:
                raise _out_of_range("GatherV2", "indices", indices, 0, n) from None
        return _batched_gather(params, indices, a, bd)
    return gather


def _batched_gather(params, indices, axis: int, bd: int):
    if not 0 <= bd <= indices.ndim:
        raise InvalidArgumentError(f"GatherV2: batch_dims {bd} must be in [0, {indices.ndim}] "
                                   f"for indices of rank {indices.ndim}")
    if bd > axis:
        raise InvalidArgumentError(f"GatherV2: batch_dims ({bd}) must be less than or equal to "
                                   f"axis ({axis})")
    if params.shape[:bd] != indices.shape[:bd]:
        raise InvalidArgumentError(f"GatherV2: params.shape[:{bd}] = {list(params.shape[:bd])} must "
                                   f"equal indices.shape[:{bd}] = {list(indices.shape[:bd])}")
    n = params.shape[axis]
    if indices.size and (indices.min() < 0 or indices.max() >= n):
        raise _out_of_range("GatherV2", "indices", indices, 0, n)
    b = math.prod(params.shape[:bd])
    pre = math.prod(params.shape[bd:axis])
    post = math.prod(params.shape[axis + 1:])
    k = math.prod(indices.shape[bd:])
    p = params.reshape(b, pre, n, post)
    idx = indices.reshape(b, k)
    out = p[np.arange(b)[:, None, None], np.arange(pre)[None, :, None], idx[:, None, :]]
    return out.reshape(params.shape[:axis] + indices.shape[bd:] + params.shape[axis + 1:])


# ---------------------------------------------------------------------------------------------
# Segments, partitions, stitching, permutations.

@njit(cache=True, nogil=True)
def _segment_sum(data, ids, out):  # pragma: no cover - compiled
    """out[ids[i], :] += data[i, :], skipping negative ids; returns the first id >= len(out), or -1."""
    n = out.shape[0]
    r = data.shape[1]
    for i in range(ids.shape[0]):
        s = ids[i]
        if s < 0:
            continue
        if s >= n:
            return i
        for k in range(r):
            out[s, k] += data[i, k]
    return -1


_NUMBA_SEGMENT_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64))


def unsorted_segment_sum(data, segment_ids, num_segments):
    """tf.math.unsorted_segment_sum: ``out[s] = sum of data[i] where segment_ids[i] == s``.

    `segment_ids` has a prefix of data's shape. Negative ids are dropped (TF's behaviour);
    ids >= num_segments raise InvalidArgumentError. float16 accumulates in float32.
    """
    data = np.asarray(data)
    ids = np.asarray(segment_ids)
    num = int(num_segments)
    if num < 0:
        raise InvalidArgumentError(f"UnsortedSegmentSum: num_segments must be non-negative, got {num}")
    if data.shape[:ids.ndim] != ids.shape:
        raise InvalidArgumentError(f"UnsortedSegmentSum: data.shape = {list(data.shape)} does not "
                                   f"start with segment_ids.shape = {list(ids.shape)}")
    inner = data.shape[ids.ndim:]
    row = math.prod(inner)
    dt = data.dtype
    acc_dt = np.dtype(np.float32) if dt == np.float16 else dt
    flat_ids = ids.reshape(-1)
    if flat_ids.dtype.kind not in "iu":
        raise InvalidArgumentError(f"UnsortedSegmentSum: segment_ids must be integers, got {ids.dtype.name}")
    out = np.zeros((num, row), dtype=acc_dt)
    if flat_ids.size and row:
        if acc_dt in _NUMBA_SEGMENT_DTYPES:
            if flat_ids.dtype not in (np.int32, np.int64):
                flat_ids = flat_ids.astype(np.int64)
            src = np.ascontiguousarray(data.reshape(flat_ids.size, row), dtype=acc_dt)
            bad = _segment_sum(src, flat_ids, out)
        else:
            bad = -1 if flat_ids.max() < num else 0
            if bad < 0:
                keep = flat_ids >= 0
                np.add.at(out, flat_ids[keep], data.reshape(flat_ids.size, row)[keep])
        if bad >= 0:
            raise _out_of_range("UnsortedSegmentSum", "segment_ids",
                                np.where(ids < 0, 0, ids), 0, num)
    elif flat_ids.size and flat_ids.max() >= num:
        raise _out_of_range("UnsortedSegmentSum", "segment_ids", np.where(ids < 0, 0, ids), 0, num)
    return out.reshape((num,) + inner).astype(dt, copy=False)


_register_fn("UnsortedSegmentSum", unsorted_segment_sum)


@register_kernel("DynamicPartition", "CPU")
def dynamic_partition_kernel(attrs):
    """tf.dynamic_partition: output i holds, in order, the slices of data whose partition is i."""
    num = int(attrs["num_partitions"])

    def dynamic_partition(data, partitions):
        data = np.asarray(data)
        parts = np.asarray(partitions)
        if data.shape[:parts.ndim] != parts.shape:
            raise InvalidArgumentError(f"DynamicPartition: data.shape must start with "
                                       f"partitions.shape, got data.shape = {list(data.shape)}, "
                                       f"partitions.shape = {list(parts.shape)}")
        p = parts.reshape(-1)
        if p.size and (p.min() < 0 or p.max() >= num):
            raise _out_of_range("DynamicPartition", "partitions", parts, 0, num)
        flat = data.reshape((p.size,) + data.shape[parts.ndim:])
        if num == 1:        # one output: returned bare, as every single-output kernel's
            return flat
        if num <= 4:
            # A boolean mask per partition beats sorting when there are few partitions.
            return tuple(flat[p == i] for i in range(num))
        order = np.argsort(p, kind="stable")
        bounds = np.cumsum(np.bincount(p, minlength=num))[:-1].tolist()
        return tuple(np.split(flat[order], bounds))
    return dynamic_partition


def dynamic_stitch(*inputs):
    """tf.dynamic_stitch: ``merged[indices[m][i]] = data[m][i]``; later entries win ties.

    The first dimension of the result is ``max(index) + 1``; positions no index names are zero.
    """
    nm = len(inputs) // 2
    indices = [np.asarray(i) for i in inputs[:nm]]
    data = [np.asarray(d) for d in inputs[nm:]]
    elem = data[0].shape[indices[0].ndim:]
    for m, (i, d) in enumerate(zip(indices, data)):
        if d.shape != i.shape + elem:
            raise InvalidArgumentError(
                f"DynamicStitch: data[{m}].shape = {list(d.shape)} does not start with "
                f"indices[{m}].shape = {list(i.shape)} followed by {list(elem)}")
    idx = np.concatenate([i.reshape(-1) for i in indices]) if nm > 1 else indices[0].reshape(-1)
    vals = np.concatenate([d.reshape((i.size,) + elem) for i, d in zip(indices, data)]) \
        if nm > 1 else data[0].reshape((indices[0].size,) + elem)
    if idx.size == 0:
        return np.zeros((0,) + elem, dtype=data[0].dtype)
    if idx.min() < 0:
        raise _out_of_range("DynamicStitch", "indices", idx, 0, int(idx.max()) + 1)
    size = int(idx.max()) + 1
    # The position of the last entry naming each output row: the one that wins.
    winner = np.full(size, -1, dtype=np.int64)
    np.maximum.at(winner, idx, np.arange(idx.size, dtype=np.int64))
    written = winner >= 0
    if written.all():
        return vals[winner]
    out = np.zeros((size,) + elem, dtype=data[0].dtype)
    out[written] = vals[winner[written]]
    return out


_register_fn("DynamicStitch", dynamic_stitch)


def invert_permutation(x):
    """tf.math.invert_permutation: ``y[x[i]] = i`` for a permutation x of ``0..n-1``."""
    x = np.asarray(x)
    if x.ndim != 1:
        raise InvalidArgumentError(f"InvertPermutation: x must be 1-D, got shape {list(x.shape)}")
    n = x.size
    if n and (x.min() < 0 or x.max() >= n):
        raise _out_of_range("InvertPermutation", "x", x, 0, n)
    y = np.full(n, -1, dtype=x.dtype)
    y[x] = np.arange(n, dtype=x.dtype)
    if n and y.min() < 0:
        seen = np.zeros(n, dtype=bool)
        for i, v in enumerate(x.tolist()):
            if seen[v]:
                raise InvalidArgumentError(f"InvertPermutation: x[{i}] = {v} is duplicated in the input.")
            seen[v] = True
    return y


_register_fn("InvertPermutation", invert_permutation)


# ---------------------------------------------------------------------------------------------
# Where: coordinates of the true (non-zero) elements, row-major.

def where_coordinates(x):
    """tf.where(condition) (raw op Where): an int64 [num_true, rank] array."""
    return np.argwhere(np.asarray(x)).astype(np.int64, copy=False)


_register_fn("Where", where_coordinates)


def _identity_n(*xs):
    """tf.identity_n: its inputs, unchanged (Tensors are immutable); one input is returned bare, as
    every single-output kernel's value is."""
    return xs[0] if len(xs) == 1 else tuple(xs)


_register_fn("IdentityN", _identity_n)
