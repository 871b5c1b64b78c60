"""Naming and argument conversion for the array ops' wrappers."""
from __future__ import annotations

import contextlib

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, convert_to_tensor, get_default_graph
from actorflow.graph.indexed_slices import IndexedSlices
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.array_ops._infer import _INDEX_DTYPES
from actorflow.graph.ops.constant import constant
from actorflow.graph.tensor_shape import TensorShape


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
    from actorflow.graph.ops.array_ops.packing import Pack
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
    from actorflow.graph.ops.array_ops.gathering import indexed_slices_to_dense
    if isinstance(grad, IndexedSlices):
        return indexed_slices_to_dense(grad)
    return grad


def _int_const(values, dtype=dtypes.int32):
    return constant(np.asarray(values, dtype=dtype.np), dtype=dtype)


def _dim(x, i):
    """Dimension `i` of `x`: a Python int when known when building, else an int32 scalar tensor."""
    from actorflow.graph.ops.array_ops.gathering import GatherV2
    from actorflow.graph.ops.array_ops.shapes import shape
    d = x.shape.dims[i] if x.shape.dims is not None else None
    if d is not None:
        return d
    return GatherV2(shape(x), _int_const(i), _int_const(0), batch_dims=0)
