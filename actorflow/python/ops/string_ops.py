"""`tensorflow.python.ops.string_ops`: string ops."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.string_ops", ('actorflow.strings', 'actorflow'))
