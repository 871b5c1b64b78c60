"""Compiling generated source, caching it on disk, and the kernels that run the result.

The source of a spec is written once to ``<cache dir>/afjit_<sha>.py`` (the hash of the source,
numba's and numpy's versions) and imported from there, so numba's ``cache=True`` finds the
machine code of an earlier process beside it (numba keys its index by the file's path and
modification time: the file is never rewritten). The cache dir is ``$AF_JIT_CACHE_DIR``, or
``~/.cache/actorflow/jit``.

Compiling never runs on the event loop: a `JitKernel` is built by the session's thread when it
prepares a plan. In ``wait`` mode (global_jit_level ON_1/ON_2 and jit_scope() marks) it compiles
there, for C-contiguous arguments of the spec's dtypes and ranks, before the first step; in
``async`` mode (``AF_JIT_COMPILE=async``, or `JitKernel(..., mode="async")`) a compile thread does
it and the kernel runs the interpreted ops meanwhile. ``tiered`` mode (AF_JIT=tiered)
runs the interpreted ops and counts them (an estimate of their cost: `OP_SECONDS` per op run,
`ELEMENT_SECONDS` per element the ops produce); once the estimate passes `TIER_SECONDS`,
the session compiles the kernel before its next step, on the thread that asked for the step
(`tier_due`, `tier_up`; `arun` awaits it in a worker thread): code that keeps running is
compiled, a graph run a few times never loads numba, and the step at which a kernel switches to
compiled code depends on what ran, not on timing, so a program gives the same results run after
run (the deterministic simulator replays it). Plans that run on cluster tasks keep their tiered
kernels interpreted. A cluster is compiled for read-only arrays, and serves writable ones too
(see `_compile_for`). Arguments of another layout (a transposed view) get a specialization of
their own on first use, which numba also caches, unless they are small (`SMALL_COPY` bytes):
those are copied into the compiled layout. A loop's variant for inputs
of size 1 where its symbols assumed equal sizes (`JitKernel`'s `variant`) is compiled on the
compile thread when a call first needs it, in either mode (that call may run on an event loop);
such calls run the interpreted ops until it is ready.

numba is imported by the first compile, not with this module: the JIT pass registers the
_JitCluster kernel (importing this module) for every plan it looks at, and a plan in which it finds
nothing to compile (a training step of GEMMs, an initializer) would otherwise pay for importing
numba (0.2-0.7 s on these machines) in its first step.
"""
from __future__ import annotations

import atexit
import concurrent.futures
import hashlib
import importlib.util
import logging
import os
import queue
import sys
import tempfile
import threading
import time

import numpy as np

from actorflow import errors
from actorflow.kernels import interrupt
from actorflow.kernels.cpu import aligned
from actorflow.kernels.lazy_numba import import_numba
from actorflow.kernels.registry import get_kernel
from actorflow.scheduler.ir import kernel_attrs

__all__ = ["load_source", "cache_dir", "JitKernel", "compile_stats"]

log = logging.getLogger(__name__)

_LOCK = threading.Lock()
_MODULES: dict = {}                 # source hash -> the kernel dispatcher
_COMPILER = None                    # the compile thread of async mode (one: numba holds the GIL)
# what compiling cost this process: kernels compiled, wall seconds, CPU seconds of the compiling
# thread (on a shared machine the CPU time is the figure that does not depend on the load), and
# calls whose values the compiled code rejected (they ran the interpreted ops instead)
# (and calls whose sizes turned out too big for the explicit loops of a symbolic MatMul: "big")
# (and variants: kernels made for calls with sizes of 1 where a loop's symbols assumed equal sizes)
# (and "tiered": tiered kernels compiled after their interpreted ops ran past TIER_SECONDS)
compile_stats = {"compiled": 0, "seconds": 0.0, "cpu_seconds": 0.0, "rejected": 0, "big": 0, "variants": 0,
                 "tiered": 0}
# Tiered mode's budget: the estimated seconds of interpreted running after which a kernel compiles.
# Compiling costs 0.05-0.3 s of CPU with numba's cache warm, 0.3-2 s cold (benchmarks/compiler.py);
# the interpreted ops are 3-50x slower than the compiled ones on the loops and clusters that compile
# (a while loop's iteration 5-13 us against 0.001-1.4), so after 0.2 s of them a kernel that keeps
# running wins its compile back within a few more seconds, and a graph that runs only briefly
# (a test, a one-off evaluation) never imports numba for it. AF_JIT_TIER_SECONDS overrides it.
# The cost is estimated from what ran, not timed: the same program tiers up at the same step.
TIER_SECONDS = float(os.environ.get("AF_JIT_TIER_SECONDS", "0.2"))
OP_SECONDS = 2e-6           # an interpreted op's run: the kernel call and the interpreter's bookkeeping
ELEMENT_SECONDS = 1e-9      # per element an interpreted op produces (numpy's loop)
_MODES = ("wait", "async", "tiered")
# array arguments that are not C-contiguous, up to this many bytes, are copied into that layout
# instead of getting a specialization of their own (see `__call__`)
SMALL_COPY = 4096
_SIG_LOCK = threading.Lock()       # (see _compile_for)
_NONE = object()
_PENDING = object()           # a variant being compiled


def cache_dir() -> str:
    d = os.environ.get("AF_JIT_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "actorflow", "jit")
    os.makedirs(d, exist_ok=True)
    return d


_HELPERS_HASH: list = []
_BLAS_TABLE: list = []
_NO_BLAS = np.zeros(8, np.int64)        # a loop kernel's BLAS table when it calls no GEMM


def _blas_table():
    """blascall.table(): this process's GEMM functions, a loop kernel's last argument."""
    if not _BLAS_TABLE:
        from actorflow.scheduler.jit import blascall
        _BLAS_TABLE.append(blascall.table())
    return _BLAS_TABLE[0]


_RANDOM_CONTEXT = threading.local()     # .kernels: the random kernels of the loop kernel being run
_MASK32 = 0xFFFFFFFF


def random_kernels() -> dict:
    """{op name: kernel} of the random ops of the loop kernel running on this thread (its
    interpreted ops draw from them), or {}."""
    return getattr(_RANDOM_CONTEXT, "kernels", None) or {}


def _helpers_hash() -> str:
    """A hash of the modules generated code calls into (rt, fastmath32, stopcheck, blascall, philox): numba caches a
    kernel with the code of the functions it calls or inlines, and does not look at their files
    again, so a kernel's cache entry is keyed by them too (a changed helper compiles anew)."""
    if not _HELPERS_HASH:
        h = hashlib.sha256()
        here = os.path.dirname(os.path.abspath(__file__))
        philox = os.path.join(os.path.dirname(os.path.dirname(here)), "kernels", "cpu", "philox.py")
        for path in [os.path.join(here, name) for name in ("rt.py", "fastmath32.py", "stopcheck.py", "blascall.py")] + [philox]:
            with open(path, "rb") as f:
                h.update(f.read())
        _HELPERS_HASH.append(h.hexdigest()[:16])
    return _HELPERS_HASH[0]


def load_source(source: str):
    """The numba dispatcher `kernel` defined by `source`, imported from its file in the cache dir."""
    numba = import_numba()
    h = hashlib.sha256(f"{numba.__version__}|{np.__version__}|{_helpers_hash()}|{source}".encode()).hexdigest()[:24]
    with _LOCK:
        fn = _MODULES.get(h)
        if fn is not None:
            return fn
        d = cache_dir()
        name = f"afjit_{h}"
        path = os.path.join(d, name + ".py")
        if not os.path.exists(path):
            fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                f.write(source)
            os.replace(tmp, path)       # atomic: a concurrent process sees all of it or none
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        fn = _MODULES[h] = mod.kernel
        return fn


def _aligned_empty(n: int, dtype):
    """An empty 1-D array of `n` elements starting on a cache line, however small (see aligned.py)."""
    return aligned.empty(n, dtype, small=0)


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _numba_type(dtype: str, rank: int, readonly: bool = False):
    numba = import_numba()
    t = numba.from_dtype(np.dtype(dtype))
    return t if rank == 0 else numba.types.Array(t, rank, "C", readonly=readonly)


def _compile_for(disp, sig) -> None:
    """Compiles cluster dispatcher `disp` for `sig`, whose arrays are read-only: with compiling
    otherwise disabled, numba runs that code for writable arrays of the same layout too (a safe
    conversion) where it would compile them a signature of their own, so a kernel serves constants
    (read-only buffers: a loss's gradient seed) and computed values with one compile. The kernel
    never writes its arguments."""
    with _SIG_LOCK:
        if tuple(sig) in disp.overloads:
            return
        disp.disable_compile(False)
        try:
            disp.compile(sig)
        finally:
            disp.disable_compile(True)


class _CompileThread:
    """One daemon thread running submitted callables in order (`submit` -> a Future).

    Not a ThreadPoolExecutor: Python joins an executor's threads at exit after they have run every
    item still queued, so a program ending while async compiles are queued would wait for every
    one of them first. At exit (atexit), the queue is dropped (their futures
    cancelled) and only the compile already running is waited for (numba cannot be interrupted,
    and LLVM must not be mid-compile while the interpreter tears down)."""

    def __init__(self):
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._closing = False
        self._thread = threading.Thread(target=self._work, name="af-jit", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def submit(self, fn, *args) -> concurrent.futures.Future:
        f: concurrent.futures.Future = concurrent.futures.Future()
        if self._closing:
            f.cancel()
        else:
            self._queue.put((f, fn, args))
        return f

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            f, fn, args = item
            if self._closing or not f.set_running_or_notify_cancel():
                f.cancel()
                continue
            try:
                f.set_result(fn(*args))
            except BaseException as e:  # noqa: BLE001 - the caller's future reports it
                f.set_exception(e)

    def close(self, timeout: float = 60.0) -> None:
        self._closing = True
        self._queue.put(None)
        self._thread.join(timeout)


def _compiler():
    global _COMPILER
    with _LOCK:
        if _COMPILER is None:
            _COMPILER = _CompileThread()
        return _COMPILER


def wait_for_compiles(timeout: float = 120.0) -> None:
    """Returns when every compile submitted to the compile thread so far has finished (async mode's
    kernels, layout specializations, loop variants); TimeoutError after `timeout` seconds."""
    _compiler().submit(lambda: None).result(timeout)


class JitKernel:
    """A compiled cluster or loop as a kernel: ``fn(*inputs) -> output or tuple``.

    `inputs`: (dtype, rank) per argument; `outputs`: (dtype, rank) per result; `fallback`: the
    interpreted ops (a callable with the same signature) for async mode until compiled, and for
    values the compiled code does not accept. `loop`: the function returns (values, iterations).
    `shapes`: per argument, the static shape the generated code assumes (-1: any size); an
    argument of another shape runs the interpreted ops. A symbol (a size ``-2 - k``, symbolic.py)
    names one size: the dimensions of the arguments that have it must agree, or the interpreted
    ops run. `rows`: per history a loop returns, the static shape of its rows; `shape_only`: the
    histories (indices among them) that the compiled function does not compute, returned
    uninitialized with `rows`' shapes (their readers need nothing but the shape). `gemms`: ((m, n,
    k), limit) of each MatMul with a symbol among its sizes: sizes that make one bigger than `limit`
    multiply-adds (the JIT's limit for a static MatMul) run the interpreted ops (numpy's BLAS).
    `variant`: for a call whose sizes break a symbol's equality where some of them are 1 (numpy
    broadcasting between two unknown dimensions), a function of those places ((argument,
    dimension) pairs) that makes the kernel compiled for them being 1, or None: made on the first
    such call (compiled then in wait mode, on the compile thread in async mode) and kept.
    `flat`: a static loop's `FlatLoop` (flat.py), whose function takes flat buffers and is called
    again while its histories fill up.
    """

    def __init__(self, source: str, inputs, outputs, fallback, mode: str | None = None, what: str = "",
                 loop: bool = False, max_iterations=None, n_vars=None, shapes=(), rows=(), gemms=(),
                 flat=None, variant=None, shape_only=(), random_ops=()):
        self.source = source
        self.flat = flat
        # the GEMM table (blascall.py) when the code calls cblas; else an empty one (loading the BLAS
        # library costs a first step 0.3 s or more)
        code = flat.source if flat is not None else source
        self._blas = None if "blas_gemm(" in code else _NO_BLAS
        self._cap = 16                  # a static loop's history rows to start with: the last run's count
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.fallback = fallback
        self.what = what
        self.loop = loop
        self.interruptible = loop        # checks its step's stop cell (kernels/interrupt.py)
        self.scalar_in = tuple(i for i, (_, r) in enumerate(self.inputs) if r == 0)
        # A loop's variables are copied in (its result is never a caller's buffer); its invariants
        # (the histories of saved values among them) only when not C-contiguous and writable.
        nv = len(self.inputs) if n_vars is None else n_vars
        self.n_vars = nv
        # a loop's histories: each row's static shape (None where not fully known)
        self.rows = tuple(tuple(r) for r in rows)
        self.copy_in = tuple(i for i, (_, r) in enumerate(self.inputs) if r > 0 and i < nv) if loop else ()
        self.check_in = tuple(i for i, (_, r) in enumerate(self.inputs) if r > 0 and i >= nv) if loop else ()
        self.scalar_out = tuple(np.dtype(d).type if r == 0 else None for d, r in self.outputs)
        # The static shapes the generated code assumes (spec.py): (argument, ((dim, size), ...))
        # for each array argument with known sizes, checked before every call.
        self.shapes = tuple((i, tuple((j, d) for j, d in enumerate(st) if d >= 0))
                            for i, st in enumerate(shapes) if self.inputs[i][1] > 0 and any(d >= 0 for d in st))
        # symbol -> the (argument, dimension) places that have it; `same`: those of symbols
        # that several places have, checked equal before every call
        self.symbols: dict = {}
        for i, st in enumerate(shapes):
            for j, d in enumerate(st):
                if d < -1 and self.inputs[i][1] > 0:
                    self.symbols.setdefault(d, []).append((i, j))
        self.same = tuple((p[0], tuple(p[1:])) for p in self.symbols.values() if len(p) > 1)
        self.gemms = tuple((g, limit) for g, limit in gemms if all(d >= -1 or d in self.symbols for d in g))
        self.variant = variant
        # a loop's histories it does not compute (spec.py's `shape_only`, ascending)
        self.shape_only = tuple(sorted(shape_only))
        self._variants: dict = {}       # places of size 1 -> their kernel, or None
        self._variant_lock = threading.Lock()
        # Array arguments of another layout than the eager signature's (C-contiguous):
        # their specialization compiles on the compile thread while the interpreted ops run.
        self.array_in = () if loop else tuple(i for i, (_, r) in enumerate(self.inputs) if r > 0)
        self._ready_keys = {tuple(True for _ in self.array_in)}   # C-contiguous (of any writability)
        self._pending: set = set()
        # a loop's random ops (graph ops), whose session kernels `bind_random` gives (their streams
        # are the compiled loop's `rs` arguments, and what its interpreted ops draw from)
        self.random_ops = tuple(random_ops)
        self._random = None             # {op name: its session's kernel}
        self.fn = None
        self.compile_seconds = None
        self.error = None
        mode = mode or os.environ.get("AF_JIT_COMPILE") or "wait"
        if mode not in _MODES:
            raise ValueError(f"JIT compile mode must be one of {_MODES}, got {mode!r}")
        self.mode = mode
        self._spent = 0.0               # tiered: the estimated seconds its interpreted ops have run
        self._tiered_up = mode != "tiered"
        self._future = None             # async mode's compile on the compile thread
        if mode == "wait":
            self._compile()
        elif mode == "async":
            self._future = _compiler().submit(self._compile)

    def _compile(self):
        t0 = time.perf_counter()
        c0 = time.thread_time()
        try:
            disp = load_source(self.source)
            if self.array_in:               # a cluster (loops write their variables: writable arrays)
                _compile_for(disp, tuple(_numba_type(d, r, readonly=True) for d, r in self.inputs))
            elif self.flat:                 # (its signature ends with the stop cell)
                disp.compile(tuple(_numba_type(d, r) for d, r in self.flat.sig))
            else:                           # a loop's arguments end with its stop cell and BLAS table
                stop = (("uint64", 1),) * len(self.random_ops) + (("int64", 1), ("int64", 1)) if self.loop else ()
                disp.compile(tuple(_numba_type(d, r) for d, r in self.inputs + stop))
        except Exception as e:  # noqa: BLE001 - a cluster numba cannot compile runs interpreted
            log.warning("JIT: cannot compile %s (%s: %s); it runs interpreted", self.what, type(e).__name__, e)
            self.error = e
            return
        self.compile_seconds = time.perf_counter() - t0
        with _LOCK:
            compile_stats["compiled"] += 1
            compile_stats["seconds"] += self.compile_seconds
            compile_stats["cpu_seconds"] += time.thread_time() - c0
        self.fn = disp

    def bind_random(self, kernels) -> None:
        """The session's kernels of this loop's random ops, in `random_ops`' order (actors/executable.py)."""
        self._random = {op.name: k for op, k in zip(self.random_ops, kernels)}

    def __call__(self, *args):
        if not self.random_ops:
            return self._call(*args)
        ctx = _RANDOM_CONTEXT
        outer = getattr(ctx, "kernels", None)
        if self._random is None:        # a kernel no session bound (a variant's outer kernel binds)
            self._random = outer if outer is not None else {
                op.name: get_kernel(op.type, "CPU").factory(kernel_attrs(op.attrs)) for op in self.random_ops}
        ctx.kernels = self._random
        try:
            return self._call(*args)
        finally:
            ctx.kernels = outer

    def _call(self, *args):
        fn = self.fn
        if fn is None:
            if not self._tiered_up:
                return self._tiered(args)
            return self.fallback(*args)
        for i, dims in self.shapes:
            shape = args[i].shape
            for j, d in dims:
                if shape[j] != d:
                    compile_stats["rejected"] += 1
                    return self.fallback(*args)
        for (i, j), others in self.same:
            d = args[i].shape[j]
            for k, m in others:
                if args[k].shape[m] != d:
                    return self._other_sizes(args)
        for dims, limit in self.gemms:
            size = 1
            for d in dims:
                if d < -1:
                    i, j = self.symbols[d][0]
                    d = args[i].shape[j]
                size *= max(d, 1)
            if size > limit:
                compile_stats["big"] += 1
                return self.fallback(*args)
        if self.array_in:
            key = tuple(args[i].flags.c_contiguous for i in self.array_in)
            if key not in self._ready_keys:
                odd = [i for i, k in zip(self.array_in, key) if not k]
                if any(args[i].nbytes > SMALL_COPY for i in odd):
                    self._specialize(key, args)
                    return self.fallback(*args)
                # a small strided argument is copied rather than compiled for: a layout costs a
                # whole compile (0.5 s for a loss kernel), a copy of a few elements a microsecond
                args = list(args)
                for i in odd:
                    args[i] = np.array(args[i], order="C")
        try:
            return self._run(fn, args)
        except errors.OpError:
            raise                       # a loop its step stopped (kernels/interrupt.py)
        except Exception:  # noqa: BLE001 - bad values: the interpreted ops raise the error naming the op
            compile_stats["rejected"] += 1
            return self.fallback(*args)

    def _blas_arg(self):
        """A loop kernel's last argument: the GEMM table (blascall.py), loaded on its first use."""
        t = self._blas
        if t is None:
            t = self._blas = _blas_table()
        return t

    def _tiered(self, args):
        """Tiered mode before compiling: the interpreted ops, their cost estimated from what ran
        (the interpreter's count of op runs and of the elements they produced)."""
        count = getattr(self.fallback, "ops_run", None)
        before = tuple(count) if count is not None else (0, 0)
        try:
            return self.fallback(*args)
        finally:
            if count is not None:
                self._spent += (count[0] - before[0]) * OP_SECONDS + (count[1] - before[1]) * ELEMENT_SECONDS

    def tier_due(self) -> bool:
        """Tiered mode: whether the interpreted ops have run past TIER_SECONDS (estimated) and the
        kernel should compile before the next step."""
        return not self._tiered_up and self._spent >= TIER_SECONDS

    def tier_up(self) -> None:
        """Compiles a tiered kernel now, in this thread (the session's, never an event loop's);
        calls from then on run the compiled code (or, when numba cannot compile it, the
        interpreted ops, as in the other modes)."""
        with self._variant_lock:        # (a per-kernel lock; _compile takes _LOCK itself)
            if self._tiered_up:
                return
            with _LOCK:
                compile_stats["tiered"] += 1
            self._compile()
            self._tiered_up = True

    def _other_sizes(self, args):
        """A call whose sizes differ where a symbol says they are equal: the variant for the
        places among them of size 1 (they broadcast), else the interpreted ops. A variant is
        compiled on the compile thread (the call may be running on an event loop); calls that
        need it run the interpreted ops until it is ready."""
        if self.variant is not None:
            places = frozenset((i, j) for ps in self.symbols.values() if len({args[i].shape[j] for i, j in ps}) > 1
                               for i, j in ps if args[i].shape[j] == 1)
            if places:
                k = self._variants.get(places, _NONE)
                if k is _NONE:
                    with self._variant_lock:
                        if places not in self._variants:
                            self._variants[places] = _PENDING
                            _compiler().submit(self._make_variant, places)
                    return self.fallback(*args)
                if k is _PENDING:
                    return self.fallback(*args)
                if k is not None:
                    return k(*args)
        compile_stats["rejected"] += 1
        return self.fallback(*args)

    def _run_drawing(self, fn, args, stop):
        """The compiled loop with its random ops' streams: each stream's key and counter go in as a
        state array, and its counter comes back moved on by what the iterations drew. The streams
        are held meanwhile (another step's run of the op draws after this loop)."""
        streams = [self._random[op.name].stream for op in self.random_ops]
        held = sorted(set(streams), key=id)
        for st in held:
            st._lock.acquire()
        try:
            states = [np.array([st.key & _MASK32, (st.key >> 32) & _MASK32] +
                               [(st.counter >> (32 * i)) & _MASK32 for i in range(4)], np.uint64) for st in streams]
            out, it = fn(*args, *states, stop, self._blas_arg())
            for st, state in zip(streams, states):
                st.counter = sum(int(state[2 + i]) << (32 * i) for i in range(4))
        finally:
            for st in reversed(held):
                st._lock.release()
        return out, it

    def _make_variant(self, places) -> None:
        try:
            k = self.variant(places)
        except Exception as e:  # noqa: BLE001 - those calls keep running the interpreted ops
            log.warning("JIT: cannot compile %s for sizes of 1 at %s: %s", self.what, sorted(places), e)
            k = None
        if k is not None:
            compile_stats["variants"] += 1
        self._variants[places] = k

    def _unsaved(self, out: list, it: int, args) -> list:
        """`out` (the loop variables and the histories computed) with the histories read for
        their shape only inserted: uninitialized (malloc'd, never touched), of `it` rows."""
        for k in self.shape_only:
            d = self.outputs[self.n_vars + k][0]
            out.insert(self.n_vars + k, np.empty((it,) + self._row_shape(self.rows[k], args), d))
        return out

    def _run_flat(self, fn, args):
        """A static loop: its arrays flattened (the loop variables copied: they are updated in
        place), its histories `cap` rows long, doubled and resumed while the loop goes on."""
        p = self.flat
        nv = p.n_vars
        call = []
        for i, a in enumerate(args):
            if i in self.scalar_in:
                call.append(a[()])
            elif i < nv:
                v = _aligned_empty(a.size, p.sig[i][0])
                v[:] = a.reshape(-1)
                call.append(v)
            else:
                if not (a.flags.c_contiguous and a.flags.writeable):
                    a = np.array(a, order="C")
                call.append(a.reshape(-1))
        cap = self._cap
        hist = [_aligned_empty(cap * _size(row), d) for d, row in p.rows]
        work = [_aligned_empty(n, d) for d, n in p.work]
        scalars = [k for k in range(nv) if k in self.scalar_in]
        stop = interrupt.current()
        it = 0
        while True:
            res = fn(*call, *hist, cap, it, *work, stop, self._blas_arg())
            interrupt.raise_if_stopped(stop, self.what)
            it = res[0]
            for k, v in zip(scalars, res[2:]):
                call[k] = self.scalar_out[k](v)     # its own dtype: a Python int would compile anew
            if res[1]:
                break
            cap *= 2
            for j, h in enumerate(hist):
                g = _aligned_empty(cap * (h.size // (cap // 2)), h.dtype)
                g[:h.size] = h
                hist[j] = g
        if p.rows:
            self._cap = max(16, it)
        out = [call[k] if not p.shapes[k] else call[k].reshape(p.shapes[k]) for k in range(nv)]
        out += [h[:it * _size(row)].reshape((it,) + row) for h, (_, row) in zip(hist, p.rows)]
        so = self.scalar_out
        if len(so) == 1:
            t = so[0]
            return out[0] if t is None else t(out[0])
        return tuple(v if t is None else t(v) for v, t in zip(out, so))

    def _row_shape(self, row, args) -> tuple:
        """A history row's shape: its static sizes, a symbol's size in the arguments, else 0."""
        out = []
        for d in row:
            if d < -1 and d in self.symbols:
                i, j = self.symbols[d][0]
                d = args[i].shape[j]
            out.append(max(d, 0))
        return tuple(out)

    def _specialize(self, key, args) -> None:
        """Compiles (on the compile thread, never the caller's) for the layout of `args`."""
        with _LOCK:
            if key in self._pending:
                return
            self._pending.add(key)
        numba = import_numba()
        types = tuple(numba.typeof(a[()] if i in self.scalar_in else a) for i, a in enumerate(args))
        types = tuple(t.copy(readonly=True) if isinstance(t, numba.types.Array) else t for t in types)

        def work():
            try:
                _compile_for(self.fn, types)
            except Exception as e:  # noqa: BLE001 - that layout keeps running interpreted
                log.warning("JIT: cannot compile %s for %s: %s", self.what, types, e)
                return
            self._ready_keys = self._ready_keys | {key}
        _compiler().submit(work)

    def _run(self, fn, args):
        if self.flat is not None:
            return self._run_flat(fn, args)
        if self.scalar_in:
            args = list(args)
            for i in self.scalar_in:
                args[i] = args[i][()]
        if self.copy_in or self.check_in:
            if not self.scalar_in:
                args = list(args)
            for i in self.copy_in:      # a loop variable is updated in place: never a caller's buffer
                args[i] = np.array(args[i], order="C")
            for i in self.check_in:
                a = args[i]
                if not (a.flags.c_contiguous and a.flags.writeable):
                    args[i] = np.array(a, order="C")
        so = self.scalar_out
        if not self.loop:
            out = fn(*args)
        else:
            stop = interrupt.current()
            if self.random_ops:
                out, it = self._run_drawing(fn, args, stop)
            else:
                out, it = fn(*args, stop, self._blas_arg())
            interrupt.raise_if_stopped(stop, self.what)
            if self.shape_only:
                out = tuple(self._unsaved(list(out), it, args))
            if self.rows and not out[self.n_vars].shape[0]:
                # no iteration ran: the histories have their rows' static shape (as the
                # interpreted loop's), not the placeholder shape they started with
                out = out[:self.n_vars] + tuple(
                    np.empty((0,) + self._row_shape(row, args), h.dtype) for h, row in zip(out[self.n_vars:], self.rows))
            if len(so) == 1:
                out = out[0]
        if len(so) == 1:
            t = so[0]
            return out if t is None else t(out)
        return tuple(v if t is None else t(v) for v, t in zip(out, so))
