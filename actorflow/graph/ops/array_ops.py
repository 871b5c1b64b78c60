"""Array ops: reshaping, slicing, joining, gathering, filling and shape queries (TF 1.x names).

Each op type of docs/ops.md is defined here once, with its output inference and its gradient
(TF's formulas), followed by the public wrappers. Index-like inputs (shapes, begin/end, axes,
indices) accept int32 and int64. Inference reads the build-time values of constant inputs
(`infer.constant_value`), so ``reshape(x, [-1, 784])`` on a ``(?, 28, 28, 1)`` input is
``(?, 784)`` and ``x[:, 0]`` on ``(?, 3)`` is ``(?,)``.

Wrappers name their op like TF does: `reshape(x, s, name="r")` creates the op "r", and the
constants it converts its arguments into live under "r/" (e.g. "r/shape").
"""
from __future__ import annotations

import builtins
import contextlib
import numbers

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, convert_to_tensor, get_default_graph, name_scope
from actorflow.graph.indexed_slices import IndexedSlices
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.constant import Identity, constant
from actorflow.graph.ops.infer import constant_shape, constant_value, unary
from actorflow.graph.tensor_shape import TensorShape

__all__ = [
    "reshape", "transpose", "expand_dims", "squeeze", "concat", "split", "slice", "strided_slice",
    "tile", "pad", "stack", "unstack", "gather", "one_hot", "fill", "zeros", "ones", "zeros_like",
    "ones_like", "range", "shape", "size", "rank", "broadcast_to", "unsorted_segment_sum",
    "dynamic_partition", "dynamic_stitch", "invert_permutation", "newaxis",
    "boolean_mask",
]

# This module defines `range`, `slice` and friends, TF's names; Python's own stay reachable.
_pyrange = builtins.range
_pyslice = builtins.slice

newaxis = None
"""Alias of None for indexing (tf.newaxis): ``x[:, af.newaxis]`` inserts a dimension of 1."""

_INDEX_DTYPES = (dtypes.int32, dtypes.int64)
_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


# ---------------------------------------------------------------------------------------------
# Inference helpers
# ---------------------------------------------------------------------------------------------

class _DTypeError(InferenceError, TypeError):
    """A dtype mistake: a ValueError like every inference error, and a TypeError like in TF."""


def _check_index_dtype(t, what, allowed=_INDEX_DTYPES):
    if t.dtype not in allowed:
        raise _DTypeError(f"{what} must be {' or '.join(d.name for d in allowed)}, got {t.dtype.name} "
                          f"('{t.name}')")


def _check_rank(t, rank, what):
    n = t.shape.ndims
    if n is not None and n != rank:
        raise InferenceError(f"{what} must have rank {rank}, but '{t.name}' has shape {t.shape}")


def _check_scalar_like(t, what):
    """A scalar, or a vector of one element (TF accepts both for axis arguments)."""
    n = t.shape.num_elements()
    if t.shape.ndims is not None and t.shape.ndims > 1 or n not in (None, 1):
        raise InferenceError(f"{what} must be a scalar, but '{t.name}' has shape {t.shape}")


def _static_ints(t):
    """Every entry of an integer tensor as Python ints, when known at build time; else None."""
    v = constant_value(t)
    return None if v is None else [int(x) for x in np.reshape(v, -1)]


def _static_int(t):
    """The value of a one-element integer tensor when known at build time, else None."""
    v = constant_value(t)
    if v is None or np.size(v) != 1:
        return None
    return int(np.reshape(v, -1)[0])


def _partial_ints(t):
    """The entries of a 1-D integer tensor, each an int or None when only the run time knows it.

    Sees through Pack of scalars, which is how shapes and slice bounds mixing Python ints and
    tensors are built. None when even the length is unknown.
    """
    v = _static_ints(t)
    if v is not None:
        return v
    op = t.op
    if op.type == "Pack" and op.attrs.get("axis", 0) == 0 and all(x.shape.ndims == 0 for x in op.inputs):
        return [_static_int(x) for x in op.inputs]
    if op.type == "Shape" and op.inputs[0].shape.ndims is not None:
        # The shape of a partially known tensor: its known dimensions are known here too.
        return list(op.inputs[0].shape.dims)
    if t.shape.ndims == 1 and t.shape.dims[0] is not None:
        return [None] * t.shape.dims[0]
    return None


def _prod(values):
    n = 1
    for v in values:
        n *= v
    return n


def _same_dtype(tensors, what):
    for i, t in enumerate(tensors[1:], 1):
        if t.dtype is not tensors[0].dtype:
            raise _DTypeError(f"All {what} must have the same dtype, got {tensors[0].dtype.name} ({what}[0]) "
                              f"and {t.dtype.name} ({what}[{i}])")
    return tensors[0].dtype


def _unknown(dtype, n=1):
    return [(dtype, TensorShape(None))] * n


def _with_rank(dtype, rank):
    return (dtype, TensorShape(None if rank is None else [None] * rank))


def _normalize(axis, rank, what="axis"):
    if not -rank <= axis < rank:
        raise InferenceError(f"{what} {axis} is out of range [{-rank}, {rank}) for a tensor of rank {rank}")
    return axis % rank


def _check_prefix(ids, data, ids_what, data_what):
    """`ids`' shape must be a prefix of `data`'s (segment ids, partitions, stitch indices)."""
    if ids.shape.dims is None or data.shape.dims is None:
        return
    k = len(ids.shape.dims)
    if k > len(data.shape.dims) or not TensorShape(data.shape.dims[:k]).is_compatible_with(ids.shape):
        raise InferenceError(f"{ids_what}.shape {ids.shape} must be a prefix of {data_what}.shape {data.shape}")


# ---------------------------------------------------------------------------------------------
# Naming and argument conversion for the wrappers
# ---------------------------------------------------------------------------------------------

class _Scope:
    """The scope of a wrapper: its op takes the scope's own name (TF's ``name=scope``)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def op(self, op_def, *inputs, **attrs):
        return op_def(*inputs, name=self.name, **attrs)

    def const(self, value, dtype):
        return constant(value, dtype=dtype, name=self.name)


@contextlib.contextmanager
def _op_scope(name, default):
    """Like TF's `with ops.name_scope(name, default) as scope` in a generated op wrapper: the
    helper ops (converted constants) go under "<name>/" and the op itself takes "<name>"."""
    with get_default_graph().name_scope(name or default) as scope:
        yield _Scope(scope)


def _is_tensor_like(x) -> bool:
    return isinstance(x, Tensor) or hasattr(x, "_as_graph_element")


def _dtype_of(x):
    """The dtype of a tensor-like value, without converting it (which may add a read op)."""
    dt = getattr(x, "dtype", None)
    return dtypes.as_dtype(dt) if dt is not None else convert_to_tensor(x).dtype


def _has_tensor(x) -> bool:
    if _is_tensor_like(x):
        return True
    if isinstance(x, (list, tuple)):
        return any(_has_tensor(v) for v in x)
    return False


def _cast(t, dtype):
    return t if t.dtype is dtype else math_ops.Cast(t, DstT=dtype)


def _fits_int32(value) -> bool:
    arr = np.asarray(value)
    if arr.size == 0 or arr.dtype.kind not in "iu":
        return True
    return bool(arr.min() >= -2**31 and arr.max() < 2**31)


def _index_dtype_of(values):
    """int64 when some argument is an int64 tensor or a Python value beyond int32, else int32."""
    for v in values:
        if v is None:
            continue
        if _is_tensor_like(v):
            if _dtype_of(v) is dtypes.int64:
                return dtypes.int64
        elif isinstance(v, (list, tuple)) and _has_tensor(v):
            if _index_dtype_of(list(v)) is dtypes.int64:
                return dtypes.int64
        elif not isinstance(v, TensorShape) and not _fits_int32(v):
            return dtypes.int64
    return dtypes.int32


def _to_index_tensor(value, name=None, dtype=None):
    """An integer tensor from a Tensor, TensorShape, int or (nested) list of ints and scalar
    integer tensors (packed, as TF does for ``reshape(x, [batch, -1])``)."""
    if _is_tensor_like(value):
        t = convert_to_tensor(value)
        if dtype is not None and t.dtype in _INDEX_DTYPES:
            t = _cast(t, dtype)
        return t
    if isinstance(value, TensorShape):
        if not value.is_fully_defined():
            raise ValueError(f"Cannot convert a partially known TensorShape {value} to a tensor")
        value = value.as_list()
    if dtype is None:
        dtype = _index_dtype_of([value])
    if isinstance(value, (list, tuple)) and _has_tensor(value):
        parts = [_to_index_tensor(v, None, dtype) for v in value]
        return Pack(*parts, N=len(parts), axis=0, name=name or "packed")
    return constant(value, dtype=dtype, name=name or "Const")


def _index_args(values, names):
    """Converts shape/index arguments that share one integer dtype (begin/size, begin/end/strides)."""
    dt = _index_dtype_of(values)
    return [_to_index_tensor(v, n, dt) for v, n in zip(values, names)]


def _convert_same_dtype(values, name="values"):
    """Converts a list of values to tensors; Python values take the dtype of the first tensor."""
    dt = next((_dtype_of(v) for v in values if _is_tensor_like(v)), None)
    return [convert_to_tensor(v, dtype=None if _is_tensor_like(v) else dt, name=f"{name}_{i}")
            for i, v in enumerate(values)]


def _as_list(out, n):
    """Outputs of a multi-output op as a list (an OpDef returns one tensor bare, none as the op)."""
    if n == 0:
        return []
    if n == 1:
        return [out]
    return list(out)


def _dense(grad):
    if isinstance(grad, IndexedSlices):
        return indexed_slices_to_dense(grad)
    return grad


def _int_const(values, dtype=dtypes.int32):
    return constant(np.asarray(values, dtype=dtype.np), dtype=dtype)


def _dim(x, i):
    """Dimension `i` of `x`: a Python int when known when building, else an int32 scalar tensor."""
    d = x.shape.dims[i] if x.shape.dims is not None else None
    if d is not None:
        return d
    return GatherV2(shape(x), _int_const(i), _int_const(0), batch_dims=0)


# ---------------------------------------------------------------------------------------------
# Reshape, Transpose, ExpandDims, Squeeze
# ---------------------------------------------------------------------------------------------

def _fmt(dims):
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def _infer_reshape(inputs, attrs):
    x, shp = inputs
    _check_index_dtype(shp, "shape")
    _check_rank(shp, 1, "shape")
    target = _partial_ints(shp)
    if target is None:
        return _unknown(x.dtype)
    for i, d in enumerate(target):
        if d is not None and d < -1:
            raise InferenceError(f"size {i} of the new shape {_fmt(target)} must be non-negative, or -1")
    if builtins.sum(d == -1 for d in target) > 1:
        raise InferenceError(f"can only infer one dimension of the new shape {_fmt(target)}, but it has "
                             "several -1")
    dims = [None if d is None or d < 0 else d for d in target]
    unknown = [i for i, d in enumerate(dims) if d is None]
    known = _prod(d for d in dims if d is not None)
    n_in = x.shape.num_elements()
    if n_in is not None:
        if not unknown:
            if known != n_in:
                raise InferenceError(f"Cannot reshape a tensor with {n_in} elements to shape {_fmt(target)} "
                                     f"({known} elements)")
        elif known == 0:
            if n_in != 0:
                raise InferenceError(f"Cannot reshape a tensor with {n_in} elements to shape {_fmt(target)} "
                                     f"(0 elements)")
        elif n_in % known:
            raise InferenceError(f"Cannot reshape a tensor with {n_in} elements to shape {_fmt(target)}: "
                                 f"the requested shape has a multiple of {known} elements")
        elif len(unknown) == 1:
            # A single unknown size is determined whether it is the -1 or a run-time value: any
            # other run-time value would fail in the kernel anyway.
            dims[unknown[0]] = n_in // known
    elif x.shape.dims is not None and not unknown:
        known_in = _prod(d for d in x.shape.dims if d is not None)
        if known_in and known % known_in:
            raise InferenceError(f"Cannot reshape a tensor of shape {x.shape} (a multiple of {known_in} "
                                 f"elements) to shape {_fmt(target)} ({known} elements)")
    return [(x.dtype, TensorShape(dims))]


Reshape = define_op("Reshape", _infer_reshape)


def _infer_transpose(inputs, attrs):
    x, perm = inputs
    _check_index_dtype(perm, "perm")
    _check_rank(perm, 1, "perm")
    p = _static_ints(perm)
    rank = x.shape.ndims
    if p is None:
        n = perm.shape.dims[0] if perm.shape.ndims == 1 else None
        if rank is not None and n is not None and n != rank:
            raise InferenceError(f"perm has {n} entries but the input has rank {rank}")
        return [_with_rank(x.dtype, rank if rank is not None else n)]
    if rank is not None and len(p) != rank:
        raise InferenceError(f"perm {p} has {len(p)} entries but the input has rank {rank}")
    if sorted(p) != list(_pyrange(len(p))):
        raise InferenceError(f"perm {p} is not a permutation of 0..{len(p) - 1}")
    if rank is None:
        return [_with_rank(x.dtype, len(p))]
    return [(x.dtype, TensorShape([x.shape.dims[i] for i in p]))]


Transpose = define_op("Transpose", _infer_transpose)


def _infer_expand_dims(inputs, attrs):
    x, axis = inputs
    _check_index_dtype(axis, "axis")
    _check_scalar_like(axis, "axis")
    rank = x.shape.ndims
    if rank is None:
        return _unknown(x.dtype)
    a = _static_int(axis)
    if a is None:
        return [_with_rank(x.dtype, rank + 1)]
    if not -rank - 1 <= a <= rank:
        raise InferenceError(f"axis {a} is out of range [{-rank - 1}, {rank}] for a tensor of rank {rank}")
    if a < 0:
        a += rank + 1
    dims = list(x.shape.dims)
    dims.insert(a, 1)
    return [(x.dtype, TensorShape(dims))]


ExpandDims = define_op("ExpandDims", _infer_expand_dims)


def _infer_squeeze(inputs, attrs):
    (x,) = inputs
    sq = tuple(attrs.get("squeeze_dims", ()))
    if x.shape.dims is None:
        return _unknown(x.dtype)
    dims, rank = x.shape.dims, len(x.shape.dims)
    if sq:
        drop = set()
        for d in sq:
            if not -rank <= d < rank:
                raise InferenceError(f"squeeze dimension {d} is out of range [{-rank}, {rank}) for a tensor "
                                     f"of rank {rank}")
            d %= rank
            if dims[d] is not None and dims[d] != 1:
                raise InferenceError(f"Can not squeeze dim[{d}], expected a dimension of 1, got {dims[d]}")
            drop.add(d)
        return [(x.dtype, TensorShape([d for i, d in enumerate(dims) if i not in drop]))]
    if any(d is None for d in dims):
        return _unknown(x.dtype)   # an unknown dimension may turn out to be 1 and disappear
    return [(x.dtype, TensorShape([d for d in dims if d != 1]))]


Squeeze = define_op("Squeeze", _infer_squeeze)


@Reshape.gradient
def _reshape_grad(op, grad):
    return [reshape(_dense(grad), shape(op.inputs[0])), None]


@ExpandDims.gradient
def _expand_dims_grad(op, grad):
    return [reshape(_dense(grad), shape(op.inputs[0])), None]


@Squeeze.gradient
def _squeeze_grad(op, grad):
    return [reshape(_dense(grad), shape(op.inputs[0]))]


@Transpose.gradient
def _transpose_grad(op, grad):
    perm = op.inputs[1]
    p = _static_ints(perm)
    inv = _int_const(np.argsort(p), perm.dtype) if p is not None else invert_permutation(perm)
    return [transpose(_dense(grad), inv), None]


# ---------------------------------------------------------------------------------------------
# ConcatV2, Split, SplitV
# ---------------------------------------------------------------------------------------------

def _infer_concat(inputs, attrs):
    n = attrs["N"]
    if n < 1 or len(inputs) != n + 1:
        raise InferenceError(f"ConcatV2 takes N={n} values and an axis, got {len(inputs)} inputs")
    values, axis = inputs[:n], inputs[n]
    dt = _same_dtype(values, "values")
    _check_index_dtype(axis, "axis")
    _check_scalar_like(axis, "axis")
    ranks = {v.shape.ndims for v in values if v.shape.ndims is not None}
    if len(ranks) > 1:
        raise InferenceError("all values must have the same rank, got shapes "
                             + ", ".join(str(v.shape) for v in values))
    if not ranks:
        return _unknown(dt)
    rank = ranks.pop()
    if rank == 0:
        raise InferenceError("Can't concatenate scalars (use stack instead)")
    a = _static_int(axis)
    if a is None:
        return [_with_rank(dt, rank)]
    a = _normalize(a, rank)
    out, seen, total = [None] * rank, [None] * rank, 0
    for v in values:
        if v.shape.dims is None:
            total = None
            continue
        for i, d in enumerate(v.shape.dims):
            if i == a:
                total = None if total is None or d is None else total + d
            elif d is not None:
                if out[i] is not None and out[i] != d:
                    raise InferenceError(f"Dimension {i} in both shapes must be equal, but are {out[i]} and {d}. "
                                         f"Shapes are {seen[i]} and {v.shape} (concatenating along axis {a})")
                out[i], seen[i] = d, v.shape
    out[a] = total
    return [(dt, TensorShape(out))]


ConcatV2 = define_op("ConcatV2", _infer_concat)


def _split_outputs(value, a, sizes):
    dims = list(value.shape.dims)
    outs = []
    for s in sizes:
        d = list(dims)
        d[a] = s
        outs.append((value.dtype, TensorShape(d)))
    return outs


def _infer_split(inputs, attrs):
    axis, value = inputs
    num = attrs["num_split"]
    if num < 1:
        raise InferenceError(f"num_split must be at least 1, got {num}")
    _check_index_dtype(axis, "axis")
    _check_scalar_like(axis, "axis")
    rank = value.shape.ndims
    if rank is None:
        return _unknown(value.dtype, num)
    a = _static_int(axis)
    if a is None:
        return [_with_rank(value.dtype, rank)] * num
    a = _normalize(a, rank)
    d = value.shape.dims[a]
    if d is not None and d % num:
        raise InferenceError(f"Number of ways to split should evenly divide the split dimension, but got "
                             f"split_dim {a} (size = {d}) and num_split {num}")
    return _split_outputs(value, a, [None if d is None else d // num] * num)


Split = define_op("Split", _infer_split)


def _infer_split_v(inputs, attrs):
    value, size_splits, axis = inputs
    num = attrs["num_split"]
    if num < 1:
        raise InferenceError(f"num_split must be at least 1, got {num}")
    _check_index_dtype(size_splits, "size_splits")
    _check_rank(size_splits, 1, "size_splits")
    _check_index_dtype(axis, "axis")
    _check_scalar_like(axis, "axis")
    sizes = _partial_ints(size_splits)
    if sizes is not None and len(sizes) != num:
        raise InferenceError(f"size_splits has {len(sizes)} entries but num_split is {num}")
    rank = value.shape.ndims
    if rank is None:
        return _unknown(value.dtype, num)
    a = _static_int(axis)
    if a is None:
        return [_with_rank(value.dtype, rank)] * num
    a = _normalize(a, rank)
    sizes = list(sizes) if sizes is not None else [None] * num
    if any(s is not None and s < -1 for s in sizes):
        raise InferenceError(f"size_splits {_fmt(sizes)} must be non-negative, or -1")
    inferred = [i for i, s in enumerate(sizes) if s == -1]
    if len(inferred) > 1:
        raise InferenceError(f"size_splits {_fmt(sizes)} can contain at most one -1")
    known = builtins.sum(s for s in sizes if s is not None and s >= 0)
    d = value.shape.dims[a]
    if d is not None:
        if known > d or (not inferred and None not in sizes and known != d):
            raise InferenceError(f"size_splits {_fmt(sizes)} must sum to the size of dimension {a} ({d}), "
                                 f"or be less than it when one size is -1")
        if inferred and None not in sizes:
            sizes[inferred[0]] = d - known
    return _split_outputs(value, a, [None if s is None or s < 0 else s for s in sizes])


SplitV = define_op("SplitV", _infer_split_v)


@ConcatV2.gradient
def _concat_grad(op, grad):
    n = op.attrs["N"]
    values, axis = op.inputs[:n], op.inputs[n]
    grad = _dense(grad)
    if n == 1:
        return [grad, None]
    rank = next((v.shape.ndims for v in values if v.shape.ndims is not None), None)
    a = _static_int(axis)
    if a is not None and rank is not None:
        a %= rank
        sizes = [_dim(v, a) for v in values]
        axis_t = a
    else:
        # The axis is known only at run time: normalize it there (it may be negative).
        axis_t = math_ops.FloorMod(_cast(axis, dtypes.int32), _cast(rank_of(values[0]), dtypes.int32))
        sizes = [GatherV2(shape(v), axis_t, _int_const(0), batch_dims=0) for v in values]
    return split(grad, _to_index_tensor(sizes, None, dtypes.int32), axis_t, num=n) + [None]


def _split_grads_to_concat(op, grads, axis):
    if all(g is None for g in grads):
        return None
    parts = [zeros_like(op.outputs[i]) if g is None else _dense(g) for i, g in enumerate(grads)]
    return concat(parts, axis)


@Split.gradient
def _split_grad(op, *grads):
    return [None, _split_grads_to_concat(op, grads, op.inputs[0])]


@SplitV.gradient
def _split_v_grad(op, *grads):
    return [_split_grads_to_concat(op, grads, op.inputs[2]), None, None]


# ---------------------------------------------------------------------------------------------
# Slice, StridedSlice, StridedSliceGrad
# ---------------------------------------------------------------------------------------------

def _infer_slice(inputs, attrs):
    x, begin, size_ = inputs
    for t, what in ((begin, "begin"), (size_, "size")):
        _check_index_dtype(t, what)
        _check_rank(t, 1, what)
    if begin.dtype is not size_.dtype:
        raise _DTypeError(f"begin and size must have the same dtype, got {begin.dtype.name} and {size_.dtype.name}")
    b, s = _partial_ints(begin), _partial_ints(size_)
    if b is not None and s is not None and len(b) != len(s):
        raise InferenceError(f"begin and size must have the same length, got {len(b)} and {len(s)}")
    n = len(b) if b is not None else (len(s) if s is not None else None)
    rank = x.shape.ndims
    if rank is not None and n is not None and n != rank:
        raise InferenceError(f"Expected begin and size arguments to be 1-D tensors of size {rank}, but got "
                             f"{n} entries")
    r = rank if rank is not None else n
    if r is None:
        return _unknown(x.dtype)
    b = b if b is not None else [None] * r
    s = s if s is not None else [None] * r
    dims = x.shape.dims if x.shape.dims is not None else (None,) * r
    out = []
    for i, (bi, si, di) in enumerate(zip(b, s, dims)):
        if bi is not None and (bi < 0 or (di is not None and bi > di)):
            raise InferenceError(f"Expected begin[{i}] in [0, {'?' if di is None else di}], but got {bi}")
        if si is None:
            out.append(None)
        elif si == -1:
            out.append(None if bi is None or di is None else di - bi)
        elif si < -1:
            raise InferenceError(f"Expected size[{i}] to be non-negative or -1, but got {si}")
        else:
            if bi is not None and di is not None and bi + si > di:
                raise InferenceError(f"Expected size[{i}] in [0, {di - bi}], but got {si}")
            out.append(si)
    return [(x.dtype, TensorShape(out))]


Slice = define_op("Slice", _infer_slice)


def _strided_slice_shape(in_shape, begin, end, strides, attrs) -> TensorShape:
    """TF's ValidateStridedSliceOp on build-time knowledge: `begin`, `end`, `strides` are lists
    of ints-or-None (None when the length is unknown); unknown entries give unknown sizes."""
    bm, em, elm, nam, sam = (int(attrs.get(k, 0)) for k in _MASKS)
    lengths = {len(v) for v in (begin, end, strides) if v is not None}
    if len(lengths) > 1:
        raise InferenceError(f"begin, end and strides must have the same length, got {sorted(lengths)}")
    if elm & (elm - 1):
        raise InferenceError("Multiple ellipses in slice spec not allowed")
    if not lengths or in_shape.dims is None:
        return TensorShape(None)
    n = lengths.pop()
    begin, end, strides = (v if v is not None else [None] * n for v in (begin, end, strides))
    rank = len(in_shape.dims)

    # Sparse spec -> dense spec: expand the ellipsis (an implicit one at the end if none).
    ellipsis_seen, new_after_ellipsis = False, 0
    for i in _pyrange(n):
        if ellipsis_seen and (nam >> i) & 1:
            new_after_ellipsis += 1
        if (elm >> i) & 1:
            ellipsis_seen = True
    n_sparse = n
    if not ellipsis_seen:
        elm |= 1 << n
        n_sparse += 1
    dense = []   # per input dimension: (begin, end, stride, begin_masked, end_masked, shrink)
    final = []   # output dimensions: an index into `dense`, "new" (inserted 1) or "shrink" (dropped)
    for i in _pyrange(n_sparse):
        if (elm >> i) & 1:
            stop = min(rank - (n_sparse - i) + 1 + new_after_ellipsis, rank)
            while len(dense) < stop:
                final.append(len(dense))
                dense.append((0, 0, 1, True, True, False))
        elif (nam >> i) & 1:
            final.append("new")
        else:
            if len(dense) == rank:
                raise InferenceError(f"Index out of range using input dim {len(dense)}; input has only {rank} dims")
            shrink = bool((sam >> i) & 1)
            final.append("shrink" if shrink else len(dense))
            dense.append((begin[i], end[i], strides[i], bool((bm >> i) & 1), bool((em >> i) & 1), shrink))

    sizes = []
    for i, (b, e, s, b_masked, e_masked, shrink) in enumerate(dense):
        d = in_shape.dims[i]
        if s == 0:
            raise InferenceError(f"strides[{i}] must be non-zero")
        if shrink:
            if s is not None and s <= 0:
                raise InferenceError("only stride 1 allowed on non-range indexing.")
            if d is not None and b is not None and not -d <= b < d:
                raise InferenceError(f"slice index {b} of dimension {i} out of bounds (size {d})")
            sizes.append(1)
            continue
        if d is None or s is None or (b is None and not b_masked) or (e is None and not e_masked):
            sizes.append(None)
            continue
        lo, hi = (0, d) if s > 0 else (-1, d - 1)

        def canonical(x, masked, is_end, lo=lo, hi=hi, s=s, d=d):
            if masked:
                return (hi if is_end else lo) if s > 0 else (lo if is_end else hi)
            x = x + d if x < 0 else x
            return min(max(x, lo), hi)

        interval = canonical(e, e_masked, True) - canonical(b, b_masked, False)
        if interval == 0 or (interval < 0) != (s < 0):
            sizes.append(0)
        else:
            sizes.append(-(-abs(interval) // abs(s)))
    out = []
    for f in final:
        if f == "new":
            out.append(1)
        elif f != "shrink":
            out.append(sizes[f])
    return TensorShape(out)


def _check_slice_spec(begin, end, strides):
    for t, what in ((begin, "begin"), (end, "end"), (strides, "strides")):
        _check_index_dtype(t, what)
        _check_rank(t, 1, what)
    if not begin.dtype is end.dtype is strides.dtype:
        raise _DTypeError(f"begin, end and strides must have the same dtype, got {begin.dtype.name}, "
                          f"{end.dtype.name} and {strides.dtype.name}")


def _infer_strided_slice(inputs, attrs):
    x, begin, end, strides = inputs
    _check_slice_spec(begin, end, strides)
    out = _strided_slice_shape(x.shape, _partial_ints(begin), _partial_ints(end), _partial_ints(strides), attrs)
    return [(x.dtype, out)]


StridedSlice = define_op("StridedSlice", _infer_strided_slice)


def _infer_strided_slice_grad(inputs, attrs):
    shp, begin, end, strides, dy = inputs
    _check_index_dtype(shp, "shape")
    _check_rank(shp, 1, "shape")
    _check_slice_spec(begin, end, strides)
    out = constant_shape(shp)
    if out.is_fully_defined():
        want = _strided_slice_shape(out, _partial_ints(begin), _partial_ints(end), _partial_ints(strides), attrs)
        if not want.is_compatible_with(dy.shape):
            raise InferenceError(f"dy has shape {dy.shape} but slicing shape {out} gives {want}")
    return [(dy.dtype, out)]


StridedSliceGrad = define_op("StridedSliceGrad", _infer_strided_slice_grad)


@Slice.gradient
def _slice_grad(op, grad):
    x, begin, _ = op.inputs
    grad = _dense(grad)
    b = _static_ints(begin)
    y = op.outputs[0]
    if b is not None and x.shape.is_fully_defined() and y.shape.is_fully_defined():
        after = [d - bi - o for d, bi, o in zip(x.shape.dims, b, y.shape.dims)]
        paddings = _int_const(np.stack([b, after], axis=1).reshape(-1, 2), begin.dtype)
    else:
        it = begin.dtype
        after = math_ops.Sub(math_ops.Sub(shape(x, out_type=it), shape(y, out_type=it)), begin)
        paddings = Pack(begin, after, N=2, axis=1)
    return [pad(grad, paddings), None, None]


@StridedSlice.gradient
def _strided_slice_grad(op, grad):
    x, begin, end, strides = op.inputs
    masks = {k: op.attrs.get(k, 0) for k in _MASKS}
    dx = StridedSliceGrad(shape(x, out_type=begin.dtype), begin, end, strides, _dense(grad), **masks)
    return [dx, None, None, None]


@StridedSliceGrad.gradient
def _strided_slice_grad_grad(op, grad):
    _, begin, end, strides, _ = op.inputs
    masks = {k: op.attrs.get(k, 0) for k in _MASKS}
    return [None, None, None, None, StridedSlice(_dense(grad), begin, end, strides, **masks)]


# ---------------------------------------------------------------------------------------------
# Tile, Pad, PadV2
# ---------------------------------------------------------------------------------------------

def _infer_tile(inputs, attrs):
    x, multiples = inputs
    _check_index_dtype(multiples, "multiples")
    _check_rank(multiples, 1, "multiples")
    m = _partial_ints(multiples)
    rank = x.shape.ndims
    if m is None:
        return [_with_rank(x.dtype, rank)]
    if rank is not None and len(m) != rank:
        raise InferenceError(f"Expected multiples argument to be a vector of length {rank} but got length {len(m)}")
    if any(mi is not None and mi < 0 for mi in m):
        raise InferenceError(f"multiples {_fmt(m)} must be non-negative")
    dims = x.shape.dims if x.shape.dims is not None else (None,) * len(m)
    out = []
    for d, mi in zip(dims, m):
        if d == 0 or mi == 0:
            out.append(0)
        else:
            out.append(None if d is None or mi is None else d * mi)
    return [(x.dtype, TensorShape(out))]


Tile = define_op("Tile", _infer_tile)


def _infer_pad(inputs, attrs):
    x, paddings = inputs[0], inputs[1]
    _check_index_dtype(paddings, "paddings")
    _check_rank(paddings, 2, "paddings")
    if paddings.shape.ndims == 2 and paddings.shape.dims[1] not in (None, 2):
        raise InferenceError(f"paddings must have shape [rank, 2], got {paddings.shape}")
    if len(inputs) == 3:
        cv = inputs[2]
        if cv.dtype is not x.dtype:
            raise _DTypeError(f"constant_values must have the input's dtype {x.dtype.name}, got {cv.dtype.name}")
        if cv.shape.ndims not in (None, 0):
            raise InferenceError(f"constant_values must be a scalar, got shape {cv.shape}")
    rank = x.shape.ndims
    rows = paddings.shape.dims[0] if paddings.shape.ndims == 2 else None
    if rank is not None and rows is not None and rows != rank:
        raise InferenceError(f"The first dimension of paddings must be the rank of inputs ({rank}), got "
                             f"paddings of shape {paddings.shape}")
    p = constant_value(paddings)
    if p is None:
        return [_with_rank(x.dtype, rank if rank is not None else rows)]
    p = np.asarray(p).reshape(-1, 2)
    if (p < 0).any():
        raise InferenceError(f"paddings must be non-negative, got {p.tolist()}")
    dims = x.shape.dims if x.shape.dims is not None else (None,) * len(p)
    return [(x.dtype, TensorShape([None if d is None else d + int(a) + int(b) for d, (a, b) in zip(dims, p)]))]


Pad = define_op("Pad", _infer_pad)
PadV2 = define_op("PadV2", _infer_pad)


@Tile.gradient
def _tile_grad(op, grad):
    x, multiples = op.inputs
    grad = _dense(grad)
    m = _static_ints(multiples)
    # Reshape the tiled gradient to [m0, d0, m1, d1, ...] and sum the copies (the m axes).
    if m is not None and x.shape.is_fully_defined():
        split_shape = _int_const([v for pair in zip(m, x.shape.dims) for v in pair])
        axes = _int_const(list(_pyrange(0, 2 * len(m), 2)))
    else:
        pairs = Pack(multiples, shape(x, out_type=multiples.dtype), N=2, axis=0)
        split_shape = reshape(transpose(pairs, _int_const([1, 0])), _int_const([-1]))
        axes = Range(_int_const(0), size(split_shape), _int_const(2))
    dx = math_ops.Sum(reshape(grad, split_shape), axes, keep_dims=False)
    dx.set_shape(x.shape)
    return [dx, None]


def _pad_grad(op, grad):
    x, paddings = op.inputs[0], op.inputs[1]
    grad = _dense(grad)
    p = constant_value(paddings)
    it = paddings.dtype
    if p is not None:
        begin = _int_const(np.asarray(p).reshape(-1, 2)[:, 0], it)
    else:
        first_col = Slice(paddings, _int_const([0, 0]), Pack(rank_of(x), _int_const(1), N=2, axis=0))
        begin = reshape(first_col, _int_const([-1]))
    sizes = shape(x, out_type=it)
    return [slice(grad, begin, sizes), None] + [None] * (len(op.inputs) - 2)


Pad.gradient(_pad_grad)
PadV2.gradient(_pad_grad)


# ---------------------------------------------------------------------------------------------
# Pack, Unpack
# ---------------------------------------------------------------------------------------------

def _infer_pack(inputs, attrs):
    n = attrs["N"]
    axis = int(attrs.get("axis", 0))
    if n < 1 or len(inputs) != n:
        raise InferenceError(f"Pack takes N={n} values (at least one), got {len(inputs)}")
    dt = _same_dtype(inputs, "values")
    merged = TensorShape(None)
    for i, t in enumerate(inputs):
        if not merged.is_compatible_with(t.shape):
            raise InferenceError(f"Shapes of all inputs must match: values[0].shape = {inputs[0].shape} != "
                                 f"values[{i}].shape = {t.shape}")
        merged = merged.merge_with(t.shape)
    if merged.dims is None:
        return _unknown(dt)
    r = len(merged.dims)
    if not -r - 1 <= axis <= r:
        raise InferenceError(f"axis {axis} is out of range [{-r - 1}, {r}] for stacking tensors of rank {r}")
    if axis < 0:
        axis += r + 1
    dims = list(merged.dims)
    dims.insert(axis, n)
    return [(dt, TensorShape(dims))]


Pack = define_op("Pack", _infer_pack)


def _infer_unpack(inputs, attrs):
    (x,) = inputs
    num = attrs["num"]
    axis = int(attrs.get("axis", 0))
    if x.shape.dims is None:
        return _unknown(x.dtype, num)
    r = len(x.shape.dims)
    if r == 0:
        raise InferenceError("Cannot unstack a scalar")
    axis = _normalize(axis, r)
    d = x.shape.dims[axis]
    if d is not None and d != num:
        raise InferenceError(f"Dimension {axis} has size {d}, but num is {num}")
    dims = x.shape.dims[:axis] + x.shape.dims[axis + 1:]
    return [(x.dtype, TensorShape(dims))] * num


Unpack = define_op("Unpack", _infer_unpack)


@Pack.gradient
def _pack_grad(op, grad):
    return unstack(_dense(grad), num=op.attrs["N"], axis=op.attrs.get("axis", 0))


@Unpack.gradient
def _unpack_grad(op, *grads):
    if all(g is None for g in grads):
        return [None]
    parts = [zeros_like(op.outputs[i]) if g is None else _dense(g) for i, g in enumerate(grads)]
    return [stack(parts, axis=op.attrs.get("axis", 0))]


# ---------------------------------------------------------------------------------------------
# GatherV2, UnsortedSegmentSum, DynamicPartition, DynamicStitch
# ---------------------------------------------------------------------------------------------

def _infer_gather(inputs, attrs):
    params, indices, axis = inputs
    _check_index_dtype(indices, "indices")
    _check_index_dtype(axis, "axis")
    _check_scalar_like(axis, "axis")
    bd = int(attrs.get("batch_dims", 0))
    prank, irank = params.shape.ndims, indices.shape.ndims
    if bd < 0:
        if irank is None:
            return _unknown(params.dtype)
        bd += irank
        if bd < 0:
            raise InferenceError(f"batch_dims {attrs['batch_dims']} is out of range for indices of rank {irank}")
    if irank is not None and bd > irank:
        raise InferenceError(f"batch_dims ({bd}) must be at most the rank of indices ({irank})")
    if prank is None or irank is None:
        return _unknown(params.dtype)
    a = _static_int(axis)
    if a is None:
        return [_with_rank(params.dtype, prank - 1 + irank - bd)]
    if not -prank <= a < prank:
        raise InferenceError(f"Expected axis in the range [{-prank}, {prank}), but got {a}")
    a %= prank
    if bd > a:
        raise InferenceError(f"batch_dims ({bd}) must be less than or equal to axis ({a})")
    pd, idims = params.shape.dims, indices.shape.dims
    batch = []
    for i in _pyrange(bd):
        if pd[i] is not None and idims[i] is not None and pd[i] != idims[i]:
            raise InferenceError(f"params.shape[{i}] = {pd[i]} and indices.shape[{i}] = {idims[i]} must match "
                                 f"in the {bd} batch dimensions")
        batch.append(pd[i] if pd[i] is not None else idims[i])
    return [(params.dtype, TensorShape(batch + list(pd[bd:a]) + list(idims[bd:]) + list(pd[a + 1:])))]


GatherV2 = define_op("GatherV2", _infer_gather)


def _infer_unsorted_segment_sum(inputs, attrs):
    data, ids, num = inputs
    if not data.dtype.is_numeric:
        raise _DTypeError(f"data must be numeric, got {data.dtype.name}")
    _check_index_dtype(ids, "segment_ids")
    _check_index_dtype(num, "num_segments")
    _check_scalar_like(num, "num_segments")
    _check_prefix(ids, data, "segment_ids", "data")
    n = _static_int(num)
    if n is not None and n < 0:
        raise InferenceError(f"num_segments must be non-negative, got {n}")
    if data.shape.dims is None or ids.shape.ndims is None:
        return _unknown(data.dtype)
    return [(data.dtype, TensorShape([n] + list(data.shape.dims[ids.shape.ndims:])))]


UnsortedSegmentSum = define_op("UnsortedSegmentSum", _infer_unsorted_segment_sum)


def _infer_dynamic_partition(inputs, attrs):
    data, partitions = inputs
    n = attrs["num_partitions"]
    if n < 1:
        raise InferenceError(f"num_partitions must be at least 1, got {n}")
    _check_index_dtype(partitions, "partitions")
    _check_prefix(partitions, data, "partitions", "data")
    if data.shape.dims is None or partitions.shape.ndims is None:
        return _unknown(data.dtype, n)
    return [(data.dtype, TensorShape([None] + list(data.shape.dims[partitions.shape.ndims:])))] * n


DynamicPartition = define_op("DynamicPartition", _infer_dynamic_partition)


def _infer_dynamic_stitch(inputs, attrs):
    n = attrs["N"]
    if n < 1 or len(inputs) != 2 * n:
        raise InferenceError(f"DynamicStitch takes N={n} indices and N data tensors, got {len(inputs)} inputs")
    indices, data = inputs[:n], inputs[n:]
    dt = _same_dtype(data, "data")
    inner = None
    for i, (idx, d) in enumerate(zip(indices, data)):
        _check_index_dtype(idx, f"indices[{i}]")
        _check_prefix(idx, d, f"indices[{i}]", f"data[{i}]")
        if idx.shape.ndims is None or d.shape.dims is None:
            continue
        rest = TensorShape(d.shape.dims[idx.shape.ndims:])
        if inner is not None and not inner.is_compatible_with(rest):
            raise InferenceError(f"data[{i}].shape {d.shape} does not match the other data tensors: their shapes "
                                 f"beyond their indices' must all be {inner}")
        inner = rest if inner is None else inner.merge_with(rest)
    values = [_static_ints(idx) for idx in indices]
    rows = None
    if all(v is not None for v in values):
        flat = [x for v in values for x in v]
        rows = max(flat) + 1 if flat else 0
    if inner is None:
        return _unknown(dt)
    return [(dt, TensorShape([rows] + list(inner.dims)))]


DynamicStitch = define_op("DynamicStitch", _infer_dynamic_stitch)


@GatherV2.gradient
def _gather_grad(op, grad):
    params, indices, axis = op.inputs
    grad = _dense(grad)
    prank, irank = params.shape.ndims, indices.shape.ndims
    a = _static_int(axis)
    if a is not None and prank is not None:
        a %= max(prank, 1)
    if a == 0:
        # Only the gathered rows get a gradient: keep it sparse, as TF does.
        n_idx = size(indices)
        tail = params.shape.dims[1:] if params.shape.dims is not None else None
        if tail is not None and all(d is not None for d in tail):
            values_shape = _to_index_tensor([n_idx] + list(tail), None, dtypes.int32)
        else:
            values_shape = concat([expand_dims(n_idx, 0), _slice_helper(shape(params), _pyslice(1, None))], 0)
        values = reshape(grad, values_shape)
        return [IndexedSlices(values, reshape(indices, _int_const([-1])), shape(params)), None, None]
    bd = int(op.attrs.get("batch_dims", 0))
    if bd < 0:
        if irank is None:
            raise ValueError(f"The gradient of '{op.name}' (GatherV2) needs the rank of indices to resolve "
                             f"batch_dims={bd}")
        bd += irank
    # Collapse params to [B, O, N, R] (batch, outer, gathered axis, inner) and the gradient to
    # [B, O, S, R] (S: indices per batch), then scatter-add rows with batch-offset indices.
    # Every size is a Python int when known when building, else an int32 scalar tensor.
    pshape, ishape = shape(params), shape(indices)

    def prod_of(shape_t, static, start, stop):
        """The product of dimensions start..stop (None: to the end); ints or int32 tensors."""
        if isinstance(start, int) and (stop is None or isinstance(stop, int)) and static is not None:
            part = static[start:stop]
            if all(d is not None for d in part):
                return _prod(part)
        begin = _to_index_tensor([start], None, dtypes.int32)
        if stop is None:
            count = _int_const([-1])
        elif isinstance(start, int) and isinstance(stop, int):
            count = _int_const([stop - start])
        else:
            count = reshape(math_ops.Sub(_to_index_tensor(stop, None, dtypes.int32),
                                         _to_index_tensor(start, None, dtypes.int32)), _int_const([1]))
        return math_ops.Prod(Slice(shape_t, begin, count), _int_const(0), keep_dims=False)

    def mul(x, y):
        if isinstance(x, int) and isinstance(y, int):
            return x * y
        return math_ops.Mul(_to_index_tensor(x, None, dtypes.int32), _to_index_tensor(y, None, dtypes.int32))

    pdims = params.shape.dims
    if a is None or a < 0:
        # The axis is known only at run time (or its sign only with the rank): normalize it there.
        a = math_ops.FloorMod(_cast(axis, dtypes.int32), rank_of(params))
        nn = GatherV2(pshape, a, _int_const(0), batch_dims=0)
        after = math_ops.AddV2(a, _int_const(1))
    else:
        nn = pdims[a] if pdims is not None and pdims[a] is not None else GatherV2(
            pshape, _int_const(a), _int_const(0), batch_dims=0)
        after = a + 1
    nb = prod_of(pshape, pdims, 0, bd)
    no = prod_of(pshape, pdims, bd, a)
    nr = prod_of(pshape, pdims, after, None)
    ns = prod_of(ishape, indices.shape.dims, bd, None)
    g = reshape(grad, [nb, no, ns, nr])
    g = reshape(transpose(g, _int_const([0, 2, 1, 3])), [-1, no, nr])
    idx = reshape(indices, [nb, ns])
    if bd:
        # Batch b's rows live at b * N .. b * N + N - 1 of the flattened [B * N, O, R] result.
        it = indices.dtype
        starts = Range(_int_const(0, it), _to_index_tensor(nb, None, it), _int_const(1, it))
        offsets = math_ops.Mul(starts, _to_index_tensor(nn, None, it))
        idx = math_ops.AddV2(idx, reshape(offsets, _int_const([-1, 1])))
    idx = reshape(idx, _int_const([-1]))
    out = UnsortedSegmentSum(g, idx, _to_index_tensor(mul(nb, nn), None, dtypes.int32))
    out = transpose(reshape(out, [nb, nn, no, nr]), _int_const([0, 2, 1, 3]))
    return [reshape(out, pshape), None, None]


def _gather_drop_negatives(params, ids):
    """gather(params, ids) with zero rows where ids < 0: the rows UnsortedSegmentSum dropped."""
    v = constant_value(ids)
    if v is not None and (np.asarray(v) >= 0).all():
        return gather(params, ids)
    zero = constant(0, dtype=ids.dtype)
    gathered = gather(params, math_ops.Maximum(ids, zero))
    keep = math_ops.GreaterEqual(ids, zero)
    if gathered.shape.ndims is not None and ids.shape.ndims is not None:
        for _ in _pyrange(gathered.shape.ndims - ids.shape.ndims):
            keep = expand_dims(keep, -1)
    else:
        extra = math_ops.Sub(rank_of(gathered), rank_of(ids))
        ones_ = Fill(expand_dims(extra, 0), _int_const(1))
        keep = reshape(keep, concat([shape(ids), ones_], 0))
    return math_ops.SelectV2(keep, gathered, constant(0, dtype=gathered.dtype))


@UnsortedSegmentSum.gradient
def _unsorted_segment_sum_grad(op, grad):
    return [_gather_drop_negatives(_dense(grad), op.inputs[1]), None, None]


@DynamicPartition.gradient
def _dynamic_partition_grad(op, *grads):
    data, partitions = op.inputs
    n = op.attrs["num_partitions"]
    if all(g is None for g in grads):
        return [None, None]
    # Partition the positions like the data, then stitch the gradients back to them.
    positions = reshape(Range(_int_const(0), size(partitions), _int_const(1)), shape(partitions))
    where = dynamic_partition(positions, partitions, n)
    parts = [zeros_like(op.outputs[i]) if g is None else _dense(g) for i, g in enumerate(grads)]
    return [reshape(dynamic_stitch(where, parts), shape(data)), None]


@DynamicStitch.gradient
def _dynamic_stitch_grad(op, grad):
    n = op.attrs["N"]
    grad = _dense(grad)
    # Like TF: every position gets the gradient of its output row, even those overwritten by a
    # later duplicate index.
    return [None] * n + [gather(grad, _cast(op.inputs[i], dtypes.int32)) for i in _pyrange(n)]


# ---------------------------------------------------------------------------------------------
# OneHot, Fill, ZerosLike, OnesLike, Range
# ---------------------------------------------------------------------------------------------

def _infer_one_hot(inputs, attrs):
    indices, depth, on, off = inputs
    _check_index_dtype(indices, "indices", (dtypes.uint8, dtypes.int32, dtypes.int64))
    _check_index_dtype(depth, "depth")
    _check_scalar_like(depth, "depth")
    if on.dtype is not off.dtype:
        raise _DTypeError(f"on_value and off_value must have the same dtype, got {on.dtype.name} and {off.dtype.name}")
    for t, what in ((on, "on_value"), (off, "off_value")):
        if t.shape.ndims not in (None, 0):
            raise InferenceError(f"{what} must be a scalar, got shape {t.shape}")
    axis = int(attrs.get("axis", -1))
    d = _static_int(depth)
    if d is not None and d < 0:
        raise InferenceError(f"depth must be non-negative, got {d}")
    if indices.shape.dims is None:
        return _unknown(on.dtype)
    r = len(indices.shape.dims)
    if axis < -1 or axis > r:
        raise InferenceError(f"Expected axis to be -1 or between [0, {r}], but received: {axis}")
    dims = list(indices.shape.dims)
    dims.insert(r if axis == -1 else axis, d)
    return [(on.dtype, TensorShape(dims))]


OneHot = define_op("OneHot", _infer_one_hot)


def _infer_fill(inputs, attrs):
    dims, value = inputs
    _check_index_dtype(dims, "dims")
    _check_rank(dims, 1, "dims")
    if value.shape.ndims not in (None, 0):
        raise InferenceError(f"value must be a scalar, got shape {value.shape}")
    v = _static_ints(dims)
    if v is not None and any(d < 0 for d in v):
        raise InferenceError(f"dims {v} must be non-negative")
    return [(value.dtype, constant_shape(dims))]


Fill = define_op("Fill", _infer_fill)
ZerosLike = define_op("ZerosLike", unary)
OnesLike = define_op("OnesLike", unary)


def _infer_range(inputs, attrs):
    dt = _same_dtype(inputs, "start, limit and delta")
    if dt not in (dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64):
        raise _DTypeError(f"Range needs int32, int64, float32 or float64 arguments, got {dt.name}")
    for t, what in zip(inputs, ("start", "limit", "delta")):
        if t.shape.ndims not in (None, 0):
            raise InferenceError(f"{what} must be a scalar, got shape {t.shape}")
    vals = [constant_value(t) for t in inputs]
    if any(v is None for v in vals):
        return [(dt, TensorShape([None]))]
    start, limit, delta = (np.asarray(v).item() for v in vals)
    if delta == 0:
        raise InferenceError("Requires delta != 0")
    if delta > 0 and start > limit:
        raise InferenceError(f"Requires start <= limit when delta > 0: {start}/{limit}")
    if delta < 0 and start < limit:
        raise InferenceError(f"Requires start >= limit when delta < 0: {start}/{limit}")
    if dt.is_integer:
        n = (abs(limit - start) + abs(delta) - 1) // abs(delta)
    else:
        n = int(np.ceil(abs((limit - start) / delta)))
    return [(dt, TensorShape([n]))]


Range = define_op("Range", _infer_range)


@Fill.gradient
def _fill_grad(op, grad):
    grad = _dense(grad)
    r = grad.shape.ndims
    axes = _int_const(list(_pyrange(r))) if r is not None else Range(_int_const(0), rank_of(grad), _int_const(1))
    return [None, math_ops.Sum(grad, axes, keep_dims=False)]


# ---------------------------------------------------------------------------------------------
# Shape, Size, Rank, BroadcastTo, BroadcastGradientArgs, InvertPermutation
# ---------------------------------------------------------------------------------------------

def _out_type(attrs):
    t = dtypes.as_dtype(attrs.get("out_type", dtypes.int32))
    if t not in _INDEX_DTYPES:
        raise _DTypeError(f"out_type must be int32 or int64, got {t.name}")
    return t


Shape = define_op("Shape", lambda inputs, attrs: [(_out_type(attrs), TensorShape([inputs[0].shape.ndims]))])
Size = define_op("Size", lambda inputs, attrs: [(_out_type(attrs), TensorShape([]))])
Rank = define_op("Rank", lambda inputs, attrs: [(dtypes.int32, TensorShape([]))])


def _infer_broadcast_to(inputs, attrs):
    x, shp = inputs
    _check_index_dtype(shp, "shape")
    _check_rank(shp, 1, "shape")
    target = constant_shape(shp)
    v = _static_ints(shp)
    if v is not None and any(d < 0 for d in v):
        raise InferenceError(f"shape {v} must be non-negative")
    if target.dims is None:
        return _unknown(x.dtype)
    if x.shape.dims is None:
        return [(x.dtype, target)]
    if len(x.shape.dims) > len(target.dims):
        raise InferenceError(f"Rank of input ({len(x.shape.dims)}) must be no greater than rank of output shape "
                             f"({len(target.dims)}): cannot broadcast {x.shape} to {target}")
    lead = len(target.dims) - len(x.shape.dims)
    out = []
    for j, t in enumerate(target.dims):
        d = x.shape.dims[j - lead] if j >= lead else 1
        if t is not None:
            if d is not None and d != 1 and d != t:
                raise InferenceError(f"Incompatible shapes: cannot broadcast {x.shape} to {target}")
            out.append(t)
        else:
            out.append(d if d is not None and d != 1 else None)
    return [(x.dtype, TensorShape(out))]


BroadcastTo = define_op("BroadcastTo", _infer_broadcast_to)


def _infer_broadcast_gradient_args(inputs, attrs):
    s0, s1 = inputs
    for t, what in ((s0, "s0"), (s1, "s1")):
        _check_index_dtype(t, what)
        _check_rank(t, 1, what)
    if s0.dtype is not s1.dtype:
        raise _DTypeError(f"s0 and s1 must have the same dtype, got {s0.dtype.name} and {s1.dtype.name}")
    return [(s0.dtype, TensorShape([None]))] * 2


BroadcastGradientArgs = define_op("BroadcastGradientArgs", _infer_broadcast_gradient_args)


def _infer_invert_permutation(inputs, attrs):
    (x,) = inputs
    _check_index_dtype(x, "x")
    _check_rank(x, 1, "x")
    return [(x.dtype, x.shape)]


InvertPermutation = define_op("InvertPermutation", _infer_invert_permutation)


@BroadcastTo.gradient
def _broadcast_to_grad(op, grad):
    return [math_ops.reduce_to_shape(_dense(grad), op.inputs[0]), None]


def _no_gradient(op, *grads):
    return [None] * len(op.inputs)


for _d in (OneHot, ZerosLike, OnesLike, Range, Shape, Size, Rank, BroadcastGradientArgs, InvertPermutation):
    _d.gradient(_no_gradient)
del _d


# ---------------------------------------------------------------------------------------------
# Sparse gradients
# ---------------------------------------------------------------------------------------------

def indexed_slices_to_dense(s, name=None):
    """The dense tensor an IndexedSlices stands for: duplicate rows summed, absent rows zero.

    TF-1.x counterpart: the IndexedSlices -> Tensor conversion (`tf.convert_to_tensor`), which
    uses UnsortedSegmentSum over ``dense_shape[0]`` rows in the same way.
    """
    if s.dense_shape is None:
        raise ValueError(f"Cannot convert IndexedSlices with values '{s.values.name}' to a dense tensor: "
                         "its dense_shape is unknown")
    with name_scope(name, "IndexedSlicesToDense", [s.values]):
        dense_shape = _to_index_tensor(s.dense_shape, "dense_shape")
        known = _partial_ints(dense_shape)
        rows = known[0] if known and known[0] is not None else GatherV2(
            dense_shape, _int_const(0, dense_shape.dtype), _int_const(0), batch_dims=0)
        out = unsorted_segment_sum(s.values, s.indices, rows)
        static = constant_shape(dense_shape)
        if not out.shape.is_fully_defined() or (static.dims is not None and out.shape != static):
            out = reshape(out, dense_shape)
        return out


# ---------------------------------------------------------------------------------------------
# Python indexing
# ---------------------------------------------------------------------------------------------

_INDEX_ERROR = ("Only integers, slices (`:`), ellipsis (`...`), af.newaxis (`None`) and scalar int32/int64 "
                "tensors are valid indices")


def _check_index(idx):
    """An index as a Python int or a scalar integer tensor; TypeError for anything else."""
    if isinstance(idx, numbers.Integral):
        return int(idx)
    if isinstance(idx, np.ndarray) and idx.ndim == 0 and idx.dtype.kind in "iu":
        return int(idx)
    if _is_tensor_like(idx):
        t = convert_to_tensor(idx)
        if t.dtype in _INDEX_DTYPES and t.shape.ndims in (None, 0):
            return t
    raise TypeError(f"{_INDEX_ERROR}, got {idx!r}")


def _slice_helper(tensor, key):
    """``tensor[key]`` with Python's indexing syntax as one StridedSlice op (tf.Tensor.__getitem__).

    Supports ints (negative ones count from the end), slices with any of start/stop/step
    omitted or negative, Ellipsis, None (af.newaxis) and scalar int32/int64 tensors anywhere an
    int can go. Like TF, and unlike numpy, a list index is not fancy indexing: use `gather`.
    """
    if not isinstance(key, tuple):
        key = (key,)
    begin, end, strides = [], [], []
    masks = dict.fromkeys(_MASKS, 0)
    shrink_tensors = []    # positions whose end is a tensor index + 1, built inside the scope
    for i, k in enumerate(key):
        bit = 1 << i
        if isinstance(k, _pyslice):
            if k.start is None:
                begin.append(0)
                masks["begin_mask"] |= bit
            else:
                begin.append(_check_index(k.start))
            if k.stop is None:
                end.append(0)
                masks["end_mask"] |= bit
            else:
                end.append(_check_index(k.stop))
            strides.append(1 if k.step is None else _check_index(k.step))
        elif k is Ellipsis or k is None:
            # Placeholder bounds: the mask bit alone gives these entries their meaning.
            begin.append(0)
            end.append(0)
            strides.append(1)
            masks["ellipsis_mask" if k is Ellipsis else "new_axis_mask"] |= bit
        else:
            idx = _check_index(k)
            begin.append(idx)
            strides.append(1)
            masks["shrink_axis_mask"] |= bit
            if isinstance(idx, int):
                end.append(idx + 1)
            else:
                end.append(None)
                shrink_tensors.append(i)
    with _op_scope(None, "strided_slice") as sc:
        x = convert_to_tensor(tensor)
        for i in shrink_tensors:
            end[i] = math_ops.AddV2(begin[i], constant(1, dtype=begin[i].dtype))
        if begin:
            b, e, s = _index_args([begin, end, strides], ["stack", "stack_1", "stack_2"])
        else:
            b = e = s = _int_const([])
        return sc.op(StridedSlice, x, b, e, s, **masks)


# ---------------------------------------------------------------------------------------------
# Public wrappers
# ---------------------------------------------------------------------------------------------

def reshape(tensor, shape, name=None):  # noqa: A002  (TF's argument name)
    """Reshapes `tensor` to `shape`, one entry of which may be -1 (tf.reshape).

    `shape` may be a list mixing ints and scalar tensors. The -1 size is inferred when the graph
    is built whenever the input's element count is known.
    """
    with _op_scope(name, "Reshape") as sc:
        return sc.op(Reshape, convert_to_tensor(tensor, name="tensor"), _to_index_tensor(shape, "shape"))


def transpose(a, perm=None, name="transpose", conjugate=False):
    """Permutes the dimensions of `a`; perm=None reverses them (tf.transpose).

    `conjugate` is accepted for compatibility; actorflow has no complex dtypes.
    """
    with _op_scope(name, "transpose") as sc:
        a = convert_to_tensor(a, name="a")
        if perm is None:
            if a.shape.ndims is not None:
                perm = _int_const(list(_pyrange(a.shape.ndims - 1, -1, -1)))
            else:
                r = rank_of(a)
                perm = math_ops.Sub(math_ops.Sub(r, _int_const(1)), Range(_int_const(0), r, _int_const(1)))
        else:
            perm = _to_index_tensor(perm, "perm")
        return sc.op(Transpose, a, perm)


def expand_dims(input, axis=None, name=None, dim=None):  # noqa: A002
    """Inserts a dimension of size 1 at `axis` (tf.compat.v1.expand_dims; `dim` is the old name)."""
    if axis is None:
        if dim is None:
            raise ValueError("expand_dims needs an axis")
        axis = dim
    elif dim is not None:
        raise ValueError("Cannot specify both 'axis' and 'dim'")
    with _op_scope(name, "ExpandDims") as sc:
        return sc.op(ExpandDims, convert_to_tensor(input, name="input"), _to_index_tensor(axis, "dim"))


def squeeze(input, axis=None, name=None, squeeze_dims=None):  # noqa: A002
    """Removes dimensions of size 1: those in `axis`, or all of them (tf.compat.v1.squeeze)."""
    if squeeze_dims is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'squeeze_dims' and 'axis'")
        axis = squeeze_dims
    if axis is None:
        axis = ()
    elif isinstance(axis, numbers.Integral):
        axis = (int(axis),)
    with _op_scope(name, "Squeeze") as sc:
        return sc.op(Squeeze, convert_to_tensor(input, name="input"), squeeze_dims=tuple(int(a) for a in axis))


def concat(values, axis, name="concat"):
    """Concatenates tensors along `axis` (tf.concat); one value is returned through an Identity."""
    if not isinstance(values, (list, tuple)):
        values = [values]
    with _op_scope(name, "concat") as sc:
        if len(values) == 1:
            axis_t = _to_index_tensor(axis, "concat_dim")
            if axis_t.shape.ndims not in (None, 0):
                raise ValueError(f"concat's axis must be a scalar, got shape {axis_t.shape}")
            return sc.op(Identity, convert_to_tensor(values[0], name="values_0"))
        ts = _convert_same_dtype(values)
        return sc.op(ConcatV2, *ts, _to_index_tensor(axis, "axis"), N=len(ts))


def split(value, num_or_size_splits, axis=0, num=None, name="split"):
    """Splits `value` along `axis` into a list of tensors (tf.split).

    An int splits into that many equal parts; a list or 1-D tensor gives the sizes (one may be
    -1). `num` is needed only when the number of sizes cannot be known when building.
    """
    with _op_scope(name, "split") as sc:
        x = convert_to_tensor(value, name="value")
        axis_t = _to_index_tensor(axis, "split_dim")
        if isinstance(num_or_size_splits, numbers.Integral):
            n = int(num_or_size_splits)
            if n < 1:
                raise ValueError(f"split needs at least 1 part, got num_or_size_splits={n}")
            return _as_list(sc.op(Split, axis_t, x, num_split=n), n)
        sizes = _to_index_tensor(num_or_size_splits, "size_splits")
        if sizes.shape.ndims == 0:
            n = _static_int(sizes)
            if n is None:
                raise ValueError(f"Cannot infer num from shape {sizes.shape}: the number of parts must be "
                                 "known when the graph is built")
            return _as_list(sc.op(Split, axis_t, x, num_split=n), n)
        if num is None:
            if sizes.shape.ndims == 1 and sizes.shape.dims[0] is not None:
                num = sizes.shape.dims[0]
            else:
                raise ValueError(f"Cannot infer argument `num` from shape {sizes.shape}")
        return _as_list(sc.op(SplitV, x, sizes, axis_t, num_split=num), num)


def slice(input_, begin, size, name=None):  # noqa: A001  (TF's name)
    """The block of `input_` starting at `begin` with `size` (-1: to the end) (tf.slice)."""
    with _op_scope(name, "Slice") as sc:
        b, s = _index_args([begin, size], ["begin", "size"])
        return sc.op(Slice, convert_to_tensor(input_, name="input"), b, s)


def strided_slice(input_, begin, end, strides=None, begin_mask=0, end_mask=0, ellipsis_mask=0,
                  new_axis_mask=0, shrink_axis_mask=0, name=None):
    """Strided slice with TF's mask semantics (tf.strided_slice); strides default to 1."""
    with _op_scope(name, "StridedSlice") as sc:
        x = convert_to_tensor(input_, name="input")
        if strides is None:
            if _is_tensor_like(begin):
                bt = convert_to_tensor(begin)
                n = bt.shape.dims[0] if bt.shape.ndims == 1 else None
                strides = [1] * n if n is not None else OnesLike(bt)
            else:
                strides = [1] * len(begin)
        b, e, s = _index_args([begin, end, strides], ["begin", "end", "strides"])
        return sc.op(StridedSlice, x, b, e, s, begin_mask=int(begin_mask), end_mask=int(end_mask),
                     ellipsis_mask=int(ellipsis_mask), new_axis_mask=int(new_axis_mask),
                     shrink_axis_mask=int(shrink_axis_mask))


def tile(input, multiples, name=None):  # noqa: A002
    """Repeats `input` `multiples[i]` times along dimension i (tf.tile)."""
    with _op_scope(name, "Tile") as sc:
        return sc.op(Tile, convert_to_tensor(input, name="input"), _to_index_tensor(multiples, "multiples"))


def pad(tensor, paddings, mode="CONSTANT", constant_values=0, name=None):
    """Pads `tensor` with `paddings[i] = [before, after]` values in dimension i (tf.pad).

    Only mode "CONSTANT" is supported: REFLECT and SYMMETRIC need a MirrorPad op actorflow does
    not have.
    """
    m = str(mode).upper()
    if m in ("REFLECT", "SYMMETRIC"):
        raise NotImplementedError(f"pad mode {m!r} is not supported by actorflow (it has no MirrorPad op); "
                                  "use mode='CONSTANT'")
    if m != "CONSTANT":
        raise ValueError(f"Unknown padding mode: {mode!r}; expected 'CONSTANT', 'REFLECT' or 'SYMMETRIC'")
    with _op_scope(name, "Pad") as sc:
        x = convert_to_tensor(tensor, name="input")
        p = _to_index_tensor(paddings, "paddings")
        if not _is_tensor_like(constant_values) and np.all(np.asarray(constant_values) == 0):
            return sc.op(Pad, x, p)
        cv = convert_to_tensor(constant_values, dtype=None if _is_tensor_like(constant_values) else x.dtype,
                               name="constant_values")
        return sc.op(PadV2, x, p, cv)


def stack(values, axis=0, name="stack"):
    """Stacks rank-R tensors into one rank-(R+1) tensor along `axis` (tf.stack).

    Values may mix tensors and Python/numpy values; with no tensor at all (and axis 0) the result
    is a constant, as in TF.
    """
    values = list(values)
    if axis == 0 and not _has_tensor(values):
        return constant(values, name=name)
    with _op_scope(name, "stack") as sc:
        values = [stack(v) if isinstance(v, (list, tuple)) and _has_tensor(v) else v for v in values]
        ts = _convert_same_dtype(values)
        return sc.op(Pack, *ts, N=len(ts), axis=int(axis))


def unstack(value, num=None, axis=0, name="unstack"):
    """Splits `value` along `axis` into a list of rank-(R-1) tensors (tf.unstack)."""
    with _op_scope(name, "unstack") as sc:
        x = convert_to_tensor(value, name="value")
        if num is None:
            dims = x.shape.dims
            if dims is None or not -len(dims) <= axis < len(dims) or dims[axis] is None:
                raise ValueError(f"Cannot infer argument `num` from shape {x.shape}")
            num = dims[axis]
        return _as_list(sc.op(Unpack, x, num=int(num), axis=int(axis)), int(num))


def gather(params, indices, validate_indices=None, name=None, axis=None, batch_dims=0):
    """Gathers slices of `params` along `axis` at `indices` (tf.compat.v1.gather).

    The gradient with respect to `params` along axis 0 is an IndexedSlices (sparse).
    `validate_indices` is accepted and ignored, as in TF (indices are always checked).
    """
    if axis is None:
        axis = batch_dims
    with _op_scope(name, "GatherV2") as sc:
        p = convert_to_tensor(params, name="params")
        i = convert_to_tensor(indices, name="indices")
        a = _to_index_tensor(axis, "axis")
        return sc.op(GatherV2, p, i, a, batch_dims=int(batch_dims))


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    """One-hot encodes `indices` along a new `axis` (default last) (tf.one_hot).

    The dtype comes from `dtype`, else `on_value`/`off_value`, else float32; on/off default to 1/0.
    """
    with _op_scope(name, "one_hot") as sc:
        on_t = convert_to_tensor(on_value, dtype=dtype, name="on_value") if on_value is not None else None
        off_t = convert_to_tensor(off_value, dtype=dtype, name="off_value") if off_value is not None else None
        dt = dtypes.as_dtype(dtype) if dtype is not None else (
            on_t.dtype if on_t is not None else off_t.dtype if off_t is not None else dtypes.float32)
        if on_t is None:
            on_t = constant(1, dtype=dt, name="on_value")
        if off_t is None:
            off_t = constant(0, dtype=dt, name="off_value")
        if on_t.dtype is not off_t.dtype:
            raise TypeError(f"dtype of on_value ({on_t.dtype.name}) and off_value ({off_t.dtype.name}) must match")
        ind = convert_to_tensor(indices, name="indices")
        d = _to_index_tensor(depth, "depth", dtypes.int32)
        return sc.op(OneHot, ind, d, on_t, off_t, axis=-1 if axis is None else int(axis))


def fill(dims, value, name=None):
    """A tensor of shape `dims` filled with the scalar `value` (tf.fill)."""
    with _op_scope(name, "Fill") as sc:
        return sc.op(Fill, _to_index_tensor(dims, "dims"), convert_to_tensor(value, name="value"))


def _static_dims(shape_arg):
    """A shape argument as a list of ints when it holds no tensor and is fully known, else None."""
    if _has_tensor(shape_arg):
        return None
    if isinstance(shape_arg, TensorShape):
        return shape_arg.as_list() if shape_arg.is_fully_defined() else None
    arr = np.asarray(shape_arg)
    if arr.dtype.kind not in "iu" and arr.size:
        return None
    return [int(d) for d in arr.reshape(-1)]


# Like TF, small constant-shaped results are Const ops; bigger ones are Fill ops, which keep the
# serialized graph (shipped to every worker) small.
_SMALL_CONST = 1000


def _filled(shape_arg, value, dtype, name, default):
    dtype = dtypes.as_dtype(dtype)
    dims = _static_dims(shape_arg)
    with _op_scope(name, default) as sc:
        if dims is not None:
            if any(d < 0 for d in dims):
                raise ValueError(f"{default}: shape {dims} must be non-negative")
            if _prod(dims) < _SMALL_CONST:
                return sc.const(np.full(dims, value, dtype=dtype.np), dtype)
            shp = _int_const(dims)
        else:
            shp = _to_index_tensor(shape_arg, "shape")
        return sc.op(Fill, shp, constant(value, dtype=dtype))


def zeros(shape, dtype=dtypes.float32, name=None):  # noqa: A002
    """A tensor of zeros (tf.zeros): a Const when the shape is static and small, else Fill."""
    return _filled(shape, 0, dtype, name, "zeros")


def ones(shape, dtype=dtypes.float32, name=None):  # noqa: A002
    """A tensor of ones (tf.ones): a Const when the shape is static and small, else Fill."""
    return _filled(shape, 1, dtype, name, "ones")


def _like(tensor, dtype, name, optimize, value, op_def, default):
    with _op_scope(name, default) as sc:
        x = convert_to_tensor(tensor, name="tensor")
        dt = dtypes.as_dtype(dtype) if dtype is not None else x.dtype
        n = x.shape.num_elements()
        if optimize and n is not None and n < _SMALL_CONST:
            return sc.const(np.full(x.shape.as_list(), value, dtype=dt.np), dt)
        if dt is not x.dtype:
            return sc.op(Fill, shape(x), constant(value, dtype=dt))
        return sc.op(op_def, x)


def zeros_like(tensor, dtype=None, name=None, optimize=True):
    """Zeros shaped like `tensor` (tf.zeros_like); a Const when the shape is static and small."""
    return _like(tensor, dtype, name, optimize, 0, ZerosLike, "zeros_like")


def ones_like(tensor, dtype=None, name=None, optimize=True):
    """Ones shaped like `tensor` (tf.ones_like); a Const when the shape is static and small."""
    return _like(tensor, dtype, name, optimize, 1, OnesLike, "ones_like")


_RANGE_DTYPES = (dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64)


def range(start, limit=None, delta=1, dtype=None, name="range"):  # noqa: A001  (TF's name)
    """The sequence start, start+delta, ... up to but excluding `limit` (tf.range).

    With one argument it is the limit. The dtype is `dtype`, else the widest of the arguments'
    (int32 < int64 < float32 < float64).
    """
    if limit is None:
        start, limit = 0, start
    with _op_scope(name, "range") as sc:
        args = [start, limit, delta]
        natural = []
        for v in args:
            if _is_tensor_like(v):
                natural.append(_dtype_of(v))
            elif isinstance(v, (bool, np.bool_)):
                natural.append(dtypes.int32)
            elif isinstance(v, np.generic):
                natural.append(dtypes.from_numpy(v.dtype))
            elif isinstance(v, numbers.Integral):
                natural.append(dtypes.int32 if _fits_int32(v) else dtypes.int64)
            else:
                natural.append(dtypes.float32)
        if dtype is not None:
            dt = dtypes.as_dtype(dtype)
        else:
            bad = [d.name for d in natural if d not in _RANGE_DTYPES]
            if bad:
                raise TypeError(f"range arguments must be int32, int64, float32 or float64, got {bad}")
            dt = max(natural, key=_RANGE_DTYPES.index)
        ts = []
        for v, nm in zip(args, ("start", "limit", "delta")):
            if _is_tensor_like(v):
                ts.append(_cast(convert_to_tensor(v), dt))
            else:
                ts.append(constant(np.asarray(v).astype(dt.np), dtype=dt, name=nm))
        return sc.op(Range, *ts)


def shape(input, name=None, out_type=dtypes.int32):  # noqa: A002
    """The shape of `input` as a 1-D tensor (tf.shape); a Const when the shape is static."""
    out_type = dtypes.as_dtype(out_type)
    with _op_scope(name, "Shape") as sc:
        x = convert_to_tensor(input, name="input")
        if x.shape.is_fully_defined():
            return sc.const(x.shape.as_list(), out_type)
        return sc.op(Shape, x, out_type=out_type)


def size(input, name=None, out_type=dtypes.int32):  # noqa: A002
    """The number of elements of `input` as a scalar (tf.size); a Const when static."""
    out_type = dtypes.as_dtype(out_type)
    with _op_scope(name, "Size") as sc:
        x = convert_to_tensor(input, name="input")
        if x.shape.is_fully_defined():
            return sc.const(x.shape.num_elements(), out_type)
        return sc.op(Size, x, out_type=out_type)


def rank(input, name=None):  # noqa: A002
    """The number of dimensions of `input` as an int32 scalar (tf.rank); a Const when static."""
    with _op_scope(name, "Rank") as sc:
        x = convert_to_tensor(input, name="input")
        if x.shape.ndims is not None:
            return sc.const(x.shape.ndims, dtypes.int32)
        return sc.op(Rank, x)


rank_of = rank   # for code in this module where a local variable is called `rank`


def broadcast_to(input, shape, name=None):  # noqa: A002
    """Broadcasts `input` to `shape` with numpy's rules (tf.broadcast_to)."""
    with _op_scope(name, "BroadcastTo") as sc:
        return sc.op(BroadcastTo, convert_to_tensor(input, name="input"), _to_index_tensor(shape, "shape"))


def unsorted_segment_sum(data, segment_ids, num_segments, name=None):
    """Sums the rows of `data` into `num_segments` segments by `segment_ids`; negative ids are
    dropped (tf.math.unsorted_segment_sum)."""
    with _op_scope(name, "UnsortedSegmentSum") as sc:
        d = convert_to_tensor(data, name="data")
        ids = convert_to_tensor(segment_ids, name="segment_ids")
        n = _to_index_tensor(num_segments, "num_segments")
        return sc.op(UnsortedSegmentSum, d, ids, n)


def dynamic_partition(data, partitions, num_partitions, name=None):
    """Splits `data` into `num_partitions` tensors by the partition index of each row
    (tf.dynamic_partition)."""
    with _op_scope(name, "DynamicPartition") as sc:
        d = convert_to_tensor(data, name="data")
        p = convert_to_tensor(partitions, name="partitions")
        n = int(num_partitions)
        return _as_list(sc.op(DynamicPartition, d, p, num_partitions=n), n)


def dynamic_stitch(indices, data, name=None):
    """Interleaves `data` tensors into one: ``merged[indices[i][j]] = data[i][j]``; the last
    write wins for duplicate indices (tf.dynamic_stitch)."""
    indices, data = list(indices), list(data)
    if len(indices) != len(data) or not indices:
        raise ValueError(f"dynamic_stitch needs as many indices as data tensors (at least one), got "
                         f"{len(indices)} and {len(data)}")
    with _op_scope(name, "DynamicStitch") as sc:
        idx = [_to_index_tensor(v, f"indices_{i}") for i, v in enumerate(indices)]
        ds = _convert_same_dtype(data, "data")
        return sc.op(DynamicStitch, *idx, *ds, N=len(idx))


def invert_permutation(x, name=None):
    """The inverse of the permutation `x`: ``y[x[i]] = i`` (tf.math.invert_permutation)."""
    with _op_scope(name, "InvertPermutation") as sc:
        return sc.op(InvertPermutation, _to_index_tensor(x, "x"))


# ---------------------------------------------------------------------------------------------
# Where (coordinates of true elements) and boolean_mask
# ---------------------------------------------------------------------------------------------

def _infer_where(inputs, attrs):
    c = inputs[0]
    if not (c.dtype.is_bool or c.dtype.is_numeric):
        raise InferenceError(f"Where needs a bool or numeric input, got {c.dtype.name}")
    return [(dtypes.int64, TensorShape([None, c.shape.ndims]) if c.shape.ndims is not None
             else TensorShape([None, None]))]


Where = define_op("Where", _infer_where)


def where_indices(condition, name=None):
    """The coordinates of the true (non-zero) elements of `condition`, an int64 [num_true, rank]
    tensor in row-major order (tf.compat.v1.where with one argument; op Where). No gradient."""
    c = convert_to_tensor(condition)
    return Where(c, name=name or "Where")


def boolean_mask(tensor, mask, name="boolean_mask", axis=None):
    """The entries of `tensor` where `mask` is true: `mask`'s k dimensions, starting at `axis`
    (default 0), collapse into one of unknown size (tf.boolean_mask). `mask` needs a known rank."""
    with name_scope(name, "boolean_mask"):
        tensor = convert_to_tensor(tensor)
        mask = convert_to_tensor(mask, dtype=dtypes.bool_) if not isinstance(mask, Tensor) else mask
        k = mask.shape.ndims
        if k is None or k == 0:
            raise ValueError(f"boolean_mask: the mask must have a known, non-zero rank, got {mask.shape} "
                             f"('{mask.name}')")
        axis = 0 if axis is None else int(axis)
        rank = tensor.shape.ndims
        if rank is not None:
            if axis < 0:
                axis += rank
            if not tensor.shape[axis:axis + k].is_compatible_with(mask.shape):
                raise ValueError(f"boolean_mask: the mask's shape {mask.shape} does not match the tensor's "
                                 f"dimensions {tensor.shape[axis:axis + k]} from axis {axis} ('{tensor.name}')")
        dims = shape(tensor)
        lead = strided_slice(dims, [0], [axis]) if axis else None
        collapsed = math_ops.reduce_prod(strided_slice(dims, [axis], [axis + k]), [0], keepdims=True)
        rest = strided_slice(dims, [axis + k], [0], end_mask=1)
        flat = reshape(tensor, concat([p for p in (lead, collapsed, rest) if p is not None], 0))
        if rank is not None:
            flat.set_shape(tensor.shape[:axis].concatenate(
                [tensor.shape[axis:axis + k].num_elements()]).concatenate(tensor.shape[axis + k:]))
        idx = squeeze(where_indices(reshape(mask, [-1])), [1])
        return gather(flat, idx, axis=axis)
