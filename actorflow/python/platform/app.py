"""`tensorflow.python.platform.app`: app.run (af.app)."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.platform.app", ('actorflow.app',))
