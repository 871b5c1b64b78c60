"""`tensorflow.python.platform.gfile`: files (af.gfile)."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.platform.gfile", ('actorflow.gfile',))
