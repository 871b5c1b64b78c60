"""af.data.experimental: the names TF 1.x programs use from tf.data.experimental."""
from __future__ import annotations

from actorflow.data.dataset import AUTOTUNE
from actorflow.data.options import (
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    AutoShardPolicy,
    AutotuneOptions,
    DistributeOptions,
    OptimizationOptions,
    ThreadingOptions,
)

__all__ = ["AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "AutoShardPolicy", "AutotuneOptions",
           "DistributeOptions", "OptimizationOptions", "ThreadingOptions", "cardinality"]


def cardinality(dataset):
    """The number of elements of `dataset`, an int64 scalar tensor (tf.data.experimental.cardinality)."""
    return dataset.cardinality()
