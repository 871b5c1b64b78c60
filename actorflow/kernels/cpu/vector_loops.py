"""Register-tiled direct convolution and the 2x2 max-pool gradient: numba loops whose innermost work
is written as LLVM vector code (16 x float32 on CPUs with AVX-512, else 8; the pool gradient 8) by
intrinsics.

Why intrinsics: numba turns LLVM's SLP vectoriser off, and its loop vectoriser cannot keep a tile of
accumulators in registers (a numba direct convolution with a 4-pixel x 32-channel tile ran LeNet's
first layer at 12 GFLOP/s). Here each intrinsic emits the tile itself: its accumulators are allocas
of <8 x float>, which LLVM promotes to registers, and the loops around them are plain LLVM loops.
Each output's taps are summed in the order a naive loop sums them (no reassociation), but each
multiply-add is fused (llvm.fmuladd, one rounding instead of two, as BLAS's SGEMM and oneDNN do; numba
with fastmath off keeps them apart): that halves the floating-point instructions, and on LeNet's
first layer (one core, Zen 4) took the forward convolution from 75 to 94 GFLOP/s and the filter
gradient from 90 to 116, with float32 errors against a float64 reference as small as before. With
16 lanes (one Zen 5 core, benchmarks/conv_kernels.py) the forward convolution (bias, ReLU, max-pool
fused or not) went from 108-114 to 184-191 GFLOP/s and the filter gradient from 120 to 182: 82-86%
of the core's SGEMM rate (kernels/cpu/sgemm.py, 222 on LeNet's first-layer GEMM), from 49-55%.

The convolution is used where an im2col GEMM is a poor shape: few input channels (LeNet's first
layer, C=1, a GEMM with K=25). The max-pool gradient stores each window's four gradients at four
offsets of one array, a loop that numba's vectoriser gives up on (too many runtime overlap checks).
Imported on first use (it imports numba and llvmlite), so importing the kernels stays cheap.
"""
from __future__ import annotations

import os

from actorflow.kernels.cpu.blas import avx512
from actorflow.kernels.lazy_numba import import_numba

import_numba()     # numba's first import, once, under its lock (another thread may be importing it)

from llvmlite import ir  # noqa: E402 - after import_numba
from numba import njit, types  # noqa: E402 - after import_numba
from numba.core import cgutils  # noqa: E402 - after import_numba
from numba.extending import intrinsic  # noqa: E402 - after import_numba

_VW = 8                     # float32 lanes of the max-pool gradient's vectors (AVX2's ymm; c a multiple of 8)
TILE_CHANNELS = 32          # output channels in one convolution tile
# The convolution tiles' lanes: 16 (one zmm) on CPUs with AVX-512, else 8; AF_CONV_LANES=8|16 overrides
# (tests run both). With 16 lanes a tile is 2 vectors of channels, so it takes twice the pixels (a forward
# tile 2 x 4 pixels, a filter-gradient tile two streams of pixels) to keep 16-20 accumulators in flight.
# numba's disk cache keys a compiled loop by the CPU, not by this choice: loops built under the override
# are not cached (_CACHE), so that neither width is ever loaded for the other.
_TW = int(os.environ.get("AF_CONV_LANES", "0")) or (16 if avx512() else 8)
if _TW not in (8, 16):
    raise ValueError(f"AF_CONV_LANES must be 8 or 16, got {_TW}")
_CACHE = "AF_CONV_LANES" not in os.environ
_CV = TILE_CHANNELS // _TW  # vectors of output channels in one tile
_FQ = 4 if _TW == 16 else 2  # pixel columns of a forward tile (of 2 rows)
_GS = 2 if _TW == 16 else 1  # pixel streams of a filter-gradient tile
GRAD_TAPS = 5               # filter taps in one filter-gradient tile (5 x _CV x _GS: 20 accumulators)

_F32 = ir.FloatType()
_V8 = ir.VectorType(_F32, _VW)
_VT = ir.VectorType(_F32, _TW)
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)


def _data(context, builder, ty, value):
    """The data pointer of array argument `value` of numba type `ty`."""
    return context.make_array(ty)(context, builder, value).data


def _vload(builder, base, off, vt=_V8):
    return builder.load(builder.bitcast(builder.gep(base, [off]), vt.as_pointer()), align=4)


def _vstore(builder, v, base, off):
    builder.store(v, builder.bitcast(builder.gep(base, [off]), v.type.as_pointer()), align=4)


def _bcast(builder, base, off, vt=_V8):
    s = builder.load(builder.gep(base, [off]))
    v = builder.insert_element(ir.Constant(vt, ir.Undefined), s, ir.Constant(_I32, 0))
    return builder.shuffle_vector(v, ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(_I32, vt.count),
                                                                                 [0] * vt.count))


def _splat(value, vt=_V8):
    return ir.Constant(vt, [value] * vt.count)


def _c(n):
    return ir.Constant(_I64, n)


def _check_args(name, arrays, ints):
    """The intrinsics read and write flat float32 arrays through raw pointers and do their index
    arithmetic in 64 bits: anything else is a typing error, not wrong code."""
    for t in arrays:
        if not (isinstance(t, types.Array) and t.dtype == types.float32 and t.ndim == 1 and t.layout == "C"):
            raise TypeError(f"vector_loops.{name}: arrays must be flat C-contiguous float32, got {t}")
    for t in ints:
        if t != types.int64:
            raise TypeError(f"vector_loops.{name}: integer arguments must be int64, got {t}")


def _accumulators(builder, count, vt=_V8):
    """`count` zeroed vector allocas (in the entry block, so LLVM keeps them in registers)."""
    accs = [cgutils.alloca_once(builder, vt) for _ in range(count)]
    for a in accs:
        builder.store(_splat(0.0, vt), a)
    return accs


def _madd(builder, acc, x, y):
    """acc += x * y as one fused multiply-add (one rounding; see the module docstring). llvm.fmuladd
    rather than llvm.fma: on a CPU without FMA instructions LLVM emits a multiply and an add instead
    of calling a correctly rounded software fma per lane."""
    vt = x.type
    fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vt, [vt] * 3), f"llvm.fmuladd.v{vt.count}f32")
    builder.store(builder.call(fma, [x, y, builder.load(acc)]), acc)


def _make_forward_tile(cols):
    @intrinsic
    def _forward_tile(typingctx, x, xo, xrow, kh, kwc, pst, rst, w, co, cb, bias, relu, out, oo, orow, pooled, po):
        """One 2 x `cols`-pixel x 32-channel tile of a stride-(rst, pst) convolution of the flat padded
        NHWC `x` by the flat [KH * KW*C, O] filter `w`: output pixel (r, q) of the tile sums, over filter
        rows a < kh and the kwc = KW*C values t of each, x[xo + r*rst + q*pst + a*xrow + t] *
        w[(a*kwc + t)*co + cb + channel]; then adds bias[cb + channel], clamps at 0 when `relu` (v <= 0
        -> 0, NaN stays), stores the pixels to out[oo + r*orow + q*co + cb ..], and when `po` >= 0 the
        maximum of each 2x2 window of them (in row-major order, a later pixel replacing the maximum only
        when greater) to pooled[po + window*co + cb ..]."""
        _check_args("_forward_tile", (x, w, bias, out, pooled), (xo, xrow, kh, kwc, pst, rst, co, cb, oo, orow, po))
        sig = types.void(x, xo, xrow, kh, kwc, pst, rst, w, co, cb, bias, relu, out, oo, orow, pooled, po)

        def codegen(context, builder, signature, args):
            (x_, xo_, xrow_, kh_, kwc_, pst_, rst_, w_, co_, cb_, bias_, relu_, out_, oo_, orow_, pooled_, po_) = args
            ty = signature.args
            xp, wp, bp = _data(context, builder, ty[0], x_), _data(context, builder, ty[7], w_), \
                _data(context, builder, ty[10], bias_)
            op, pp = _data(context, builder, ty[12], out_), _data(context, builder, ty[15], pooled_)
            pixels = [(r, q) for r in (0, 1) for q in range(cols)]
            accs = _accumulators(builder, len(pixels) * _CV, _VT)
            pix = [builder.add(builder.mul(_c(r), rst_), builder.mul(_c(q), pst_)) for r, q in pixels]
            with cgutils.for_range(builder, kh_) as la:
                xa = builder.add(xo_, builder.mul(la.index, xrow_))
                wa = builder.add(builder.mul(builder.mul(la.index, kwc_), co_), cb_)
                with cgutils.for_range(builder, kwc_) as lt:
                    xt = builder.add(xa, lt.index)
                    wt = builder.add(wa, builder.mul(lt.index, co_))
                    wv = [_vload(builder, wp, builder.add(wt, _c(_TW * v)), _VT) for v in range(_CV)]
                    for p in range(len(pixels)):
                        xs = _bcast(builder, xp, builder.add(xt, pix[p]), _VT)
                        for v in range(_CV):
                            _madd(builder, accs[p * _CV + v], xs, wv[v])
            zero = _splat(0.0, _VT)
            is_relu = builder.icmp_unsigned("!=", relu_, ir.Constant(relu_.type, 0))
            relu_mask = _splat_i1(builder, is_relu, _TW)
            do_pool = builder.icmp_signed(">=", po_, _c(0))
            for v in range(_CV):
                off = builder.add(cb_, _c(_TW * v))
                b = _vload(builder, bp, off, _VT)
                done = {}
                for p, (r, q) in enumerate(pixels):
                    s = builder.fadd(builder.load(accs[p * _CV + v]), b)
                    clamp = builder.and_(builder.fcmp_ordered("<=", s, zero), relu_mask)
                    s = builder.select(clamp, zero, s)
                    o = builder.add(builder.add(oo_, off), builder.add(builder.mul(_c(r), orow_), builder.mul(_c(q), co_)))
                    _vstore(builder, s, op, o)
                    done[r, q] = s
                with builder.if_then(do_pool):
                    for win in range(cols // 2):
                        best = None
                        for r, q in ((0, 2 * win), (0, 2 * win + 1), (1, 2 * win), (1, 2 * win + 1)):
                            s = done[r, q]
                            best = s if best is None else builder.select(builder.fcmp_ordered(">", s, best), s, best)
                        _vstore(builder, best, pp, builder.add(builder.add(po_, off), builder.mul(_c(win), co_)))
            return context.get_dummy_value()
        return sig, codegen
    return _forward_tile


_forward_tile = _make_forward_tile(_FQ)          # the tile of the image's columns
_forward_tile2 = _make_forward_tile(2)           # the last two columns, where _FQ does not divide them


def _splat_i1(builder, flag, width=_VW):
    """<width x i1> of the i1 `flag`."""
    vt = ir.VectorType(ir.IntType(1), width)
    v = builder.insert_element(ir.Constant(vt, ir.Undefined), flag, ir.Constant(_I32, 0))
    return builder.shuffle_vector(v, ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(_I32, width), [0] * width))


@intrinsic
def _filter_grad_tile(typingctx, x, xo, toff, k0, dy, yo, co, cb, oh, ow, rst, pst, dw):
    """Adds to dw[(k0 + t)*co + cb + channel], for GRAD_TAPS taps t and 32 channels, the sum over the
    oh x ow output pixels (i, j) of one image of x[xo + i*rst + j*pst + toff[k0 + t]] *
    dy[yo + (i*ow + j)*co + cb + channel]: with _GS streams, pixel j of a row goes to stream j % _GS
    (an odd last one to stream 0), each stream summed pixel by pixel in row-major order, then the
    streams added in order."""
    _check_args("_filter_grad_tile", (x, dy, dw), (xo, k0, yo, co, cb, oh, ow, rst, pst, toff.dtype))
    sig = types.void(x, xo, toff, k0, dy, yo, co, cb, oh, ow, rst, pst, dw)

    def codegen(context, builder, signature, args):
        x_, xo_, toff_, k0_, dy_, yo_, co_, cb_, oh_, ow_, rst_, pst_, dw_ = args
        ty = signature.args
        xp, tp = _data(context, builder, ty[0], x_), _data(context, builder, ty[2], toff_)
        yp, dp = _data(context, builder, ty[4], dy_), _data(context, builder, ty[12], dw_)
        accs = [_accumulators(builder, GRAD_TAPS * _CV, _VT) for _ in range(_GS)]
        offs = [builder.load(builder.gep(tp, [builder.add(k0_, _c(t))])) for t in range(GRAD_TAPS)]

        def pixel(xi, yi, j, acc):
            xj = builder.add(xi, builder.mul(j, pst_))
            yj = builder.add(yi, builder.mul(j, co_))
            dyv = [_vload(builder, yp, builder.add(yj, _c(_TW * v)), _VT) for v in range(_CV)]
            for t in range(GRAD_TAPS):
                xs = _bcast(builder, xp, builder.add(xj, offs[t]), _VT)
                for v in range(_CV):
                    _madd(builder, acc[t * _CV + v], xs, dyv[v])
        with cgutils.for_range(builder, oh_) as li:
            xi = builder.add(xo_, builder.mul(li.index, rst_))
            yi = builder.add(builder.add(yo_, builder.mul(builder.mul(li.index, ow_), co_)), cb_)
            with cgutils.for_range(builder, builder.udiv(ow_, _c(_GS))) as lj:
                for g in range(_GS):
                    pixel(xi, yi, builder.add(builder.mul(lj.index, _c(_GS)), _c(g)), accs[g])
            if _GS > 1:
                with cgutils.for_range(builder, builder.urem(ow_, _c(_GS))) as lr:
                    pixel(xi, yi, builder.add(builder.mul(builder.udiv(ow_, _c(_GS)), _c(_GS)), lr.index), accs[0])
        for t in range(GRAD_TAPS):
            row = builder.add(builder.mul(builder.add(k0_, _c(t)), co_), cb_)
            for v in range(_CV):
                o = builder.add(row, _c(_TW * v))
                total = builder.load(accs[0][t * _CV + v])
                for g in range(1, _GS):
                    total = builder.fadd(total, builder.load(accs[g][t * _CV + v]))
                _vstore(builder, builder.fadd(_vload(builder, dp, o, _VT), total), dp, o)
        return context.get_dummy_value()
    return sig, codegen


@njit(nogil=True, cache=_CACHE)
def forward(xpad, hp, wp, c, f, kh, kw, sh, sw, bias, relu, oh, ow, co, out, pooled, pool):
    """Convolution of the flat zero-padded NHWC `xpad` ([N, hp, wp, c], the padding before at (0, 0))
    by the flat [kh*kw*c, co] filter `f` into the flat [N, oh, ow, co] `out`, plus `bias`, clamped at
    0 when `relu`; when `pool`, the 2x2 stride-2 max-pool of that into the flat `pooled`. oh and ow
    are even and co a multiple of TILE_CHANNELS."""
    n_img = xpad.shape[0] // (hp * wp * c)
    xrow = wp * c
    wide = ow - ow % _FQ            # columns in tiles of _FQ; the last two, if left, in a 2x2 tile
    for n in range(n_img):
        for i in range(0, oh, 2):
            for j in range(0, ow, 2):
                if j % _FQ != 0 and j < wide:
                    continue
                xo = ((n * hp + i * sh) * wp + j * sw) * c
                oo = ((n * oh + i) * ow + j) * co
                po = ((n * (oh // 2) + i // 2) * (ow // 2) + j // 2) * co if pool else -1
                for cb in range(0, co, TILE_CHANNELS):
                    if j < wide:
                        _forward_tile(xpad, xo, xrow, kh, kw * c, sw * c, sh * xrow, f, co, cb, bias, relu, out, oo,
                                      ow * co, pooled, po)
                    else:
                        _forward_tile2(xpad, xo, xrow, kh, kw * c, sw * c, sh * xrow, f, co, cb, bias, relu, out, oo,
                                       ow * co, pooled, po)


@njit(nogil=True, cache=_CACHE)
def filter_grad(xpad, hp, wp, c, toff, sh, sw, dy, oh, ow, co, dw):
    """Adds the filter gradient of the flat zero-padded NHWC `xpad` ([N, hp, wp, c]) and the flat
    [N, oh, ow, co] `dy` into the flat [K, co] `dw` (K a multiple of GRAD_TAPS): row k of it is
    filter tap k, at offset toff[k] from a window's first input value (dummy taps past the filter's
    read offset 0 and are dropped by the caller), summed image by image."""
    n_img = xpad.shape[0] // (hp * wp * c)
    for n in range(n_img):
        xo = n * hp * wp * c
        yo = n * oh * ow * co
        for k0 in range(0, toff.shape[0], GRAD_TAPS):
            for cb in range(0, co, TILE_CHANNELS):
                _filter_grad_tile(xpad, xo, toff, k0, dy, yo, co, cb, oh, ow, sh * wp * c, sw * c, dw)


@intrinsic
def _pool_grad_2x2(typingctx, x, g, rows, ow, c, relu, with_db, db, dx):
    """The gradient of a 2x2 stride-2 max-pool that covers the flat NHWC `x` exactly ([rows/oh images,
    2*oh, 2*ow, c], c a multiple of 8), with pooled gradient `g` ([rows, ow, c]), into `dx`: each
    window's gradient goes to its first maximum in row-major order (a later pixel wins only when
    greater, as TF's kernel), 0 elsewhere; when `relu`, then times (x > 0) as ReluGrad writes it
    (g where x > 0, else g * 0); when `with_db`, the channel sums of the result added into db[c],
    pixel by pixel in row-major window order. Every element of `dx` is written once."""
    _check_args("_pool_grad_2x2", (x, g, db, dx), (rows, ow, c))
    sig = types.void(x, g, rows, ow, c, relu, with_db, db, dx)

    def codegen(context, builder, signature, args):
        x_, g_, rows_, ow_, c_, relu_, with_db_, db_, dx_ = args
        ty = signature.args
        xp, gp = _data(context, builder, ty[0], x_), _data(context, builder, ty[1], g_)
        bp, dp = _data(context, builder, ty[7], db_), _data(context, builder, ty[8], dx_)
        zero = _splat(0.0)
        relu_mask = _splat_i1(builder, builder.icmp_unsigned("!=", relu_, ir.Constant(relu_.type, 0)))
        do_db = builder.icmp_unsigned("!=", with_db_, ir.Constant(with_db_.type, 0))
        row = builder.mul(builder.mul(ow_, c_), _c(2))              # one input row
        with cgutils.for_range(builder, rows_) as lr:
            top = builder.mul(builder.mul(lr.index, row), _c(2))
            orow = builder.mul(builder.mul(lr.index, ow_), c_)
            with cgutils.for_range(builder, ow_) as lj:
                a = builder.add(top, builder.mul(builder.mul(lj.index, c_), _c(2)))
                o = builder.add(orow, builder.mul(lj.index, c_))
                with cgutils.for_range(builder, builder.udiv(c_, _c(_VW))) as lc:
                    off = builder.mul(lc.index, _c(_VW))
                    at = [builder.add(builder.add(a, d), off) for d in (_c(0), c_, row, builder.add(row, c_))]
                    xs = [_vload(builder, xp, p) for p in at]
                    gv = _vload(builder, gp, builder.add(o, off))
                    best, ups = xs[0], []
                    for q in (1, 2, 3):
                        up = builder.fcmp_ordered(">", xs[q], best)
                        best = builder.select(up, xs[q], best)
                        ups.append(up)
                    # pixel q wins when it raised the maximum and no later pixel did
                    later = builder.or_(ups[1], ups[2])
                    wins = [builder.not_(builder.or_(ups[0], later)), builder.and_(ups[0], builder.not_(later)),
                            builder.and_(ups[1], builder.not_(ups[2])), ups[2]]
                    vals = []
                    for q in range(4):
                        d = builder.select(wins[q], gv, zero)
                        dead = builder.and_(relu_mask, builder.not_(builder.fcmp_ordered(">", xs[q], zero)))
                        d = builder.select(dead, builder.fmul(d, zero), d)
                        _vstore(builder, d, dp, at[q])
                        vals.append(d)
                    with builder.if_then(do_db):
                        s = _vload(builder, bp, off)
                        for d in vals:
                            s = builder.fadd(s, d)
                        _vstore(builder, s, bp, off)
        return context.get_dummy_value()
    return sig, codegen


@njit(nogil=True, cache=True)
def max_pool_grad_2x2(x, g, rows, ow, c, relu, db, dx):
    """_pool_grad_2x2 over flat arrays (see there); channel sums into `db` when it has c entries."""
    _pool_grad_2x2(x, g, rows, ow, c, relu, db.shape[0] == c, db, dx)
