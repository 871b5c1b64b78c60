"""cblas ?gemm called from generated loops (a recurrent cell's product of a few hundred thousand
multiply-adds and up, which the explicit loops of rt.gemm and flat.py run at a fraction of BLAS's
rate).

The library is the one kernels/cpu/blas.py calls for the interpreted MatMul, chosen the same way
(the narrow library, where there is one, for products blas.matmul gives it: fewer than 32 output
columns or 4 rows, or under 2^20 multiply-adds). Its functions' addresses
differ from process to process, so a compiled loop that numba keeps in its disk cache cannot hold
them: the loop gets them as an argument, `table()`, an int64 array of (address, 64-bit integers?)
pairs: float32 main, float32 narrow, float64 main, float64 narrow (address 0: none).

`gemm(table, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)` is row-major ``c = alpha *
op(a) @ op(b) + beta * c`` with a, b, c integer addresses and ta, tb cblas's transpose codes (111
no, 112 yes); alpha and beta's type (float32 or float64) picks the function.

This module imports nothing but numba, llvmlite and numpy until `table()` is called.
"""
from __future__ import annotations

import numpy as np

from actorflow.kernels.lazy_numba import import_numba

import_numba()     # numba's first import, once, under its lock (another thread may be importing it)

from llvmlite import ir  # noqa: E402 - after import_numba
from numba.core import types  # noqa: E402 - after import_numba
from numba.extending import intrinsic  # noqa: E402 - after import_numba

__all__ = ["NO_TRANS", "TRANS", "gemm", "table"]

NO_TRANS, TRANS = 111, 112
_ROW_MAJOR = 101
_TABLE: list = []


def table() -> np.ndarray:
    """This process's table of GEMM functions (see the module's docstring); all zeros when numpy
    does the GEMMs (no BLAS loaded), where nothing calls `gemm`."""
    if not _TABLE:
        import ctypes

        from actorflow.kernels.cpu import blas
        blas._settle()
        t = np.zeros(8, np.int64)
        for base, dt in ((0, np.dtype(np.float32)), (4, np.dtype(np.float64))):
            for off, lib in ((0, blas._gemm), (2, blas._narrow)):
                f = (lib or {}).get(dt)
                if f is not None:
                    t[base + off] = ctypes.cast(f, ctypes.c_void_p).value
                    t[base + off + 1] = int(f.argtypes[3] is ctypes.c_int64)
        _TABLE.append(t)
    return _TABLE[0]


def available() -> bool:
    """Whether GEMMs go through a BLAS here (else the JIT keeps its explicit loops)."""
    return bool(table()[0])


@intrinsic
def gemm(typingctx, tab, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    if not (isinstance(tab, types.Array) and tab.dtype == types.int64) or alpha not in (types.float32, types.float64):
        return None
    fl = alpha
    sig = types.void(tab, types.intp, types.intp, types.intp, types.intp, types.intp, fl, types.intp, types.intp,
                     types.intp, types.intp, fl, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        tab_v, ta_v, tb_v, m_v, n_v, k_v, alpha_v, a_v, lda_v, b_v, ldb_v, beta_v, c_v, ldc_v = args
        i64, i32 = ir.IntType(64), ir.IntType(32)
        data = context.make_array(signature.args[0])(context, builder, tab_v).data
        base = 0 if fl == types.float32 else 4

        def at(i):
            return builder.load(builder.gep(data, [i]))
        narrow = at(ir.Constant(i64, base + 2))
        small = builder.or_(builder.icmp_signed("<", n_v, ir.Constant(i64, 32)),
                            builder.icmp_signed("<", m_v, ir.Constant(i64, 4)))
        small = builder.or_(small, builder.icmp_signed("<", builder.mul(builder.mul(m_v, n_v), k_v),
                                                       ir.Constant(i64, 1 << 20)))
        use_narrow = builder.and_(small, builder.icmp_signed("!=", narrow, ir.Constant(i64, 0)))
        idx = builder.select(use_narrow, ir.Constant(i64, base + 2), ir.Constant(i64, base))
        fn = at(idx)
        wide = at(builder.add(idx, ir.Constant(i64, 1)))
        ft = context.get_value_type(fl)
        ptr = ft.as_pointer()

        def call(bi):
            fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i32, bi, bi, bi, ft, ptr, bi, ptr, bi, ft, ptr, bi])

            def blasint(v):
                return v if bi.width == 64 else builder.trunc(v, bi)
            builder.call(builder.inttoptr(fn, fnty.as_pointer()),
                         [ir.Constant(i32, _ROW_MAJOR), builder.trunc(ta_v, i32), builder.trunc(tb_v, i32),
                          blasint(m_v), blasint(n_v), blasint(k_v), alpha_v, builder.inttoptr(a_v, ptr),
                          blasint(lda_v), builder.inttoptr(b_v, ptr), blasint(ldb_v), beta_v,
                          builder.inttoptr(c_v, ptr), blasint(ldc_v)])
        with builder.if_else(builder.icmp_signed("!=", wide, ir.Constant(i64, 0))) as (then, otherwise):
            with then:
                call(i64)
            with otherwise:
                call(i32)
        return context.get_dummy_value()
    return sig, codegen
