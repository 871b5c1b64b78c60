"""GPU kernels for optimizer updates: each dense Apply* op is one fused element-wise kernel that
updates the variable and its slots in place (one pass over memory, no temporaries).

Hyper-parameters (learning rate, beta powers, ...) may live on either device: a host scalar is
passed by value, a 0-d GPU array is read by the kernel, so a decaying learning rate kept in a GPU
variable costs no host round trip. Adam's bias-corrected step size is computed in the kernel for
the same reason.

SparseApply* ops first sum the gradients of duplicate indices (as TF's optimizers deduplicate
IndexedSlices) and then apply the dense formula to the touched rows only; finding the unique
indices waits for the GPU once.
"""
from __future__ import annotations

import cupyx
import numpy as np

from actorflow.kernels.cpu.training import _check_slots
from actorflow.kernels.gpu._common import cp
from actorflow.kernels.registry import register_kernel


def _scalar(op, name, x, dt):
    if isinstance(x, cp.ndarray):
        if x.ndim != 0:
            raise ValueError(f"{op}: {name} must be a scalar, got shape {x.shape}")
        return x if x.dtype == dt else x.astype(dt)
    a = np.asarray(x)
    if a.ndim != 0:
        raise ValueError(f"{op}: {name} must be a scalar, got shape {a.shape}")
    return dt.type(a[()])


def _grad(op, var, g, name="grad"):
    if g.shape != var.shape:
        raise ValueError(f"{op}: var and {name} must have the same shape, got {var.shape} and {g.shape}")
    return g if g.dtype == var.dtype else g.astype(var.dtype)


_gd = cp.ElementwiseKernel("T alpha, T delta", "T var", "var -= alpha * delta", "af_apply_gd")
_momentum = cp.ElementwiseKernel("T lr, T grad, T momentum", "T var, T accum",
                                 "accum = accum * momentum + grad; var -= accum * lr", "af_apply_momentum")
_momentum_nesterov = cp.ElementwiseKernel(
    "T lr, T grad, T momentum", "T var, T accum",
    "accum = accum * momentum + grad; var -= grad * lr + accum * momentum * lr", "af_apply_momentum_nesterov")
_adagrad = cp.ElementwiseKernel("T lr, T grad", "T var, T accum",
                                "accum += grad * grad; var -= grad * lr / sqrt(accum)", "af_apply_adagrad")
_adagrad_no_slots = cp.ElementwiseKernel("T lr, T grad", "T var, T accum",
                                         "var -= grad * lr / sqrt(accum)", "af_apply_adagrad_no_slots")
_rmsprop = cp.ElementwiseKernel(
    "T lr, T rho, T momentum, T epsilon, T grad", "T var, T ms, T mom",
    "ms += (grad * grad - ms) * ((T)1 - rho); mom = mom * momentum + grad * lr / sqrt(ms + epsilon); var -= mom",
    "af_apply_rmsprop")
_centered_rmsprop = cp.ElementwiseKernel(
    "T lr, T rho, T momentum, T epsilon, T grad", "T var, T mg, T ms, T mom",
    "T omr = (T)1 - rho; mg += (grad - mg) * omr; ms += (grad * grad - ms) * omr; "
    "mom = mom * momentum + grad * lr / sqrt(ms - mg * mg + epsilon); var -= mom",
    "af_apply_centered_rmsprop")
_ADAM_BODY = ("T one = 1; T alpha = lr * sqrt(one - b2p) / (one - b1p); "
              "m += (grad - m) * (one - beta1); v += (grad * grad - v) * (one - beta2); ")
_adam = cp.ElementwiseKernel(
    "T b1p, T b2p, T lr, T beta1, T beta2, T epsilon, T grad", "T var, T m, T v",
    _ADAM_BODY + "var -= m * alpha / (sqrt(v) + epsilon)", "af_apply_adam")
_adam_nesterov = cp.ElementwiseKernel(
    "T b1p, T b2p, T lr, T beta1, T beta2, T epsilon, T grad", "T var, T m, T v",
    _ADAM_BODY + "var -= (grad * (one - beta1) + beta1 * m) * alpha / (sqrt(v) + epsilon)",
    "af_apply_adam_nesterov")


@register_kernel("ApplyGradientDescent", "GPU", releases_gil=False)
def apply_gradient_descent(attrs):
    op = "ApplyGradientDescent"

    def fn(var, alpha, delta):
        _gd(_scalar(op, "alpha", alpha, var.dtype), _grad(op, var, delta, "delta"), var)
        return var
    return fn


@register_kernel("ApplyMomentum", "GPU", releases_gil=False)
def apply_momentum(attrs):
    op = "ApplyMomentum"
    k = _momentum_nesterov if attrs.get("use_nesterov", False) else _momentum

    def fn(var, accum, lr, grad, momentum):
        _check_slots(op, var, accum=accum)
        dt = var.dtype
        k(_scalar(op, "lr", lr, dt), _grad(op, var, grad), _scalar(op, "momentum", momentum, dt), var, accum)
        return var
    return fn


@register_kernel("ApplyAdagrad", "GPU", releases_gil=False)
def apply_adagrad(attrs):
    op = "ApplyAdagrad"
    k = _adagrad if attrs.get("update_slots", True) else _adagrad_no_slots

    def fn(var, accum, lr, grad):
        _check_slots(op, var, accum=accum)
        k(_scalar(op, "lr", lr, var.dtype), _grad(op, var, grad), var, accum)
        return var
    return fn


@register_kernel("ApplyRMSProp", "GPU", releases_gil=False)
def apply_rms_prop(attrs):
    op = "ApplyRMSProp"

    def fn(var, ms, mom, lr, rho, momentum, epsilon, grad):
        _check_slots(op, var, ms=ms, mom=mom)
        dt = var.dtype
        _rmsprop(_scalar(op, "lr", lr, dt), _scalar(op, "rho", rho, dt), _scalar(op, "momentum", momentum, dt),
                 _scalar(op, "epsilon", epsilon, dt), _grad(op, var, grad), var, ms, mom)
        return var
    return fn


@register_kernel("ApplyCenteredRMSProp", "GPU", releases_gil=False)
def apply_centered_rms_prop(attrs):
    op = "ApplyCenteredRMSProp"

    def fn(var, mg, ms, mom, lr, rho, momentum, epsilon, grad):
        _check_slots(op, var, mg=mg, ms=ms, mom=mom)
        dt = var.dtype
        _centered_rmsprop(_scalar(op, "lr", lr, dt), _scalar(op, "rho", rho, dt),
                          _scalar(op, "momentum", momentum, dt), _scalar(op, "epsilon", epsilon, dt),
                          _grad(op, var, grad), var, mg, ms, mom)
        return var
    return fn


def _adam_args(op, var, b1p, b2p, lr, beta1, beta2, epsilon):
    dt = var.dtype
    return tuple(_scalar(op, n, x, dt) for n, x in (("beta1_power", b1p), ("beta2_power", b2p), ("lr", lr),
                                                     ("beta1", beta1), ("beta2", beta2), ("epsilon", epsilon)))


@register_kernel("ApplyAdam", "GPU", releases_gil=False)
def apply_adam(attrs):
    op = "ApplyAdam"
    k = _adam_nesterov if attrs.get("use_nesterov", False) else _adam

    def fn(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad):
        _check_slots(op, var, m=m, v=v)
        k(*_adam_args(op, var, beta1_power, beta2_power, lr, beta1, beta2, epsilon), _grad(op, var, grad), var, m, v)
        return var
    return fn


# -- sparse ----------------------------------------------------------------------------------------
def _sparse_rows(op, var, grad, indices):
    """(unique row indices, summed gradient rows) of a row-sparse update."""
    if var.ndim == 0:
        raise ValueError(f"{op}: var must have rank >= 1, got a scalar")
    if indices.ndim != 1 or indices.dtype.kind not in "iu":
        raise ValueError(f"{op}: indices must be a 1-D integer tensor, got {indices.dtype} of shape {indices.shape}")
    want = tuple(indices.shape) + var.shape[1:]
    if grad.shape != want:
        raise ValueError(f"{op}: grad must have shape [len(indices)] + var.shape[1:] = {want}, got {grad.shape}")
    idx = cp.asarray(indices).astype(np.int64, copy=False)
    rows, inv = cp.unique(idx, return_inverse=True)
    if rows.size:
        lo, hi = (int(v) for v in cp.stack([rows[0], rows[-1]]).get())
        if lo < 0 or hi >= var.shape[0]:
            bad = lo if lo < 0 else hi
            raise IndexError(f"{op}: indices contains {bad}, which is not in [0, {var.shape[0]}) "
                             f"(the variable's first dimension is {var.shape[0]})")
    # Gradient rows in the order of the (sorted) unique indices, duplicates summed.
    summed = cp.zeros((rows.size,) + var.shape[1:], var.dtype)
    cupyx.scatter_add(summed, inv.reshape(-1), grad.astype(var.dtype, copy=False))
    return rows, summed


def _sparse(op, dense_kernel, n_slots, n_before_grad, n_after_indices=0):
    """A SparseApply* kernel from the dense one: gather the touched rows of the variable and its
    slots, update them with the dense kernel, scatter them back."""
    def factory(attrs):
        k = dense_kernel(attrs)

        def fn(*inputs):
            refs = inputs[:1 + n_slots]
            before = inputs[1 + n_slots:1 + n_slots + n_before_grad]
            grad, indices = inputs[1 + n_slots + n_before_grad:3 + n_slots + n_before_grad]
            after = inputs[3 + n_slots + n_before_grad:]
            var = refs[0]
            for s in refs[1:]:
                if s.shape != var.shape:
                    raise ValueError(f"{op}: slots must have the variable's shape {var.shape}, got {s.shape}")
            rows, g = _sparse_rows(op, var, grad, indices)
            if rows.size == 0:
                return var
            parts = [r[rows] for r in refs]
            k(*parts, *before, g, *after)
            for r, p in zip(refs, parts):
                r[rows] = p
            return var
        return fn
    register_kernel(op, "GPU", releases_gil=False)(factory)


_sparse("SparseApplyGradientDescent", apply_gradient_descent, 0, 1)
_sparse("SparseApplyMomentum", apply_momentum, 1, 1, 1)
_sparse("SparseApplyAdagrad", apply_adagrad, 1, 1)
_sparse("SparseApplyRMSProp", apply_rms_prop, 2, 4)
_sparse("SparseApplyCenteredRMSProp", apply_centered_rms_prop, 3, 4)
_sparse("SparseApplyAdam", apply_adam, 2, 6)
