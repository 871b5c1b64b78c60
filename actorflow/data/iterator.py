"""Iterators over datasets (tf.compat.v1.data.Iterator).

An iterator is a resource in the runtime (actors/dataset.py): an IteratorV2 or OneShotIterator op
creates it, MakeIterator (the `initializer`) starts it on a dataset, IteratorGetNext takes the next
element, and raises af.errors.OutOfRangeError at the end, as in TF.
"""
from __future__ import annotations

from actorflow.graph import dtypes, nest
from actorflow.graph.graph import Tensor
from actorflow.graph.ops import dataset_ops as ops
from actorflow.graph.tensor_shape import TensorShape, as_shape

__all__ = ["Iterator", "NumpyIterator"]

# Installed by the package root (the data layer sits below the runtime): graph -> a new session on it.
_session_factory = None


class Iterator:
    """Gives the elements of a dataset one `get_next()` run at a time (tf.compat.v1.data.Iterator)."""

    def __init__(self, iterator_resource: Tensor, initializer, output_types, output_shapes, dataset=None):
        self._iterator_resource = iterator_resource
        self._initializer = initializer
        self._types = output_types
        self._shapes = output_shapes
        self._dataset = dataset          # a one-shot iterator's dataset, started on first use

    @staticmethod
    def from_structure(output_types, output_shapes=None, shared_name=None, output_classes=None):
        """An iterator not bound to a dataset: `make_initializer(dataset)` gives the op that
        (re)starts it on any dataset of a compatible structure (tf.data.Iterator.from_structure)."""
        from actorflow.data.dataset import _shape_structure
        types = nest.map_structure(dtypes.as_dtype, output_types)
        if output_shapes is None:
            shapes = nest.map_structure(lambda _: TensorShape(None), types)
        else:
            shapes = _shape_structure(types, output_shapes, "Iterator.from_structure")
        res = ops.IteratorV2(output_types=tuple(nest.flatten(types)), output_shapes=tuple(nest.flatten(shapes)),
                             shared_name=shared_name or "", container="", name="Iterator")
        return Iterator(res, None, types, shapes)

    @staticmethod
    def _one_shot(dataset):
        res = ops.OneShotIterator(output_types=tuple(nest.flatten(dataset._types)),
                                  output_shapes=tuple(nest.flatten(dataset._shapes)), shared_name="", container="",
                                  name="OneShotIterator")
        return Iterator(res, None, dataset._types, dataset._shapes, dataset)

    # -- structure ---------------------------------------------------------------------------------
    @property
    def output_types(self):
        return self._types

    @property
    def output_shapes(self):
        return self._shapes

    @property
    def output_classes(self):
        return nest.map_structure(lambda _: Tensor, self._types)

    @property
    def initializer(self):
        """The op that (re)starts this iterator on its dataset (make_initializable_iterator)."""
        if self._initializer is None:
            raise ValueError("Iterator does not have an initializer: a one-shot iterator starts itself, and one made "
                             "by from_structure is started by make_initializer(dataset)")
        return self._initializer

    # -- ops ------------------------------------------------------------------------------------------
    def make_initializer(self, dataset, name=None):
        """An op that (re)starts this iterator on `dataset`, whose element structure and dtypes
        must match and whose shapes must be compatible (tf.data.Iterator.make_initializer)."""
        from actorflow.data.dataset import Dataset
        if not isinstance(dataset, Dataset):
            raise TypeError(f"make_initializer takes a Dataset, got {type(dataset).__name__}")
        if self._dataset is not None:
            raise ValueError("a one-shot iterator cannot be initialized with another dataset")
        try:
            nest.assert_same_structure(self._types, dataset._types)
            ok = True
        except ValueError:
            ok = False
        if not ok or nest.flatten(self._types) != nest.flatten(dataset._types):
            raise TypeError(f"Expected output types {self._types!r} but got dataset with output types "
                            f"{dataset._types!r}.")
        for a, b in zip(nest.flatten(self._shapes), nest.flatten(dataset._shapes)):
            if not as_shape(a).is_compatible_with(b):
                raise TypeError(f"Expected output shapes compatible with {self._shapes!r} but got dataset with "
                                f"output shapes {dataset._shapes!r}.")
        return ops.MakeIterator(self._iterator_resource, dataset._variant, name=name or "make_initializer")

    def get_next(self, name=None):
        """The next element, in the structure of `output_types`, as tensors with the iterator's
        static shapes; running it past the end raises af.errors.OutOfRangeError."""
        inputs = [self._iterator_resource]
        if self._dataset is not None:
            inputs.append(self._dataset._variant)
        out = ops.IteratorGetNext(*inputs, name=name or "IteratorGetNext")
        flat = list(out) if isinstance(out, tuple) else [out]
        return nest.pack_sequence_as(self._types, flat)

    def get_next_as_optional(self):
        """The next element as an Optional, empty past the end (tf.data.Iterator.get_next_as_optional;
        tf.data.experimental.get_next_as_optional)."""
        from actorflow.data.optional import get_next_as_optional
        return get_next_as_optional(self)

    def string_handle(self, name=None):
        raise NotImplementedError("Iterator.string_handle / from_string_handle are not supported")


class NumpyIterator:
    """Iterates a dataset's elements as numpy values (tf.data.NumpyIterator, what
    `as_numpy_iterator` returns): a one-shot iterator of the dataset, run one element per `next`
    in a session of its own on the dataset's graph, closed at the end or by `close()`.

    Differs from TF, where it exists only in eager mode; strings come back as bytes, as in TF."""

    def __init__(self, dataset):
        from actorflow.data.dataset import Dataset
        if not isinstance(dataset, Dataset):
            raise TypeError(f"NumpyIterator expects a tf.data.Dataset, got {type(dataset).__name__}")
        if _session_factory is None:
            raise RuntimeError("NumpyIterator needs the runtime: import actorflow")
        graph = dataset._variant.graph
        with graph.as_default():
            self._next = dataset.make_one_shot_iterator().get_next()
        self._session = _session_factory(graph)
        self._done = False

    def __iter__(self):
        return self

    def __next__(self):
        from actorflow import errors
        if self._done:
            raise StopIteration
        try:
            return self._session.run(self._next)
        except errors.OutOfRangeError:
            self.close()
            raise StopIteration from None

    def next(self):
        return self.__next__()

    def close(self) -> None:
        """Ends the iteration and closes its session."""
        if not self._done:
            self._done = True
            self._session.close()

    def __repr__(self):
        return f"<NumpyIterator over {self._next!r}>"
