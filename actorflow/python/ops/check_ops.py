"""`tensorflow.python.ops.check_ops`: the assert_* checks."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.check_ops", ('actorflow.debugging', 'actorflow'))
