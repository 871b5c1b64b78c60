"""`tensorflow.python.platform.tf_logging`: logging (af.logging)."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.platform.tf_logging", ('actorflow.tf_logging',))
