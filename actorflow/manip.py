"""af.manip: tf.manip, TF 1.x's namespace for tensor manipulation (the same functions as af's)."""
from actorflow.graph.ops.array_ops.reshaping import reshape
from actorflow.graph.ops.array_ops.space_batch import batch_to_space_nd, space_to_batch_nd
from actorflow.graph.ops.array_ops.tiling import roll, tile
from actorflow.graph.ops.scatter_nd_ops import gather_nd, scatter_nd
from actorflow.graph.ops.sort_ops import reverse

__all__ = ["batch_to_space_nd", "gather_nd", "reshape", "reverse", "roll", "scatter_nd", "space_to_batch_nd", "tile"]
