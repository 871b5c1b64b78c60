"""The TF-1.x optimizers: gradient descent, momentum, Adagrad, RMSProp, Adam, Adadelta, FTRL,
proximal gradient descent, proximal Adagrad and Adagrad dual averaging.

Each builds one Apply* op per dense gradient and one SparseApply* op per IndexedSlices gradient
(see actorflow/train/optimizer.py for the shared machinery and the differences from TF).
Learning rates and other hyper-parameters may be Python numbers, tensors (e.g. from
`af.train.exponential_decay`) or zero-argument callables.
"""
from __future__ import annotations

import numpy as np

from actorflow.graph.ops import training_ops
from actorflow.train.optimizer import Optimizer

__all__ = ["GradientDescentOptimizer", "MomentumOptimizer", "AdagradOptimizer", "RMSPropOptimizer",
           "AdamOptimizer", "AdadeltaOptimizer", "FtrlOptimizer", "ProximalGradientDescentOptimizer",
           "ProximalAdagradOptimizer", "AdagradDAOptimizer"]


class GradientDescentOptimizer(Optimizer):
    """var -= learning_rate * grad (tf.compat.v1.train.GradientDescentOptimizer)."""

    def __init__(self, learning_rate, use_locking=False, name="GradientDescent"):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._set_hyper("learning_rate", learning_rate)

    def _apply_dense(self, grad, var):
        return training_ops.apply_gradient_descent(var, self._hyper("learning_rate", var.dtype), grad,
                                                   use_locking=self._use_locking)

    def _apply_sparse(self, grad, var):
        return training_ops.sparse_apply_gradient_descent(var, self._hyper("learning_rate", var.dtype), grad.values,
                                                          grad.indices, use_locking=self._use_locking)


class MomentumOptimizer(Optimizer):
    """accum = momentum * accum + grad; var -= learning_rate * accum, or with `use_nesterov`
    var -= learning_rate * (grad + momentum * accum) (tf.compat.v1.train.MomentumOptimizer).

    Slot "momentum" (`var/Momentum`). Sparse gradients update only the touched rows of var and accum.
    """

    def __init__(self, learning_rate, momentum, use_locking=False, name="Momentum", use_nesterov=False):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._momentum = momentum
        self._use_nesterov = bool(use_nesterov)
        self._set_hyper("learning_rate", learning_rate)
        self._set_hyper("momentum", momentum)

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "momentum", self._name)

    def _apply_dense(self, grad, var):
        return training_ops.apply_momentum(var, self.get_slot(var, "momentum"), self._hyper("learning_rate", var.dtype),
                                           grad, self._hyper("momentum", var.dtype), use_locking=self._use_locking,
                                           use_nesterov=self._use_nesterov)

    def _apply_sparse(self, grad, var):
        return training_ops.sparse_apply_momentum(var, self.get_slot(var, "momentum"),
                                                  self._hyper("learning_rate", var.dtype), grad.values, grad.indices,
                                                  self._hyper("momentum", var.dtype), use_locking=self._use_locking,
                                                  use_nesterov=self._use_nesterov)


class AdagradOptimizer(Optimizer):
    """accum += grad**2; var -= learning_rate * grad / sqrt(accum) (tf.compat.v1.train.AdagradOptimizer).

    Slot "accumulator" (`var/Adagrad`), starting at `initial_accumulator_value`.
    """

    def __init__(self, learning_rate, initial_accumulator_value=0.1, use_locking=False, name="Adagrad"):
        if initial_accumulator_value <= 0.0:
            raise ValueError(f"initial_accumulator_value must be positive: {initial_accumulator_value}")
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._initial_accumulator_value = initial_accumulator_value
        self._set_hyper("learning_rate", learning_rate)

    def _create_slots(self, var_list):
        from actorflow.graph.initializers import constant_initializer
        for v in var_list:
            self._get_or_make_slot_with_initializer(
                v, constant_initializer(self._initial_accumulator_value, dtype=v.dtype), v.shape, v.dtype,
                "accumulator", self._name)

    def _apply_dense(self, grad, var):
        return training_ops.apply_adagrad(var, self.get_slot(var, "accumulator"),
                                          self._hyper("learning_rate", var.dtype), grad, use_locking=self._use_locking)

    def _apply_sparse(self, grad, var):
        return training_ops.sparse_apply_adagrad(var, self.get_slot(var, "accumulator"),
                                                 self._hyper("learning_rate", var.dtype), grad.values, grad.indices,
                                                 use_locking=self._use_locking)


class RMSPropOptimizer(Optimizer):
    """RMSProp (tf.compat.v1.train.RMSPropOptimizer):
    ms = decay*ms + (1-decay)*grad**2; mom = momentum*mom + lr*grad/sqrt(ms + epsilon); var -= mom.

    With `centered`, also mg = decay*mg + (1-decay)*grad and the denominator is
    sqrt(ms - mg**2 + epsilon). Slots "rms" (starting at ones), "mg" (centered only) and
    "momentum": `var/RMSProp`, `var/RMSProp_1`, ...
    """

    def __init__(self, learning_rate, decay=0.9, momentum=0.0, epsilon=1e-10, use_locking=False, centered=False,
                 name="RMSProp"):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._decay = decay
        self._momentum = momentum
        self._epsilon = epsilon
        self._centered = bool(centered)
        for k, v in (("learning_rate", learning_rate), ("decay", decay), ("momentum", momentum),
                     ("epsilon", epsilon)):
            self._set_hyper(k, v)

    def _create_slots(self, var_list):
        from actorflow.graph.initializers import ones_initializer
        for v in var_list:
            self._get_or_make_slot_with_initializer(v, ones_initializer(dtype=v.dtype), v.shape, v.dtype, "rms",
                                                    self._name)
            if self._centered:
                self._zeros_slot(v, "mg", self._name)
            self._zeros_slot(v, "momentum", self._name)

    def _args(self, var):
        return [self._hyper(k, var.dtype) for k in ("learning_rate", "decay", "momentum", "epsilon")]

    def _apply_dense(self, grad, var):
        rms, mom = self.get_slot(var, "rms"), self.get_slot(var, "momentum")
        if self._centered:
            return training_ops.apply_centered_rms_prop(var, self.get_slot(var, "mg"), rms, mom, *self._args(var),
                                                        grad, use_locking=self._use_locking)
        return training_ops.apply_rms_prop(var, rms, mom, *self._args(var), grad, use_locking=self._use_locking)

    def _apply_sparse(self, grad, var):
        rms, mom = self.get_slot(var, "rms"), self.get_slot(var, "momentum")
        if self._centered:
            return training_ops.sparse_apply_centered_rms_prop(var, self.get_slot(var, "mg"), rms, mom,
                                                               *self._args(var), grad.values, grad.indices,
                                                               use_locking=self._use_locking)
        return training_ops.sparse_apply_rms_prop(var, rms, mom, *self._args(var), grad.values, grad.indices,
                                                  use_locking=self._use_locking)


class AdamOptimizer(Optimizer):
    """Adam (tf.compat.v1.train.AdamOptimizer):
    lr_t = learning_rate * sqrt(1 - beta2^t) / (1 - beta1^t); m = beta1*m + (1-beta1)*g;
    v = beta2*v + (1-beta2)*g**2; var -= lr_t * m / (sqrt(v) + epsilon).

    Slots "m" and "v" (`var/Adam`, `var/Adam_1`); the powers beta1^t and beta2^t are the
    non-trainable variables `beta1_power` and `beta2_power`, colocated with the first variable
    (by name) and multiplied by beta1/beta2 after every update.

    A sparse gradient updates as TF's does: all of m and v decay, the touched rows take the
    gradient, and every row of var moves by lr_t * m / (sqrt(v) + epsilon), the same result as the
    dense update of the densified gradient. `tf.contrib.opt.LazyAdamOptimizer` (af.contrib.opt)
    updates the touched rows only.

    Difference from TF: `beta1_power`/`beta2_power` take the dtype of that first variable (TF: float32).
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-08, use_locking=False, name="Adam"):
        super().__init__(use_locking, name)
        self._lr = learning_rate
        self._beta1 = beta1
        self._beta2 = beta2
        self._epsilon = epsilon
        for k, v in (("learning_rate", learning_rate), ("beta1", beta1), ("beta2", beta2), ("epsilon", epsilon)):
            self._set_hyper(k, v)

    def _get_beta_accumulators(self, graph=None):
        return (self._get_non_slot_variable("beta1_power", graph), self._get_non_slot_variable("beta2_power", graph))

    def _create_slots(self, var_list):
        first = min(var_list, key=lambda v: v.name)
        for name, beta in (("beta1_power", self._beta1), ("beta2_power", self._beta2)):
            init = self._call_if_callable(beta)
            if isinstance(init, (int, float)):
                init = np.asarray(init, dtype=first.dtype.np)
            self._create_non_slot_variable(init, name, first)
        for v in var_list:
            self._zeros_slot(v, "m", self._name)
            self._zeros_slot(v, "v", self._name)

    def _powers(self, var):
        from actorflow.graph.ops.math_ops import cast
        b1, b2 = self._get_beta_accumulators(var.graph)
        return cast(b1, var.dtype), cast(b2, var.dtype)

    def _apply_dense(self, grad, var):
        b1p, b2p = self._powers(var)
        h = [self._hyper(k, var.dtype) for k in ("learning_rate", "beta1", "beta2", "epsilon")]
        return training_ops.apply_adam(var, self.get_slot(var, "m"), self.get_slot(var, "v"), b1p, b2p, *h, grad,
                                       use_locking=self._use_locking, use_nesterov=self._nesterov)

    _nesterov = False          # Nadam (af.contrib.opt) steps with the Nesterov momentum

    def _sparse_moments(self, grad, var):
        """A sparse gradient's moments, as TF updates them: all of m and v decay, the touched rows take
        the gradient. Returns (lr_t, beta1, epsilon, m_t, v_t, the rows' (1 - beta1) * g)."""
        from actorflow.graph.graph import control_dependencies
        from actorflow.graph.ops import math_ops
        from actorflow.graph.variables import assign, scatter_add
        b1p, b2p = self._powers(var)
        lr, beta1, beta2, epsilon = (self._hyper(k, var.dtype) for k in ("learning_rate", "beta1", "beta2", "epsilon"))
        lr = lr * math_ops.sqrt(1 - b2p) / (1 - b1p)
        locking = self._use_locking
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        m_scaled = grad.values * (1 - beta1)
        with control_dependencies([assign(m, m * beta1, use_locking=locking)]):
            m_t = scatter_add(m, grad.indices, m_scaled, use_locking=locking)
        with control_dependencies([assign(v, v * beta2, use_locking=locking)]):
            v_t = scatter_add(v, grad.indices, math_ops.square(grad.values) * (1 - beta2), use_locking=locking)
        return lr, beta1, epsilon, m_t, v_t, m_scaled

    def _apply_sparse(self, grad, var):
        from actorflow.graph.ops import math_ops
        from actorflow.graph.ops.constant import group
        from actorflow.graph.variables import assign_sub
        lr, _, epsilon, m_t, v_t, _ = self._sparse_moments(grad, var)
        locking = self._use_locking
        update = assign_sub(var, lr * m_t / (math_ops.sqrt(v_t) + epsilon), use_locking=locking)
        return group(update, m_t, v_t)

    def _apply_sparse_lazy(self, grad, var):
        """LazyAdam's update: the touched rows of var, m and v only (one SparseApplyAdam kernel)."""
        b1p, b2p = self._powers(var)
        h = [self._hyper(k, var.dtype) for k in ("learning_rate", "beta1", "beta2", "epsilon")]
        return training_ops.sparse_apply_adam(var, self.get_slot(var, "m"), self.get_slot(var, "v"), b1p, b2p, *h,
                                              grad.values, grad.indices, use_locking=self._use_locking)

    def _finish(self, update_ops, name_scope):
        from actorflow.graph.ops.constant import group
        from actorflow.graph.ops.math_ops import multiply
        from actorflow.graph.variables import assign
        b1, b2 = self._get_beta_accumulators(update_ops[0].graph if update_ops else None)
        g = b1.graph
        # The powers advance only after every update of this step has read them.
        with g.control_dependencies(update_ops), g.device(None), g.colocate_with(b1.op):
            update_b1 = assign(b1, multiply(b1, self._hyper("beta1", b1.dtype)), use_locking=self._use_locking)
            update_b2 = assign(b2, multiply(b2, self._hyper("beta2", b2.dtype)), use_locking=self._use_locking)
        return group(*update_ops, update_b1, update_b2, name=name_scope)


def _is_number(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def _constant_slot(opt, var, value, slot_name, op_name):
    from actorflow.graph.initializers import constant_initializer
    return opt._get_or_make_slot_with_initializer(var, constant_initializer(value, dtype=var.dtype), var.shape,
                                                  var.dtype, slot_name, op_name)


class AdadeltaOptimizer(Optimizer):
    """Adadelta (tf.compat.v1.train.AdadeltaOptimizer): accum = rho*accum + (1-rho)*grad**2;
    update = sqrt(accum_update + epsilon)/sqrt(accum + epsilon)*grad; var -= learning_rate*update;
    accum_update = rho*accum_update + (1-rho)*update**2.

    Slots "accum" and "accum_update" (`var/Adadelta`, `var/Adadelta_1`), starting at zeros.
    """

    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-8, use_locking=False, name="Adadelta"):
        super().__init__(use_locking, name)
        self._lr = learning_rate
        self._rho = rho
        self._epsilon = epsilon
        for k, v in (("learning_rate", learning_rate), ("rho", rho), ("epsilon", epsilon)):
            self._set_hyper(k, v)

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "accum", self._name)
            self._zeros_slot(v, "accum_update", self._name)

    def _args(self, var):
        return [self._hyper(k, var.dtype) for k in ("learning_rate", "rho", "epsilon")]

    def _apply_dense(self, grad, var):
        return training_ops.apply_adadelta(var, self.get_slot(var, "accum"), self.get_slot(var, "accum_update"),
                                           *self._args(var), grad, use_locking=self._use_locking)

    def _apply_sparse(self, grad, var):
        return training_ops.sparse_apply_adadelta(var, self.get_slot(var, "accum"),
                                                  self.get_slot(var, "accum_update"), *self._args(var), grad.values,
                                                  grad.indices, use_locking=self._use_locking)


class FtrlOptimizer(Optimizer):
    """FTRL-proximal (tf.compat.v1.train.FtrlOptimizer), the update of McMahan et al. (2013):
    new_accum = accum + g**2; linear += g - (new_accum**-p - accum**-p)/lr * var;
    var = (clip(linear, -l1, l1) - linear)/(new_accum**-p/lr + 2*l2); accum = new_accum, with
    p = learning_rate_power (sqrt when it is -0.5, TF's fast path).

    With `l2_shrinkage_regularization_strength` > 0 the updates are ApplyFtrlV2 and linear sees
    g + 2*l2_shrinkage*var. `beta` is folded into l2 as l2 + beta/(2*learning_rate), as TF does.
    Slots "accum" (starting at `initial_accumulator_value`; `var/Ftrl` or `var/<accum_name>`) and
    "linear" (zeros; `var/Ftrl_1` or `var/<linear_name>`).
    """

    def __init__(self, learning_rate, learning_rate_power=-0.5, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0, use_locking=False, name="Ftrl",
                 accum_name=None, linear_name=None, l2_shrinkage_regularization_strength=0.0, beta=None):
        super().__init__(use_locking, name)
        for what, value, ok in (
                ("initial_accumulator_value", initial_accumulator_value, "positive or zero"),
                ("learning_rate_power", learning_rate_power, "negative or zero"),
                ("l1_regularization_strength", l1_regularization_strength, "positive or zero"),
                ("l2_regularization_strength", l2_regularization_strength, "positive or zero"),
                ("l2_shrinkage_regularization_strength", l2_shrinkage_regularization_strength, "positive or zero")):
            if _is_number(value) and (value > 0.0 if ok == "negative or zero" else value < 0.0):
                raise ValueError(f"{what} {value:f} needs to be {ok}")
        self._learning_rate = learning_rate
        self._learning_rate_power = learning_rate_power
        self._initial_accumulator_value = initial_accumulator_value
        self._l1_regularization_strength = l1_regularization_strength
        self._l2_regularization_strength = l2_regularization_strength
        self._beta = 0.0 if beta is None else beta
        self._l2_shrinkage_regularization_strength = l2_shrinkage_regularization_strength
        self._accum_name = accum_name
        self._linear_name = linear_name
        for k, v in (("learning_rate", learning_rate), ("learning_rate_power", learning_rate_power),
                     ("l1_regularization_strength", l1_regularization_strength),
                     ("l2_regularization_strength", l2_regularization_strength),
                     ("l2_shrinkage_regularization_strength", l2_shrinkage_regularization_strength),
                     ("beta", self._beta)):
            self._set_hyper(k, v)

    def _create_slots(self, var_list):
        for v in var_list:
            _constant_slot(self, v, self._initial_accumulator_value, "accum", self._accum_name or self._name)
            self._zeros_slot(v, "linear", self._linear_name or self._name)

    def _prepare_hypers(self, var_dtypes):
        super()._prepare_hypers(var_dtypes)
        for dt in sorted(var_dtypes, key=lambda d: d.name):
            self._adjusted_l2(dt)

    def _adjusted_l2(self, dtype):
        """l2 + beta / (2 * max(learning_rate, 1e-36)): beta folded into l2 as TF's _prepare does."""
        key = ("adjusted_l2_regularization_strength", dtype)
        t = self._hyper_tensors.get(key)
        if t is None:
            l2 = self._hyper("l2_regularization_strength", dtype)
            beta = self._call_if_callable(self._beta)
            if _is_number(beta) and beta == 0:
                t = l2
            else:
                from actorflow.graph.ops.math_ops import add, divide, maximum, multiply
                lr = self._hyper("learning_rate", dtype)
                floor = np.asarray(1e-36, dtype=dtype.np)
                t = add(l2, divide(self._hyper("beta", dtype), multiply(np.asarray(2, dtype=dtype.np),
                                                                        maximum(lr, floor))),
                        name="adjusted_l2_regularization_strength")
            self._hyper_tensors[key] = t
        return t

    def _shrinkage(self):
        v = self._l2_shrinkage_regularization_strength
        return not (_is_number(v) and v <= 0.0)

    def _args(self, var):
        h = [self._hyper("learning_rate", var.dtype), self._hyper("l1_regularization_strength", var.dtype),
             self._adjusted_l2(var.dtype)]
        if self._shrinkage():
            h.append(self._hyper("l2_shrinkage_regularization_strength", var.dtype))
        return h + [self._hyper("learning_rate_power", var.dtype)]

    def _apply_dense(self, grad, var):
        accum, linear = self.get_slot(var, "accum"), self.get_slot(var, "linear")
        fn = training_ops.apply_ftrl_v2 if self._shrinkage() else training_ops.apply_ftrl
        return fn(var, accum, linear, grad, *self._args(var), use_locking=self._use_locking)

    def _apply_sparse(self, grad, var):
        accum, linear = self.get_slot(var, "accum"), self.get_slot(var, "linear")
        fn = training_ops.sparse_apply_ftrl_v2 if self._shrinkage() else training_ops.sparse_apply_ftrl
        return fn(var, accum, linear, grad.values, grad.indices, *self._args(var), use_locking=self._use_locking)


class ProximalGradientDescentOptimizer(Optimizer):
    """Proximal gradient descent, FOBOS (tf.compat.v1.train.ProximalGradientDescentOptimizer):
    prox = var - lr*grad; var = sign(prox)*max(|prox| - lr*l1, 0)/(1 + lr*l2). No slots.

    Differs from TF: float64 variables work (TF passes its float32 hyper-parameters uncast and
    fails to build the update of a float64 variable).
    """

    def __init__(self, learning_rate, l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 use_locking=False, name="ProximalGradientDescent"):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._l1_regularization_strength = l1_regularization_strength
        self._l2_regularization_strength = l2_regularization_strength
        for k, v in (("learning_rate", learning_rate), ("l1_regularization_strength", l1_regularization_strength),
                     ("l2_regularization_strength", l2_regularization_strength)):
            self._set_hyper(k, v)

    def _args(self, var):
        return [self._hyper(k, var.dtype) for k in ("learning_rate", "l1_regularization_strength",
                                                    "l2_regularization_strength")]

    def _apply_dense(self, grad, var):
        return training_ops.apply_proximal_gradient_descent(var, *self._args(var), grad,
                                                            use_locking=self._use_locking)

    def _apply_sparse(self, grad, var):
        return training_ops.sparse_apply_proximal_gradient_descent(var, *self._args(var), grad.values,
                                                                   grad.indices, use_locking=self._use_locking)


class ProximalAdagradOptimizer(Optimizer):
    """Proximal Adagrad (tf.compat.v1.train.ProximalAdagradOptimizer): accum += grad**2;
    rate = lr/sqrt(accum); prox = var - rate*grad; var = sign(prox)*max(|prox| - rate*l1, 0)/(1 + rate*l2).

    Slot "accumulator" (`var/ProximalAdagrad`), starting at `initial_accumulator_value`.
    Differs from TF: float64 variables work (as ProximalGradientDescentOptimizer).
    """

    def __init__(self, learning_rate, initial_accumulator_value=0.1, l1_regularization_strength=0.0,
                 l2_regularization_strength=0.0, use_locking=False, name="ProximalAdagrad"):
        if _is_number(initial_accumulator_value) and initial_accumulator_value <= 0.0:
            raise ValueError(f"initial_accumulator_value must be positive: {initial_accumulator_value}")
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._initial_accumulator_value = initial_accumulator_value
        self._l1_regularization_strength = l1_regularization_strength
        self._l2_regularization_strength = l2_regularization_strength
        for k, v in (("learning_rate", learning_rate), ("l1_regularization_strength", l1_regularization_strength),
                     ("l2_regularization_strength", l2_regularization_strength)):
            self._set_hyper(k, v)

    def _create_slots(self, var_list):
        for v in var_list:
            _constant_slot(self, v, self._initial_accumulator_value, "accumulator", self._name)

    def _args(self, var):
        return [self._hyper(k, var.dtype) for k in ("learning_rate", "l1_regularization_strength",
                                                    "l2_regularization_strength")]

    def _apply_dense(self, grad, var):
        return training_ops.apply_proximal_adagrad(var, self.get_slot(var, "accumulator"), *self._args(var), grad,
                                                   use_locking=self._use_locking)

    def _apply_sparse(self, grad, var):
        return training_ops.sparse_apply_proximal_adagrad(var, self.get_slot(var, "accumulator"), *self._args(var),
                                                          grad.values, grad.indices, use_locking=self._use_locking)


class AdagradDAOptimizer(Optimizer):
    """Adagrad dual averaging (tf.compat.v1.train.AdagradDAOptimizer), for sparse linear models:
    g_acc += grad; gg_acc += grad**2; var = -sign(g_acc)*lr*max(|g_acc| - l1*t, 0)/(l2*t*lr + sqrt(gg_acc))
    where t = global_step + 1, read before this step's increment.

    `global_step` (an integer variable, usually the one passed to `minimize`) is required; None
    fails in `minimize`/`apply_gradients` with ValueError, as in TF. It may be int32 (TF: int64 only). Slots
    "gradient_accumulator" (zeros; `var/AdagradDA`) and "gradient_squared_accumulator" (starting at
    `initial_gradient_squared_accumulator_value`; `var/AdagradDA_1`).
    """

    def __init__(self, learning_rate, global_step, initial_gradient_squared_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0, use_locking=False,
                 name="AdagradDA"):
        if _is_number(initial_gradient_squared_accumulator_value) and initial_gradient_squared_accumulator_value <= 0:
            raise ValueError("initial_gradient_squared_accumulator_value must be positive: "
                             f"{initial_gradient_squared_accumulator_value}")
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._initial_gradient_squared_accumulator_value = initial_gradient_squared_accumulator_value
        self._l1_regularization_strength = l1_regularization_strength
        self._l2_regularization_strength = l2_regularization_strength
        self._global_step = global_step
        self._global_step_on_worker = None
        for k, v in (("learning_rate", learning_rate), ("l1_regularization_strength", l1_regularization_strength),
                     ("l2_regularization_strength", l2_regularization_strength)):
            self._set_hyper(k, v)

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "gradient_accumulator", self._name)
            _constant_slot(self, v, self._initial_gradient_squared_accumulator_value, "gradient_squared_accumulator",
                           self._name)

    def _prepare(self):
        from actorflow.graph.graph import convert_to_tensor
        from actorflow.graph.ops.constant import identity
        from actorflow.graph.ops.math_ops import add
        if self._global_step is None:
            raise ValueError(f"AdagradDAOptimizer '{self._name}' needs a global_step (an integer variable such as "
                             "af.train.get_or_create_global_step()), got None")
        step = convert_to_tensor(self._global_step)
        if not step.dtype.is_integer:
            raise TypeError(f"AdagradDAOptimizer '{self._name}': global_step must be an integer tensor, got "
                            f"{step.dtype.name} ({step.name})")
        # The step this update counts as (TF: identity(global_step) + 1, read on the worker).
        self._global_step_on_worker = add(identity(step), convert_to_tensor(1, dtype=step.dtype))

    def _args(self, var):
        from actorflow.graph.ops.constant import identity
        return ([self._hyper(k, var.dtype) for k in ("learning_rate", "l1_regularization_strength",
                                                     "l2_regularization_strength")]
                + [identity(self._global_step_on_worker)])

    def _apply_dense(self, grad, var):
        return training_ops.apply_adagrad_da(var, self.get_slot(var, "gradient_accumulator"),
                                             self.get_slot(var, "gradient_squared_accumulator"), grad,
                                             *self._args(var), use_locking=self._use_locking)

    def _apply_sparse(self, grad, var):
        return training_ops.sparse_apply_adagrad_da(var, self.get_slot(var, "gradient_accumulator"),
                                                    self.get_slot(var, "gradient_squared_accumulator"), grad.values,
                                                    grad.indices, *self._args(var), use_locking=self._use_locking)
