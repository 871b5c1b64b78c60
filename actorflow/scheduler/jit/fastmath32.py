"""float32 exp and tanh for generated element-wise loops, in a form LLVM vectorizes.

numba compiles ``np.exp`` and ``np.tanh`` of a float32 to calls of the C library's expf and tanhf:
one call per element, which stops LLVM from vectorizing the loop around them (numba's SVML path
needs Intel's runtime, which actorflow does not install). An LSTM cell of batch 32 and width 32
evaluates 5,120 of them a step: about 30 us, more than its GEMM. These are the Cephes single-
precision algorithms that TensorFlow's Eigen kernels also use (range reduction to [-ln2/2, ln2/2]
and a degree-5 polynomial for exp; an odd polynomial near 0 and ``1 - 2 / (exp(2|x|) + 1)`` beyond
for tanh), written branch-free (selects, and 2**n built from its bits), inlined into the loop.

They agree with numpy's float32 exp and tanh to within 2 ulp (tests/test_jit.py compares them on
a dense grid), as numba's libm calls already did not agree bit for bit with numpy's own SIMD loops.
inf, -inf and NaN give what numpy gives; exp's results under 2**-126 lose precision gradually as
numpy's do (2**n is applied in two halves, so no intermediate underflows early).

This module imports nothing but numba and llvmlite: generated code that uses it does not pay for
importing rt.
"""
from __future__ import annotations

import numpy as np

from actorflow.kernels.lazy_numba import import_numba

import_numba()     # numba's first import, once, under its lock (another thread may be importing it)

from llvmlite import ir  # noqa: E402 - after import_numba
from numba import njit, types  # noqa: E402 - after import_numba
from numba.extending import intrinsic  # noqa: E402 - after import_numba

__all__ = ["exp32", "tanh32"]

_F = np.float32
_LOG2E = _F(1.44269504088896341)
_C1 = _F(0.693359375)                 # ln 2 = _C1 - _C2, _C1 exact in a few bits
_C2 = _F(-2.12194440e-4)
_P0, _P1, _P2 = _F(1.9875691500e-4), _F(1.3981999507e-3), _F(8.3334519073e-3)
_P3, _P4, _P5 = _F(4.1665795894e-2), _F(1.6666665459e-1), _F(5.0000001201e-1)
_HI = _F(88.72283905206835)           # above: inf
_LO = _F(-103.972084)                 # below: 0 (exp's result rounds to 0 there)
_T0, _T1, _T2 = _F(-5.70498872745e-3), _F(2.06390887954e-2), _F(-5.37397155531e-2)
_T3, _T4 = _F(1.33314422036e-1), _F(-3.33332819422e-1)
_ONE, _TWO, _HALF, _SMALL = _F(1), _F(2), _F(0.5), _F(0.625)
_INF = _F(np.inf)


@intrinsic
def _pow2(typingctx, n):
    """2.0**n as a float32, for an integer n in [-126, 127], built from its bits."""
    if not isinstance(n, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        v = args[0]
        if v.type.width > 32:
            v = builder.trunc(v, i32)
        elif v.type.width < 32:
            v = builder.sext(v, i32)
        bits = builder.shl(builder.add(v, ir.Constant(i32, 127)), ir.Constant(i32, 23))
        return builder.bitcast(bits, ir.FloatType())
    return types.float32(n), codegen


# exp32 is an ordinary numba function: LLVM inlines it where it is called and vectorizes the loop,
# and numba types it once (inlined by numba, every call site typed it anew: a loop with five
# transcendental functions compiled 0.3 s longer). tanh32 is inlined by numba: LLVM did not inline
# it whole, and the loop around its call ran scalar (9.6 against 1.0 ns an element).
@njit(cache=True)
def exp32(x):
    xc = _LO if x < _LO else x
    xc = _HI if xc > _HI else xc
    fx = np.floor(xc * _LOG2E + _HALF)
    r = xc - fx * _C1 - fx * _C2
    z = r * r
    y = (((((_P0 * r + _P1) * r + _P2) * r + _P3) * r + _P4) * r + _P5) * z + r + _ONE
    n = np.int64(fx)
    h = n >> 1                        # 2**n in two halves, each a normal float32
    y = y * _pow2(h) * _pow2(n - h)
    return _INF if x > _HI else y


@njit(inline="always", cache=True)
def tanh32(x):
    a = -x if x < 0 else x
    z = x * x
    small = ((((_T0 * z + _T1) * z + _T2) * z + _T3) * z + _T4) * z * x + x
    small = x if z == 0 else small      # (-0.0 stays -0.0)
    big = _ONE - _TWO / (exp32(_TWO * a) + _ONE)
    big = -big if x < 0 else big
    return small if a < _SMALL else big
