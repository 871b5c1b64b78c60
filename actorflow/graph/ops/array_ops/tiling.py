"""Tile, Pad, PadV2: definitions, gradients and wrappers."""
from __future__ import annotations

import numpy as np

from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.array_ops import filling, packing, reshaping, shapes, slicing
from actorflow.graph.ops.array_ops._args import _dense, _int_const, _is_tensor_like, _op_scope, _to_index_tensor
from actorflow.graph.ops.array_ops._infer import (
    _check_index_dtype,
    _check_rank,
    _DTypeError,
    _partial_ints,
    _pyrange,
    _static_ints,
    _with_rank,
)
from actorflow.graph.ops.infer import constant_value
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["tile", "pad", "roll"]


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
        raise InferenceError(f"multiples {reshaping._fmt(m)} must be non-negative")
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


def _infer_mirror_pad(inputs, attrs):
    mode = attrs.get("mode")
    if mode not in ("REFLECT", "SYMMETRIC"):
        raise InferenceError(f"MirrorPad: mode must be REFLECT or SYMMETRIC, got {mode!r}")
    out = _infer_pad(inputs, attrs)
    p = constant_value(inputs[1])
    dims = inputs[0].shape.dims
    if p is not None and dims is not None:
        limit = 1 if mode == "REFLECT" else 0
        for d, (a, b) in zip(dims, np.asarray(p).reshape(-1, 2)):
            if d is not None and (a > d - limit or b > d - limit):
                raise InferenceError(f"MirrorPad: paddings must be no greater than the dimension size"
                                     f"{' minus 1' if limit else ''} in {mode} mode: {int(a)}, {int(b)} "
                                     f"for a dimension of {d}")
    return out


def _infer_mirror_pad_grad(inputs, attrs):
    grad, paddings = inputs
    p = constant_value(paddings)
    dims = grad.shape.dims
    if p is None or dims is None:
        return [_with_rank(grad.dtype, grad.shape.ndims)]
    return [(grad.dtype, TensorShape([None if d is None else d - int(a) - int(b)
                                      for d, (a, b) in zip(dims, np.asarray(p).reshape(-1, 2))]))]


MirrorPad = define_op("MirrorPad", _infer_mirror_pad)
MirrorPadGrad = define_op("MirrorPadGrad", _infer_mirror_pad_grad)


@MirrorPad.gradient
def _mirror_pad_grad(op, grad):
    return [MirrorPadGrad(_dense(grad), op.inputs[1], mode=op.attrs["mode"]), None]


@MirrorPadGrad.gradient
def _mirror_pad_grad_grad(op, grad):
    return [MirrorPad(_dense(grad), op.inputs[1], mode=op.attrs["mode"]), None]


def _infer_roll(inputs, attrs):
    x, shift, axis = inputs
    _check_index_dtype(shift, "shift")
    _check_index_dtype(axis, "axis")
    for t, what in ((shift, "shift"), (axis, "axis")):
        if t.shape.ndims is not None and t.shape.ndims > 1:
            raise InferenceError(f"{what} must be a scalar or a 1-D vector, but '{t.name}' has shape {t.shape}")
    ns, na = shift.shape.num_elements(), axis.shape.num_elements()
    if ns is not None and na is not None and ns != na:
        raise InferenceError(f"shift and axis must have the same size, got {ns} and {na}")
    a = _static_ints(axis)
    rank = x.shape.ndims
    if a is not None and rank is not None:
        for v in a:
            if not -rank <= v < rank:
                raise InferenceError(f"axis {v} is out of range for a tensor of rank {rank}")
    return [(x.dtype, x.shape)]


Roll = define_op("Roll", _infer_roll)


@Roll.gradient
def _roll_grad(op, grad):
    return [Roll(_dense(grad), math_ops.Neg(op.inputs[1]), op.inputs[2]), None, None]


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
        pairs = packing.Pack(multiples, shapes.shape(x, out_type=multiples.dtype), N=2, axis=0)
        split_shape = reshaping.reshape(reshaping.transpose(pairs, _int_const([1, 0])), _int_const([-1]))
        axes = filling.Range(_int_const(0), shapes.size(split_shape), _int_const(2))
    dx = math_ops.Sum(reshaping.reshape(grad, split_shape), axes, keep_dims=False)
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
        first_col = slicing.Slice(paddings, _int_const([0, 0]), packing.Pack(shapes.rank_of(x), _int_const(1), N=2, axis=0))
        begin = reshaping.reshape(first_col, _int_const([-1]))
    sizes = shapes.shape(x, out_type=it)
    return [slicing.slice(grad, begin, sizes), None] + [None] * (len(op.inputs) - 2)


Pad.gradient(_pad_grad)
PadV2.gradient(_pad_grad)


def tile(input, multiples, name=None):  # noqa: A002
    """Repeats `input` `multiples[i]` times along dimension i (tf.tile)."""
    with _op_scope(name, "Tile") as sc:
        return sc.op(Tile, convert_to_tensor(input, name="input"), _to_index_tensor(multiples, "multiples"))


def pad(tensor, paddings, mode="CONSTANT", constant_values=0, name=None):
    """Pads `tensor` with `paddings[i] = [before, after]` values in dimension i (tf.pad).

    `mode`: "CONSTANT" (`constant_values`), "REFLECT" (mirrored without the edge) or "SYMMETRIC"
    (mirrored with it), case-insensitive.
    """
    m = str(mode).upper()
    if m in ("REFLECT", "SYMMETRIC"):
        with _op_scope(name, "MirrorPad") as sc:
            return sc.op(MirrorPad, convert_to_tensor(tensor, name="input"), _to_index_tensor(paddings, "paddings"),
                         mode=m)
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


def roll(input, shift, axis, name=None):  # noqa: A002
    """Shifts the elements of `input` by `shift` along `axis` (scalars or equal-length vectors),
    wrapping around (tf.roll, tf.manip.roll)."""
    with _op_scope(name, "Roll") as sc:
        return sc.op(Roll, convert_to_tensor(input, name="input"), _to_index_tensor(shift, "shift"),
                     _to_index_tensor(axis, "axis"))
