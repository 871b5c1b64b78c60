"""kernels/lazy_numba.import_numba's changes to how numba starts: its BLAS check, and loads from
numba's disk cache that skip the target context's full refresh (`_light_cache_loads`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A module of cache=True functions: one that allocates (NRT), one that raises, one calling another.
MODULE = textwrap.dedent('''
    import numpy as np
    from actorflow.kernels.lazy_numba import import_numba
    numba = import_numba()

    @numba.njit(cache=True, nogil=True)
    def scaled(x, k):
        out = np.empty_like(x)
        for i in range(x.size):
            out[i] = x[i] * k
        return out

    @numba.njit(cache=True)
    def checked(n):
        if n < 0:
            raise ValueError("n must not be negative")
        return n + 1

    @numba.njit(cache=True)
    def helper(x):
        return x * 2.0

    @numba.njit(cache=True)
    def calls(x):
        s = 0.0
        for v in x:
            s += helper(v)
        return s
''')

# Loads the cached functions (in a second process), reports what the process imported, then
# compiles something new that needs numba's registries (np.dot, np.linalg.norm).
PROBE = textwrap.dedent('''
    import json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import cachedmod as m
    from numba.core import caching
    x = np.arange(5, dtype=np.float64)
    out = {"scaled": m.scaled(x, 3.0).tolist(), "calls": m.calls(x), "checked": m.checked(4)}
    try:
        m.checked(-1)
    except ValueError as e:
        out["raised"] = str(e)
    out["hits"] = sum(sum(d.stats.cache_hits.values()) for d in (m.scaled, m.checked, m.calls))
    out["misses"] = sum(sum(d.stats.cache_misses.values()) for d in (m.scaled, m.checked, m.calls))
    out["registries_after_loads"] = "numba.np.polynomial.polynomial_core" in sys.modules
    out["light"] = hasattr(caching.Cache.load_overload, "numbas")
    import numba

    @numba.njit
    def fresh(a, b):
        return np.dot(a, b) + np.linalg.norm(a)
    out["fresh"] = float(fresh(x, x))
    print("RESULT " + json.dumps(out))
''')


def _run(tmp_path, env_extra=None):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba-cache"),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env_extra or {}))
    r = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[7:])


@pytest.mark.timeout(600)
def test_functions_loaded_from_the_cache_without_a_full_refresh_work(tmp_path):
    (tmp_path / "cachedmod.py").write_text(MODULE)
    first = _run(tmp_path)                  # compiles and writes the cache
    second = _run(tmp_path)                 # loads from it
    assert first["misses"] == 3 and first["hits"] == 0
    assert second["hits"] == 3 and second["misses"] == 0
    expected = {"scaled": [0.0, 3.0, 6.0, 9.0, 12.0], "calls": 20.0, "checked": 5,
                "raised": "n must not be negative"}
    for run in (first, second):
        for k, v in expected.items():
            assert run[k] == v, (k, run)
        assert run["fresh"] == pytest.approx(30.0 + 30.0 ** 0.5)
    assert second["light"]
    # the loads did not pull in numba's implementations (the refresh they skip imports polynomial_core)
    assert second["registries_after_loads"] is False
    # the first process compiled, which loads them all
    assert first["registries_after_loads"] is True


def test_light_loads_only_for_the_versions_read(monkeypatch):
    from actorflow.kernels import lazy_numba
    numba = lazy_numba.import_numba()
    from numba.core import caching
    current = caching.Cache.load_overload
    numbas = getattr(current, "numbas", current)
    monkeypatch.setattr(caching.Cache, "load_overload", numbas)
    monkeypatch.setattr(numba, "__version__", "0.99.0")
    lazy_numba._light_cache_loads(numba)
    assert caching.Cache.load_overload is numbas
