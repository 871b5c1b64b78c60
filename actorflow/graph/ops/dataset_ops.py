"""Input pipelines as graph ops (tf.data in graph mode): dataset ops and iterator ops.

A dataset op (TensorSliceDataset, MapDataset, BatchDataset, ...) outputs a `variant` scalar: the
definition of a dataset (its kind, its tensor arguments, its input datasets), built by its kernel
each time it runs. Every dataset op takes its input datasets first (attribute `n_inputs` says how
many) and records the flat `output_types` and `output_shapes` of its elements. Function-valued
attributes (`f`, `predicate`) hold GraphFunctions (graph/function.py).

An iterator op (IteratorV2, OneShotIterator) creates an iterator resource in the task that owns
it; MakeIterator (re)starts it on a dataset and IteratorGetNext takes its next element, both
through the iterator's resource actor (actors/dataset.py), like queue ops. A one-shot iterator's
IteratorGetNext also takes the dataset, and starts the iterator on it the first time only.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.tensor_shape import TensorShape, as_shape

__all__ = ["DATASET_OPS"]

DATASET_OPS = ("TensorDataset", "TensorSliceDataset", "RangeDataset", "GeneratorDataset", "TextLineDataset",
               "MapDataset", "ParallelMapDataset", "FilterDataset", "FlatMapDataset", "InterleaveDataset",
               "BatchDataset", "PaddedBatchDataset", "ShuffleDataset", "RepeatDataset", "TakeDataset",
               "SkipDataset", "PrefetchDataset", "CacheDataset", "ZipDataset", "ConcatenateDataset",
               "TFRecordDataset", "FixedLengthRecordDataset", "UnbatchDataset", "ShardDataset", "WindowDataset",
               "ScanDataset", "TakeWhileDataset", "UniqueDataset", "GroupByWindowDataset", "GroupByReducerDataset",
               "IgnoreErrorsDataset", "AssertCardinalityDataset", "RandomDataset", "DirectedInterleaveDataset",
               "CsvDataset", "SqlDataset")


def _infer_dataset(inputs, attrs):
    n = int(attrs.get("n_inputs", 0))
    for i, t in enumerate(inputs[:n]):
        if t.dtype is not dtypes.variant:
            raise InferenceError(f"input {i} must be a dataset (variant), got {t.dtype.name} tensor '{t.name}'")
    if len(attrs.get("output_types", ())) != len(attrs.get("output_shapes", ())):
        raise InferenceError("output_types and output_shapes must have the same length")
    return [(dtypes.variant, TensorShape([]))]


for _t in DATASET_OPS:
    globals()[_t] = define_op(_t, _infer_dataset, stateful=True)


def _infer_iterator(inputs, attrs):
    if len(attrs.get("output_types", ())) != len(attrs.get("output_shapes", ())):
        raise InferenceError("output_types and output_shapes must have the same length")
    return [(dtypes.resource, TensorShape([]))]


IteratorV2 = define_op("IteratorV2", _infer_iterator, stateful=True, resource="iterator", actor="handle")
OneShotIterator = define_op("OneShotIterator", _infer_iterator, stateful=True, resource="iterator", actor="handle")


def _check_iterator(t):
    if t.op.op_def.resource != "iterator":
        raise InferenceError(f"input '{t.name}' must be an iterator handle, got the output of a {t.op.type} op")


def compatible_structure(it_types, it_shapes, ds_types, ds_shapes) -> str | None:
    """Why a dataset with flat (ds_types, ds_shapes) cannot feed an iterator of (it_types,
    it_shapes), or None when it can."""
    if len(it_types) != len(ds_types):
        return f"the iterator has {len(it_types)} components, the dataset {len(ds_types)}"
    for i, (a, b) in enumerate(zip(it_types, ds_types)):
        if a is not b:
            return f"component {i} has dtype {a.name} in the iterator and {b.name} in the dataset"
    for i, (a, b) in enumerate(zip(it_shapes, ds_shapes)):
        if not as_shape(a).is_compatible_with(as_shape(b)):
            return f"component {i} has shape {as_shape(a)} in the iterator and {as_shape(b)} in the dataset"
    return None


def _infer_make_iterator(inputs, attrs):
    it, ds = inputs
    _check_iterator(it)
    if ds.dtype is not dtypes.variant:
        raise InferenceError(f"input '{ds.name}' must be a dataset (variant), got {ds.dtype.name}")
    a, b = it.op.attrs, ds.op.attrs
    if "output_types" in b:
        why = compatible_structure(a["output_types"], a["output_shapes"], b["output_types"], b["output_shapes"])
        if why:
            raise InferenceError(f"the dataset '{ds.op.name}' does not match iterator '{it.op.name}': {why}")
    return []


def _infer_get_next(inputs, attrs):
    _check_iterator(inputs[0])
    a = inputs[0].op.attrs
    if len(inputs) > 1 and inputs[1].dtype is not dtypes.variant:
        raise InferenceError(f"input '{inputs[1].name}' must be a dataset (variant)")
    return [(t, as_shape(s)) for t, s in zip(a["output_types"], a["output_shapes"])]


MakeIterator = define_op("MakeIterator", _infer_make_iterator, ref_inputs=(0,), actor="resource", stateful=True)
IteratorGetNext = define_op("IteratorGetNext", _infer_get_next, ref_inputs=(0,), actor="resource", stateful=True)


def _infer_single_element(inputs, attrs):
    _check_iterator(inputs[0])
    if inputs[1].dtype is not dtypes.variant:
        raise InferenceError(f"input '{inputs[1].name}' must be a dataset (variant)")
    return [(t, as_shape(s)) for t, s in zip(attrs["output_types"], attrs["output_shapes"])]


def _infer_to_tfrecord(inputs, attrs):
    _check_iterator(inputs[0])
    ds, filename, compression = inputs[1:]
    if ds.dtype is not dtypes.variant:
        raise InferenceError(f"input '{ds.name}' must be a dataset (variant)")
    b = ds.op.attrs
    if "output_types" in b and tuple(b["output_types"]) != (dtypes.string,):
        raise InferenceError(f"TFRecordWriter.write: the dataset '{ds.op.name}' must have scalar string elements, "
                             f"got {[t.name for t in b['output_types']]}")
    for t in (filename, compression):
        if t.dtype is not dtypes.string or t.shape.ndims not in (0, None):
            raise InferenceError(f"input '{t.name}' must be a scalar string")
    return []


# Ops that run a whole dataset on a pipeline of their own, through an iterator resource (its runtime
# hosts the pipeline): get_single_element, and TFRecordWriter.write.
DatasetToSingleElement = define_op("DatasetToSingleElement", _infer_single_element, ref_inputs=(0,),
                                   actor="resource", stateful=True)
DatasetToTFRecord = define_op("DatasetToTFRecord", _infer_to_tfrecord, ref_inputs=(0,), actor="resource",
                              stateful=True)


# Optionals (tf.data.experimental.Optional): a variant holding an element or nothing.
def _infer_optional_from_value(inputs, attrs):
    return [(dtypes.variant, TensorShape([]))]


def _infer_optional_none(inputs, attrs):
    return [(dtypes.variant, TensorShape([]))]


def _check_optional(t):
    if t.dtype is not dtypes.variant:
        raise InferenceError(f"input '{t.name}' must be an optional (variant), got {t.dtype.name}")


def _infer_optional_has_value(inputs, attrs):
    _check_optional(inputs[0])
    return [(dtypes.bool_, TensorShape([]))]


def _infer_optional_get_value(inputs, attrs):
    _check_optional(inputs[0])
    if len(attrs.get("output_types", ())) != len(attrs.get("output_shapes", ())):
        raise InferenceError("output_types and output_shapes must have the same length")
    return [(t, as_shape(s)) for t, s in zip(attrs["output_types"], attrs["output_shapes"])]


def _infer_get_next_as_optional(inputs, attrs):
    _check_iterator(inputs[0])
    if len(inputs) > 1 and inputs[1].dtype is not dtypes.variant:
        raise InferenceError(f"input '{inputs[1].name}' must be a dataset (variant)")
    return [(dtypes.variant, TensorShape([]))]


OptionalFromValue = define_op("OptionalFromValue", _infer_optional_from_value)
OptionalNone = define_op("OptionalNone", _infer_optional_none)
OptionalHasValue = define_op("OptionalHasValue", _infer_optional_has_value)
OptionalGetValue = define_op("OptionalGetValue", _infer_optional_get_value)
IteratorGetNextAsOptional = define_op("IteratorGetNextAsOptional", _infer_get_next_as_optional, ref_inputs=(0,),
                                      actor="resource", stateful=True)
