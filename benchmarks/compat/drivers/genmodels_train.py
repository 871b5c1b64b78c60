"""hwalsuklee/tensorflow-generative-model-collections as its README runs it (`python main.py
--dataset mnist --gan_type <TYPE> --epoch 1 --batch_size 64`), through a driver: MODEL below names
the model (the corpus entry's patch sets it).

utils.load_mnist reads MNIST's gzipped IDX files, exactly 60,000 training and 10,000 test images:
the driver writes them from the corpus's digits stand-in (shims/input_data.py, 28x28), tiled to
those counts. An epoch is cut to ITERATIONS batches (the models compute `num_batches` in their
constructors; the driver lowers it after), the same for both libraries. scipy 1.12 has no
scipy.misc.imsave, which utils.save_images calls for the sample grids: the driver gives it one
that writes nothing (the figures are the losses the training prints).
"""
import gzip
import os
import runpy
import sys

import input_data
import numpy as np
import scipy.misc
import tensorflow as tf

assert tf  # the library under test; main.py and the models import it themselves

MODEL = "GAN"
ITERATIONS = 30

os.makedirs("data/mnist", exist_ok=True)
mnist = input_data.read_data_sets("unused")
images = np.concatenate([mnist.train.images, mnist.test.images])
labels = np.concatenate([mnist.train.labels, mnist.test.labels])


def write(name, header, payload):
    with gzip.open(os.path.join("data/mnist", name), "wb") as f:
        f.write(np.asarray(header, ">i4").tobytes() + payload.tobytes())


for prefix, count in (("train", 60000), ("t10k", 10000)):
    take = np.arange(count) % len(images)
    write(f"{prefix}-images-idx3-ubyte.gz", [2051, count, 28, 28],
          np.round(images[take] * 255).astype(np.uint8))
    write(f"{prefix}-labels-idx1-ubyte.gz", [2049, count], labels[take].astype(np.uint8))
scipy.misc.imsave = lambda path, image: None

sys.path.insert(0, os.getcwd())
module = __import__(MODEL)
cls = getattr(module, MODEL)
init = cls.__init__


def short_epoch(self, *args, **kwargs):
    init(self, *args, **kwargs)
    self.num_batches = min(self.num_batches, ITERATIONS)


cls.__init__ = short_epoch
sys.argv = ["main.py", "--dataset", "mnist", "--gan_type", MODEL, "--epoch", "1", "--batch_size", "64"]
runpy.run_path("main.py", run_name="__main__")
