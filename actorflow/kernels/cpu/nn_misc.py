"""CPU kernels of graph/ops/nn_misc_ops.py: Selu, SeluGrad, Softsign, SoftsignGrad (numpy).

float16 is computed in float32 and rounded back, as the other activations in math.py do.
"""
from __future__ import annotations

import numpy as np

from actorflow.kernels.registry import register_kernel

_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)

# TF's constants (selu_op.h): scale and scale * alpha.
_SCALE = 1.0507009873554804934193349852946
_SCALE_ALPHA = 1.7580993408473768599402175208123


def _in_float32(fn):
    """Runs `fn` in float32 for float16 arrays and casts the result back."""
    def wrapped(*arrays):
        dt = arrays[0].dtype
        if dt == _F16:
            return fn(*(a.astype(_F32) for a in arrays)).astype(_F16)
        return fn(*arrays)
    return wrapped


@_in_float32
def selu(features):
    """scale * x where x >= 0, scale * alpha * (exp(x) - 1) elsewhere; op Selu."""
    x = features
    dt = x.dtype.type
    with np.errstate(over="ignore", invalid="ignore"):
        neg = dt(_SCALE_ALPHA) * np.expm1(np.minimum(x, 0))
    return np.where(x < 0, neg, dt(_SCALE) * x).astype(x.dtype, copy=False)


@_in_float32
def selu_grad(gradients, outputs):
    """gradients * (outputs + scale * alpha) where outputs < 0, else gradients * scale; op SeluGrad."""
    dt = outputs.dtype.type
    return np.where(outputs < 0, gradients * (outputs + dt(_SCALE_ALPHA)),
                    gradients * dt(_SCALE)).astype(outputs.dtype, copy=False)


@_in_float32
def softsign(features):
    """x / (|x| + 1); op Softsign."""
    d = np.abs(features)
    d += 1
    return np.divide(features, d).astype(features.dtype, copy=False)


@_in_float32
def softsign_grad(gradients, features):
    """gradients / (|x| + 1)**2; op SoftsignGrad."""
    d = np.abs(features)
    d += 1
    d *= d
    return np.divide(gradients, d).astype(features.dtype, copy=False)


for _op, _fn in {"Selu": selu, "SeluGrad": selu_grad, "Softsign": softsign, "SoftsignGrad": softsign_grad}.items():
    register_kernel(_op, "CPU")(lambda attrs, _fn=_fn: _fn)
