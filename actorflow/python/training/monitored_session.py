"""`tensorflow.python.training.monitored_session`: af.train's names."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.training.monitored_session", ('actorflow.train',))
