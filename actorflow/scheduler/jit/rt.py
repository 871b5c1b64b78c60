"""Helpers that generated JIT code calls: reductions over the rows of a 2-D view, softmax and
cross-entropy (the kernels' own fused loops), small GEMMs, concatenation and the histories of a
loop's saved values; all numba functions compiled once per signature and cached on disk.

Generated kernels call these rather than spelling out their loops: numba compiles a helper once
per argument types for every kernel of every graph (and caches it), where code inlined in a
kernel is compiled again in each kernel that has it, about 0.1 s a loop nest. Only jitted code
calls them: they have no Python wrapper (`no_cpython_wrapper`), which would be compiled with each
signature for nothing (0.15-0.2 s of a loss kernel's compile with numba's cache empty).
"""
from __future__ import annotations

import numpy as np

from actorflow.kernels.lazy_numba import import_numba

import_numba()     # numba's first import, once, under its lock (another thread may be importing it)

from numba import njit  # noqa: E402 - after import_numba

from actorflow.kernels.cpu import philox as _philox  # noqa: E402 - after import_numba
from actorflow.kernels.cpu.softmax import _softmax_rows, _xent_dense, _xent_sparse  # noqa: E402 - after import_numba
from actorflow.scheduler.jit import blascall as _blas  # noqa: E402 - after import_numba

__all__ = ["empty", "reshape", "fill", "div_all", "row_sum", "row_prod", "row_max", "row_min", "row_all", "row_any",
           "softmax", "xent", "sparse_xent", "gemm", "concat_into", "save_row", "save_scalar", "row",
           "random_uniform_f32", "random_uniform_f64", "random_normal_f32", "random_normal_f64",
           "truncated_normal_f32", "truncated_normal_f64"]


# -- arrays ------------------------------------------------------------------------------------
# A kernel allocates and reshapes through these rather than with `np.empty` or `.reshape` in its
# own code: numba implements those as jitted overloads that every process compiles again, for
# each shape-tuple type and dtype, the first time a kernel uses them (0.05-0.1 s each; about
# 0.4 s of the MLP's loss kernel with an empty JIT cache), where these are compiled once per
# signature and then loaded from numba's cache. Sizes are passed as int64 (never literals or
# int32: each type would be one more signature to compile).
@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def empty(shape, dtype):
    """``np.empty(shape, dtype)``: `shape` a tuple of int64."""
    return np.empty(shape, dtype)


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def reshape(x, shape):
    """``np.ascontiguousarray(x).reshape(shape)`` (a view when `x` is C-contiguous)."""
    return np.ascontiguousarray(x).reshape(shape)


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def fill(x, value):
    """Every element of C-contiguous `x` set to `value` (cast to x's dtype); returns `x`."""
    xf = x.reshape(-1)
    for q in range(xf.size):
        xf[q] = value
    return x


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def div_all(x, d):
    """Every element of C-contiguous `x` divided by `d` (of x's dtype) in place (a Mean's sums
    by their count); returns `x`."""
    xf = x.reshape(-1)
    for q in range(xf.size):
        xf[q] = xf[q] / d
    return x


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def row_sum(x, out):
    rows, cols = x.shape
    for r in range(rows):
        acc = out[r]
        for c in range(cols):
            acc += x[r, c]
        out[r] = acc
    return out


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def row_prod(x, out):
    rows, cols = x.shape
    for r in range(rows):
        acc = out[r]
        for c in range(cols):
            acc *= x[r, c]
        out[r] = acc
    return out


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def row_max(x, out):
    rows, cols = x.shape
    for r in range(rows):
        acc = out[r]
        for c in range(cols):
            v = x[r, c]
            if v > acc or v != v:
                acc = v
        out[r] = acc
    return out


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def row_min(x, out):
    rows, cols = x.shape
    for r in range(rows):
        acc = out[r]
        for c in range(cols):
            v = x[r, c]
            if v < acc or v != v:
                acc = v
        out[r] = acc
    return out


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def row_all(x, out):
    rows, cols = x.shape
    for r in range(rows):
        acc = True
        for c in range(cols):
            acc = acc and x[r, c]
        out[r] = acc
    return out


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def row_any(x, out):
    rows, cols = x.shape
    for r in range(rows):
        acc = False
        for c in range(cols):
            acc = acc or x[r, c]
        out[r] = acc
    return out


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def softmax(x, log):
    rows = np.ascontiguousarray(x).reshape((-1, x.shape[-1]))
    out = np.empty_like(rows)
    if rows.size:
        _softmax_rows(rows, out, log)
    return out.reshape(x.shape)


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def xent(x, labels):
    xc = np.ascontiguousarray(x)
    lab = np.ascontiguousarray(labels)
    loss = np.empty(x.shape[0], x.dtype)
    back = np.empty_like(xc)
    _xent_dense(xc, lab, loss, back)
    return loss, back


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def sparse_xent(x, labels, loss, back):
    """SparseSoftmaxCrossEntropyWithLogits into `loss` [rows] and `back` [rows, classes] (the
    kernel allocates them with `empty`, whose signatures its other arrays share: no allocation
    here to compile): the kernel's row loop; a label outside [0, classes) raises (the interpreted
    op then reports it, naming the label)."""
    rows, cols = x.shape
    if labels.shape[0] != rows:
        raise ValueError("SparseSoftmaxCrossEntropyWithLogits: labels and features differ in rows")
    for r in range(rows):
        if labels[r] < 0 or labels[r] >= cols:
            raise ValueError("SparseSoftmaxCrossEntropyWithLogits: a label is out of range")
    _xent_sparse(x, labels, loss, back)
    return loss, back


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def gemm(a, b, ta, tb, out, acc):
    """MatMul of 2-D `a` and `b` (transposed as `ta`, `tb` say) into `out`: out[i, j] (+)= the sum
    over k of op(a)[i, k] * op(b)[k, j], each sum in k's order, as the interpreted kernels do;
    `acc`: add each sum to out's element (``v + MatMul(a, b)`` in v's own buffer) rather than
    store it. Explicit loops: for small static GEMMs (an RNN cell's) they beat a BLAS call's
    overhead. One function for every variant: one compile, however many kernels use it."""
    m, k = (a.shape[1], a.shape[0]) if ta else (a.shape[0], a.shape[1])
    k2, n = (b.shape[1], b.shape[0]) if tb else (b.shape[0], b.shape[1])
    if k != k2 or out.shape[0] != m or out.shape[1] != n:
        raise ValueError("MatMul: shapes differ")
    zero = out.dtype.type(0)
    # With b transposed, b's transpose is copied first: the loops below then run along rows of both
    # (each sum still in k's order, the same bits), which LLVM vectorizes across j; the dot products
    # along rows of b that it replaces could not be (a float sum's order is fixed): 124 us against
    # 10 for a 32x128x48 product (an LSTM cell's input gradient).
    bk = np.ascontiguousarray(b.T) if tb else b
    row = np.empty(n, out.dtype)
    for i in range(m):
        for j in range(n):
            row[j] = zero
        for q in range(k):
            aik = a[q, i] if ta else a[i, q]
            for j in range(n):
                row[j] += aik * bk[q, j]
        for j in range(n):
            out[i, j] = out[i, j] + row[j] if acc else row[j]
    return out


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _blas_operand(x):
    """(x or a C-order copy, cblas transpose code, leading dimension) for reading 2-D `x` in place."""
    isz = x.itemsize
    r, c = x.shape
    s0, s1 = x.strides
    if (c == 1 or s1 == isz) and (r == 1 or (s0 > 0 and s0 % isz == 0 and s0 // isz >= c)):
        return x, 111, max(s0 // isz if r > 1 else c, 1)
    if (r == 1 or s0 == isz) and (c == 1 or (s1 > 0 and s1 % isz == 0 and s1 // isz >= r)):
        return x, 112, max(s1 // isz if c > 1 else r, 1)
    y = np.ascontiguousarray(x)
    return y, 111, max(c, 1)


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def blas_gemm(tab, a, b, ta, tb, out, acc):
    """`gemm` through cblas (blascall.py): out (+)= op(a) @ op(b) for C-contiguous `out`; a GEMM
    of a loop too big for the explicit loops."""
    m, k = (a.shape[1], a.shape[0]) if ta else (a.shape[0], a.shape[1])
    k2, n = (b.shape[1], b.shape[0]) if tb else (b.shape[0], b.shape[1])
    if k != k2 or out.shape[0] != m or out.shape[1] != n:
        raise ValueError("MatMul: shapes differ")
    a2, ca, lda = _blas_operand(a)
    b2, cb, ldb = _blas_operand(b)
    if ta:
        ca = 223 - ca                   # 111 <-> 112
    if tb:
        cb = 223 - cb
    one = out.dtype.type(1)
    beta = one if acc else out.dtype.type(0)
    if m and n:
        _blas.gemm(tab, ca, cb, m, n, k, one, a2.ctypes.data, lda, b2.ctypes.data, ldb, beta, out.ctypes.data,
                   max(n, 1))            # (k == 0: BLAS sets out to beta * out)
    return out


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def set_row(t, i, u):
    """Row `i` of C-contiguous `t` (along axis 0) becomes the elements of `u` (its leading dimension 1,
    the rest a row's: the caller checked), in place; returns `t`. (An explicit loop: numba's array
    assignment with broadcasting compiles its shape-error message, 3.4 s of a loop's compile.)"""
    tf = t.reshape(-1)
    uf = np.ascontiguousarray(u).reshape(-1)
    n = uf.size
    off = i * n
    for q in range(n):
        tf[off + q] = uf[q]
    return t


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def add_row(t, i, u):
    """`set_row`, adding: row `i` of `t` plus the elements of `u` (TensorScatterAdd of one row)."""
    tf = t.reshape(-1)
    uf = np.ascontiguousarray(u).reshape(-1)
    n = uf.size
    off = i * n
    for q in range(n):
        tf[off + q] = tf[off + q] + uf[q]
    return t


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def concat_into(o, x, axis, off):
    """Copies `x` into C-contiguous `o` at offset `off` along `axis` (one piece of a ConcatV2)."""
    xc = np.ascontiguousarray(x)
    outer = 1
    post = 1
    for d in range(xc.ndim):
        if d != axis and xc.shape[d] != o.shape[d]:
            raise ValueError("ConcatV2: dimensions differ")
        if d < axis:
            outer *= xc.shape[d]
        elif d > axis:
            post *= xc.shape[d]
    if off + xc.shape[axis] > o.shape[axis]:
        raise ValueError("ConcatV2: dimensions differ")
    of = o.reshape(-1)
    xf = xc.reshape(-1)
    ix = xc.shape[axis] * post
    io = o.shape[axis] * post
    for r in range(outer):
        for q in range(ix):
            of[r * io + off * post + q] = xf[r * ix + q]
    return o


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _grown(h, it):
    """`h` with room for row `it` (twice the rows, or 16, when full)."""
    if it < h.shape[0]:
        return h
    g = np.empty((max(16, 2 * it),) + h.shape[1:], h.dtype)
    gf = g.reshape(-1)
    hf = h.reshape(-1)
    for q in range(hf.size):
        gf[q] = hf[q]
    return g


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def save_row(h, it, x):
    """History `h` (C-contiguous, one row per iteration) with row `it` set to array `x`; a new
    history of twice the rows when `h` is full. Rows keep the first row's shape."""
    xc = np.ascontiguousarray(x)
    if it == 0 and h.shape[0] == 0:
        h = np.empty((16,) + xc.shape, h.dtype)
    h = _grown(h, it)
    if xc.shape != h.shape[1:]:
        raise ValueError("a saved value changed shape between iterations")
    hf = h.reshape(-1)
    xf = xc.reshape(-1)
    base = it * xf.size
    for q in range(xf.size):
        hf[base + q] = xf[q]
    return h


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def save_scalar(h, it, x):
    """History `h` (1-D) with element `it` set to `x` (twice the length when full)."""
    h = _grown(h, it)
    h[it] = x
    return h



@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def row(h, i):
    """Row `i` of history `h` (a gradient loop's read of a value its forward loop saved)."""
    if i < 0 or i >= h.shape[0]:
        raise ValueError("no value was saved for this iteration")
    return h[i]


# -- random ops in a loop ------------------------------------------------------------------------
# A stateful random op compiled into a loop draws from its session's Philox stream as its kernel
# does (kernels/cpu/random.py): `state` is (key low, key high, counter words 0-3) as uint64 values
# of 32 bits, read from the op's PhiloxStream before the loop and written back after; each run
# fills `out` from the counter and moves it on by RESERVED_BLOCKS_PER_OUTPUT blocks an element
# (TF's GuardedPhiloxRandom), so the iterations draw the numbers the actors' runs would.
@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _advance(state, n):
    c0, c1, c2, c3 = _philox._add_counter(state[2], state[3], state[4], state[5],
                                          np.uint64(n) * np.uint64(_philox.RESERVED_BLOCKS_PER_OUTPUT))
    state[2] = c0
    state[3] = c1
    state[4] = c2
    state[5] = c3


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def random_uniform_f32(state, out):
    """TF's RandomUniform of float32 into C-contiguous `out` (any shape); returns `out`."""
    flat = out.reshape(-1)
    if flat.size:
        _philox._uniform_f32(state[0], state[1], state[2], state[3], state[4], state[5], flat)
    _advance(state, flat.size)
    return out


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def random_uniform_f64(state, out):
    """TF's RandomUniform of float64 (two words a double) into C-contiguous `out`; returns `out`."""
    flat = out.reshape(-1)
    n = flat.size
    if n:
        _philox._uniform_f64(_words(state, (n + 1) // 2), flat)
    _advance(state, n)
    return out


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _words(state, n):
    """The stream's words for `n` blocks of four from its counter (what philox.words reads)."""
    words = np.empty(4 * n, np.uint32)
    _philox._fill_words(state[0], state[1], state[2], state[3], state[4], state[5], words)
    return words


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def random_normal_f32(state, out):
    """TF's RandomStandardNormal of float32 (Box-Muller on word pairs) into C-contiguous `out`."""
    flat = out.reshape(-1)
    n = flat.size
    if n:
        _philox._normal_f32(_words(state, (n + 3) // 4), flat)
    _advance(state, n)
    return out


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def random_normal_f64(state, out):
    """TF's RandomStandardNormal of float64 (Box-Muller on whole blocks) into C-contiguous `out`."""
    flat = out.reshape(-1)
    n = flat.size
    if n:
        _philox._normal_f64(_words(state, (n + 1) // 2), flat)
    _advance(state, n)
    return out


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def truncated_normal_f32(state, out):
    """TF's TruncatedNormal of float32 (|x| >= 2 redrawn per output group) into C-contiguous `out`."""
    flat = out.reshape(-1)
    if flat.size:
        _philox._truncated_f32(state[0], state[1], state[2], state[3], state[4], state[5], flat)
    _advance(state, flat.size)
    return out


@njit(nogil=True, cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def truncated_normal_f64(state, out):
    """TF's TruncatedNormal of float64 into C-contiguous `out`."""
    flat = out.reshape(-1)
    if flat.size:
        _philox._truncated_f64(state[0], state[1], state[2], state[3], state[4], state[5], flat)
    _advance(state, flat.size)
    return out
