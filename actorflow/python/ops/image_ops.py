"""`tensorflow.python.ops.image_ops`: tf.image."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.image_ops", ('actorflow.image',))
