"""af.contrib.opt: the optimizers of tf.contrib.opt (TF 1.15) that TF-1.x programs use.

- `LazyAdamOptimizer`: Adam whose sparse updates (embeddings) touch only the gathered rows of the
  variable and of m and v: untouched rows neither decay nor move (af.train.AdamOptimizer updates
  every row, as TF's does). Dense gradients update as Adam.
- `AdamWOptimizer`, `MomentumWOptimizer` and `extend_with_decoupled_weight_decay(base)`: decoupled
  weight decay (Loshchilov & Hutter): before each update, ``var -= weight_decay * var`` (for a
  sparse gradient, on the touched rows), with `weight_decay` not scaled by the learning rate, as in
  TF. `minimize`/`apply_gradients` take `decay_var_list` to decay only those variables.
- `ScipyOptimizerInterface`: minimizes a loss with scipy.optimize.minimize (L-BFGS-B by default)
  outside the graph, evaluating the loss and its gradients through the session, with bounds, and
  equality and inequality constraints for methods that take them (SLSQP).
"""
from __future__ import annotations

import numpy as np

from actorflow.graph.gradients import gradients
from actorflow.graph.graph import control_dependencies, convert_to_tensor
from actorflow.graph.ops import array_ops
from actorflow.graph.ops.constant import group, no_op, placeholder
from actorflow.graph.variables import assign, assign_sub, scatter_add, trainable_variables
from actorflow.train.optimizers import AdamOptimizer, MomentumOptimizer

__all__ = ["LazyAdamOptimizer", "NadamOptimizer", "AdamWOptimizer", "MomentumWOptimizer", "DecoupledWeightDecayExtension",
           "extend_with_decoupled_weight_decay", "ScipyOptimizerInterface", "ExternalOptimizerInterface"]


class LazyAdamOptimizer(AdamOptimizer):
    """Adam with lazy sparse updates (tf.contrib.opt.LazyAdamOptimizer); see the module's docstring."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, use_locking=False,
                 name="LazyAdam"):
        super().__init__(learning_rate, beta1, beta2, epsilon, use_locking, name)

    def _apply_sparse(self, grad, var):
        return self._apply_sparse_lazy(grad, var)


class NadamOptimizer(AdamOptimizer):
    """Adam with Nesterov momentum (tf.contrib.opt.NadamOptimizer, Dozat 2016): as Adam, but the step
    takes m_bar = beta1 * m_t + (1 - beta1) * g in place of m_t, var -= lr_t * m_bar / (sqrt(v_t) + eps).
    A sparse gradient decays all of m and v, as Adam's does, and moves only the touched rows of var."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, use_locking=False, name="Adam"):
        super().__init__(learning_rate, beta1, beta2, epsilon, use_locking, name)

    _nesterov = True           # AdamOptimizer's dense step with use_nesterov (TF's ApplyAdam)

    def _apply_sparse(self, grad, var):
        from actorflow.graph.ops import math_ops
        lr, beta1, epsilon, m_t, v_t, m_scaled = self._sparse_moments(grad, var)
        m_bar = m_scaled + beta1 * array_ops.gather(m_t, grad.indices)
        v_rows = math_ops.sqrt(array_ops.gather(v_t, grad.indices))
        update = scatter_add(var, grad.indices, -lr * m_bar / (v_rows + epsilon), use_locking=self._use_locking)
        return group(update, m_bar, v_t)


class DecoupledWeightDecayExtension:
    """Mixin adding decoupled weight decay to an optimizer (first in the bases, as in TF)."""

    def __init__(self, weight_decay, **kwargs):
        self._weight_decay = weight_decay
        self._decay_var_list = None
        super().__init__(**kwargs)

    def minimize(self, loss, global_step=None, var_list=None, gate_gradients=1, aggregation_method=None,
                 colocate_gradients_with_ops=False, name=None, grad_loss=None, decay_var_list=None):
        self._decay_var_list = set(decay_var_list) if decay_var_list else None
        return super().minimize(loss, global_step=global_step, var_list=var_list, gate_gradients=gate_gradients,
                                aggregation_method=aggregation_method,
                                colocate_gradients_with_ops=colocate_gradients_with_ops, name=name,
                                grad_loss=grad_loss)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None, decay_var_list=None):
        if decay_var_list:
            self._decay_var_list = set(decay_var_list)
        return super().apply_gradients(grads_and_vars, global_step=global_step, name=name)

    def _decays(self, var) -> bool:
        return self._decay_var_list is None or var in self._decay_var_list

    def _decay(self, var):
        wd = self._call_if_callable(self._weight_decay)
        return convert_to_tensor(wd, dtype=var.dtype) if not hasattr(wd, "dtype") else wd

    def _apply_dense(self, grad, var):
        decay = assign_sub(var, self._decay(var) * var.value(), use_locking=self._use_locking) \
            if self._decays(var) else no_op()
        with control_dependencies([decay]):
            return super()._apply_dense(grad, var)

    def _apply_sparse(self, grad, var):
        if self._decays(var):
            rows = array_ops.gather(var.value(), grad.indices)
            decay = scatter_add(var, grad.indices, -self._decay(var) * rows, use_locking=self._use_locking)
        else:
            decay = no_op()
        with control_dependencies([decay]):
            return super()._apply_sparse(grad, var)


def extend_with_decoupled_weight_decay(base_optimizer):
    """`base_optimizer`'s class with decoupled weight decay; the constructor takes `weight_decay`
    first, then the base's arguments (tf.contrib.opt.extend_with_decoupled_weight_decay)."""
    class OptimizerWithDecoupledWeightDecay(DecoupledWeightDecayExtension, base_optimizer):
        def __init__(self, weight_decay, *args, **kwargs):
            self._weight_decay = weight_decay
            self._decay_var_list = None
            base_optimizer.__init__(self, *args, **kwargs)
    OptimizerWithDecoupledWeightDecay.__name__ = base_optimizer.__name__ + "WithDecoupledWeightDecay"
    return OptimizerWithDecoupledWeightDecay


class AdamWOptimizer(DecoupledWeightDecayExtension, AdamOptimizer):
    """Adam with decoupled weight decay (tf.contrib.opt.AdamWOptimizer)."""

    def __init__(self, weight_decay, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, use_locking=False,
                 name="AdamW"):
        super().__init__(weight_decay, learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon,
                         use_locking=use_locking, name=name)


class MomentumWOptimizer(DecoupledWeightDecayExtension, MomentumOptimizer):
    """Momentum with decoupled weight decay (tf.contrib.opt.MomentumWOptimizer)."""

    def __init__(self, weight_decay, learning_rate, momentum, use_locking=False, name="MomentumW",
                 use_nesterov=False):
        super().__init__(weight_decay, learning_rate=learning_rate, momentum=momentum, use_locking=use_locking,
                         name=name, use_nesterov=use_nesterov)


class ExternalOptimizerInterface:
    """Minimizes `loss` over `var_list` with an optimizer outside the graph
    (tf.contrib.opt.ExternalOptimizerInterface): `minimize(session, feed_dict, fetches,
    step_callback, loss_callback)` packs the variables into one vector, calls `_minimize` with
    functions computing the loss and its gradient through the session, and writes the result back."""

    def __init__(self, loss, var_list=None, equalities=None, inequalities=None, var_to_bounds=None,
                 **optimizer_kwargs):
        self._loss = convert_to_tensor(loss, name="loss")
        self._vars = list(var_list) if var_list is not None else trainable_variables()
        if not self._vars:
            raise ValueError("ExternalOptimizerInterface: no variables to optimize")
        self._equalities = list(equalities or [])
        self._inequalities = list(inequalities or [])
        self._kwargs = optimizer_kwargs
        self._sizes = [int(np.prod(v.shape.as_list())) for v in self._vars]
        if any(d is None for v in self._vars for d in v.shape.as_list()):
            raise ValueError("ExternalOptimizerInterface: every variable needs a fully known shape")
        self._slices = np.cumsum([0] + self._sizes)
        self._packed = array_ops.concat([array_ops.reshape(v.value(), [-1]) for v in self._vars], 0)
        grads = gradients(self._loss, self._vars)
        self._packed_grad = self._pack_grads(grads, "loss")
        self._eq_grads = [self._pack_grads(gradients(c, self._vars), "an equality") for c in self._equalities]
        self._ineq_grads = [self._pack_grads(gradients(c, self._vars), "an inequality") for c in self._inequalities]
        self._feeds = [placeholder(v.dtype, v.shape, name=f"{v.op.name}_external") for v in self._vars]
        self._assign = group(*[assign(v, p) for v, p in zip(self._vars, self._feeds)])
        bounds = var_to_bounds or {}
        self._bounds = None
        if bounds:
            lo, hi = [], []
            for v in self._vars:
                low, high = bounds.get(v, (-np.inf, np.inf))
                lo.append(np.broadcast_to(np.asarray(low, np.float64), v.shape.as_list()).reshape(-1))
                hi.append(np.broadcast_to(np.asarray(high, np.float64), v.shape.as_list()).reshape(-1))
            self._bounds = list(zip(np.concatenate(lo), np.concatenate(hi)))

    def _pack_grads(self, grads, what):
        parts = []
        for g, v in zip(grads, self._vars):
            if g is None:
                g = array_ops.zeros_like(v.value())
            elif hasattr(g, "indices"):
                from actorflow.graph.ops.array_ops.gathering import unsorted_segment_sum
                g = unsorted_segment_sum(g.values, g.indices, v.shape.as_list()[0])
            parts.append(array_ops.reshape(g, [-1]))
        return array_ops.concat(parts, 0)

    def minimize(self, session=None, feed_dict=None, fetches=None, step_callback=None, loss_callback=None,
                 **run_kwargs):
        from actorflow.graph.graph import get_default_session
        session = session or get_default_session()
        if session is None:
            raise ValueError("ExternalOptimizerInterface.minimize needs a session")
        feed_dict = dict(feed_dict or {})
        fetches = list(fetches or [])

        def load(x):
            session.run(self._assign, {**feed_dict, **{p: x[a:b].reshape(p.shape.as_list())
                                                       for p, a, b in zip(self._feeds, self._slices[:-1],
                                                                          self._slices[1:])}})

        def loss_grad(x):
            load(x)
            loss, grad, *extra = session.run([self._loss, self._packed_grad] + fetches, feed_dict, **run_kwargs)
            if loss_callback is not None:
                loss_callback(*extra)
            return float(loss), np.asarray(grad, np.float64)

        def constraint(t, g):
            def value(x):
                load(x)
                return np.asarray(session.run(t, feed_dict), np.float64).reshape(-1)

            def jac(x):
                load(x)
                return np.asarray(session.run(g, feed_dict), np.float64).reshape(1, -1)
            return value, jac

        eqs = [constraint(t, g) for t, g in zip(self._equalities, self._eq_grads)]
        ineqs = [constraint(t, g) for t, g in zip(self._inequalities, self._ineq_grads)]
        x0 = np.asarray(session.run(self._packed, feed_dict), np.float64)
        result = self._minimize(x0, loss_grad, eqs, ineqs, self._bounds, step_callback)
        load(np.asarray(result, np.float64))
        return result

    def _minimize(self, initial_val, loss_grad_func, equality_funcs, inequality_funcs, packed_bounds,
                  step_callback):
        raise NotImplementedError


class ScipyOptimizerInterface(ExternalOptimizerInterface):
    """scipy.optimize.minimize as an external optimizer (tf.contrib.opt.ScipyOptimizerInterface):
    `method` (default 'L-BFGS-B') and `options` (e.g. {'maxiter': 100}) pass through."""

    _DEFAULT_METHOD = "L-BFGS-B"

    def _minimize(self, initial_val, loss_grad_func, equality_funcs, inequality_funcs, packed_bounds,
                  step_callback):
        from scipy.optimize import minimize
        kwargs = dict(self._kwargs)
        method = kwargs.pop("method", self._DEFAULT_METHOD)
        constraints = ([{"type": "eq", "fun": f, "jac": j} for f, j in equality_funcs]
                       + [{"type": "ineq", "fun": f, "jac": j} for f, j in inequality_funcs])
        extra = {"constraints": constraints} if constraints else {}
        result = minimize(loss_grad_func, initial_val, method=method, jac=True, bounds=packed_bounds,
                          callback=step_callback, options=kwargs.pop("options", None), **extra, **kwargs)
        message = result.message.decode() if isinstance(result.message, bytes) else result.message
        import logging
        logging.getLogger("actorflow").info("Optimization terminated with:\n  Message: %s\n  Objective function "
                                            "value: %f\n  Number of iterations: %d", message, result.fun,
                                            getattr(result, "nit", -1))
        return result.x
