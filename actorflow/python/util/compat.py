"""`tensorflow.python.util.compat`: as_bytes, as_text, as_str..."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.util.compat", ('actorflow.compat',))
