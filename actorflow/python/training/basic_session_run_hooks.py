"""`tensorflow.python.training.basic_session_run_hooks`: af.train's names."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.training.basic_session_run_hooks", ('actorflow.train',))
