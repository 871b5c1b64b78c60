"""`tensorflow.python.training.session_run_hook`: af.train's names."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.training.session_run_hook", ('actorflow.train',))
