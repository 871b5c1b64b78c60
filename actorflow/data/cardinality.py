"""The number of elements of a dataset, where the graph says it (tf.data.experimental.cardinality).

Worked out from the dataset ops' definitions, by TensorFlow's rules for each (its
DatasetBase::Cardinality): INFINITE_CARDINALITY (-1) for a pipeline that never ends (repeat()),
UNKNOWN_CARDINALITY (-2) where only running it tells (filter, flat_map, interleave, generators,
files), and, as tf.compat.v1's map does not promise to preserve it, map too. Differs from TF, which
reads a dataset's arguments at run time: here an argument (a range's stop, a batch size, a take
count) that is not a constant at graph construction makes the result UNKNOWN.
"""
from __future__ import annotations

from actorflow.data.options import INFINITE_CARDINALITY as INF
from actorflow.data.options import UNKNOWN_CARDINALITY as UNKNOWN
from actorflow.graph.ops.infer import constant_value

__all__ = ["static_cardinality"]

_SAME = frozenset({"PrefetchDataset", "CacheDataset", "ShuffleDataset", "ScanDataset"})
_UNKNOWN = frozenset({"FilterDataset", "FlatMapDataset", "InterleaveDataset", "GeneratorDataset", "MapDataset",
                      "ParallelMapDataset", "TFRecordDataset", "FixedLengthRecordDataset", "TextLineDataset",
                      "UnbatchDataset", "TakeWhileDataset", "UniqueDataset", "IgnoreErrorsDataset",
                      "GroupByWindowDataset", "GroupByReducerDataset", "DirectedInterleaveDataset",
                      "CsvDataset", "SqlDataset"})


def _const(t):
    v = constant_value(t)
    return None if v is None else int(v)


def static_cardinality(variant) -> int:
    """The cardinality of the dataset whose variant tensor is `variant` (see the module docstring)."""
    op = variant.op
    kind = op.type
    n_in = int(op.attrs.get("n_inputs", 0))
    ins = [static_cardinality(x) for x in op.inputs[:n_in]]
    args = op.inputs[n_in:]
    if kind == "TensorDataset":
        return 1
    if kind == "TensorSliceDataset":
        dims = args[0].shape.dims
        return dims[0] if dims is not None and dims[0] is not None else UNKNOWN
    if kind == "RangeDataset":
        start, stop, step = (_const(a) for a in args)
        return UNKNOWN if None in (start, stop, step) or step == 0 else len(range(start, stop, step))
    if kind == "ScanDataset" and op.attrs.get("final_only"):
        return 1
    if kind in _SAME:
        return ins[0]
    if kind == "RandomDataset":
        return INF
    if kind == "AssertCardinalityDataset":
        n = _const(args[0])
        return UNKNOWN if n is None else n
    if kind == "WindowDataset":
        n, size, shift, stride, drop = ins[0], *(_const(a) for a in args[:3]), constant_value(args[3])
        if n in (INF, UNKNOWN):
            return n
        if None in (size, shift, stride, drop) or min(size, shift, stride) <= 0:
            return UNKNOWN
        if bool(drop):
            rest = n - ((size - 1) * stride + 1)
            return 0 if rest < 0 else rest // shift + 1
        return n // shift + (0 if n % shift == 0 else 1)
    if kind == "ShardDataset":
        n, shards, index = ins[0], _const(args[0]), _const(args[1])
        if n in (INF, UNKNOWN) or shards is None or index is None or shards <= 0:
            return n if n in (INF, UNKNOWN) else UNKNOWN
        return n // shards + (1 if index < n % shards else 0)
    if kind in _UNKNOWN:
        return UNKNOWN
    if kind == "ZipDataset":
        if UNKNOWN in ins:
            return UNKNOWN
        finite = [n for n in ins if n != INF]
        return min(finite) if finite else INF
    if kind == "ConcatenateDataset":
        if INF in ins:
            return INF
        return UNKNOWN if UNKNOWN in ins else ins[0] + ins[1]
    if kind in ("BatchDataset", "PaddedBatchDataset"):
        n, size, drop = ins[0], _const(args[0]), constant_value(args[1])
        if n in (INF, UNKNOWN):
            return n
        if size is None or drop is None:
            return UNKNOWN
        return n // size + (0 if n % size == 0 or bool(drop) else 1)
    if kind == "RepeatDataset":
        n, count = ins[0], _const(args[0])
        if count is None:
            return UNKNOWN
        if count < 0:
            return 0 if n == 0 else INF
        if count == 0:
            return 0
        return n if n in (INF, UNKNOWN) else count * n
    if kind == "TakeDataset":
        n, count = ins[0], _const(args[0])
        if n == UNKNOWN or count is None:
            return UNKNOWN
        if n == INF:
            return count
        return n if count < 0 else min(n, count)
    if kind == "SkipDataset":
        n, count = ins[0], _const(args[0])
        if n in (INF, UNKNOWN):
            return n
        if count is None:
            return UNKNOWN
        return 0 if count < 0 else max(0, n - count)
    return UNKNOWN
