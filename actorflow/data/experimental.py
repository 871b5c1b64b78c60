"""af.data.experimental: the names TF 1.x programs use from tf.data.experimental
(tf.compat.v1.data.experimental). Most are transformations for `Dataset.apply`, built from the
Dataset methods of the same names (data/dataset.py)."""
from __future__ import annotations

import numpy as np

from actorflow.data.dataset import AUTOTUNE, Dataset, _whole_dataset_op
from actorflow.data.optional import Optional, get_next_as_optional
from actorflow.data.options import (
    INFINITE_CARDINALITY,
    SHARD_HINT,
    UNKNOWN_CARDINALITY,
    AutoShardPolicy,
    AutotuneAlgorithm,
    AutotuneOptions,
    DistributeOptions,
    ExternalStatePolicy,
    OptimizationOptions,
    ThreadingOptions,
)
from actorflow.graph import dtypes, nest
from actorflow.graph import function as graph_function
from actorflow.graph.graph import Tensor, convert_to_tensor
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "AutoShardPolicy", "AutotuneOptions",
           "DistributeOptions", "OptimizationOptions", "ThreadingOptions", "cardinality", "assert_cardinality",
           "shuffle_and_repeat", "map_and_batch", "map_and_batch_with_legacy_function", "parallel_interleave",
           "unbatch", "scan", "group_by_window", "bucket_by_sequence_length", "take_while", "unique",
           "ignore_errors", "enumerate_dataset", "get_single_element", "choose_from_datasets",
           "sample_from_datasets", "Counter", "TFRecordWriter", "prefetch_to_device", "copy_to_device", "Reducer",
           "group_by_reducer", "RandomDataset", "Optional", "get_next_as_optional", "CsvDataset", "make_csv_dataset", "rejection_resample",
           "get_structure", "parse_example_dataset", "make_batched_features_dataset", "to_variant", "from_variant",
           "SHARD_HINT", "AutotuneAlgorithm", "ExternalStatePolicy", "from_list", "DatasetInitializer",
           "table_from_dataset", "index_table_from_dataset", "SqlDataset"]


def cardinality(dataset):
    """The number of elements of `dataset`, an int64 scalar tensor (tf.data.experimental.cardinality)."""
    return dataset.cardinality()


def assert_cardinality(expected_cardinality):
    """A transformation whose dataset fails (FailedPreconditionError, naming the dataset op) when
    its input has other than `expected_cardinality` elements, and whose cardinality is that
    number (tf.data.experimental.assert_cardinality)."""
    def apply(dataset):
        n = convert_to_tensor(expected_cardinality, dtype=dtypes.int64, name="expected_cardinality") \
            if not isinstance(expected_cardinality, Tensor) else expected_cardinality
        return Dataset._make("AssertCardinalityDataset", [dataset], [n], dataset._types, dataset._shapes)
    return apply


def shuffle_and_repeat(buffer_size, count=None, seed=None):
    """shuffle(buffer_size, seed).repeat(count) (tf.data.experimental.shuffle_and_repeat; TF's
    fused op gives the same elements as the two, and so does this)."""
    return lambda dataset: dataset.shuffle(buffer_size, seed).repeat(count)


def map_and_batch(map_func, batch_size, num_parallel_batches=None, drop_remainder=False, num_parallel_calls=None):
    """map(map_func) then batch(batch_size, drop_remainder) (tf.data.experimental.map_and_batch);
    `num_parallel_calls` (or `num_parallel_batches` times the batch size) maps concurrently."""
    if num_parallel_batches is not None and num_parallel_calls is not None:
        raise ValueError("map_and_batch: `num_parallel_batches` and `num_parallel_calls` are mutually exclusive")

    def apply(dataset):
        parallel = num_parallel_calls
        if num_parallel_batches is not None and isinstance(batch_size, (int, np.integer)):
            parallel = int(num_parallel_batches) * int(batch_size)
        return dataset.map(map_func, num_parallel_calls=parallel).batch(batch_size, drop_remainder=drop_remainder)
    return apply


map_and_batch_with_legacy_function = map_and_batch


def parallel_interleave(map_func, cycle_length, block_length=1, sloppy=False, buffer_output_elements=None,
                        prefetch_input_elements=None):
    """interleave(map_func, cycle_length, block_length) (tf.data.experimental.parallel_interleave):
    the deterministic order, which TF's also gives unless `sloppy`. The buffering arguments are
    accepted; the input datasets are read in turn."""
    return lambda dataset: dataset.interleave(map_func, cycle_length=cycle_length, block_length=block_length)


def unbatch():
    """Dataset.unbatch as a transformation (tf.data.experimental.unbatch)."""
    return lambda dataset: dataset.unbatch()


def scan(initial_state, scan_func):
    """Dataset.scan as a transformation (tf.data.experimental.scan)."""
    return lambda dataset: dataset.scan(initial_state, scan_func)


def group_by_window(key_func, reduce_func, window_size=None, window_size_func=None):
    """Dataset.group_by_window as a transformation (tf.data.experimental.group_by_window)."""
    return lambda dataset: dataset.group_by_window(key_func, reduce_func, window_size, window_size_func)


def bucket_by_sequence_length(element_length_func, bucket_boundaries, bucket_batch_sizes, padded_shapes=None,
                              padding_values=None, pad_to_bucket_boundary=False, no_padding=False,
                              drop_remainder=False):
    """Dataset.bucket_by_sequence_length as a transformation (tf.data.experimental.bucket_by_sequence_length)."""
    return lambda dataset: dataset.bucket_by_sequence_length(
        element_length_func, bucket_boundaries, bucket_batch_sizes, padded_shapes, padding_values,
        pad_to_bucket_boundary, no_padding, drop_remainder)


def take_while(predicate):
    """Dataset.take_while as a transformation (tf.data.experimental.take_while)."""
    return lambda dataset: dataset.take_while(predicate)


def unique():
    """Dataset.unique as a transformation (tf.data.experimental.unique)."""
    return lambda dataset: dataset.unique()


def ignore_errors(log_warning=False):
    """Dataset.ignore_errors as a transformation (tf.data.experimental.ignore_errors)."""
    return lambda dataset: dataset.ignore_errors(log_warning)


def enumerate_dataset(start=0):
    """Dataset.enumerate as a transformation (tf.data.experimental.enumerate_dataset)."""
    return lambda dataset: dataset.enumerate(start)


def get_single_element(dataset):
    """The only element of `dataset` as tensors (tf.data.experimental.get_single_element)."""
    if not isinstance(dataset, Dataset):
        raise TypeError(f"get_single_element: `dataset` must be a tf.data.Dataset, got {type(dataset).__name__}")
    return dataset.get_single_element()


def choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset=False):
    """Dataset.choose_from_datasets, with tf.compat.v1's default of going on past an empty input
    (tf.compat.v1.data.experimental.choose_from_datasets)."""
    return Dataset.choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset)


def sample_from_datasets(datasets, weights=None, seed=None, stop_on_empty_dataset=False):
    """Dataset.sample_from_datasets (tf.compat.v1.data.experimental.sample_from_datasets)."""
    return Dataset.sample_from_datasets(datasets, weights, seed, stop_on_empty_dataset)


def Counter(start=0, step=1, dtype=dtypes.int64):  # noqa: N802 - TF's name
    """start, start + step, ... without end (tf.data.experimental.Counter)."""
    return Dataset.counter(start, step, dtype)


def RandomDataset(seed=None, rerandomize_each_iteration=None):  # noqa: N802 - TF's name
    """Dataset.random (tf.data.experimental.RandomDataset): TF's numbers for the same seeds."""
    return Dataset.random(seed, rerandomize_each_iteration)


def copy_to_device(target_device, source_device="/cpu:0"):
    """The dataset unchanged (tf.data.experimental.copy_to_device). Differs from TF: input
    pipelines run on the host, and the consumers' Send/Recv move each element to its device."""
    if not isinstance(target_device, str):
        raise TypeError(f"copy_to_device: `target_device` must be a device string, got {target_device!r}")
    return lambda dataset: dataset


def prefetch_to_device(device, buffer_size=None):
    """copy_to_device(device) then prefetch(buffer_size, AUTOTUNE when None)
    (tf.data.experimental.prefetch_to_device); see copy_to_device."""
    copy = copy_to_device(device)
    return lambda dataset: copy(dataset).prefetch(AUTOTUNE if buffer_size is None else buffer_size)


class Reducer:
    """How group_by_reducer reduces a group: `init_func(key)` gives the initial state,
    `reduce_func(state, element)` the next, `finalize_func(state)` the output
    (tf.data.experimental.Reducer)."""

    def __init__(self, init_func, reduce_func, finalize_func):
        self._init_func = init_func
        self._reduce_func = reduce_func
        self._finalize_func = finalize_func

    @property
    def init_func(self):
        return self._init_func

    @property
    def reduce_func(self):
        return self._reduce_func

    @property
    def finalize_func(self):
        return self._finalize_func


def group_by_reducer(key_func, reducer):
    """Groups the elements by `key_func` (an int64 scalar) and reduces each group with `reducer`:
    one output per key, in key order, when the input ends (tf.data.experimental.group_by_reducer)."""
    from actorflow.data.dataset import _check_key, _converter, _types_of

    def apply(dataset):
        kf = dataset._trace(key_func, "group_by_reducer key_func")
        _check_key(kf, "group_by_reducer")
        init = graph_function.trace(reducer.init_func, dtypes.int64, TensorShape([]), name="init_func",
                                    convert=_converter("init_func"))
        state = init.structure
        rf, _, _ = dataset._trace_state(None, reducer.reduce_func, "group_by_reducer reduce_func", False,
                                        state_spec=(_types_of(state), nest.map_structure(lambda t: t.shape, state)))
        new_state = rf.structure
        ff = graph_function.trace(reducer.finalize_func, _types_of(new_state),
                                  nest.map_structure(lambda t: t.shape, new_state), name="finalize_func",
                                  convert=_converter("finalize_func"))
        out = ff.structure
        return Dataset._make("GroupByReducerDataset", [dataset], [], _types_of(out),
                             nest.map_structure(lambda t: t.shape, out), key_func=kf, init_func=init,
                             reduce_func=rf, finalize_func=ff)
    return apply


class TFRecordWriter:
    """Writes a dataset of scalar strings to a TFRecord file (tf.data.experimental.TFRecordWriter):
    `write(dataset)` returns the op that writes all of it, afresh each time it runs."""

    def __init__(self, filename, compression_type=None):
        from actorflow.tfrecord import TFRecordOptions
        self._filename = filename if isinstance(filename, Tensor) else convert_to_tensor(
            np.array(filename.encode() if isinstance(filename, str) else filename, dtype=object))
        kind = TFRecordOptions.get_compression_type_string(compression_type or "")
        self._compression = convert_to_tensor(np.array(kind.encode(), dtype=object))

    def write(self, dataset):
        """The op that writes `dataset`'s elements, scalar strings, as the file's records."""
        if not isinstance(dataset, Dataset):
            raise TypeError(f"TFRecordWriter.write: `dataset` must be a tf.data.Dataset, got "
                            f"{type(dataset).__name__}")
        if dataset._types is not dtypes.string or not TensorShape([]).is_compatible_with(dataset._shapes):
            raise TypeError(f"TFRecordWriter.write: `dataset` must produce scalar string elements, got "
                            f"{dataset._types} {dataset._shapes}")
        _, op = _whole_dataset_op(dataset, "DatasetToTFRecord", [self._filename, self._compression])
        return op


_CSV_TYPES = (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64, dtypes.string)


def _csv_default(d, i):
    """A CSV column's default as a tensor: empty (the column is required) for a dtype, else one value."""
    if isinstance(d, Tensor):
        t = d
    elif isinstance(d, dtypes.DType) or (isinstance(d, type) and d in (str, bytes)):
        dt = dtypes.string if d in (str, bytes) else d
        if dt not in _CSV_TYPES:
            raise TypeError(f"CsvDataset: record_defaults[{i}] has type {dt.name}; use float32, float64, int32, "
                            f"int64 or string")
        return convert_to_tensor(np.zeros([0], dtype=dt.np), dtype=dt, name="record_defaults")
    elif isinstance(d, (str, bytes)) or (isinstance(d, (list, tuple)) and d and isinstance(d[0], (str, bytes))):
        vals = d if isinstance(d, (list, tuple)) else [d]
        t = convert_to_tensor(np.array([v.encode() if isinstance(v, str) else v for v in vals], dtype=object))
    else:
        t = convert_to_tensor(d, name="record_defaults")
    if t.dtype not in _CSV_TYPES:
        raise TypeError(f"CsvDataset: record_defaults[{i}] has type {t.dtype.name}; use float32, float64, int32, "
                        f"int64 or string")
    if t.shape.ndims is not None and (t.shape.ndims > 1 or (t.shape.num_elements() or 0) > 1):
        raise ValueError(f"CsvDataset: record_defaults[{i}] must hold at most one value, got shape {t.shape}")
    return t


class CsvDataset(Dataset):
    """The records of CSV files, one tuple of scalars per line (tf.data.experimental.CsvDataset):
    `record_defaults` gives each column's dtype and default (a dtype alone: the column is
    required). RFC 4180 quoting when `use_quote_delim`; `na_value` and empty fields take the
    default; `header` skips each file's first line; `select_cols` (sorted indices) keeps only those
    columns. `filenames` is a string, a list of them or a string tensor (a dataset function's argument)."""

    def __init__(self, filenames, record_defaults, compression_type=None, buffer_size=None, header=False,
                 field_delim=",", use_quote_delim=True, na_value="", select_cols=None, exclude_cols=None):
        from actorflow.data.dataset import _file_names
        from actorflow.tfrecord import TFRecordOptions
        if isinstance(filenames, Tensor):
            if filenames.dtype is not dtypes.string or filenames.shape.ndims not in (0, 1, None):
                raise TypeError(f"CsvDataset: `filenames` must be a string scalar or vector, got {filenames!r}")
            names = filenames
        else:
            names = convert_to_tensor(np.array([f.encode() for f in _file_names(filenames, "CsvDataset")],
                                               dtype=object), name="filenames")
        if select_cols is not None and exclude_cols is not None:
            raise ValueError("CsvDataset: at most one of `select_cols` and `exclude_cols` can be specified")
        defaults = [_csv_default(d, i) for i, d in enumerate(record_defaults)]
        if not defaults:
            raise ValueError("CsvDataset: `record_defaults` must not be empty")
        for what, cols in (("select_cols", select_cols), ("exclude_cols", exclude_cols)):
            if cols is not None and (list(cols) != sorted(set(int(c) for c in cols)) or any(c < 0 for c in cols)):
                raise ValueError(f"CsvDataset: `{what}` must be sorted, distinct, non-negative column indices, "
                                 f"got {list(cols)}")
        if select_cols is not None and len(select_cols) != len(defaults):
            raise ValueError(f"CsvDataset: `select_cols` has {len(select_cols)} columns, `record_defaults` "
                             f"{len(defaults)}")
        if len(field_delim) != 1:
            raise ValueError(f"CsvDataset: `field_delim` must be one character, got {field_delim!r}")
        types = tuple(d.dtype for d in defaults)
        d = Dataset._make("CsvDataset", [], [names, *defaults], types, tuple(TensorShape([]) for _ in types),
                          compression_type=TFRecordOptions.get_compression_type_string(compression_type or ""),
                          header=bool(header), field_delim=str(field_delim), use_quote_delim=bool(use_quote_delim),
                          na_value=str(na_value), select_cols=tuple(int(c) for c in select_cols or ()),
                          exclude_cols=tuple(int(c) for c in exclude_cols or ()))
        super().__init__(d._variant, d._types, d._shapes)


def _csv_reader(path, compression, field_delim, use_quote_delim, encoding):
    import csv
    import gzip
    if compression == "GZIP":
        f = gzip.open(path, "rt", encoding=encoding, newline="")
    elif compression:
        raise ValueError(f"make_csv_dataset: `compression_type` {compression} is not supported for probing columns")
    else:
        f = open(path, encoding=encoding, newline="")  # noqa: SIM115 - closed by the caller
    return f, csv.reader(f, delimiter=field_delim, quoting=csv.QUOTE_MINIMAL if use_quote_delim else csv.QUOTE_NONE)


def _infer_csv_type(value, na_value, prev):
    """The least permissive of int32, int64, float32, float64, string that `value` fits and that
    keeps the column's earlier values valid (TF's _infer_type)."""
    if value in ("", na_value):
        return prev

    def fits_int(v, dt):
        try:
            return int(dt(v)) == int(np.int64(v))
        except (ValueError, OverflowError):
            return False

    def fits_float(v, dt):
        try:
            return dt(v) < np.inf
        except ValueError:
            return False
    order = [dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64, dtypes.string]
    checks = [lambda v: fits_int(v, np.int32), lambda v: fits_int(v, np.int64), lambda v: fits_float(v, np.float32),
              lambda v: fits_float(v, np.float64), lambda v: True]
    for i, (dt, ok) in enumerate(zip(order, checks)):
        if ok(value) and (prev is None or prev in order[:i + 1]):
            return dt
    return dtypes.string


def make_csv_dataset(file_pattern, batch_size, column_names=None, column_defaults=None, label_name=None,
                     select_columns=None, field_delim=",", use_quote_delim=True, na_value="", header=True,
                     num_epochs=None, shuffle=True, shuffle_buffer_size=10000, shuffle_seed=None,
                     prefetch_buffer_size=None, num_parallel_reads=None, sloppy=False, num_rows_for_inference=100,
                     compression_type=None, ignore_errors=False, encoding="utf-8"):
    """Batches of CSV records as (features dict[, label]) (tf.data.experimental.make_csv_dataset):
    TF's program: the matching files (shuffled with `shuffle_seed`), read by CsvDataset through
    an interleave, shuffled and repeated `num_epochs` times, batched (the remainder dropped when
    repeating forever) and made into dicts keyed by the column names (from the header unless
    given); column types are inferred from the first `num_rows_for_inference` rows unless
    `column_defaults` gives them."""
    import glob
    patterns = file_pattern if isinstance(file_pattern, list) else [file_pattern]
    if not patterns:
        raise ValueError("make_csv_dataset: `file_pattern` should not be empty")
    filenames = sorted(m for p in patterns for m in glob.glob(p))
    if not filenames:
        raise ValueError(f"make_csv_dataset: no files match `file_pattern` {file_pattern}")
    compression = compression_type or ""
    if column_names is None:
        if not header:
            raise ValueError("make_csv_dataset: expected `column_names` or `header` arguments; neither is provided")
        names = []
        for path in filenames:
            f, rows = _csv_reader(path, compression, field_delim, use_quote_delim, encoding)
            with f:
                first = next(rows, None)
            if first is None:
                raise ValueError(f"make_csv_dataset: failed when reading the header line of {path}. Is it an empty "
                                 f"file?")
            if names and first != names:
                raise ValueError(f"make_csv_dataset: all input CSV files should have the same column names in the "
                                 f"header row. File {path} has different column names")
            names = first
        column_names = names
    column_names = list(column_names)
    if len(column_names) != len(set(column_names)):
        dup = sorted({n for n in column_names if column_names.count(n) > 1})
        raise ValueError(f"make_csv_dataset: `column_names` or the CSV header row contains duplicate column names: "
                         f"{dup}")
    if select_columns is not None:
        index = {n: i for i, n in enumerate(column_names)}
        cols = []
        for v in select_columns:
            if isinstance(v, int):
                if not 0 <= v < len(column_names):
                    raise ValueError(f"make_csv_dataset: column index {v} in `select_columns` is out of range "
                                     f"[0, {len(column_names)})")
                cols.append(v)
            elif v not in index:
                raise ValueError(f"make_csv_dataset: column {v} in `select_columns` must be one of the columns: "
                                 f"{column_names}")
            else:
                cols.append(index[v])
        select_columns = sorted(set(cols))
        if len(select_columns) != len(cols):
            raise ValueError("make_csv_dataset: the `select_columns` argument contains duplicate columns")
    if column_defaults is None:
        use = select_columns if select_columns is not None else range(len(column_names))
        inferred = [None] * len(use)
        seen = 0
        for path in filenames:
            if num_rows_for_inference is not None and seen >= num_rows_for_inference:
                break
            f, rows = _csv_reader(path, compression, field_delim, use_quote_delim, encoding)
            with f:
                if header:
                    next(rows, None)
                for row in rows:
                    if num_rows_for_inference is not None and seen >= num_rows_for_inference:
                        break
                    if len(row) != len(column_names):
                        raise ValueError(f"make_csv_dataset: problem inferring types: a CSV row of {path} has "
                                         f"{len(row)} fields, expected {len(column_names)}")
                    for j, c in enumerate(use):
                        inferred[j] = _infer_csv_type(row[c], na_value, inferred[j])
                    seen += 1
        column_defaults = [np.array([b""], dtype=object) if (t or dtypes.string) is dtypes.string
                           else np.zeros([1], dtype=t.np) for t in inferred]
        column_defaults = [convert_to_tensor(d, dtype=t or dtypes.string)
                           for d, t in zip(column_defaults, inferred)]
    if select_columns is not None and len(column_defaults) != len(select_columns):
        raise ValueError(f"make_csv_dataset: `column_defaults` and `select_columns` must have the same length: "
                         f"{len(column_defaults)} and {len(select_columns)}")
    if select_columns is not None and len(column_names) > len(select_columns):
        column_names = [column_names[i] for i in select_columns]
    if label_name is not None and label_name not in column_names:
        raise ValueError(f"make_csv_dataset: `label_name` must be one of the columns {column_names}, got "
                         f"{label_name}")

    # Defaults made in the outer graph cannot be captured by the interleave's function: their values are.
    from actorflow.graph.ops.infer import constant_value
    spec = []
    for i, d in enumerate(column_defaults):
        t = _csv_default(d, i)
        spec.append((t.dtype, constant_value(t)))

    def defaults_here():
        from actorflow.graph.ops.constant import constant
        return [constant(v, dtype=t) if v is not None else t for t, v in spec]

    def filename_to_dataset(filename):
        ds = CsvDataset(filename, defaults_here(), field_delim=field_delim, use_quote_delim=use_quote_delim,
                        na_value=na_value, select_cols=select_columns, header=header,
                        compression_type=compression_type)
        return ds.ignore_errors() if ignore_errors else ds

    names = list(column_names)

    def map_fn(*columns):
        import collections
        features = collections.OrderedDict(zip(names, columns))
        if label_name is not None:
            label = features.pop(label_name)
            return features, label
        return features

    dataset = Dataset.from_tensor_slices(convert_to_tensor(np.array([f.encode() for f in filenames], dtype=object)))
    if shuffle:
        dataset = dataset.shuffle(len(filenames), shuffle_seed)
    dataset = dataset.interleave(filename_to_dataset, cycle_length=num_parallel_reads or 1, block_length=1)
    if shuffle:
        dataset = dataset.shuffle(shuffle_buffer_size, shuffle_seed)
    if num_epochs != 1:
        dataset = dataset.repeat(num_epochs)
    dataset = dataset.batch(batch_size, drop_remainder=num_epochs is None)
    dataset = dataset.map(map_fn)
    return dataset.prefetch(AUTOTUNE if prefetch_buffer_size is None else prefetch_buffer_size)


def rejection_resample(class_func, target_dist, initial_dist=None, seed=None):
    """Dataset.rejection_resample as a transformation (tf.data.experimental.rejection_resample)."""
    return lambda dataset: dataset.rejection_resample(class_func, target_dist, initial_dist, seed)


def get_structure(dataset_or_iterator):
    """The element structure of a dataset or iterator: (dtype, shape) per component
    (tf.data.experimental.get_structure; TF gives TypeSpecs)."""
    if isinstance(dataset_or_iterator, Dataset):
        return dataset_or_iterator.element_spec
    types, shapes = getattr(dataset_or_iterator, "output_types", None), getattr(dataset_or_iterator, "output_shapes",
                                                                                None)
    if types is None:
        raise TypeError(f"get_structure: expected a tf.data.Dataset or an iterator, got "
                        f"{type(dataset_or_iterator).__name__}")
    return nest.map_structure(lambda t, s: (t, s), types, shapes)


def parse_example_dataset(features, num_parallel_calls=1, deterministic=None):
    """A transformation parsing each element, a vector of serialized Examples, into a dict of
    `features` (tf.data.experimental.parse_example_dataset). Differs from TF: only dense
    features (FixedLenFeature), since dataset elements cannot be sparse here."""
    from actorflow.graph.ops.parsing_ops import FixedLenFeature, parse_example
    if not features:
        raise ValueError("parse_example_dataset: `features` must not be empty")
    for k, f in features.items():
        if not isinstance(f, FixedLenFeature):
            raise NotImplementedError(f"parse_example_dataset: feature {k!r} is a {type(f).__name__}; only "
                                      f"FixedLenFeature is supported (dataset elements cannot be sparse here)")

    def apply(dataset):
        if dataset._types is not dtypes.string:
            raise TypeError(f"parse_example_dataset: the input must be a dataset of string vectors, got "
                            f"{dataset._types}")
        return dataset.map(lambda serialized: parse_example(serialized, features),
                           num_parallel_calls=None if num_parallel_calls in (None, 1) else num_parallel_calls)
    return apply


def make_batched_features_dataset(file_pattern, batch_size, features, reader=None, label_key=None,
                                  reader_args=None, num_epochs=None, shuffle=True, shuffle_buffer_size=10000,
                                  shuffle_seed=None, prefetch_buffer_size=None, reader_num_threads=None,
                                  parser_num_threads=None, sloppy_ordering=False, drop_final_batch=False):
    """Batches of parsed Examples from TFRecord files, as dicts of `features` (and the
    `label_key` feature apart) (tf.data.experimental.make_batched_features_dataset): TF's program
    (list_files with `shuffle_seed`, an interleave of `reader`, shuffle, repeat `num_epochs`,
    batch, parse_example_dataset, prefetch). See parse_example_dataset for the features."""
    from actorflow.data.dataset import TFRecordDataset
    reader = reader or TFRecordDataset
    reader_args = list(reader_args or [])
    dataset = Dataset.list_files(file_pattern, shuffle=shuffle, seed=shuffle_seed)
    dataset = dataset.interleave(lambda filename: reader(filename, *reader_args),
                                 cycle_length=reader_num_threads or 1, block_length=1)
    if dataset._types == (dtypes.string, dtypes.string):
        dataset = dataset.map(lambda _, v: v)
    if shuffle:
        dataset = dataset.shuffle(shuffle_buffer_size, shuffle_seed)
    if num_epochs != 1:
        dataset = dataset.repeat(num_epochs)
    dataset = dataset.batch(batch_size, drop_remainder=drop_final_batch or num_epochs is None)
    dataset = dataset.apply(parse_example_dataset(features, parser_num_threads or 2))
    if label_key:
        if label_key not in features:
            raise ValueError(f"make_batched_features_dataset: the `label_key` provided ({label_key}) must be one "
                             f"of the `features` keys: {list(features)}")
        dataset = dataset.map(lambda x: (x, x.pop(label_key)))
    return dataset.prefetch(AUTOTUNE if prefetch_buffer_size is None else prefetch_buffer_size)


def to_variant(dataset):
    """The dataset's variant tensor (tf.data.experimental.to_variant)."""
    if not isinstance(dataset, Dataset):
        raise TypeError(f"to_variant: expected a tf.data.Dataset, got {type(dataset).__name__}")
    return dataset._variant


def from_variant(variant, structure):
    """The dataset whose variant tensor is `variant` and whose elements have `structure`: (dtype,
    shape) pairs or TensorSpecs as get_structure gives (tf.data.experimental.from_variant)."""
    from actorflow.data.optional import _split_spec
    if not isinstance(variant, Tensor) or variant.dtype is not dtypes.variant:
        raise TypeError(f"from_variant: expected a variant tensor, got {variant!r}")
    types, shapes = _split_spec(structure)
    return Dataset(variant, types, shapes)


def from_list(elements):
    """A dataset of `elements`, a non-empty list of values of one structure
    (tf.data.experimental.from_list): their slices when their shapes agree, else one
    from_tensors each, concatenated (static shapes then keep what all elements share)."""
    from actorflow.data.dataset import _normalize, _shapes_of
    if not isinstance(elements, (list, tuple)) or not elements:
        raise ValueError("from_list: `elements` must be a non-empty list")
    values = [_normalize(e) for e in elements]
    for v in values[1:]:
        try:
            nest.assert_same_structure(values[0], v)
        except (ValueError, TypeError) as e:
            raise ValueError(f"from_list: the elements' structures differ: {e}") from None
    flat_shapes = [tuple(nest.flatten(_shapes_of(v))) for v in values]
    if all(s == flat_shapes[0] and all(x.is_fully_defined() for x in s) for s in flat_shapes):
        from actorflow.graph.ops.array_ops import stack
        stacked = nest.map_structure(lambda *xs: stack(list(xs)), *values)
        return Dataset.from_tensor_slices(stacked)
    out = Dataset.from_tensors(values[0])
    for v in values[1:]:
        out = out.concatenate(Dataset.from_tensors(v))
    return out


def _check_key_value_dataset(dataset):
    base = ("Datasets used to initialize lookup tables must produce elements in the form (key, value), where the "
            "keys and values are scalar tensors. ")
    if not isinstance(dataset, Dataset):
        raise TypeError(f"expected a tf.data.Dataset, got {type(dataset).__name__}")
    types, shapes = dataset._types, dataset._shapes
    if not isinstance(types, tuple) or len(types) != 2 or isinstance(types[0], (tuple, dict)) or isinstance(
            types[1], (tuple, dict)):
        raise ValueError(base + f"However, the given dataset produces elements of {types}")
    for what, s in (("key", shapes[0]), ("value", shapes[1])):
        if s.ndims not in (None, 0):
            raise ValueError(base + f"However, the given dataset produces non-scalar {what} Tensors of rank "
                                    f"{s.ndims}.")


class DatasetInitializer:
    """Fills a lookup table from a dataset of (key, value) scalar pairs
    (tf.data.experimental.DatasetInitializer): its op runs the whole dataset, as TF's
    InitializeTableFromDataset does, and adds itself to the table initializers."""

    def __init__(self, dataset):
        _check_key_value_dataset(dataset)
        self.dataset = dataset
        self._key_dtype, self._value_dtype = dataset._types

    @property
    def key_dtype(self):
        return self._key_dtype

    @property
    def value_dtype(self):
        return self._value_dtype

    def initialize(self, table):
        """The op that fills `table` with the dataset's pairs."""
        from actorflow.graph.graph import GraphKeys, add_to_collection
        from actorflow.graph.ops.lookup_ops import InitializeTableV2
        if (table.key_dtype, table.value_dtype) != (self._key_dtype, self._value_dtype):
            raise TypeError(f"DatasetInitializer: the table maps {table.key_dtype.name} to {table.value_dtype.name}, "
                            f"the dataset gives {self._key_dtype.name} to {self._value_dtype.name}")
        # All pairs as two vectors: one batch of everything, or two empty vectors for an empty dataset.
        empty = Dataset.from_tensors(tuple(convert_to_tensor(np.zeros([0], dtype=t.np), dtype=t)
                                           for t in (self._key_dtype, self._value_dtype)))
        keys, values = self.dataset.batch(np.iinfo(np.int64).max).concatenate(empty).take(1).get_single_element()
        op = InitializeTableV2(table.resource_handle, keys, values, name="table_init")
        add_to_collection(GraphKeys.TABLE_INITIALIZERS, op)
        return op


def table_from_dataset(dataset=None, num_oov_buckets=0, vocab_size=None, default_value=None, hasher_spec=None,
                       key_dtype=dtypes.string, name=None):
    """A lookup table from a dataset of (key, value) scalars (tf.data.experimental.table_from_dataset):
    a StaticHashTable with `default_value` (-1 for numeric values), or with `num_oov_buckets` a
    StaticVocabularyTable hashing unknown keys after the vocabulary (TF's fasthash ids).
    `vocab_size` keeps the first that many pairs and checks that there are so many."""
    from actorflow.graph.ops.lookup_ops import StaticHashTable, StaticVocabularyTable
    _check_key_value_dataset(dataset)
    value_dtype = dataset._types[1]
    if default_value is None:
        if not (value_dtype.is_integer or value_dtype.is_floating):
            raise ValueError(f"`default_value` must be specified when creating a table from a dataset that produces "
                             f"values of type {value_dtype.name}.")
        default_value = -1
    if num_oov_buckets < 0:
        raise ValueError(f"`num_oov_buckets` must be greater than or equal to 0, got {num_oov_buckets}.")
    if vocab_size is not None and not isinstance(vocab_size, Tensor) and vocab_size < 1:
        raise ValueError(f"`vocab_size` must be greater than 0, got {vocab_size}.")
    key_dtype = dtypes.as_dtype(key_dtype)
    if not key_dtype.is_integer and key_dtype is not dtypes.string:
        raise TypeError(f"`key_dtype` must be either an integer or string type, but got {key_dtype.name}")
    if hasher_spec is not None and getattr(hasher_spec, "hasher", "fasthash") != "fasthash":
        raise NotImplementedError("table_from_dataset: only the default fasthash hasher_spec is supported")
    if vocab_size is not None:
        dataset = dataset.take(vocab_size).apply(assert_cardinality(vocab_size))
    init = DatasetInitializer(dataset)
    if num_oov_buckets:
        return StaticVocabularyTable(init, num_oov_buckets, lookup_key_dtype=key_dtype, name=name)
    return StaticHashTable(init, default_value, name=name)


def index_table_from_dataset(dataset=None, num_oov_buckets=0, vocab_size=None, default_value=-1, hasher_spec=None,
                             key_dtype=dtypes.string, name=None):
    """A table mapping each key of `dataset` (scalars) to its position
    (tf.data.experimental.index_table_from_dataset); see table_from_dataset."""
    return table_from_dataset(dataset.enumerate().map(lambda v, k: (k, v)), num_oov_buckets, vocab_size,
                              default_value, hasher_spec, key_dtype, name)


def _string_tensor(v, what):
    if isinstance(v, Tensor):
        if v.dtype is not dtypes.string:
            raise TypeError(f"SqlDataset: `{what}` must be a string, got a {v.dtype.name} tensor")
        return v
    if not isinstance(v, (str, bytes)):
        raise TypeError(f"SqlDataset: `{what}` must be a string, got {v!r}")
    return convert_to_tensor(np.array(v.encode() if isinstance(v, str) else v, dtype=object), name=what)


class SqlDataset(Dataset):
    """The rows of an SQL query on a database, one tuple of scalars each
    (tf.data.experimental.SqlDataset): `driver_name` "sqlite" (TF's only driver),
    `data_source_name` the database file (opened read-only), `output_types` one dtype per column."""

    def __init__(self, driver_name, data_source_name, query, output_types):
        types = nest.map_structure(dtypes.as_dtype, output_types)
        flat = nest.flatten(types)
        if not flat:
            raise ValueError("SqlDataset: `output_types` must not be empty")
        for t in flat:
            if not (t.is_integer or t in (dtypes.float64, dtypes.string, dtypes.bool_)):
                raise TypeError(f"SqlDataset: output type {t.name} is not supported (integers, float64, bool, string)")
        d = Dataset._make("SqlDataset", [], [_string_tensor(driver_name, "driver_name"),
                                             _string_tensor(data_source_name, "data_source_name"),
                                             _string_tensor(query, "query")],
                          types, nest.map_structure(lambda _: TensorShape([]), types))
        super().__init__(d._variant, d._types, d._shapes)
