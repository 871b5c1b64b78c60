"""`tensorflow.python.profiler.option_builder`: ProfileOptionBuilder."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.profiler.option_builder", ("actorflow.profiler.option_builder",))
