"""CPU kernels for MatMul, BatchMatMulV2 and _FusedMatMul (MatMul + BiasAdd (+ Relu), or MatMul +
ReluGrad).

GEMMs go through ``blas.matmul`` (MKL when installed, else numpy's BLAS); a big product splits into
row or column blocks over the kernel pool (see gemm_blocks).
"""
from __future__ import annotations

import functools

import numpy as np

from actorflow.kernels.cpu import aligned as _aligned
from actorflow.kernels.cpu.bias import _fused_epilogue, fused_epilogue_block
from actorflow.kernels.cpu.blas import matmul as gemm
from actorflow.kernels.cpu.math import relu_grad, relu_grad_in_place, relu_grad_in_place_ok
from actorflow.kernels.registry import MAC_NS, register_kernel

# GEMM kernels compute in register blocks 16 floats wide (AVX-512): a dimension under that costs
# about as much as 16. Measured single-threaded (MKL, AMD EPYC Zen 4): 256x1024x10 took 117 us,
# 256x10x1024 100-138 us and the transposed 1024x256x10 91-165 us, 0.038-0.063 ns per multiply-add
# against 0.021 for the MLP's big products; padded to 16 they cost 105 us at MAC_NS.
_GEMM_BLOCK = 16
# A product of fewer multiply-adds per thread than this (counted as _matmul_cost counts them) runs
# whole: its blocks would each take under ~150 us, about what handing one to a pool thread and
# waiting for it costs. On the MLP step (256 rows), the 256x1024x10 forward product took 0.29 ms
# split in two and 0.23 whole, its 256x10x1024 input gradient 0.34 and 0.30 (medians of the
# synchronous path's kernel times, the constant switched every 5 steps in one process); the whole
# step moves by less than the machine's noise (benchmarks/gemm_align.py: 0.994 and 1.002).
MIN_SPLIT_MACS = 6_000_000


def _matmul_cost(a, b):
    """The multiply-adds of op(a) @ op(b) as a GEMM computes them: m*k*n whatever the transposes,
    each dimension under _GEMM_BLOCK counted as _GEMM_BLOCK."""
    # (called for every product whose shapes are not static, every step: plain int arithmetic)
    try:
        a_shape, b_shape = a.shape, b.shape
    except AttributeError:
        a_shape, b_shape = np.shape(a), np.shape(b)
    if len(a_shape) != 2 or len(b_shape) != 2:
        return int(np.size(a)) + int(np.size(b))
    (a0, a1), (b0, b1) = a_shape, b_shape
    # k is shared; a.size = m*k, b.size = k*n. Either dim of b can be k depending on transpose_b:
    # pick the one a also has (exact unless both match, then an estimate).
    k = b0 if b0 == a0 or b0 == a1 else b1
    if k < 1:
        k = 1
    m, n = a0 * a1 // k, b0 * b1 // k
    g = _GEMM_BLOCK
    return (m if m > g else g) * (k if k > g else g) * (n if n > g else g)


def gemm_blocks(m: int, n: int, k: int, parts: int):
    """How to split an [m, k] @ [k, n] product over `parts` threads: ("rows" | "cols", [(lo, hi),
    ...]), or None when it is too small. Every block packs the whole of the operand it does not
    split, so the split goes through the bigger operand: column blocks when the right operand is
    the bigger (a batch against a wide layer), row blocks otherwise. (On the MLP of the train_step
    benchmark this made the step 6-10% faster than row blocks everywhere.)"""
    if max(m, _GEMM_BLOCK) * max(n, _GEMM_BLOCK) * max(k, _GEMM_BLOCK) < MIN_SPLIT_MACS * parts:
        return None
    rows_ok, cols_ok = m >= 64 * parts, n >= 64 * parts
    if cols_ok and (not rows_ok or k * n > m * k):
        axis, size = "cols", n
    elif rows_ok:
        axis, size = "rows", m
    else:
        return None
    bounds = [size * i // parts for i in range(parts + 1)]
    return axis, list(zip(bounds[:-1], bounds[1:]))


def gemm_block_operands(axis, lo, hi, a2, b2, out):
    """(a block, b block, out block) of block [lo, hi) along `axis` (see gemm_blocks)."""
    if axis == "rows":
        return a2[lo:hi], b2, out[lo:hi]
    return a2, b2[:, lo:hi], out[:, lo:hi]


def _matmul_split(attrs):
    """Row (or column) blocks of ``op(a) @ op(b)``, each written by its own BLAS call into one output."""
    ta, tb = bool(attrs.get("transpose_a", False)), bool(attrs.get("transpose_b", False))

    def split(parts, a, b):
        a, b = np.asarray(a), np.asarray(b)
        if a.ndim != 2 or b.ndim != 2:
            return None
        a2 = a.T if ta else a
        b2 = b.T if tb else b
        if a2.shape[1] != b2.shape[0]:
            return None           # the kernel reports shape errors
        m, n = a2.shape[0], b2.shape[1]
        blocks = gemm_blocks(m, n, a2.shape[1], parts)
        if blocks is None:
            return None           # small products are not worth it
        out = _aligned.empty((m, n), np.result_type(a2.dtype, b2.dtype))
        axis, bounds = blocks
        return out, [functools.partial(gemm, *gemm_block_operands(axis, lo, hi, a2, b2, out)) for lo, hi in bounds]
    return split


@register_kernel("MatMul", "CPU", cost=_matmul_cost, unit_ns=MAC_NS, split=_matmul_split)
def matmul(attrs):
    """tf.raw_ops.MatMul: ``op(a) @ op(b)`` with op a transpose when transpose_a/transpose_b is set.

    Transposes are views, so BLAS reads the operands in place with a transposed flag.
    """
    ta, tb = bool(attrs.get("transpose_a", False)), bool(attrs.get("transpose_b", False))

    def fn(a, b):
        return gemm(*matmul_operands(a, b, ta, tb))
    return fn


def matmul_operands(a, b, ta: bool, tb: bool):
    """(op(a), op(b)) as views, checked the way MatMul checks them (ValueError otherwise)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"MatMul: inputs must be 2-D matrices, got shapes {a.shape} and {b.shape}")
    a2 = a.T if ta else a
    b2 = b.T if tb else b
    if a2.shape[1] != b2.shape[0]:
        raise ValueError(f"MatMul: inner dimensions differ: op(a) is {a2.shape} and op(b) is {b2.shape} "
                         f"(transpose_a={ta}, transpose_b={tb})")
    return a2, b2


# --------------------------------------------------------------------------------------------
# _FusedMatMul: MatMul + BiasAdd (+ Relu), made by the runtime's fusion pass (TF grappler's remapper
# makes the same op). Each row block's bias and ReLU run right after its GEMM, while the block is
# still in cache, on the thread that computed it: no separate passes over the activations.
# --------------------------------------------------------------------------------------------

class FusedPartError(Exception):
    """An error of one op of a fused group: `part` is its index in the group (the runtime names it)."""

    def __init__(self, part: int, error: BaseException):
        super().__init__(str(error))
        self.part = part
        self.error = error


def fused_matmul_operands(attrs, a, b):
    """matmul_operands for the MatMul that is part 0 of a fused op."""
    try:
        return matmul_operands(a, b, bool(attrs.get("transpose_a", False)), bool(attrs.get("transpose_b", False)))
    except ValueError as e:
        raise FusedPartError(0, e) from None


def _fused_bias_operands(attrs, a, b, bias):
    """(op(a), op(b), bias) checked as MatMul and BiasAdd would check them; errors name the part."""
    a2, b2 = fused_matmul_operands(attrs, a, b)
    bias = np.asarray(bias)
    n = b2.shape[1]
    if bias.ndim != 1 or bias.shape[0] != n:
        raise FusedPartError(1, ValueError(f"BiasAdd: bias must be 1-D of size {n} (channel dim of value "
                                           f"{(a2.shape[0], n)}, NHWC), got shape {bias.shape}"))
    dt = np.result_type(a2.dtype, b2.dtype)
    return a2, b2, bias.astype(dt, copy=False), dt


def _fused_matmul_cost(a, b, bias):
    return _matmul_cost(a, b)


# With fused_ops ("ReluGrad",) the op is ``ReluGrad(op(a) @ op(b), features)``: the input gradient
# of a dense layer times its ReLU's mask (the backward pass's MatMul -> ReluGrad). Each block of
# the product gets the mask right after its GEMM; no separate pass or hop for the ReluGrad.

def _is_relu_grad(attrs) -> bool:
    return tuple(attrs.get("fused_ops", ())) == ("ReluGrad",)


def _relu_grad_epilogue(out, features):
    """`out` after ReluGrad with `features` (in place when it can; errors name the ReluGrad)."""
    if relu_grad_in_place_ok(out, features):
        relu_grad_in_place(out, features)
        return out
    try:
        return relu_grad(out, np.asarray(features))       # what the unfused ReluGrad does
    except ValueError as e:
        raise FusedPartError(1, ValueError(f"ReluGrad: {e}")) from None


def _fused_matmul_split(attrs):
    relu = "Relu" in tuple(attrs.get("fused_ops", ()))
    relu_grad_mask = _is_relu_grad(attrs)

    def block(a2, b2, out_block, out, bias, rows, cols):
        gemm(a2, b2, out_block)
        fused_epilogue_block(out, bias, rows, cols, relu)

    def mask_block(a2, b2, out_block, out, features, rows, cols):
        gemm(a2, b2, out_block)
        relu_grad_in_place(out, features, rows, cols)

    def split(parts, a, b, third):
        try:
            if relu_grad_mask:
                a2, b2 = fused_matmul_operands(attrs, a, b)
                dt = np.result_type(a2.dtype, b2.dtype)
            else:
                a2, b2, third, dt = _fused_bias_operands(attrs, a, b, third)
        except FusedPartError:
            return None               # the kernel reports it
        m, n = a2.shape[0], b2.shape[1]
        blocks = gemm_blocks(m, n, a2.shape[1], parts)
        if blocks is None:
            return None
        out = _aligned.empty((m, n), dt)
        axis, bounds = blocks
        if relu_grad_mask and not relu_grad_in_place_ok(out, third):
            return None
        # Each block's epilogue covers its own rows or columns of the whole output (see bias.py).
        return out, [functools.partial(mask_block if relu_grad_mask else block,
                                       *gemm_block_operands(axis, lo, hi, a2, b2, out), out, third,
                                       (lo, hi) if axis == "rows" else (0, m), (0, n) if axis == "rows" else (lo, hi))
                     for lo, hi in bounds]
    return split


@register_kernel("_FusedMatMul", "CPU", cost=_fused_matmul_cost, unit_ns=MAC_NS, split=_fused_matmul_split)
def fused_matmul(attrs):
    """``op(a) @ op(b) + bias``, then ReLU when ``fused_ops`` is ("BiasAdd", "Relu"); with
    ``fused_ops`` ("ReluGrad",), ``ReluGrad(op(a) @ op(b), features)``."""
    relu = "Relu" in tuple(attrs.get("fused_ops", ()))
    if _is_relu_grad(attrs):
        def masked(a, b, features):
            out = gemm(*fused_matmul_operands(attrs, a, b))
            return _relu_grad_epilogue(out, features)
        return masked

    def fn(a, b, bias):
        a2, b2, bias, _ = _fused_bias_operands(attrs, a, b, bias)
        out = gemm(a2, b2)
        _fused_epilogue(out, bias, relu)
        return out
    return fn


def _batch_matmul_cost(x, y):
    xs, ys = np.shape(x), np.shape(y)
    if len(xs) < 2 or len(ys) < 2:
        return int(np.size(x)) + int(np.size(y))
    try:
        batch = np.broadcast_shapes(xs[:-2], ys[:-2])
    except ValueError:  # the kernel itself reports the mismatch
        return int(np.size(x)) + int(np.size(y))
    nb = int(np.prod(batch)) if batch else 1
    m, k = xs[-2], xs[-1]
    n = ys[-1] if ys[-2] == k else ys[-2]
    return nb * m * k * n


def _adjoint(x):
    x = np.swapaxes(x, -1, -2)
    return np.conj(x) if np.iscomplexobj(x) else x


@register_kernel("BatchMatMulV2", "CPU", cost=_batch_matmul_cost, unit_ns=MAC_NS)
def batch_matmul_v2(attrs):
    """tf.raw_ops.BatchMatMulV2: batched ``adj(x) @ adj(y)`` with numpy-broadcast batch dims.

    adj_x/adj_y take the conjugate transpose of the last two axes (a plain transpose for reals).
    """
    adj_x, adj_y = bool(attrs.get("adj_x", False)), bool(attrs.get("adj_y", False))

    def fn(x, y):
        x, y = np.asarray(x), np.asarray(y)
        if x.ndim < 2 or y.ndim < 2:
            raise ValueError(f"BatchMatMulV2: inputs must have rank >= 2, got shapes {x.shape} and {y.shape}")
        x2 = _adjoint(x) if adj_x else x
        y2 = _adjoint(y) if adj_y else y
        if x2.shape[-1] != y2.shape[-2]:
            raise ValueError(f"BatchMatMulV2: inner dimensions differ: adj(x) is {x2.shape} and adj(y) is {y2.shape}")
        try:
            return np.matmul(x2, y2)
        except ValueError as e:
            raise ValueError(f"BatchMatMulV2: batch dimensions of {x.shape} and {y.shape} do not broadcast") from e
    return fn
