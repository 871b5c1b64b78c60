"""Buffers on a 64-byte boundary (kernels/cpu/aligned.py): what the GEMM kernels allocate, and
variables' copies."""
import numpy as np
import pytest

import actorflow as af
from actorflow.actors.resource import new_buffer
from actorflow.kernels.cpu import aligned
from actorflow.kernels.cpu.blas import matmul


@pytest.mark.parametrize("shape,dtype", [((256, 1024), np.float32), ((3, 5, 700), np.float64), (5000, np.int32),
                                         ((0, 2048), np.float32), ((4,), np.float32)])
def test_empty_has_the_shape_and_dtype_and_starts_on_a_cache_line(shape, dtype):
    x = aligned.empty(shape, dtype)
    want = shape if isinstance(shape, tuple) else (shape,)
    assert x.shape == want and x.dtype == dtype and x.flags.c_contiguous and x.flags.writeable
    if x.nbytes >= 4096:
        assert x.ctypes.data % aligned.ALIGN == 0
    x[...] = 7                                  # the whole buffer is ours
    assert (x == 7).all()


def test_aligned_copies_only_what_is_off_a_boundary():
    raw = np.empty(64 * 1024 + 128, np.uint8)
    start = -raw.ctypes.data % 64
    on = raw[start:start + 64 * 1024].view(np.float32)
    off = raw[start + 16:start + 16 + 64 * 1024 - 64].view(np.float32)
    off[:] = np.arange(off.size)
    assert aligned.aligned(on) is on
    got = aligned.aligned(off)
    assert got is not off and got.ctypes.data % 64 == 0
    np.testing.assert_array_equal(got, off)


def test_gemm_outputs_and_variable_copies_are_aligned():
    a = np.random.default_rng(0).standard_normal((256, 300)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((300, 200)).astype(np.float32)
    out = matmul(a, b)
    assert out.ctypes.data % 64 == 0
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-4)
    v = new_buffer(b[1:])                       # a copy of a view 1,200 bytes in
    assert v.ctypes.data % 64 == 0 and v.flags.c_contiguous
    np.testing.assert_array_equal(v, b[1:])
    assert new_buffer(3.5) == 3.5               # not only arrays


def test_a_split_matmul_in_a_session_writes_an_aligned_output():
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [512, 256])
        w = af.constant(np.ones((256, 512), np.float32))
        y = af.matmul(x, w)
    with af.Session(graph=g) as s:
        got = s.run(y, {x: np.ones((512, 256), np.float32)})
    assert got.ctypes.data % 64 == 0
    np.testing.assert_array_equal(got, np.full((512, 512), 256, np.float32))
