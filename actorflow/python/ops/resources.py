"""`tensorflow.python.ops.resources`: report_uninitialized_resources and shared resources."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.resources", ('actorflow',))
