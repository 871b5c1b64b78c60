"""`tensorflow.python.ops.math_ops`: math (af.math's and af's names)."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.math_ops", ('actorflow.math', 'actorflow'))
