"""Learning-rate schedules as graph tensors of the global step (tf.compat.v1.train.*_decay).

Each returns a scalar tensor of the learning rate's dtype (float32 for a Python number) that
recomputes the rate from `global_step` every time it is evaluated; pass it to an optimizer.
"""
from __future__ import annotations

import math

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, convert_to_tensor, name_scope
from actorflow.graph.ops import math_ops

__all__ = ["exponential_decay", "piecewise_constant", "polynomial_decay", "natural_exp_decay",
           "inverse_time_decay", "cosine_decay", "cosine_decay_restarts", "linear_cosine_decay",
           "noisy_linear_cosine_decay", "piecewise_constant_decay"]


def _tensor_like(x) -> bool:
    return isinstance(x, Tensor) or hasattr(x, "_as_graph_element")


def _as(x, dtype, name=None) -> Tensor:
    """`x` as a tensor of `dtype`: a tensor is cast, a number becomes a constant of that dtype."""
    if _tensor_like(x):
        return math_ops.cast(convert_to_tensor(x), dtype)
    return convert_to_tensor(x, dtype=dtype, name=name)


def _require_step(global_step, who):
    if global_step is None:
        raise ValueError(f"global_step is required for {who}.")


def _lr(learning_rate) -> Tensor:
    lr = convert_to_tensor(learning_rate, name="learning_rate") if not _tensor_like(learning_rate) \
        else convert_to_tensor(learning_rate)
    if not lr.dtype.is_floating:
        lr = math_ops.cast(lr, dtypes.float32)
    return lr


def _decay_progress(global_step, decay_steps, staircase, dtype):
    p = math_ops.divide(_as(global_step, dtype), _as(decay_steps, dtype))
    return math_ops.floor(p) if staircase else p


def exponential_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None):
    """learning_rate * decay_rate ** (global_step / decay_steps), the exponent floored with
    `staircase` (tf.compat.v1.train.exponential_decay)."""
    _require_step(global_step, "exponential_decay")
    with name_scope(name, "ExponentialDecay", [learning_rate, global_step]) as scope:
        lr = _lr(learning_rate)
        p = _decay_progress(global_step, decay_steps, staircase, lr.dtype)
        return math_ops.multiply(lr, math_ops.pow(_as(decay_rate, lr.dtype), p), name=scope)


def natural_exp_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None):
    """learning_rate * exp(-decay_rate * global_step / decay_steps) (tf.compat.v1.train.natural_exp_decay)."""
    _require_step(global_step, "natural_exp_decay")
    with name_scope(name, "NaturalExpDecay", [learning_rate, global_step]) as scope:
        lr = _lr(learning_rate)
        p = _decay_progress(global_step, decay_steps, staircase, lr.dtype)
        exponent = math_ops.exp(math_ops.multiply(math_ops.negative(_as(decay_rate, lr.dtype)), p))
        return math_ops.multiply(lr, exponent, name=scope)


def inverse_time_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None):
    """learning_rate / (1 + decay_rate * global_step / decay_steps) (tf.compat.v1.train.inverse_time_decay)."""
    _require_step(global_step, "inverse_time_decay")
    with name_scope(name, "InverseTimeDecay", [learning_rate, global_step]) as scope:
        lr = _lr(learning_rate)
        p = _decay_progress(global_step, decay_steps, staircase, lr.dtype)
        denom = math_ops.add(_as(1, lr.dtype), math_ops.multiply(_as(decay_rate, lr.dtype), p))
        return math_ops.divide(lr, denom, name=scope)


def polynomial_decay(learning_rate, global_step, decay_steps, end_learning_rate=0.0001, power=1.0, cycle=False,
                     name=None):
    """(learning_rate - end) * (1 - step / decay_steps) ** power + end, with step capped at
    decay_steps; with `cycle`, decay_steps grows to the next multiple of itself past the step
    (tf.compat.v1.train.polynomial_decay)."""
    _require_step(global_step, "polynomial_decay")
    with name_scope(name, "PolynomialDecay", [learning_rate, global_step]) as scope:
        lr = _lr(learning_rate)
        dt = lr.dtype
        end = _as(end_learning_rate, dt)
        step = _as(global_step, dt)
        steps = _as(decay_steps, dt)
        if cycle:
            # The first multiple of decay_steps at or past the step; 1 at step 0.
            multiplier = math_ops.where(math_ops.equal(step, _as(0, dt)), _as(1, dt),
                                        math_ops.ceil(math_ops.divide(step, steps)))
            steps = math_ops.multiply(steps, multiplier)
        else:
            step = math_ops.minimum(step, steps)
        frac = math_ops.subtract(_as(1, dt), math_ops.divide(step, steps))
        return math_ops.add(math_ops.multiply(math_ops.subtract(lr, end), math_ops.pow(frac, _as(power, dt))), end,
                            name=scope)


def cosine_decay(learning_rate, global_step, decay_steps, alpha=0.0, name=None):
    """learning_rate * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) / decay_steps)) + alpha)
    (tf.compat.v1.train.cosine_decay)."""
    _require_step(global_step, "cosine_decay")
    with name_scope(name, "CosineDecay", [learning_rate, global_step]) as scope:
        lr = _lr(learning_rate)
        dt = lr.dtype
        steps = _as(decay_steps, dt)
        frac = math_ops.divide(math_ops.minimum(_as(global_step, dt), steps), steps)
        cosine = math_ops.multiply(_as(0.5, dt), math_ops.add(_as(1, dt),
                                                              math_ops.cos(math_ops.multiply(_as(math.pi, dt), frac))))
        decayed = math_ops.add(math_ops.multiply(_as(1 - alpha, dt), cosine), _as(alpha, dt))
        return math_ops.multiply(lr, decayed, name=scope)


def piecewise_constant(x, boundaries, values, name=None):
    """values[0] while x <= boundaries[0], values[i] while boundaries[i-1] < x <= boundaries[i],
    values[-1] after the last boundary (tf.compat.v1.train.piecewise_constant).

    Boundaries must have x's dtype (Python ints are promoted to an int64 x, as in TF); values
    must share one dtype. Built with selects instead of TF's `case`.
    """
    boundaries, values = list(boundaries), list(values)
    if len(boundaries) != len(values) - 1:
        raise ValueError("The length of boundaries should be 1 less than the length of values")
    with name_scope(name, "PiecewiseConstant", [x]) as scope:
        xt = convert_to_tensor(x)
        bts = []
        for b in boundaries:
            bt = convert_to_tensor(b) if _tensor_like(b) else convert_to_tensor(b, preferred_dtype=xt.dtype)
            if bt.dtype is not xt.dtype:
                if bt.dtype is dtypes.int32 and xt.dtype is dtypes.int64:
                    bt = math_ops.cast(bt, dtypes.int64)
                else:
                    raise ValueError(f"Boundaries ({bt.dtype.name}) must have the same dtype as x ({xt.dtype.name}).")
            bts.append(bt)
        vts = [convert_to_tensor(v) for v in values]
        for v in vts[1:]:
            if v.dtype is not vts[0].dtype:
                raise ValueError(f"Values must have elements all with the same dtype ({vts[0].dtype.name} vs "
                                 f"{v.dtype.name}).")
        result = vts[0]
        for i, bt in enumerate(bts):
            last = i == len(bts) - 1
            result = math_ops.where(math_ops.greater(xt, bt), vts[i + 1], result, name=scope if last else None)
        if not bts:
            from actorflow.graph.ops.constant import identity
            result = identity(result, name=scope)
        return result


piecewise_constant_decay = piecewise_constant


def cosine_decay_restarts(learning_rate, global_step, first_decay_steps, t_mul=2.0, m_mul=1.0, alpha=0.0, name=None):
    """Cosine decay with warm restarts, periods growing by `t_mul` and peaks by `m_mul`
    (tf.compat.v1.train.cosine_decay_restarts, SGDR)."""
    _require_step(global_step, "cosine_decay_restarts")
    with name_scope(name, "SGDRDecay", [learning_rate, global_step]) as scope:
        lr = _lr(learning_rate)
        dt = lr.dtype
        frac = math_ops.divide(_as(global_step, dt), _as(first_decay_steps, dt))
        if float(t_mul) == 1.0:
            i_restart = math_ops.floor(frac)
            frac = frac - i_restart
        else:
            t = _as(t_mul, dt)
            i_restart = math_ops.floor(math_ops.log(1.0 - frac * (1.0 - t)) / math_ops.log(t))
            sum_r = (1.0 - math_ops.pow(t, i_restart)) / (1.0 - t)
            frac = (frac - sum_r) / math_ops.pow(t, i_restart)
        m_fac = math_ops.pow(_as(m_mul, dt), i_restart)
        cosine = 0.5 * m_fac * (1.0 + math_ops.cos(_as(math.pi, dt) * frac))
        decayed = (1.0 - _as(alpha, dt)) * cosine + _as(alpha, dt)
        return math_ops.multiply(lr, decayed, name=scope)


def _linear_cosine(lr, global_step, decay_steps, num_periods, dt):
    steps = _as(decay_steps, dt)
    step = math_ops.minimum(_as(global_step, dt), steps)
    linear = (steps - step) / steps
    cosine = 0.5 * (1.0 + math_ops.cos(_as(math.pi, dt) * 2.0 * _as(num_periods, dt) * (step / steps)))
    return step, linear, cosine


def linear_cosine_decay(learning_rate, global_step, decay_steps, num_periods=0.5, alpha=0.0, beta=0.001, name=None):
    """learning_rate * ((alpha + linear) * cosine + beta), linear going from 1 to 0 over
    `decay_steps` and cosine over `num_periods` periods (tf.compat.v1.train.linear_cosine_decay)."""
    _require_step(global_step, "linear_cosine_decay")
    with name_scope(name, "LinearCosineDecay", [learning_rate, global_step]) as scope:
        lr = _lr(learning_rate)
        dt = lr.dtype
        _, linear, cosine = _linear_cosine(lr, global_step, decay_steps, num_periods, dt)
        return math_ops.multiply(lr, (_as(alpha, dt) + linear) * cosine + _as(beta, dt), name=scope)


def noisy_linear_cosine_decay(learning_rate, global_step, decay_steps, initial_variance=1.0, variance_decay=0.55,
                              num_periods=0.5, alpha=0.0, beta=0.001, name=None):
    """linear_cosine_decay with Gaussian noise of variance initial_variance / (1 + step) **
    variance_decay added to its linear part (tf.compat.v1.train.noisy_linear_cosine_decay)."""
    _require_step(global_step, "noisy_linear_cosine_decay")
    from actorflow.graph.ops import random_ops
    with name_scope(name, "NoisyLinearCosineDecay", [learning_rate, global_step]) as scope:
        lr = _lr(learning_rate)
        dt = lr.dtype
        _, linear, cosine = _linear_cosine(lr, global_step, decay_steps, num_periods, dt)
        variance = _as(initial_variance, dt) / math_ops.pow(1.0 + _as(global_step, dt), _as(variance_decay, dt))
        noisy = linear + random_ops.random_normal([], dtype=dt) * math_ops.sqrt(variance)
        return math_ops.multiply(lr, (_as(alpha, dt) + noisy) * cosine + _as(beta, dt), name=scope)
