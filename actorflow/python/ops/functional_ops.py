"""`tensorflow.python.ops.functional_ops`: map_fn, scan, foldl, foldr."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.functional_ops", ('actorflow',))
