"""`tensorflow.python.ops.rnn`: dynamic_rnn, bidirectional_dynamic_rnn, static_rnn, raw_rnn."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.ops.rnn", ('actorflow.nn',))
