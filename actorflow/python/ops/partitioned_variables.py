"""`tensorflow.python.ops.partitioned_variables`: the partitioners."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.partitioned_variables", ('actorflow',))
