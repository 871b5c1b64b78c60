"""`tensorflow.python.util.nest`: nested structures (af.nest)."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.util.nest", ('actorflow.nest',))
