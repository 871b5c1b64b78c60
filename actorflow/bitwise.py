"""af.bitwise: tf.bitwise's integer bit operations (graph/ops/bitwise_ops.py)."""
from actorflow.graph.ops.bitwise_ops import bitwise_and, bitwise_or, bitwise_xor, invert, left_shift, right_shift

__all__ = ["bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift"]
