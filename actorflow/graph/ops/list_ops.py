"""Tensor lists: a value holding n tensors, updated functionally (TF's TensorList ops, which TF 2's
control flow uses in place of TensorArray resources).

A list is a `variant` scalar: TensorListReserve makes one of n unset elements, TensorListSetItem
returns a new list with element i replaced (the others shared, not copied: a write is O(n)
references, never a copy of tensor data), TensorListGetItem reads element i, TensorListStack packs
them into one tensor (unset elements read as zeros when the element shape is fully known, as in TF),
and TensorListFromTensor unpacks a tensor. Because a write makes a new value, lists flow through
while loops as loop variables and their gradients are ordinary values too (TF's list gradients):
the gradient of SetItem reads the item's gradient and clears it from the list's; GetItem's writes
it into a list of unset elements; Stack and FromTensor are each other's gradient.

map_fn and scan (graph/ops/functional_ops.py) write their outputs into lists.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.tensor_shape import TensorShape, as_shape

__all__ = ["TensorListReserve", "TensorListSetItem", "TensorListGetItem", "TensorListStack", "TensorListFromTensor",
           "TensorListLength", "TensorListGather", "TensorListScatterIntoExistingList", "TensorListConcatV2",
           "TensorListSplit"]


def _list_in(t, what="input_handle"):
    if t.dtype is not dtypes.variant:
        raise InferenceError(f"{what} must be a tensor list (variant), got {t.dtype.name} ('{t.name}')")


def _index_in(t, what="index"):
    if t.dtype not in (dtypes.int32, dtypes.int64) or t.shape.ndims not in (None, 0):
        raise InferenceError(f"{what} must be an int32 scalar, got {t.dtype.name} {t.shape} ('{t.name}')")


def _variant(inputs, attrs):
    return [(dtypes.variant, TensorShape([]))]


def _infer_reserve(inputs, attrs):
    _index_in(inputs[0], "num_elements")
    return _variant(inputs, attrs)


def _infer_set_item(inputs, attrs):  # (resize_if_index_out_of_bounds: a dynamically sized list grows)
    lst, index, item = inputs
    _list_in(lst)
    _index_in(index)
    if item.dtype is not dtypes.as_dtype(attrs["element_dtype"]):
        raise InferenceError(f"item has dtype {item.dtype.name}, but the list holds "
                             f"{dtypes.as_dtype(attrs['element_dtype']).name}")
    return _variant(inputs, attrs)


def _infer_get_item(inputs, attrs):
    _list_in(inputs[0])
    _index_in(inputs[1])
    return [(dtypes.as_dtype(attrs["element_dtype"]), as_shape(attrs.get("element_shape")))]


def _infer_stack(inputs, attrs):
    _list_in(inputs[0])
    n = attrs.get("num_elements", -1)
    el = as_shape(attrs.get("element_shape"))
    dims = None if el.dims is None else [None if n is None or n < 0 else n] + list(el.dims)
    return [(dtypes.as_dtype(attrs["element_dtype"]), TensorShape(dims))]


def _infer_from_tensor(inputs, attrs):
    if inputs[0].shape.ndims == 0:
        raise InferenceError(f"TensorListFromTensor needs a tensor of rank >= 1, got a scalar ('{inputs[0].name}')")
    return _variant(inputs, attrs)


def _infer_length(inputs, attrs):
    _list_in(inputs[0])
    return [(dtypes.int32, TensorShape([]))]


def _infer_gather(inputs, attrs):
    lst, indices = inputs
    _list_in(lst)
    if indices.dtype not in (dtypes.int32, dtypes.int64):
        raise InferenceError(f"indices must be int32, got {indices.dtype.name} ('{indices.name}')")
    el = as_shape(attrs.get("element_shape"))
    dims = None if el.dims is None or indices.shape.dims is None else list(indices.shape.dims) + list(el.dims)
    return [(dtypes.as_dtype(attrs["element_dtype"]), TensorShape(dims))]


def _infer_scatter(inputs, attrs):
    lst, tensor, indices = inputs
    _list_in(lst)
    if tensor.dtype is not dtypes.as_dtype(attrs["element_dtype"]):
        raise InferenceError(f"tensor has dtype {tensor.dtype.name}, but the list holds "
                             f"{dtypes.as_dtype(attrs['element_dtype']).name}")
    return _variant(inputs, attrs)


def _infer_concat(inputs, attrs):
    _list_in(inputs[0])
    el = as_shape(attrs.get("element_shape"))
    dims = None if el.dims is None or not el.dims else [None] + list(el.dims[1:])
    return [(dtypes.as_dtype(attrs["element_dtype"]), TensorShape(dims)), (dtypes.int64, TensorShape([None]))]


def _infer_split(inputs, attrs):
    tensor, lengths = inputs
    if tensor.shape.ndims == 0:
        raise InferenceError(f"TensorListSplit needs a tensor of rank >= 1, got a scalar ('{tensor.name}')")
    return _variant(inputs, attrs)


TensorListReserve = define_op("TensorListReserve", _infer_reserve)
TensorListSetItem = define_op("TensorListSetItem", _infer_set_item)
TensorListGetItem = define_op("TensorListGetItem", _infer_get_item)
TensorListStack = define_op("TensorListStack", _infer_stack)
TensorListFromTensor = define_op("TensorListFromTensor", _infer_from_tensor)
TensorListLength = define_op("TensorListLength", _infer_length)
TensorListGather = define_op("TensorListGather", _infer_gather)
TensorListScatterIntoExistingList = define_op("TensorListScatterIntoExistingList", _infer_scatter)
TensorListConcatV2 = define_op("TensorListConcatV2", _infer_concat)
TensorListSplit = define_op("TensorListSplit", _infer_split)

TensorListReserve.gradient(lambda op, grad: [None])
TensorListLength.gradient(lambda op, grad: [None])


def _attrs(op):
    return {"element_dtype": op.attrs["element_dtype"], "element_shape": op.attrs.get("element_shape")}


@TensorListSetItem.gradient
def _set_item_grad(op, grad):
    from actorflow.graph.ops.array_ops import filling
    lst, index, item = op.inputs
    if grad is None:
        return [None, None, None]
    a = {"element_dtype": op.attrs["element_dtype"], "element_shape": op.attrs.get("element_shape",
                                                                                  item.shape)}
    item_grad = TensorListGetItem(grad, index, element_dtype=a["element_dtype"], element_shape=item.shape)
    list_grad = TensorListSetItem(grad, index, filling.zeros_like(item), element_dtype=a["element_dtype"])
    return [list_grad, None, item_grad]


@TensorListGetItem.gradient
def _get_item_grad(op, grad):
    lst, index = op.inputs
    n = TensorListLength(lst)
    empty = TensorListReserve(n, element_dtype=op.attrs["element_dtype"],
                              element_shape=op.outputs[0].shape)
    return [TensorListSetItem(empty, index, grad, element_dtype=op.attrs["element_dtype"]), None]


@TensorListStack.gradient
def _stack_grad(op, grad):
    return [TensorListFromTensor(grad, element_shape=TensorShape(op.outputs[0].shape.dims[1:])
                                 if op.outputs[0].shape.dims is not None else TensorShape(None))]


@TensorListFromTensor.gradient
def _from_tensor_grad(op, grad):
    x = op.inputs[0]
    n = x.shape.dims[0] if x.shape.dims is not None and x.shape.dims[0] is not None else -1
    return [TensorListStack(grad, element_dtype=x.dtype,
                            element_shape=TensorShape(None if x.shape.dims is None else x.shape.dims[1:]),
                            num_elements=n)]


@TensorListGather.gradient
def _gather_grad(op, grad):
    lst, indices = op.inputs
    dt = op.attrs["element_dtype"]
    empty = TensorListReserve(TensorListLength(lst), element_dtype=dt, element_shape=op.attrs.get("element_shape"))
    return [TensorListScatterIntoExistingList(empty, grad, indices, element_dtype=dt), None]


@TensorListScatterIntoExistingList.gradient
def _scatter_grad(op, grad):
    from actorflow.graph.ops.array_ops import filling
    lst, tensor, indices = op.inputs
    if grad is None:
        return [None, None, None]
    dt = op.attrs["element_dtype"]
    el = TensorShape(None if tensor.shape.dims is None else tensor.shape.dims[1:])
    tensor_grad = TensorListGather(grad, indices, element_dtype=dt, element_shape=el)
    list_grad = TensorListScatterIntoExistingList(grad, filling.zeros_like(tensor), indices, element_dtype=dt)
    return [list_grad, tensor_grad, None]


@TensorListConcatV2.gradient
def _concat_grad(op, grad, lengths_grad=None):
    if grad is None:
        return [None]
    return [TensorListSplit(grad, op.outputs[1], element_shape=op.attrs.get("element_shape"))]


@TensorListSplit.gradient
def _split_grad(op, grad):
    if grad is None:
        return [None, None]
    x = op.inputs[0]
    out, _ = TensorListConcatV2(grad, element_dtype=x.dtype,
                                element_shape=TensorShape(None if x.shape.dims is None else [None] + list(x.shape.dims[1:])))
    return [out, None]
