"""`tensorflow.python.training.optimizer`: af.train's names."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.training.optimizer", ('actorflow.train',))
