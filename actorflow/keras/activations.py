"""af.keras.activations: Keras's activation functions by name (tf.keras.activations)."""
from __future__ import annotations

from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.ops import math_ops, nn_ops
from actorflow.keras import backend as K

__all__ = ["relu", "elu", "selu", "softmax", "softplus", "softsign", "sigmoid", "hard_sigmoid", "tanh", "linear",
           "exponential", "get", "serialize", "deserialize"]


def relu(x, alpha=0.0, max_value=None, threshold=0):
    """max(x, 0), with Keras's alpha, max_value and threshold."""
    return K.relu(x, alpha=alpha, max_value=max_value, threshold=threshold)


def elu(x, alpha=1.0):
    return K.elu(x, alpha)


def selu(x):
    return nn_ops.selu(x) if hasattr(nn_ops, "selu") else _selu(x)


def _selu(x):
    from actorflow.graph.ops.nn_misc_ops import selu as s
    return s(x)


def softmax(x, axis=-1):
    """Softmax over `axis`; Keras refuses a rank-1 input."""
    x = convert_to_tensor(x)
    if x.shape.ndims == 1:
        raise ValueError(f"Cannot apply softmax to a tensor that is 1D. Received input: {x.name}")
    return nn_ops.softmax(x, axis=axis)


def softplus(x):
    return nn_ops.softplus(x)


def softsign(x):
    return K.softsign(x)


def sigmoid(x):
    return math_ops.sigmoid(x)


def hard_sigmoid(x):
    return K.hard_sigmoid(x)


def tanh(x):
    return math_ops.tanh(x)


def exponential(x):
    return math_ops.exp(x)


def linear(x):
    return x


_BY_NAME = {f.__name__: f for f in (relu, elu, selu, softmax, softplus, softsign, sigmoid, hard_sigmoid, tanh,
                                    linear, exponential)}


def get(identifier):
    """The activation function for a name, a callable or None (linear)."""
    if identifier is None:
        return linear
    if isinstance(identifier, str):
        f = _BY_NAME.get(identifier)
        if f is None:
            raise ValueError(f"Unknown activation function: {identifier!r}; known: {sorted(_BY_NAME)}")
        return f
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret activation function identifier: {identifier!r}")


def serialize(activation) -> str:
    """The name of a Keras activation (or of any function)."""
    return getattr(activation, "__name__", str(activation))


def deserialize(name, custom_objects=None):
    if custom_objects and name in custom_objects:
        return custom_objects[name]
    return get(name)
