"""`tensorflow.python.ops.losses`: tf.losses."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.losses", ('actorflow.losses',))
