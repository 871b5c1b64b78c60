"""`tensorflow.python.ops.control_flow_ops`: cond, while_loop, group, tuple, no_op..."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.control_flow_ops", ('actorflow',))
