"""The Python functions that `af.py_func` / `af.numpy_function` ops call, by token.

A PyFunc op holds a token ("pyfunc_3"), not the function, as in TensorFlow: the graph stays a
plain value that serializes (GraphDef, SavedModel, the cluster's format), and the kernel looks the
function up here when it runs. A graph whose PyFunc ops are run in another process, where the
tokens are not registered, fails with an error naming the op and the token. Functions are dropped
when the graph that registered them is collected (graph/ops/script_ops.py).

This module imports nothing from actorflow: the graph layer registers, the kernels look up.
"""
from __future__ import annotations

import itertools
import threading

__all__ = ["register", "lookup", "unregister"]

_lock = threading.Lock()
_funcs: dict = {}
_ids = itertools.count()


def register(func) -> str:
    """Keeps `func` under a new token and returns the token."""
    with _lock:
        token = f"pyfunc_{next(_ids)}"
        _funcs[token] = func
    return token


def lookup(token: str):
    """The function registered under `token`, or None."""
    return _funcs.get(token)


def unregister(tokens) -> None:
    with _lock:
        for t in tokens:
            _funcs.pop(t, None)
