"""`tensorflow.python.ops.linalg_ops`: linear algebra."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.linalg_ops", ('actorflow.linalg', 'actorflow'))
