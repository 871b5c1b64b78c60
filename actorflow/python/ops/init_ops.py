"""`tensorflow.python.ops.init_ops`: the initializers."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.init_ops", ('actorflow.initializers', 'actorflow'))
