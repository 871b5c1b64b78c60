"""`tensorflow.python.summary.summary`: tf.summary."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.summary.summary", ('actorflow.summary',))
