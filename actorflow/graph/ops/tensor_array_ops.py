"""TensorArray (tf.TensorArray) over the functional tensor lists of graph/ops/list_ops.py, as TF 2
builds it in graph mode: the array's `flow` is a list value, each write returns a new TensorArray
holding the new list, and a TensorArray passes through `while_loop` as its flow (the loop wraps it
back). Reads, writes, stack/unstack, gather/scatter and concat/split all have TF's gradients, by
the list ops'. `dynamic_size=True` lets writes past the end grow the array; `clear_after_read`
and `colocate_with_first_write_call` are accepted and change nothing (a read never consumes a
value that a list shares)."""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, convert_to_tensor, name_scope
from actorflow.graph.ops.constant import identity, no_op
from actorflow.graph.ops.list_ops import (
    TensorListConcatV2,
    TensorListFromTensor,
    TensorListGather,
    TensorListGetItem,
    TensorListLength,
    TensorListReserve,
    TensorListScatterIntoExistingList,
    TensorListSetItem,
    TensorListSplit,
    TensorListStack,
)
from actorflow.graph.tensor_shape import TensorShape, as_shape

__all__ = ["TensorArray"]


class TensorArray:
    """An array of tensors of one dtype, written once per index, read in any order (tf.TensorArray)."""

    def __init__(self, dtype, size=None, dynamic_size=None, clear_after_read=None, tensor_array_name=None,
                 handle=None, flow=None, infer_shape=True, element_shape=None, colocate_with_first_write_call=True,
                 name=None):
        self._dtype = dtypes.as_dtype(dtype)
        self._dynamic_size = bool(dynamic_size)
        self._infer_shape = infer_shape
        # One box shared by every TensorArray made from this one (writes, loop copies): a shape one
        # write infers is known to all of them, as TF's TensorArray shares its element shape.
        self._shape_box = [as_shape(element_shape)]
        if flow is None:
            flow = handle
        if flow is None:
            if size is None:
                raise ValueError("Size must be provided if handle is not provided")
            with name_scope(name or tensor_array_name or "TensorArray"):
                flow = TensorListReserve(convert_to_tensor(size, dtype=dtypes.int32, name="size"),
                                         element_dtype=self._dtype, element_shape=self._shape_box[0])
        elif not isinstance(flow, Tensor) or flow.dtype is not dtypes.variant:
            raise TypeError(f"TensorArray: flow must be a tensor list (variant tensor), got {flow!r}")
        self._flow = flow

    # -- what it is --------------------------------------------------------------------------------
    @property
    def flow(self) -> Tensor:
        return self._flow

    @property
    def handle(self) -> Tensor:
        return self._flow

    @property
    def dtype(self):
        return self._dtype

    @property
    def dynamic_size(self) -> bool:
        return self._dynamic_size

    @property
    def element_shape(self) -> TensorShape:
        return self._shape_box[0]

    @property
    def _element_shape(self) -> TensorShape:
        return self._shape_box[0]

    def _with(self, flow, element_shape=None) -> "TensorArray":
        ta = TensorArray.__new__(TensorArray)
        ta._dtype, ta._dynamic_size, ta._infer_shape = self._dtype, self._dynamic_size, self._infer_shape
        ta._shape_box = self._shape_box
        ta._flow = flow
        return ta

    def _merge_shape(self, shape: TensorShape) -> TensorShape:
        """Merges a written value's shape into the shared element shape (infer_shape=True)."""
        if not self._infer_shape:
            return self._shape_box[0]
        if not self._shape_box[0].is_compatible_with(shape):
            raise ValueError(f"Inconsistent shapes: saw {shape} but expected {self._shape_box[0]} "
                             "(and infer_shape=True)")
        self._shape_box[0] = self._shape_box[0].merge_with(shape)
        return self._shape_box[0]

    def _value(self, value, what):
        dt = getattr(value, "dtype", None)
        if isinstance(value, Tensor) and dt is not self._dtype:
            raise TypeError(f"TensorArray dtype is {self._dtype.name} but Op is trying to write dtype {dt.name}")
        return convert_to_tensor(value, dtype=self._dtype, name=what)

    # -- element access ----------------------------------------------------------------------------
    def read(self, index, name=None) -> Tensor:
        with name_scope(name or "TensorArrayReadV3"):
            v = TensorListGetItem(self._flow, convert_to_tensor(index, dtype=dtypes.int32), element_dtype=self._dtype,
                                  element_shape=self._element_shape)
        return v

    def write(self, index, value, name=None) -> "TensorArray":
        with name_scope(name or "TensorArrayWrite"):
            v = self._value(value, "value")
            shape = self._merge_shape(v.shape)
            flow = TensorListSetItem(self._flow, convert_to_tensor(index, dtype=dtypes.int32), v,
                                     element_dtype=self._dtype, resize_if_index_out_of_bounds=self._dynamic_size)
        return self._with(flow, shape)

    def stack(self, name=None) -> Tensor:
        with name_scope(name or "TensorArrayStack"):
            out = TensorListStack(self._flow, element_dtype=self._dtype, element_shape=self._element_shape,
                                  num_elements=-1)
            return out

    def gather(self, indices, name=None) -> Tensor:
        with name_scope(name or "TensorArrayGather"):
            return TensorListGather(self._flow, convert_to_tensor(indices, dtype=dtypes.int32),
                                    element_dtype=self._dtype, element_shape=self._element_shape)

    def concat(self, name=None) -> Tensor:
        with name_scope(name or "TensorArrayConcat"):
            return TensorListConcatV2(self._flow, element_dtype=self._dtype, element_shape=self._element_shape)[0]

    def unstack(self, value, name=None) -> "TensorArray":
        with name_scope(name or "TensorArrayUnstack"):
            v = self._value(value, "value")
            el = TensorShape(None if v.shape.dims is None else v.shape.dims[1:])
            shape = self._merge_shape(el)
            return self._with(TensorListFromTensor(v, element_shape=shape), shape)

    def scatter(self, indices, value, name=None) -> "TensorArray":
        with name_scope(name or "TensorArrayScatter"):
            v = self._value(value, "value")
            shape = self._merge_shape(TensorShape(None if v.shape.dims is None else v.shape.dims[1:]))
            flow = TensorListScatterIntoExistingList(self._flow, v, convert_to_tensor(indices, dtype=dtypes.int32),
                                                     element_dtype=self._dtype,
                                                     resize_if_index_out_of_bounds=self._dynamic_size)
        return self._with(flow, shape)

    def split(self, value, lengths, name=None) -> "TensorArray":
        with name_scope(name or "TensorArraySplit"):
            v = self._value(value, "value")
            shape = self._merge_shape(TensorShape(None if v.shape.dims is None else [None] + list(v.shape.dims[1:])))
            return self._with(TensorListSplit(v, convert_to_tensor(lengths, dtype=dtypes.int64),
                                              element_shape=shape), shape)

    def size(self, name=None) -> Tensor:
        return TensorListLength(self._flow, name=name)

    def identity(self) -> "TensorArray":
        return self._with(identity(self._flow))

    def close(self, name=None):
        return no_op(name=name)

    # -- while_loop ------------------------------------------------------------------------------
    def _as_loop_var(self) -> Tensor:
        return self._flow

    def _from_loop_var(self, flow) -> "TensorArray":
        return self._with(flow)

    def __repr__(self):
        return f"<af.TensorArray of {self._dtype.name} {self._element_shape} flow={self._flow.name}>"
