"""Resource state owned by a process: variables (and, later, queues), keyed by shared name.

A resource's operations all run on its runtime's event loop, one at a time, which serializes them.
Variables use copy-on-write: an update mutates the buffer in place only when nothing else holds
a reference to it (a pending message, a running kernel, a fetched result); otherwise it copies
first, so every read is a consistent snapshot.

A variable's CPU buffer of 2 MiB or more starts on a 2 MiB boundary, its whole 2 MiB pages advised
into transparent huge pages (`new_buffer`): a weight that the GEMMs of every step read, transposed
or not, and update in place, is then walked with a few TLB entries instead of one per 4 KiB. Where
numpy put it (numpy advises only allocations of 4 MiB and more, and only the 2 MiB pages that fall
inside them), how much of it was in huge pages changed from process to process.
"""
from __future__ import annotations

import mmap
import sys
import threading
import weakref

import numpy as np

from actorflow import errors
from actorflow.kernels.cpu.aligned import empty as aligned_empty

__all__ = ["VariableResource", "ResourceContainer", "new_buffer"]

_getrefcount = sys.getrefcount
_HUGE = 2 << 20
_HUGE_PAGES = sys.platform.startswith("linux") and hasattr(mmap, "MADV_HUGEPAGE")


def huge_buffer_wanted(value) -> bool:
    """Whether `new_buffer(value)` puts `value` in huge pages (a CPU array of 2 MiB or more, on Linux)."""
    return _HUGE_PAGES and type(value) is np.ndarray and value.nbytes >= _HUGE


def new_buffer(value: np.ndarray) -> np.ndarray:
    """A writable C-contiguous copy of `value`; where `huge_buffer_wanted`, in private anonymous
    memory starting on a 2 MiB boundary with its whole 2 MiB pages advised MADV_HUGEPAGE (the
    tail that does not fill a huge page stays in small pages: no memory is wasted). The kernel
    gives huge pages where transparent huge pages are enabled ("always" or "madvise"), and small
    ones otherwise."""
    if not huge_buffer_wanted(value):
        value = np.asarray(value)
        out = aligned_empty(value.shape, value.dtype)       # on a cache line, as a GEMM reads it best
        np.copyto(out, value)
        return out
    n = value.nbytes
    m = mmap.mmap(-1, n + _HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    raw = np.frombuffer(m, np.uint8)            # keeps `m` alive as long as any view of it
    off = -raw.ctypes.data % _HUGE
    try:
        m.madvise(mmap.MADV_HUGEPAGE, off, n // _HUGE * _HUGE)     # before any page is touched
    except OSError:                             # a kernel without THP: small pages
        pass
    out = raw[off:off + n].view(value.dtype).reshape(value.shape)
    np.copyto(out, value)
    return out


class VariableResource:
    __slots__ = ("name", "dtype", "shape", "value", "version", "busy")

    def __init__(self, name: str, dtype: np.dtype, shape):
        self.name = name
        self.dtype = dtype
        self.shape = shape        # declared static shape (tuple with None), or None
        self.value = None         # the current buffer; None until initialized
        self.version = 0
        self.busy = None          # while an update runs off the loop: the activations waiting for it

    def read(self):
        v = self.value
        if v is None:
            raise errors.FailedPreconditionError(
                self.name, None, f"Attempting to use uninitialized value {self.name}")
        return v

    def shared(self) -> bool:
        """Whether `exclusive` would copy the buffer (someone else holds it, or it is read-only)."""
        v = self.value
        # References: self.value, the local `v`, getrefcount's argument.
        return v is not None and (_getrefcount(v) > 3 or not getattr(v.flags, "writeable", True))

    def exclusive(self):
        """The buffer, made exclusively ours (copied if anyone else holds it), for in-place update."""
        v = self.value
        if v is None:
            raise errors.FailedPreconditionError(
                self.name, None, f"Attempting to use uninitialized value {self.name}")
        # References: self.value, the local `v`, getrefcount's argument.
        if _getrefcount(v) > 3 or not getattr(v.flags, "writeable", True):     # CuPy flags have no writeable
            v = self.value = new_buffer(v) if type(v) is np.ndarray else v.copy()
        return v

    def park(self, actor, tag, args) -> None:
        """Holds an activation that must not run while the resource is busy; it is queued again
        when the update ends (`unpark`), and keeps its tag open meanwhile."""
        busy = self.busy
        if busy is None:          # freed meanwhile (a synchronous step ended in another thread)
            actor.rt.enqueue(actor, tag, args)
            return
        actor.rt.begin_async(tag)
        busy.append((actor, tag, args))

    @staticmethod
    def unpark(rt, waiting) -> None:
        """Queues the activations `park` held."""
        for actor, tag, args in waiting:
            rt.enqueue(actor, tag, args)
            rt.end_async(tag)

    def store(self, value: np.ndarray) -> None:
        self.value = value
        self.version += 1


class ResourceContainer:
    """The resources of one session (local) or one server (shared by every client)."""

    def __init__(self):
        self._resources: dict[str, object] = {}
        self._kinds: dict[str, str] = {}
        self._lock = threading.Lock()
        # graph -> op name -> {(device, kernel def): kernel} of ops whose kernels keep session state (a
        # random op's stream), which every plan of the session shares, as TF's session shares stateful
        # kernels across its executors (by node name: a plan's rewritten copy of an op, made when a
        # pass replaced one of its inputs, is the same op). Weak in the graph: a server drops a
        # graph's kernels with it.
        self._kernels = weakref.WeakKeyDictionary()
        from actorflow.actors.sync_step import StepGate
        self.gate = StepGate()            # actor steps vs a synchronous training step (sync_step.py)

    def variable(self, name: str, dtype: np.dtype, shape) -> VariableResource:
        with self._lock:
            r = self._resources.get(name)
            if r is None:
                r = self._resources[name] = VariableResource(name, dtype, shape)
            elif not isinstance(r, VariableResource):
                raise errors.InvalidArgumentError(name, None, f"Resource '{name}' exists and is not a variable")
            elif r.dtype != dtype:
                raise errors.InvalidArgumentError(
                    name, None, f"Variable '{name}' exists with dtype {r.dtype}, requested {dtype}")
            return r

    def resource(self, name: str, kind: str, factory):
        """Gets or creates the resource `name` (created by an op of type `kind`)."""
        with self._lock:
            r = self._resources.get(name)
            if r is None:
                r = self._resources[name] = factory()
                self._kinds[name] = kind
            elif self._kinds.get(name) != kind:
                raise errors.InvalidArgumentError(
                    name, None, f"Resource '{name}' exists as a {self._kinds.get(name) or 'variable'}, "
                                f"requested a {kind}")
            return r

    def get(self, name: str):
        return self._resources.get(name)

    def stateful_kernel(self, op, key, factory):
        """The kernel `factory()` built for (`op`, `key`) the first time any plan asked for it."""
        with self._lock:
            per_graph = self._kernels.get(op.graph)
            if per_graph is None:
                per_graph = self._kernels[op.graph] = {}
            per_op = per_graph.get(op.name)
            if per_op is None:
                per_op = per_graph[op.name] = {}
            fn = per_op.get(key)
            if fn is None:
                fn = per_op[key] = factory()
            return fn

    def names(self) -> list[str]:
        return list(self._resources)

    def clear(self) -> None:
        with self._lock:
            resources = list(self._resources.values())
            self._resources.clear()
            self._kernels.clear()
        for r in resources:
            # Resources that run work of their own (an iterator's prefetch tasks) stop it.
            release = getattr(r, "release", None)
            if release is not None:
                release()


def resource_factory(op_type: str):
    """The constructor of the resource an op of `op_type` creates: factory(name, attrs)."""
    import actorflow.actors.dataset  # noqa: F401  (registers the iterator resources)
    import actorflow.actors.reader  # noqa: F401  (registers the readers)
    import actorflow.actors.session_tensors  # noqa: F401  (registers the session's tensor store)
    import actorflow.actors.table  # noqa: F401  (registers the lookup tables)
    from actorflow.actors.accumulator import AccumulatorResource
    from actorflow.actors.queue import QueueResource
    factories = {
        "FIFOQueueV2": lambda name, attrs: QueueResource(name, attrs, "fifo"),
        "RandomShuffleQueueV2": lambda name, attrs: QueueResource(name, attrs, "shuffle"),
        "PaddingFIFOQueueV2": lambda name, attrs: QueueResource(name, attrs, "padding"),
        "PriorityQueueV2": lambda name, attrs: QueueResource(name, attrs, "priority"),
        "ConditionalAccumulator": lambda name, attrs: AccumulatorResource(name, attrs, sparse=False),
        "SparseConditionalAccumulator": lambda name, attrs: AccumulatorResource(name, attrs, sparse=True),
    }
    factories.update(_EXTRA_FACTORIES)
    try:
        return factories[op_type]
    except KeyError:
        raise errors.InvalidArgumentError(None, None, f"No resource is created by op type {op_type}") from None


_EXTRA_FACTORIES: dict = {}


def register_resource(op_type: str, factory) -> None:
    """Registers the resource created by ops of `op_type` (e.g. accumulators): factory(name, attrs)."""
    _EXTRA_FACTORIES[op_type] = factory
