"""`tensorflow.python.training.gradient_descent`: af.train's names."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.training.gradient_descent", ('actorflow.train',))
