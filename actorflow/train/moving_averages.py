"""Exponential moving averages of variables and tensors (tf.compat.v1.train.ExponentialMovingAverage).

`apply(var_list)` makes, for each variable, a non-trainable shadow variable named
`<variable>/ExponentialMovingAverage` (a slot, colocated with it and starting at its initial value)
and returns one op that moves every shadow towards its variable:
`shadow -= (1 - decay) * (shadow - value)`. With `num_updates`, the decay used is
`min(decay, (1 + num_updates) / (10 + num_updates))`. For a tensor that is not a variable the
shadow starts at zeros, and with `zero_debias=True` the average is corrected for that start as TF
does (a biased accumulator and a step count beside it). `variables_to_restore()` maps the shadows'
names to the variables, so that a Saver loads averaged weights into a model for evaluation.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import GraphKeys, Tensor, add_to_collection, control_dependencies, convert_to_tensor
from actorflow.graph.graph import name_scope as _name_scope
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.constant import group
from actorflow.graph.variables import Variable, assign, assign_add, assign_sub, global_variables
from actorflow.train.optimizer import _create_slot

__all__ = ["ExponentialMovingAverage", "assign_moving_average"]


class ExponentialMovingAverage:
    """Maintains moving averages of variables (and tensors) by exponential decay."""

    def __init__(self, decay, num_updates=None, zero_debias=False, name="ExponentialMovingAverage"):
        self._decay = decay
        self._num_updates = num_updates
        self._zero_debias = zero_debias
        self._name = name
        self._averages: dict = {}

    @property
    def name(self) -> str:
        return self._name

    def apply(self, var_list=None):
        """Creates the shadows of `var_list` (default: the trainable variables) and returns the op
        that updates them all."""
        from actorflow.graph.variables import trainable_variables
        if var_list is None:
            var_list = trainable_variables()
        var_list = list(var_list)
        for v in var_list:
            dt = v.dtype.base_dtype if hasattr(v.dtype, "base_dtype") else v.dtype
            if dt not in (dtypes.float16, dtypes.float32, dtypes.float64):
                raise TypeError(f"The variables must be half, float, or double: {v.name}")
            if any(k is v for k in self._averages):
                raise ValueError(f"Moving average already computed for: {v.name}")
        zero_debias_of = {}
        for v in var_list:
            if isinstance(v, Variable):
                avg = _create_slot(v, v.initial_value, None, None, self._name)
                zero_debias_of[id(v)] = False
            elif isinstance(v, Tensor):
                avg = self._tensor_shadow(v)
                zero_debias_of[id(v)] = self._zero_debias
            else:
                raise TypeError(f"ExponentialMovingAverage.apply takes variables and tensors, got {v!r}")
            self._averages[v] = avg
            add_to_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, v)
        with _name_scope(self._name):
            decay = convert_to_tensor(self._decay, dtype=dtypes.float32, name="decay")
            if self._num_updates is not None:
                n = math_ops.cast(convert_to_tensor(self._num_updates), dtypes.float32)
                decay = math_ops.minimum(decay, (1.0 + n) / (10.0 + n))
            updates = []
            for v in var_list:
                value = v.value() if isinstance(v, Variable) else v
                updates.append(_assign_moving_average(self._averages[v], value, decay, zero_debias_of[id(v)]))
            return group(*updates, name="update")

    def _tensor_shadow(self, t: Tensor) -> Variable:
        if not t.shape.is_fully_defined():
            raise ValueError(f"ExponentialMovingAverage: the tensor '{t.name}' needs a fully defined shape, "
                             f"got {t.shape}")
        from actorflow.graph.initializers import zeros_initializer
        from actorflow.graph.variable_scope import VariableScope, get_variable, variable_scope
        g = t.graph
        with g.as_default(), g.name_scope(None), g.control_dependencies(None), \
                variable_scope(VariableScope(False, name="")):
            return get_variable(t.op.name + "/" + self._name, shape=t.shape.as_list(), dtype=t.dtype,
                                initializer=zeros_initializer(), trainable=False)

    def average(self, var):
        """The shadow variable of `var`, or None when `apply` did not cover it."""
        for k, v in self._averages.items():
            if k is var:
                return v
        return None

    def average_name(self, var) -> str:
        """The name the shadow of `var` has (or would have), as a Saver key."""
        avg = self.average(var)
        if avg is not None:
            return avg.op.name
        return var.op.name + "/" + self._name

    def variables_to_restore(self, moving_avg_variables=None) -> dict:
        """{name: variable} for a Saver that restores the moving averages into the variables
        themselves (and every other global variable under its own name)."""
        from actorflow.graph.graph import get_collection
        if moving_avg_variables is None:     # (TF: the trainable variables and the averaged ones)
            moving_avg_variables = get_collection(GraphKeys.TRAINABLE_VARIABLES) + \
                get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES)
        out = {}
        avg_ids = {id(v) for v in moving_avg_variables}
        shadows = {id(s) for s in self._averages.values()}
        for v in global_variables():
            if id(v) in shadows:
                continue
            name = self.average_name(v) if id(v) in avg_ids else v.op.name
            out[name] = v
        return out


def assign_moving_average(variable, value, decay, zero_debias=True, name=None):
    """``variable -= (variable - value) * (1 - decay)``, returning the updated value
    (tf.compat.v1.train.moving_averages.assign_moving_average, as batch-norm code uses it). With
    `zero_debias` (TF's default), the average is corrected for starting at zero, through a biased
    accumulator and a step count beside `variable`."""
    value = convert_to_tensor(value, dtype=variable.dtype, name="value")
    with _name_scope(name or "AssignMovingAvg"):
        return _assign_moving_average(variable, value, decay, zero_debias)


def _assign_moving_average(shadow, value, decay, zero_debias):
    with _name_scope("AssignMovingAvg"):
        one_minus = 1.0 - math_ops.cast(decay, shadow.dtype)
        if not zero_debias:
            return assign_sub(shadow, (shadow.value() - value) * one_minus)
        return _zero_debiased_update(shadow, value, math_ops.cast(decay, shadow.dtype), one_minus)


def _zero_debiased_update(shadow, value, decay, one_minus):
    """TF's zero-debiased average: a biased accumulator and a step count beside the shadow; the
    shadow becomes biased / (1 - decay ** step)."""
    from actorflow.graph.initializers import zeros_initializer
    from actorflow.graph.variable_scope import VariableScope, get_variable, variable_scope
    g = shadow.graph
    with g.name_scope(None), g.control_dependencies(None), variable_scope(VariableScope(False, name="")):
        biased = get_variable(shadow.op.name + "/biased", shape=shadow.shape.as_list(), dtype=shadow.dtype,
                              initializer=zeros_initializer(), trainable=False)
        step = get_variable(shadow.op.name + "/local_step", shape=[], dtype=shadow.dtype,
                            initializer=zeros_initializer(), trainable=False)
    b = assign_sub(biased, (biased.value() - value) * one_minus)
    s = assign_add(step, convert_to_tensor(1.0, dtype=shadow.dtype))
    with control_dependencies([b, s]):
        unbiased = b / (1.0 - math_ops.pow(decay, s))
        return assign(shadow, unbiased)
