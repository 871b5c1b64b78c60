"""TensorSpec: the static description of a tensor, its shape, dtype and an optional name
(tf.TensorSpec)."""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.tensor_shape import TensorShape, as_shape

__all__ = ["TensorSpec"]


class TensorSpec:
    """A shape (possibly partly unknown), a dtype and an optional name (tf.TensorSpec). A tensor or
    spec is compatible with it when the dtypes are the same and the shapes compatible; names do not
    count. Immutable and hashable."""

    __slots__ = ("_shape", "_dtype", "_name")

    def __init__(self, shape, dtype=dtypes.float32, name=None):
        self._shape = as_shape(shape) if not isinstance(shape, TensorShape) else shape
        self._dtype = dtypes.as_dtype(dtype)
        self._name = name

    @classmethod
    def from_tensor(cls, tensor, name=None):
        """The spec of a graph tensor, named after its op unless `name` is given."""
        op = getattr(tensor, "op", None)
        return cls(tensor.shape, tensor.dtype, name or (op.name if op is not None else None))

    @classmethod
    def from_spec(cls, spec, name=None):
        return cls(spec.shape, spec.dtype, name or getattr(spec, "name", None))

    @property
    def shape(self) -> TensorShape:
        return self._shape

    @property
    def dtype(self):
        return self._dtype

    @property
    def name(self):
        return self._name

    def is_compatible_with(self, spec_or_tensor) -> bool:
        dt = getattr(spec_or_tensor, "dtype", None)
        shape = getattr(spec_or_tensor, "shape", None)
        if dt is None or shape is None:
            return False
        return dtypes.as_dtype(dt) is self._dtype and self._shape.is_compatible_with(as_shape(shape))

    def _key(self):
        return (None if self._shape.dims is None else tuple(self._shape.dims), self._dtype, self._name)

    def __eq__(self, other):
        return isinstance(other, TensorSpec) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return f"TensorSpec(shape={self._shape}, dtype={self._dtype!r}, name={self._name!r})"
