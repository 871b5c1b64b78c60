"""af.queue: tf.queue's names for the queue classes (graph/ops/data_flow_ops.py)."""
from actorflow.graph.ops.data_flow_ops import FIFOQueue, PaddingFIFOQueue, PriorityQueue, QueueBase, RandomShuffleQueue

__all__ = ["FIFOQueue", "PaddingFIFOQueue", "PriorityQueue", "QueueBase", "RandomShuffleQueue"]
