"""Seeds the global numpy and `random` generators of a corpus run (benchmarks/compat.py).

Python imports `sitecustomize` at start-up from the path, and the harness puts this directory on
PYTHONPATH for both libraries. Many corpus programs draw their data with unseeded `np.random`
(nlintz's regressions, the GAN noise, word2vec's batches): with AF_COMPAT_SEED set, run k of each
library draws the same data, so what differs between the two sides is the library alone (and the
library's own random ops, whose generators differ between TensorFlow and actorflow).
"""
import os

_seed = os.environ.get("AF_COMPAT_SEED")
if _seed is not None:
    import random

    import numpy as np

    random.seed(int(_seed))
    np.random.seed(int(_seed))
