"""TensorInfo helpers (tf.compat.v1.saved_model.utils)."""
from __future__ import annotations

from actorflow.train.meta_graph import TensorInfo, tensor_info

__all__ = ["build_tensor_info", "get_tensor_from_tensor_info", "TensorInfo"]


def build_tensor_info(tensor) -> TensorInfo:
    """The TensorInfo (name, dtype, static shape) of a tensor (tf.compat.v1.saved_model.utils.build_tensor_info)."""
    return tensor_info(tensor)


def get_tensor_from_tensor_info(tensor_info, graph=None, import_scope=None):
    """The tensor a TensorInfo names, in `graph` or the default graph
    (tf.compat.v1.saved_model.utils.get_tensor_from_tensor_info)."""
    from actorflow.graph.graph import get_default_graph
    g = graph or get_default_graph()
    prefix = (import_scope.rstrip("/") + "/") if import_scope else ""
    return g.get_tensor_by_name(prefix + tensor_info.name)
