"""`tensorflow.python.training.checkpoint_utils`: af.train's names."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.training.checkpoint_utils", ('actorflow.train',))
