"""af.sets: tf.sets' set operations on the last dimension (graph/ops/set_ops.py), under both TF 1.x
names (set_union) and the short ones (union)."""
from actorflow.graph.ops.set_ops import set_difference, set_intersection, set_size, set_union

size, intersection, union, difference = set_size, set_intersection, set_union, set_difference

__all__ = ["difference", "intersection", "set_difference", "set_intersection", "set_size", "set_union", "size",
           "union"]
