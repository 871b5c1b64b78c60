"""`tensorflow.python.ops.data_flow_ops`: queues, accumulators, dynamic partition/stitch."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.data_flow_ops", ('actorflow',))
