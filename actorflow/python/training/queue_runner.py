"""`tensorflow.python.training.queue_runner`: af.train's names."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.training.queue_runner", ('actorflow.train',))
