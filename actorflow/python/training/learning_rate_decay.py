"""`tensorflow.python.training.learning_rate_decay`: af.train's names."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.training.learning_rate_decay", ('actorflow.train',))
