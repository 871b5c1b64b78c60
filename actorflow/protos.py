"""TensorBoard's protobuf classes (Summary, Event, GraphDef, ...), loaded on first use.

actorflow writes real TensorBoard event files with the `tensorboard` package's own generated
protobuf modules, so the summary ops (graph and kernel layers) and `af.summary.FileWriter` share
one definition of every message. The package is the optional `summary` extra: `import actorflow`
works without it, and the first use of a summary feature raises an ImportError naming the extra.

This module imports nothing from actorflow, so every layer may use it.
"""
from __future__ import annotations

import importlib

__all__ = ["require"]

# The modules this one hands out as attributes (`protos.summary_pb2`), imported on first access.
_MODULES = {name: f"tensorboard.compat.proto.{name}" for name in (
    "summary_pb2", "event_pb2", "graph_pb2", "node_def_pb2", "attr_value_pb2", "tensor_pb2", "tensor_shape_pb2",
    "types_pb2", "config_pb2", "versions_pb2", "meta_graph_pb2")}

_HINT = ("af.summary needs the 'tensorboard' package (the protobuf and event-file formats it writes): "
         "pip install 'actorflow[summary]' (or pip install tensorboard)")


def require(module: str):
    """Imports `module` (a tensorboard module), or raises an ImportError that names the extra."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"{_HINT}; importing {module} failed: {e}") from e


def __getattr__(name):
    if name in _MODULES:
        mod = require(_MODULES[name])
        globals()[name] = mod
        return mod
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
