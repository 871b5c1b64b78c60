"""`tensorflow.python.platform.test`: tf.test (af.test)."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.platform.test", ('actorflow.test',))
