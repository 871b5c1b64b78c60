"""`tensorflow.python.framework.tensor_util`: make_tensor_proto, make_ndarray, constant_value (= get_static_value)."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.framework.tensor_util", ('actorflow',))
