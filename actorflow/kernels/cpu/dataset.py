"""Dataset kernels: each dataset op's kernel returns a DatasetSpec, the plain definition of its
dataset (what kind, which tensor arguments, which input datasets). Iterators turn specs into
running pipelines (actorflow.actors.dataset); the kernels themselves never iterate."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel

__all__ = ["DatasetSpec", "DATASET_KINDS", "OptionalValue"]

DATASET_KINDS = ("TensorDataset", "TensorSliceDataset", "RangeDataset", "GeneratorDataset", "TextLineDataset",
                 "MapDataset", "ParallelMapDataset", "FilterDataset", "FlatMapDataset", "InterleaveDataset",
                 "BatchDataset", "PaddedBatchDataset", "ShuffleDataset", "RepeatDataset", "TakeDataset",
                 "SkipDataset", "PrefetchDataset", "CacheDataset", "ZipDataset", "ConcatenateDataset",
                 "TFRecordDataset", "FixedLengthRecordDataset", "UnbatchDataset", "ShardDataset", "WindowDataset",
                 "ScanDataset", "TakeWhileDataset", "UniqueDataset", "GroupByWindowDataset", "GroupByReducerDataset",
                 "IgnoreErrorsDataset", "AssertCardinalityDataset", "RandomDataset", "DirectedInterleaveDataset",
                 "CsvDataset", "SqlDataset")


@dataclass(frozen=True, slots=True, eq=False)
class DatasetSpec:
    """One dataset: `kind` (its op type), `name` (its op's name, for errors), `inputs` (input
    DatasetSpecs), `args` (its tensor arguments as arrays) and `attrs` (the op's attributes, with
    `output_types` as numpy dtypes and `output_shapes` as tuples, -1 for unknown dimensions)."""
    kind: str
    name: str
    inputs: tuple
    args: tuple
    attrs: dict


def _factory(kind):
    def make(attrs):
        n = int(attrs.get("n_inputs", 0))
        name = attrs.get("op_name") or kind

        def kernel(*values):
            # An input dataset fed to a function's placeholder (a window) arrives as a 0-d object array.
            ins = tuple(v[()] if isinstance(v, np.ndarray) else v for v in values[:n])
            return DatasetSpec(kind, name, ins, values[n:], attrs)
        return kernel
    return make


for _kind in DATASET_KINDS:
    # Building a spec is a few attribute reads: never worth the thread pool.
    register_kernel(_kind, "CPU", releases_gil=False)(_factory(_kind))


class OptionalValue:
    """The runtime value of an Optional variant: a flat tuple of components, or None (no value)."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return "<Optional: none>" if self.value is None else f"<Optional: {len(self.value)} components>"


def _optional(v) -> OptionalValue:
    v = v[()] if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype == object else v
    if not isinstance(v, OptionalValue):
        raise InvalidArgumentError(f"expected an Optional variant, got {type(v).__name__}")
    return v


@register_kernel("OptionalFromValue", "CPU", releases_gil=False)
def optional_from_value(attrs):
    return lambda *components: OptionalValue(tuple(components))


@register_kernel("OptionalNone", "CPU", releases_gil=False)
def optional_none(attrs):
    return lambda: OptionalValue(None)


@register_kernel("OptionalHasValue", "CPU", releases_gil=False)
def optional_has_value(attrs):
    return lambda opt: np.bool_(_optional(opt).value is not None)


@register_kernel("OptionalGetValue", "CPU", releases_gil=False)
def optional_get_value(attrs):
    n = len(attrs["output_types"])

    def get(opt):
        v = _optional(opt).value
        if v is None:
            raise InvalidArgumentError("The optional does not have a value.")
        if len(v) != n:
            raise InvalidArgumentError(f"the optional has {len(v)} components, expected {n}")
        return v[0] if n == 1 else tuple(v)
    return get
