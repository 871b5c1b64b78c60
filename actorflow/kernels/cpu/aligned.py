"""Arrays that start on a 64-byte boundary (a cache line; an AVX-512 register's width).

numpy's large arrays come from malloc's mmap path, 16 bytes past a page boundary: a GEMM reading or
writing them does so 16 bytes off every cache line. Measured with MKL's single-threaded SGEMM on
the MLP's 256x1024x1024 product (benchmarks/gemm_align.py): 5.44 ms with every operand on a 64-byte
boundary against 5.60 ms 16 bytes off, about 3% of a training step's GEMM time. TensorFlow aligns
every tensor buffer to 64 bytes for the same reason. Small buffers matter too where a loop runs
over them many times: a static JIT loop's vector loads and stores (scheduler/jit/compile.py) are a
quarter slower 16 bytes off a 32-byte boundary (an LSTM cell's loop took 14 or 18 ms for 10,000
iterations, by where its buffers fell), so it aligns every buffer (`empty(..., small=0)`).
"""
from __future__ import annotations

import numpy as np

__all__ = ["ALIGN", "empty", "aligned"]

ALIGN = 64
_SMALL = 1 << 12        # bytes: below this an array is not worth the extra slice


def empty(shape, dtype, small: int | None = None) -> np.ndarray:
    """``np.empty(shape, dtype)`` starting on an ALIGN-byte boundary; arrays of fewer than `small`
    bytes (default `_SMALL`) as numpy allocates them."""
    dt = np.dtype(dtype)
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    n = 1
    for d in shape:
        n *= d
    nbytes = n * dt.itemsize
    if nbytes < (_SMALL if small is None else small):
        return np.empty(shape, dt)
    raw = np.empty(nbytes + ALIGN, np.uint8)
    off = -raw.ctypes.data % ALIGN
    return raw[off:off + nbytes].view(dt).reshape(shape)


def aligned(x: np.ndarray) -> np.ndarray:
    """`x` itself when it starts on an ALIGN-byte boundary (or is small), else a C-ordered copy that does."""
    if x.nbytes < _SMALL or x.ctypes.data % ALIGN == 0:
        return x
    out = empty(x.shape, x.dtype)
    np.copyto(out, x)
    return out
