"""`tensorflow.python.framework.errors_impl`: the error classes."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.framework.errors_impl", ('actorflow.errors',))
