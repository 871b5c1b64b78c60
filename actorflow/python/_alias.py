"""Module-level `__getattr__` for the `actorflow.python.*` paths: a name is looked up, on first use,
in the actorflow modules that hold TF's names for that path (TF's private modules hold far more
internals; only their public names have counterparts here)."""
from __future__ import annotations

import importlib

__all__ = ["delegate"]


def _resolve(dotted: str):
    """The module, or the namespace attribute (af.graph_util, af.nn.rnn_cell), named `dotted`."""
    try:
        return importlib.import_module(dotted)
    except ModuleNotFoundError:
        parent, _, attr = dotted.rpartition(".")
        return getattr(_resolve(parent), attr)


def delegate(path: str, sources: tuple):
    """(__getattr__, __dir__) for module `path` reading names from the modules named in `sources`."""
    def modules():
        return [_resolve(s) for s in sources]

    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        for m in modules():
            if hasattr(m, name):
                return getattr(m, name)
        raise AttributeError(f"module {path!r} has no attribute {name!r} (actorflow has no counterpart of "
                             f"tensorflow.{path.split('.', 1)[1]}.{name})")

    def __dir__():
        return sorted({n for m in modules() for n in dir(m) if not n.startswith("_")})
    return __getattr__, __dir__
