"""af.contrib.lookup: tf.contrib.lookup (TF 1.x): the vocabulary tables text programs build from a
list or a file, over af.lookup's tables.

- `index_table_from_tensor` / `index_table_from_file`: key -> its position (int64); an unknown key
  gets `default_value`, or with `num_oov_buckets` one of that many hash buckets after the
  vocabulary (vocab_size + Fingerprint64(key) % num_oov_buckets, as TF's).
- `index_to_string_table_from_tensor` / `..._from_file`: id -> its key, `default_value` ("UNK")
  for ids outside the vocabulary.
`HashTable` is TF 1.x's name of StaticHashTable. Tables start empty; run `tables_initializer()`.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.lookup_ops import (
    KeyValueTensorInitializer,
    StaticHashTable,
    StaticVocabularyTable,
    TextFileIndex,
    TextFileInitializer,
)

__all__ = ["HashTable", "KeyValueTensorInitializer", "TextFileInitializer", "TextFileIndex", "index_table_from_tensor",
           "index_table_from_file", "index_to_string_table_from_tensor", "index_to_string_table_from_file"]

HashTable = StaticHashTable


def _ids_table(initializer, num_oov_buckets, default_value, name):
    if num_oov_buckets < 0:
        raise ValueError(f"num_oov_buckets must be >= 0, got {num_oov_buckets}")
    if num_oov_buckets:
        return StaticVocabularyTable(initializer, num_oov_buckets, name=name)
    return StaticHashTable(initializer, default_value, name=name)


def index_table_from_tensor(vocabulary_list, num_oov_buckets=0, default_value=-1, hasher_spec=None,
                            dtype=dtypes.string, name=None):
    """A table from each key of the 1-D `vocabulary_list` to its index (int64)."""
    if vocabulary_list is None:
        raise ValueError("vocabulary_list must be specified.")
    with name_scope(name, "string_to_index"):
        keys = convert_to_tensor(vocabulary_list, dtype=dtypes.as_dtype(dtype) if dtype != dtypes.string
                                 else None, name="vocabulary_list")
        if keys.dtype.is_integer and keys.dtype is not dtypes.int64:
            keys = math_ops.cast(keys, dtypes.int64)
        ids = math_ops.cast(array_ops.range(array_ops.size(keys)), dtypes.int64)
        init = KeyValueTensorInitializer(keys, ids, name="table_init")
        return _ids_table(init, num_oov_buckets, default_value, name)


def index_table_from_file(vocabulary_file=None, num_oov_buckets=0, vocab_size=None, default_value=-1,
                          hasher_spec=None, key_dtype=dtypes.string, name=None,
                          key_column_index=TextFileIndex.WHOLE_LINE, value_column_index=TextFileIndex.LINE_NUMBER,
                          delimiter="\t"):
    """A table from each key of `vocabulary_file` (one per line, or a column of it) to its line number."""
    if vocabulary_file is None or (isinstance(vocabulary_file, str) and not vocabulary_file):
        raise ValueError("vocabulary_file must be specified and must not be empty.")
    if vocab_size is not None and vocab_size < 1:
        raise ValueError(f"vocab_size must be greater than 0, got {vocab_size}.")
    with name_scope(name, "string_to_index"):
        init = TextFileInitializer(vocabulary_file, key_dtype, key_column_index, dtypes.int64, value_column_index,
                                   vocab_size=vocab_size, delimiter=delimiter)
        return _ids_table(init, num_oov_buckets, default_value, name)


def index_to_string_table_from_tensor(vocabulary_list, default_value="UNK", name=None):
    """A table from each index (int64) of `vocabulary_list` to its string."""
    if vocabulary_list is None:
        raise ValueError("vocabulary_list must be specified.")
    with name_scope(name, "index_to_string"):
        values = convert_to_tensor(vocabulary_list, dtype=dtypes.string, name="vocabulary_list")
        ids = math_ops.cast(array_ops.range(array_ops.size(values)), dtypes.int64)
        return StaticHashTable(KeyValueTensorInitializer(ids, values, name="table_init"), default_value, name=name)


def index_to_string_table_from_file(vocabulary_file, vocab_size=None, default_value="UNK", name=None,
                                    key_column_index=TextFileIndex.LINE_NUMBER,
                                    value_column_index=TextFileIndex.WHOLE_LINE, delimiter="\t"):
    """A table from each line number of `vocabulary_file` to its line (or a column of it)."""
    if vocabulary_file is None or (isinstance(vocabulary_file, str) and not vocabulary_file):
        raise ValueError("vocabulary_file must be specified and must not be empty.")
    with name_scope(name, "index_to_string"):
        init = TextFileInitializer(vocabulary_file, dtypes.int64, key_column_index, dtypes.string, value_column_index,
                                   vocab_size=vocab_size, delimiter=delimiter)
        return StaticHashTable(init, default_value, name=name)
