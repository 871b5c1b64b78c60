"""`tensorflow.python.framework.graph_util`: convert_variables_to_constants, extract_sub_graph..."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.framework.graph_util", ('actorflow.graph_util',))
