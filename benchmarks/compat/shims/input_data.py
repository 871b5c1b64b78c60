"""A stand-in for `tensorflow.examples.tutorials.mnist.input_data`, backed by scikit-learn's digits.

The compatibility corpus (benchmarks/compat.py) runs public TF-1.x programs that download MNIST. The
machines that run it have no internet, so the port swaps that import for this module, which gives the
same interface (`read_data_sets(dir, one_hot=...)` -> `.train/.validation/.test` with `images`,
`labels`, `num_examples`, `next_batch`) over the 1,797 8x8 digits scaled to MNIST's 28x28 layout:
each pixel becomes a 3x3 block, the 24x24 image is padded to 28x28, and values lie in [0, 1]. The
training set is augmented with one-pixel shifts so that programs that draw 5,000 training images at
once (nearest neighbour) get distinct ones. Both libraries of a comparison see identical data.
"""
import numpy as np
from sklearn.datasets import load_digits

__all__ = ["DataSet", "read_data_sets"]


class DataSet:
    """MNIST's DataSet: `next_batch` walks the examples in a shuffled order, reshuffled each epoch."""

    def __init__(self, images, labels, seed):
        self._images = images
        self._labels = labels
        self._rng = np.random.RandomState(seed)
        self._epochs_completed = 0
        self._index_in_epoch = 0
        self._perm = self._rng.permutation(len(images))

    @property
    def images(self):
        return self._images

    @property
    def labels(self):
        return self._labels

    @property
    def num_examples(self):
        return len(self._images)

    @property
    def epochs_completed(self):
        return self._epochs_completed

    def next_batch(self, batch_size, fake_data=False, shuffle=True):
        """The next `batch_size` examples, wrapping into a new shuffled epoch as MNIST's does."""
        out = []
        while batch_size > 0:
            take = min(batch_size, self.num_examples - self._index_in_epoch)
            out.append(self._perm[self._index_in_epoch:self._index_in_epoch + take])
            self._index_in_epoch += take
            batch_size -= take
            if self._index_in_epoch == self.num_examples:
                self._epochs_completed += 1
                self._index_in_epoch = 0
                self._perm = self._rng.permutation(self.num_examples) if shuffle else self._perm
        idx = np.concatenate(out)
        return self._images[idx], self._labels[idx]


class _Datasets:
    def __init__(self, train, validation, test):
        self.train, self.validation, self.test = train, validation, test


def _to_28x28(images8):
    big = np.kron(images8.reshape(-1, 8, 8), np.ones((3, 3))) / 16.0
    return np.pad(big, ((0, 0), (2, 2), (2, 2)))


def read_data_sets(train_dir=None, fake_data=False, one_hot=False, dtype=None, reshape=True,
                   validation_size=100, seed=None, source_url=None):
    """MNIST's `read_data_sets` over the digits (the directory is ignored: nothing is downloaded)."""
    digits = load_digits()
    rng = np.random.RandomState(0)
    order = rng.permutation(len(digits.images))
    images = _to_28x28(digits.images[order]).astype(np.float32)
    labels = digits.target[order].astype(np.int64)
    n_test = 297
    test_x, test_y = images[:n_test], labels[:n_test]
    train_x, train_y = images[n_test:], labels[n_test:]
    shifted = [train_x] + [np.roll(train_x, s, axis=a) for a in (1, 2) for s in (-1, 1)]
    train_x = np.concatenate(shifted)
    train_y = np.concatenate([train_y] * len(shifted))
    mix = rng.permutation(len(train_x))
    train_x, train_y = train_x[mix], train_y[mix]
    val_x, val_y = train_x[:validation_size], train_y[:validation_size]
    train_x, train_y = train_x[validation_size:], train_y[validation_size:]

    def form(x, y):
        x = x.reshape(len(x), 784) if reshape else x.reshape(len(x), 28, 28, 1)
        if one_hot:
            y = np.eye(10, dtype=np.float64)[y]
        return x, y

    return _Datasets(DataSet(*form(train_x, train_y), seed=1), DataSet(*form(val_x, val_y), seed=2),
                     DataSet(*form(test_x, test_y), seed=3))
