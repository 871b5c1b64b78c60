"""Slice, StridedSlice, StridedSliceGrad: definitions, gradients and wrappers, and Python's indexing
syntax on tensors (`x[1:, ..., None]`, one StridedSlice)."""
from __future__ import annotations

import numbers

import numpy as np

from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.array_ops import filling, packing, shapes, tiling
from actorflow.graph.ops.array_ops._args import _dense, _index_args, _int_const, _is_tensor_like, _op_scope
from actorflow.graph.ops.array_ops._infer import (
    _INDEX_DTYPES,
    _MASKS,
    _check_index_dtype,
    _check_rank,
    _DTypeError,
    _partial_ints,
    _pyrange,
    _pyslice,
    _static_ints,
    _unknown,
)
from actorflow.graph.ops.constant import constant
from actorflow.graph.ops.infer import constant_shape
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["slice", "strided_slice", "newaxis"]


newaxis = None
"""Alias of None for indexing (tf.newaxis): ``x[:, af.newaxis]`` inserts a dimension of 1."""


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
        after = math_ops.Sub(math_ops.Sub(shapes.shape(x, out_type=it), shapes.shape(y, out_type=it)), begin)
        paddings = packing.Pack(begin, after, N=2, axis=1)
    return [tiling.pad(grad, paddings), None, None]


@StridedSlice.gradient
def _strided_slice_grad(op, grad):
    x, begin, end, strides = op.inputs
    masks = {k: op.attrs.get(k, 0) for k in _MASKS}
    dx = StridedSliceGrad(shapes.shape(x, out_type=begin.dtype), begin, end, strides, _dense(grad), **masks)
    return [dx, None, None, None]


@StridedSliceGrad.gradient
def _strided_slice_grad_grad(op, grad):
    _, begin, end, strides, _ = op.inputs
    masks = {k: op.attrs.get(k, 0) for k in _MASKS}
    return [None, None, None, None, StridedSlice(_dense(grad), begin, end, strides, **masks)]


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
                strides = [1] * n if n is not None else filling.OnesLike(bt)
            else:
                strides = [1] * len(begin)
        b, e, s = _index_args([begin, end, strides], ["begin", "end", "strides"])
        return sc.op(StridedSlice, x, b, e, s, begin_mask=int(begin_mask), end_mask=int(end_mask),
                     ellipsis_mask=int(ellipsis_mask), new_axis_mask=int(new_axis_mask),
                     shrink_axis_mask=int(shrink_axis_mask))
