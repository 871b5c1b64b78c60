"""`tensorflow.python.ops.tensor_array_ops`: TensorArray."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.tensor_array_ops", ('actorflow',))
