"""Static shapes with unknown dimensions (tf.TensorShape), and their known dimensions (tf.Dimension).

Indexing or iterating a TensorShape gives a program TF 1.x's dimensions: a known one is a Dimension (an
int with `.value`), an unknown one `Dimension(None)` (UNKNOWN_DIMENSION: `.value` is None, it is falsy,
and comparisons with it give None), so the TF-1.x idiom `x.shape[1].value or tf.shape(x)[1]` works.
actorflow's own modules get None for an unknown dimension (TF 2's shapes), which they test with `is None`.
"""
from __future__ import annotations

import sys


class Dimension(int):
    """A known dimension of a TensorShape, as indexing or iterating one gives it (tf.Dimension).

    An int (so arithmetic, comparisons, hashing, printing and `range()` work as on ints) that also
    has TF 1.x's `.value`, as in `x.get_shape()[1].value`. `Dimension(None)` is the unknown
    dimension, UNKNOWN_DIMENSION (module docstring); `af.dimension_value(d)` reads any of them.
    """

    __slots__ = ()

    def __new__(cls, value):
        if isinstance(value, (Dimension, _UnknownDimension)):
            return value
        v = getattr(value, "value", value)
        return UNKNOWN_DIMENSION if v is None else super().__new__(cls, v)

    @property
    def value(self) -> int:
        return int(self)

    def __repr__(self):
        return int.__repr__(self)

    __str__ = __repr__

    def is_compatible_with(self, other) -> bool:
        o = dimension_value(other)
        return o is None or o == int(self)

    def merge_with(self, other) -> "Dimension":
        o = dimension_value(other)
        if o is not None and o != int(self):
            raise ValueError(f"Dimensions {int(self)} and {o} are not compatible")
        return self


class _UnknownDimension:
    """TF 1.x's Dimension(None): the unknown dimension a program gets from indexing a TensorShape."""

    __slots__ = ()
    value = None

    def __repr__(self):
        return "Dimension(None)"

    def __str__(self):
        return "?"

    def __bool__(self):
        return False

    def __hash__(self):
        return hash(None)

    def __eq__(self, other):         # TF 1.x: unknown, so None
        return None

    __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __eq__

    def __int__(self):
        raise TypeError("an unknown dimension (Dimension(None)) has no int value")

    __index__ = __int__

    def __add__(self, other):        # arithmetic with an unknown dimension is unknown
        return self

    __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __add__
    __truediv__ = __rtruediv__ = __add__

    def is_compatible_with(self, other) -> bool:
        return True

    def assert_is_compatible_with(self, other) -> None:
        return None

    def merge_with(self, other):
        return Dimension(dimension_value(other))

    def __reduce__(self):
        return (_unknown_dimension, ())


def _unknown_dimension():
    return UNKNOWN_DIMENSION


UNKNOWN_DIMENSION = _UnknownDimension()


def _for_program():
    """Whether the code indexing a TensorShape (two frames up) is a program rather than actorflow's."""
    name = sys._getframe(2).f_globals.get("__name__", "")
    return not (name == "actorflow" or name.startswith("actorflow."))


def dimension_value(dimension):
    """The int (or None) of a dimension, a Dimension or an int (tf.compat.dimension_value)."""
    return getattr(dimension, "value", dimension)


def dimension_at_index(shape, index):
    """Dimension `index` of `shape` (tf.compat.dimension_at_index): a Dimension, Dimension(None) when
    unknown."""
    shape = as_shape(shape)
    if shape.dims is None:
        return UNKNOWN_DIMENSION
    return Dimension(shape.dims[index])


class TensorShape:
    """A possibly partial shape: unknown rank (`dims is None`) or a tuple of int-or-None.

    TF-1.x counterpart: `tf.TensorShape` with v2 behaviour (indexing gives ints or None).
    """

    __slots__ = ("dims",)

    def __init__(self, dims=None):
        if dims is None:
            self.dims = None
        elif isinstance(dims, TensorShape):
            self.dims = dims.dims
        else:
            if isinstance(dims, int):
                dims = (dims,)
            out = []
            for d in dims:
                # None or a negative size (-1, as in TF's shape protos) is an unknown dimension.
                d = getattr(d, "value", d)
                d = None if d is None else int(d)
                out.append(None if d is None or d < 0 else d)
            self.dims = tuple(out)

    @property
    def ndims(self):
        return None if self.dims is None else len(self.dims)

    rank = ndims

    def as_list(self) -> list:
        if self.dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return list(self.dims)

    def is_fully_defined(self) -> bool:
        return self.dims is not None and all(d is not None for d in self.dims)

    def num_elements(self):
        if not self.is_fully_defined():
            return None
        n = 1
        for d in self.dims:
            n *= d
        return n

    def is_compatible_with(self, other) -> bool:
        other = as_shape(other)
        if self.dims is None or other.dims is None:
            return True
        if len(self.dims) != len(other.dims):
            return False
        return all(a is None or b is None or a == b for a, b in zip(self.dims, other.dims))

    def merge_with(self, other) -> "TensorShape":
        other = as_shape(other)
        if self.dims is None:
            return other
        if other.dims is None:
            return self
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are not compatible")
        return TensorShape([a if a is not None else b for a, b in zip(self.dims, other.dims)])

    def with_rank(self, rank: int) -> "TensorShape":
        if self.dims is None:
            return TensorShape([None] * rank)
        if len(self.dims) != rank:
            raise ValueError(f"Shape {self} must have rank {rank}")
        return self

    def with_rank_at_least(self, rank: int) -> "TensorShape":
        if self.dims is not None and len(self.dims) < rank:
            raise ValueError(f"Shape {self} must have rank at least {rank}")
        return self

    def with_rank_at_most(self, rank: int) -> "TensorShape":
        if self.dims is not None and len(self.dims) > rank:
            raise ValueError(f"Shape {self} must have rank at most {rank}")
        return self

    def assert_is_compatible_with(self, other) -> None:
        """Raises ValueError unless this shape and `other` could describe the same tensor."""
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {as_shape(other)} are incompatible")

    def assert_same_rank(self, other) -> None:
        """Raises ValueError when both ranks are known and differ."""
        other = as_shape(other)
        if self.dims is not None and other.dims is not None and len(self.dims) != len(other.dims):
            raise ValueError(f"Shapes {self} and {other} must have the same rank")

    def assert_has_rank(self, rank: int) -> None:
        if self.dims is not None and len(self.dims) != rank:
            raise ValueError(f"Shape {self} must have rank {rank}")

    def assert_is_fully_defined(self) -> None:
        if not self.is_fully_defined():
            raise ValueError(f"Shape {self} is not fully defined")

    def most_specific_compatible_shape(self, other) -> "TensorShape":
        """The most specific shape compatible with both (dimensions that differ become unknown)."""
        other = as_shape(other)
        if self.dims is None or other.dims is None or len(self.dims) != len(other.dims):
            return TensorShape(None)
        return TensorShape([a if a == b else None for a, b in zip(self.dims, other.dims)])

    def __add__(self, other) -> "TensorShape":
        return self.concatenate(other)

    def __radd__(self, other) -> "TensorShape":
        return as_shape(other).concatenate(self)

    def concatenate(self, other) -> "TensorShape":
        other = as_shape(other)
        if self.dims is None or other.dims is None:
            return TensorShape(None)
        return TensorShape(self.dims + other.dims)

    def __len__(self):
        if self.dims is None:
            raise ValueError("Cannot take the length of a shape with unknown rank.")
        return len(self.dims)

    def __iter__(self):
        if self.dims is None:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        unknown = UNKNOWN_DIMENSION if _for_program() else None
        return iter([unknown if d is None else Dimension(d) for d in self.dims])

    def __getitem__(self, key):
        if self.dims is None:
            if isinstance(key, slice):
                return TensorShape(None)
            return UNKNOWN_DIMENSION if _for_program() else None
        if isinstance(key, slice):
            return TensorShape(self.dims[key])
        d = self.dims[key]
        if d is None:
            return UNKNOWN_DIMENSION if _for_program() else None
        return Dimension(d)

    def __eq__(self, other):
        try:
            other = as_shape(other)
        except (TypeError, ValueError):
            return NotImplemented
        return self.dims == other.dims

    def __hash__(self):
        return hash(self.dims)

    def __repr__(self):
        return f"TensorShape({None if self.dims is None else list(self.dims)})"

    def __str__(self):
        if self.dims is None:
            return "<unknown>"
        return "(" + ", ".join("?" if d is None else str(d) for d in self.dims) + ("," if len(self.dims) == 1 else "") + ")"


def as_shape(shape) -> TensorShape:
    return shape if isinstance(shape, TensorShape) else TensorShape(shape)


def unknown_shape(rank=None) -> TensorShape:
    return TensorShape(None if rank is None else [None] * rank)


def scalar() -> TensorShape:
    """The shape of a scalar, [] (TF 1.x's tensor_shape.scalar)."""
    return TensorShape([])


def vector(length) -> TensorShape:
    return TensorShape([length])


def matrix(rows, cols) -> TensorShape:
    return TensorShape([rows, cols])
