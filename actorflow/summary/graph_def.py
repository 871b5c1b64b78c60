"""An actorflow Graph as a TensorFlow GraphDef protobuf, for TensorBoard's graph tab.

Each Operation becomes a NodeDef with its name, op type, inputs in TF's spelling (`op` for output 0,
`op:1`, `^op` for control inputs), device and the attributes a protobuf AttrValue can hold
(strings, numbers, bools, dtypes, shapes, constant tensors and lists of those). Attributes that
are Python objects of actorflow's own (callables, nested structures) are left out. As TF's
`Graph.as_graph_def(add_shapes=True)` does, every node carries its output shapes in
`_output_shapes`, so TensorBoard labels the edges with tensor shapes.

Each node also carries the attributes TF's OpDef derives from its tensors (`T`, `N`, `Tidx`,
`SrcT`/`DstT`...; tf_op_signatures.json, written from TF 2.21's OpDefs by
docs/compat/dump_tf_op_signatures.py), so that TensorFlow's importer accepts the GraphDef: a graph of
ops TF knows (frozen or not, with cond and while_loop) imports into TF and runs there.

`Graph.as_graph_def()` (and so `sess.graph_def`) asks for the exact form: constants whole, and each
node's actorflow attributes and output signature also in an `_af` attribute (msgpack, the cluster's
graph format; TF ignores attributes whose names start with "_"). `graph_util` reads it back bit for
bit, so a GraphDef serialized with `SerializeToString()` and imported with `af.import_graph_def`
is the same graph, float attributes and Python-object attributes included; a GraphDef TensorFlow
wrote has no `_af` and is read from its AttrValues (graph/graph_util.py).
"""
from __future__ import annotations

import logging

import msgpack
import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import Graph, _encode_ext
from actorflow.graph.tensor_shape import TensorShape
from actorflow.protos import require

__all__ = ["as_graph_def", "AF_ATTR"]

log = logging.getLogger(__name__)

# Constants larger than this are written without their values (TensorBoard shows only the shape);
# TF writes them whole, which makes event files of big embeddings unreadably large.
_MAX_CONST_BYTES = 1 << 20
# The attribute that carries a node's exact actorflow attributes and outputs (exact=True).
AF_ATTR = "_af"


def _dtype_enum(dt) -> int:
    return dtypes.as_dtype(dt).as_datatype_enum


def _shape_proto(shape: TensorShape, out):
    if shape.dims is None:
        out.unknown_rank = True
        return out
    for d in shape.dims:
        out.dim.add(size=-1 if d is None else int(d))
    return out


def _scalar_attr(v, av, tensor_util, whole=False) -> bool:
    """Fills AttrValue `av` from a single value; False when protobuf cannot hold it (`whole`: a
    constant of any size keeps its values)."""
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
        av.type = _dtype_enum(v)
    elif isinstance(v, TensorShape):
        av.shape.SetInParent()          # a scalar's shape has no dims, but is set
        _shape_proto(v, av.shape)
    elif isinstance(v, np.ndarray):
        if v.nbytes > _MAX_CONST_BYTES and not whole:
            av.tensor.dtype = _dtype_enum(v.dtype if v.dtype != object else dtypes.string)
            _shape_proto(TensorShape(list(v.shape)), av.tensor.tensor_shape)
        else:
            try:
                av.tensor.CopyFrom(tensor_util.make_tensor_proto(v))
            except (TypeError, ValueError):
                return False
    else:
        return False
    return True


def _list_attr(values, av) -> bool:
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
        lst.type.extend(_dtype_enum(x) for x in values)
    elif all(isinstance(x, TensorShape) for x in values):
        for x in values:
            _shape_proto(x, lst.shape.add())
    else:
        return False
    av.list.SetInParent()
    return True


_SIGNATURES = None


def _signatures() -> dict:
    """{op type: TF's input/output arguments and required attributes}, from tf_op_signatures.json
    (written by docs/compat/dump_tf_op_signatures.py from TF 2.21's OpDefs)."""
    global _SIGNATURES
    if _SIGNATURES is None:
        import json
        from pathlib import Path
        _SIGNATURES = json.loads((Path(__file__).with_name("tf_op_signatures.json")).read_text())
    return _SIGNATURES


def _arg_counts(args, n: int):
    """How many of `n` tensors each of TF's argument specs takes: one each, except a list argument
    (number_attr or type_list_attr), which takes the rest; None when that is ambiguous."""
    lists = [i for i, a in enumerate(args) if a[2] or a[3]]
    if len(lists) > 1 or (not lists and n != len(args)):
        return None
    counts = [1] * len(args)
    if lists:
        rest = n - (len(args) - 1)
        if rest < 0:
            return None
        counts[lists[0]] = rest
    return counts


def _tf_signature_attrs(op, node) -> None:
    """Fills the attributes TF's OpDef derives from the node's tensors (`T`, `N`, `Tidx`, `SrcT`,
    `out_type`, `Tout`...) when actorflow's own attributes do not already hold them: TF's importer
    requires them (a NodeDef without `T` is "missing attr 'T'"). Ops TF does not know are left as
    they are."""
    sig = _signatures().get(op.type)
    if sig is None:
        return
    for args, tensors in ((sig["in"], op.inputs), (sig["out"], op.outputs)):
        counts = _arg_counts(args, len(tensors))
        if counts is None:
            continue
        pos = 0
        for (_name, type_attr, number_attr, type_list_attr, _fixed), count in zip(args, counts):
            group = tensors[pos:pos + count]
            pos += count
            if number_attr and number_attr not in node.attr:
                node.attr[number_attr].i = count
            if type_attr and group and type_attr not in node.attr:
                node.attr[type_attr].type = _dtype_enum(group[0].dtype)
            if type_list_attr and type_list_attr not in node.attr:
                node.attr[type_list_attr].list.type.extend(_dtype_enum(t.dtype) for t in group)
                node.attr[type_list_attr].list.SetInParent()


def _input_name(t) -> str:
    return t.op.name if t.value_index == 0 else f"{t.op.name}:{t.value_index}"


def as_graph_def(graph: Graph, add_shapes: bool = True, from_version=None, exact: bool = False):
    """The GraphDef protobuf (tensorboard.compat.proto.graph_pb2.GraphDef) of `graph`.

    TF-1.x counterpart: `tf.Graph.as_graph_def(add_shapes=True)`. For TensorBoard (`exact=False`),
    attributes that have no protobuf form are omitted and constants over 1 MiB keep their dtype and
    shape only. `exact=True` keeps every constant whole and adds each node's `_af` attribute (see the
    module's doc), so that the GraphDef imports back as the same graph. `from_version` must be None
    (see the error it raises otherwise).
    """
    graph_pb2 = require("tensorboard.compat.proto.graph_pb2")
    attr_value_pb2 = require("tensorboard.compat.proto.attr_value_pb2")
    tensor_util = require("tensorboard.util.tensor_util")
    gd = graph_pb2.GraphDef()
    gd.versions.producer = 27      # a producer version TensorBoard's graph importer accepts
    if from_version is not None:
        raise ValueError("as_graph_def(from_version=...) is not supported: actorflow's Graph.version also "
                         "counts edits (control inputs, loop back edges), so it cannot select the ops added "
                         "since a version; pass from_version=None")
    for op in graph.get_operations():
        node = gd.node.add()
        _fill_node_def(op, node, attr_value_pb2, tensor_util, exact)
        if exact:
            # (a Const's value is already whole in its TensorProto: not written twice)
            own = {k: v for k, v in op.attrs.items()
                   if not (k == "value" and op.type == "Const" and "value" in node.attr)}
            outs = [(t.dtype.name, None if t.shape.dims is None else list(t.shape.dims)) for t in op.outputs]
            node.attr[AF_ATTR].s = msgpack.packb({"attrs": own, "outputs": outs}, default=_encode_ext,
                                                 use_bin_type=True)
        if op.outputs and add_shapes:
            shapes = node.attr["_output_shapes"].list
            for t in op.outputs:
                _shape_proto(t.shape, shapes.shape.add())
    return gd


def _fill_node_def(op, node, attr_value_pb2, tensor_util, exact: bool) -> None:
    """Writes `op`'s name, type, device, inputs (TF's spelling) and attributes into NodeDef `node`."""
    node.name, node.op, node.device = op.name, op.type, op.device or ""
    node.input.extend(_input_name(t) for t in op.inputs)
    node.input.extend("^" + c.name for c in op.control_inputs)
    for key, v in op.attrs.items():
        av = attr_value_pb2.AttrValue()
        ok = _list_attr(v, av) if isinstance(v, tuple) else _scalar_attr(v, av, tensor_util, exact)
        if ok:
            node.attr[key].CopyFrom(av)
        else:
            log.debug("attr %r of op %s (%s) has no GraphDef form; left out", key, op.name, type(v).__name__)
    _tf_signature_attrs(op, node)


def node_def(op):
    """`op` as TF's NodeDef protobuf (tf.Operation.node_def): what device functions and
    jit_scope's `compile_ops` receive."""
    node = require("tensorboard.compat.proto.node_def_pb2").NodeDef()
    _fill_node_def(op, node, require("tensorboard.compat.proto.attr_value_pb2"),
                   require("tensorboard.util.tensor_util"), False)
    return node


def _install() -> None:
    from actorflow.graph import graph as graph_mod
    graph_mod._graph_def_hook = lambda g, from_version, add_shapes: as_graph_def(g, add_shapes, from_version, True)
    graph_mod._node_def_hook = node_def


_install()
