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

`import_numba` is how actorflow imports numba (every module that does goes through it first): see
its docstring for what it arranges around numba's check for BLAS.
"""
from __future__ import annotations

import gc
import importlib.machinery
import logging
import os
import sys
import threading

__all__ = ["njit", "uintp", "import_numba", "numba_imported"]

log = logging.getLogger(__name__)

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
        return getattr(import_numba(), self.name)(*args)

    def __repr__(self) -> str:
        return f"<numba.{self.name}, imported lazily>"


uintp = _Name("uintp")


def _materialize() -> None:
    """Imports numba and turns every pending stand-in into its dispatcher (see the module docstring)."""
    with _lock:
        if not _pending:
            return
        numba = import_numba()
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


# numba versions whose numba.np.arraymath computes `_HAVE_BLAS = _check_blas()` at import through the
# `ensure_blas` it imports from numba.np.linalg (read in 0.59-0.68); outside them numba is left alone.
_BLAS_PROBE_VERSIONS = ((0, 59), (0, 69))
_numba_ready = False
_numba_lock = threading.Lock()      # not _lock: _materialize holds that one when it calls import_numba


def numba_imported() -> bool:
    """True once `import_numba` has run in this process (a kernel registry `ready` check)."""
    return _numba_ready


def import_numba():
    """numba, imported; the first time, with the GC paused, and its CPU target's check for BLAS made
    without importing scipy.linalg.

    When numba's CPU target first compiles, or loads a function from its disk cache, it imports
    numba.np.arraymath, which sets ``_HAVE_BLAS`` by importing ``scipy.linalg.cython_blas``, to
    know whether np.dot and friends in jitted code can call BLAS. That imports all of scipy.linalg
    (LAPACK's shared library, and scipy's array-API layer, which touches every lazy submodule of
    numpy: numpy.f2py, numpy.testing, numpy.ma): 0.13-0.2 s of the 0.5 s that the first numba call
    of a process costs, and none of actorflow's numba code uses numba's BLAS (its GEMMs call cblas
    through kernels/cpu/blas.py).

    So, for the numba versions read (`_BLAS_PROBE_VERSIONS`), arraymath is imported here with
    numba.np.linalg's `ensure_blas` standing in for one that answers the same question, whether
    ``scipy.linalg.cython_blas`` can be imported and matches numba's BLAS integer width, by finding
    the module's file instead of importing its package; then numba's own is put back (in both
    modules), so jitted code that does use np.dot gets numba's check, and scipy.linalg, when it is
    compiled. ``_HAVE_BLAS`` comes out as numba computes it. With another numba, or numba's
    arraymath already imported, or anything unexpected, nothing is changed.

    Loading a function from numba's disk cache is made cheaper too: see `_light_cache_loads`.
    """
    global _numba_ready
    if _numba_ready:
        return sys.modules["numba"]
    with _numba_lock:
        if not _numba_ready:
            # Importing numba creates some hundred thousand long-lived objects, and the cyclic GC's young
            # collections (about 170 of them) walk them again and again: 50-70 ms of the import's 0.3 s.
            # The GC is off meanwhile (for the whole process: another thread's garbage waits those 0.3 s).
            enabled = gc.isenabled()
            gc.disable()
            try:
                import numba
                try:
                    _import_arraymath(numba)
                except Exception as e:  # noqa: BLE001 - numba then imports arraymath itself, as it would have
                    log.debug("numba's BLAS check left to numba: %s: %s", type(e).__name__, e)
                try:
                    _light_cache_loads(numba)
                except Exception as e:  # noqa: BLE001 - numba's own cache loads stay
                    log.debug("numba's cache loads left as they are: %s: %s", type(e).__name__, e)
            finally:
                if enabled:
                    gc.enable()
            _numba_ready = True
    return sys.modules["numba"]


# numba versions whose Cache.load_overload (numba/core/caching.py) refreshes the whole target context
# before loading and nothing else (read in 0.68; the same code since 0.49).
_CACHE_LOAD_VERSIONS = ((0, 59), (0, 69))
_CACHE_LOAD_NAMES = frozenset({"refresh", "_guard_against_spurious_io_errors", "_load_overload"})


def _light_cache_loads(numba) -> None:
    """Loads from numba's disk cache without first loading every registry of numba's CPU target.

    numba's ``Cache.load_overload`` begins with ``target_context.refresh()``, "to ensure it is
    initialized": that imports and installs every implementation numba has (numba.np.linalg,
    arraymath, arrayobj, npyimpl, the random generators, typed containers, jitclass, ...) and
    refreshes the typing context, some 0.1 s of the first cached function a process loads, which
    a process reusing the cache (a second worker, a restarted server) pays in its first step.
    Rebuilding a cached function needs none of it: its machine code is linked against symbols that
    numba registers when it creates the context (its C helpers, the exception classes) or imports
    (the hash secret), against the NRT's functions, which `rtsys.initialize` registers (the one
    part of refresh that is kept), and against whatever its own reload hooks set up (parallel
    gufuncs' thread pool). Typing and lowering, which need the registries, happen only when
    something is compiled, and compiling refreshes the context itself (numba.core.compiler's
    pipeline, and the target context on its first missing implementation).

    So, for the CPU target of the numba versions read (`_CACHE_LOAD_VERSIONS`, and a load_overload
    whose code names what 0.68's does), a cache load initializes the NRT only. Other targets
    (CUDA) and other versions keep numba's load_overload."""
    version = tuple(int(p) for p in numba.__version__.split(".")[:2])
    if not (_CACHE_LOAD_VERSIONS[0] <= version <= _CACHE_LOAD_VERSIONS[1]):
        return
    from numba.core import caching
    from numba.core.cpu import CPUContext
    from numba.core.runtime import rtsys
    numbas = caching.Cache.load_overload
    if set(getattr(numbas, "__code__", None).co_names) != _CACHE_LOAD_NAMES:
        return

    def load_overload(self, sig, target_context):
        if type(target_context) is not CPUContext:
            return numbas(self, sig, target_context)
        rtsys.initialize(target_context)           # a no-op after the first time
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)
    load_overload.__doc__ = numbas.__doc__
    load_overload.numbas = numbas
    caching.Cache.load_overload = load_overload


def _import_arraymath(numba) -> None:
    version = tuple(int(p) for p in numba.__version__.split(".")[:2])
    if not (_BLAS_PROBE_VERSIONS[0] <= version <= _BLAS_PROBE_VERSIONS[1]) or "numba.np.arraymath" in sys.modules:
        return
    import numba.np.linalg as linalg
    numbas = linalg.ensure_blas

    def ensure_blas():      # numba's, finding scipy.linalg.cython_blas instead of importing scipy.linalg
        import scipy
        where = [os.path.join(os.path.dirname(scipy.__file__), "linalg")]
        if importlib.machinery.PathFinder.find_spec("cython_blas", where) is None:
            raise ImportError("scipy 0.16+ is required for linear algebra")
        check_width = getattr(linalg, "_check_lapack_int_width", None)
        if check_width is not None:
            check_width()

    linalg.ensure_blas = ensure_blas
    try:
        import numba.np.arraymath as arraymath
    finally:
        linalg.ensure_blas = numbas
    if getattr(arraymath, "ensure_blas", None) is ensure_blas:
        arraymath.ensure_blas = numbas
