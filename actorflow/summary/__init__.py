"""af.summary: TensorBoard summaries (tf.compat.v1.summary).

Summary ops (`scalar`, `histogram`, `image`, `audio`, `text`, `tensor_summary`, `merge`,
`merge_all`) are graph ops with CPU kernels; fetched, each gives a serialized `Summary` protobuf
(`bytes`), which `FileWriter.add_summary` writes to a TensorBoard event file. `Summary`, `Event`,
`SessionLog` and the other protobuf classes are TensorBoard's own (from the `tensorboard` package,
the `summary` extra), loaded on first use.
"""
from __future__ import annotations

from actorflow.graph.ops.summary_ops import audio, histogram, image, merge, merge_all, scalar, tensor_summary, text
from actorflow.summary import graph_def as _graph_def  # noqa: F401  (installs Graph.as_graph_def)
from actorflow.summary.writer import FileWriter, FileWriterCache

__all__ = ["scalar", "histogram", "image", "audio", "text", "tensor_summary", "merge", "merge_all", "FileWriter",
           "FileWriterCache", "Summary", "SummaryDescription", "SummaryMetadata", "HistogramProto", "Event",
           "SessionLog", "TaggedRunMetadata", "as_graph_def", "get_summary_description"]

# protobuf classes: name -> (tensorboard module, attribute)
_PROTOS = {
    "Summary": ("summary_pb2", "Summary"),
    "SummaryDescription": ("summary_pb2", "SummaryDescription"),
    "SummaryMetadata": ("summary_pb2", "SummaryMetadata"),
    "HistogramProto": ("summary_pb2", "HistogramProto"),
    "Event": ("event_pb2", "Event"),
    "SessionLog": ("event_pb2", "SessionLog"),
    "TaggedRunMetadata": ("event_pb2", "TaggedRunMetadata"),
}


def __getattr__(name):
    if name in _PROTOS:
        from actorflow import protos
        mod, attr = _PROTOS[name]
        value = getattr(getattr(protos, mod), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_summary_description(node_def):
    """The SummaryDescription of a TF 1.x `TensorSummary` node (its JSON "description" attribute)
    (tf.compat.v1.summary.get_summary_description). Any other node is a ValueError, as in TF:
    tensor_summary writes TensorSummaryV2 nodes, which carry SummaryMetadata instead."""
    if node_def.op != "TensorSummary":
        raise ValueError(f"Can't get_summary_description on {node_def.op}")
    from google.protobuf import json_format

    from actorflow import protos
    description = protos.summary_pb2.SummaryDescription()
    text = node_def.attr["description"].s
    json_format.Parse(text.decode("utf-8") if isinstance(text, bytes) else text, description)
    return description


def as_graph_def(graph=None, add_shapes=True):
    """`graph` (default: the default graph) as a GraphDef protobuf, as `FileWriter.add_graph` writes it."""
    from actorflow.graph.graph import get_default_graph
    from actorflow.summary.graph_def import as_graph_def as _agd
    return _agd(graph if graph is not None else get_default_graph(), add_shapes=add_shapes)
