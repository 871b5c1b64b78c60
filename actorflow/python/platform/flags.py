"""`tensorflow.python.platform.flags`: flags (af.flags)."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.platform.flags", ('actorflow.flags',))
