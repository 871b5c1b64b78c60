"""`tensorflow.python.framework.random_seed`: set_random_seed, get_seed."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.framework.random_seed", ('actorflow',))
