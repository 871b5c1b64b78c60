"""`tensorflow.python.framework.test_util`: TensorFlowTestCase (af.test.TestCase)."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.framework.test_util", ('actorflow.test',))
