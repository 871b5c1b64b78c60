"""`tensorflow.python.training.sync_replicas_optimizer`: af.train's names."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.training.sync_replicas_optimizer", ('actorflow.train',))
