"""`tensorflow.python.ops.sparse_ops`: sparse ops."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.sparse_ops", ('actorflow.sparse', 'actorflow'))
