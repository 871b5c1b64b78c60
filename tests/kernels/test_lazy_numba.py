"""kernels.lazy_numba: kernel modules load without numba; numba comes in with the first loop that runs."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_numpy_graph_never_imports_numba():
    # Every CPU kernel module is loaded by the first lookup; none of them imports numba by itself.
    out = _run("""
        import sys, numpy as np, actorflow as af
        x = af.placeholder(af.float32, [None], name="x")
        y = af.reduce_sum(af.reshape(x * 2.0 + 1.0, [-1, 1]))
        with af.Session() as s:
            print(s.run(y, {x: np.arange(4, dtype=np.float32)}), "numba" in sys.modules)
        """)
    assert out == "16.0 False"


def test_first_loop_imports_numba_and_rebinds_callers():
    # A jitted function that calls another jitted function compiles: the callee's stand-in was rebound to
    # its dispatcher in the module's globals before numba resolved it.
    out = _run("""
        import sys
        from actorflow.kernels.lazy_numba import njit, uintp

        @njit(cache=False)
        def inner(a):
            return a * 2

        @njit
        def outer(a):
            return inner(a) + uintp(1)

        assert "numba" not in sys.modules
        print(outer(20), type(inner).__name__, "numba" in sys.modules)
        """)
    assert out == "41 CPUDispatcher True"


def test_stand_in_forwards_dispatcher_attributes():
    from actorflow.kernels.lazy_numba import njit

    @njit
    def twice(a):
        return a + a

    assert twice(np.float64(1.5)) == 3.0
    assert twice.py_func(2) == 4 and len(twice.signatures) == 1


def test_jit_pass_that_finds_nothing_to_compile_never_imports_numba():
    # With global_jit_level ON_1 the JIT pass looks at every plan (the initializer's too); a plan without a
    # cluster (a GEMM, a variable, a reshape) must not pay for importing numba.
    out = _run("""
        import sys, numpy as np, actorflow as af
        cfg = af.ConfigProto(graph_options=af.GraphOptions(
            optimizer_options=af.OptimizerOptions(global_jit_level=af.OptimizerOptions.ON_1)))
        x = af.placeholder(af.float32, [None, 3], name="x")
        w = af.Variable(np.ones((3, 2), np.float32), name="w")
        y = af.reshape(af.matmul(x, w), [-1])
        with af.Session(config=cfg) as s:
            s.run(af.global_variables_initializer())
            print(s.run(y, {x: np.ones((2, 3), np.float32)}), "numba" in sys.modules)
        """)
    assert out == "[3. 3. 3. 3.] False"


def test_first_loop_checks_blas_without_importing_scipy_linalg():
    # numba's target setup asks whether BLAS is there by importing scipy.linalg (0.13-0.2 s); import_numba
    # answers the same question without it, and numba's own check is back in place afterwards.
    out = _run("""
        import sys
        from actorflow.kernels.lazy_numba import import_numba, njit

        @njit(cache=False)
        def add(a):
            return a + 1.0

        print(add(1.0), "scipy.linalg" in sys.modules, end=" ")
        import numba.np.arraymath as am, numba.np.linalg as la
        print(am._HAVE_BLAS, am.ensure_blas is la.ensure_blas, la.ensure_blas.__module__, end=" ")
        try:
            import scipy.linalg.cython_blas
            print("scipy-blas")
        except ImportError:
            print("no-scipy-blas")
        """)
    value, linalg_loaded, have_blas, same, module, scipy_blas = out.split()
    assert (value, linalg_loaded, same, module) == ("2.0", "False", "True", "numba.np.linalg")
    assert have_blas == str(scipy_blas == "scipy-blas")


def test_numbas_blas_still_works_in_jitted_code():
    # np.dot in a jitted function: numba's own ensure_blas runs when it compiles, and imports scipy.linalg then.
    pytest.importorskip("scipy.linalg")
    out = _run("""
        import numpy as np
        from actorflow.kernels.lazy_numba import import_numba, njit
        import_numba()

        @njit(cache=False)
        def dot(a, b):
            return np.dot(a, b)

        a = np.arange(6.0).reshape(2, 3)
        print(np.array_equal(dot(a, a.T), a @ a.T))
        """)
    assert out == "True"
