"""af.keras.utils: to_categorical, normalize, Sequence and plot_model / model_to_dot (tf.keras.utils),
with Keras 2's `np_utils` and `vis_utils` modules."""
from __future__ import annotations

import numpy as np

__all__ = ["to_categorical", "normalize", "Sequence", "plot_model", "model_to_dot", "np_utils", "vis_utils"]


def to_categorical(y, num_classes=None, dtype="float32"):
    """One-hot rows for integer class labels (tf.keras.utils.to_categorical); a trailing axis of
    size 1 is dropped first, as Keras does."""
    y = np.array(y, dtype="int")
    shape = y.shape
    if shape and shape[-1] == 1 and len(shape) > 1:
        shape = shape[:-1]
    y = y.ravel()
    if not num_classes:
        num_classes = int(np.max(y)) + 1 if y.size else 0
    # As Keras indexes: a negative label counts from the last class (-1 is num_classes - 1).
    if y.size and (y.max() >= num_classes or y.min() < -num_classes):
        bad = y.max() if y.max() >= num_classes else y.min()
        raise ValueError(f"to_categorical: label {bad} is out of range for num_classes={num_classes}")
    out = np.zeros((y.shape[0], num_classes), dtype=dtype)
    out[np.arange(y.shape[0]), y] = 1
    return out.reshape(shape + (num_classes,))


def normalize(x, axis=-1, order=2):
    """`x` divided by its `order`-norm along `axis` (zero norms left as they are)."""
    norm = np.atleast_1d(np.linalg.norm(x, order, axis))
    norm[norm == 0] = 1
    return x / np.expand_dims(norm, axis)


class Sequence:
    """A data set as batches (tf.keras.utils.Sequence): `__getitem__(i)` gives batch i as
    (x, y) or (x, y, sample_weight), `__len__` the number of batches; `on_epoch_end` runs after
    each epoch of `fit_generator`."""

    def __getitem__(self, index):
        raise NotImplementedError

    def __len__(self):
        raise NotImplementedError

    def on_epoch_end(self):
        pass

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]


from actorflow.keras.utils import np_utils, vis_utils  # noqa: E402 - they import the names above
from actorflow.keras.utils.vis_utils import model_to_dot, plot_model  # noqa: E402
