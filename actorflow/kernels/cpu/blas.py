"""GEMM for the CPU kernels: cblas_?gemm called through ctypes, from the library that is fastest on
this CPU for the product at hand, else numpy.

- Intel MKL's sequential cblas_?gemm when it is installed (`pip install actorflow[mkl]`) on Intel
  CPUs, which is what PyTorch gets by shipping MKL.
- On other CPUs with both installed, the faster of the two here: the first GEMM times one
  single-threaded product of a training step's shape (256x512 @ 512x512) through each, by the
  thread's CPU time, best of three, and keeps the faster. Which one wins depends on the CPU and on
  how OpenBLAS is told to dispatch: on an AMD EPYC whose OpenBLAS runs its AVX-512 (SkylakeX)
  kernels, OpenBLAS did 226 GFLOP/s a core against MKL's 105 (MKL takes its AVX2 path off Intel);
  with `OPENBLAS_CORETYPE=Haswell` in the environment OpenBLAS still did 123; on an earlier Zen 4
  machine MKL was the faster by 5-20%. Where MKL wins, narrow products (fewer than 32 output
  columns: a layer of 10 logits and its weight gradient) still go to OpenBLAS, whose kernels for
  them ran 3-4x faster than MKL's there (256x1024x10: 452 us against 123 us).
- Without MKL, every product goes to the OpenBLAS that numpy's wheels bundle, through its own cblas
  symbol; without either, to `np.matmul`.
- On CPUs with AVX-512, float32 products go to actorflow's own SGEMM (kernels/cpu/sgemm.py) where it
  measures faster than the library chosen above (the same 256x512x512 timing, on the first GEMM).
  OpenBLAS picks its kernels by the CPU it detects unless `OPENBLAS_CORETYPE` names one; these
  machines (AMD EPYC, Zen 5) set Haswell, which gives AVX2 kernels at 127 GFLOP/s a core where
  AVX-512 ones reach 225-246, as TensorFlow's oneDNN does; actorflow's kernel reached 200-240 on the
  MLP's and LeNet's products. Products it does not take go to the library (backend
  "actorflow+LIBRARY"): fewer than 32 columns or 4 rows (an edge tile of its 14 x 32 micro-kernel
  would do most of the work for nothing), under 2^20 multiply-adds (its packing buffers cost more
  than such a product: 64^3 took 7.6 us against OpenBLAS's 5.5), and float64.

benchmarks/blas_backends.py measures the libraries against each other on the machine it runs on.
Calling cblas directly, rather than `np.matmul`, reads transposed views and row blocks in place and
lets a product accumulate into its output (``beta=1``) inside the GEMM.

BLAS runs single-threaded: the runtime already parallelises, by running independent kernels at
once and splitting a lone big GEMM into row blocks over its thread pool, so BLAS threads would only
oversubscribe the cores (actors/dispatcher.py limits OpenBLAS's threads; MKL is loaded sequential).
ctypes releases the GIL during the call.

`AF_BLAS=mkl|openblas|numpy` uses that one alone (a named library that is missing is an error,
not a fallback); `AF_BLAS=actorflow` uses actorflow's SGEMM for float32 (on any x86-64 CPU; without
AVX-512 LLVM splits its vectors in two, at half the rate) beside the library auto would choose;
`AF_BLAS=auto` (the default) chooses as above.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import logging
import os
import platform
import site
import sys
import threading

import numpy as np

from actorflow.kernels.cpu import aligned as _aligned

__all__ = ["matmul", "backend", "cblas_gemm"]

log = logging.getLogger(__name__)

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_F32 = np.dtype(np.float32)
_MKL_THREADING_SEQUENTIAL = 1
_lock = threading.Lock()
_gemm: dict | None = None           # dtype -> cblas function, once loaded; {} when numpy does it
_narrow: dict = {}                  # dtype -> cblas function for products of fewer than _NARROW columns
_backend = "numpy"                  # what backend() reports: "mkl", "openblas", "mkl+openblas" or "numpy",
                                    # or any of the first three after "actorflow+"
_NARROW = 32
_weigh = False                      # actorflow's SGEMM is still to be weighed against the library (_settle)
_FEW_ROWS = 4                       # products of fewer rows go to the narrow library too,
_SMALL_FLOPS = 1 << 20              # and products of fewer multiply-adds (about 100^3)
_MIN_FLOPS = 1 << 18                # small products (64^3): numpy's call costs less than ctypes'


def _candidates():
    names = ("libmkl_rt.so.3", "libmkl_rt.so.2", "libmkl_rt.so", "libmkl_rt.dylib", "mkl_rt.2.dll", "mkl_rt.dll")
    user_base = getattr(site, "USER_BASE", None) or ""      # `pip install --user` puts data files here
    for prefix in dict.fromkeys([sys.prefix, sys.base_prefix, os.environ.get("CONDA_PREFIX", ""), user_base]):
        if prefix:
            for sub in ("lib", "Library/bin"):
                for n in names:
                    yield os.path.join(prefix, sub, n)
    found = ctypes.util.find_library("mkl_rt")
    if found:
        yield found


def _cblas_functions(lib, prefix: str, int_type) -> dict:
    """{dtype: cblas_?gemm of `lib`}, with argument types set (`prefix` + "sgemm" + suffix names)."""
    out = {}
    for dt, letter, scalar in ((np.dtype(np.float32), "s", ctypes.c_float), (np.dtype(np.float64), "d", ctypes.c_double)):
        f = getattr(lib, prefix.format(letter))
        i, p = int_type, ctypes.c_void_p
        # order, transa, transb are C enums (int) in every cblas; m, n, k and the lds are blasint.
        f.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, i, i, i, scalar, p, i, p, i, scalar, p, i]
        f.restype = None
        out[dt] = f
    return out


def _load_mkl() -> dict | None:
    for path in _candidates():
        if not os.path.exists(path) and os.path.sep in path:
            continue
        try:
            lib = ctypes.CDLL(path)
            # Before any other MKL call: one thread per call, the runtime's threads do the rest.
            lib.MKL_Set_Threading_Layer(ctypes.c_int(_MKL_THREADING_SEQUENTIAL))
            out = _cblas_functions(lib, "cblas_{}gemm", ctypes.c_int)
        except (OSError, AttributeError) as e:
            log.debug("MKL at %s not usable: %s", path, e)
            continue
        log.info("GEMM through MKL (%s)", path)
        return out
    return None


# numpy's wheels bundle scipy-openblas: ILP64 (64-bit ints, symbols suffixed 64_) in numpy 2, LP64
# before; a system OpenBLAS that numpy links exports the plain names.
_OPENBLAS_SYMBOLS = (("scipy_cblas_{}gemm64_", ctypes.c_int64), ("cblas_{}gemm64_", ctypes.c_int64),
                     ("scipy_cblas_{}gemm", ctypes.c_int), ("cblas_{}gemm", ctypes.c_int))


def _numpy_openblas_paths():
    """Paths of the OpenBLAS that numpy uses: its wheel's bundled copy, or what threadpoolctl finds
    loaded in this process (numpy built against a system OpenBLAS)."""
    here = os.path.dirname(np.__file__)
    paths = sorted(glob.glob(os.path.join(here, os.pardir, "numpy.libs", "*openblas*")))     # Linux wheels
    paths += sorted(glob.glob(os.path.join(here, ".dylibs", "*openblas*")))                  # macOS wheels
    try:
        from threadpoolctl import threadpool_info
        paths += [i["filepath"] for i in threadpool_info() if i.get("internal_api") == "openblas"]
    except Exception:  # noqa: BLE001 - threadpoolctl is optional here
        pass
    return list(dict.fromkeys(paths))


def _load_openblas() -> dict | None:
    for path in _numpy_openblas_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            log.debug("OpenBLAS at %s not usable: %s", path, e)
            continue
        for prefix, int_type in _OPENBLAS_SYMBOLS:
            try:
                out = _cblas_functions(lib, prefix, int_type)
            except AttributeError:
                continue
            log.info("GEMM through OpenBLAS (%s, %s)", path, prefix.format("s"))
            return out
    return None


def cpu_vendor() -> str:
    """The CPU's vendor string ("GenuineIntel", "AuthenticAMD", ...), or "" when unknown."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    proc = platform.processor()
    return "GenuineIntel" if "Intel" in proc else proc


def _load() -> tuple[str, dict, dict]:
    """(backend name, {dtype: cblas gemm}, {dtype: cblas gemm for narrow products}) as AF_BLAS and
    the CPU choose (see the module docstring)."""
    return _with_own(*_load_libraries())


def _load_libraries() -> tuple[str, dict, dict, bool]:
    """`_load`'s choice of library, without actorflow's SGEMM, and whether that is still to be
    weighed (`_with_own`): the libraries load without importing numba."""
    choice = os.environ.get("AF_BLAS", "auto").lower()
    if choice not in ("auto", "mkl", "openblas", "numpy", "actorflow"):
        raise ValueError(f"AF_BLAS must be auto, mkl, openblas, numpy or actorflow, got {choice!r}")
    if choice == "numpy":
        return "numpy", {}, {}, False
    name, gemm, narrow = _load_library("auto" if choice == "actorflow" else choice)
    return name, gemm, narrow, choice == "actorflow" or (choice == "auto" and bool(gemm) and avx512())


def _with_own(name: str, gemm: dict, narrow: dict, weigh: bool) -> tuple[str, dict, dict]:
    """The choice of `_load_libraries`, with float32 products through actorflow's SGEMM where AF_BLAS
    says so or (`weigh`, auto) it measures faster than the library."""
    if not weigh:
        return name, gemm, narrow
    forced = os.environ.get("AF_BLAS", "auto").lower() == "actorflow"
    own = _load_own(required=forced)
    if own is None or not (forced or _fastest({"actorflow": own, name: gemm[_F32]}) == "actorflow"):
        return name, gemm, narrow
    narrow = dict(narrow)
    if _F32 in gemm:
        narrow[_F32] = narrow.get(_F32) or gemm[_F32]
    return f"actorflow+{name}", {**gemm, _F32: own}, narrow


def _load_library(choice: str) -> tuple[str, dict, dict]:
    mkl = _load_mkl() if choice in ("auto", "mkl") else None
    if choice == "mkl":
        if mkl is None:
            raise RuntimeError("AF_BLAS=mkl but MKL's libmkl_rt was not found; install it with "
                               "`pip install actorflow[mkl]` (or `pip install mkl`)")
        return "mkl", mkl, {}
    openblas = None if mkl is not None and cpu_vendor() == "GenuineIntel" else _load_openblas()
    if choice == "openblas":
        if openblas is None:
            raise RuntimeError("AF_BLAS=openblas but numpy's OpenBLAS was not found (numpy built against "
                               "another BLAS?)")
        return "openblas", openblas, {}
    if mkl is not None and openblas is not None:
        if _faster(mkl, openblas) == "openblas":
            return "openblas", openblas, {}
        return "mkl+openblas", mkl, openblas
    if mkl is not None:
        return "mkl", mkl, {}
    if openblas is not None:
        return "openblas", openblas, {}
    return "numpy", {}, {}


def avx512() -> bool:
    """Whether this CPU has AVX-512 (F), as LLVM sees it (numba's code generator targets the host)."""
    try:
        from llvmlite import binding as llvm
        return bool(llvm.get_host_cpu_features().get("avx512f", False))
    except Exception:  # noqa: BLE001 - llvmlite missing or the query unsupported: assume not
        return False


def _load_own(required: bool = False):
    """actorflow's SGEMM (kernels/cpu/sgemm.py), compiled or loaded from numba's cache, or None when
    numba cannot build it (an error with `required`)."""
    try:
        from actorflow.kernels.lazy_numba import import_numba
        import_numba()          # under its lock: another thread may be importing numba
        from actorflow.kernels.cpu import sgemm
        return sgemm.sgemm()
    except Exception as e:  # noqa: BLE001 - a kernel that does not build leaves the libraries to it
        if required:
            raise RuntimeError(f"AF_BLAS=actorflow but actorflow's SGEMM did not build: {e}") from e
        log.warning("actorflow's SGEMM did not build (%s); GEMMs go through the BLAS library", e)
        return None


def _faster(mkl: dict, openblas: dict) -> str:
    """"mkl" or "openblas": whose single-threaded SGEMM is faster here (see `_fastest`)."""
    return _fastest({"mkl": mkl[_F32], "openblas": openblas[_F32]})


def _fastest(fns: dict) -> str:
    """The name of the fastest of `fns` ({name: cblas sgemm}) here on 256x512 @ 512x512, by the
    calling thread's CPU time (which other processes disturb little), best of three each."""
    import time
    rng = np.random.RandomState(0)
    a, b = rng.rand(256, 512).astype(np.float32), rng.rand(512, 512).astype(np.float32)
    c = np.empty((256, 512), np.float32)
    best = dict.fromkeys(fns, float("inf"))
    try:
        from threadpoolctl import threadpool_limits
        limit = threadpool_limits(limits=1, user_api="blas")
    except Exception:  # noqa: BLE001 - threadpoolctl missing or BLAS unknown: time as it is
        limit = None
    try:
        for _ in range(3):
            for name, f in fns.items():
                t = time.thread_time()
                f(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, 256, 512, 512, 1.0, a.ctypes.data, 512, b.ctypes.data, 512, 0.0,
                  c.ctypes.data, 512)
                best[name] = min(best[name], time.thread_time() - t)
    finally:
        if limit is not None:
            limit.restore_original_limits()
    choice = min(best, key=best.get)
    log.info("GEMM: %s is the fastest here (256x512x512 on one thread: %s)", choice,
             ", ".join(f"{n} {t * 1e6:.0f} us" for n, t in best.items()))
    return choice


def _functions() -> dict:
    """{dtype: cblas gemm} of the library (`preload`); actorflow's SGEMM is weighed later (`_settle`)."""
    global _gemm, _narrow, _backend, _weigh
    if _gemm is None:
        with _lock:
            if _gemm is None:
                _backend, gemm, _narrow, _weigh = _load_libraries()
                _gemm = gemm
    return _gemm


def _settle() -> dict:
    """`_functions()`, with actorflow's SGEMM weighed against the library where it is to be (this
    imports numba and compiles the kernel or loads it from numba's cache): on the first float32
    product that it could take, not when the runtime starts, so that a process without one never
    imports numba for it."""
    global _gemm, _narrow, _backend, _weigh
    _functions()
    if _weigh:
        with _lock:
            if _weigh:
                _backend, _gemm, _narrow = _with_own(_backend, _gemm, _narrow, True)
                _weigh = False
    return _gemm


def preload() -> None:
    """Loads the BLAS library (MKL's takes ~0.4 s), not yet actorflow's SGEMM: what the runtime does
    in a thread when it starts, beside the graph building."""
    _functions()


def wide(m, n, k) -> bool:
    """Whether an m x k @ k x n product goes to the main library (actorflow's SGEMM for float32 where it
    was chosen) rather than to the narrow one: not fewer than _NARROW columns or _FEW_ROWS rows, nor
    under _SMALL_FLOPS multiply-adds. A dimension of None (not known yet) counts as large."""
    if (n is not None and n < _NARROW) or (m is not None and m < _FEW_ROWS):
        return False
    return None in (m, n, k) or m * n * k >= _SMALL_FLOPS


def settled() -> bool:
    """Whether the GEMM functions are chosen for good (the library loaded, actorflow's SGEMM weighed
    or not to be), without loading anything."""
    return _gemm is not None and not _weigh


def prepare() -> None:
    """Weighs actorflow's SGEMM now (see `_settle`): for a session whose graph has float32 products it
    may take, so that the numba runtime's start (0.2-0.3 s, once a process) comes with the session's
    setup instead of its first product. Nothing to do where it was weighed, or is not to be. In the
    caller's thread: numba imported in a thread of its own raced a program's own imports (a notebook
    run stopped on 'partially initialized module numba.core.types': a numba submodule imported
    directly in one thread while another imported numba deadlocks on the two import locks, which
    Python breaks by handing one side the half-made module)."""
    _settle()


def backend() -> str:
    """What `matmul` uses for float32/float64 matrices: "mkl", "openblas", "numpy", or
    "mkl+openblas" (MKL, and OpenBLAS for products of fewer than 32 columns: where both are
    installed on a CPU that is not Intel's and MKL measured the faster); "actorflow+" before one of
    the first three when float32 products go to actorflow's SGEMM (see the module docstring)."""
    _settle()
    return _backend


def cblas_gemm(dtype):
    """The raw cblas_?gemm for `dtype` (row-major; pointers as integer addresses), or None when
    numpy does the GEMMs. For kernels that issue many small products of buffers they own and check
    themselves (Winograd convolution: 36 a block), where `matmul`'s per-call checks would cost more
    than the product. actorflow's SGEMM for float32 where it measured the fastest (LeNet's Winograd
    products, [128, 32] @ [32, 64] and the like: 6.7 us against OpenBLAS's 8.6 under
    OPENBLAS_CORETYPE=Haswell on a Zen 5 core, and the LeNet step 17.5 ms against 19.3-20.6); else
    numpy's OpenBLAS when it is loaded (on those products 1.3-1.4x faster than MKL on an AMD EPYC Zen 4)."""
    dt = np.dtype(dtype)
    if dt == _F32:
        _settle()
        if _backend.startswith("actorflow+"):
            return _gemm[dt]
    _functions()
    return _narrow.get(dt) or _gemm.get(dt)


def _operand(x):
    """(transpose flag, leading dimension) under which cblas reads the 2-D operand `x` in place, or None.

    Row-major NoTrans reads element (i, j) at i*ld + j, Trans at j*ld + i; a dimension of size 1
    may have any stride.
    """
    r, c = x.shape
    isz = x.itemsize
    s0, s1 = x.strides
    if (c == 1 or s1 == isz) and (r == 1 or (s0 > 0 and s0 % isz == 0 and s0 // isz >= c)):
        return _NO_TRANS, (s0 // isz if r > 1 else max(c, 1))
    if (r == 1 or s0 == isz) and (c == 1 or (s1 > 0 and s1 % isz == 0 and s1 // isz >= r)):
        return _TRANS, (s1 // isz if c > 1 else max(r, 1))
    return None


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None, alpha: float = 1.0,
           beta: float = 0.0) -> np.ndarray:
    """``alpha * (a @ b) + beta * out`` for 2-D matrices, into `out` when given (C-contiguous rows,
    the right shape and dtype); `out` is required when `beta` is not 0.

    Operands may be transposed views or row blocks of larger arrays: they are read in place. With
    ``beta=1`` the product accumulates into `out` inside the GEMM (``var -= lr * x.T @ d`` is one
    pass over `var`), which is what the fused SGD update uses.
    """
    dt = a.dtype
    f = _functions().get(dt)
    if (f is None or a.ndim != 2 or b.ndim != 2 or b.dtype != dt
            or (out is not None and beta != 0.0 and out.dtype != dt)):
        return _numpy_matmul(a, b, out, alpha, beta)
    m, k = a.shape
    n = b.shape[1]
    if b.shape[0] != k or m * n * k < _MIN_FLOPS:
        return _numpy_matmul(a, b, out, alpha, beta)
    oa, ob = _operand(a), _operand(b)
    if oa is None or ob is None:
        return _numpy_matmul(a, b, out, alpha, beta)
    if out is None:
        out = _aligned.empty((m, n), dt)    # fresh: rows contiguous, shares nothing, on a cache line
        ldc = n
    else:
        oc = _operand(out) if out.dtype == dt and out.shape == (m, n) and out.flags.writeable else None
        if (oc is None or oc[0] != _NO_TRANS or np.may_share_memory(out, a)
                or np.may_share_memory(out, b)):
            return _numpy_matmul(a, b, out, alpha, beta)
        ldc = oc[1]
    (ta, lda), (tb, ldb) = oa, ob
    if not wide(m, n, k):
        f = _narrow.get(dt, f)
    elif _weigh and dt == _F32:
        f = _settle()[dt]
    f(_ROW_MAJOR, ta, tb, m, n, k, alpha, a.ctypes.data, lda, b.ctypes.data, ldb, beta, out.ctypes.data, ldc)
    return out


def _numpy_matmul(a, b, out, alpha, beta):
    if beta == 0.0:
        out = np.matmul(a, b, out=out)
        if alpha != 1.0:
            out *= out.dtype.type(alpha)
        return out
    if out is None:
        raise ValueError("matmul: beta != 0 needs an output to accumulate into")
    prod = np.matmul(a, b)
    if alpha != 1.0:
        prod *= prod.dtype.type(alpha)
    if beta != 1.0:
        out *= out.dtype.type(beta)
    out += prod
    return out
