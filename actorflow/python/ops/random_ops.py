"""`tensorflow.python.ops.random_ops`: random tensors."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.random_ops", ('actorflow.random', 'actorflow'))
