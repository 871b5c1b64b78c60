"""`tensorflow.python.ops.logging_ops`: Print, print, Assert."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.logging_ops", ('actorflow',))
