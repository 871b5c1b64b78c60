"""actorflow's own SGEMM (actorflow/kernels/cpu/sgemm.py), called as the cblas_sgemm it stands in for,
against a float64 product: edge tiles, slices of k, m and n past its blocks, transposes, leading
dimensions wider than the matrix, alpha and beta (C not read when beta is 0), and threads calling it
at once. It runs on any x86-64 CPU (LLVM splits its 16-lane vectors where there is no AVX-512)."""
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actorflow.kernels.cpu import sgemm

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112


def _call(a, b, c, alpha=1.0, beta=0.0, ta=False, tb=False):
    """c = alpha * op(a) @ op(b) + beta * c through the kernel; a, b, c 2-D with unit column stride
    (row blocks or column windows of wider arrays allowed)."""
    m, n = c.shape
    k = a.shape[0] if ta else a.shape[1]
    for x in (a, b, c):
        assert x.strides[1] == 4
    sgemm.sgemm()(ROW_MAJOR, TRANS if ta else NO_TRANS, TRANS if tb else NO_TRANS, m, n, k, alpha,
                  a.ctypes.data, a.strides[0] // 4, b.ctypes.data, b.strides[0] // 4, beta,
                  c.ctypes.data, c.strides[0] // 4)


def _check(m, k, n, ta, tb, alpha, beta, rng, pad=0):
    a_full = rng.standard_normal((k, m + pad) if ta else (m, k + pad)).astype(np.float32)
    b_full = rng.standard_normal((n, k + pad) if tb else (k, n + pad)).astype(np.float32)
    a = a_full[:, :m] if ta else a_full[:, :k]
    b = b_full[:, :k] if tb else b_full[:, :n]
    c_full = rng.standard_normal((m, n + pad)).astype(np.float32)
    c0 = c_full.copy()
    c = c_full[:, :n]
    if beta == 0.0:
        c[...] = np.nan                         # must not be read
    _call(a, b, c, alpha, beta, ta, tb)
    opa = (a.T if ta else a).astype(np.float64)
    opb = (b.T if tb else b).astype(np.float64)
    want = alpha * (opa @ opb) + (beta * c0[:, :n] if beta != 0.0 else 0.0)
    scale = np.abs(opa).max(initial=1.0) * np.abs(opb).max(initial=1.0) * max(k, 1) * abs(alpha) + abs(beta) * 4
    np.testing.assert_allclose(c, want, rtol=0, atol=2e-6 * scale)
    np.testing.assert_array_equal(c_full[:, n:], c0[:, n:])     # the columns past n are untouched


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("shape", [(1, 1, 1), (14, 5, 32), (13, 7, 31), (15, 300, 33), (29, 257, 65),
                                   (100, 513, 77), (170, 40, 300), (3, 1000, 2050)])
def test_matches_a_float64_product(shape, ta, tb):
    rng = np.random.default_rng(hash(shape) % 2**32)
    _check(*shape, ta, tb, 1.0, 0.0, rng)
    _check(*shape, ta, tb, -0.5, 1.0, rng, pad=3)


@pytest.mark.parametrize("alpha, beta", [(1.0, 1.0), (-0.01, 1.0), (2.0, 0.5), (0.5, 0.0)])
def test_alpha_and_beta(alpha, beta):
    rng = np.random.default_rng(7)
    for shape in ((64, 300, 96), (20, 33, 45), (14, 256, 32)):
        _check(*shape, False, False, alpha, beta, rng, pad=5)
        _check(*shape, True, False, alpha, beta, rng)


def test_no_depth_scales_c_by_beta():
    c = np.full((5, 40), 3.0, np.float32)
    a, b = np.zeros((5, 1), np.float32), np.zeros((1, 40), np.float32)
    sgemm.sgemm()(ROW_MAJOR, NO_TRANS, NO_TRANS, 5, 40, 0, 1.0, a.ctypes.data, 1, b.ctypes.data, 40, 0.5,
                  c.ctypes.data, 40)
    np.testing.assert_array_equal(c, 1.5)
    c[...] = np.nan
    sgemm.sgemm()(ROW_MAJOR, NO_TRANS, NO_TRANS, 5, 40, 0, 1.0, a.ctypes.data, 1, b.ctypes.data, 40, 0.0,
                  c.ctypes.data, 40)
    np.testing.assert_array_equal(c, 0.0)


def test_nan_and_inf_propagate_as_in_a_product():
    a = np.ones((20, 40), np.float32)
    b = np.ones((40, 64), np.float32)
    a[3, 7] = np.nan
    b[5, 50] = np.inf
    c = np.zeros((20, 64), np.float32)
    _call(a, b, c)
    want = a.astype(np.float64) @ b
    np.testing.assert_array_equal(np.isnan(c), np.isnan(want))
    np.testing.assert_array_equal(c[~np.isnan(want)], want[~np.isnan(want)])


def test_threads_share_the_kernel():
    """Two threads at once into separate outputs (ctypes releases the GIL; the kernel keeps no state)."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((300, 400)).astype(np.float32)
    b = rng.standard_normal((400, 500)).astype(np.float32)
    outs = [np.zeros((300, 500), np.float32) for _ in range(4)]
    threads = [threading.Thread(target=lambda o=o: [_call(a, b, o) for _ in range(5)]) for o in outs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    want = a.astype(np.float64) @ b
    for o in outs:
        np.testing.assert_allclose(o, want, rtol=0, atol=1e-3)


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 90), k=st.integers(1, 300), n=st.integers(1, 140), ta=st.booleans(), tb=st.booleans(),
       beta=st.sampled_from([0.0, 1.0, -2.0]), pad=st.integers(0, 3), seed=st.integers(0, 2**16))
def test_random_shapes(m, k, n, ta, tb, beta, pad, seed):
    _check(m, k, n, ta, tb, 0.75, beta, np.random.default_rng(seed), pad=pad)
