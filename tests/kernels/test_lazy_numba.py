"""kernels.lazy_numba: kernel modules load without numba; numba comes in with the first loop that runs."""
import subprocess
import sys
import textwrap

import numpy as np


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
