"""`tensorflow.python.training.server_lib`: af.train's names."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.training.server_lib", ('actorflow.train',))
