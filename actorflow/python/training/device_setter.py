"""`tensorflow.python.training.device_setter`: af.train's names."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.training.device_setter", ('actorflow.train',))
