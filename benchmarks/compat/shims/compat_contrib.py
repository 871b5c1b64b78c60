"""`from tensorflow.contrib import rnn` for the corpus: TF 2.21 has no contrib, so the port imports
`rnn` from here, which resolves names in the library under test (AF_COMPAT_LIB=actorflow or
tensorflow) the way contrib.rnn re-exported them: cells from nn.rnn_cell, static_rnn and friends
from nn."""
import importlib
import os
import types

_lib = os.environ.get("AF_COMPAT_LIB", "actorflow")
_tf = importlib.import_module("actorflow" if _lib == "actorflow" else "tensorflow.compat.v1")


def _lookup(name):
    for space in (_tf.nn.rnn_cell, _tf.nn):
        if hasattr(space, name):
            return getattr(space, name)
    raise AttributeError(f"contrib.rnn.{name} has no counterpart in {_lib}")


class _Rnn(types.ModuleType):
    def __getattr__(self, name):
        return _lookup(name)


rnn = _Rnn("rnn")
