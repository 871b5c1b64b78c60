"""`tensorflow.python.profiler.model_analyzer`: profile, advise, Profiler, ALL_ADVICE."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.profiler.model_analyzer", ("actorflow.profiler",))
