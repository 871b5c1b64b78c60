"""GEMM for the CPU kernels: Intel MKL's sequential cblas_?gemm when it is installed, else numpy.

numpy's wheels bring OpenBLAS. On the x86 machines we run on, MKL's single-threaded SGEMM is 20-35%
faster for the shapes of a training step (most of all the transposed-operand products of the
backward pass), which is what PyTorch gets by shipping MKL. MKL is optional (`pip install
actorflow[mkl]`); without it every product goes through `np.matmul` and nothing else changes.

MKL runs sequential: the runtime already parallelises, by running independent kernels at once and
splitting a lone big GEMM into row blocks over its thread pool, so BLAS threads would only
oversubscribe the cores. The call goes through ctypes, which releases the GIL.

`AF_BLAS=numpy` forces numpy; `AF_BLAS=mkl` makes a missing MKL an error instead of a fallback.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import site
import sys
import threading

import numpy as np

__all__ = ["matmul", "backend"]

log = logging.getLogger(__name__)

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_MKL_THREADING_SEQUENTIAL = 1
_lock = threading.Lock()
_gemm: dict | None = None           # dtype -> cblas function, once loaded; {} when MKL is not used
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


def _load() -> dict:
    choice = os.environ.get("AF_BLAS", "auto").lower()
    if choice not in ("auto", "mkl", "numpy"):
        raise ValueError(f"AF_BLAS must be auto, mkl or numpy, got {choice!r}")
    if choice == "numpy":
        return {}
    for path in _candidates():
        if not os.path.exists(path) and os.path.sep in path:
            continue
        try:
            lib = ctypes.CDLL(path)
            # Before any other MKL call: one thread per call, the runtime's threads do the rest.
            lib.MKL_Set_Threading_Layer(ctypes.c_int(_MKL_THREADING_SEQUENTIAL))
        except (OSError, AttributeError) as e:
            log.debug("MKL at %s not usable: %s", path, e)
            continue
        out = {}
        for dt, name, scalar in ((np.dtype(np.float32), "cblas_sgemm", ctypes.c_float),
                                 (np.dtype(np.float64), "cblas_dgemm", ctypes.c_double)):
            f = getattr(lib, name)
            i, p = ctypes.c_int, ctypes.c_void_p
            f.argtypes = [i, i, i, i, i, i, scalar, p, i, p, i, scalar, p, i]
            f.restype = None
            out[dt] = f
        log.info("GEMM through MKL (%s)", path)
        return out
    if choice == "mkl":
        raise RuntimeError("AF_BLAS=mkl but MKL's libmkl_rt was not found; install it with "
                           "`pip install actorflow[mkl]` (or `pip install mkl`)")
    return {}


def _functions() -> dict:
    global _gemm
    if _gemm is None:
        with _lock:
            if _gemm is None:
                _gemm = _load()
    return _gemm


def backend() -> str:
    """"mkl" or "numpy": what `matmul` uses for float32/float64 matrices."""
    return "mkl" if _functions() else "numpy"


def _operand(x):
    """(transpose flag, leading dimension) under which MKL reads the 2-D operand `x` in place, or None.

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
        out = np.empty((m, n), dt)          # fresh: rows contiguous, shares nothing
        ldc = n
    else:
        oc = _operand(out) if out.dtype == dt and out.shape == (m, n) and out.flags.writeable else None
        if (oc is None or oc[0] != _NO_TRANS or np.may_share_memory(out, a)
                or np.may_share_memory(out, b)):
            return _numpy_matmul(a, b, out, alpha, beta)
        ldc = oc[1]
    (ta, lda), (tb, ldb) = oa, ob
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
