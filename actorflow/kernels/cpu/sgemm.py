"""A single-precision GEMM of actorflow's own, for CPUs with AVX-512: row-major cblas_sgemm, written in
numba with its inner kernel emitted as LLVM vector code (16 x float32) by an intrinsic.

Why: numpy's OpenBLAS picks its kernels by the CPU it detects, unless the environment names one
(`OPENBLAS_CORETYPE`); a machine that pins an older core (these machines set Haswell) gets AVX2
kernels on a CPU with full-width AVX-512 (AMD Zen 5): 127 GFLOP/s a core on an MLP's products,
against 225-246 for OpenBLAS's own AVX-512 kernels and TensorFlow's oneDNN on the same core. MKL
takes its AVX2 path on AMD (105-111). This kernel runs at the AVX-512 rate whatever OpenBLAS was told,
and kernels/cpu/blas.py measures it against the libraries it has and keeps the fastest.

The structure is BLIS's (Van Zee and van de Geijn): k is cut into KC-deep slices and the rows into
MC-row blocks; an MR x NR tile of C (14 x 32: 28 zmm accumulators, two vector loads of B and one
broadcast of A per step of k, 32 registers in all) is the micro-kernel, an LLVM loop whose
accumulators LLVM keeps in registers. Unlike BLIS, operands are packed only where it pays:
- op(B) = B (row-major): its 32-column panels are read in place, each step of k two vector loads
  from one row (only the last, partial panel is packed, zero-padded). Packing B cost more than it
  saved: 64 x 3136 x 1024 ran at 72 GFLOP/s packed and 203 read in place.
- op(B) = B^T: packed into 32-column panels, 16 x 16 blocks transposed in registers (four rounds of
  shuffles); 256 x 1024 x 1024 at 210 GFLOP/s, 185 with a scalar packing loop.
- op(A) = A^T: its rows are read in place, 14 consecutive values of a stored row each step of k
  (a weight gradient, 3136 x 64 x 1024: 220 GFLOP/s in place, 188 packed).
- op(A) = A: packed into 14-row panels (one MC x KC block, in L2) for products of 1024 columns or more,
  or more than 256 columns over at most 256 rows, where the block is read once per 32 of them and the
  packing pays (64 x 1024 x 1024: 213 packed, 168 in place); otherwise its rows are read in place (a
  convolution's im2col products, 12544 x 800 x 64: 191 in place, 93 packed; CapsNet's 900 x 20736 x
  256: 235 in place, 175 packed).
Tiles at the bottom and right edges are computed whole (their rows packed, zero-padded) into a
scratch tile and copied. Each multiply-add is fused (one rounding, as in every BLAS). C = alpha *
op(A) @ op(B) + beta * C, C not read when beta is 0 (so NaNs in an output buffer do not leak into
the result), as cblas_sgemm.

KC and MC were chosen by timing 9 products of the MLP, LeNet and an RNN cell on one core: geometric
mean 198 GFLOP/s with KC 256 and MC 168, 207-210 with KC 384-1024, 214 with KC 512 and MC 84.
Measured on one Zen 5 core (benchmarks/blas_backends.py; OpenBLAS under OPENBLAS_CORETYPE=Haswell):
the MLP's products 215-235 GFLOP/s against OpenBLAS's 127-130 (OpenBLAS's own AVX-512 kernels, without
the pin: 225-246, which blas.py then keeps); 8 x 1024 x 1024 115 against 74;
narrow products lose (256 x 1024 x 10: 23 against 71) and blas.py leaves them to the library, with
products of fewer than 4 rows and of under 2^20 multiply-adds.

The entry point is a numba cfunc with cblas_sgemm's ILP64 signature (order, transa, transb as C
ints; m, n, k and the leading dimensions as int64), compiled on first use (not at import) and kept
in numba's disk cache; ctypes calls it without the GIL, as it calls a BLAS.
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from actorflow.kernels.lazy_numba import import_numba

import_numba()     # numba's first import, once, under its lock (another thread may be importing it)

from llvmlite import ir  # noqa: E402 - after import_numba
from numba import carray, cfunc, njit, types  # noqa: E402 - after import_numba
from numba.core import cgutils  # noqa: E402 - after import_numba
from numba.extending import intrinsic  # noqa: E402 - after import_numba

__all__ = ["sgemm", "MR", "NR", "KC", "MC", "NC"]

_VW = 16                    # float32 lanes of one vector (AVX-512's zmm)
_NV = 2                     # vectors of columns in a tile
MR, NR = 14, _VW * _NV      # the micro-tile: 14 rows x 32 columns
KC = 512                    # depth of one slice of k: 14 x 512 of packed A (28 KiB) beside B's rows (L1)
MC = MR * 6                 # rows of a packed A block: 84 x 512 x 4 = 168 KiB (L2)
NC = 2048                   # columns of a packed B slice: 2 MiB (L3)
_ALIGN = 16                 # floats: packed buffers start on a 64-byte line

_F32 = ir.FloatType()
_V = ir.VectorType(_F32, _VW)
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_NO_TRANS = 111


def _c(n):
    return ir.Constant(_I64, n)


def _vptr(builder, base, off):
    return builder.bitcast(builder.gep(base, [off]), _V.as_pointer())


def _bcast(builder, value):
    v = builder.insert_element(ir.Constant(_V, ir.Undefined), value, ir.Constant(_I32, 0))
    return builder.shuffle_vector(v, ir.Constant(_V, ir.Undefined), ir.Constant(ir.VectorType(_I32, _VW), [0] * _VW))


@intrinsic
def _tile(typingctx, kc, ap, ao, ars, aps, bp, bo, ldb, c, co, ldc, alpha, beta):
    """c[co + r*ldc + j] = alpha * sum_p ap[ao + p*MR + r] * bp[bo + p*NR + j] + beta * c[..] for the
    MR x NR tile (r < MR, j < NR, p < kc); with beta == 0, c is written without being read."""
    for t in (ap, bp, c):
        if not (isinstance(t, types.Array) and t.dtype == types.float32 and t.ndim == 1 and t.layout == "C"):
            raise TypeError(f"sgemm._tile: arrays must be flat C-contiguous float32, got {t}")
    sig = types.void(kc, ap, ao, ars, aps, bp, bo, ldb, c, co, ldc, alpha, beta)

    def codegen(context, builder, signature, args):
        kc_, ap_, ao_, ars_, aps_, bp_, bo_, ldb_, c_, co_, ldc_, alpha_, beta_ = args
        ty = signature.args
        app = context.make_array(ty[1])(context, builder, ap_).data
        bpp = context.make_array(ty[5])(context, builder, bp_).data
        cp = context.make_array(ty[8])(context, builder, c_).data
        fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_V, [_V] * 3), "llvm.fma.v16f32")
        accs = [cgutils.alloca_once(builder, _V) for _ in range(MR * _NV)]
        zero = ir.Constant(_V, [0.0] * _VW)
        for a in accs:
            builder.store(zero, a)
        with cgutils.for_range(builder, kc_) as lp:
            boff = builder.add(bo_, builder.mul(lp.index, ldb_))
            bv = [builder.load(_vptr(builder, bpp, builder.add(boff, _c(_VW * v))), align=4) for v in range(_NV)]
            aoff = builder.add(ao_, builder.mul(lp.index, aps_))
            for r in range(MR):
                av = _bcast(builder, builder.load(builder.gep(app, [builder.add(aoff, builder.mul(_c(r), ars_))])))
                for v in range(_NV):
                    acc = accs[r * _NV + v]
                    builder.store(builder.call(fma, [av, bv[v], builder.load(acc)]), acc)
        va = _bcast(builder, alpha_)
        vb = _bcast(builder, beta_)
        beta_zero = builder.fcmp_ordered("==", beta_, ir.Constant(_F32, 0.0))
        with builder.if_else(beta_zero) as (then, otherwise):
            with then:
                for r in range(MR):
                    row = builder.add(co_, builder.mul(_c(r), ldc_))
                    for v in range(_NV):
                        p = _vptr(builder, cp, builder.add(row, _c(_VW * v)))
                        builder.store(builder.fmul(va, builder.load(accs[r * _NV + v])), p, align=4)
            with otherwise:
                for r in range(MR):
                    row = builder.add(co_, builder.mul(_c(r), ldc_))
                    for v in range(_NV):
                        p = _vptr(builder, cp, builder.add(row, _c(_VW * v)))
                        old = builder.fmul(vb, builder.load(p, align=4))
                        builder.store(builder.call(fma, [va, builder.load(accs[r * _NV + v]), old]), p, align=4)
        return context.get_dummy_value()
    return sig, codegen


def _transpose16(builder, rows):
    """The 16 x 16 block of 16 <16 x float> rows, transposed: four rounds of two-source shuffles,
    round b swapping bit b of the row index with bit b of the column index."""
    rows = list(rows)
    for b in (1, 2, 4, 8):
        low = ir.Constant(ir.VectorType(_I32, _VW), [c if not c & b else _VW + (c ^ b) for c in range(_VW)])
        high = ir.Constant(ir.VectorType(_I32, _VW), [c ^ b if not c & b else _VW + c for c in range(_VW)])
        out = list(rows)
        for i in range(_VW):
            if not i & b:
                out[i] = builder.shuffle_vector(rows[i], rows[i | b], low)
                out[i | b] = builder.shuffle_vector(rows[i], rows[i | b], high)
        rows = out
    return rows


@intrinsic
def _transpose_panel(typingctx, b, src, ldb, out, dst):
    """out[dst + p*NR + j] = b[src + j*ldb + p] for p < 16, j < NR: 16 steps of k of a panel of NR
    rows of a stored B (op(B) = B^T), moved in registers."""
    for t in (b, out):
        if not (isinstance(t, types.Array) and t.dtype == types.float32 and t.ndim == 1 and t.layout == "C"):
            raise TypeError(f"sgemm._transpose_panel: arrays must be flat C-contiguous float32, got {t}")
    sig = types.void(b, src, ldb, out, dst)

    def codegen(context, builder, signature, args):
        b_, src_, ldb_, out_, dst_ = args
        bp = context.make_array(signature.args[0])(context, builder, b_).data
        op = context.make_array(signature.args[3])(context, builder, out_).data
        for half in range(_NV):
            rows = [builder.load(_vptr(builder, bp, builder.add(src_, builder.mul(_c(half * _VW + j), ldb_))), align=4)
                    for j in range(_VW)]
            for p, v in enumerate(_transpose16(builder, rows)):
                builder.store(v, _vptr(builder, op, builder.add(dst_, _c(p * NR + half * _VW))), align=4)
        return context.get_dummy_value()
    return sig, codegen


@njit(nogil=True, cache=True)
def _panels(x, ld, runs, i0, k0, count, kc, width, out, first):
    """Panels `first`.. of `width` lines each of op(X) (lines i0.., steps k0..k0+kc):
    out[q*width*kc + p*width + r] = op(X)[i0 + q*width + r, k0 + p], zero past line `count`. With `runs`,
    a panel's `width` values of one step lie side by side in x (op(X)[i, p] = x[p*ld + i]); else each
    line's kc steps do (x[i*ld + p])."""
    for q in range(first, (count + width - 1) // width):
        base = q * width * kc
        lines = min(width, count - q * width)
        if runs:
            for p in range(kc):
                src = (k0 + p) * ld + i0 + q * width
                dst = base + p * width
                for r in range(lines):
                    out[dst + r] = x[src + r]
                for r in range(lines, width):
                    out[dst + r] = 0.0
        else:
            for r in range(lines):
                src = (i0 + q * width + r) * ld + k0
                for p in range(kc):
                    out[base + p * width + r] = x[src + p]
            for r in range(lines, width):
                for p in range(kc):
                    out[base + p * width + r] = 0.0


@njit(nogil=True, cache=True)
def _pack_a(a, lda, trans, i0, k0, mc, kc, out):
    """op(A)[i0:i0+mc, k0:k0+kc] into MR-row panels: out[q*MR*kc + p*MR + r] = op(A)[i0+q*MR+r, k0+p],
    zero past row mc."""
    _panels(a, lda, trans, i0, k0, mc, kc, MR, out, 0)


@njit(nogil=True, cache=True)
def _pack_b(b, ldb, trans, k0, j0, kc, nc, out):
    """op(B)[k0:k0+kc, j0:j0+nc] into NR-column panels: out[q*NR*kc + p*NR + j] = op(B)[k0+p, j0+q*NR+j],
    zero past column nc. A transposed B's whole panels go 16 x NR blocks at a time through registers."""
    full = 0
    if trans:
        full = nc // NR
        for q in range(full):
            base = q * NR * kc
            src = (j0 + q * NR) * ldb + k0
            p = 0
            while p + _VW <= kc:
                _transpose_panel(b, src + p, ldb, out, base + p * NR)
                p += _VW
            for j in range(NR):
                for pp in range(p, kc):
                    out[base + pp * NR + j] = b[src + j * ldb + pp]
    _panels(b, ldb, not trans, j0, k0, nc, kc, NR, out, full)


@njit(nogil=True, cache=True)
def _aligned(n):
    buf = np.empty(n + _ALIGN, np.float32)
    off = (-(buf.ctypes.data // 4)) % _ALIGN
    return buf[off:off + n]


@njit(nogil=True, cache=True)
def _gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    if m <= 0 or n <= 0:
        return
    if k <= 0:
        for i in range(m):
            for j in range(n):
                c[i * ldc + j] = 0.0 if beta == 0.0 else beta * c[i * ldc + j]
        return
    kcm = min(KC, k)
    direct = not tb         # full panels of a row-major B are read in place; packed otherwise
    pack_a = not ta and (n >= 1024 or (n > 256 and m <= 256))     # (see the module docstring)
    bpack = _aligned(kcm * (((NR if direct else min(NC, n)) + NR - 1) // NR) * NR)
    apack = _aligned(kcm * ((min(MC, m) + MR - 1) // MR) * MR)
    tile = _aligned(MR * NR)
    for jc in range(0, n, NC):
        nc = min(NC, n - jc)
        full = (nc // NR) * NR
        for pc in range(0, k, KC):
            kc = min(KC, k - pc)
            if not direct:
                _pack_b(b, ldb, tb, pc, jc, kc, nc, bpack)
            elif full < nc:
                _pack_b(b, ldb, tb, pc, jc + full, kc, nc - full, bpack)
            bta = beta if pc == 0 else np.float32(1.0)
            for ic in range(0, m, MC):
                mc = min(MC, m - ic)
                if pack_a:
                    _pack_a(a, lda, ta, ic, pc, mc, kc, apack)
                for jr in range(0, nc, NR):
                    nr = min(NR, nc - jr)
                    if direct and nr == NR:
                        bsrc, bo, bs = b, pc * ldb + jc + jr, ldb
                    elif direct:
                        bsrc, bo, bs = bpack, 0, NR
                    else:
                        bsrc, bo, bs = bpack, (jr // NR) * NR * kc, NR
                    for it in range(0, mc, MR):
                        mr = min(MR, mc - it)
                        if pack_a:
                            asrc, ao, ars, aps = apack, (it // MR) * MR * kc, 1, MR
                        elif ta:
                            asrc, ao, ars, aps = a, pc * lda + ic + it, 1, lda
                        else:
                            asrc, ao, ars, aps = a, (ic + it) * lda + pc, lda, 1
                        co = (ic + it) * ldc + jc + jr
                        if mr == MR and nr == NR:
                            _tile(kc, asrc, ao, ars, aps, bsrc, bo, bs, c, co, ldc, alpha, bta)
                        else:
                            if not pack_a:      # the panel's rows past m are not there: pack them
                                _pack_a(a, lda, ta, ic + it, pc, mr, kc, apack)
                                asrc, ao, ars, aps = apack, 0, 1, MR
                            _tile(kc, asrc, ao, ars, aps, bsrc, bo, bs, tile, 0, NR, alpha, np.float32(0.0))
                            for r in range(mr):
                                for j in range(nr):
                                    x = co + r * ldc + j
                                    c[x] = tile[r * NR + j] if bta == 0.0 else tile[r * NR + j] + bta * c[x]


_SIG = types.void(types.int32, types.int32, types.int32, types.int64, types.int64, types.int64, types.float32,
                  types.CPointer(types.float32), types.int64, types.CPointer(types.float32), types.int64,
                  types.float32, types.CPointer(types.float32), types.int64)
_lock = threading.Lock()
_fn: list = []


def _entry(order, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    ta = transa != _NO_TRANS
    tb = transb != _NO_TRANS
    na = (k - 1) * lda + m if ta else (m - 1) * lda + k
    nb = (n - 1) * ldb + k if tb else (k - 1) * ldb + n
    _gemm(ta, tb, m, n, k, alpha, carray(a, (max(na, 0),)), lda, carray(b, (max(nb, 0),)), ldb, beta,
          carray(c, (max((m - 1) * ldc + n, 0),)), ldc)


def sgemm():
    """This process's cblas_sgemm (a ctypes function with argtypes set, ILP64: int64 sizes), compiled
    on the first call (from numba's disk cache after the first process). Row-major only (order 101)."""
    if not _fn:
        with _lock:
            if not _fn:
                f = cfunc(_SIG, nopython=True, cache=True)(_entry)
                proto = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                                         ctypes.c_int64, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p,
                                         ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_float,
                                         ctypes.c_void_p, ctypes.c_int64)
                fn = proto(f.address)
                fn._af_cfunc = f          # keeps the compiled code alive with the function
                _fn.append(fn)
    return _fn[0]
