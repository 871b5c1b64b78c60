"""CPU kernels of the tensor lists (graph/ops/list_ops.py).

A list is a 0-d object array holding a `TensorList`: a tuple of elements (numpy arrays, or None
for an unset one) and the element dtype and shape. Writes build a new tuple: the elements are
shared, never copied. The kernels only move references, so they run inline (releases_gil=False).
"""
from __future__ import annotations

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel

__all__ = ["TensorList"]


class TensorList:
    __slots__ = ("items", "dtype", "shape")

    def __init__(self, items: tuple, dtype, shape):
        self.items = items
        self.dtype = dtype
        self.shape = shape          # the element shape: a tuple with -1 for unknown dims, or None

    def __repr__(self):
        return f"<TensorList of {len(self.items)} {self.dtype}>"


def _wrap(lst: TensorList):
    h = np.empty((), dtype=object)
    h[()] = lst
    return h


def _unwrap(h, op) -> TensorList:
    lst = h[()] if isinstance(h, np.ndarray) else h
    if not isinstance(lst, TensorList):
        raise InvalidArgumentError(f"{op}: input_handle is not a tensor list, got {type(lst).__name__}")
    return lst


def _index(i, n, op) -> int:
    i = int(np.asarray(i).reshape(-1)[0])
    if not 0 <= i < n:
        raise InvalidArgumentError(f"{op}: Trying to access element {i} in a list with {n} elements.")
    return i


def _shape(attrs):
    s = attrs.get("element_shape")
    return None if s is None else tuple(int(d) for d in s)


def _full(shape) -> bool:
    return shape is not None and all(d >= 0 for d in shape)


@register_kernel("TensorListReserve", "CPU", releases_gil=False)
def _reserve(attrs):
    dtype, shape = np.dtype(attrs["element_dtype"]), _shape(attrs)

    def fn(num_elements):
        n = int(np.asarray(num_elements).reshape(-1)[0])
        if n < 0:
            raise InvalidArgumentError(f"TensorListReserve: num_elements must be non-negative, got {n}")
        return _wrap(TensorList((None,) * n, dtype, shape))
    return fn


@register_kernel("TensorListSetItem", "CPU", releases_gil=False)
def _set_item(attrs):
    def fn(handle, index, item):
        lst = _unwrap(handle, "TensorListSetItem")
        i = _index(index, len(lst.items), "TensorListSetItem")
        item = np.asarray(item)
        if item.dtype != lst.dtype:
            raise InvalidArgumentError(f"TensorListSetItem: item of dtype {item.dtype} in a list of {lst.dtype}")
        if lst.shape is not None and (len(lst.shape) != item.ndim or any(
                d >= 0 and d != s for d, s in zip(lst.shape, item.shape))):
            raise InvalidArgumentError(f"TensorListSetItem: item of shape {list(item.shape)} in a list of elements "
                                       f"of shape {list(lst.shape)}")
        items = list(lst.items)
        items[i] = item
        return _wrap(TensorList(tuple(items), lst.dtype, lst.shape))
    return fn


def _unset(lst: TensorList, shape, op, i):
    shape = shape if _full(shape) else lst.shape
    if not _full(shape):
        raise InvalidArgumentError(f"{op}: element {i} was never set, and the element shape "
                                   f"{None if shape is None else list(shape)} is not fully known")
    return np.zeros(shape, lst.dtype)


@register_kernel("TensorListGetItem", "CPU", releases_gil=False)
def _get_item(attrs):
    shape = _shape(attrs)

    def fn(handle, index):
        lst = _unwrap(handle, "TensorListGetItem")
        i = _index(index, len(lst.items), "TensorListGetItem")
        v = lst.items[i]
        return v if v is not None else _unset(lst, shape, "TensorListGetItem", i)
    return fn


@register_kernel("TensorListStack", "CPU", releases_gil=False)
def _stack(attrs):
    shape = _shape(attrs)

    def fn(handle):
        lst = _unwrap(handle, "TensorListStack")
        items = [v if v is not None else _unset(lst, shape, "TensorListStack", i) for i, v in enumerate(lst.items)]
        if not items:
            el = shape if _full(shape) else lst.shape
            if not _full(el):
                raise InvalidArgumentError("TensorListStack: the list is empty and its element shape is not fully "
                                           "known")
            return np.zeros((0,) + tuple(el), lst.dtype)
        try:
            return np.stack(items)
        except ValueError:
            raise InvalidArgumentError("TensorListStack: the elements have different shapes: "
                                       f"{sorted({tuple(v.shape) for v in items})}") from None
    return fn


@register_kernel("TensorListFromTensor", "CPU", releases_gil=False)
def _from_tensor(attrs):
    def fn(tensor):
        t = np.asarray(tensor)
        if t.ndim == 0:
            raise InvalidArgumentError("TensorListFromTensor: the tensor must have rank >= 1")
        return _wrap(TensorList(tuple(t[i] for i in range(t.shape[0])), t.dtype, tuple(t.shape[1:])))
    return fn


@register_kernel("TensorListLength", "CPU", releases_gil=False)
def _length(attrs):
    def fn(handle):
        return np.int32(len(_unwrap(handle, "TensorListLength").items))
    return fn
