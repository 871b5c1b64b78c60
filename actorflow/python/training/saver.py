"""`tensorflow.python.training.saver`: af.train's names."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.training.saver", ('actorflow.train',))
