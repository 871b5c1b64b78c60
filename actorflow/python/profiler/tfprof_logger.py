"""`tensorflow.python.profiler.tfprof_logger`: write_op_log, and the '_trainable_variables' type name."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.profiler.tfprof_logger", ("actorflow.profiler.flops",))
