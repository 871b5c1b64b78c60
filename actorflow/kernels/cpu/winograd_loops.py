"""The numba loops of the Winograd convolution (see winograd.py): the tile transforms, and drivers that
run a whole convolution's blocks (transform, 36 GEMMs, transform back) in one nogil call.

The GEMMs are cblas_sgemm calls made from inside numba, through an intrinsic that calls a function
address passed in as an integer: the address is an argument, not a constant baked into the code, so
the drivers stay in numba's disk cache. From Python, the 36 ctypes calls a block cost about 1.6 us
each: 2,800 calls and 4-5 ms of CPU per LeNet training step.

Imported on first use (it imports numba and llvmlite), so that importing the kernels stays cheap.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types, uintp
from numba.extending import intrinsic

# The channel pitch of the transformed input tiles: at most this many channels go into a Winograd
# transform (see _input_tiles).
_CP = 64
# float32 constants for the transforms (an int literal would promote numba's float32 arithmetic to float64).
_F0, _F1, _F2, _F4, _F5 = np.float32(0), np.float32(1), np.float32(2), np.float32(4), np.float32(5)
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


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


@njit(nogil=True)
def _sgemm(fn, ilp64, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    if ilp64:
        _sgemm64(fn, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
    else:
        _sgemm32(fn, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)


@njit(cache=True, nogil=True)
def _input_tiles(x, ph, pw, th, tw, t0, nt, v):
    """v[k, 6*i + j, c] = (B^T d B)[i, j] for tile t0 + k of the N x th x tw tile grid of the NHWC
    `x` (C-contiguous, at most _CP channels), d its 6x6 patch of channel c at rows 2*ti - ph ..,
    columns 2*tj - pw .. (zero outside); v is [nt, 36, _CP].

    Each patch is first copied into a buffer with the channel pitch _CP (a compile-time constant),
    then one loop over the channels computes all 36 values of a channel in registers. With every
    offset in that loop a constant, LLVM sees that its loads and stores cannot overlap and
    vectorises it across channels (with the pitch C of the input, it needed thousands of runtime
    overlap checks and ran scalar: 4x slower). Offsets are unsigned, which spares numba's
    negative-index wraparound (see conv.py)."""
    n_img, h_in, w_in, c_in = x.shape
    xf = x.reshape(-1)
    vf = v.reshape(-1)
    src = np.zeros(36 * _CP, x.dtype)
    uc = uintp(c_in)
    o1 = uintp(1 * _CP)
    o2 = uintp(2 * _CP)
    o3 = uintp(3 * _CP)
    o4 = uintp(4 * _CP)
    o5 = uintp(5 * _CP)
    o6 = uintp(6 * _CP)
    o7 = uintp(7 * _CP)
    o8 = uintp(8 * _CP)
    o9 = uintp(9 * _CP)
    o10 = uintp(10 * _CP)
    o11 = uintp(11 * _CP)
    o12 = uintp(12 * _CP)
    o13 = uintp(13 * _CP)
    o14 = uintp(14 * _CP)
    o15 = uintp(15 * _CP)
    o16 = uintp(16 * _CP)
    o17 = uintp(17 * _CP)
    o18 = uintp(18 * _CP)
    o19 = uintp(19 * _CP)
    o20 = uintp(20 * _CP)
    o21 = uintp(21 * _CP)
    o22 = uintp(22 * _CP)
    o23 = uintp(23 * _CP)
    o24 = uintp(24 * _CP)
    o25 = uintp(25 * _CP)
    o26 = uintp(26 * _CP)
    o27 = uintp(27 * _CP)
    o28 = uintp(28 * _CP)
    o29 = uintp(29 * _CP)
    o30 = uintp(30 * _CP)
    o31 = uintp(31 * _CP)
    o32 = uintp(32 * _CP)
    o33 = uintp(33 * _CP)
    o34 = uintp(34 * _CP)
    o35 = uintp(35 * _CP)
    r0 = uintp(0)
    r1 = uintp(6 * _CP)
    r2 = uintp(12 * _CP)
    r3 = uintp(18 * _CP)
    r4 = uintp(24 * _CP)
    r5 = uintp(30 * _CP)
    per_img = th * tw
    for k in range(nt):
        t = t0 + k
        n = t // per_img
        ti = (t - n * per_img) // tw
        tj = t - n * per_img - ti * tw
        h0 = 2 * ti - ph
        w0 = 2 * tj - pw
        for a in range(6):
            h = h0 + a
            for b in range(6):
                w = w0 + b
                o = uintp((a * 6 + b) * _CP)
                if 0 <= h < h_in and 0 <= w < w_in:
                    s0 = uintp(((n * h_in + h) * w_in + w) * c_in)
                    for c in range(uc):
                        src[o + c] = xf[s0 + c]
                else:
                    for c in range(uc):
                        src[o + c] = 0
        q = uintp(k * 36 * _CP)
        for c in range(uc):
            d00, d01, d02 = src[r0 + c], src[r0 + c + o1], src[r0 + c + o2]
            d03, d04, d05 = src[r0 + c + o3], src[r0 + c + o4], src[r0 + c + o5]
            d10, d11, d12 = src[r1 + c], src[r1 + c + o1], src[r1 + c + o2]
            d13, d14, d15 = src[r1 + c + o3], src[r1 + c + o4], src[r1 + c + o5]
            d20, d21, d22 = src[r2 + c], src[r2 + c + o1], src[r2 + c + o2]
            d23, d24, d25 = src[r2 + c + o3], src[r2 + c + o4], src[r2 + c + o5]
            d30, d31, d32 = src[r3 + c], src[r3 + c + o1], src[r3 + c + o2]
            d33, d34, d35 = src[r3 + c + o3], src[r3 + c + o4], src[r3 + c + o5]
            d40, d41, d42 = src[r4 + c], src[r4 + c + o1], src[r4 + c + o2]
            d43, d44, d45 = src[r4 + c + o3], src[r4 + c + o4], src[r4 + c + o5]
            d50, d51, d52 = src[r5 + c], src[r5 + c + o1], src[r5 + c + o2]
            d53, d54, d55 = src[r5 + c + o3], src[r5 + c + o4], src[r5 + c + o5]
            r00 = _F4 * d00 - _F5 * d20 + d40
            r01 = _F4 * d01 - _F5 * d21 + d41
            r02 = _F4 * d02 - _F5 * d22 + d42
            r03 = _F4 * d03 - _F5 * d23 + d43
            r04 = _F4 * d04 - _F5 * d24 + d44
            r05 = _F4 * d05 - _F5 * d25 + d45
            r10 = -_F4 * (d10 + d20) + d30 + d40
            r11 = -_F4 * (d11 + d21) + d31 + d41
            r12 = -_F4 * (d12 + d22) + d32 + d42
            r13 = -_F4 * (d13 + d23) + d33 + d43
            r14 = -_F4 * (d14 + d24) + d34 + d44
            r15 = -_F4 * (d15 + d25) + d35 + d45
            r20 = _F4 * (d10 - d20) - d30 + d40
            r21 = _F4 * (d11 - d21) - d31 + d41
            r22 = _F4 * (d12 - d22) - d32 + d42
            r23 = _F4 * (d13 - d23) - d33 + d43
            r24 = _F4 * (d14 - d24) - d34 + d44
            r25 = _F4 * (d15 - d25) - d35 + d45
            r30 = _F2 * (d30 - d10) - d20 + d40
            r31 = _F2 * (d31 - d11) - d21 + d41
            r32 = _F2 * (d32 - d12) - d22 + d42
            r33 = _F2 * (d33 - d13) - d23 + d43
            r34 = _F2 * (d34 - d14) - d24 + d44
            r35 = _F2 * (d35 - d15) - d25 + d45
            r40 = _F2 * (d10 - d30) - d20 + d40
            r41 = _F2 * (d11 - d31) - d21 + d41
            r42 = _F2 * (d12 - d32) - d22 + d42
            r43 = _F2 * (d13 - d33) - d23 + d43
            r44 = _F2 * (d14 - d34) - d24 + d44
            r45 = _F2 * (d15 - d35) - d25 + d45
            r50 = _F4 * d10 - _F5 * d30 + d50
            r51 = _F4 * d11 - _F5 * d31 + d51
            r52 = _F4 * d12 - _F5 * d32 + d52
            r53 = _F4 * d13 - _F5 * d33 + d53
            r54 = _F4 * d14 - _F5 * d34 + d54
            r55 = _F4 * d15 - _F5 * d35 + d55
            vf[q + c] = _F4 * r00 - _F5 * r02 + r04
            vf[q + c + o1] = -_F4 * (r01 + r02) + r03 + r04
            vf[q + c + o2] = _F4 * (r01 - r02) - r03 + r04
            vf[q + c + o3] = _F2 * (r03 - r01) - r02 + r04
            vf[q + c + o4] = _F2 * (r01 - r03) - r02 + r04
            vf[q + c + o5] = _F4 * r01 - _F5 * r03 + r05
            vf[q + c + o6] = _F4 * r10 - _F5 * r12 + r14
            vf[q + c + o7] = -_F4 * (r11 + r12) + r13 + r14
            vf[q + c + o8] = _F4 * (r11 - r12) - r13 + r14
            vf[q + c + o9] = _F2 * (r13 - r11) - r12 + r14
            vf[q + c + o10] = _F2 * (r11 - r13) - r12 + r14
            vf[q + c + o11] = _F4 * r11 - _F5 * r13 + r15
            vf[q + c + o12] = _F4 * r20 - _F5 * r22 + r24
            vf[q + c + o13] = -_F4 * (r21 + r22) + r23 + r24
            vf[q + c + o14] = _F4 * (r21 - r22) - r23 + r24
            vf[q + c + o15] = _F2 * (r23 - r21) - r22 + r24
            vf[q + c + o16] = _F2 * (r21 - r23) - r22 + r24
            vf[q + c + o17] = _F4 * r21 - _F5 * r23 + r25
            vf[q + c + o18] = _F4 * r30 - _F5 * r32 + r34
            vf[q + c + o19] = -_F4 * (r31 + r32) + r33 + r34
            vf[q + c + o20] = _F4 * (r31 - r32) - r33 + r34
            vf[q + c + o21] = _F2 * (r33 - r31) - r32 + r34
            vf[q + c + o22] = _F2 * (r31 - r33) - r32 + r34
            vf[q + c + o23] = _F4 * r31 - _F5 * r33 + r35
            vf[q + c + o24] = _F4 * r40 - _F5 * r42 + r44
            vf[q + c + o25] = -_F4 * (r41 + r42) + r43 + r44
            vf[q + c + o26] = _F4 * (r41 - r42) - r43 + r44
            vf[q + c + o27] = _F2 * (r43 - r41) - r42 + r44
            vf[q + c + o28] = _F2 * (r41 - r43) - r42 + r44
            vf[q + c + o29] = _F4 * r41 - _F5 * r43 + r45
            vf[q + c + o30] = _F4 * r50 - _F5 * r52 + r54
            vf[q + c + o31] = -_F4 * (r51 + r52) + r53 + r54
            vf[q + c + o32] = _F4 * (r51 - r52) - r53 + r54
            vf[q + c + o33] = _F2 * (r53 - r51) - r52 + r54
            vf[q + c + o34] = _F2 * (r51 - r53) - r52 + r54
            vf[q + c + o35] = _F4 * r51 - _F5 * r53 + r55


@njit(cache=True, nogil=True)
def _output_tiles(m, th, tw, t0, nt, out, bias, has_bias, relu, pooled, pool):
    """out's 2x2 tile t0 + k = A^T M A of m[k] ([36, O]; pixels outside `out` are dropped), plus
    `bias` when has_bias, then ReLU when relu; with `pool`, each tile's maximum into pooled[n, ti, tj]."""
    # 6 and 2, unknown to LLVM: fully unrolled, these small loops (each with a vectorised loop inside)
    # made the drivers that inline this function take seconds longer to compile, and ran no faster.
    six = m.shape[1] // 6
    two = six // 3
    n_img, oh, ow, co = out.shape
    s = np.empty((2, 6, co), out.dtype)
    y = np.empty((2, 2, co), out.dtype)
    per_img = th * tw
    for k in range(nt):
        t = t0 + k
        n = t // per_img
        ti = (t - n * per_img) // tw
        tj = t - n * per_img - ti * tw
        for j in range(six):                     # s = A^T M
            for o in range(co):
                m0, m1, m2, m3, m4, m5 = m[k, j, o], m[k, 6 + j, o], m[k, 12 + j, o], m[k, 18 + j, o], \
                    m[k, 24 + j, o], m[k, 30 + j, o]
                s[0, j, o] = m0 + m1 + m2 + m3 + m4
                s[1, j, o] = m1 - m2 + _F2 * (m3 - m4) + m5
        for p in range(two):                     # y = s A
            for o in range(co):
                s0, s1, s2, s3, s4, s5 = s[p, 0, o], s[p, 1, o], s[p, 2, o], s[p, 3, o], s[p, 4, o], s[p, 5, o]
                y0 = s0 + s1 + s2 + s3 + s4
                y1 = s1 - s2 + _F2 * (s3 - s4) + s5
                if has_bias:
                    y0 += bias[o]
                    y1 += bias[o]
                if relu:
                    y0 = max(y0, _F0)
                    y1 = max(y1, _F0)
                y[p, 0, o] = y0
                y[p, 1, o] = y1
        i0 = 2 * ti
        j0 = 2 * tj
        for p in range(two):
            if i0 + p < oh:
                for q in range(two):
                    if j0 + q < ow:
                        for o in range(co):
                            out[n, i0 + p, j0 + q, o] = y[p, q, o]
        if pool:
            for o in range(co):
                pooled[n, ti, tj, o] = max(max(y[0, 0, o], y[0, 1, o]), max(y[1, 0, o], y[1, 1, o]))


@njit(cache=True, nogil=True)
def _gradient_tiles(dy, th, tw, t0, nt, g2, dv):
    """dv[k, 6*i + j, o] = (G2 t G2^T)[i, j] for the 2x2 tile t of dy's channel o at tile t0 + k
    (zero outside dy): F(5, 2)'s transform of an output-gradient tile."""
    six = g2.shape[0]                # 6 and 2, unknown to LLVM (see _output_tiles)
    two = g2.shape[1]
    n_img, oh, ow, co = dy.shape
    t2 = np.zeros((2, 2, co), dy.dtype)
    r = np.empty((6, 2, co), dy.dtype)
    per_img = th * tw
    for k in range(nt):
        t = t0 + k
        n = t // per_img
        ti = (t - n * per_img) // tw
        tj = t - n * per_img - ti * tw
        for p in range(two):
            for q in range(two):
                if 2 * ti + p < oh and 2 * tj + q < ow:
                    for o in range(co):
                        t2[p, q, o] = dy[n, 2 * ti + p, 2 * tj + q, o]
                else:
                    for o in range(co):
                        t2[p, q, o] = 0
        for i in range(six):
            a0, a1 = g2[i, 0], g2[i, 1]
            for q in range(two):
                for o in range(co):
                    r[i, q, o] = a0 * t2[0, q, o] + a1 * t2[1, q, o]
        for i in range(six):
            for j in range(six):
                b0, b1 = g2[j, 0], g2[j, 1]
                e = 6 * i + j
                for o in range(co):
                    dv[k, e, o] = r[i, 0, o] * b0 + r[i, 1, o] * b1


@njit(cache=True, nogil=True)
def forward(x, u, out, ph, pw, bias, has_bias, relu, pooled, pool, v, m, block, fn, ilp64):
    """out = the convolution whose transformed filter is u [36, C, O] (see winograd._winograd), in
    blocks of `block` tiles through the buffers v [block, 36, _CP] and m [block, 36, O]."""
    n, oh, ow, co = out.shape
    c = x.shape[3]
    th = (oh + 1) // 2
    tw = (ow + 1) // 2
    tiles = n * th * tw
    vp, up, mp = v.ctypes.data, u.ctypes.data, m.ctypes.data
    for t0 in range(0, tiles, block):
        nt = min(block, tiles - t0)
        _input_tiles(x, ph, pw, th, tw, t0, nt, v)
        for e in range(36):
            _sgemm(fn, ilp64, _NO_TRANS, _NO_TRANS, nt, co, c, _F1, vp + 4 * e * _CP, 36 * _CP,
                   up + 4 * e * c * co, co, _F0, mp + 4 * e * co, 36 * co)
        _output_tiles(m, th, tw, t0, nt, out, bias, has_bias, relu, pooled, pool)


@njit(cache=True, nogil=True)
def filter_gradient(x, dy, ph, pw, g2, acc, v, dv, block, fn, ilp64):
    """acc [36, C, O] += the transformed filter gradient of x and dy, in blocks of `block` tiles."""
    n, oh, ow, co = dy.shape
    c = x.shape[3]
    th = (oh + 1) // 2
    tw = (ow + 1) // 2
    tiles = n * th * tw
    vp, dp, ap = v.ctypes.data, dv.ctypes.data, acc.ctypes.data
    for t0 in range(0, tiles, block):
        nt = min(block, tiles - t0)
        _input_tiles(x, ph, pw, th, tw, t0, nt, v)
        _gradient_tiles(dy, th, tw, t0, nt, g2, dv)
        for e in range(36):
            # acc_e [C, O] += v_e.T [C, nt] @ dv_e [nt, O]
            _sgemm(fn, ilp64, _TRANS, _NO_TRANS, c, co, nt, _F1, vp + 4 * e * _CP, 36 * _CP, dp + 4 * e * co, 36 * co,
                   _F1, ap + 4 * e * c * co, co)
