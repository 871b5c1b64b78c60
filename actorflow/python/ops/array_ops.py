"""`tensorflow.python.ops.array_ops`: array manipulation (af's names)."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.array_ops", ('actorflow',))
