"""af.train.write_graph (tf.compat.v1.train.write_graph): a GraphDef to a file, binary or text."""
from __future__ import annotations

import os
import tempfile

__all__ = ["write_graph"]


def write_graph(graph_or_graph_def, logdir, name, as_text=True):
    """Writes a graph's GraphDef to `logdir/name` and returns the path (tf.train.write_graph).

    `graph_or_graph_def`: an af.Graph (converted with `as_graph_def()`, TensorBoard's GraphDef
    protobuf) or a GraphDef protobuf. `as_text` writes protobuf text format (`.pbtxt`), else the
    binary wire format (`.pb`); TF's and TensorBoard's readers take either. Creates `logdir`;
    the file is written to a temporary name and renamed, so a reader never sees half of it.
    Differs from TF: `logdir` is a local path (no GCS/HDFS)."""
    from actorflow.graph.graph import Graph
    if isinstance(graph_or_graph_def, Graph):
        graph_def = graph_or_graph_def.as_graph_def()
    elif hasattr(graph_or_graph_def, "SerializeToString") and hasattr(graph_or_graph_def, "node"):
        graph_def = graph_or_graph_def
    else:
        raise TypeError(f"write_graph takes an af.Graph or a GraphDef protobuf, got "
                        f"{type(graph_or_graph_def).__name__}")
    logdir = os.fspath(logdir)
    os.makedirs(logdir, exist_ok=True)
    path = os.path.join(logdir, os.fspath(name))
    if as_text:
        from google.protobuf import text_format
        data = text_format.MessageToString(graph_def).encode("utf-8")
    else:
        data = graph_def.SerializeToString()
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".write_graph-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
