"""`tensorflow.python.ops.variables`: Variable and the initializers of variables."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.variables", ('actorflow',))
