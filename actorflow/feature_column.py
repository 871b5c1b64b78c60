"""af.feature_column: how raw features become model inputs (tf.feature_column, TF 1.15's v1 columns).

A column names a feature and says how to turn it into a dense tensor (numeric, bucketized,
indicator and embedding columns, for `input_layer`) or into category ids (the categorical columns,
for `indicator_column`, `embedding_column` and `linear_model`). Features are dense tensors here: a
categorical feature of shape [batch] or [batch, k] holds k values per example, with '' (strings) or
-1 (integers) as missing values, as TF treats the dense inputs it converts to sparse. SparseTensor
features are not supported.

Differs from TF: `crossed_column` hashes the joined string of the crossed values, so its bucket ids
(never its semantics) differ from TF's FingerprintCat64.
"""
from __future__ import annotations

import math

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor
from actorflow.graph.ops import array_ops, math_ops, string_ops
from actorflow.graph.ops.constant import constant
from actorflow.graph.ops.lookup_ops import KeyValueTensorInitializer, StaticHashTable, StaticVocabularyTable
from actorflow.graph.variable_scope import get_variable, variable_scope

__all__ = ["numeric_column", "bucketized_column", "categorical_column_with_vocabulary_list",
           "categorical_column_with_identity", "categorical_column_with_hash_bucket", "crossed_column",
           "indicator_column", "embedding_column", "input_layer", "linear_model"]


def _feature(features, key) -> Tensor:
    if key not in features:
        raise ValueError(f"The feature {key!r} is not in features dictionary (keys: {sorted(features)}).")
    t = features[key]
    if not isinstance(t, Tensor):
        t = constant(np.asarray(t))
    return t


def _rows(t: Tensor) -> Tensor:
    """A categorical feature as [batch, k]."""
    if t.shape.ndims == 1:
        return array_ops.expand_dims(t, 1)
    if t.shape.ndims == 2:
        return t
    raise ValueError(f"categorical feature {t.name} must have rank 1 or 2, got shape {t.shape}")


# -- dense columns -----------------------------------------------------------------------------------------
class _DenseColumn:
    def _dense(self, features) -> Tensor:        # [batch, variable_shape]
        raise NotImplementedError

    @property
    def _variable_size(self) -> int:
        raise NotImplementedError


class _CategoricalColumn:
    num_buckets: int

    def _ids(self, features) -> Tensor:          # int64 [batch, k], -1 where missing or invalid
        raise NotImplementedError


class NumericColumn(_DenseColumn):
    """See numeric_column."""

    def __init__(self, key, shape, default_value, dtype, normalizer_fn):
        self.key, self.shape, self.default_value, self.dtype, self.normalizer_fn = key, shape, default_value, dtype, \
            normalizer_fn

    @property
    def name(self):
        return self.key

    @property
    def _variable_size(self):
        return int(np.prod(self.shape))

    def _raw(self, features):
        t = math_ops.cast(_feature(features, self.key), self.dtype)
        if self.normalizer_fn is not None:
            t = self.normalizer_fn(t)
        return t

    def _dense(self, features):
        return array_ops.reshape(math_ops.cast(self._raw(features), dtypes.float32), [-1, self._variable_size])

    def __repr__(self):
        return f"NumericColumn(key={self.key!r}, shape={self.shape})"


def numeric_column(key, shape=(1,), default_value=None, dtype=dtypes.float32, normalizer_fn=None):
    """A real-valued feature of `shape` per example (tf.feature_column.numeric_column). `default_value`
    is accepted for parse specs; dense features here have no missing values."""
    if not isinstance(key, str):
        raise ValueError(f"key must be a string. Given: {key!r}")
    shape = (shape,) if isinstance(shape, int) else tuple(int(d) for d in shape)
    if any(d < 1 for d in shape):
        raise ValueError(f"shape dimensions must be greater than 0. shape: {shape}, key: {key}")
    dtype = dtypes.as_dtype(dtype)
    if not (dtype.is_floating or dtype.is_integer):
        raise ValueError(f"dtype must be convertible to float. dtype: {dtype}, key: {key}")
    if normalizer_fn is not None and not callable(normalizer_fn):
        raise TypeError(f"normalizer_fn must be a callable. Given: {normalizer_fn!r}")
    return NumericColumn(key, shape, default_value, dtype, normalizer_fn)


class BucketizedColumn(_DenseColumn, _CategoricalColumn):
    """See bucketized_column."""

    def __init__(self, source_column, boundaries):
        self.source_column, self.boundaries = source_column, tuple(float(b) for b in boundaries)

    @property
    def name(self):
        return f"{self.source_column.name}_bucketized"

    @property
    def num_buckets(self):
        # Each element of the source column gets its own range of len(boundaries) + 1 buckets.
        return self.source_column._variable_size * (len(self.boundaries) + 1)

    @property
    def _variable_size(self):
        return self.num_buckets

    def _bucket(self, features):
        x = array_ops.reshape(math_ops.cast(self.source_column._raw(features), dtypes.float32),
                              [-1, self.source_column._variable_size, 1])
        b = constant(np.asarray(self.boundaries, np.float32).reshape(1, 1, -1))
        return math_ops.reduce_sum(math_ops.cast(math_ops.greater_equal(x, b), dtypes.int64), axis=2)  # [batch, n]

    def _ids(self, features):
        n = self.source_column._variable_size
        offsets = constant(np.arange(n, dtype=np.int64).reshape(1, -1) * (len(self.boundaries) + 1))
        return self._bucket(features) + offsets

    def _dense(self, features):
        onehot = array_ops.one_hot(self._bucket(features), len(self.boundaries) + 1, dtype=dtypes.float32)
        return array_ops.reshape(onehot, [-1, self.num_buckets])

    def __repr__(self):
        return f"BucketizedColumn({self.source_column!r}, boundaries={self.boundaries})"


def bucketized_column(source_column, boundaries):
    """Buckets a numeric column by `boundaries` (sorted): bucket i holds [b[i-1], b[i])
    (tf.feature_column.bucketized_column). Dense as one-hot; categorical as bucket ids."""
    if not isinstance(source_column, NumericColumn):
        raise ValueError(f"source_column must be a column generated with numeric_column(). Given: {source_column!r}")
    if not isinstance(boundaries, (list, tuple)) or not boundaries:
        raise ValueError("boundaries must be a sorted list.")
    if any(a >= b for a, b in zip(boundaries, boundaries[1:])):
        raise ValueError("boundaries must be a sorted list.")
    return BucketizedColumn(source_column, boundaries)


# -- categorical columns -----------------------------------------------------------------------------------
def _missing(t: Tensor) -> Tensor:
    if t.dtype == dtypes.string:
        return math_ops.equal(t, "")
    return math_ops.less(t, 0) if t.dtype.is_integer else math_ops.not_equal(t, t)


def _mask_ids(ids: Tensor, invalid: Tensor) -> Tensor:
    return math_ops.where(invalid, array_ops.fill(array_ops.shape(ids), np.int64(-1)), ids)


class VocabularyListCategoricalColumn(_CategoricalColumn):
    """See categorical_column_with_vocabulary_list."""

    def __init__(self, key, vocabulary_list, dtype, default_value, num_oov_buckets):
        self.key, self.vocabulary_list, self.dtype = key, tuple(vocabulary_list), dtype
        self.default_value, self.num_oov_buckets = default_value, num_oov_buckets

    name = property(lambda self: self.key)
    num_buckets = property(lambda self: len(self.vocabulary_list) + self.num_oov_buckets)

    def _ids(self, features):
        x = _rows(_feature(features, self.key))
        if x.dtype != self.dtype and not (x.dtype.is_integer and self.dtype.is_integer):
            raise ValueError(f"Column dtype and SparseTensors dtype must be compatible. key: {self.key}, "
                             f"column dtype: {self.dtype}, tensor dtype: {x.dtype}")
        if self.dtype.is_integer:
            x = math_ops.cast(x, dtypes.int64)
        init = KeyValueTensorInitializer(constant(np.asarray(self.vocabulary_list, dtype=object if
                                                             self.dtype == dtypes.string else np.int64)),
                                         constant(np.arange(len(self.vocabulary_list), dtype=np.int64)))
        if self.num_oov_buckets:
            table = StaticVocabularyTable(init, self.num_oov_buckets)
        else:
            table = StaticHashTable(init, self.default_value)
        return _mask_ids(table.lookup(x), _missing(x))

    def __repr__(self):
        return f"VocabularyListCategoricalColumn(key={self.key!r}, vocabulary_list={self.vocabulary_list})"


def categorical_column_with_vocabulary_list(key, vocabulary_list, dtype=None, default_value=-1, num_oov_buckets=0):
    """Ids by position in `vocabulary_list`; values outside it get `default_value` (-1: dropped) or
    one of `num_oov_buckets` hash buckets after the vocabulary
    (tf.feature_column.categorical_column_with_vocabulary_list)."""
    if vocabulary_list is None or len(vocabulary_list) < 1:
        raise ValueError(f"vocabulary_list {vocabulary_list} must be non-empty, column_name: {key}")
    if len(set(vocabulary_list)) != len(vocabulary_list):
        raise ValueError(f"Duplicate keys in vocabulary_list {vocabulary_list}, column_name: {key}")
    if num_oov_buckets < 0:
        raise ValueError(f"Invalid num_oov_buckets {num_oov_buckets} in {key}.")
    if default_value != -1 and num_oov_buckets:
        raise ValueError(f"Can't specify both default_value {default_value} and num_oov_buckets {num_oov_buckets}.")
    inferred = dtypes.string if isinstance(vocabulary_list[0], (str, bytes)) else dtypes.int64
    if dtype is None:
        dtype = inferred
    dtype = dtypes.as_dtype(dtype)
    if (dtype == dtypes.string) != (inferred == dtypes.string):
        raise ValueError(f"dtype {dtype} and vocabulary dtype {inferred} do not match, column_name: {key}")
    return VocabularyListCategoricalColumn(key, vocabulary_list, dtype, default_value, num_oov_buckets)


class IdentityCategoricalColumn(_CategoricalColumn):
    """See categorical_column_with_identity."""

    def __init__(self, key, num_buckets, default_value):
        self.key, self.num_buckets, self.default_value = key, num_buckets, default_value

    name = property(lambda self: self.key)

    def _ids(self, features):
        x = _rows(_feature(features, self.key))
        if not x.dtype.is_integer:
            raise ValueError(f"Invalid input, not integer. key: {self.key} dtype: {x.dtype}")
        x = math_ops.cast(x, dtypes.int64)
        out_of_range = math_ops.greater_equal(x, self.num_buckets)
        if self.default_value is None:
            from actorflow.graph.graph import control_dependencies
            from actorflow.graph.ops.check_ops import assert_less
            from actorflow.graph.ops.constant import identity
            with control_dependencies([assert_less(x, np.int64(self.num_buckets),
                                                   message=f"Bucket index for {self.key} is out of range: "
                                                           f"expected < {self.num_buckets}")]):
                x = identity(x)
            return x
        return math_ops.where(out_of_range, array_ops.fill(array_ops.shape(x), np.int64(self.default_value)), x)

    def __repr__(self):
        return f"IdentityCategoricalColumn(key={self.key!r}, num_buckets={self.num_buckets})"


def categorical_column_with_identity(key, num_buckets, default_value=None):
    """Integer features that are their own ids in [0, num_buckets); others get `default_value`, or
    fail at run time when it is None (tf.feature_column.categorical_column_with_identity)."""
    if num_buckets < 1:
        raise ValueError(f"Invalid num_buckets {num_buckets}. key: {key}")
    if default_value is not None and not 0 <= default_value < num_buckets:
        raise ValueError(f"Invalid default_value {default_value}. num_buckets: {num_buckets}, key: {key}")
    return IdentityCategoricalColumn(key, num_buckets, default_value)


class HashedCategoricalColumn(_CategoricalColumn):
    """See categorical_column_with_hash_bucket."""

    def __init__(self, key, hash_bucket_size, dtype):
        self.key, self.num_buckets, self.dtype = key, hash_bucket_size, dtype

    name = property(lambda self: self.key)
    hash_bucket_size = property(lambda self: self.num_buckets)

    def _ids(self, features):
        x = _rows(_feature(features, self.key))
        missing = _missing(x)
        s = x if x.dtype == dtypes.string else string_ops.as_string(x)
        ids = string_ops.string_to_hash_bucket_fast(s, self.num_buckets)
        return _mask_ids(math_ops.cast(ids, dtypes.int64), missing)

    def __repr__(self):
        return f"HashedCategoricalColumn(key={self.key!r}, hash_bucket_size={self.num_buckets})"


def categorical_column_with_hash_bucket(key, hash_bucket_size, dtype=dtypes.string):
    """Ids by Fingerprint64 of the value (integers: of their decimal string) mod `hash_bucket_size`
    (tf.feature_column.categorical_column_with_hash_bucket)."""
    if hash_bucket_size is None or hash_bucket_size < 1:
        raise ValueError(f"hash_bucket_size must be at least 1. hash_bucket_size: {hash_bucket_size}, key: {key}")
    dtype = dtypes.as_dtype(dtype)
    if dtype != dtypes.string and not dtype.is_integer:
        raise ValueError(f"dtype must be string or integer. dtype: {dtype}, column_name: {key}")
    return HashedCategoricalColumn(key, hash_bucket_size, dtype)


class CrossedColumn(_CategoricalColumn):
    """See crossed_column."""

    def __init__(self, keys, hash_bucket_size):
        self.keys, self.num_buckets = tuple(keys), hash_bucket_size

    @property
    def name(self):
        return "_X_".join(sorted(k if isinstance(k, str) else k.name for k in self.keys))

    def _strings(self, features, k):
        if isinstance(k, str):
            x = _rows(_feature(features, k))
            return (x if x.dtype == dtypes.string else string_ops.as_string(x)), _missing(x)
        ids = k._ids(features)
        return string_ops.as_string(ids), math_ops.less(ids, 0)

    def _ids(self, features):
        # The cartesian product of the crossed features' values, row by row: [batch, k1 * k2 * ...].
        parts = [self._strings(features, k) for k in self.keys]
        s, miss = parts[0]
        for t, m in parts[1:]:
            n1, n2 = array_ops.shape(s)[1], array_ops.shape(t)[1]
            s = array_ops.reshape(array_ops.tile(array_ops.expand_dims(s, 2), [1, 1, n2]), [-1, n1 * n2])
            miss = array_ops.reshape(array_ops.tile(array_ops.expand_dims(miss, 2), [1, 1, n2]), [-1, n1 * n2])
            t = array_ops.reshape(array_ops.tile(array_ops.expand_dims(t, 1), [1, n1, 1]), [-1, n1 * n2])
            m = array_ops.reshape(array_ops.tile(array_ops.expand_dims(m, 1), [1, n1, 1]), [-1, n1 * n2])
            s = string_ops.string_join([s, t], separator="_X_")
            miss = math_ops.logical_or(miss, m)
        ids = math_ops.cast(string_ops.string_to_hash_bucket_fast(s, self.num_buckets), dtypes.int64)
        return _mask_ids(ids, miss)

    def __repr__(self):
        return f"CrossedColumn({self.name!r}, hash_bucket_size={self.num_buckets})"


def crossed_column(keys, hash_bucket_size, hash_key=None):
    """Hashes the combinations of the values of `keys` (feature names or categorical columns, not
    hashed ones) into `hash_bucket_size` ids (tf.feature_column.crossed_column; bucket ids differ
    from TF's, see the module docstring)."""
    if not hash_bucket_size or hash_bucket_size < 1:
        raise ValueError(f"hash_bucket_size must be > 1. hash_bucket_size: {hash_bucket_size}")
    if not keys or len(keys) < 2:
        raise ValueError(f"keys must be a list with length > 1. Given: {keys}")
    for k in keys:
        if not isinstance(k, (str, _CategoricalColumn)):
            raise ValueError(f"Unsupported key type. All keys must be either string, or categorical column. "
                             f"Given: {k!r}")
        if isinstance(k, HashedCategoricalColumn):
            raise ValueError("categorical_column_with_hash_bucket is not supported for crossing. Hashing before "
                             f"crossing will increase probability of collision. Instead, use the feature name as a "
                             f"string. Given: {k!r}")
    return CrossedColumn(keys, hash_bucket_size)


# -- dense views of categorical columns ---------------------------------------------------------------------
class IndicatorColumn(_DenseColumn):
    """See indicator_column."""

    def __init__(self, categorical_column):
        self.categorical_column = categorical_column

    name = property(lambda self: f"{self.categorical_column.name}_indicator")
    _variable_size = property(lambda self: self.categorical_column.num_buckets)

    def _dense(self, features):
        ids = self.categorical_column._ids(features)
        return math_ops.reduce_sum(array_ops.one_hot(ids, self.categorical_column.num_buckets, dtype=dtypes.float32),
                                   axis=1)

    def __repr__(self):
        return f"IndicatorColumn({self.categorical_column!r})"


def indicator_column(categorical_column):
    """A multi-hot dense view of a categorical column: count of each id per example
    (tf.feature_column.indicator_column)."""
    if not isinstance(categorical_column, _CategoricalColumn):
        raise ValueError(f"Unsupported input type. Input must be a CategoricalColumn. Given: {categorical_column!r}")
    return IndicatorColumn(categorical_column)


class EmbeddingColumn(_DenseColumn):
    """See embedding_column."""

    def __init__(self, categorical_column, dimension, combiner, initializer, trainable, max_norm):
        self.categorical_column, self.dimension, self.combiner = categorical_column, dimension, combiner
        self.initializer, self.trainable, self.max_norm = initializer, trainable, max_norm

    name = property(lambda self: f"{self.categorical_column.name}_embedding")
    _variable_size = property(lambda self: self.dimension)

    def _dense(self, features):
        from actorflow.graph.initializers import truncated_normal_initializer
        init = self.initializer or truncated_normal_initializer(mean=0.0, stddev=1 / math.sqrt(self.dimension))
        w = get_variable("embedding_weights", [self.categorical_column.num_buckets, self.dimension],
                         dtype=dtypes.float32, initializer=init, trainable=self.trainable)
        return _combine(w, self.categorical_column._ids(features), self.combiner, self.max_norm)

    def __repr__(self):
        return f"EmbeddingColumn({self.categorical_column!r}, dimension={self.dimension}, combiner={self.combiner!r})"


def _combine(weights, ids, combiner, max_norm=None):
    """The rows of `weights` for `ids` [batch, k] (ids < 0 skipped), combined per example by
    'sum', 'mean' or 'sqrtn' (TF's safe_embedding_lookup_sparse); an example with no ids gets zeros."""
    valid = math_ops.cast(math_ops.greater_equal(ids, 0), dtypes.float32)                # [b, k]
    rows = array_ops.gather(weights, math_ops.maximum(ids, np.int64(0)))                  # [b, k, d]
    if max_norm is not None:
        norm = math_ops.sqrt(math_ops.reduce_sum(math_ops.square(rows), axis=2, keepdims=True))
        rows = rows * (max_norm / math_ops.maximum(norm, max_norm))
    total = math_ops.reduce_sum(rows * array_ops.expand_dims(valid, 2), axis=1)          # [b, d]
    if combiner == "sum":
        return total
    count = math_ops.maximum(math_ops.reduce_sum(valid, axis=1, keepdims=True), 1.0)
    if combiner == "mean":
        return total / count
    return total / math_ops.sqrt(count)


def embedding_column(categorical_column, dimension, combiner="mean", initializer=None, ckpt_to_load_from=None,
                     tensor_name_in_ckpt=None, max_norm=None, trainable=True):
    """A dense, learned `dimension`-vector per id of a categorical column, the ids of an example
    combined by `combiner` (tf.feature_column.embedding_column). The variable is
    `<scope>/<column>_embedding/embedding_weights`."""
    if dimension is None or dimension < 1:
        raise ValueError(f"Invalid dimension {dimension}.")
    if (ckpt_to_load_from is None) != (tensor_name_in_ckpt is None):
        raise ValueError("Must specify both `ckpt_to_load_from` and `tensor_name_in_ckpt` or none of them.")
    if ckpt_to_load_from is not None:
        raise NotImplementedError("embedding_column: ckpt_to_load_from is not supported; use warm_start_from")
    if initializer is not None and not callable(initializer):
        raise ValueError("initializer must be callable if specified. ")
    if combiner not in ("mean", "sqrtn", "sum"):
        raise ValueError(f"combiner must be one of 'mean', 'sqrtn', 'sum', given: {combiner!r}")
    if not isinstance(categorical_column, _CategoricalColumn):
        raise ValueError(f"Unsupported input type. Input must be a CategoricalColumn. Given: {categorical_column!r}")
    return EmbeddingColumn(categorical_column, dimension, combiner, initializer, trainable, max_norm)


# -- layers ------------------------------------------------------------------------------------------------
def _check_columns(feature_columns, kind, what):
    if isinstance(feature_columns, (_DenseColumn, _CategoricalColumn)):
        feature_columns = [feature_columns]
    feature_columns = list(feature_columns or [])
    if not feature_columns:
        raise ValueError("feature_columns must not be empty.")
    for c in feature_columns:
        if not isinstance(c, kind):
            raise ValueError(f"Items of feature_columns must be a {what}. Given (type {type(c).__name__}): {c!r}.")
    names = [c.name for c in feature_columns]
    if len(set(names)) != len(names):
        raise ValueError(f"Duplicate feature column name found: {names}")
    return sorted(feature_columns, key=lambda c: c.name)


def input_layer(features, feature_columns, weight_collections=None, trainable=True, cols_to_vars=None):
    """The dense input of a model: each column's dense tensor [batch, n], in the order of the columns'
    names, concatenated along axis 1 (tf.compat.v1.feature_column.input_layer). Variables live under
    `input_layer/<column name>/`. Categorical columns must be wrapped (indicator or embedding)."""
    columns = _check_columns(feature_columns, _DenseColumn,
                             "_DenseColumn. You can wrap a categorical column with an embedding_column or "
                             "indicator_column")
    outs = []
    with variable_scope(None, default_name="input_layer"):
        for c in columns:
            with variable_scope(None, default_name=c.name):
                outs.append(c._dense(features))
    return outs[0] if len(outs) == 1 else array_ops.concat(outs, axis=1)


def linear_model(features, feature_columns, units=1, sparse_combiner="sum", weight_collections=None,
                 trainable=True, cols_to_vars=None):
    """A linear prediction [batch, units]: dense columns times their weights, categorical columns'
    weights for their ids combined by `sparse_combiner`, plus a bias
    (tf.compat.v1.feature_column.linear_model). Variables: `linear_model/<column>/weights` and
    `linear_model/bias_weights`."""
    columns = _check_columns(feature_columns, (_DenseColumn, _CategoricalColumn), "_FeatureColumn")
    from actorflow.graph.initializers import zeros_initializer
    total = None
    with variable_scope(None, default_name="linear_model"):
        for c in columns:
            with variable_scope(None, default_name=c.name):
                if isinstance(c, _CategoricalColumn):
                    w = get_variable("weights", [c.num_buckets, units], initializer=zeros_initializer(),
                                     trainable=trainable)
                    part = _combine(w, c._ids(features), sparse_combiner)
                else:
                    w = get_variable("weights", [c._variable_size, units], initializer=zeros_initializer(),
                                     trainable=trainable)
                    part = math_ops.matmul(c._dense(features), w)
                if cols_to_vars is not None:
                    cols_to_vars[c] = [w]
            total = part if total is None else total + part
        bias = get_variable("bias_weights", [units], initializer=zeros_initializer(), trainable=trainable)
        if cols_to_vars is not None:
            cols_to_vars["bias"] = [bias]
    return total + bias
