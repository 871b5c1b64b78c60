"""af.keras.datasets: mnist, fashion_mnist, cifar10 and imdb `load_data` (tf.keras.datasets),
read from Keras's cache, never downloaded.

Each reads the file Keras would have downloaded, from `$KERAS_HOME/datasets` (default
`~/.keras/datasets`), or from `path` when it is absolute; a missing file is an error saying
where to put it and where to get it. The pickled parts of the standard files (CIFAR-10's
batches, IMDB's lists of word ids) are read with an unpickler that accepts only lists, dicts,
bytes and numpy arrays.
"""
from __future__ import annotations

import gzip
import io
import os
import pickle
import zipfile

import numpy as np

from actorflow.keras import backend as K

__all__ = ["mnist", "fashion_mnist", "cifar10", "imdb", "cache_dir"]


def cache_dir() -> str:
    """Keras's dataset cache: $KERAS_HOME/datasets, else ~/.keras/datasets."""
    base = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    return os.path.join(base, "datasets")


def _locate(path, dataset, origin) -> str:
    full = path if os.path.isabs(path) else os.path.join(cache_dir(), path)
    if not os.path.exists(full):
        raise FileNotFoundError(f"keras.datasets.{dataset}: '{full}' not found. actorflow does not download data "
                                f"sets: fetch it from {origin} and put it at '{full}' (or pass an absolute "
                                f"path=...)")
    return full


_SAFE = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
         ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
         ("numpy._core.multiarray", "scalar")}


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _SAFE:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"keras.datasets: refusing to load {module}.{name} from a data file")


def _safe_pickle(data: bytes, **kwargs):
    return _SafeUnpickler(io.BytesIO(data), **kwargs).load()


def _load_npz(path) -> dict:
    """The arrays of an .npz, object arrays (pickled) through the safe unpickler."""
    out = {}
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            with z.open(name) as f:
                buf = io.BytesIO(f.read())
            version = np.lib.format.read_magic(buf)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read_header(buf)
            if dtype.hasobject:
                arr = _safe_pickle(buf.read(), encoding="latin1")
            else:
                arr = np.frombuffer(buf.read(), dtype=dtype, count=int(np.prod(shape)))
                arr = arr.reshape(shape, order="F" if fortran else "C").copy()
            out[name[:-4] if name.endswith(".npy") else name] = arr
    return out


def _xy(d, path, dataset):
    missing = [k for k in ("x_train", "y_train", "x_test", "y_test") if k not in d]
    if missing:
        raise ValueError(f"keras.datasets.{dataset}: '{path}' lacks the arrays {missing}")
    return (d["x_train"], d["y_train"]), (d["x_test"], d["y_test"])


class _MNIST:
    """MNIST digits: ((x_train, y_train), (x_test, y_test)), uint8 28x28 images and labels."""

    def load_data(self, path="mnist.npz"):
        """Reads mnist.npz (arrays x_train, y_train, x_test, y_test) from Keras's cache."""
        full = _locate(path, "mnist", "https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz")
        return _xy(_load_npz(full), full, "mnist")


class _FashionMNIST:
    """Fashion-MNIST: the four gzipped IDX files in `fashion-mnist/` of Keras's cache."""

    _FILES = ("train-labels-idx1-ubyte.gz", "train-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz",
              "t10k-images-idx3-ubyte.gz")

    def load_data(self, path="fashion-mnist"):
        """Reads the IDX files (or an .npz with x_train, y_train, x_test, y_test)."""
        origin = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/ (the four *-ubyte.gz files)"
        full = _locate(path, "fashion_mnist", origin)
        if full.endswith(".npz"):
            return _xy(_load_npz(full), full, "fashion_mnist")
        arrays = []
        for i, name in enumerate(self._FILES):
            f = _locate(os.path.join(full, name), "fashion_mnist", origin)
            with gzip.open(f, "rb") as fh:
                data = fh.read()
            if i % 2 == 0:
                arrays.append(np.frombuffer(data, np.uint8, offset=8).copy())
            else:
                arrays.append(np.frombuffer(data, np.uint8, offset=16).reshape(-1, 28, 28).copy())
        y_train, x_train, y_test, x_test = arrays
        return (x_train, y_train), (x_test, y_test)


class _CIFAR10:
    """CIFAR-10: 32x32 colour images (channels last unless image_data_format says otherwise) and
    labels of shape (n, 1)."""

    def load_data(self, path="cifar-10-batches-py"):
        """Reads the python batches (data_batch_1..5, test_batch) of `cifar-10-batches-py/`, or an
        .npz with x_train, y_train, x_test, y_test (channels last)."""
        origin = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz (extracted)"
        full = _locate(path, "cifar10", origin)
        if full.endswith(".npz"):
            return _xy(_load_npz(full), full, "cifar10")

        def batch(name):
            with open(_locate(os.path.join(full, name), "cifar10", origin), "rb") as f:
                d = _safe_pickle(f.read(), encoding="bytes")
            d = {k.decode("utf8") if isinstance(k, bytes) else k: v for k, v in d.items()}
            return np.asarray(d["data"]).reshape(-1, 3, 32, 32), np.asarray(d["labels"])
        parts = [batch(f"data_batch_{i}") for i in range(1, 6)]
        x_train = np.concatenate([p[0] for p in parts]).astype(np.uint8)
        y_train = np.concatenate([p[1] for p in parts]).reshape(-1, 1)
        x_test, y_test = batch("test_batch")
        x_test, y_test = x_test.astype(np.uint8), y_test.reshape(-1, 1)
        if K.image_data_format() == "channels_last":
            x_train, x_test = x_train.transpose(0, 2, 3, 1), x_test.transpose(0, 2, 3, 1)
        return (x_train, y_train), (x_test, y_test)


class _IMDB:
    """IMDB reviews as lists of word ids, with Keras's processing of them."""

    def load_data(self, path="imdb.npz", num_words=None, skip_top=0, maxlen=None, seed=113, start_char=1,
                  oov_char=2, index_from=3, **kwargs):
        """Reads imdb.npz; shuffles train and test with `seed`, prepends `start_char`, shifts ids by
        `index_from`, drops sequences of `maxlen` or more, and replaces ids outside
        [skip_top, num_words) by `oov_char` (or drops them when it is None), as Keras does."""
        if kwargs:
            raise TypeError(f"imdb.load_data: unexpected keyword arguments {sorted(kwargs)}")
        full = _locate(path, "imdb", "https://storage.googleapis.com/tensorflow/tf-keras-datasets/imdb.npz")
        (x_train, y_train), (x_test, y_test) = _xy(_load_npz(full), full, "imdb")
        rng = np.random.RandomState(seed)
        idx = np.arange(len(x_train))
        rng.shuffle(idx)
        x_train, y_train = [list(x_train[i]) for i in idx], np.asarray(y_train)[idx]
        idx = np.arange(len(x_test))
        rng.shuffle(idx)
        x_test, y_test = [list(x_test[i]) for i in idx], np.asarray(y_test)[idx]
        xs, labels = x_train + x_test, np.concatenate([y_train, y_test])
        if start_char is not None:
            xs = [[start_char] + [w + index_from for w in x] for x in xs]
        elif index_from:
            xs = [[w + index_from for w in x] for x in xs]
        if maxlen:
            keep = [i for i, x in enumerate(xs) if len(x) < maxlen]
            n_train = sum(1 for i in keep if i < len(x_train))
            xs, labels = [xs[i] for i in keep], labels[keep]
        else:
            n_train = len(x_train)
        if not xs:
            raise ValueError(f"After filtering for sequences shorter than maxlen={maxlen}, no sequence was kept. "
                             f"Increase maxlen.")
        if not num_words:
            num_words = max(max(x) for x in xs if x)
        if oov_char is not None:
            xs = [[w if skip_top <= w < num_words else oov_char for w in x] for x in xs]
        else:
            xs = [[w for w in x if skip_top <= w < num_words] for x in xs]
        out = np.empty(len(xs), dtype=object)
        out[:] = [list(x) for x in xs]
        return (out[:n_train], labels[:n_train]), (out[n_train:], labels[n_train:])


mnist, fashion_mnist, cifar10, imdb = _MNIST(), _FashionMNIST(), _CIFAR10(), _IMDB()
