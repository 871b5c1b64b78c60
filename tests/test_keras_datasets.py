"""af.keras.datasets read Keras's cache files (tiny generated ones here; nothing is downloaded)."""
from __future__ import annotations

import gzip
import pickle

import numpy as np
import pytest

from actorflow import keras

D = keras.datasets


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    (tmp_path / "datasets").mkdir()
    return tmp_path / "datasets"


def test_missing_file_says_where_to_put_it(home):
    with pytest.raises(FileNotFoundError, match=r"mnist\.npz' not found.*storage\.googleapis"):
        D.mnist.load_data()


def test_mnist_from_the_cache_and_from_an_absolute_path(home, tmp_path):
    rng = np.random.RandomState(0)
    arrays = {"x_train": rng.randint(0, 255, (5, 28, 28)).astype(np.uint8), "y_train": np.arange(5),
              "x_test": rng.randint(0, 255, (2, 28, 28)).astype(np.uint8), "y_test": np.array([7, 8])}
    np.savez(home / "mnist.npz", **arrays)
    (x, y), (xt, yt) = D.mnist.load_data()
    np.testing.assert_array_equal(x, arrays["x_train"])
    np.testing.assert_array_equal(yt, [7, 8])
    other = tmp_path / "elsewhere.npz"
    np.savez(other, **{k: v[:1] for k, v in arrays.items()})
    (x, _), _ = D.mnist.load_data(path=str(other))
    assert x.shape == (1, 28, 28)
    np.savez(home / "bad.npz", x_train=arrays["x_train"])
    with pytest.raises(ValueError, match="lacks the arrays"):
        D.mnist.load_data("bad.npz")


def test_fashion_mnist_idx_files(home):
    d = home / "fashion-mnist"
    d.mkdir()
    rng = np.random.RandomState(1)
    imgs = {"train": rng.randint(0, 255, (3, 28, 28)).astype(np.uint8),
            "t10k": rng.randint(0, 255, (2, 28, 28)).astype(np.uint8)}
    labels = {"train": np.array([1, 2, 3], np.uint8), "t10k": np.array([9, 0], np.uint8)}
    for split in ("train", "t10k"):
        with gzip.open(d / f"{split}-labels-idx1-ubyte.gz", "wb") as f:
            f.write(b"\0" * 8 + labels[split].tobytes())
        with gzip.open(d / f"{split}-images-idx3-ubyte.gz", "wb") as f:
            f.write(b"\0" * 16 + imgs[split].tobytes())
    (x, y), (xt, yt) = D.fashion_mnist.load_data()
    np.testing.assert_array_equal(x, imgs["train"])
    np.testing.assert_array_equal(y, [1, 2, 3])
    np.testing.assert_array_equal(xt, imgs["t10k"])
    np.testing.assert_array_equal(yt, [9, 0])


def test_cifar10_python_batches(home):
    d = home / "cifar-10-batches-py"
    d.mkdir()
    rng = np.random.RandomState(2)
    data = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        arr = rng.randint(0, 255, (2, 3072)).astype(np.uint8)
        data[name] = arr
        with open(d / name, "wb") as f:
            pickle.dump({b"data": arr, b"labels": [1, 2]}, f)
    (x, y), (xt, yt) = D.cifar10.load_data()
    assert x.shape == (10, 32, 32, 3) and y.shape == (10, 1) and xt.shape == (2, 32, 32, 3)
    np.testing.assert_array_equal(x[0], data["data_batch_1"][0].reshape(3, 32, 32).transpose(1, 2, 0))
    # a batch that pickles anything but arrays, lists and dicts is refused
    with open(d / "test_batch", "wb") as f:
        pickle.dump({b"data": data["test_batch"], b"labels": [1, 2], b"x": pickle.UnpicklingError}, f)
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        D.cifar10.load_data()


def test_imdb_processing(home):
    x_train = np.empty(3, dtype=object)
    x_train[:] = [[1, 2, 3], [4, 5], [6, 7, 8, 9]]
    x_test = np.empty(2, dtype=object)
    x_test[:] = [[2, 2], [9]]
    np.savez(home / "imdb.npz", x_train=x_train, y_train=np.array([0, 1, 0]), x_test=x_test,
             y_test=np.array([1, 1]))
    (x, y), (xt, yt) = D.imdb.load_data()
    assert len(x) == 3 and len(xt) == 2
    assert sorted(map(len, x)) == [3, 4, 5]
    # ids shifted by index_from=3 after start_char 1; as in Keras, with num_words unset the
    # largest id itself (9 + 3) falls outside [0, num_words) and becomes oov_char 2
    for seq in list(x) + list(xt):
        assert seq[0] == 1 and all(w >= 4 or w == 2 for w in seq[1:])
    assert sum(w == 2 for s in list(x) + list(xt) for w in s) == 2
    (x, y), _ = D.imdb.load_data(num_words=7, maxlen=4)
    assert all(len(s) < 4 for s in x)
    assert all(w < 7 or w == 2 for s in x for w in s)
    (x, _), _ = D.imdb.load_data(num_words=7, oov_char=None)
    assert all(w < 7 for s in x for w in s)
