"""`tensorflow.python.ops.nn_impl`: tf.nn's composite functions."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.nn_impl", ('actorflow.nn',))
