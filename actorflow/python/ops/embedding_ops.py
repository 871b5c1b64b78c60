"""`tensorflow.python.ops.embedding_ops`: embedding_lookup and friends."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.embedding_ops", ('actorflow.nn', 'actorflow'))
