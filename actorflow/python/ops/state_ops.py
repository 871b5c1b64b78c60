"""`tensorflow.python.ops.state_ops`: assign, scatter updates, variable ops."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.state_ops", ('actorflow',))
