"""`tensorflow.python.training.adagrad`: af.train's names."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.training.adagrad", ('actorflow.train',))
