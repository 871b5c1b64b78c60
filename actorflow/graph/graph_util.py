"""Graph surgery over actorflow's own serialized graphs (tf.compat.v1.graph_util).

actorflow's graph format is the msgpack document of `Graph.to_msgpack` (the format partition graphs
travel in to cluster workers). In this module a "graph_def" is either an `af.Graph` or those bytes;
functions that return one return a new `af.Graph`, which a `Session(graph=...)` runs directly, and
whose `to_msgpack()` gives the bytes. (TF returns a GraphDef protocol buffer; actorflow's GraphDef
protobuf export for TensorBoard lives with the summary writer and is not the format used here.)

Every transformation is a function on the document's list of op records, replayed into a graph by
`import_graph_doc`, the one path that builds graphs from documents here.
"""
from __future__ import annotations

import msgpack
import numpy as np

from actorflow.graph.graph import Graph, _decode_ext, _encode_ext
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["convert_variables_to_constants", "extract_sub_graph", "must_run_on_cpu", "remove_training_nodes",
           "tensor_shape_from_node_def_name"]


# -- documents -------------------------------------------------------------------------------------------

def graph_doc(graph_def) -> dict:
    """The msgpack document of `graph_def` (an af.Graph, or bytes from `Graph.to_msgpack`)."""
    if isinstance(graph_def, Graph):
        data = graph_def.to_msgpack()
    elif isinstance(graph_def, (bytes, bytearray, memoryview)):
        data = bytes(graph_def)
    else:
        raise TypeError(f"graph_def must be an af.Graph or the bytes of Graph.to_msgpack(), "
                        f"got {type(graph_def).__name__}")
    try:
        doc = msgpack.unpackb(data, ext_hook=_decode_ext, raw=False, use_list=True, strict_map_key=False)
    except Exception as e:  # noqa: BLE001 - any msgpack failure means the bytes are not a graph
        raise ValueError(f"graph_def bytes are not a serialized actorflow graph: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("ops"), list):
        raise ValueError("graph_def bytes are not a serialized actorflow graph (no 'ops' list)")
    return doc


def pack_graph_doc(doc: dict) -> bytes:
    """The bytes of a graph document (the inverse of `graph_doc`)."""
    return msgpack.packb(doc, default=_encode_ext, use_bin_type=True)


def _op_of(name: str) -> str:
    name = name[1:] if name.startswith("^") else name
    return name.rsplit(":", 1)[0] if ":" in name else name


def import_graph_doc(doc: dict, graph: Graph, import_scope: str | None = None) -> dict:
    """Adds the ops of a graph document to `graph`, names prefixed by `import_scope/` when given.

    Returns {original op name: new op name}. Raises ValueError naming the op when a name is already
    taken in `graph` or an input names an op the document lacks (nothing is added then).
    """
    prefix = (import_scope.rstrip("/") + "/") if import_scope else ""
    records = doc["ops"]
    names = {r["name"] for r in records}
    for r in records:
        if prefix + r["name"] in graph._ops_by_name:
            raise ValueError(f"Cannot import graph: an op named '{prefix + r['name']}' already exists in the "
                             "target graph (pass an import_scope, or load into an empty graph)")
        for n in list(r["inputs"]) + list(r["control"]):
            if _op_of(n) not in names:
                raise ValueError(f"Cannot import graph: op '{r['name']}' has input '{n}', which names an op "
                                 "the graph does not contain")
    mapping = {}
    back_edges = []
    with graph._lock:
        for rec in records:
            inputs = []
            for i, n in enumerate(rec["inputs"]):
                src = prefix + n
                if _op_of(src) in graph._ops_by_name and _op_of(n) in mapping:
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
            control = [graph.get_operation_by_name(prefix + n) for n in rec["control"]]
            attrs = dict(rec["attrs"])
            if prefix and "_class" in attrs:
                attrs["_class"] = tuple("loc:@" + prefix + c[5:] if isinstance(c, str) and c.startswith("loc:@")
                                        else c for c in attrs["_class"])
            op = graph._insert_op(prefix + rec["name"], rec["type"], inputs, control, attrs, rec["device"],
                                  [(dt, TensorShape(None if sh is None else list(sh))) for dt, sh in rec["outputs"]])
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


def _graph_from_records(doc: dict, records: list) -> Graph:
    g = Graph()
    g.seed = doc.get("seed")
    keep = {r["name"] for r in records}
    colls = {k: [n for n in v if _op_of(n) in keep] for k, v in (doc.get("collections") or {}).items()}
    import_graph_doc({"ops": records, "collections": colls}, g)
    return g


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
            v = np.ascontiguousarray(np.asarray(values[r["name"]]))
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
