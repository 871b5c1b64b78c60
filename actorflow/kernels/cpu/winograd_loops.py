"""The numba loops of the Winograd convolution (see winograd.py): the tile transforms, and one driver,
`_blocks`, that runs a whole convolution's blocks (transform, 36 GEMMs, transform back) in one nogil
call, for the forward convolution and the filter gradient alike.

The GEMMs are cblas_sgemm calls made from inside numba, through an intrinsic that calls a function
address passed in as an integer: the address is an argument, not a constant baked into the code, so
the driver stays in numba's disk cache. From Python, the 36 ctypes calls a block cost about 1.6 us
each: 2,800 calls and 4-5 ms of CPU per LeNet training step.

The tile transforms and the driver are cfuncs on integer arguments (addresses and sizes), each
compiled on first use (`tile_function`), and call each other the same way, through addresses: a numba
call would link the callee's code into the caller, where LLVM optimises and compiles it again (the
driver took 0.9 s to compile on top of its callees' 2 s). A small njit trampoline, `_run`, takes the
arrays from Python and passes their addresses on. On a fresh numba cache (2-core AMD EPYC VM) the
LeNet training step's first step went from 3.7 to 2.6 s, and results are bit for bit the same.

Imported on first use (it imports numba and llvmlite), so that importing the kernels stays cheap.
"""
from __future__ import annotations

import threading

import numpy as np

from actorflow.kernels.lazy_numba import import_numba

import_numba()     # numba's first import, once, under its lock (another thread may be importing it)

from llvmlite import ir  # noqa: E402 - after import_numba
from numba import carray, cfunc, njit, types, uintp  # noqa: E402 - after import_numba
from numba.extending import intrinsic  # noqa: E402 - after import_numba

# The channel pitch of the transformed input tiles: at most this many channels go into a Winograd
# transform (see _input_tiles).
_CP = 64
# float32 constants for the transforms (an int literal would promote numba's float32 arithmetic to float64).
_F0, _F1, _F2, _F4, _F5 = np.float32(0), np.float32(1), np.float32(2), np.float32(4), np.float32(5)
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_F32 = np.dtype(np.float32)


def _gemm_intrinsic(int_bits):
    """An intrinsic calling the cblas_sgemm at address `fn` (blasint of `int_bits` bits) with
    row-major order; pointers are integer addresses."""
    @intrinsic
    def call(typingctx, fn, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        sig = types.void(types.intp, types.intp, types.intp, types.intp, types.intp, types.intp, types.float32,
                         types.intp, types.intp, types.intp, types.intp, types.float32, types.intp, types.intp)

        def codegen(context, builder, signature, args):
            i32, bi = ir.IntType(32), ir.IntType(int_bits)
            ptr = ir.IntType(8).as_pointer()
            fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i32, bi, bi, bi, ir.FloatType(), ptr, bi, ptr, bi,
                                                   ir.FloatType(), ptr, bi])
            f, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc = args

            def blasint(v):
                return v if int_bits == 64 else builder.trunc(v, bi)
            builder.call(builder.inttoptr(f, fnty.as_pointer()),
                         [ir.Constant(i32, _ROW_MAJOR), builder.trunc(ta, i32), builder.trunc(tb, i32),
                          blasint(m), blasint(n), blasint(k), alpha, builder.inttoptr(a, ptr), blasint(lda),
                          builder.inttoptr(b, ptr), blasint(ldb), beta, builder.inttoptr(c, ptr), blasint(ldc)])
            return context.get_dummy_value()
        return sig, codegen
    return call


_sgemm64 = _gemm_intrinsic(64)
_sgemm32 = _gemm_intrinsic(32)


@intrinsic
def _f32(typingctx, addr):
    """The float32 pointer at integer address `addr`."""
    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(types.CPointer(types.float32)))
    return types.CPointer(types.float32)(types.intp), codegen


# The C signature of the tile functions: 16 integers (addresses and sizes) and a float32. They are
# cfuncs, called from `run` through their addresses (`_call`), not numba calls: a numba call links
# the callee's code into the caller, where LLVM optimises and compiles it a second time (0.8 s of
# the driver's 0.9 s of compile), and a cold start paid for every tile function twice.
_NI = 17
_TILE_SIG = types.void(*([types.intp] * _NI), types.float32)


@intrinsic
def _call(typingctx, fn, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, lo):
    """Calls the tile function at address `fn` (C signature _TILE_SIG)."""
    sig = types.void(types.intp, *([types.intp] * _NI), types.float32)

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(64)] * _NI + [ir.FloatType()])
        builder.call(builder.inttoptr(args[0], fnty.as_pointer()), list(args[1:]))
        return context.get_dummy_value()
    return sig, codegen


@njit(inline="always")
def _tile(t, th, tw):
    """(image, tile row, tile column) of tile t of an N x th x tw tile grid."""
    n = t // (th * tw)
    r = t - n * th * tw
    return n, r // tw, r % tw


@njit(inline="always")
def _bt_lines(src, dst, s0, o, pitch, uc):
    """dst[o + j * pitch + c] = (B^T d)[j] of the 6 points d[i] = src[s0 + i * pitch + c], i = 0 .. 5,
    for the channels c < uc: F(2x2, 5x5)'s input transform of one line of the tile, vectorised across channels (`pitch` is a
    constant where this is inlined, so every offset in the loop is a constant from one base)."""
    p2 = pitch + pitch                   # (uint + uint: a uint times an int literal is a float in numba)
    p3 = p2 + pitch
    p4 = p3 + pitch
    p5 = p4 + pitch
    for c in range(uc):                  # B^T d, points 0, 1, -1, 2, -2 and infinity
        d0 = src[s0 + c]
        d1 = src[s0 + c + pitch]
        d2 = src[s0 + c + p2]
        d3 = src[s0 + c + p3]
        d4 = src[s0 + c + p4]
        dst[o + c] = _F4 * d0 - _F5 * d2 + d4
        dst[o + c + pitch] = -_F4 * (d1 + d2) + d3 + d4
        dst[o + c + p2] = _F4 * (d1 - d2) - d3 + d4
        dst[o + c + p3] = _F2 * (d3 - d1) - d2 + d4
        dst[o + c + p4] = _F2 * (d1 - d3) - d2 + d4
        dst[o + c + p5] = _F4 * d1 - _F5 * d3 + src[s0 + c + p5]


def _input_tiles(xa, n_img, h_in, w_in, c_in, ph, pw, th, tw, t0, nt, va, six6, pa, _a14, _a15, _a16, _lo):
    """v[k, 6*i + j, c] = (B^T d B)[i, j] for tile t0 + k of the N x th x tw tile grid of the NHWC
    `x` (C-contiguous, at most _CP channels), d its 6x6 patch of channel c at rows 2*ti - ph ..,
    columns 2*tj - pw .. (zero outside); v is [nt, 36, _CP], `patch` [2, 36 * _CP] a work buffer.

    Each patch is first copied into a buffer with the channel pitch _CP (a compile-time constant),
    then B^T d B is two passes of the 6-point transform _bt, down the columns into a second buffer
    and along its rows into v, each a loop over the channels. With every offset in those loops a
    constant from one base, LLVM sees that their loads and stores cannot overlap and vectorises them
    across channels (with the pitch C of the input, it needed thousands of runtime overlap checks and
    ran scalar: 4x slower). The 6-long loops around them take their 6 at run time (`six`): unrolled,
    they compiled several times longer and ran no faster (see _output_tiles). Offsets are unsigned,
    which spares numba's negative-index wraparound (see conv.py)."""
    six = six6 // 6
    xf = carray(_f32(xa), n_img * h_in * w_in * c_in)
    vf = carray(_f32(va), nt * 36 * _CP)
    src = carray(_f32(pa), 36 * _CP)
    mid = carray(_f32(pa + 4 * 36 * _CP), 36 * _CP)
    uc = uintp(c_in)
    p = uintp(_CP)                               # the pitch from one column of the patch to the next
    r = uintp(6 * _CP)                           # and from one row to the next
    for k in range(nt):
        n, ti, tj = _tile(t0 + k, th, tw)
        h0 = 2 * ti - ph
        w0 = 2 * tj - pw
        for a in range(six):
            for b in range(six):
                h = h0 + a
                w = w0 + b
                o = uintp((a * 6 + b) * _CP)
                if 0 <= h < h_in and 0 <= w < w_in:
                    s0 = uintp(((n * h_in + h) * w_in + w) * c_in)
                    for c in range(uc):
                        src[o + c] = xf[s0 + c]
                else:
                    for c in range(uc):
                        src[o + c] = 0
        for b in range(six):                     # mid[:, b] = B^T src[:, b]
            _bt_lines(src, mid, uintp(b * _CP), uintp(b * _CP), r, uc)
        for i in range(six):                     # v[k, i, :] = mid[i, :] B
            _bt_lines(mid, vf, uintp(i * 6 * _CP), uintp((k * 36 + i * 6) * _CP), p, uc)


def _output_tiles(ma, th, tw, t0, nt, oa, n_img, oh, ow, co, ba, pa, ph, pw, pool, sa, six, lo):
    """out's 2x2 tile t0 + k = A^T M A of m[k] ([36, O]; pixels outside `out` are dropped), plus
    `bias` [O], raised to at least `lo` (0 for a fused ReLU, -inf for none; NaN stays NaN); with
    `pool`, each tile's maximum into pooled[n, ti, tj]. The bias and the floor are values, not
    flags: a flag tested inside the channel loop made LLVM compile a copy of the loop per case.
    sy [4, 6, O] is a work buffer: A^T M in sy[:2], the tile in sy[2:, :2]."""
    # 6 and 2, unknown to LLVM: fully unrolled, these small loops (each with a vectorised loop inside)
    # made the driver that inlines this function take seconds longer to compile, and ran no faster.
    m = carray(_f32(ma), (nt, 36, co))
    out = carray(_f32(oa), (n_img, oh, ow, co))
    bias = carray(_f32(ba), co)
    pooled = carray(_f32(pa), (n_img, ph, pw, co))
    sy = carray(_f32(sa), (4, 6, co))
    two = six // 3
    for k in range(nt):
        n, ti, tj = _tile(t0 + k, th, tw)
        for j in range(six):                     # s = A^T M
            for o in range(co):
                m0, m1, m2, m3, m4, m5 = m[k, j, o], m[k, 6 + j, o], m[k, 12 + j, o], m[k, 18 + j, o], \
                    m[k, 24 + j, o], m[k, 30 + j, o]
                sy[0, j, o] = m0 + m1 + m2 + m3 + m4
                sy[1, j, o] = m1 - m2 + _F2 * (m3 - m4) + m5
        for p in range(two):                     # y = s A
            for o in range(co):
                s0, s1, s2, s3, s4, s5 = sy[p, 0, o], sy[p, 1, o], sy[p, 2, o], sy[p, 3, o], sy[p, 4, o], sy[p, 5, o]
                y0 = s0 + s1 + s2 + s3 + s4 + bias[o]
                y1 = s1 - s2 + _F2 * (s3 - s4) + s5 + bias[o]
                sy[2 + p, 0, o] = lo if y0 < lo else y0
                sy[2 + p, 1, o] = lo if y1 < lo else y1
        i0 = 2 * ti
        j0 = 2 * tj
        for p in range(two):
            if i0 + p < oh:
                for q in range(two):
                    if j0 + q < ow:
                        for o in range(co):
                            out[n, i0 + p, j0 + q, o] = sy[2 + p, q, o]
        if pool:
            for o in range(co):
                pooled[n, ti, tj, o] = max(max(sy[2, 0, o], sy[2, 1, o]), max(sy[3, 0, o], sy[3, 1, o]))


def _gradient_tiles(da, n_img, oh, ow, co, th, tw, t0, nt, ga, six, two, va, ta, _a14, _a15, _a16, _lo):
    """dv[k, 6*i + j, o] = (G2 t G2^T)[i, j] for the 2x2 tile t of dy's channel o at tile t0 + k
    (zero outside dy): F(5, 2)'s transform of an output-gradient tile. tr [4, 6, O] is a work
    buffer: the tile t in tr[:2, :2], G2 t in tr[2:] (tr[2 + q, i] = (G2 t)[i, q])."""
    dy = carray(_f32(da), (n_img, oh, ow, co))
    g2 = carray(_f32(ga), (six, two))            # six, two: 6 and 2, unknown to LLVM (see _output_tiles)
    dv = carray(_f32(va), (nt, 36, co))
    tr = carray(_f32(ta), (4, 6, co))
    for k in range(nt):
        n, ti, tj = _tile(t0 + k, th, tw)
        for p in range(two):
            for q in range(two):
                if 2 * ti + p < oh and 2 * tj + q < ow:
                    for o in range(co):
                        tr[p, q, o] = dy[n, 2 * ti + p, 2 * tj + q, o]
                else:
                    for o in range(co):
                        tr[p, q, o] = 0
        for i in range(six):
            a0, a1 = g2[i, 0], g2[i, 1]
            for q in range(two):
                for o in range(co):
                    tr[2 + q, i, o] = a0 * tr[0, q, o] + a1 * tr[1, q, o]
        for i in range(six):
            for j in range(six):
                b0, b1 = g2[j, 0], g2[j, 1]
                e = 6 * i + j
                for o in range(co):
                    dv[k, e, o] = tr[2, i, o] * b0 + tr[3, i, o] * b1


_CFUNCS: dict = {}
_LOCK = threading.Lock()


def tile_function(name):
    """The cfunc `name` of this module (a tile function, or "_blocks"), compiled (or loaded from
    numba's cache) on first use: a forward convolution never compiles the filter gradient's. Two
    threads asking at once compile it once."""
    cf = _CFUNCS.get(name)
    if cf is None:
        with _LOCK:
            cf = _CFUNCS.get(name)
            if cf is None:
                sig = _BLOCKS_SIG if name == "_blocks" else _TILE_SIG
                cf = _CFUNCS[name] = cfunc(sig, cache=True, nogil=True)(globals()[name])
    return cf


# _blocks' C signature: 33 integers (addresses, sizes and flags) and a float32.
_BLOCKS_SIG = types.void(*([types.intp] * 33), types.float32)


def _blocks(xp, n_img, h_in, w_in, c, yp, n, oh, ow, co, wp, ph, pw, bp, pp, pool, ph2, pw2, gp, g2r, g2c, grad, vp,
            six, mp, patch, tile, block, fn, ilp64, fin, fout, fgrad, lo):
    """The loop over a convolution's blocks of tiles (see `run`): arrays by address, the tile
    functions through theirs (fout is not called with `grad`, nor fgrad without), and the GEMMs
    through cblas_sgemm's, `fn`."""
    th = (oh + 1) // 2
    tw = (ow + 1) // 2
    tiles = n * th * tw
    for t0 in range(0, tiles, block):
        nt = tiles - t0
        if nt > block:
            nt = block
        _call(fin, xp, n_img, h_in, w_in, c, ph, pw, th, tw, t0, nt, vp, six, patch, 0, 0, 0, lo)
        if grad:
            _call(fgrad, yp, n, oh, ow, co, th, tw, t0, nt, gp, g2r, g2c, mp, tile, 0, 0, 0, lo)
        for e in range(36):
            ve, we, me = vp + 4 * e * _CP, wp + 4 * e * c * co, mp + 4 * e * co
            if grad:        # w_e [C, O] += v_e.T [C, nt] @ m_e [nt, O]
                ta, rows, inner, beta, b, ldb, out, ldo = _TRANS, c, nt, _F1, me, 36 * co, we, co
            else:           # m_e [nt, O] = v_e [nt, C] @ w_e [C, O]
                ta, rows, inner, beta, b, ldb, out, ldo = _NO_TRANS, nt, c, _F0, we, co, me, 36 * co
            if ilp64:
                _sgemm64(fn, ta, _NO_TRANS, rows, co, inner, _F1, ve, 36 * _CP, b, ldb, beta, out, ldo)
            else:
                _sgemm32(fn, ta, _NO_TRANS, rows, co, inner, _F1, ve, 36 * _CP, b, ldb, beta, out, ldo)
        if not grad:
            _call(fout, mp, th, tw, t0, nt, yp, n, oh, ow, co, bp, pp, ph2, pw2, pool, tile, six // 6, lo)


@intrinsic
def _call_blocks(typingctx, fn, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19,
                 a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32, lo):
    """Calls _blocks at address `fn` (C signature _BLOCKS_SIG)."""
    sig = types.void(types.intp, *([types.intp] * 33), types.float32)

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(64)] * 33 + [ir.FloatType()])
        builder.call(builder.inttoptr(args[0], fnty.as_pointer()), list(args[1:]))
        return context.get_dummy_value()
    return sig, codegen


@njit(cache=True, nogil=True)
def _run(x, y, w, ph, pw, bias, lo, pooled, pool, g2, grad, v, m, patch, tile, block, fn, ilp64, fin, fout, fgrad, fb):
    """Calls _blocks (at `fb`) with the arrays' addresses and sizes: a numba call takes them in
    1 us, ctypes in 16 (ten ndarray.ctypes.data and 34 converted arguments)."""
    n_img, h_in, w_in, c = x.shape
    n, oh, ow, co = y.shape
    _call_blocks(fb, x.ctypes.data, n_img, h_in, w_in, c, y.ctypes.data, n, oh, ow, co, w.ctypes.data, ph, pw,
                 bias.ctypes.data, pooled.ctypes.data, pool, pooled.shape[1], pooled.shape[2], g2.ctypes.data,
                 g2.shape[0], g2.shape[1], grad, v.ctypes.data, v.shape[1], m.ctypes.data, patch.ctypes.data,
                 tile.ctypes.data, block, fn, ilp64, fin, fout, fgrad, lo)


def run(x, y, w, ph, pw, bias, lo, pooled, pool, g2, grad, v, m, patch, tile, block, fn, ilp64):
    """One convolution's Winograd blocks of `block` tiles, through the buffers v [block, 36, _CP]
    and m [block, 36, O]: the convolution y = x * w of the transformed filter w [36, C, O] (see
    _output_tiles for bias, lo, pooled and pool), or, with `grad`, the filter gradient w += the
    transformed products of x and the output gradient y (g2: F(5, 2)'s G2). patch [2, 36 * _CP]
    and tile [4, 6, O] are work buffers of the transforms. Every array is C-contiguous float32
    (the loops take addresses; winograd.py makes x, w, bias, g2 and the buffers so, and y and
    pooled are checked here)."""
    for name, a in (("y", y), ("pooled", pooled)):
        if a.dtype != _F32 or not a.flags.c_contiguous:
            raise ValueError(f"winograd_loops.run: {name} must be C-contiguous float32, got {a.dtype} "
                             f"{'contiguous' if a.flags.c_contiguous else 'strided'}")
    if block < 1:                       # no tiles (an empty batch): nothing to compute, and the
        return                          # cfuncs could not raise range()'s error for a step of 0
    fin = tile_function("_input_tiles").address
    fout = 0 if grad else tile_function("_output_tiles").address
    fgrad = tile_function("_gradient_tiles").address if grad else 0
    _run(x, y, w, ph, pw, bias, lo, pooled, pool, g2, grad, v, m, patch, tile, block, fn, ilp64, fin, fout, fgrad,
         tile_function("_blocks").address)
