"""Input functions over in-memory data (tf.estimator.inputs: numpy_input_fn, pandas_input_fn).

TF 1.15 feeds these through queues; here they are af.data pipelines with the same semantics: the
rows are shuffled (a buffer of `queue_capacity`) when asked, repeated for `num_epochs` (forever when
None) and batched, the last batch of a finite input possibly short, and the end of the input raises
OutOfRangeError, which ends an Estimator's train, evaluate or predict.
"""
from __future__ import annotations

import collections

import numpy as np

from actorflow.data.dataset import Dataset
from actorflow.graph.ops.constant import constant

__all__ = ["numpy_input_fn", "pandas_input_fn"]


def _check_shuffle(shuffle):
    if not isinstance(shuffle, bool):
        raise ValueError("shuffle must be provided and explicitly set as boolean (it is recommended to set it as "
                         f"True for training); got {shuffle}")


def numpy_input_fn(x, y=None, batch_size=128, num_epochs=1, shuffle=None, queue_capacity=1000, num_threads=1):
    """An input_fn that yields batches of the rows of numpy arrays (tf.estimator.inputs.numpy_input_fn).

    `x` is an array or a dict of arrays (the features: a Tensor or a dict of Tensors, as given), `y`
    an array or a dict of arrays or None (the labels). All arrays must have the same length.
    `num_threads` is accepted for TF's signature; the pipeline's order does not depend on it.
    """
    _check_shuffle(shuffle)
    if not isinstance(x, dict) and not hasattr(x, "__len__"):
        raise TypeError(f"x must be a dict or array; got {type(x).__name__}")
    if batch_size is None or batch_size <= 0:
        raise ValueError(f"batch_size must be positive, given: {batch_size}")
    if num_epochs is not None and num_epochs <= 0:
        raise ValueError(f"num_epochs must be None or positive, given: {num_epochs}")

    def input_fn():
        xs = {k: np.asarray(v) for k, v in x.items()} if isinstance(x, dict) else np.asarray(x)
        ys = None if y is None else ({k: np.asarray(v) for k, v in y.items()} if isinstance(y, dict) else np.asarray(y))
        if isinstance(xs, dict) and isinstance(ys, dict):
            dup = sorted(set(xs) & set(ys))
            if dup:
                raise ValueError(f"{len(dup)} duplicate keys are found in both x and y: {dup}")
        lengths = collections.OrderedDict()
        for name, part in (("x", xs), ("y", ys)):
            if part is None:
                continue
            for k, v in (part.items() if isinstance(part, dict) else [(None, part)]):
                if v.ndim == 0:
                    raise ValueError(f"{name if k is None else f'{name}[{k!r}]'} must have a batch dimension; "
                                     "given a scalar")
                lengths[name if k is None else f"{name}[{k!r}]"] = len(v)
        if len(set(lengths.values())) > 1:
            raise ValueError("Length of tensors in x and y is mismatched. All elements in x and y must have the same "
                             "length.\n" + "\n".join(f"{k}: {n}" for k, n in lengths.items()))
        ds = Dataset.from_tensor_slices(_strings_as_tensors(xs) if ys is None
                                        else (_strings_as_tensors(xs), _strings_as_tensors(ys)))
        if shuffle:
            ds = ds.shuffle(queue_capacity)
        ds = ds.repeat(num_epochs).batch(batch_size)
        return ds.make_one_shot_iterator().get_next()

    return input_fn


def _strings_as_tensors(part):
    """String arrays as af.string constants (a dataset takes strings only as tensors)."""
    def one(v):
        return constant(v.astype(object)) if v.dtype.kind in "OSU" else v
    return {k: one(v) for k, v in part.items()} if isinstance(part, dict) else one(part)


def pandas_input_fn(x, y=None, batch_size=128, num_epochs=1, shuffle=None, queue_capacity=1000, num_threads=1,
                    target_column="target"):
    """An input_fn over a pandas DataFrame's columns (tf.estimator.inputs.pandas_input_fn): features are
    a dict of its columns; labels `y` (a Series, or a DataFrame giving a dict) must share x's index.
    pandas is needed only to build the DataFrames; this function reads them through their columns."""
    _check_shuffle(shuffle)
    if not hasattr(x, "columns"):
        raise TypeError(f"x must be a pandas DataFrame; got {type(x).__name__}")
    if y is not None:
        if target_column in x.columns:
            raise ValueError(f"Cannot use name {target_column} for target column: DataFrame already has a column "
                             f"with that name: {list(x.columns)}")
        if not np.array_equal(np.asarray(x.index), np.asarray(y.index)):
            raise ValueError(f"Index for x and y are mismatched.\nIndex for x: {x.index}\nIndex for y: {y.index}\n")
    features = {str(c): x[c].to_numpy() for c in x.columns}
    if y is None:
        labels = None
    elif hasattr(y, "columns"):
        labels = {str(c): y[c].to_numpy() for c in y.columns}
    else:
        labels = y.to_numpy()
    return numpy_input_fn(features, labels, batch_size=batch_size, num_epochs=num_epochs, shuffle=shuffle,
                          queue_capacity=queue_capacity, num_threads=num_threads)
