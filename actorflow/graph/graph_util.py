"""Graph surgery over actorflow's own serialized graphs (tf.compat.v1.graph_util).

actorflow's graph format is the msgpack document of `Graph.to_msgpack` (the format partition graphs
travel in to cluster workers). In this module a "graph_def" is any of:

- a GraphDef protocol buffer (`af.GraphDef`, TF's message): what `Graph.as_graph_def()` and
  `sess.graph_def` return, or what `GraphDef.ParseFromString` read from a file. Those actorflow wrote
  carry each node's exact attributes in an `_af` attribute (summary/graph_def.py) and read back bit
  for bit; those TensorFlow wrote are read from their AttrValues, each op's outputs inferred by its
  op definition, as TF's importer does;
- the bytes of such a GraphDef, or of `Graph.to_msgpack()`;
- an `af.Graph`.

The transformations return what they were given: a GraphDef for a GraphDef (or its bytes), as TF
does, and a new `af.Graph` for a graph or msgpack bytes, which `Session(graph=...)` runs directly.

Every transformation is a function on the document's list of op records, replayed into a graph by
`import_graph_doc`, the one path that builds graphs from documents here (`import_graph_def` too).
"""
from __future__ import annotations

import msgpack
import numpy as np

from actorflow import protos
from actorflow.graph import dtypes
from actorflow.graph.graph import Graph, _decode_ext, _encode_ext, _normalize_attr, get_default_graph
from actorflow.graph.op_def import find_op_def
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["convert_variables_to_constants", "extract_sub_graph", "must_run_on_cpu", "remove_training_nodes",
           "tensor_shape_from_node_def_name", "import_graph_def"]

_AF_ATTR = "_af"            # summary/graph_def.AF_ATTR: a node's exact attributes and outputs


# -- documents -------------------------------------------------------------------------------------------

def _is_graph_def_proto(x) -> bool:
    return hasattr(x, "node") and hasattr(x, "SerializeToString") and hasattr(x, "versions")


def graph_doc(graph_def) -> dict:
    """The msgpack document of `graph_def` (see the module's doc for what it may be)."""
    if _is_graph_def_proto(graph_def):
        return _doc_of_graph_def(graph_def)
    if isinstance(graph_def, Graph):
        data = graph_def.to_msgpack()
    elif isinstance(graph_def, (bytes, bytearray, memoryview)):
        data = bytes(graph_def)
    else:
        raise TypeError(f"graph_def must be a GraphDef, an af.Graph, or the bytes of either, "
                        f"got {type(graph_def).__name__}")
    try:
        doc = msgpack.unpackb(data, ext_hook=_decode_ext, raw=False, use_list=True, strict_map_key=False)
    except Exception:  # noqa: BLE001 - not msgpack: a serialized GraphDef, or neither
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("ops"), list):
        gd = protos.graph_pb2.GraphDef()
        try:
            gd.ParseFromString(data)
        except Exception as e:  # noqa: BLE001 - the DecodeError names the damage
            raise ValueError(f"graph_def bytes are neither a serialized GraphDef nor an actorflow graph: {e}") from None
        return _doc_of_graph_def(gd)
    return doc


def _tensor_name(n: str) -> str:
    """A GraphDef input ("op", "op:1") as a tensor name ("op:0", "op:1")."""
    return n if ":" in n else n + ":0"


def _attr_value(av, node):
    """An AttrValue of a GraphDef TF wrote, as actorflow holds the attribute."""
    kind = av.WhichOneof("value")
    if kind == "s":
        try:
            return av.s.decode("utf-8")
        except UnicodeDecodeError:
            return av.s
    if kind in ("i", "f", "b"):
        return getattr(av, kind)
    if kind == "type":
        return dtypes.as_dtype(av.type) if av.type else None
    if kind == "shape":
        return _shape_of(av.shape)
    if kind == "tensor":
        arr = protos.require("tensorboard.util.tensor_util").make_ndarray(av.tensor)
        return np.array(arr, order="C")           # (ascontiguousarray would make a scalar 1-d)
    if kind == "list":
        lst = av.list
        for field in ("s", "i", "f", "b", "type", "shape", "tensor"):
            items = getattr(lst, field)
            if items:
                sub = protos.attr_value_pb2.AttrValue()
                out = []
                for x in items:
                    if field in ("shape", "tensor"):
                        getattr(sub, field).CopyFrom(x)
                    else:
                        setattr(sub, field, x)
                    out.append(_attr_value(sub, node))
                return tuple(out)
        return ()
    if kind is None:
        return None
    raise ValueError(f"Cannot import graph: node '{node.name}' ({node.op}) has a '{kind}' attribute, which "
                     "actorflow cannot represent")


def _shape_of(sp) -> TensorShape:
    if sp.unknown_rank:
        return TensorShape(None)
    return TensorShape([None if d.size < 0 else int(d.size) for d in sp.dim])


def _doc_of_graph_def(gd) -> dict:
    """The document of a GraphDef protobuf. Nodes actorflow wrote come back from their `_af`
    attribute exactly; nodes TensorFlow wrote have no output signature ("outputs": None): the
    importer infers it."""
    records = []
    for node in gd.node:
        inputs = [_tensor_name(n) for n in node.input if not n.startswith("^")]
        control = [n[1:] for n in node.input if n.startswith("^")]
        if _AF_ATTR in node.attr:
            extra = msgpack.unpackb(node.attr[_AF_ATTR].s, ext_hook=_decode_ext, raw=False, use_list=True,
                                    strict_map_key=False)
            attrs, outputs = extra["attrs"], extra["outputs"]
            if node.op == "Const" and "value" not in attrs and "value" in node.attr:
                attrs["value"] = _attr_value(node.attr["value"], node)
        else:
            attrs = {k: _normalize_attr(_attr_value(v, node)) for k, v in node.attr.items()
                     if not k.startswith("_") or k == "_class"}
            attrs = {k: v for k, v in attrs.items() if v is not None}
            outputs = None
        records.append({"name": node.name, "type": node.op, "device": node.device, "inputs": inputs,
                        "control": control, "attrs": attrs, "outputs": outputs})
    if any(r["outputs"] is None for r in records):
        records = _creation_order(records)
    return {"version": 1, "seed": None, "ops": records, "collections": {}, "graph_def": True}


def _creation_order(records: list) -> list:
    """`records` reordered so that each op comes after its inputs (a GraphDef need not list them so),
    loop back edges (NextIteration into Merge) excepted; the order is kept where it already holds."""
    by_name = {r["name"]: r for r in records}
    done, entered, out = set(), set(), []
    for r0 in records:
        stack = [(r0, False)]
        while stack:
            r, expanded = stack.pop()
            name = r["name"]
            if expanded:
                entered.discard(name)
                done.add(name)
                out.append(r)
                continue
            if name in done:
                continue
            if name in entered:
                raise ValueError(f"Cannot import graph: a cycle through op '{name}' that is not a while "
                                 "loop's back edge")
            entered.add(name)
            stack.append((r, True))
            merge = r["type"] in ("Merge", "RefMerge")
            for n in reversed(list(r["inputs"]) + list(r["control"])):
                src = by_name.get(_op_of(n))
                if src is not None and src["name"] not in done and not (
                        merge and src["type"] in ("NextIteration", "RefNextIteration")):
                    stack.append((src, False))
    return out


def pack_graph_doc(doc: dict) -> bytes:
    """The bytes of a graph document (the inverse of `graph_doc`)."""
    return msgpack.packb(doc, default=_encode_ext, use_bin_type=True)


def _op_of(name: str) -> str:
    name = name[1:] if name.startswith("^") else name
    return name.rsplit(":", 1)[0] if ":" in name else name


def import_graph_doc(doc: dict, graph: Graph, import_scope: str | None = None, input_map: dict | None = None) -> dict:
    """Adds the ops of a graph document to `graph`, names prefixed by `import_scope/` when given.

    `input_map` maps tensor names of the document ("op:0", or "^op" for a control input) to tensors
    (operations) of `graph` that the imported ops read instead. Records without an output signature
    (from a GraphDef TensorFlow wrote) get theirs from their op's shape and dtype inference.
    Returns {original op name: new op name}. Raises ValueError naming the op when a name is already
    taken in `graph`, an input names an op the document lacks, or an op cannot be built (nothing is
    added then, but for an op whose inference failed: the ops before it stay).
    """
    prefix = (import_scope.rstrip("/") + "/") if import_scope else ""
    input_map = dict(input_map or {})
    records = doc["ops"]
    names = {r["name"] for r in records}
    used = set()
    for r in records:
        if prefix + r["name"] in graph._ops_by_name:
            raise ValueError(f"Cannot import graph: an op named '{prefix + r['name']}' already exists in the "
                             "target graph (pass an import_scope, or load into an empty graph)")
        for n in list(r["inputs"]) + ["^" + c for c in r["control"]]:
            if n in input_map:
                used.add(n)
            elif _op_of(n) not in names:
                raise ValueError(f"Cannot import graph: op '{r['name']}' has input '{n.lstrip('^')}', which names "
                                 "an op the graph does not contain")
    unused = sorted(set(input_map) - used)
    if unused:
        raise ValueError(f"Attempted to map inputs that were not found in graph_def: {unused}")
    mapping = {}
    back_edges = []
    with graph._lock:
        for rec in records:
            inputs = []
            for i, n in enumerate(rec["inputs"]):
                src = prefix + n
                if n in input_map:
                    inputs.append(input_map[n])
                elif _op_of(src) in graph._ops_by_name and _op_of(n) in mapping:
                    inputs.append(graph.get_tensor_by_name(src))
                else:
                    # A loop back edge (Merge <- NextIteration) names an op defined later: a stand-in of the
                    # same dtype now, the real source once it exists (as Graph.from_msgpack does).
                    inputs.append(None)
                    back_edges.append((prefix + rec["name"], i, src))
            stand_in = next((t for t in inputs if t is not None), None)
            if stand_in is None and inputs:
                raise ValueError(f"Cannot import graph: op '{rec['name']}' has no input defined before it")
            inputs = [t if t is not None else stand_in for t in inputs]
            control = [input_map["^" + n] if "^" + n in input_map else graph.get_operation_by_name(prefix + n)
                       for n in rec["control"]]
            attrs = {k: _normalize_attr(v) for k, v in rec["attrs"].items()}     # (msgpack gives lists)
            if prefix and "_class" in attrs:
                attrs["_class"] = tuple("loc:@" + prefix + c[5:] if isinstance(c, str) and c.startswith("loc:@")
                                        else c for c in attrs["_class"])
            outputs = rec["outputs"]
            if outputs is None:
                specs = _inferred(rec, inputs, attrs)
            else:
                specs = [(dt, TensorShape(None if sh is None else list(sh))) for dt, sh in outputs]
            op = graph._insert_op(prefix + rec["name"], rec["type"], inputs, control, attrs, rec["device"], specs)
            mapping[rec["name"]] = op.name
            parts = op.name.split("/")
            for i in range(1, len(parts)):
                graph._names_in_use.setdefault("/".join(parts[:i]).lower(), 1)
        for name, i, n in back_edges:
            graph._ops_by_name[name]._update_input(i, graph.get_tensor_by_name(n))
        for key, items in (doc.get("collections") or {}).items():
            for n in items:
                if _op_of(n) in mapping:
                    graph.add_to_collection(key, graph.as_graph_element(prefix + n))
    return mapping


def _inferred(rec, inputs, attrs) -> list:
    """The output signature of an op record without one, from its op definition."""
    op_def = find_op_def(rec["type"])
    if op_def is None:
        raise ValueError(f"Cannot import graph: op '{rec['name']}' has type '{rec['type']}', which actorflow "
                         "does not define")
    try:
        return op_def.infer(inputs, attrs)
    except Exception as e:  # noqa: BLE001 - whatever inference raised, named with the op
        raise ValueError(f"Cannot import graph: op '{rec['name']}' ({rec['type']}): {e}") from None


def _graph_from_records(doc: dict, records: list):
    """A new graph of `records`: an af.Graph, or its GraphDef when `doc` came from one (the kind the
    caller gave)."""
    g = Graph()
    g.seed = doc.get("seed")
    keep = {r["name"] for r in records}
    colls = {k: [n for n in v if _op_of(n) in keep] for k, v in (doc.get("collections") or {}).items()}
    import_graph_doc({"ops": records, "collections": colls}, g)
    return g.as_graph_def() if doc.get("graph_def") else g


def import_graph_def(graph_def, input_map=None, return_elements=None, name=None, op_dict=None,
                     producer_op_list=None):
    """Adds the ops of `graph_def` to the default graph (tf.compat.v1.import_graph_def).

    `graph_def`: a GraphDef (`af.GraphDef`, as `sess.graph_def`, `convert_variables_to_constants` or
    `GraphDef.ParseFromString` give it; TensorFlow's own are read too), its serialized bytes, an
    af.Graph or its msgpack bytes. Names are prefixed by `name` ("import" by default, made unique as
    a name scope; "" adds no prefix). `input_map` maps tensor names of `graph_def` ("x:0", "x" for
    "x:0", "^x" for a control input) to tensors of the default graph that the imported ops read
    instead. Returns the ops ("op") and tensors ("op:0") named in `return_elements`, or None.
    Raises ValueError naming the op, the input or the element at fault; `op_dict` and
    `producer_op_list` are accepted and unused, as in TF 1.x's later versions.
    """
    from actorflow.graph.graph import Operation, Tensor, convert_to_tensor
    doc = graph_doc(graph_def)
    graph = get_default_graph()
    mapped = {}
    for key, value in (input_map or {}).items():
        if not isinstance(key, str):
            raise TypeError(f"input_map keys must be tensor names (strings), got {key!r}")
        if key.startswith("^"):
            if not isinstance(value, Operation):
                raise TypeError(f"input_map['{key}'] maps a control input: it must be an Operation, got "
                                f"{type(value).__name__}")
        else:
            key = _tensor_name(key)
            value = value if isinstance(value, Tensor) else convert_to_tensor(value)
        if value.graph is not graph:
            raise ValueError(f"input_map['{key}'] is from another graph than the default graph")
        mapped[key] = value
    with graph.name_scope("import" if name is None else name) as scope:
        pass                      # (reserves the scope's name, made unique, under the current scope)
    with graph.control_dependencies(None):
        import_graph_doc(doc, graph, scope.rstrip("/") or None, mapped)
    if return_elements is None:
        return None
    out = []
    for el in return_elements:
        full = scope + el
        try:
            out.append(graph.get_tensor_by_name(full) if ":" in el else graph.get_operation_by_name(full))
        except (KeyError, ValueError):
            raise ValueError(f"Requested return_element '{el}' not found in graph_def.") from None
    return out


# -- pruning -----------------------------------------------------------------------------------------------

def _needed(records: list, dest_nodes) -> set:
    by_name = {r["name"]: r for r in records}
    if isinstance(dest_nodes, str):
        raise TypeError("dest_nodes must be a list of op names, not a string")
    stack = []
    for d in dest_nodes:
        n = _op_of(d)
        if n not in by_name:
            raise KeyError(f"'{d}' is not in graph")   # TF's message in extract_sub_graph
        stack.append(n)
    keep = set()
    while stack:
        n = stack.pop()
        if n in keep:
            continue
        keep.add(n)
        r = by_name[n]
        stack.extend(_op_of(x) for x in list(r["inputs"]) + list(r["control"]))
    return keep


def extract_sub_graph(graph_def, dest_nodes):
    """The part of `graph_def` that `dest_nodes` (op names) need: those ops and everything they
    depend on through data and control edges (tf.compat.v1.graph_util.extract_sub_graph).

    Differs from TF: takes an af.Graph or its msgpack bytes and returns a new af.Graph. KeyError
    names a destination the graph lacks.
    """
    doc = graph_doc(graph_def)
    keep = _needed(doc["ops"], dest_nodes)
    return _graph_from_records(doc, [r for r in doc["ops"] if r["name"] in keep])


# -- freezing ----------------------------------------------------------------------------------------------

_VAR_TYPES = frozenset(["VariableV2"])
_REF_READS = frozenset(["_RefRead"])


def convert_variables_to_constants(sess, input_graph_def, output_node_names, variable_names_whitelist=None,
                                   variable_names_blacklist=None):
    """Freezes a graph: the subgraph `output_node_names` need, with every variable it reads replaced by
    a Const holding the variable's current value in `sess` (tf.compat.v1.graph_util.convert_variables_to_constants).

    `variable_names_whitelist` / `_blacklist` (op names) choose which variables to freeze; the others
    stay variables. Differs from TF: takes an af.Graph or its msgpack bytes and returns a new af.Graph.
    Raises ValueError naming the op when the subgraph would update a frozen variable (an Assign or an
    optimizer step cannot act on a constant).
    """
    doc = graph_doc(input_graph_def)
    records = doc["ops"]
    keep = _needed(records, output_node_names)
    white = None if variable_names_whitelist is None else {_op_of(n) for n in variable_names_whitelist}
    black = {_op_of(n) for n in (variable_names_blacklist or ())}
    frozen = [r["name"] for r in records if r["name"] in keep and r["type"] in _VAR_TYPES
              and (white is None or r["name"] in white) and r["name"] not in black]
    values = {}
    if frozen:
        fetched = sess.run([sess.graph.get_operation_by_name(n).outputs[0] for n in frozen])
        values = dict(zip(frozen, fetched))
    out = []
    for r in records:
        if r["name"] not in keep:
            continue
        if r["name"] in values:
            v = np.array(values[r["name"]], order="C")     # (a scalar stays 0-d)
            dt = r["outputs"][0][0]
            out.append({"name": r["name"], "type": "Const", "device": r["device"], "inputs": [], "control": [],
                        "attrs": {"value": v, "dtype": r["attrs"]["dtype"]},
                        "outputs": [(dt, list(v.shape))]})
            continue
        refs = [_op_of(n) for n in r["inputs"][:1]]
        if refs and refs[0] in values:
            if r["type"] in _REF_READS:
                out.append(dict(r, type="Identity", attrs={}))
                continue
            if r["type"] != "Identity":
                raise ValueError(f"convert_variables_to_constants: op '{r['name']}' ({r['type']}) acts on variable "
                                 f"'{refs[0]}', which is being frozen; leave it out of output_node_names or keep "
                                 "the variable with variable_names_blacklist")
        out.append(r)
    return _graph_from_records(doc, out)


def remove_training_nodes(input_graph, protected_nodes=None):
    """Drops Identity ops that only forward a value (and CheckNumerics), rewiring their consumers
    to the source (tf.compat.v1.graph_util.remove_training_nodes). Ops in `protected_nodes` and
    Identities carrying control inputs or reading a variable stay. Returns a new af.Graph."""
    doc = graph_doc(input_graph)
    protected = {_op_of(n) for n in (protected_nodes or ())}
    by_name = {r["name"]: r for r in doc["ops"]}
    drop = {}
    for r in doc["ops"]:
        if (r["type"] in ("Identity", "CheckNumerics") and r["name"] not in protected and not r["control"]
                and len(r["inputs"]) >= 1 and by_name[_op_of(r["inputs"][0])]["type"] not in _VAR_TYPES):
            drop[r["name"] + ":0"] = r["inputs"][0]

    def resolve(n):
        seen = 0
        while n in drop and seen < len(drop) + 1:
            n = drop[n]
            seen += 1
        return n
    out = []
    for r in doc["ops"]:
        if r["name"] + ":0" in drop:
            continue
        out.append(dict(r, inputs=[resolve(n) for n in r["inputs"]],
                        control=[c for c in r["control"] if c + ":0" not in drop]))
    colls = {k: [resolve(n) if ":" in n else n for n in v] for k, v in (doc.get("collections") or {}).items()}
    return _graph_from_records(dict(doc, collections=colls), out)


def must_run_on_cpu(node, pin_variables_on_cpu=False):
    """Whether an op must run on the CPU (tf.compat.v1.graph_util.must_run_on_cpu): string-typed
    outputs, and variables when `pin_variables_on_cpu`."""
    op_type = getattr(node, "type", None) or node.get("op")
    if pin_variables_on_cpu and op_type in _VAR_TYPES:
        return True
    outs = getattr(node, "outputs", ())
    return any(getattr(t.dtype, "name", "") == "string" for t in outs)


def tensor_shape_from_node_def_name(graph, input_name):
    """The static shape of the tensor named `input_name` ("op" means "op:0") in `graph`
    (tf.compat.v1.graph_util.tensor_shape_from_node_def_name)."""
    name = input_name if ":" in input_name else input_name + ":0"
    return graph.get_tensor_by_name(name).shape
