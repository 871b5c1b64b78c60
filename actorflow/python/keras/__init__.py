"""`tensorflow.python.keras`: TF 1.x's graph-mode Keras (af.keras)."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.keras", ("actorflow.keras",))
