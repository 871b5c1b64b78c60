"""Lookup tables (tf.lookup in tf.compat.v1; tf.contrib.lookup in TF 1.x): StaticHashTable,
StaticVocabularyTable, and their initializers from tensors or text files.

A HashTableV2 op creates a table resource in the task of its device (actors/table.py); the other
ops take it as a reference input and run there, serialized by that resource's actor, as queue ops
do. A table is filled once, by its initializer op (InitializeTableV2 from tensors,
InitializeTableFromTextFileV2 from a file), which is added to the TABLE_INITIALIZERS collection
that `tables_initializer()` groups. A lookup or size before that fails with TF's
FailedPreconditionError "Table not initialized.", naming the op.

StaticVocabularyTable is composed as TF composes it: a StaticHashTable with default -1, and keys
that miss go to `size + Fingerprint64(key) mod num_oov_buckets` (string_to_hash_bucket_fast, integer
keys through as_string), so that its ids equal TF's.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import GraphKeys, Tensor, add_to_collection, convert_to_tensor, get_collection, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["StaticHashTable", "StaticVocabularyTable", "KeyValueTensorInitializer", "TextFileInitializer",
           "TextFileIndex", "tables_initializer", "initialize_all_tables"]

_KEY_DTYPES = (dtypes.string, dtypes.int32, dtypes.int64)
_VALUE_DTYPES = (dtypes.string, dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64, dtypes.bool_)


def _infer_table(inputs, attrs):
    k, v = attrs["key_dtype"], attrs["value_dtype"]
    if k not in _KEY_DTYPES:
        raise InferenceError(f"HashTable keys must be string, int32 or int64, got {k.name}")
    if v not in _VALUE_DTYPES:
        raise InferenceError(f"HashTable values must be string, int32, int64, float32, float64 or bool, got {v.name}")
    return [(dtypes.resource, TensorShape([]))]


def _table(t, op):
    if t.op.op_def.resource != "table":
        raise InferenceError(f"{op}: input '{t.name}' must be a table handle, got the output of a {t.op.type} op")
    return t.op.attrs["key_dtype"], t.op.attrs["value_dtype"]


def _infer_init(inputs, attrs):
    kd, vd = _table(inputs[0], "InitializeTableV2")
    keys, values = inputs[1], inputs[2]
    if keys.dtype is not kd or values.dtype is not vd:
        raise InferenceError(f"InitializeTableV2: table '{inputs[0].op.name}' maps {kd.name} to {vd.name}, got keys "
                             f"of {keys.dtype.name} and values of {values.dtype.name}")
    if keys.shape.ndims not in (None, 1) or values.shape.ndims not in (None, 1):
        raise InferenceError(f"InitializeTableV2: keys and values must be vectors, got shapes {keys.shape} and "
                             f"{values.shape}")
    if not keys.shape.is_compatible_with(values.shape):
        raise InferenceError(f"InitializeTableV2: keys and values must have the same size, got {keys.shape} and "
                             f"{values.shape}")
    return []


def _infer_init_file(inputs, attrs):
    kd, vd = _table(inputs[0], "InitializeTableFromTextFileV2")
    f = inputs[1]
    if not f.dtype.is_string or f.shape.ndims not in (None, 0):
        raise InferenceError(f"InitializeTableFromTextFileV2: filename must be a scalar string, got {f.dtype.name} "
                             f"{f.shape}")
    ki, vi = int(attrs["key_index"]), int(attrs["value_index"])
    if ki < -2 or vi < -2:
        raise InferenceError(f"InitializeTableFromTextFileV2: key_index and value_index must be >= -2, got {ki} "
                             f"and {vi}")
    if ki == TextFileIndex.LINE_NUMBER and kd is not dtypes.int64:
        raise InferenceError(f"InitializeTableFromTextFileV2: keys from LINE_NUMBER must be int64, got {kd.name}")
    if vi == TextFileIndex.LINE_NUMBER and vd is not dtypes.int64:
        raise InferenceError(f"InitializeTableFromTextFileV2: values from LINE_NUMBER must be int64, got {vd.name}")
    if ki == TextFileIndex.WHOLE_LINE and kd is not dtypes.string:
        raise InferenceError(f"InitializeTableFromTextFileV2: keys from WHOLE_LINE must be strings, got {kd.name}")
    if vi == TextFileIndex.WHOLE_LINE and vd is not dtypes.string:
        raise InferenceError(f"InitializeTableFromTextFileV2: values from WHOLE_LINE must be strings, got {vd.name}")
    return []


def _infer_find(inputs, attrs):
    kd, vd = _table(inputs[0], "LookupTableFindV2")
    keys, default = inputs[1], inputs[2]
    if keys.dtype is not kd:
        raise InferenceError(f"LookupTableFindV2: table '{inputs[0].op.name}' has {kd.name} keys, got {keys.dtype.name} "
                             f"('{keys.name}')")
    if default.dtype is not vd:
        raise InferenceError(f"LookupTableFindV2: table '{inputs[0].op.name}' has {vd.name} values, got a default of "
                             f"{default.dtype.name}")
    if default.shape.ndims not in (None, 0):
        raise InferenceError(f"LookupTableFindV2: default_value must be a scalar, got shape {default.shape}")
    return [(vd, keys.shape)]


def _infer_size(inputs, attrs):
    _table(inputs[0], "LookupTableSizeV2")
    return [(dtypes.int64, TensorShape([]))]


HashTableV2 = define_op("HashTableV2", _infer_table, stateful=True, resource="table", actor="handle")
InitializeTableV2 = define_op("InitializeTableV2", _infer_init, ref_inputs=(0,), actor="resource", stateful=True)
InitializeTableFromTextFileV2 = define_op("InitializeTableFromTextFileV2", _infer_init_file, ref_inputs=(0,),
                                          actor="resource", stateful=True)
LookupTableFindV2 = define_op("LookupTableFindV2", _infer_find, ref_inputs=(0,), actor="resource", stateful=True)
LookupTableSizeV2 = define_op("LookupTableSizeV2", _infer_size, ref_inputs=(0,), actor="resource", stateful=True)


class TextFileIndex:
    """Where a text file initializer takes keys or values from (tf.lookup.TextFileIndex)."""
    WHOLE_LINE = -2
    LINE_NUMBER = -1


class KeyValueTensorInitializer:
    """Fills a table from a vector of keys and one of values (tf.lookup.KeyValueTensorInitializer)."""

    def __init__(self, keys, values, key_dtype=None, value_dtype=None, name=None):
        with name_scope(name, "key_value_init"):
            self._keys = keys if isinstance(keys, Tensor) else convert_to_tensor(keys, dtype=key_dtype, name="keys")
            self._values = values if isinstance(values, Tensor) else \
                convert_to_tensor(values, dtype=value_dtype, name="values")
        for t, want, what in ((self._keys, key_dtype, "keys"), (self._values, value_dtype, "values")):
            if want is not None and t.dtype is not dtypes.as_dtype(want):
                raise TypeError(f"KeyValueTensorInitializer: {what} '{t.name}' are {t.dtype.name}, expected "
                                f"{dtypes.as_dtype(want).name}")
        self._name = name or "key_value_init"

    @property
    def key_dtype(self):
        return self._keys.dtype

    @property
    def value_dtype(self):
        return self._values.dtype

    def initialize(self, table):
        """The op that fills `table` (tf.lookup.KeyValueTensorInitializer.initialize)."""
        with name_scope(self._name, values=(table.resource_handle, self._keys, self._values)):
            op = InitializeTableV2(table.resource_handle, self._keys, self._values, name="table_init")
        add_to_collection(GraphKeys.TABLE_INITIALIZERS, op)
        return op


class TextFileInitializer:
    """Fills a table from a text file, one entry per line (tf.lookup.TextFileInitializer).

    `key_index`/`value_index`: a column (lines split at `delimiter`), TextFileIndex.WHOLE_LINE
    or TextFileIndex.LINE_NUMBER (counted from 0, plus `value_index_offset` for values). Only
    the first `vocab_size` lines are read when it is given; a shorter file is an error, as is
    an empty line or one with too few columns.
    """

    def __init__(self, filename, key_dtype, key_index, value_dtype, value_index, vocab_size=None, delimiter="\t",
                 name=None, value_index_offset=0):
        key_dtype, value_dtype = dtypes.as_dtype(key_dtype), dtypes.as_dtype(value_dtype)
        if key_index < -2:
            raise ValueError(f"`key_index` should be >= -2, received: {key_index}.")
        if key_index == TextFileIndex.LINE_NUMBER and key_dtype is not dtypes.int64:
            raise ValueError("`key_dtype` must be int64 if `key_index` is -1 (LINE_NUMBER), received: "
                             f"{key_dtype.name}")
        if key_index == TextFileIndex.WHOLE_LINE and not (key_dtype.is_integer or key_dtype is dtypes.string):
            raise ValueError("`key_dtype` should be either integer or string for `key_index` -2 (WHOLE_LINE), "
                             f"received: {key_dtype.name}")
        if value_index < -2:
            raise ValueError(f"`value_index` should be >= -2, received: {value_index}.")
        if value_index == TextFileIndex.LINE_NUMBER and value_dtype is not dtypes.int64:
            raise ValueError("`value_dtype` must be int64 for `value_index` -1 (LINE_NUMBER), received: "
                             f"{value_dtype.name}")
        if value_index == TextFileIndex.WHOLE_LINE and value_dtype is not dtypes.string:
            raise ValueError("`value_dtype` must be string for `value_index` -2 (WHOLE_LINE), received: "
                             f"{value_dtype.name}")
        if vocab_size is not None and vocab_size <= 0:
            raise ValueError(f"`vocab_size` must be > 0, received: {vocab_size}")
        self._filename = filename
        self.key_dtype, self.value_dtype = key_dtype, value_dtype
        self._key_index, self._value_index = int(key_index), int(value_index)
        self._vocab_size = vocab_size
        self._delimiter = delimiter
        self._offset = int(value_index_offset)
        self._name = name or "text_file_init"

    def initialize(self, table):
        """The op that fills `table` from the file (tf.lookup.TextFileInitializer.initialize)."""
        with name_scope(self._name, values=(table.resource_handle,)):
            f = self._filename if isinstance(self._filename, Tensor) else \
                convert_to_tensor(self._filename, dtype=dtypes.string, name="asset_filepath")
            op = InitializeTableFromTextFileV2(table.resource_handle, f, key_index=self._key_index,
                                               value_index=self._value_index,
                                               vocab_size=-1 if self._vocab_size is None else int(self._vocab_size),
                                               delimiter=str(self._delimiter), offset=self._offset,
                                               name="table_init")
        add_to_collection(GraphKeys.TABLE_INITIALIZERS, op)
        if not isinstance(self._filename, Tensor):
            add_to_collection("asset_filepaths", f)
        return op


class StaticHashTable:
    """An immutable hash table filled once by its initializer (tf.compat.v1.lookup.StaticHashTable).

    Keys are string, int32 or int64; values string, int32, int64, float32, float64 or bool. Keys
    that are absent map to `default_value`. Run `af.tables_initializer()` (or `table.initializer`)
    before the first lookup.
    """

    def __init__(self, initializer, default_value, name=None, experimental_is_anonymous=False):
        self._key_dtype, self._value_dtype = initializer.key_dtype, initializer.value_dtype
        with name_scope(name, "hash_table") as scope:
            self._handle = HashTableV2(key_dtype=self._key_dtype, value_dtype=self._value_dtype, shared_name="",
                                       container="", use_node_name_sharing=False, name="hash_table")
            self._default_value = default_value if isinstance(default_value, Tensor) else \
                convert_to_tensor(default_value, dtype=self._value_dtype, name="Const")
            if self._default_value.dtype is not self._value_dtype:
                raise TypeError(f"StaticHashTable: default_value is {self._default_value.dtype.name}, the table's "
                                f"values are {self._value_dtype.name}")
            self._init_op = initializer.initialize(self)
        self._name = (name or scope.rstrip("/").split("/")[-1]) if scope else (name or "hash_table")
        self._initializer = initializer

    @property
    def name(self):
        return self._name

    @property
    def key_dtype(self):
        return self._key_dtype

    @property
    def value_dtype(self):
        return self._value_dtype

    @property
    def default_value(self):
        return self._default_value

    @property
    def resource_handle(self):
        return self._handle

    @property
    def initializer(self):
        """The op that fills the table."""
        return self._init_op

    init = initializer

    def size(self, name=None):
        """The number of entries, int64 (tf.lookup.StaticHashTable.size)."""
        with name_scope(name, f"{self._name}_Size"):
            return LookupTableSizeV2(self._handle, name="LookupTableSizeV2")

    def lookup(self, keys, name=None):
        """The value of each key, `default_value` where it is absent; a SparseTensor of keys gives one
        of values (tf.lookup.StaticHashTable.lookup)."""
        from actorflow.graph.sparse_tensor import SparseTensor
        sparse = keys if isinstance(keys, SparseTensor) else None
        k = sparse.values if sparse is not None else keys
        if not isinstance(k, Tensor):
            k = convert_to_tensor(k, dtype=self._key_dtype, name="keys")
        if k.dtype is not self._key_dtype:
            raise TypeError(f"Dtype of argument `keys` must be {self._key_dtype.name}, received: {k.dtype.name}")
        with name_scope(name, f"{self._name}_Lookup"):
            out = LookupTableFindV2(self._handle, k, self._default_value, name="LookupTableFindV2")
        return SparseTensor(sparse.indices, out, sparse.dense_shape) if sparse is not None else out


class StaticVocabularyTable:
    """Maps keys to ids, out-of-vocabulary keys to `num_oov_buckets` hash buckets after the
    vocabulary (tf.compat.v1.lookup.StaticVocabularyTable): the same ids as TF's."""

    def __init__(self, initializer, num_oov_buckets, lookup_key_dtype=None, name=None,
                 experimental_is_anonymous=False):
        if num_oov_buckets <= 0:
            raise ValueError("`num_oov_buckets` must be > 0; use StaticHashTable.")
        if initializer is not None:
            if lookup_key_dtype is None:
                lookup_key_dtype = initializer.key_dtype
            lookup_key_dtype = dtypes.as_dtype(lookup_key_dtype)
            if initializer.key_dtype not in (dtypes.int64, dtypes.string):
                raise TypeError(f"Invalid `key_dtype`, expected one of (int64, string), but got "
                                f"{initializer.key_dtype.name}.")
            if initializer.key_dtype.is_integer != lookup_key_dtype.is_integer:
                raise TypeError(f"Invalid `key_dtype`, expected {'integer' if lookup_key_dtype.is_integer else 'non-integer'}"
                                f" but got {initializer.key_dtype.name}")
            if initializer.value_dtype is not dtypes.int64:
                raise TypeError(f"Invalid `value_dtype`, expected int64 but got {initializer.value_dtype.name}.")
            self._table = StaticHashTable(initializer, default_value=-1, name=name)
            self._name = self._table.name
        else:
            lookup_key_dtype = dtypes.string
            self._table = None
            self._name = name or "hash_bucket"
        if not (lookup_key_dtype.is_integer or lookup_key_dtype is dtypes.string):
            raise TypeError(f"Invalid `key_dtype`, expected integer or string, got {lookup_key_dtype.name}")
        self._key_dtype = lookup_key_dtype
        self._num_oov_buckets = int(num_oov_buckets)

    @property
    def name(self):
        return self._name

    @property
    def key_dtype(self):
        return self._key_dtype

    @property
    def value_dtype(self):
        return dtypes.int64

    @property
    def resource_handle(self):
        return None if self._table is None else self._table.resource_handle

    @property
    def initializer(self):
        from actorflow.graph.ops.constant import no_op
        return self._table.initializer if self._table is not None else no_op(name="init")

    def size(self, name=None):
        """Vocabulary size plus num_oov_buckets, int64."""
        from actorflow.graph.ops.math_ops import add
        with name_scope(name, f"{self._name}_Size"):
            if self._table is None:
                return convert_to_tensor(self._num_oov_buckets, dtype=dtypes.int64)
            return add(self._table.size(), convert_to_tensor(self._num_oov_buckets, dtype=dtypes.int64))

    def lookup(self, keys, name=None):
        """The id of each key: its vocabulary index, else vocab size + its hash bucket."""
        from actorflow.graph.ops import math_ops
        from actorflow.graph.ops.string_ops import as_string, string_to_hash_bucket_fast
        from actorflow.graph.sparse_tensor import SparseTensor
        sparse = keys if isinstance(keys, SparseTensor) else None
        values = sparse.values if sparse is not None else keys
        if not isinstance(values, Tensor):
            values = convert_to_tensor(values, dtype=self._key_dtype, name="keys")
        if values.dtype is not self._key_dtype:
            raise TypeError(f"Dtype of argument `keys` must be {self._key_dtype.name}, received: {values.dtype.name}")
        if self._table is not None and self._table.key_dtype is dtypes.int64 and values.dtype is not dtypes.int64:
            values = math_ops.cast(values, dtypes.int64)
        with name_scope(name, f"{self._name}_Lookup"):
            text = values if values.dtype is dtypes.string else as_string(values)
            buckets = string_to_hash_bucket_fast(text, num_buckets=self._num_oov_buckets, name="hash_bucket")
            if self._table is not None:
                ids = self._table.lookup(values)
                buckets = math_ops.add(buckets, self._table.size())
                ids = math_ops.where_v2(math_ops.not_equal(ids, self._table.default_value), ids, buckets)
            else:
                ids = buckets
        return SparseTensor(sparse.indices, ids, sparse.dense_shape) if sparse is not None else ids


def tables_initializer(name="init_all_tables"):
    """One op that runs every table initializer of the graph (tf.compat.v1.tables_initializer);
    a no-op when there is none."""
    from actorflow.graph.ops.constant import group, no_op
    inits = get_collection(GraphKeys.TABLE_INITIALIZERS)
    return group(*inits, name=name) if inits else no_op(name=name)


def initialize_all_tables(name="init_all_tables"):
    """tf.compat.v1.initialize_all_tables: the deprecated name of tables_initializer."""
    return tables_initializer(name=name)
