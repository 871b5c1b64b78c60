"""`tensorflow.python.ops.metrics`: tf.metrics."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.metrics", ('actorflow.metrics',))
