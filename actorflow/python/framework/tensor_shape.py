"""`tensorflow.python.framework.tensor_shape`: TensorShape, Dimension, unknown_shape..."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.framework.tensor_shape", ('actorflow.graph.tensor_shape', 'actorflow'))
