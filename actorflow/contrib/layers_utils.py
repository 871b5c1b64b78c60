"""tf.contrib.layers.utils (slim.utils): the helpers slim's networks are written with: outputs
collected under aliases and read back as an end-points dict, static and smart conditionals, and the
dimension checks (TF 1.15's semantics).

`collect_named_outputs(collections, alias, outputs)` records `alias` on the tensor (its `aliases`
list, as TF sets it) and adds it to `collections`; `convert_collection_to_dict(collection)` maps each
alias of each tensor of the collection to it, in order. A tensor with no alias goes by its name
without ":0".
"""
from __future__ import annotations

import collections as _collections

from actorflow.graph.graph import Tensor, get_collection, get_default_graph
from actorflow.graph.tensor_shape import TensorShape, as_shape

__all__ = ["collect_named_outputs", "append_tensor_alias", "gather_tensors_aliases", "get_tensor_aliases",
           "convert_collection_to_dict", "constant_value", "static_cond", "smart_cond", "get_variable_collections",
           "channel_dimension", "last_dimension", "two_element_tuple", "n_positive_integers"]


def collect_named_outputs(collections, alias, outputs):
    """Records `alias` on `outputs` and adds it to `collections`, when any; returns `outputs`."""
    if collections:
        append_tensor_alias(outputs, alias)
        get_default_graph().add_to_collections(collections, outputs)
    return outputs


def append_tensor_alias(tensor, alias):
    """Appends `alias` (a trailing '/' dropped) to the tensor's aliases; returns the tensor."""
    if alias.endswith("/"):
        alias = alias[:-1]
    if hasattr(tensor, "aliases"):
        tensor.aliases.append(alias)
    else:
        tensor.aliases = [alias]
    return tensor


def get_tensor_aliases(tensor):
    """The tensor's aliases, else its name without ':0'."""
    if hasattr(tensor, "aliases"):
        return tensor.aliases
    return [tensor.name[:-2] if tensor.name.endswith(":0") else tensor.name]


def gather_tensors_aliases(tensors):
    """The aliases of each of `tensors`, in order, in one list."""
    aliases = []
    for t in tensors:
        aliases += get_tensor_aliases(t)
    return aliases


def convert_collection_to_dict(collection, clear_collection=False):
    """An OrderedDict from each alias of each tensor in `collection` to the tensor."""
    out = _collections.OrderedDict((alias, t) for t in get_collection(collection) for alias in get_tensor_aliases(t))
    if clear_collection:
        get_default_graph().clear_collection(collection)
    return out


def constant_value(value_or_tensor_or_var, dtype=None):
    """The value of a Python value, or of a tensor whose value is known when the graph is built; a
    ValueError otherwise (the value cannot be None)."""
    if value_or_tensor_or_var is None:
        raise ValueError("value_or_tensor_or_var cannot be None")
    value = value_or_tensor_or_var
    if isinstance(value, Tensor) or hasattr(value, "_variable"):
        from actorflow.graph.ops.infer import constant_value as _static
        t = value if isinstance(value, Tensor) else value.value()
        if dtype is not None and t.dtype is not dtype:
            raise ValueError(f"It has the wrong type {t.dtype} instead of {dtype}")
        value = _static(t)
        if value is None:
            raise ValueError(f"{t.name} has no constant value when the graph is built")
    return value


def static_cond(pred, fn1, fn2):
    """fn1() if the Python bool `pred` else fn2(); a TypeError for anything but a bool."""
    if not callable(fn1):
        raise TypeError("fn1 must be callable.")
    if not callable(fn2):
        raise TypeError("fn2 must be callable.")
    if pred:
        return fn1()
    return fn2()


def smart_cond(pred, fn1, fn2, name=None):
    """static_cond when `pred` is known when the graph is built, else a tf.cond."""
    try:
        known = constant_value(pred)
    except (ValueError, TypeError):
        from actorflow.graph.control_flow import cond
        return cond(pred, fn1, fn2, name=name)
    return static_cond(bool(known), fn1, fn2)


def get_variable_collections(variables_collections, name):
    """The collections for variable `name`: `variables_collections[name]` when it is a dict."""
    if isinstance(variables_collections, dict):
        return variables_collections.get(name, None)
    return variables_collections


def _get_dimension(shape, dim, min_rank=1):
    dims = as_shape(shape).dims
    if dims is None:
        raise ValueError("dims of shape must be known but is None")
    if len(dims) < min_rank:
        raise ValueError(f"rank of shape must be at least {min_rank} not: {len(dims)}")
    value = dims[dim]
    if value is None:
        raise ValueError(f"dimension {dim} of shape must be known but is None: {as_shape(shape)}")
    return value


def channel_dimension(shape, data_format, min_rank=1):
    """The channels' size of `shape` (axis 1 for NCHW, else the last), which must be known."""
    return _get_dimension(shape, 1 if data_format == "NCHW" else -1, min_rank=min_rank)


def last_dimension(shape, min_rank=1):
    """The last dimension of `shape`, which must be known; rank at least `min_rank`."""
    return _get_dimension(shape, -1, min_rank=min_rank)


def two_element_tuple(int_or_tuple):
    """(h, w) from an int, a pair, or a TensorShape of two dimensions."""
    if isinstance(int_or_tuple, (list, tuple)):
        if len(int_or_tuple) != 2:
            raise ValueError(f"Must be a list with 2 elements: {int_or_tuple}")
        return int(int_or_tuple[0]), int(int_or_tuple[1])
    if isinstance(int_or_tuple, int):
        return int(int_or_tuple), int(int_or_tuple)
    if isinstance(int_or_tuple, TensorShape) and len(int_or_tuple.dims or ()) == 2:
        return int_or_tuple.dims[0], int_or_tuple.dims[1]
    raise ValueError("Must be an int, a list with 2 elements or a TensorShape of length 2")


def n_positive_integers(n, value):
    """`value` (an int, or a sequence or TensorShape of `n` ints) as a tuple of `n` positive ints."""
    if isinstance(value, int):
        if value > 0:
            return (value,) * n
    else:
        dims = value.dims if isinstance(value, TensorShape) else value
        values = tuple(dims) if dims is not None else ()
        if len(values) == n and all(isinstance(v, int) and v > 0 for v in values):
            return values
    raise ValueError(f"Expected {n} positive integers, or a single positive integer, but got {value}")
