"""`tensorflow.python.training.slot_creator`: af.train's names."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.training.slot_creator", ('actorflow.train',))
