"""CPU kernels for optimizer updates: the dense Apply* ops and their row-sparse SparseApply* variants.

Formulas are those of TensorFlow's CPU functors (tensorflow/core/kernels/training_ops.cc), with
every scalar cast to the variable's dtype first, as TF does. The variable and its slots (input refs)
are updated in place and the variable is returned.

For float32/float64 C-contiguous buffers each update is one fused numba loop: a single pass over
memory, no temporaries, GIL released. The loops that divide use numpy's error model (x/0 gives
inf or nan, as in TF): numba's default tests every division for zero, which keeps them from
vectorising (Adam, RMSProp, Adagrad: 4-5x faster with it on 1M float32 elements). A sparse update runs the same per-element loop on the touched
rows only, in index order (duplicates apply one after another), so it costs O(len(indices)). Other
dtypes or strided buffers take a numpy path with the same formulas.
"""
from __future__ import annotations

import functools

import numpy as np

from actorflow.kernels.cpu.blas import matmul as gemm
from actorflow.kernels.cpu.matmul import (
    FusedPartError,
    _matmul_cost,
    fused_matmul_operands,
    gemm_block_operands,
    gemm_blocks,
)
from actorflow.kernels.lazy_numba import njit
from actorflow.kernels.registry import MAC_NS, register_kernel

_FAST = (np.dtype(np.float32), np.dtype(np.float64))


# --------------------------------------------------------------------------------------------
# Fused per-element updates on 1-D arrays. The dense kernels run them over whole flattened
# buffers; the sparse ones over one row at a time. Scalars arrive in the arrays' dtype and no
# float literal appears in the loops, so float32 stays float32 (and vectorises) throughout.
# --------------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _gd_update(var, alpha, delta):
    for i in range(var.shape[0]):
        var[i] -= alpha * delta[i]


@njit(cache=True, nogil=True)
def _momentum_update(var, accum, lr, grad, momentum, nesterov):
    if nesterov:
        for i in range(var.shape[0]):
            a = accum[i] * momentum + grad[i]
            accum[i] = a
            var[i] -= grad[i] * lr + a * momentum * lr
    else:
        for i in range(var.shape[0]):
            a = accum[i] * momentum + grad[i]
            accum[i] = a
            var[i] -= a * lr


@njit(cache=True, nogil=True, error_model="numpy")
def _adagrad_update(var, accum, lr, grad, update_slots):
    for i in range(var.shape[0]):
        g = grad[i]
        if update_slots:
            accum[i] += g * g
        var[i] -= g * lr / np.sqrt(accum[i])


@njit(cache=True, nogil=True, error_model="numpy")
def _rmsprop_update(var, ms, mom, lr, one_minus_rho, momentum, epsilon, grad):
    for i in range(var.shape[0]):
        g = grad[i]
        s = ms[i] + (g * g - ms[i]) * one_minus_rho
        ms[i] = s
        m = mom[i] * momentum + g * lr / np.sqrt(s + epsilon)
        mom[i] = m
        var[i] -= m


@njit(cache=True, nogil=True, error_model="numpy")
def _centered_rmsprop_update(var, mg, ms, mom, lr, one_minus_rho, momentum, epsilon, grad):
    for i in range(var.shape[0]):
        g = grad[i]
        s = ms[i] + (g * g - ms[i]) * one_minus_rho
        ms[i] = s
        a = mg[i] + (g - mg[i]) * one_minus_rho
        mg[i] = a
        m = mom[i] * momentum + g * lr / np.sqrt(s - a * a + epsilon)
        mom[i] = m
        var[i] -= m


@njit(cache=True, nogil=True, error_model="numpy")
def _adam_update(var, m, v, alpha, beta1, one_minus_beta1, one_minus_beta2, epsilon, grad, nesterov):
    if nesterov:
        for i in range(var.shape[0]):
            g = grad[i]
            mi = m[i] + (g - m[i]) * one_minus_beta1
            vi = v[i] + (g * g - v[i]) * one_minus_beta2
            m[i] = mi
            v[i] = vi
            var[i] -= (g * one_minus_beta1 + beta1 * mi) * alpha / (np.sqrt(vi) + epsilon)
    else:
        for i in range(var.shape[0]):
            g = grad[i]
            mi = m[i] + (g - m[i]) * one_minus_beta1
            vi = v[i] + (g * g - v[i]) * one_minus_beta2
            m[i] = mi
            v[i] = vi
            var[i] -= mi * alpha / (np.sqrt(vi) + epsilon)


# Sparse drivers: one call walks the indices and runs the fused row update on [rows, width] views.

@njit(cache=True, nogil=True)
def _sparse_gd(var, alpha, grad, idx):
    for i in range(idx.shape[0]):
        _gd_update(var[idx[i]], alpha, grad[i])


@njit(cache=True, nogil=True)
def _sparse_momentum(var, accum, lr, grad, idx, momentum, nesterov):
    for i in range(idx.shape[0]):
        r = idx[i]
        _momentum_update(var[r], accum[r], lr, grad[i], momentum, nesterov)


@njit(cache=True, nogil=True)
def _sparse_adagrad(var, accum, lr, grad, idx, update_slots):
    for i in range(idx.shape[0]):
        r = idx[i]
        _adagrad_update(var[r], accum[r], lr, grad[i], update_slots)


@njit(cache=True, nogil=True)
def _sparse_rmsprop(var, ms, mom, lr, one_minus_rho, momentum, epsilon, grad, idx):
    for i in range(idx.shape[0]):
        r = idx[i]
        _rmsprop_update(var[r], ms[r], mom[r], lr, one_minus_rho, momentum, epsilon, grad[i])


@njit(cache=True, nogil=True)
def _sparse_centered_rmsprop(var, mg, ms, mom, lr, one_minus_rho, momentum, epsilon, grad, idx):
    for i in range(idx.shape[0]):
        r = idx[i]
        _centered_rmsprop_update(var[r], mg[r], ms[r], mom[r], lr, one_minus_rho, momentum, epsilon, grad[i])


@njit(cache=True, nogil=True)
def _sparse_adam(var, m, v, alpha, beta1, one_minus_beta1, one_minus_beta2, epsilon, grad, idx, nesterov):
    for i in range(idx.shape[0]):
        r = idx[i]
        _adam_update(var[r], m[r], v[r], alpha, beta1, one_minus_beta1, one_minus_beta2, epsilon, grad[i], nesterov)


# --------------------------------------------------------------------------------------------
# numpy versions of the same updates, for dtypes numba is not given (float16, complex) and for
# strided buffers. They work in place on arrays of any shape, so the sparse fallback reuses them
# on single rows.
# --------------------------------------------------------------------------------------------

def _np_gd(var, alpha, delta):
    var -= alpha * delta


def _np_momentum(var, accum, lr, grad, momentum, nesterov):
    accum *= momentum
    accum += grad
    if nesterov:
        var -= grad * lr + accum * momentum * lr
    else:
        var -= accum * lr


def _np_adagrad(var, accum, lr, grad, update_slots):
    if update_slots:
        accum += grad * grad
    var -= grad * lr / np.sqrt(accum)


def _np_rmsprop(var, ms, mom, lr, one_minus_rho, momentum, epsilon, grad):
    ms += (grad * grad - ms) * one_minus_rho
    mom *= momentum
    mom += grad * lr / np.sqrt(ms + epsilon)
    var -= mom


def _np_centered_rmsprop(var, mg, ms, mom, lr, one_minus_rho, momentum, epsilon, grad):
    ms += (grad * grad - ms) * one_minus_rho
    mg += (grad - mg) * one_minus_rho
    mom *= momentum
    mom += grad * lr / np.sqrt(ms - mg * mg + epsilon)
    var -= mom


def _np_adam(var, m, v, alpha, beta1, one_minus_beta1, one_minus_beta2, epsilon, grad, nesterov):
    m += (grad - m) * one_minus_beta1
    v += (grad * grad - v) * one_minus_beta2
    if nesterov:
        var -= (grad * one_minus_beta1 + beta1 * m) * alpha / (np.sqrt(v) + epsilon)
    else:
        var -= m * alpha / (np.sqrt(v) + epsilon)


# --------------------------------------------------------------------------------------------
# Argument checking and dispatch
# --------------------------------------------------------------------------------------------

def _scalars(op_name, dtype, **named):
    """Each named input as a numpy scalar of the variable's dtype; TF requires them to be 0-d."""
    out = []
    for name, x in named.items():
        a = np.asarray(x)
        if a.ndim != 0:
            raise ValueError(f"{op_name}: {name} must be a scalar, got shape {a.shape}")
        out.append(dtype.type(a[()]))
    return out


def _check_slots(op_name, var, **slots):
    for name, s in slots.items():
        if s.shape != var.shape:
            raise ValueError(f"{op_name}: {name} must have the variable's shape {var.shape}, got {s.shape}")
        if s.dtype != var.dtype:
            raise TypeError(f"{op_name}: {name} must have the variable's dtype {var.dtype}, got {s.dtype}")


def _dense_grad(op_name, var, grad, name="grad"):
    grad = np.asarray(grad)
    if grad.shape != var.shape:
        raise ValueError(f"{op_name}: var and {name} must have the same shape, got {var.shape} and {grad.shape}")
    return grad


def _fused(var, *slots):
    """True when the numba path applies: float32/64 C-contiguous buffers of one dtype."""
    return var.dtype in _FAST and all(a.flags.c_contiguous for a in (var,) + slots)


def _flat(a):
    return a.reshape(-1)


def _flat_grad(grad, dtype):
    return np.ascontiguousarray(grad, dtype=dtype).reshape(-1)


def _sparse_args(op_name, var, grad, indices):
    """Validated (indices as int64, grad as [len(indices), width]) for a row-sparse update."""
    if var.ndim == 0:
        raise ValueError(f"{op_name}: var must have rank >= 1, got a scalar")
    idx = np.asarray(indices)
    if idx.ndim != 1 or idx.dtype.kind not in "iu":
        raise ValueError(f"{op_name}: indices must be a 1-D integer tensor, got {idx.dtype} of shape {idx.shape}")
    grad = np.asarray(grad)
    want = idx.shape + var.shape[1:]
    if grad.shape != want:
        raise ValueError(f"{op_name}: grad must have shape [len(indices)] + var.shape[1:] = {want}, got {grad.shape}")
    idx = idx.astype(np.int64, copy=False)
    bad = np.flatnonzero((idx < 0) | (idx >= var.shape[0]))
    if bad.size:
        i = int(bad[0])
        raise IndexError(f"{op_name}: indices[{i}] = {int(idx[i])} is not in [0, {var.shape[0]}) "
                         f"(the variable's first dimension is {var.shape[0]})")
    return idx, grad


def _rows(a):
    return a.reshape(a.shape[0], -1)


def _row_grad(grad, n, dtype):
    return np.ascontiguousarray(grad, dtype=dtype).reshape(n, -1)


def _sparse_fallback(update, idx, refs, grad, *scalars_before_grad, after=()):
    """Row-by-row numpy update on one-row slices: slices are views (an integer index into a 1-D
    variable would give a copy), so every update lands in the variable and its slots."""
    for i, r in enumerate(idx.tolist()):
        update(*(a[r:r + 1] for a in refs), *scalars_before_grad, grad[i:i + 1], *after)


def _sparse_cost(grad_position):
    """Cost of a sparse update: a few operations per gradient element, never the variable's size."""
    def cost(*inputs):
        return 8 * int(np.size(inputs[grad_position]))
    return cost


# --------------------------------------------------------------------------------------------
# Dense kernels
# --------------------------------------------------------------------------------------------

# Each dense kernel is a `prepare(attrs) -> prep(*inputs)` returning (var, update, args, fused):
# validated inputs and scalars, and the update to run as ``update(*args)`` (the numba loop on
# flat buffers when `fused`, else the numpy path). `_dense` makes the kernel and its splitter from
# it: a big fused update runs on the pool as flat blocks, each block one call of the same loop on
# slices of every buffer.

def _dense(prepare, arrays: int):
    """(factory, split factory, cost) of a dense update; `arrays`: buffers it streams through."""
    def factory(attrs):
        prep = prepare(attrs)

        def fn(*inputs):
            var, update, args, _ = prep(*inputs)
            update(*args)
            return var
        return fn

    def split_factory(attrs):
        prep = prepare(attrs)

        def split(parts, *inputs):
            try:
                var, update, args, fused = prep(*inputs)
            except Exception:  # noqa: BLE001 - the kernel reports it
                return None
            n = var.size
            if not fused or n < (1 << 16) * parts:
                return None
            bounds = [n * i // parts for i in range(parts + 1)]
            return var, [functools.partial(update, *[a[lo:hi] if type(a) is np.ndarray and a.ndim == 1
                                                     and a.shape[0] == n else a for a in args])
                         for lo, hi in zip(bounds[:-1], bounds[1:])]
        return split

    def cost(var, *rest):
        return arrays * int(np.size(var))
    return factory, split_factory, cost


def _register_dense(op_type, prepare, arrays):
    factory, split, cost = _dense(prepare, arrays)
    register_kernel(op_type, "CPU", cost=cost, split=split)(factory)
    return factory


def _prepare_gd(attrs):
    def prep(var, alpha, delta):
        delta = _dense_grad("ApplyGradientDescent", var, delta, "delta")
        (alpha,) = _scalars("ApplyGradientDescent", var.dtype, alpha=alpha)
        if _fused(var):
            return var, _gd_update, (_flat(var), alpha, _flat_grad(delta, var.dtype)), True
        return var, _np_gd, (var, alpha, delta), False
    return prep


# tf.raw_ops.ApplyGradientDescent: ``var -= alpha * delta``.
apply_gradient_descent = _register_dense("ApplyGradientDescent", _prepare_gd, 3)


# _MatMulApplyGradientDescent: ApplyGradientDescent of a MatMul gradient, made by the runtime's
# fusion pass. ``var -= alpha * op(a) @ op(b)`` is one GEMM accumulating into the variable
# (beta = 1): no gradient buffer is written or read back, and no separate update pass runs.

def _gemm_update_operands(attrs, var, alpha, a, b):
    a2, b2 = fused_matmul_operands(attrs, a, b)
    try:
        shape = (a2.shape[0], b2.shape[1])
        if var.shape != shape:
            raise ValueError(f"ApplyGradientDescent: var and delta must have the same shape, got {var.shape} "
                             f"and {shape}")
        (alpha,) = _scalars("ApplyGradientDescent", var.dtype, alpha=alpha)
    except ValueError as e:
        raise FusedPartError(1, e) from None
    if a2.dtype != var.dtype:
        a2 = a2.astype(var.dtype)
    if b2.dtype != var.dtype:
        b2 = b2.astype(var.dtype)
    return a2, b2, alpha


def _gemm_update_cost(var, alpha, a, b):
    return _matmul_cost(a, b)


def _gemm_update_split(attrs):
    def split(parts, var, alpha, a, b):
        try:
            a2, b2, alpha = _gemm_update_operands(attrs, var, alpha, a, b)
        except Exception:  # noqa: BLE001 - the kernel reports it
            return None
        blocks = gemm_blocks(var.shape[0], var.shape[1], a2.shape[1], parts)
        if blocks is None or not var.flags.c_contiguous:
            return None
        axis, bounds = blocks
        return var, [functools.partial(gemm, *gemm_block_operands(axis, lo, hi, a2, b2, var), -alpha, 1.0)
                     for lo, hi in bounds]
    return split


@register_kernel("_MatMulApplyGradientDescent", "CPU", cost=_gemm_update_cost, unit_ns=MAC_NS, split=_gemm_update_split)
def matmul_apply_gradient_descent(attrs):
    """``var -= alpha * (op(a) @ op(b))`` in place; returns var."""
    def fn(var, alpha, a, b):
        a2, b2, alpha = _gemm_update_operands(attrs, var, alpha, a, b)
        if var.flags.c_contiguous:
            gemm(a2, b2, var, -alpha, 1.0)
        else:
            var -= alpha * (a2 @ b2)
        return var
    return fn


def _prepare_momentum(attrs):
    """tf.raw_ops.ApplyMomentum: ``accum = accum*momentum + grad; var -= lr*accum``.

    With use_nesterov: ``var -= lr*grad + lr*momentum*accum`` (after the accum update), as TF.
    """
    nesterov = bool(attrs.get("use_nesterov", False))

    def prep(var, accum, lr, grad, momentum):
        _check_slots("ApplyMomentum", var, accum=accum)
        grad = _dense_grad("ApplyMomentum", var, grad)
        lr, momentum = _scalars("ApplyMomentum", var.dtype, lr=lr, momentum=momentum)
        if _fused(var, accum):
            return var, _momentum_update, (_flat(var), _flat(accum), lr, _flat_grad(grad, var.dtype), momentum,
                                           nesterov), True
        return var, _np_momentum, (var, accum, lr, grad, momentum, nesterov), False
    return prep


def _prepare_adagrad(attrs):
    """tf.raw_ops.ApplyAdagrad: ``accum += grad**2 (if update_slots); var -= lr*grad/sqrt(accum)``."""
    update_slots = bool(attrs.get("update_slots", True))

    def prep(var, accum, lr, grad):
        _check_slots("ApplyAdagrad", var, accum=accum)
        grad = _dense_grad("ApplyAdagrad", var, grad)
        (lr,) = _scalars("ApplyAdagrad", var.dtype, lr=lr)
        if _fused(var, accum):
            return var, _adagrad_update, (_flat(var), _flat(accum), lr, _flat_grad(grad, var.dtype),
                                          update_slots), True
        return var, _np_adagrad, (var, accum, lr, grad, update_slots), False
    return prep


def _prepare_rms_prop(attrs):
    """tf.raw_ops.ApplyRMSProp.

    ``ms += (grad**2 - ms)*(1-rho); mom = mom*momentum + lr*grad/sqrt(ms+epsilon); var -= mom``.
    """
    def prep(var, ms, mom, lr, rho, momentum, epsilon, grad):
        _check_slots("ApplyRMSProp", var, ms=ms, mom=mom)
        grad = _dense_grad("ApplyRMSProp", var, grad)
        lr, rho, momentum, epsilon = _scalars("ApplyRMSProp", var.dtype, lr=lr, rho=rho, momentum=momentum,
                                              epsilon=epsilon)
        one_minus_rho = var.dtype.type(1) - rho
        if _fused(var, ms, mom):
            return var, _rmsprop_update, (_flat(var), _flat(ms), _flat(mom), lr, one_minus_rho, momentum, epsilon,
                                          _flat_grad(grad, var.dtype)), True
        return var, _np_rmsprop, (var, ms, mom, lr, one_minus_rho, momentum, epsilon, grad), False
    return prep


def _prepare_centered_rms_prop(attrs):
    """tf.raw_ops.ApplyCenteredRMSProp: RMSProp normalised by the centred second moment.

    ``ms += (grad**2-ms)*(1-rho); mg += (grad-mg)*(1-rho);
    mom = mom*momentum + lr*grad/sqrt(ms - mg**2 + epsilon); var -= mom``.
    """
    def prep(var, mg, ms, mom, lr, rho, momentum, epsilon, grad):
        _check_slots("ApplyCenteredRMSProp", var, mg=mg, ms=ms, mom=mom)
        grad = _dense_grad("ApplyCenteredRMSProp", var, grad)
        lr, rho, momentum, epsilon = _scalars("ApplyCenteredRMSProp", var.dtype, lr=lr, rho=rho,
                                              momentum=momentum, epsilon=epsilon)
        one_minus_rho = var.dtype.type(1) - rho
        if _fused(var, mg, ms, mom):
            return var, _centered_rmsprop_update, (_flat(var), _flat(mg), _flat(ms), _flat(mom), lr, one_minus_rho,
                                                   momentum, epsilon, _flat_grad(grad, var.dtype)), True
        return var, _np_centered_rmsprop, (var, mg, ms, mom, lr, one_minus_rho, momentum, epsilon, grad), False
    return prep


apply_momentum = _register_dense("ApplyMomentum", _prepare_momentum, 3)
apply_adagrad = _register_dense("ApplyAdagrad", _prepare_adagrad, 4)
apply_rms_prop = _register_dense("ApplyRMSProp", _prepare_rms_prop, 6)
apply_centered_rms_prop = _register_dense("ApplyCenteredRMSProp", _prepare_centered_rms_prop, 7)


def _adam_scalars(op_name, dtype, beta1_power, beta2_power, lr, beta1, beta2, epsilon):
    b1p, b2p, lr, beta1, beta2, epsilon = _scalars(op_name, dtype, beta1_power=beta1_power,
                                                   beta2_power=beta2_power, lr=lr, beta1=beta1,
                                                   beta2=beta2, epsilon=epsilon)
    one = dtype.type(1)
    # TF folds the bias corrections of both moments into the step size.
    alpha = lr * np.sqrt(one - b2p) / (one - b1p)
    return dtype.type(alpha), beta1, one - beta1, one - beta2, epsilon


def _prepare_adam(attrs):
    """tf.raw_ops.ApplyAdam.

    ``lr_t = lr*sqrt(1-beta2_power)/(1-beta1_power); m += (grad-m)*(1-beta1);
    v += (grad**2-v)*(1-beta2); var -= lr_t*m/(sqrt(v)+epsilon)``; with use_nesterov the numerator
    is ``grad*(1-beta1) + beta1*m``.
    """
    nesterov = bool(attrs.get("use_nesterov", False))

    def prep(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad):
        _check_slots("ApplyAdam", var, m=m, v=v)
        grad = _dense_grad("ApplyAdam", var, grad)
        s = _adam_scalars("ApplyAdam", var.dtype, beta1_power, beta2_power, lr, beta1, beta2, epsilon)
        if _fused(var, m, v):
            return var, _adam_update, (_flat(var), _flat(m), _flat(v), *s, _flat_grad(grad, var.dtype), nesterov), True
        return var, _np_adam, (var, m, v, *s, grad, nesterov), False
    return prep


apply_adam = _register_dense("ApplyAdam", _prepare_adam, 6)


@register_kernel("SparseApplyGradientDescent", "CPU", cost=_sparse_cost(2))
def sparse_apply_gradient_descent(attrs):
    """``var[indices[i]] -= alpha * grad[i]`` row by row (actorflow extension; TF uses ScatterSub)."""
    op = "SparseApplyGradientDescent"

    def fn(var, alpha, grad, indices):
        idx, grad = _sparse_args(op, var, grad, indices)
        (alpha,) = _scalars(op, var.dtype, alpha=alpha)
        if _fused(var):
            _sparse_gd(_rows(var), alpha, _row_grad(grad, idx.size, var.dtype), idx)
        else:
            _sparse_fallback(_np_gd, idx, (var,), grad, alpha)
        return var
    return fn


@register_kernel("SparseApplyMomentum", "CPU", cost=_sparse_cost(3))
def sparse_apply_momentum(attrs):
    """tf.raw_ops.SparseApplyMomentum: ApplyMomentum on the rows named by indices only."""
    op = "SparseApplyMomentum"
    nesterov = bool(attrs.get("use_nesterov", False))

    def fn(var, accum, lr, grad, indices, momentum):
        _check_slots(op, var, accum=accum)
        idx, grad = _sparse_args(op, var, grad, indices)
        lr, momentum = _scalars(op, var.dtype, lr=lr, momentum=momentum)
        if _fused(var, accum):
            _sparse_momentum(_rows(var), _rows(accum), lr, _row_grad(grad, idx.size, var.dtype), idx, momentum,
                             nesterov)
        else:
            _sparse_fallback(_np_momentum, idx, (var, accum), grad, lr, after=(momentum, nesterov))
        return var
    return fn


@register_kernel("SparseApplyAdagrad", "CPU", cost=_sparse_cost(3))
def sparse_apply_adagrad(attrs):
    """tf.raw_ops.SparseApplyAdagrad: ApplyAdagrad on the rows named by indices only."""
    op = "SparseApplyAdagrad"
    update_slots = bool(attrs.get("update_slots", True))

    def fn(var, accum, lr, grad, indices):
        _check_slots(op, var, accum=accum)
        idx, grad = _sparse_args(op, var, grad, indices)
        (lr,) = _scalars(op, var.dtype, lr=lr)
        if _fused(var, accum):
            _sparse_adagrad(_rows(var), _rows(accum), lr, _row_grad(grad, idx.size, var.dtype), idx, update_slots)
        else:
            _sparse_fallback(_np_adagrad, idx, (var, accum), grad, lr, after=(update_slots,))
        return var
    return fn


@register_kernel("SparseApplyRMSProp", "CPU", cost=_sparse_cost(7))
def sparse_apply_rms_prop(attrs):
    """tf.raw_ops.SparseApplyRMSProp: ApplyRMSProp on the rows named by indices only."""
    op = "SparseApplyRMSProp"

    def fn(var, ms, mom, lr, rho, momentum, epsilon, grad, indices):
        _check_slots(op, var, ms=ms, mom=mom)
        idx, grad = _sparse_args(op, var, grad, indices)
        lr, rho, momentum, epsilon = _scalars(op, var.dtype, lr=lr, rho=rho, momentum=momentum, epsilon=epsilon)
        one_minus_rho = var.dtype.type(1) - rho
        if _fused(var, ms, mom):
            _sparse_rmsprop(_rows(var), _rows(ms), _rows(mom), lr, one_minus_rho, momentum, epsilon,
                            _row_grad(grad, idx.size, var.dtype), idx)
        else:
            _sparse_fallback(_np_rmsprop, idx, (var, ms, mom), grad, lr, one_minus_rho, momentum, epsilon)
        return var
    return fn


@register_kernel("SparseApplyCenteredRMSProp", "CPU", cost=_sparse_cost(8))
def sparse_apply_centered_rms_prop(attrs):
    """tf.raw_ops.SparseApplyCenteredRMSProp: ApplyCenteredRMSProp on the rows named by indices only."""
    op = "SparseApplyCenteredRMSProp"

    def fn(var, mg, ms, mom, lr, rho, momentum, epsilon, grad, indices):
        _check_slots(op, var, mg=mg, ms=ms, mom=mom)
        idx, grad = _sparse_args(op, var, grad, indices)
        lr, rho, momentum, epsilon = _scalars(op, var.dtype, lr=lr, rho=rho, momentum=momentum, epsilon=epsilon)
        one_minus_rho = var.dtype.type(1) - rho
        if _fused(var, mg, ms, mom):
            _sparse_centered_rmsprop(_rows(var), _rows(mg), _rows(ms), _rows(mom), lr, one_minus_rho, momentum,
                                     epsilon, _row_grad(grad, idx.size, var.dtype), idx)
        else:
            _sparse_fallback(_np_centered_rmsprop, idx, (var, mg, ms, mom), grad, lr, one_minus_rho, momentum,
                             epsilon)
        return var
    return fn


@register_kernel("SparseApplyAdam", "CPU", cost=_sparse_cost(9))
def sparse_apply_adam(attrs):
    """Lazy Adam (actorflow extension; tf.contrib.opt.LazyAdamOptimizer's update as one kernel).

    ApplyAdam's formulas on the rows named by indices only: untouched rows keep their moments, so
    their m and v do not decay. use_nesterov is honoured if set.
    """
    op = "SparseApplyAdam"
    nesterov = bool(attrs.get("use_nesterov", False))

    def fn(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices):
        _check_slots(op, var, m=m, v=v)
        idx, grad = _sparse_args(op, var, grad, indices)
        s = _adam_scalars(op, var.dtype, beta1_power, beta2_power, lr, beta1, beta2, epsilon)
        if _fused(var, m, v):
            _sparse_adam(_rows(var), _rows(m), _rows(v), *s, _row_grad(grad, idx.size, var.dtype), idx, nesterov)
        else:
            _sparse_fallback(_np_adam, idx, (var, m, v), grad, *s, after=(nesterov,))
        return var
    return fn


# --------------------------------------------------------------------------------------------
# Adadelta, FTRL, proximal gradient descent, proximal Adagrad and Adagrad-DA
# (tensorflow/core/kernels/training_ops.cc: the CPU functors and SparseApply* kernels). Sparse
# updates walk the indices in order, as TF's CPU kernels do, so a duplicate row is updated once per
# occurrence. Scalars arrive in the arrays' dtype; `one` (1 in that dtype) stands in for literals.
# The loops use numpy's error model (x/0 is inf, as in TF): with numba's default each division
# tests for zero, and the loops that divide most would not vectorise.
# --------------------------------------------------------------------------------------------

@njit(cache=True, nogil=True, error_model="numpy")
def _adadelta_update(var, accum, accum_update, lr, rho, one_minus_rho, epsilon, one, grad):
    for i in range(var.shape[0]):
        g = grad[i]
        a = accum[i] * rho + g * g * one_minus_rho
        accum[i] = a
        u = np.sqrt(accum_update[i] + epsilon) * (one / np.sqrt(a + epsilon)) * g
        var[i] -= u * lr
        accum_update[i] = accum_update[i] * rho + u * u * one_minus_rho


@njit(cache=True, nogil=True, error_model="numpy")
def _ftrl_sqrt(var, accum, linear, grad, lr, l1, l2, shrink, two):
    # lr_power == -0.5: TF's fast path, sqrt instead of pow.
    for i in range(var.shape[0]):
        g = grad[i]
        a = accum[i]
        v = var[i]
        na = a + g * g
        sna = np.sqrt(na)
        lin = linear[i] + ((g + shrink * v) - (sna - np.sqrt(a)) / lr * v)
        linear[i] = lin
        adj = min(max(lin, -l1), l1)
        var[i] = (adj - lin) / (sna / lr + two * l2)
        accum[i] = na


@njit(cache=True, nogil=True, error_model="numpy")
def _ftrl_pow(var, accum, linear, grad, lr, l1, l2, shrink, two, p):
    for i in range(var.shape[0]):
        g = grad[i]
        a = accum[i]
        v = var[i]
        na = a + g * g
        sna = na ** p
        lin = linear[i] + ((g + shrink * v) - (sna - a ** p) / lr * v)
        linear[i] = lin
        adj = min(max(lin, -l1), l1)
        var[i] = (adj - lin) / (sna / lr + two * l2)
        accum[i] = na


@njit(cache=True, nogil=True, error_model="numpy")
def _ftrl_multiply(var, accum, linear, grad, lr, l1, l2, shrink, two, p, neg_half):
    # multiply_linear_by_lr: linear holds lr * (TF's usual linear).
    bound = l1 * lr
    for i in range(var.shape[0]):
        g = grad[i]
        a = accum[i]
        v = var[i]
        na = a + g * g
        if neg_half:
            sna = np.sqrt(na)
            sigma = sna - np.sqrt(a)
        else:
            sna = na ** p
            sigma = sna - a ** p
        lin = linear[i] + ((g + shrink * v) * lr - sigma * v)
        linear[i] = lin
        adj = min(max(lin, -bound), bound)
        var[i] = (adj - lin) / (sna + two * l2 * lr)
        accum[i] = na


@njit(cache=True, nogil=True, error_model="numpy")
def _ftrl_update(var, accum, linear, grad, lr, l1, l2, l2_shrinkage, lr_power, one, multiply):
    # TF's ComputeFtrl / ApplyFtrl(V2) functors. l2_shrinkage == 0 is FTRL V1 (grad unchanged);
    # lr_power == -0.5 takes sqrt instead of pow, like TF's fast path. One branch-free loop per case.
    two = one + one
    neg_half = lr_power == -one / two
    shrink = two * l2_shrinkage
    if multiply:
        _ftrl_multiply(var, accum, linear, grad, lr, l1, l2, shrink, two, -lr_power, neg_half)
    elif neg_half:
        _ftrl_sqrt(var, accum, linear, grad, lr, l1, l2, shrink, two)
    else:
        _ftrl_pow(var, accum, linear, grad, lr, l1, l2, shrink, two, -lr_power)


@njit(cache=True, nogil=True, error_model="numpy")
def _prox(p, l1, shrink, den):
    """The proximal step of TF's proximal kernels: sign(p) * max(|p| - shrink, 0) / den with an L1
    term (l1 > 0), p / den without."""
    if l1 > 0:
        m = np.abs(p) - shrink
        if m < 0:
            m = m - m
        if p > 0:
            return m / den
        if p < 0:
            return -m / den
        return p - p
    return p / den


@njit(cache=True, nogil=True, error_model="numpy")
def _proximal_gd_update(var, alpha, l1, l2, grad):
    # TF: prox = var - grad*lr; var = sign(prox)*max(|prox| - lr*l1, 0)/(1 + l2*lr).
    one = alpha / alpha
    den = one + l2 * alpha
    shrink = alpha * l1
    for i in range(var.shape[0]):
        var[i] = _prox(var[i] - grad[i] * alpha, l1, shrink, den)


@njit(cache=True, nogil=True, error_model="numpy")
def _proximal_adagrad_update(var, accum, lr, l1, l2, one, grad):
    for i in range(var.shape[0]):
        g = grad[i]
        a = accum[i] + g * g
        accum[i] = a
        rate = lr * (one / np.sqrt(a))
        var[i] = _prox(var[i] - g * rate, l1, rate * l1, one + l2 * rate)


@njit(cache=True, nogil=True, error_model="numpy")
def _adagrad_da_update(var, gacc, gsacc, grad, lr, l1, l2, step, step_lr):
    # TF's ApplyAdagradDA functor: var = -sign(g)*lr*max(|g| - t*l1, 0)/(l2*(t*lr) + sqrt(gg)).
    for i in range(var.shape[0]):
        g = grad[i]
        ga = gacc[i] + g
        gacc[i] = ga
        gg = gsacc[i] + g * g
        gsacc[i] = gg
        den = l2 * step_lr + np.sqrt(gg)
        if l1 > 0:
            m = np.abs(ga) - step * l1
            if m < 0:
                m = m - m
            if ga > 0:
                var[i] = -(lr * m) / den
            elif ga < 0:
                var[i] = lr * m / den
            else:
                var[i] = m - m
        else:
            var[i] = -(lr * ga) / den


@njit(cache=True, nogil=True, error_model="numpy")
def _adagrad_da_row(var, gacc, gsacc, grad, l1, l2, step, step_lr):
    # TF's SparseApplyAdagradDA rows: var = -sign(g)*max(|g|/t - l1, 0)/(l2 + sqrt(gg)/(t*lr)).
    for i in range(var.shape[0]):
        g = grad[i]
        ga = gacc[i] + g
        gacc[i] = ga
        gg = gsacc[i] + g * g
        gsacc[i] = gg
        den = l2 + np.sqrt(gg) / step_lr
        if l1 > 0:
            m = np.abs(ga) / step - l1
            if m < 0:
                m = m - m
            if ga > 0:
                var[i] = -m / den
            elif ga < 0:
                var[i] = m / den
            else:
                var[i] = m - m
        else:
            var[i] = -(ga / step) / den


@njit(cache=True, nogil=True, error_model="numpy")
def _sparse_adadelta(var, accum, accum_update, lr, rho, one_minus_rho, epsilon, one, grad, idx):
    for i in range(idx.shape[0]):
        r = idx[i]
        _adadelta_update(var[r], accum[r], accum_update[r], lr, rho, one_minus_rho, epsilon, one, grad[i])


@njit(cache=True, nogil=True, error_model="numpy")
def _sparse_ftrl(var, accum, linear, grad, idx, lr, l1, l2, l2_shrinkage, lr_power, one, multiply):
    for i in range(idx.shape[0]):
        r = idx[i]
        _ftrl_update(var[r], accum[r], linear[r], grad[i], lr, l1, l2, l2_shrinkage, lr_power, one, multiply)


@njit(cache=True, nogil=True, error_model="numpy")
def _sparse_proximal_gd(var, alpha, l1, l2, grad, idx):
    for i in range(idx.shape[0]):
        _proximal_gd_update(var[idx[i]], alpha, l1, l2, grad[i])


@njit(cache=True, nogil=True, error_model="numpy")
def _sparse_proximal_adagrad(var, accum, lr, l1, l2, one, grad, idx):
    for i in range(idx.shape[0]):
        r = idx[i]
        _proximal_adagrad_update(var[r], accum[r], lr, l1, l2, one, grad[i])


@njit(cache=True, nogil=True, error_model="numpy")
def _sparse_adagrad_da(var, gacc, gsacc, grad, idx, l1, l2, step, step_lr):
    for i in range(idx.shape[0]):
        r = idx[i]
        _adagrad_da_row(var[r], gacc[r], gsacc[r], grad[i], l1, l2, step, step_lr)


# numpy versions (float16, strided buffers), in place on arrays of any shape.

def _np_sign_max(p, shrink, den):
    """sign(p) * max(|p| - shrink, 0) / den."""
    return np.sign(p) * np.maximum(np.abs(p) - shrink, p.dtype.type(0)) / den


def _np_adadelta(var, accum, accum_update, lr, rho, one_minus_rho, epsilon, one, grad):
    accum[...] = accum * rho + grad * grad * one_minus_rho
    u = np.sqrt(accum_update + epsilon) * (one / np.sqrt(accum + epsilon)) * grad
    var -= u * lr
    accum_update[...] = accum_update * rho + u * u * one_minus_rho


def _np_ftrl(var, accum, linear, grad, lr, l1, l2, l2_shrinkage, lr_power, one, multiply):
    two = one + one
    gs = grad + two * l2_shrinkage * var
    na = accum + grad * grad
    if lr_power == -one / two:
        sna = np.sqrt(na)
        sigma = sna - np.sqrt(accum)
    else:
        sna = na ** -lr_power
        sigma = sna - accum ** -lr_power
    if multiply:
        linear += gs * lr - sigma * var
        bound, quad = l1 * lr, sna + two * l2 * lr
    else:
        linear += gs - sigma / lr * var
        bound, quad = l1, sna / lr + two * l2
    var[...] = (np.clip(linear, -bound, bound) - linear) / quad
    accum[...] = na


def _np_proximal_gd(var, alpha, l1, l2, grad):
    p = var - grad * alpha
    den = var.dtype.type(1) + l2 * alpha
    var[...] = _np_sign_max(p, alpha * l1, den) if l1 > 0 else p / den


def _np_proximal_adagrad(var, accum, lr, l1, l2, one, grad):
    accum += grad * grad
    rate = lr * (one / np.sqrt(accum))
    p = var - grad * rate
    den = one + l2 * rate
    var[...] = _np_sign_max(p, rate * l1, den) if l1 > 0 else p / den


def _np_adagrad_da(var, gacc, gsacc, grad, lr, l1, l2, step, step_lr):
    gacc += grad
    gsacc += grad * grad
    den = l2 * step_lr + np.sqrt(gsacc)
    if l1 > 0:
        var[...] = -lr * np.sign(gacc) * np.maximum(np.abs(gacc) - step * l1, var.dtype.type(0)) / den
    else:
        var[...] = -(lr * gacc) / den


def _np_adagrad_da_row(var, gacc, gsacc, grad, l1, l2, step, step_lr):
    gacc += grad
    gsacc += grad * grad
    den = l2 + np.sqrt(gsacc) / step_lr
    if l1 > 0:
        var[...] = -np.sign(gacc) * np.maximum(np.abs(gacc) / step - l1, var.dtype.type(0)) / den
    else:
        var[...] = -(gacc / step) / den


# Hyper-parameter checks TF's CPU kernels make (InvalidArgument in TF), beyond being scalars.

def _require(op_name, ok, what, value):
    if not ok:
        raise ValueError(f"{op_name}: {what}, got {value}")


def _ftrl_scalars(op_name, dtype, lr, l1, l2, l2_shrinkage, lr_power, multiply, check):
    """FTRL's scalars; with `check` (the sparse kernels: TF 2.21's dense ApplyFtrl(V2) checks only
    that they are scalars) also their signs."""
    lr, l1, l2, l2_shrinkage, lr_power = _scalars(op_name, dtype, lr=lr, l1=l1, l2=l2, l2_shrinkage=l2_shrinkage,
                                                  lr_power=lr_power)
    if not check:
        return lr, l1, l2, l2_shrinkage, lr_power
    _require(op_name, lr > 0 or (multiply and lr >= 0),
             "lr must be a positive scalar (or zero if multiply_linear_by_lr is set)", lr)
    _require(op_name, l1 >= 0, "l1 regularization strength must be non-negative", l1)
    _require(op_name, l2 >= 0, "l2 regularization strength must be non-negative", l2)
    _require(op_name, l2_shrinkage >= 0, "l2 shrinkage regularization strength must be non-negative", l2_shrinkage)
    _require(op_name, lr_power <= 0, "lr_power must be a non-positive scalar", lr_power)
    return lr, l1, l2, l2_shrinkage, lr_power


def _proximal_adagrad_scalars(op_name, dtype, lr, l1, l2):
    lr, l1, l2 = _scalars(op_name, dtype, lr=lr, l1=l1, l2=l2)
    _require(op_name, lr > 0, "lr must be a positive scalar", lr)
    _require(op_name, l1 >= 0, "l1 regularization strength must be non-negative", l1)
    _require(op_name, l2 >= 0, "l2 regularization strength must be non-negative", l2)
    return lr, l1, l2


def _global_step(op_name, global_step):
    a = np.asarray(global_step)
    if a.ndim != 0 or a.dtype.kind not in "iu":
        raise ValueError(f"{op_name}: global_step must be an integer scalar, got {a.dtype} of shape {a.shape}")
    return int(a)


def _prepare_adadelta(attrs):
    """tf.raw_ops.ApplyAdadelta: ``accum = accum*rho + grad**2*(1-rho);
    update = sqrt(accum_update + epsilon)*rsqrt(accum + epsilon)*grad; var -= update*lr;
    accum_update = accum_update*rho + update**2*(1-rho)``."""
    op = "ApplyAdadelta"

    def prep(var, accum, accum_update, lr, rho, epsilon, grad):
        _check_slots(op, var, accum=accum, accum_update=accum_update)
        grad = _dense_grad(op, var, grad)
        lr, rho, epsilon = _scalars(op, var.dtype, lr=lr, rho=rho, epsilon=epsilon)
        one = var.dtype.type(1)
        s = (lr, rho, one - rho, epsilon, one)
        if _fused(var, accum, accum_update):
            return var, _adadelta_update, (_flat(var), _flat(accum), _flat(accum_update), *s,
                                           _flat_grad(grad, var.dtype)), True
        return var, _np_adadelta, (var, accum, accum_update, *s, grad), False
    return prep


def _prepare_ftrl(op, shrinkage):
    def prepare(attrs):
        """tf.raw_ops.ApplyFtrl / ApplyFtrlV2 (see `_ftrl_update`)."""
        multiply = bool(attrs.get("multiply_linear_by_lr", False))

        def prep(var, accum, linear, grad, lr, l1, l2, *rest):
            l2_shrinkage, lr_power = rest if shrinkage else (0, rest[0])
            _check_slots(op, var, accum=accum, linear=linear)
            grad = _dense_grad(op, var, grad)
            s = _ftrl_scalars(op, var.dtype, lr, l1, l2, l2_shrinkage, lr_power, multiply, False)
            one = var.dtype.type(1)
            if _fused(var, accum, linear):
                return var, _ftrl_update, (_flat(var), _flat(accum), _flat(linear), _flat_grad(grad, var.dtype), *s,
                                           one, multiply), True
            return var, _np_ftrl, (var, accum, linear, grad, *s, one, multiply), False
        return prep
    return prepare


def _prepare_proximal_gd(attrs):
    """tf.raw_ops.ApplyProximalGradientDescent: ``prox = var - alpha*delta;
    var = sign(prox)*max(|prox| - alpha*l1, 0)/(1 + l2*alpha)`` (just ``prox/(1 + l2*alpha)`` when l1 <= 0)."""
    op = "ApplyProximalGradientDescent"

    def prep(var, alpha, l1, l2, delta):
        delta = _dense_grad(op, var, delta, "delta")
        alpha, l1, l2 = _scalars(op, var.dtype, alpha=alpha, l1=l1, l2=l2)
        if _fused(var):
            return var, _proximal_gd_update, (_flat(var), alpha, l1, l2, _flat_grad(delta, var.dtype)), True
        return var, _np_proximal_gd, (var, alpha, l1, l2, delta), False
    return prep


def _prepare_proximal_adagrad(attrs):
    """tf.raw_ops.ApplyProximalAdagrad: ``accum += grad**2; rate = lr*rsqrt(accum)``, then the
    proximal step of ApplyProximalGradientDescent with `rate`."""
    op = "ApplyProximalAdagrad"

    def prep(var, accum, lr, l1, l2, grad):
        _check_slots(op, var, accum=accum)
        grad = _dense_grad(op, var, grad)
        s = _proximal_adagrad_scalars(op, var.dtype, lr, l1, l2)
        one = var.dtype.type(1)
        if _fused(var, accum):
            return var, _proximal_adagrad_update, (_flat(var), _flat(accum), *s, one,
                                                   _flat_grad(grad, var.dtype)), True
        return var, _np_proximal_adagrad, (var, accum, *s, one, grad), False
    return prep


def _da_step(op, dtype, lr, global_step):
    """(t, t*lr) as TF's functor forms them: the step goes through float32 first."""
    t = dtype.type(np.float32(_global_step(op, global_step)))
    return t, dtype.type(t * lr)


def _prepare_adagrad_da(attrs):
    """tf.raw_ops.ApplyAdagradDA: ``g_acc += grad; gg_acc += grad**2;
    var = -sign(g_acc)*lr*max(|g_acc| - t*l1, 0)/(l2*t*lr + sqrt(gg_acc))``, t = global_step."""
    op = "ApplyAdagradDA"

    def prep(var, gacc, gsacc, grad, lr, l1, l2, global_step):
        _check_slots(op, var, gradient_accumulator=gacc, gradient_squared_accumulator=gsacc)
        grad = _dense_grad(op, var, grad)
        lr, l1, l2 = _scalars(op, var.dtype, lr=lr, l1=l1, l2=l2)
        step, step_lr = _da_step(op, var.dtype, lr, global_step)
        if _fused(var, gacc, gsacc):
            return var, _adagrad_da_update, (_flat(var), _flat(gacc), _flat(gsacc), _flat_grad(grad, var.dtype), lr,
                                             l1, l2, step, step_lr), True
        return var, _np_adagrad_da, (var, gacc, gsacc, grad, lr, l1, l2, step, step_lr), False
    return prep


apply_adadelta = _register_dense("ApplyAdadelta", _prepare_adadelta, 5)
apply_ftrl = _register_dense("ApplyFtrl", _prepare_ftrl("ApplyFtrl", False), 5)
apply_ftrl_v2 = _register_dense("ApplyFtrlV2", _prepare_ftrl("ApplyFtrlV2", True), 5)
apply_proximal_gradient_descent = _register_dense("ApplyProximalGradientDescent", _prepare_proximal_gd, 3)
apply_proximal_adagrad = _register_dense("ApplyProximalAdagrad", _prepare_proximal_adagrad, 4)
apply_adagrad_da = _register_dense("ApplyAdagradDA", _prepare_adagrad_da, 5)


@register_kernel("SparseApplyAdadelta", "CPU", cost=_sparse_cost(6))
def sparse_apply_adadelta(attrs):
    """tf.raw_ops.SparseApplyAdadelta: ApplyAdadelta on the rows named by indices, in order."""
    op = "SparseApplyAdadelta"

    def fn(var, accum, accum_update, lr, rho, epsilon, grad, indices):
        _check_slots(op, var, accum=accum, accum_update=accum_update)
        idx, grad = _sparse_args(op, var, grad, indices)
        lr, rho, epsilon = _scalars(op, var.dtype, lr=lr, rho=rho, epsilon=epsilon)
        one = var.dtype.type(1)
        s = (lr, rho, one - rho, epsilon, one)
        if _fused(var, accum, accum_update):
            _sparse_adadelta(_rows(var), _rows(accum), _rows(accum_update), *s,
                             _row_grad(grad, idx.size, var.dtype), idx)
        else:
            _sparse_fallback(_np_adadelta, idx, (var, accum, accum_update), grad, *s)
        return var
    return fn


def _sparse_ftrl_kernel(op, shrinkage):
    def factory(attrs):
        """tf.raw_ops.SparseApplyFtrl / SparseApplyFtrlV2: ApplyFtrl(V2) on the rows named by indices, in order."""
        multiply = bool(attrs.get("multiply_linear_by_lr", False))

        def fn(var, accum, linear, grad, indices, lr, l1, l2, *rest):
            l2_shrinkage, lr_power = rest if shrinkage else (0, rest[0])
            _check_slots(op, var, accum=accum, linear=linear)
            idx, grad = _sparse_args(op, var, grad, indices)
            s = _ftrl_scalars(op, var.dtype, lr, l1, l2, l2_shrinkage, lr_power, multiply, True)
            one = var.dtype.type(1)
            if _fused(var, accum, linear):
                _sparse_ftrl(_rows(var), _rows(accum), _rows(linear), _row_grad(grad, idx.size, var.dtype), idx, *s,
                             one, multiply)
            else:
                for i, r in enumerate(idx.tolist()):
                    _np_ftrl(var[r:r + 1], accum[r:r + 1], linear[r:r + 1], grad[i:i + 1], *s, one, multiply)
            return var
        return fn
    return factory


sparse_apply_ftrl = register_kernel("SparseApplyFtrl", "CPU", cost=_sparse_cost(3))(
    _sparse_ftrl_kernel("SparseApplyFtrl", False))
sparse_apply_ftrl_v2 = register_kernel("SparseApplyFtrlV2", "CPU", cost=_sparse_cost(3))(
    _sparse_ftrl_kernel("SparseApplyFtrlV2", True))


@register_kernel("SparseApplyProximalGradientDescent", "CPU", cost=_sparse_cost(4))
def sparse_apply_proximal_gradient_descent(attrs):
    """tf.raw_ops.SparseApplyProximalGradientDescent: the proximal step on the rows named by indices, in order."""
    op = "SparseApplyProximalGradientDescent"

    def fn(var, alpha, l1, l2, grad, indices):
        idx, grad = _sparse_args(op, var, grad, indices)
        alpha, l1, l2 = _scalars(op, var.dtype, alpha=alpha, l1=l1, l2=l2)
        if _fused(var):
            _sparse_proximal_gd(_rows(var), alpha, l1, l2, _row_grad(grad, idx.size, var.dtype), idx)
        else:
            _sparse_fallback(_np_proximal_gd, idx, (var,), grad, alpha, l1, l2)
        return var
    return fn


@register_kernel("SparseApplyProximalAdagrad", "CPU", cost=_sparse_cost(5))
def sparse_apply_proximal_adagrad(attrs):
    """tf.raw_ops.SparseApplyProximalAdagrad: ApplyProximalAdagrad on the rows named by indices, in order."""
    op = "SparseApplyProximalAdagrad"

    def fn(var, accum, lr, l1, l2, grad, indices):
        _check_slots(op, var, accum=accum)
        idx, grad = _sparse_args(op, var, grad, indices)
        s = _proximal_adagrad_scalars(op, var.dtype, lr, l1, l2)
        one = var.dtype.type(1)
        if _fused(var, accum):
            _sparse_proximal_adagrad(_rows(var), _rows(accum), *s, one, _row_grad(grad, idx.size, var.dtype), idx)
        else:
            _sparse_fallback(_np_proximal_adagrad, idx, (var, accum), grad, *s, one)
        return var
    return fn


@register_kernel("SparseApplyAdagradDA", "CPU", cost=_sparse_cost(3))
def sparse_apply_adagrad_da(attrs):
    """tf.raw_ops.SparseApplyAdagradDA: Adagrad-DA on the rows named by indices, in order, with TF's
    row formula ``var = -sign(g_acc)*max(|g_acc|/t - l1, 0)/(l2 + sqrt(gg_acc)/(t*lr))``."""
    op = "SparseApplyAdagradDA"

    def fn(var, gacc, gsacc, grad, indices, lr, l1, l2, global_step):
        _check_slots(op, var, gradient_accumulator=gacc, gradient_squared_accumulator=gsacc)
        idx, grad = _sparse_args(op, var, grad, indices)
        lr, l1, l2 = _scalars(op, var.dtype, lr=lr, l1=l1, l2=l2)
        t = _global_step(op, global_step)
        step, step_lr = var.dtype.type(t), var.dtype.type(float(t) * float(lr))
        if _fused(var, gacc, gsacc):
            _sparse_adagrad_da(_rows(var), _rows(gacc), _rows(gsacc), _row_grad(grad, idx.size, var.dtype), idx,
                               l1, l2, step, step_lr)
        else:
            for i, r in enumerate(idx.tolist()):
                _np_adagrad_da_row(var[r:r + 1], gacc[r:r + 1], gsacc[r:r + 1], grad[i:i + 1], l1, l2, step, step_lr)
        return var
    return fn
