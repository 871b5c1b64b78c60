"""af.keras.regularizers: l1, l2 and l1_l2 penalties (tf.keras.regularizers).

A regularizer maps a weight to a scalar loss; a layer given one adds that loss to its `losses`
and to the REGULARIZATION_LOSSES collection, and a compiled model adds its layers' losses to the
training loss, as Keras does.
"""
from __future__ import annotations

from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.constant import constant

__all__ = ["Regularizer", "L1L2", "l1", "l2", "l1_l2", "get", "serialize", "deserialize"]


class Regularizer:
    """Base class: `regularizer(x)` is a scalar loss."""

    def __call__(self, x):
        return constant(0.0)

    def get_config(self) -> dict:
        return {}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class L1L2(Regularizer):
    """l1 * sum(|x|) + l2 * sum(x**2) (tf.keras.regularizers.L1L2)."""

    def __init__(self, l1=0.0, l2=0.0):  # noqa: E741
        self.l1, self.l2 = float(l1), float(l2)

    def __call__(self, x):
        x = convert_to_tensor(x.value() if hasattr(x, "value") and not hasattr(x, "value_index") else x)
        loss = constant(0.0, dtype=x.dtype)
        if self.l1:
            loss = math_ops.add(loss, math_ops.multiply(constant(self.l1, dtype=x.dtype),
                                                        math_ops.reduce_sum(math_ops.abs(x))))
        if self.l2:
            loss = math_ops.add(loss, math_ops.multiply(constant(self.l2, dtype=x.dtype),
                                                        math_ops.reduce_sum(math_ops.square(x))))
        return loss

    def get_config(self):
        return {"l1": self.l1, "l2": self.l2}


def l1(l=0.01):  # noqa: E741
    """An L1 penalty l * sum(|x|)."""
    return L1L2(l1=l)


def l2(l=0.01):  # noqa: E741
    """An L2 penalty l * sum(x**2)."""
    return L1L2(l2=l)


def l1_l2(l1=0.01, l2=0.01):  # noqa: E741
    """Both penalties."""
    return L1L2(l1=l1, l2=l2)


def get(identifier):
    """A regularizer from None, a name ("l1", "l2", "l1_l2"), a config dict or a callable."""
    if identifier is None:
        return None
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        if identifier not in ("l1", "l2", "l1_l2"):
            raise ValueError(f"Unknown regularizer: {identifier!r}")
        return globals()[identifier]()
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret regularizer identifier: {identifier!r}")


def serialize(regularizer) -> dict:
    return {"class_name": type(regularizer).__name__, "config": regularizer.get_config()}


def deserialize(config, custom_objects=None):
    name = config["class_name"]
    cls = (custom_objects or {}).get(name) or {"L1L2": L1L2}.get(name)
    if cls is None:
        raise ValueError(f"Unknown regularizer: {name!r}")
    return cls(**config.get("config", {}))
