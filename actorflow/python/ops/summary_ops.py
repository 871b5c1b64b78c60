"""`tensorflow.python.ops.summary_ops`: summaries."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.summary_ops", ('actorflow.summary',))
