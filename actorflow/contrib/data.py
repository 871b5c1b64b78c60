"""af.contrib.data: TF 1.15's tf.contrib.data, the transformations that moved to tf.data.experimental
(af.data.experimental's), plus the older batch_and_drop_remainder, padded_batch_and_drop_remainder
and sloppy_interleave."""
from __future__ import annotations

from actorflow.data.experimental import *  # noqa: F401,F403
from actorflow.data.experimental import __all__ as _experimental
from actorflow.data.experimental import parallel_interleave

__all__ = list(_experimental) + ["batch_and_drop_remainder", "padded_batch_and_drop_remainder", "sloppy_interleave"]


def batch_and_drop_remainder(batch_size):
    """`dataset.batch(batch_size, drop_remainder=True)` as a transformation."""
    return lambda dataset: dataset.batch(batch_size, drop_remainder=True)


def padded_batch_and_drop_remainder(batch_size, padded_shapes, padding_values=None):
    """`dataset.padded_batch(..., drop_remainder=True)` as a transformation."""
    return lambda dataset: dataset.padded_batch(batch_size, padded_shapes, padding_values, drop_remainder=True)


def sloppy_interleave(map_func, cycle_length, block_length=1):
    """parallel_interleave with sloppy=True (elements in any order; here in interleave's order)."""
    return parallel_interleave(map_func, cycle_length, block_length, sloppy=True)
