"""`njit` that imports numba only when a decorated function is first called.

Importing numba costs 0.3-0.7 s of CPU on these machines. Most kernel modules hold a few numba loops
beside many numpy kernels; with numba's own `njit` as their decorator, the first step of any graph
that touches such a module (a chain of adds, a reshape) paid for numba although it never ran a loop.
With this `njit` the module loads at numpy's cost, and numba is imported (and the functions compiled,
or loaded from numba's disk cache) when the first numba loop actually runs.

On that first call every function decorated here becomes a real numba dispatcher, and the module
globals that held the stand-ins are rebound to the dispatchers, so jitted code that calls another
jitted function (numba resolves it through its module's globals at compile time) sees a dispatcher.
A stand-in called afterwards from Python forwards to its dispatcher.
"""
from __future__ import annotations

import sys
import threading

__all__ = ["njit", "uintp"]

_pending: list = []                 # the stand-ins not yet turned into dispatchers
_lock = threading.Lock()


class _Lazy:
    __slots__ = ("py_func", "options", "dispatcher", "__name__", "__qualname__", "__doc__", "__wrapped__")

    def __init__(self, fn, options: dict):
        self.py_func = fn
        self.options = options
        self.dispatcher = None
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, *args, **kwargs):
        d = self.dispatcher
        if d is None:
            _materialize()
            d = self.dispatcher
        return d(*args, **kwargs)

    def __getattr__(self, name):        # .signatures, .overloads, .py_func ... of the real dispatcher
        if self.dispatcher is None:
            _materialize()
        return getattr(self.dispatcher, name)

    def __repr__(self) -> str:
        state = "compiled lazily" if self.dispatcher is None else repr(self.dispatcher)
        return f"<njit {self.__qualname__}: {state}>"


class _Name:
    """A numba name used inside jitted code (a type used as a cast, such as `uintp`): rebound to numba's
    object with the functions."""
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __call__(self, *args):
        import numba
        return getattr(numba, self.name)(*args)

    def __repr__(self) -> str:
        return f"<numba.{self.name}, imported lazily>"


uintp = _Name("uintp")


def _materialize() -> None:
    """Imports numba and turns every pending stand-in into its dispatcher (see the module docstring)."""
    with _lock:
        if not _pending:
            return
        import numba
        todo = list(_pending)
        for lazy in todo:
            lazy.dispatcher = numba.njit(**lazy.options)(lazy.py_func)
        spaces = {id(lazy.py_func.__globals__): lazy.py_func.__globals__ for lazy in todo}
        for mod_name, mod in list(sys.modules.items()):     # modules that imported a stand-in by name
            if mod_name.startswith("actorflow.") and hasattr(mod, "__dict__"):
                spaces.setdefault(id(mod.__dict__), mod.__dict__)
        for g in spaces.values():
            for name, value in list(g.items()):
                if isinstance(value, _Lazy) and value.dispatcher is not None:
                    g[name] = value.dispatcher
                elif isinstance(value, _Name):
                    g[name] = getattr(numba, value.name)
        del _pending[:len(todo)]


def njit(fn=None, **options):
    """`numba.njit(fn, **options)` (or `@njit(**options)`), with numba imported on the first call."""
    if fn is None:
        return lambda f: njit(f, **options)
    lazy = _Lazy(fn, options)
    with _lock:
        _pending.append(lazy)
    return lazy
