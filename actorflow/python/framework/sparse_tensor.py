"""`tensorflow.python.framework.sparse_tensor`: SparseTensor, SparseTensorValue."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.framework.sparse_tensor", ('actorflow',))
