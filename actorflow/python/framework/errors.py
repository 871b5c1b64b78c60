"""`tensorflow.python.framework.errors`: the error classes."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.framework.errors", ('actorflow.errors',))
