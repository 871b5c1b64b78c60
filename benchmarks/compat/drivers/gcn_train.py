"""Kipf and Welling's graph convolutional network, tkipf/gcn's train.py as its README runs it
(`cd gcn; python train.py`: Cora, 200 epochs, early stopping), through a driver that lays its files out
as the repository has them: the package `gcn` beside train.py, the Cora files in data/.

scipy 1.12 removed the module path `scipy.sparse.linalg.eigen.arpack` that gcn/utils.py imports eigsh
from; the driver maps it to scipy.sparse.linalg, where eigsh lives (the same for both libraries).
TF's Python needs networkx (the data loader builds the graph with it).
"""
import glob
import os
import runpy
import shutil
import sys
import types

import scipy.sparse.linalg
import tensorflow as tf

assert tf  # the library under test; train.py and the gcn package import it themselves

os.makedirs("data", exist_ok=True)
for name in glob.glob("ind.cora.*"):
    shutil.move(name, os.path.join("data", name))
sys.modules["scipy.sparse.linalg.eigen"] = types.ModuleType("scipy.sparse.linalg.eigen")
sys.modules["scipy.sparse.linalg.eigen.arpack"] = scipy.sparse.linalg
runpy.run_path("train.py", run_name="__main__")
