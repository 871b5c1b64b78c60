"""Meta graphs: a graph with its signatures, tags and variables, as one value (tf.compat.v1.MetaGraphDef).

The data model of SavedModel and of `export_meta_graph` / `import_meta_graph`. The graph travels
in actorflow's own msgpack graph format (`Graph.to_msgpack`, the format partition graphs are
registered with on workers); a meta graph adds the tags, the signature map, and one record per
variable (which ops make it up and which collections hold it, TF's VariableDef) so that an imported
graph has working `af.Variable` objects again. A file holds a msgpack map
``{"format": "actorflow.MetaGraphDef", "version": 1, "sha256": ..., "body": ...}``; the checksum
covers the body, and reading checks it. Never pickle.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import sys

import msgpack

from actorflow import errors
from actorflow.graph import dtypes
from actorflow.graph.graph import GraphKeys, Operation, Tensor, get_default_graph
from actorflow.graph.graph_util import graph_doc, import_graph_doc, pack_graph_doc
from actorflow.graph.tensor_shape import TensorShape
from actorflow.graph.variables import Variable

__all__ = ["export_meta_graph", "import_meta_graph"]

FORMAT = "actorflow.MetaGraphDef"
SAVED_MODEL_FORMAT = "actorflow.SavedModel"
VERSION = 1
_VAR_COLLECTIONS = (GraphKeys.GLOBAL_VARIABLES, GraphKeys.TRAINABLE_VARIABLES, GraphKeys.LOCAL_VARIABLES,
                    getattr(GraphKeys, "MODEL_VARIABLES", "model_variables"))


@dataclasses.dataclass
class TensorInfo:
    """A tensor of a signature (TF's TensorInfo): its name in the graph, dtype and static shape
    (`tensor_shape` is a list with None for unknown dimensions, or None for unknown rank)."""
    name: str
    dtype: str
    tensor_shape: list | None

    def to_dict(self) -> dict:
        return {"name": self.name, "dtype": self.dtype, "tensor_shape": self.tensor_shape}

    @classmethod
    def from_dict(cls, d) -> "TensorInfo":
        return cls(str(d["name"]), str(d["dtype"]), None if d["tensor_shape"] is None else list(d["tensor_shape"]))


@dataclasses.dataclass
class SignatureDef:
    """A named function of a graph (TF's SignatureDef): input and output TensorInfos by key, and a
    method name (signature_constants.PREDICT_METHOD_NAME, ...)."""
    inputs: dict
    outputs: dict
    method_name: str

    def to_dict(self) -> dict:
        return {"inputs": {k: v.to_dict() for k, v in self.inputs.items()},
                "outputs": {k: v.to_dict() for k, v in self.outputs.items()}, "method_name": self.method_name}

    @classmethod
    def from_dict(cls, d) -> "SignatureDef":
        return cls({k: TensorInfo.from_dict(v) for k, v in d["inputs"].items()},
                   {k: TensorInfo.from_dict(v) for k, v in d["outputs"].items()}, str(d["method_name"]))


@dataclasses.dataclass
class MetaInfoDef:
    """TF's MetaInfoDef: the tags that select a meta graph in a SavedModel, and version strings."""
    tags: list
    meta_graph_version: str = ""
    actorflow_version: str = ""


@dataclasses.dataclass
class MetaGraphDef:
    """A graph and what is needed to use it (TF's MetaGraphDef): `graph_def` (the msgpack bytes of
    `Graph.to_msgpack`), `meta_info_def.tags`, `signature_def` (key -> SignatureDef), the variable
    records, and named ops to run after loading (`main_op`)."""
    graph_def: bytes
    meta_info_def: MetaInfoDef
    signature_def: dict
    variables: list
    main_op: str | None = None

    def to_dict(self) -> dict:
        return {"graph_def": self.graph_def, "tags": list(self.meta_info_def.tags),
                "meta_graph_version": self.meta_info_def.meta_graph_version,
                "actorflow_version": self.meta_info_def.actorflow_version,
                "signature_def": {k: v.to_dict() for k, v in self.signature_def.items()},
                "variables": self.variables, "main_op": self.main_op}

    @classmethod
    def from_dict(cls, d) -> "MetaGraphDef":
        return cls(bytes(d["graph_def"]), MetaInfoDef(list(d["tags"]), d.get("meta_graph_version", ""),
                                                        d.get("actorflow_version", "")),
                   {k: SignatureDef.from_dict(v) for k, v in d["signature_def"].items()},
                   [dict(v) for v in d["variables"]], d.get("main_op"))


# -- files --------------------------------------------------------------------------------------------------

def pack_file(fmt: str, body: dict) -> bytes:
    """A checksummed container: msgpack {format, version, sha256, body bytes}."""
    raw = msgpack.packb(body, use_bin_type=True)
    return msgpack.packb({"format": fmt, "version": VERSION, "sha256": hashlib.sha256(raw).hexdigest(), "body": raw},
                         use_bin_type=True)


def unpack_file(path: str, data: bytes, fmt: str) -> dict:
    """The body of a container written by `pack_file`; DataLossError naming `path` when the file is not
    one, is of another format or version, or fails its checksum."""
    try:
        outer = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as e:  # noqa: BLE001 - any msgpack failure means a damaged file
        raise errors.DataLossError(None, None, f"{path}: not a {fmt} file (cannot decode: {e})") from None
    if not isinstance(outer, dict) or outer.get("format") != fmt:
        found = outer.get("format") if isinstance(outer, dict) else type(outer).__name__
        raise errors.DataLossError(None, None, f"{path}: not a {fmt} file (format {found!r})")
    if outer.get("version") != VERSION:
        raise errors.DataLossError(None, None, f"{path}: {fmt} version {outer.get('version')!r} is not supported "
                                   f"(this actorflow reads version {VERSION})")
    raw = outer.get("body")
    if not isinstance(raw, bytes) or hashlib.sha256(raw).hexdigest() != outer.get("sha256"):
        raise errors.DataLossError(None, None, f"{path}: checksum mismatch, the file is corrupt or truncated")
    try:
        body = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except Exception as e:  # noqa: BLE001
        raise errors.DataLossError(None, None, f"{path}: corrupt {fmt} body: {e}") from None
    if not isinstance(body, dict):
        raise errors.DataLossError(None, None, f"{path}: corrupt {fmt} body")
    return body


def atomic_write(path: str, data: bytes) -> None:
    """Writes `path` through a temporary file, fsynced and renamed, so readers never see half of it."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# -- building ------------------------------------------------------------------------------------------------

def variable_records(graph) -> list:
    """One record per variable object in the graph's variable collections (TF's VariableDef)."""
    seen: dict = {}
    for key in _VAR_COLLECTIONS:
        for v in graph.get_collection(key):
            if not isinstance(v, Variable):
                continue
            rec = seen.get(id(v))
            if rec is None:
                rec = seen[id(v)] = {"variable": v._variable.name, "initializer": v._initializer_op.name,
                                     "initial_value": v._initial_value.name, "snapshot": v._snapshot.name,
                                     "trainable": bool(v._trainable), "collections": []}
            rec["collections"].append(key)
    return list(seen.values())


def restore_variables(graph, records, import_scope=None) -> list:
    """Rebuilds `af.Variable` objects over imported ops and adds them to their collections; returns
    [(original variable op name, Variable)]."""
    prefix = (import_scope.rstrip("/") + "/") if import_scope else ""
    out = []
    for rec in records:
        v = Variable.__new__(Variable)
        v._variable = graph.get_tensor_by_name(prefix + rec["variable"])
        v._initializer_op = graph.get_operation_by_name(prefix + rec["initializer"])
        v._initial_value = graph.get_tensor_by_name(prefix + rec["initial_value"])
        v._snapshot = graph.get_tensor_by_name(prefix + rec["snapshot"])
        v._trainable = bool(rec["trainable"])
        v.constraint = None
        v._save_slice_info = None
        for key in rec["collections"]:
            graph.add_to_collection(key, v)
        out.append((rec["variable"].rsplit(":", 1)[0], v))
    return out


def tensor_info(t) -> TensorInfo:
    """TensorInfo of a Tensor (or of a Variable's value)."""
    if isinstance(t, Variable):
        t = t.value()
    if not isinstance(t, Tensor):
        raise TypeError(f"build_tensor_info: expected a Tensor, got {type(t).__name__}")
    dims = t.shape.dims
    return TensorInfo(t.name, t.dtype.name, None if dims is None else list(dims))


def _version() -> str:
    # The package's own release, read from the loaded package rather than imported: the public API
    # (actorflow/__init__.py) sits above the training layer.
    return getattr(getattr(sys.modules.get("actorflow"), "version", None), "ACTORFLOW_VERSION", "")


def make_meta_graph(graph, tags=(), signature_def_map=None, main_op=None, clear_devices=False,
                    collection_list=None) -> MetaGraphDef:
    """A MetaGraphDef of `graph` as it is now."""
    doc = graph_doc(graph)
    if clear_devices:
        for r in doc["ops"]:
            r["device"] = ""
    if collection_list is not None:
        doc["collections"] = {k: v for k, v in (doc.get("collections") or {}).items() if k in collection_list}
    sigs = dict(signature_def_map or {})
    for key, sig in sigs.items():
        if not isinstance(sig, SignatureDef):
            raise TypeError(f"signature_def_map['{key}'] is not a SignatureDef (build it with "
                            "af.saved_model.signature_def_utils)")
        for kind, infos in (("input", sig.inputs), ("output", sig.outputs)):
            for k, info in infos.items():
                try:
                    graph.get_tensor_by_name(info.name)
                except (KeyError, ValueError):
                    raise ValueError(f"signature '{key}': {kind} '{k}' names tensor '{info.name}', which is not in "
                                     "the graph") from None
    if main_op is not None and not isinstance(main_op, (Operation, Tensor)):
        raise TypeError(f"main_op must be an Operation, got {type(main_op).__name__}")
    main = None if main_op is None else (main_op.op if isinstance(main_op, Tensor) else main_op).name
    return MetaGraphDef(pack_graph_doc(doc), MetaInfoDef([str(t) for t in tags], "", _version()), sigs,
                        variable_records(graph), main)


def import_meta_graph_def(mg: MetaGraphDef, graph, import_scope=None, clear_devices=False) -> list:
    """Adds a MetaGraphDef's graph to `graph`, with working Variables; returns [(key, Variable)]."""
    doc = graph_doc(mg.graph_def)
    if clear_devices:
        for r in doc["ops"]:
            r["device"] = ""
    import_graph_doc(doc, graph, import_scope)
    return restore_variables(graph, mg.variables, import_scope)


# -- public API ---------------------------------------------------------------------------------------------

def _read_meta_graph_file(path: str) -> MetaGraphDef:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"Meta graph file not found: {path}") from None
    try:
        peek = msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=lambda c, d: None)
    except Exception:  # noqa: BLE001 - unpack_file names the damage
        peek = None
    if isinstance(peek, dict) and "ops" in peek:
        # A bare graph, as Saver.save wrote it beside a checkpoint before it wrote meta graphs.
        return MetaGraphDef(data, MetaInfoDef([]), {}, [])
    return MetaGraphDef.from_dict(unpack_file(path, data, FORMAT))


def export_meta_graph(filename=None, meta_info_def=None, graph_def=None, saver_def=None, collection_list=None,
                      as_text=False, graph=None, export_scope=None, clear_devices=False,
                      clear_extraneous_savers=False, strip_default_attrs=False, save_debug_info=False, **kwargs):
    """Returns a MetaGraphDef of `graph` (the default graph) and writes it to `filename` if given
    (tf.compat.v1.train.export_meta_graph).

    Differs from TF: the file is actorflow's checksummed msgpack format, not a protocol buffer;
    `as_text`, `saver_def`, `export_scope` and `strip_default_attrs` are not supported (a true
    `as_text` or an `export_scope` raises); variables, collections of tensors and operations, and
    `signature_def_map=` / `tags=` keyword arguments are kept.
    """
    if as_text:
        raise NotImplementedError("export_meta_graph: as_text is not supported (the format is binary msgpack)")
    if export_scope:
        raise NotImplementedError("export_meta_graph: export_scope is not supported")
    g = graph or get_default_graph()
    tags = kwargs.pop("tags", None) or (getattr(meta_info_def, "tags", None) or [])
    mg = make_meta_graph(g, tags, kwargs.pop("signature_def_map", None), clear_devices=clear_devices,
                         collection_list=collection_list)
    if graph_def is not None:
        mg.graph_def = pack_graph_doc(graph_doc(graph_def))
    if filename is not None:
        path = os.fspath(filename)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        atomic_write(path, pack_file(FORMAT, mg.to_dict()))
    return mg


def import_meta_graph(meta_graph_or_file, clear_devices=False, import_scope=None, **kwargs):
    """Adds a saved meta graph's ops to the default graph, rebuilds its variables, and returns a
    `Saver` over them (None when it has none) (tf.compat.v1.train.import_meta_graph).

    `meta_graph_or_file` is a MetaGraphDef, a file written by `export_meta_graph`, or the `.meta`
    graph `Saver.save` writes beside a checkpoint. Checkpoint keys stay the original variable
    names, so the Saver restores checkpoints of the exporting program even under an `import_scope`.
    Errors: NotFoundError / DataLossError naming the file; ValueError naming an op already in the graph.
    """
    if isinstance(meta_graph_or_file, MetaGraphDef):
        mg = meta_graph_or_file
    else:
        mg = _read_meta_graph_file(os.fspath(meta_graph_or_file))
    g = get_default_graph()
    pairs = import_meta_graph_def(mg, g, import_scope, clear_devices)
    if not mg.variables:
        # A bare graph has no variable records: save its VariableV2 ops under their original names.
        prefix = (import_scope.rstrip("/") + "/") if import_scope else ""
        pairs = [(op.name[len(prefix):], op.outputs[0]) for op in g.get_operations()
                 if op.type == "VariableV2" and op.name.startswith(prefix)]
    if not pairs:
        return None
    from actorflow.train.saver import Saver
    return Saver({k: v for k, v in pairs}, **kwargs)


def dtype_of(info: TensorInfo):
    """The af.DType of a TensorInfo."""
    return dtypes.as_dtype(info.dtype)


def shape_of(info: TensorInfo) -> TensorShape:
    """The TensorShape of a TensorInfo."""
    return TensorShape(info.tensor_shape)
