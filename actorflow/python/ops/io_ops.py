"""`tensorflow.python.ops.io_ops`: readers, read_file, save/restore ops."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.io_ops", ('actorflow.io', 'actorflow'))
