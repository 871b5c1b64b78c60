"""GPU kernels on CuPy arrays: cuBLAS through CuPy, fused element-wise kernels, and raw CUDA kernels
for convolution windows, pooling and softmax cross-entropy.

Importing this package loads nothing (and needs no CuPy); the registry imports MODULES the first
time a GPU kernel is looked up, which only happens when CuPy sees a CUDA device or a graph asks
for one. Every kernel launches asynchronously on the current CUDA stream and never waits for the
GPU, except where an output's shape depends on input values (DynamicPartition, unique indices of
sparse updates), as in TensorFlow's own GPU kernels.
"""
MODULES = ("copy", "math", "array", "nn", "random", "state", "training")
MODULES += ("sort",)     # TopKV2, Cumsum, Cumprod, ReverseV2 (graph/ops/sort_ops.py)
