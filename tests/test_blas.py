"""The CPU GEMM wrapper (actorflow/kernels/cpu/blas.py) against numpy, MKL or not."""
import numpy as np
import pytest

from actorflow.kernels.cpu import blas


def _views(rng, m, k, n, dtype):
    """(a, b) pairs: contiguous, transposed views, row blocks of wider arrays, size-1 dims."""
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    at = np.ascontiguousarray(a.T).T                     # F-ordered: a transposed view
    bt = np.ascontiguousarray(b.T).T
    wide_a = np.zeros((m, k + 7), dtype)
    wide_a[:, 3:3 + k] = a
    wide_b = np.zeros((k + 5, n + 9), dtype)
    wide_b[2:2 + k, 4:4 + n] = b
    return [(a, b), (at, b), (a, bt), (at, bt), (wide_a[:, 3:3 + k], b), (a, wide_b[2:2 + k, 4:4 + n]),
            (wide_a[:, 3:3 + k], wide_b[2:2 + k, 4:4 + n]), (a[::2], b), (a, b[:, ::3])]


@pytest.fixture(params=["every product", "default threshold"])
def gemm_threshold(request, monkeypatch):
    """Every product through the GEMM library (when there is one), and the default size cut-off."""
    if request.param == "every product":
        monkeypatch.setattr(blas, "_MIN_FLOPS", 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(128, 64, 96), (1, 600, 500), (600, 500, 1), (500, 1, 600), (3, 4, 5)])
def test_matmul_matches_numpy(dtype, shape, gemm_threshold):
    rng = np.random.default_rng(0)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    for a, b in _views(rng, *shape, dtype):
        want = a.astype(np.float64) @ b.astype(np.float64)
        got = blas.matmul(a, b)
        assert got.dtype == dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * shape[1])


def test_matmul_into_row_blocks_of_one_output(gemm_threshold):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((96, 64)).astype(np.float32)
    b = rng.standard_normal((64, 128)).astype(np.float32)
    out = np.full((96, 128), np.nan, np.float32)
    for lo, hi in ((0, 40), (40, 96)):
        assert blas.matmul(a[lo:hi], b, out[lo:hi]).base is not None
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-3)


def test_matmul_falls_back_for_what_gemm_cannot_read(gemm_threshold):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((40, 50))
    b = rng.standard_normal((50, 60))
    np.testing.assert_allclose(blas.matmul(a.astype(np.float32), b), a.astype(np.float32) @ b)   # mixed dtypes
    np.testing.assert_array_equal(blas.matmul(a.astype(np.int64), b.astype(np.int64)),
                                  a.astype(np.int64) @ b.astype(np.int64))
    np.testing.assert_allclose(blas.matmul(a[::-1], b), a[::-1] @ b)                          # negative stride
    big_endian = a.astype(">f8")
    np.testing.assert_allclose(blas.matmul(big_endian, b), a @ b)
    with pytest.raises(ValueError):
        blas.matmul(a, a)                                                                      # shape mismatch


def test_backend_is_named():
    assert blas.backend() in ("mkl", "numpy")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("alpha, beta", [(1.0, 1.0), (-0.01, 1.0), (2.0, 0.5), (0.5, 0.0)])
def test_matmul_alpha_beta_accumulates_into_out(dtype, alpha, beta, gemm_threshold):
    rng = np.random.default_rng(1)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    for a, b in _views(rng, 96, 80, 72, dtype):
        c = rng.standard_normal((a.shape[0], b.shape[1])).astype(dtype)
        want = alpha * (a.astype(np.float64) @ b.astype(np.float64)) + beta * c
        out = c.copy()
        got = blas.matmul(a, b, out, alpha, beta)
        assert got is out
        np.testing.assert_allclose(out, want, rtol=tol, atol=tol * 80)
        # A row block of the output: only those rows change.
        out = c.copy()
        blas.matmul(a[10:40], b, out[10:40], alpha, beta)
        np.testing.assert_allclose(out[10:40], want[10:40], rtol=tol, atol=tol * 80)
        np.testing.assert_array_equal(out[:10], c[:10])
        np.testing.assert_array_equal(out[40:], c[40:])


def test_matmul_beta_needs_an_output():
    a = np.ones((4, 4), np.float32)
    with pytest.raises(ValueError, match="beta"):
        blas._numpy_matmul(a, a, None, 1.0, 1.0)
