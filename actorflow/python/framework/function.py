"""`tensorflow.python.framework.function`: Defun is not supported; the module gives af's names."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.framework.function", ('actorflow',))
