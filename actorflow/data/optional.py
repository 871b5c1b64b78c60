"""Optionals (tf.data.experimental.Optional): a value that may hold an element of a dataset.

An Optional is a `variant` scalar tensor with the element structure beside it: `has_value()` is a
bool tensor and `get_value()` the element's tensors (running it on an empty Optional fails with
InvalidArgumentError). `get_next_as_optional(iterator)` gives one per run that never raises
OutOfRangeError: past the end it holds no value.
"""
from __future__ import annotations

from actorflow.graph import nest
from actorflow.graph.graph import Tensor
from actorflow.graph.ops import dataset_ops as ops
from actorflow.graph.tensor_shape import TensorShape, as_shape

__all__ = ["Optional", "get_next_as_optional"]


class Optional:
    """An element that may be absent (tf.data.experimental.Optional / tf.experimental.Optional)."""

    def __init__(self, variant: Tensor, types, shapes):
        self._variant = variant
        self._types = types
        self._shapes = shapes

    @staticmethod
    def from_value(value):
        """An Optional holding `value`, a nested structure of tensors (Optional.from_value)."""
        from actorflow.data.dataset import _normalize, _shapes_of, _types_of
        s = _normalize(value, "optional value")
        v = ops.OptionalFromValue(*nest.flatten(s), name="OptionalFromValue")
        return Optional(v, _types_of(s), _shapes_of(s))

    @staticmethod
    def empty(element_spec):
        """An Optional with no value, for elements of `element_spec`: a nested structure of
        (dtype, shape) pairs as Dataset.element_spec gives (Optional.empty)."""
        types, shapes = _split_spec(element_spec)
        return Optional(ops.OptionalNone(name="OptionalNone"), types, shapes)

    @property
    def element_spec(self):
        """(dtype, shape) per component, in the element structure (as Dataset.element_spec)."""
        return nest.map_structure(lambda t, s: (t, s), self._types, self._shapes)

    def has_value(self, name=None):
        """A bool scalar tensor: whether this Optional holds a value (Optional.has_value)."""
        return ops.OptionalHasValue(self._variant, name=name or "OptionalHasValue")

    def get_value(self, name=None):
        """The value, tensors in the element structure; running it when there is none fails with
        InvalidArgumentError (Optional.get_value)."""
        flat_t = tuple(nest.flatten(self._types))
        out = ops.OptionalGetValue(self._variant, output_types=flat_t,
                                   output_shapes=tuple(as_shape(s) for s in nest.flatten(self._shapes)),
                                   name=name or "OptionalGetValue")
        flat = list(out) if isinstance(out, tuple) else [out]
        return nest.pack_sequence_as(self._types, flat)

    def __repr__(self):
        return f"<Optional {self._types}>"


def _split_spec(spec):
    """The (types, shapes) structures of an element spec whose leaves are TensorSpecs or
    (dtype, shape) pairs."""
    from actorflow.graph.dtypes import DType

    def leaf(x):
        return hasattr(x, "dtype") and hasattr(x, "shape") or (
            isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], DType))

    def walk(x, part):
        if leaf(x):
            t, s = (x.dtype, x.shape) if hasattr(x, "dtype") else x
            return t if part == 0 else as_shape(s)
        if isinstance(x, dict):
            return {k: walk(v, part) for k, v in x.items()}
        if isinstance(x, tuple):
            out = [walk(v, part) for v in x]
            return type(x)(*out) if hasattr(x, "_fields") else tuple(out)
        raise TypeError(f"Optional.empty: {x!r} is not an element spec (TensorSpecs or (dtype, shape) pairs)")
    return walk(spec, 0), walk(spec, 1)


def get_next_as_optional(iterator):
    """The iterator's next element as an Optional, empty past the end instead of raising
    OutOfRangeError (tf.data.experimental.get_next_as_optional)."""
    from actorflow.data.iterator import Iterator
    if not isinstance(iterator, Iterator):
        raise TypeError(f"get_next_as_optional takes an iterator, got {type(iterator).__name__}")
    inputs = [iterator._iterator_resource]
    if iterator._dataset is not None:
        inputs.append(iterator._dataset._variant)
    v = ops.IteratorGetNextAsOptional(*inputs, name="IteratorGetNextAsOptional")
    shapes = nest.map_structure(lambda s: TensorShape(s) if s is not None else TensorShape(None), iterator._shapes)
    return Optional(v, iterator._types, shapes)
