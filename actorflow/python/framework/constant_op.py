"""`tensorflow.python.framework.constant_op`: constant."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.framework.constant_op", ('actorflow',))
