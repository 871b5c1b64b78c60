"""`tensorflow.python.ops.gradients_impl`: gradients."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.gradients_impl", ('actorflow',))
