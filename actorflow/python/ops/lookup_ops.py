"""`tensorflow.python.ops.lookup_ops`: lookup tables."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.lookup_ops", ('actorflow.lookup', 'actorflow.contrib.lookup', 'actorflow'))
