"""IndexedSlices: a sparse gradient, rows `values` at `indices` of a tensor of `dense_shape`."""
from __future__ import annotations


class OfValues:
    """The tensor-like properties of a composite of tensors, read from its `values` (IndexedSlices,
    SparseTensor)."""

    __slots__ = ()

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def name(self):
        return self.values.name

    @property
    def op(self):
        return self.values.op

    @property
    def graph(self):
        return self.values.graph

    @property
    def device(self):
        return self.values.device


class IndexedSlices(OfValues):
    """A sparse representation of a dense tensor's rows (tf.IndexedSlices).

    The gradient of `gather`/`embedding_lookup` with respect to `params` is one of these; optimizers
    apply it as a sparse row update and never densify it. `af.convert_to_tensor` densifies
    (with UnsortedSegmentSum) when a dense tensor is really needed.
    """

    __slots__ = ("values", "indices", "dense_shape")

    def __init__(self, values, indices, dense_shape=None):
        self.values = values
        self.indices = indices
        self.dense_shape = dense_shape

    def _as_graph_element(self):
        return self._dense()

    def _dense(self):
        from actorflow.graph.ops import array_ops
        return array_ops.indexed_slices_to_dense(self)

    def __repr__(self):
        return f"IndexedSlices(values={self.values!r}, indices={self.indices!r}, dense_shape={self.dense_shape!r})"


def convert_to_tensor_or_indexed_slices(value, dtype=None, name=None):
    """An IndexedSlices as it is (its dtype checked against `dtype`), anything else through
    convert_to_tensor (tf.convert_to_tensor_or_indexed_slices)."""
    from actorflow.graph import dtypes
    from actorflow.graph.graph import convert_to_tensor
    if isinstance(value, IndexedSlices):
        if dtype is not None and dtypes.as_dtype(dtype) is not value.dtype:
            raise ValueError(f"Tensor conversion requested dtype {dtypes.as_dtype(dtype).name} for IndexedSlices "
                             f"with dtype {value.dtype.name}: {value!r}")
        return value
    return convert_to_tensor(value, dtype=dtype, name=name)
