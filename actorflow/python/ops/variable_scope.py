"""`tensorflow.python.ops.variable_scope`: variable_scope, get_variable..."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.variable_scope", ('actorflow',))
