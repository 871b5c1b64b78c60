"""af.data: input pipelines on the actor runtime (tf.compat.v1.data).

`Dataset` builds pipelines as graph ops; iterators run them as resources in the runtime, with
`map`/`filter`/`flat_map` bodies traced into graph functions and run by the same actors.
"""
from __future__ import annotations

from actorflow.data import experimental
from actorflow.data.dataset import AUTOTUNE, Dataset, FixedLengthRecordDataset, TextLineDataset, TFRecordDataset
from actorflow.data.iterator import Iterator, NumpyIterator
from actorflow.data.options import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Options, ThreadingOptions

__all__ = ["Dataset", "TextLineDataset", "TFRecordDataset", "FixedLengthRecordDataset", "Iterator", "AUTOTUNE", "experimental", "make_one_shot_iterator",
           "NumpyIterator", "Options", "ThreadingOptions", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY",
           "make_initializable_iterator", "get_output_types", "get_output_shapes", "get_output_classes"]


def make_one_shot_iterator(dataset):
    """An iterator that starts on `dataset` when first used (tf.compat.v1.data.make_one_shot_iterator)."""
    return dataset.make_one_shot_iterator()


def make_initializable_iterator(dataset, shared_name=None):
    """An iterator with an `initializer` op (tf.compat.v1.data.make_initializable_iterator)."""
    return dataset.make_initializable_iterator(shared_name=shared_name)


def get_output_types(dataset_or_iterator):
    """The nested dtypes of the elements (tf.compat.v1.data.get_output_types)."""
    return dataset_or_iterator.output_types


def get_output_shapes(dataset_or_iterator):
    """The nested static shapes of the elements (tf.compat.v1.data.get_output_shapes)."""
    return dataset_or_iterator.output_shapes


def get_output_classes(dataset_or_iterator):
    """The nested classes of the elements (tf.compat.v1.data.get_output_classes)."""
    return dataset_or_iterator.output_classes
