"""`tensorflow.python.framework.ops`: the graph, its tensors and operations, and the default-graph
functions, as `from tensorflow.python.framework import ops` gives them (`ops.reset_default_graph()`).

The same objects as `actorflow.Graph`, `actorflow.reset_default_graph` and so on; TF's module also
holds internals (op-definition plumbing, eager context) that have no counterpart here.
"""
from __future__ import annotations

from actorflow.graph.gradients import NotDifferentiable, RegisterGradient, no_gradient
from actorflow.graph.graph import (
                                   Graph,
                                   GraphKeys,
                                   Operation,
                                   Tensor,
                                   add_to_collection,
                                   colocate_with,
                                   control_dependencies,
                                   convert_to_tensor,
                                   device,
                                   get_collection,
                                   get_collection_ref,
                                   get_default_graph,
                                   name_scope,
                                   reset_default_graph,
)
from actorflow.graph.indexed_slices import IndexedSlices, convert_to_tensor_or_indexed_slices

__all__ = ["Graph", "GraphKeys", "IndexedSlices", "NotDifferentiable", "Operation", "RegisterGradient", "Tensor",
           "add_to_collection", "colocate_with", "control_dependencies", "convert_to_tensor",
           "convert_to_tensor_or_indexed_slices", "device", "get_collection", "get_collection_ref",
           "get_default_graph", "name_scope", "no_gradient", "reset_default_graph"]
