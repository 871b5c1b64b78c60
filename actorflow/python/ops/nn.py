"""`tensorflow.python.ops.nn`: tf.nn."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.nn", ('actorflow.nn',))
