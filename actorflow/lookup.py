"""af.lookup: tf.compat.v1.lookup's tables and initializers (graph/ops/lookup_ops.py).

TF 2.21's tf.compat.v1 has no index_table_from_tensor / index_table_from_file /
index_to_string_table_from_tensor: they were tf.contrib.lookup's, and are af.contrib.lookup's.
"""
from __future__ import annotations

from actorflow.graph.ops.lookup_ops import (
                                            KeyValueTensorInitializer,
                                            StaticHashTable,
                                            StaticVocabularyTable,
                                            TextFileIndex,
                                            TextFileInitializer,
)

__all__ = ["KeyValueTensorInitializer", "StaticHashTable", "StaticVocabularyTable", "TextFileIndex",
           "TextFileInitializer"]
