"""`tensorflow.python.ops.rnn_cell_impl`: the RNN cells."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.rnn_cell_impl", ('actorflow.nn.rnn_cell',))
