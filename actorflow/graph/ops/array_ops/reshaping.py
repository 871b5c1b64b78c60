"""Reshape, Transpose, ExpandDims, Squeeze: definitions, gradients and wrappers."""
from __future__ import annotations

import builtins
import numbers

import numpy as np

from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.array_ops import filling, shapes
from actorflow.graph.ops.array_ops._args import _dense, _int_const, _op_scope, _to_index_tensor
from actorflow.graph.ops.array_ops._infer import (
    _check_index_dtype,
    _check_rank,
    _check_scalar_like,
    _partial_ints,
    _prod,
    _pyrange,
    _static_int,
    _static_ints,
    _unknown,
    _with_rank,
)
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["reshape", "transpose", "expand_dims", "squeeze"]


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
    return [reshape(_dense(grad), shapes.shape(op.inputs[0])), None]


@ExpandDims.gradient
def _expand_dims_grad(op, grad):
    return [reshape(_dense(grad), shapes.shape(op.inputs[0])), None]


@Squeeze.gradient
def _squeeze_grad(op, grad):
    return [reshape(_dense(grad), shapes.shape(op.inputs[0]))]


@Transpose.gradient
def _transpose_grad(op, grad):
    perm = op.inputs[1]
    p = _static_ints(perm)
    inv = _int_const(np.argsort(p), perm.dtype) if p is not None else shapes.invert_permutation(perm)
    return [transpose(_dense(grad), inv), None]


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
                r = shapes.rank_of(a)
                perm = math_ops.Sub(math_ops.Sub(r, _int_const(1)), filling.Range(_int_const(0), r, _int_const(1)))
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
