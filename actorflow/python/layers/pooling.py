"""`tensorflow.python.layers.pooling`: tf.layers's classes and functions."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.layers.pooling", ('actorflow.layers',))
