"""`tensorflow.python.framework.tensor_spec`: TensorSpec."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.framework.tensor_spec", ('actorflow',))
