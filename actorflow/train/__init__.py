"""af.train: optimizers, learning-rate schedules and the global step (tf.compat.v1.train).

Every module of this package re-exports its `__all__` here, so training utilities added later
(savers, sessions, device setters) appear as `af.train.X` by defining them in a module of
actorflow/train with an `__all__`.
"""
from __future__ import annotations

import importlib as _importlib
import os as _os
import pkgutil as _pkgutil

from actorflow.train.learning_rate import *  # noqa: F401,F403
from actorflow.train.optimizer import *  # noqa: F401,F403
from actorflow.train.optimizers import *  # noqa: F401,F403
from actorflow.train.training_util import *  # noqa: F401,F403

__all__ = []


def _export_all() -> None:
    g = globals()
    for info in sorted(_pkgutil.iter_modules([_os.path.dirname(__file__)]), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        mod = _importlib.import_module(f"{__name__}.{info.name}")
        for name in getattr(mod, "__all__", ()):
            g[name] = getattr(mod, name)
            if name not in __all__:
                __all__.append(name)


_export_all()
del _export_all


def __getattr__(name):
    # The protobuf classes load tensorboard's generated modules (an optional extra) on first use.
    from actorflow.train import proto_defs
    if name in proto_defs._NAMES:
        return proto_defs.lookup(name)
    raise AttributeError(f"module 'actorflow.train' has no attribute '{name}'")
