"""The CPU GEMM wrapper (actorflow/kernels/cpu/blas.py) against numpy, through each GEMM library
that is installed (MKL, numpy's OpenBLAS), actorflow's own SGEMM (kernels/cpu/sgemm.py: alone, so
that every float32 product goes through it, and beside OpenBLAS as auto sets it up) and through
numpy alone."""
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


@pytest.fixture(autouse=True, params=["mkl", "openblas", "mkl+openblas", "numpy", "actorflow", "actorflow+openblas"])
def gemm_library(request, monkeypatch):
    """Every test of this module through each library, through MKL with OpenBLAS for narrow
    products, and through actorflow's SGEMM (skipped where a library is not installed)."""
    libs = {}
    f32 = np.dtype(np.float32)
    for name in request.param.split("+"):
        if name == "actorflow":
            libs[name] = {f32: blas._load_own(required=True)}
        elif name != "numpy":
            libs[name] = blas._load_mkl() if name == "mkl" else blas._load_openblas()
            if libs[name] is None:
                pytest.skip(f"{name} is not installed")
    fns = list(libs.values())
    if request.param == "actorflow+openblas":        # as _load sets it up
        fns = [{**fns[1], f32: fns[0][f32]}, {f32: fns[1][f32]}]
    monkeypatch.setattr(blas, "_gemm", fns[0] if fns else {})
    monkeypatch.setattr(blas, "_narrow", fns[1] if len(fns) > 1 else {})
    monkeypatch.setattr(blas, "_backend", request.param)
    monkeypatch.setattr(blas, "_weigh", False)
    return request.param


@pytest.fixture(params=["every product", "default threshold"])
def gemm_threshold(request, monkeypatch):
    """Every product through the GEMM library (when there is one), and the default size cut-off."""
    if request.param == "every product":
        monkeypatch.setattr(blas, "_MIN_FLOPS", 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(128, 64, 96), (1, 600, 500), (600, 500, 1), (500, 1, 600), (3, 4, 5),
                                   (256, 300, 10), (300, 256, 31)])
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


def test_backend_is_named(gemm_library):
    assert blas.backend() == gemm_library


@pytest.mark.parametrize("choice", ["auto", "mkl", "openblas", "numpy", "actorflow"])
def test_af_blas_chooses_the_library(choice, monkeypatch):
    monkeypatch.setenv("AF_BLAS", choice)
    try:
        name, fns, narrow = blas._load()
    except RuntimeError as e:                      # a named library that is not installed
        assert choice in ("mkl", "openblas") and choice in str(e)
        return
    own = name.startswith("actorflow+")
    library = name.removeprefix("actorflow+")
    if choice in ("auto", "actorflow"):
        assert library in ("mkl", "openblas", "mkl+openblas", "numpy")
        if blas.cpu_vendor() == "GenuineIntel":
            assert library != "mkl+openblas"
        elif blas._load_mkl() is not None and blas._load_openblas() is not None:
            assert library in ("mkl+openblas", "openblas")     # whichever measured the faster here
        assert own == (choice == "actorflow" or (own and blas.avx512()))
    else:
        assert name == choice
    f32 = np.dtype(np.float32)
    if own:      # float32 products through actorflow's SGEMM, the small ones through the library
        from actorflow.kernels.cpu import sgemm
        assert fns[f32] is sgemm.sgemm()
        assert narrow.get(f32) is not None or library == "numpy"
    else:
        assert (fns == {}) == (name == "numpy")
        assert bool(narrow) == (name == "mkl+openblas")


def test_auto_keeps_the_library_that_measured_faster(monkeypatch):
    """Off Intel, with MKL and OpenBLAS both installed, auto keeps the one whose SGEMM measured the
    faster (MKL with OpenBLAS for narrow products, or OpenBLAS alone)."""
    mkl, openblas = blas._load_mkl(), blas._load_openblas()
    if mkl is not None and openblas is not None:
        assert blas._faster(mkl, openblas) in ("mkl", "openblas")        # the measurement itself runs
    fake_mkl, fake_openblas = {np.dtype(np.float32): "mkl"}, {np.dtype(np.float32): "openblas"}
    monkeypatch.setenv("AF_BLAS", "auto")
    monkeypatch.setattr(blas, "cpu_vendor", lambda: "AuthenticAMD")
    monkeypatch.setattr(blas, "_load_mkl", lambda: fake_mkl)
    monkeypatch.setattr(blas, "_load_openblas", lambda: fake_openblas)
    monkeypatch.setattr(blas, "avx512", lambda: False)          # (actorflow's SGEMM: the test below)
    for winner, want in (("openblas", "openblas"), ("mkl", "mkl+openblas")):
        monkeypatch.setattr(blas, "_faster", lambda m, o, w=winner: w)
        name, fns, narrow = blas._load()
        assert name == want and fns is (fake_openblas if winner == "openblas" else fake_mkl)
        assert narrow == ({} if winner == "openblas" else fake_openblas)


def test_auto_takes_actorflows_sgemm_where_it_measured_faster(monkeypatch):
    """On an AVX-512 CPU, auto puts float32 products through actorflow's SGEMM when it measured faster
    than the library (which keeps float64 and the narrow products), and keeps the library otherwise;
    without AVX-512 it does not try."""
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    fake = {f32: "openblas32", f64: "openblas64"}
    monkeypatch.setenv("AF_BLAS", "auto")
    monkeypatch.setattr(blas, "_load_mkl", lambda: None)
    monkeypatch.setattr(blas, "_load_openblas", lambda: fake)
    monkeypatch.setattr(blas, "_load_own", lambda required=False: "own32")
    monkeypatch.setattr(blas, "avx512", lambda: True)
    for winner in ("actorflow", "openblas"):
        monkeypatch.setattr(blas, "_fastest", lambda fns, w=winner: w)
        name, fns, narrow = blas._load()
        if winner == "actorflow":
            assert (name, fns, narrow) == ("actorflow+openblas", {f32: "own32", f64: "openblas64"}, {f32: "openblas32"})
        else:
            assert (name, fns, narrow) == ("openblas", fake, {})
    monkeypatch.setattr(blas, "avx512", lambda: False)
    monkeypatch.setattr(blas, "_fastest", lambda fns: pytest.fail("measured without AVX-512"))
    assert blas._load()[0] == "openblas"


def test_actorflows_sgemm_is_weighed_on_the_first_float32_product_it_could_take(monkeypatch):
    """The runtime's start loads the library only (numba stays out: tests/kernels/test_lazy_numba.py);
    the weighing comes with the first float32 product that actorflow's SGEMM could take."""
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    calls, weighed = [], []

    def spy(name):
        def f(*args):
            calls.append(name)
        return f
    library = {f32: spy("library32"), f64: spy("library64")}

    def with_own(name, gemm, narrow, weigh):
        weighed.append(name)
        return "actorflow+openblas", {**gemm, f32: spy("own")}, {f32: gemm[f32]}
    monkeypatch.setattr(blas, "_gemm", library)
    monkeypatch.setattr(blas, "_narrow", {})
    monkeypatch.setattr(blas, "_backend", "openblas")
    monkeypatch.setattr(blas, "_weigh", True)
    monkeypatch.setattr(blas, "_with_own", with_own)
    a = np.ones((256, 512), np.float32)
    blas.matmul(a, np.ones((512, 10), np.float32))                  # narrow: the library, not weighed
    blas.matmul(a.astype(np.float64), np.ones((512, 512)))          # float64: the library
    assert weighed == [] and calls == ["library32", "library64"]
    blas.matmul(a, np.ones((512, 512), np.float32))
    blas.matmul(a, np.ones((512, 512), np.float32))
    blas.matmul(a, np.ones((512, 10), np.float32))
    assert weighed == ["openblas"] and blas.backend() == "actorflow+openblas"
    assert calls == ["library32", "library64", "own", "own", "library32"]
    # Kernels that call cblas themselves (Winograd's small products) get actorflow's for float32
    blas.cblas_gemm(np.float32)(0)
    blas.cblas_gemm(np.float64)(0)
    assert calls[-2:] == ["own", "library64"]


def test_narrow_products_go_to_the_second_library(monkeypatch):
    calls = []

    def spy(name):
        def f(*args):
            calls.append((name, args[3], args[4], args[5]))   # m, n, k
        return f
    monkeypatch.setattr(blas, "_gemm", {np.dtype(np.float32): spy("wide")})
    monkeypatch.setattr(blas, "_narrow", {np.dtype(np.float32): spy("narrow")})
    a = np.ones((256, 1024), np.float32)
    blas.matmul(a, np.ones((1024, 10), np.float32))
    blas.matmul(a, np.ones((1024, 32), np.float32))
    blas.matmul(a.T, np.ones((256, 10), np.float32), np.zeros((1024, 10), np.float32), 1.0, 1.0)
    blas.matmul(a[:3], np.ones((1024, 512), np.float32))         # fewer than 4 rows
    blas.matmul(a[:64, :64], np.ones((64, 64), np.float32))      # under 2^20 multiply-adds
    blas.matmul(a[:4, :512], np.ones((512, 512), np.float32))
    assert calls == [("narrow", 256, 10, 1024), ("wide", 256, 32, 1024), ("narrow", 1024, 10, 256),
                     ("narrow", 3, 512, 1024), ("narrow", 64, 64, 64), ("wide", 4, 512, 512)]


def test_af_blas_rejects_an_unknown_library(monkeypatch):
    monkeypatch.setenv("AF_BLAS", "atlas")
    with pytest.raises(ValueError, match="AF_BLAS"):
        blas._load()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("alpha, beta", [(1.0, 1.0), (-0.01, 1.0), (2.0, 0.5), (0.5, 0.0)])
def test_matmul_alpha_beta_accumulates_into_out(dtype, alpha, beta, gemm_threshold):
    rng = np.random.default_rng(1)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    for a, b in _views(rng, 96, 80, 72, dtype) + _views(rng, 120, 90, 10, dtype):
        c = rng.standard_normal((a.shape[0], b.shape[1])).astype(dtype)
        want = alpha * (a.astype(np.float64) @ b.astype(np.float64)) + beta * c
        out = c.copy()
        got = blas.matmul(a, b, out, alpha, beta)
        assert got is out
        np.testing.assert_allclose(out, want, rtol=tol, atol=tol * 90)
        # A row block of the output: only those rows change.
        out = c.copy()
        blas.matmul(a[10:40], b, out[10:40], alpha, beta)
        np.testing.assert_allclose(out[10:40], want[10:40], rtol=tol, atol=tol * 90)
        np.testing.assert_array_equal(out[:10], c[:10])
        np.testing.assert_array_equal(out[40:], c[40:])


def test_matmul_beta_needs_an_output():
    a = np.ones((4, 4), np.float32)
    with pytest.raises(ValueError, match="beta"):
        blas._numpy_matmul(a, a, None, 1.0, 1.0)


def test_a_session_prepares_actorflows_sgemm_only_for_products_it_may_take(monkeypatch):
    """A session whose graph has a float32 product that actorflow's SGEMM may take starts loading it
    when it is created (blas.prepare); small, narrow and float64 products do not."""
    import actorflow as af
    calls = []
    monkeypatch.setattr(blas, "prepare", lambda: calls.append(True))
    monkeypatch.setattr(blas, "_weigh", True)          # not yet weighed (once it is, nothing is scanned)
    cases = [((None, 784), (784, 1024), af.float32, True), ((None, 3), (3, 2), af.float32, False),
             ((256, 1024), (1024, 10), af.float32, False), ((64, 64), (64, 64), af.float32, False),
             ((None, 784), (784, 1024), af.float64, False)]
    for ashape, bshape, dtype, want in cases:
        g = af.Graph()
        with g.as_default():
            x = af.placeholder(dtype, ashape)
            af.matmul(x, af.ones(bshape, dtype))
        calls.clear()
        af.Session(graph=g).close()
        assert bool(calls) == want, (ashape, bshape, dtype)
    g = af.Graph()
    with g.as_default():
        af.nn.conv2d(af.placeholder(af.float32, [None, 28, 28, 1]), af.ones([5, 5, 1, 32]), [1, 1, 1, 1], "SAME")
    calls.clear()
    af.Session(graph=g).close()
    assert calls
