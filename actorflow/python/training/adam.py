"""`tensorflow.python.training.adam`: af.train's names."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.training.adam", ('actorflow.train',))
