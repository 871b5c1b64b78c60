"""actorflow: the TensorFlow-paper system as an actor-model dataflow runtime on asyncio.

`import actorflow as af` gives the TF-1.x (`tf.compat.v1`) graph API.
"""
from __future__ import annotations

from actorflow import errors
from actorflow.graph.dtypes import (DType, as_dtype, bool_ as bool, double, float16, float32, float64, half,  # noqa: A004
                                    int8, int16, int32, int64, uint8)
from actorflow.graph.graph import (Graph, GraphKeys, Operation, Tensor, add_to_collection, colocate_with,
                                   control_dependencies, convert_to_tensor, device, get_collection,
                                   get_collection_ref, get_default_graph, name_scope, reset_default_graph)
from actorflow.graph.indexed_slices import IndexedSlices
from actorflow.graph.tensor_shape import TensorShape
from actorflow.graph.ops.constant import (constant, group, identity, no_op, placeholder, placeholder_with_default,
                                          stop_gradient)
from actorflow.graph.ops.math_ops import *  # noqa: F401,F403
from actorflow.graph.ops.array_ops import *  # noqa: F401,F403
from actorflow.graph.ops.random_ops import *  # noqa: F401,F403
from actorflow.graph.ops.clip_ops import *  # noqa: F401,F403
from actorflow.graph.ops import overloads as _overloads  # noqa: F401  (Tensor operators)
from actorflow.graph.ops import control_flow_ops, sendrecv_ops  # noqa: F401
from actorflow.graph.ops.data_flow_ops import FIFOQueue, PaddingFIFOQueue, QueueBase, RandomShuffleQueue
from actorflow.graph.ops.conditional_accumulator_ops import ConditionalAccumulator, SparseConditionalAccumulator
from actorflow.graph.variables import *  # noqa: F401,F403
from actorflow.graph.variable_scope import *  # noqa: F401,F403
from actorflow.graph.initializers import *  # noqa: F401,F403
from actorflow.graph.gradients import gradients
from actorflow.graph.control_flow import case, cond, while_loop
from actorflow.graph.nest import flatten as _flatten  # noqa: F401
from actorflow.actors.session import (ConfigProto, GPUOptions, GraphOptions, InteractiveSession, RewriterConfig,
                                      RunMetadata, RunOptions, Session, get_default_session)
from actorflow import nn, layers, train, cluster  # noqa: E402
from actorflow.graph import nest  # noqa: F401
from actorflow.graph import graph_util  # noqa: F401
from actorflow import saved_model  # noqa: F401
from actorflow import serving  # noqa: F401

newaxis = None


def list_devices():
    """The devices of this process: CPU:0, and GPU:i when CuPy sees CUDA devices."""
    from actorflow.scheduler.devices import local_devices
    return local_devices()
__version__ = "0.1.0"
