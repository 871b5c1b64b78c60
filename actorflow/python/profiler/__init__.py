"""`tensorflow.python.profiler`: the model analyzer's modules (model_analyzer, option_builder,
tfprof_logger) and tf.compat.v1.profiler's names."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.profiler", ("actorflow.profiler",))
