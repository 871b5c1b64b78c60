"""CPU kernels of the tensor lists (graph/ops/list_ops.py).

A list is a 0-d object array holding a `TensorList`: a tuple of elements (numpy arrays, or None
for an unset one) and the element dtype and shape. Writes build a new tuple: the elements are
shared, never copied. The kernels only move references, so they run inline (releases_gil=False).
"""
from __future__ import annotations

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel

__all__ = ["TensorList", "add_lists", "zeros_list"]


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
    resize = bool(attrs.get("resize_if_index_out_of_bounds", False))

    def fn(handle, index, item):
        lst = _unwrap(handle, "TensorListSetItem")
        n = len(lst.items)
        i = int(np.asarray(index).reshape(-1)[0])
        if resize and i >= n:
            lst = TensorList(lst.items + (None,) * (i + 1 - n), lst.dtype, lst.shape)
        i = _index(i, len(lst.items), "TensorListSetItem")
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


def _elements(lst: TensorList, shape, op, indices=None) -> list:
    """The elements at `indices` (all by default), unset ones as zeros (see _unset)."""
    idx = range(len(lst.items)) if indices is None else indices
    return [lst.items[i] if lst.items[i] is not None else _unset(lst, shape, op, i) for i in idx]


def _stacked(lst: TensorList, shape, op, items):
    """`items` stacked along a new first dimension; none: an empty tensor of the element shape."""
    if not items:
        el = shape if _full(shape) else lst.shape
        if not _full(el):
            raise InvalidArgumentError(f"{op}: no elements to stack and the element shape is not fully known")
        return np.zeros((0,) + tuple(el), lst.dtype)
    try:
        return np.stack(items)
    except ValueError:
        raise InvalidArgumentError(f"{op}: the elements have different shapes: "
                                   f"{sorted({tuple(v.shape) for v in items})}") from None


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
        return _stacked(lst, shape, "TensorListStack", _elements(lst, shape, "TensorListStack"))
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


def _indices(indices, op):
    idx = np.asarray(indices).reshape(-1)
    if idx.size and idx.min() < 0:
        raise InvalidArgumentError(f"{op}: negative index {int(idx.min())}")
    return [int(i) for i in idx]


@register_kernel("TensorListGather", "CPU", releases_gil=False)
def _gather(attrs):
    shape = _shape(attrs)

    def fn(handle, indices):
        lst = _unwrap(handle, "TensorListGather")
        idx = [_index(i, len(lst.items), "TensorListGather") for i in _indices(indices, "TensorListGather")]
        return _stacked(lst, shape, "TensorListGather", _elements(lst, shape, "TensorListGather", idx))
    return fn


@register_kernel("TensorListScatterIntoExistingList", "CPU", releases_gil=False)
def _scatter(attrs):
    resize = bool(attrs.get("resize_if_index_out_of_bounds", False))

    def fn(handle, tensor, indices):
        lst = _unwrap(handle, "TensorListScatterIntoExistingList")
        t = np.asarray(tensor)
        idx = _indices(indices, "TensorListScatterIntoExistingList")
        if t.ndim == 0 or t.shape[0] != len(idx):
            raise InvalidArgumentError(f"TensorListScatterIntoExistingList: {len(idx)} indices for a tensor of shape "
                                       f"{list(t.shape)}")
        items = list(lst.items)
        for k, i in enumerate(idx):
            if i >= len(items):
                if not resize:
                    _index(i, len(items), "TensorListScatterIntoExistingList")
                items.extend([None] * (i + 1 - len(items)))
            items[i] = t[k]
        return _wrap(TensorList(tuple(items), lst.dtype, lst.shape))
    return fn


@register_kernel("TensorListConcatV2", "CPU", releases_gil=False)
def _concat(attrs):
    shape = _shape(attrs)

    def fn(handle):
        lst = _unwrap(handle, "TensorListConcatV2")
        items = _elements(lst, shape, "TensorListConcatV2")
        for v in items:
            if v.ndim == 0:
                raise InvalidArgumentError("TensorListConcatV2: the elements must have rank >= 1 to be concatenated")
        lengths = np.array([v.shape[0] for v in items], np.int64)
        if not items:
            el = shape if shape is not None else lst.shape
            if el is None or not _full(el[1:]):
                raise InvalidArgumentError("TensorListConcatV2: the list is empty and its element shape is not known")
            return np.zeros((0,) + tuple(el[1:]), lst.dtype), lengths
        try:
            return np.concatenate(items), lengths
        except ValueError:
            raise InvalidArgumentError("TensorListConcatV2: the elements differ beyond their first dimension: "
                                       f"{sorted({tuple(v.shape) for v in items})}") from None
    return fn


@register_kernel("TensorListSplit", "CPU", releases_gil=False)
def _split(attrs):
    def fn(tensor, lengths):
        t = np.asarray(tensor)
        ls = [int(v) for v in np.asarray(lengths).reshape(-1)]
        if t.ndim == 0 or any(v < 0 for v in ls) or sum(ls) != t.shape[0]:
            raise InvalidArgumentError(f"TensorListSplit: lengths {ls} do not split a tensor of shape {list(t.shape)}")
        bounds = np.cumsum([0] + ls)
        return _wrap(TensorList(tuple(t[a:b] for a, b in zip(bounds[:-1], bounds[1:])), t.dtype, (-1,) + t.shape[1:]))
    return fn


def add_lists(*handles):
    """AddN of tensor lists: element by element, an unset element counting as zeros (TF's
    aggregation of list gradients)."""
    lists = [_unwrap(h, "AddN") for h in handles]
    n = max(len(lst.items) for lst in lists)
    items = []
    for i in range(n):
        vals = [lst.items[i] for lst in lists if i < len(lst.items) and lst.items[i] is not None]
        if not vals:
            items.append(None)
            continue
        acc = np.array(vals[0], copy=True)
        for v in vals[1:]:
            if v.shape != acc.shape:
                raise InvalidArgumentError(f"AddN: tensor lists with element {i} of shapes {list(acc.shape)} and "
                                           f"{list(v.shape)}")
            acc += v
        items.append(acc)
    first = lists[0]
    return _wrap(TensorList(tuple(items), first.dtype, first.shape))


def zeros_list(handle):
    """ZerosLike of a tensor list: as long, every element unset (reads as zeros)."""
    lst = _unwrap(handle, "ZerosLike")
    return _wrap(TensorList((None,) * len(lst.items), lst.dtype, lst.shape))
