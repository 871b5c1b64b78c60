"""An actorflow Graph as a TensorFlow GraphDef protobuf, for TensorBoard's graph tab.

Each Operation becomes a NodeDef with its name, op type, inputs in TF's spelling (`op` for output 0,
`op:1`, `^op` for control inputs), device and the attributes a protobuf AttrValue can hold
(strings, numbers, bools, dtypes, shapes, constant tensors and lists of those). Attributes that
are Python objects of actorflow's own (callables, nested structures) are left out. As TF's
`Graph.as_graph_def(add_shapes=True)` does, every node carries its output shapes in
`_output_shapes`, so TensorBoard labels the edges with tensor shapes.
"""
from __future__ import annotations

import logging

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import Graph
from actorflow.graph.tensor_shape import TensorShape
from actorflow.protos import require

__all__ = ["as_graph_def"]

log = logging.getLogger(__name__)

_TYPE_ENUM = {"float16": "DT_HALF", "float32": "DT_FLOAT", "float64": "DT_DOUBLE", "int8": "DT_INT8",
              "int16": "DT_INT16", "int32": "DT_INT32", "int64": "DT_INT64", "uint8": "DT_UINT8",
              "bool": "DT_BOOL", "string": "DT_STRING", "resource": "DT_RESOURCE"}
# Constants larger than this are written without their values (TensorBoard shows only the shape);
# TF writes them whole, which makes event files of big embeddings unreadably large.
_MAX_CONST_BYTES = 1 << 20


def _dtype_enum(dt, types_pb2) -> int:
    return types_pb2.DataType.Value(_TYPE_ENUM.get(dtypes.as_dtype(dt).name, "DT_INVALID"))


def _shape_proto(shape: TensorShape, out):
    if shape.dims is None:
        out.unknown_rank = True
        return out
    for d in shape.dims:
        out.dim.add(size=-1 if d is None else int(d))
    return out


def _scalar_attr(v, av, pb) -> bool:
    """Fills AttrValue `av` from a single value; False when protobuf cannot hold it."""
    types_pb2, tensor_util = pb
    if isinstance(v, bool):
        av.b = v
    elif isinstance(v, int):
        if not -(1 << 63) <= v < (1 << 63):
            return False
        av.i = v
    elif isinstance(v, float):
        av.f = v
    elif isinstance(v, str):
        av.s = v.encode("utf-8")
    elif isinstance(v, bytes):
        av.s = v
    elif isinstance(v, dtypes.DType):
        av.type = _dtype_enum(v, types_pb2)
    elif isinstance(v, TensorShape):
        _shape_proto(v, av.shape)
    elif isinstance(v, np.ndarray):
        if v.nbytes > _MAX_CONST_BYTES:
            av.tensor.dtype = _dtype_enum(v.dtype if v.dtype != object else dtypes.string, types_pb2)
            _shape_proto(TensorShape(list(v.shape)), av.tensor.tensor_shape)
        else:
            try:
                av.tensor.CopyFrom(tensor_util.make_tensor_proto(v))
            except (TypeError, ValueError):
                return False
    else:
        return False
    return True


def _list_attr(values, av, pb) -> bool:
    types_pb2, _ = pb
    lst = av.list
    if all(isinstance(x, bool) for x in values):
        lst.b.extend(values)
    elif all(isinstance(x, int) and not isinstance(x, bool) for x in values):
        lst.i.extend(values)
    elif all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in values):
        lst.f.extend(float(x) for x in values)
    elif all(isinstance(x, str) for x in values):
        lst.s.extend(x.encode("utf-8") for x in values)
    elif all(isinstance(x, bytes) for x in values):
        lst.s.extend(values)
    elif all(isinstance(x, dtypes.DType) for x in values):
        lst.type.extend(_dtype_enum(x, types_pb2) for x in values)
    elif all(isinstance(x, TensorShape) for x in values):
        for x in values:
            _shape_proto(x, lst.shape.add())
    else:
        return False
    av.list.SetInParent()
    return True


def _input_name(t) -> str:
    return t.op.name if t.value_index == 0 else f"{t.op.name}:{t.value_index}"


def as_graph_def(graph: Graph, add_shapes: bool = True, from_version=None):
    """The GraphDef protobuf (tensorboard.compat.proto.graph_pb2.GraphDef) of `graph`.

    TF-1.x counterpart: `tf.Graph.as_graph_def(add_shapes=True)`. Differs in that attributes that
    have no protobuf form are omitted, and constants over 1 MiB keep their dtype and shape only.
    `from_version` must be None (see the error it raises otherwise).
    """
    graph_pb2 = require("tensorboard.compat.proto.graph_pb2")
    attr_value_pb2 = require("tensorboard.compat.proto.attr_value_pb2")
    pb = (require("tensorboard.compat.proto.types_pb2"), require("tensorboard.util.tensor_util"))
    gd = graph_pb2.GraphDef()
    gd.versions.producer = 27      # a producer version TensorBoard's graph importer accepts
    if from_version is not None:
        raise ValueError("as_graph_def(from_version=...) is not supported: actorflow's Graph.version also "
                         "counts edits (control inputs, loop back edges), so it cannot select the ops added "
                         "since a version; pass from_version=None")
    for op in graph.get_operations():
        node = gd.node.add(name=op.name, op=op.type, device=op.device or "")
        node.input.extend(_input_name(t) for t in op.inputs)
        node.input.extend("^" + c.name for c in op.control_inputs)
        for key, v in op.attrs.items():
            av = attr_value_pb2.AttrValue()
            ok = _list_attr(v, av, pb) if isinstance(v, tuple) else _scalar_attr(v, av, pb)
            if ok:
                node.attr[key].CopyFrom(av)
            else:
                log.debug("attr %r of op %s (%s) has no GraphDef form; left out", key, op.name, type(v).__name__)
        if op.outputs and add_shapes:
            shapes = node.attr["_output_shapes"].list
            for t in op.outputs:
                _shape_proto(t.shape, shapes.shape.add())
    return gd


def _install() -> None:
    from actorflow.graph import graph as graph_mod
    graph_mod._graph_def_hook = lambda g, from_version, add_shapes: as_graph_def(g, add_shapes, from_version)


_install()
