"""`tensorflow.python.ops.special_math_ops`: einsum, lbeta and special functions."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.special_math_ops", ('actorflow.math', 'actorflow'))
