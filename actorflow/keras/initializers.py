"""af.keras.initializers: Keras's initializer classes and names (tf.keras.initializers of TF 1.x).

The classes are the graph initializers under Keras's names, with Keras's defaults (RandomNormal
and TruncatedNormal stddev 0.05, RandomUniform in [-0.05, 0.05]); `get` takes a name
("glorot_uniform", "he_normal", "zeros", ...), a config dict, an initializer or a callable.
"""
from __future__ import annotations

from actorflow.graph import initializers as _init
from actorflow.graph.initializers import Initializer

__all__ = ["Initializer", "Zeros", "Ones", "Constant", "RandomNormal", "RandomUniform", "TruncatedNormal",
           "VarianceScaling", "Orthogonal", "Identity", "GlorotNormal", "GlorotUniform", "glorot_normal",
           "glorot_uniform", "he_normal", "he_uniform", "lecun_normal", "lecun_uniform", "zeros", "ones",
           "constant", "get", "serialize", "deserialize"]

Zeros = _init.zeros_initializer
Ones = _init.ones_initializer
Constant = _init.constant_initializer
VarianceScaling = _init.variance_scaling_initializer
Orthogonal = _init.orthogonal_initializer
Identity = _init.identity_initializer
GlorotNormal = _init.glorot_normal_initializer
GlorotUniform = _init.glorot_uniform_initializer


class RandomNormal(_init.random_normal_initializer):
    """N(mean, stddev**2), stddev 0.05 by default (tf.keras.initializers.RandomNormal)."""

    def __init__(self, mean=0.0, stddev=0.05, seed=None, dtype="float32"):
        super().__init__(mean=mean, stddev=stddev, seed=seed, dtype=dtype)


class RandomUniform(_init.random_uniform_initializer):
    """U[minval, maxval), [-0.05, 0.05) by default (tf.keras.initializers.RandomUniform)."""

    def __init__(self, minval=-0.05, maxval=0.05, seed=None, dtype="float32"):
        super().__init__(minval=minval, maxval=maxval, seed=seed, dtype=dtype)


class TruncatedNormal(_init.truncated_normal_initializer):
    """Truncated N(mean, stddev**2), stddev 0.05 by default (tf.keras.initializers.TruncatedNormal)."""

    def __init__(self, mean=0.0, stddev=0.05, seed=None, dtype="float32"):
        super().__init__(mean=mean, stddev=stddev, seed=seed, dtype=dtype)


def glorot_uniform(seed=None):
    return GlorotUniform(seed=seed)


def glorot_normal(seed=None):
    return GlorotNormal(seed=seed)


he_normal, he_uniform = _init.he_normal, _init.he_uniform
lecun_normal, lecun_uniform = _init.lecun_normal, _init.lecun_uniform
zeros, ones, constant = Zeros, Ones, Constant

_BY_NAME = {
    "zeros": Zeros, "zero": Zeros, "Zeros": Zeros, "ones": Ones, "one": Ones, "Ones": Ones,
    "constant": Constant, "Constant": Constant,
    "random_normal": RandomNormal, "RandomNormal": RandomNormal, "normal": RandomNormal,
    "random_uniform": RandomUniform, "RandomUniform": RandomUniform, "uniform": RandomUniform,
    "truncated_normal": TruncatedNormal, "TruncatedNormal": TruncatedNormal,
    "variance_scaling": VarianceScaling, "VarianceScaling": VarianceScaling,
    "orthogonal": Orthogonal, "Orthogonal": Orthogonal, "identity": Identity, "Identity": Identity,
    "glorot_normal": glorot_normal, "GlorotNormal": GlorotNormal,
    "glorot_uniform": glorot_uniform, "GlorotUniform": GlorotUniform,
    "he_normal": he_normal, "he_uniform": he_uniform, "lecun_normal": lecun_normal, "lecun_uniform": lecun_uniform,
}


def get(identifier):
    """An initializer from a name, a {"class_name", "config"} dict, an initializer or a callable."""
    if identifier is None:
        return None
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        make = _BY_NAME.get(identifier)
        if make is None:
            raise ValueError(f"Unknown initializer: {identifier!r}; known: {sorted(_BY_NAME)}")
        return make()
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret initializer identifier: {identifier!r}")


# af's TF-1.x class names -> Keras's.
_KERAS_NAMES = {Zeros: "Zeros", Ones: "Ones", Constant: "Constant", VarianceScaling: "VarianceScaling",
                Orthogonal: "Orthogonal", Identity: "Identity", GlorotNormal: "GlorotNormal",
                GlorotUniform: "GlorotUniform", _init.random_normal_initializer: "RandomNormal",
                _init.random_uniform_initializer: "RandomUniform", _init.truncated_normal_initializer: "TruncatedNormal"}


def serialize(initializer) -> dict:
    """{"class_name": Keras's class name, "config": its config}."""
    cls = type(initializer)
    name = cls.__name__ if cls in (RandomNormal, RandomUniform, TruncatedNormal) else _KERAS_NAMES.get(cls, cls.__name__)
    return {"class_name": name, "config": initializer.get_config()}


def deserialize(config, custom_objects=None):
    name = config["class_name"]
    cls = (custom_objects or {}).get(name) or _BY_NAME.get(name) or getattr(_init, name, None)
    if cls is None:
        raise ValueError(f"Unknown initializer: {name!r}")
    return cls(**config.get("config", {}))
