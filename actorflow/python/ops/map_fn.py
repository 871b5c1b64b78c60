"""`tensorflow.python.ops.map_fn`: map_fn."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.map_fn", ('actorflow',))
