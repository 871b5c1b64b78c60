"""`tensorflow.python.training.training_util`: af.train's names."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.training.training_util", ('actorflow.train',))
