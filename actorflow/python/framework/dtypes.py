"""`tensorflow.python.framework.dtypes`: the DType objects and as_dtype."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.framework.dtypes", ('actorflow.graph.dtypes', 'actorflow'))
