"""`tensorflow.python.ops.histogram_ops`: histogram_fixed_width."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.histogram_ops", ('actorflow',))
