"""`tensorflow.python.ops.nn_ops`: tf.nn's ops."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.nn_ops", ('actorflow.nn',))
