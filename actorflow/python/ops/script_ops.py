"""`tensorflow.python.ops.script_ops`: py_func, numpy_function."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.script_ops", ('actorflow',))
