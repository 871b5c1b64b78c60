"""`tensorflow.python.ops.clip_ops`: clip_by_value, clip_by_norm, clip_by_global_norm..."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.clip_ops", ('actorflow',))
