"""af.keras.constraints: projections applied to a weight after each update (tf.keras.constraints).

A constraint maps a weight's new value to the projected one. A Keras model's training step
assigns the projection after the optimizer's update, as TF 1.x's optimizers do for the resource
variables Keras creates.
"""
from __future__ import annotations

from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.ops import clip_ops, math_ops
from actorflow.graph.ops.constant import constant
from actorflow.keras import backend as K

__all__ = ["Constraint", "MaxNorm", "NonNeg", "UnitNorm", "MinMaxNorm", "max_norm", "non_neg", "unit_norm",
           "min_max_norm", "get", "serialize", "deserialize"]


def _t(w):
    return convert_to_tensor(w.value() if hasattr(w, "initializer") else w)


class Constraint:
    """Base class: `constraint(w)` is the projected weight."""

    def __call__(self, w):
        return w

    def get_config(self) -> dict:
        return {}


def _norms(w, axis):
    return math_ops.sqrt(math_ops.reduce_sum(math_ops.square(w), axis, keepdims=True))


class MaxNorm(Constraint):
    """Rescales the columns (along `axis`) whose norm exceeds `max_value` (tf.keras.constraints.MaxNorm)."""

    def __init__(self, max_value=2, axis=0):
        self.max_value, self.axis = max_value, axis

    def __call__(self, w):
        w = _t(w)
        norms = _norms(w, self.axis)
        desired = clip_ops.clip_by_value(norms, constant(0.0, dtype=w.dtype), constant(self.max_value, dtype=w.dtype))
        return math_ops.multiply(w, math_ops.divide(desired, math_ops.add(norms, constant(K.epsilon(), w.dtype))))

    def get_config(self):
        return {"max_value": self.max_value, "axis": self.axis}


class NonNeg(Constraint):
    """Zeroes the negative entries (tf.keras.constraints.NonNeg)."""

    def __call__(self, w):
        w = _t(w)
        return math_ops.multiply(w, math_ops.cast(math_ops.greater_equal(w, constant(0.0, dtype=w.dtype)), w.dtype))


class UnitNorm(Constraint):
    """Rescales to unit norm along `axis` (tf.keras.constraints.UnitNorm)."""

    def __init__(self, axis=0):
        self.axis = axis

    def __call__(self, w):
        w = _t(w)
        return math_ops.divide(w, math_ops.add(constant(K.epsilon(), w.dtype), _norms(w, self.axis)))

    def get_config(self):
        return {"axis": self.axis}


class MinMaxNorm(Constraint):
    """Moves the norms along `axis` toward [min_value, max_value] by `rate` (tf.keras.constraints.MinMaxNorm)."""

    def __init__(self, min_value=0.0, max_value=1.0, rate=1.0, axis=0):
        self.min_value, self.max_value, self.rate, self.axis = min_value, max_value, rate, axis

    def __call__(self, w):
        w = _t(w)
        norms = _norms(w, self.axis)
        clipped = clip_ops.clip_by_value(norms, constant(self.min_value, w.dtype), constant(self.max_value, w.dtype))
        desired = self.rate * clipped + (1 - self.rate) * norms
        return math_ops.multiply(w, math_ops.divide(desired, math_ops.add(norms, constant(K.epsilon(), w.dtype))))

    def get_config(self):
        return {"min_value": self.min_value, "max_value": self.max_value, "rate": self.rate, "axis": self.axis}


max_norm, non_neg, unit_norm, min_max_norm = MaxNorm, NonNeg, UnitNorm, MinMaxNorm
_BY_NAME = {"max_norm": MaxNorm, "MaxNorm": MaxNorm, "non_neg": NonNeg, "NonNeg": NonNeg, "unit_norm": UnitNorm,
            "UnitNorm": UnitNorm, "min_max_norm": MinMaxNorm, "MinMaxNorm": MinMaxNorm}


def get(identifier):
    """A constraint from None, a name, a config dict or a callable."""
    if identifier is None:
        return None
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        if identifier not in _BY_NAME:
            raise ValueError(f"Unknown constraint: {identifier!r}; known: {sorted(_BY_NAME)}")
        return _BY_NAME[identifier]()
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret constraint identifier: {identifier!r}")


def serialize(constraint) -> dict:
    return {"class_name": type(constraint).__name__, "config": constraint.get_config()}


def deserialize(config, custom_objects=None):
    name = config["class_name"]
    cls = (custom_objects or {}).get(name) or _BY_NAME.get(name)
    if cls is None:
        raise ValueError(f"Unknown constraint: {name!r}")
    return cls(**config.get("config", {}))
