"""`tensorflow.python.ops.parsing_ops`: parse_example and the feature specs."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.parsing_ops", ('actorflow.io', 'actorflow'))
