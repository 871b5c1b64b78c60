"""fractional_max_pool / fractional_avg_pool: the windows and gradient ops against TensorFlow 2.21
(tests/fixtures/make_nn_frac.py: TF's outputs for the sequences it drew, and its gradient ops'
outputs for those sequences), the sequences' shape (steps of k or k + 1 covering the input),
seeded determinism, and gradients through the forward op."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import actorflow as af
from actorflow.graph.ops import nn_frac_ops
from actorflow.kernels.cpu.fractional_pool import pool_with_sequences

FIX = json.loads((pathlib.Path(__file__).parent / "fixtures" / "nn_frac.json").read_text())
X = np.array(FIX["x"], np.float32)
CASES = FIX["cases"]


def _id(c):
    return f"{c['kind']}-{c['ratio'][1]}x{c['ratio'][2]}-pseudo{c['pseudo_random']}-overlap{c['overlapping']}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_windows_and_gradient_ops_match_tensorflow(case):
    rows, cols = np.array(case["rows"]), np.array(case["cols"])
    want = np.array(case["output"], np.float32)
    got = pool_with_sequences(X, rows, cols, case["overlapping"], case["kind"] == "max")
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    g = np.array(case["grad_in"], np.float32)
    with af.Graph().as_default():
        r, c = af.constant(rows, dtype=af.int64), af.constant(cols, dtype=af.int64)
        if case["kind"] == "max":
            dx = nn_frac_ops.FractionalMaxPoolGrad(af.constant(X), af.constant(want), af.constant(g), r, c,
                                                   overlapping=case["overlapping"])
        else:
            dx = nn_frac_ops.FractionalAvgPoolGrad(af.constant(np.array(X.shape, np.int32)), af.constant(g), r, c,
                                                   overlapping=case["overlapping"])
        with af.Session() as s:
            np.testing.assert_allclose(s.run(dx), np.array(case["grad_out"], np.float32), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("pseudo_random", [False, True])
def test_sequences_seeds_and_gradients(pseudo_random):
    with af.Graph().as_default():
        x = af.constant(X)
        out = af.nn.fractional_max_pool(x, [1.0, 1.44, 1.73, 1.0], pseudo_random=pseudo_random, seed=5, seed2=1,
                                        deterministic=True)
        again = af.nn.fractional_max_pool(x, [1.0, 1.44, 1.73, 1.0], pseudo_random=pseudo_random, seed=5, seed2=1,
                                          deterministic=True)
        avg = af.nn.fractional_avg_pool(x, [1.0, 1.5, 1.5, 1.0], pseudo_random=pseudo_random, overlapping=True)
        assert out.output.shape.as_list() == [2, 6, 4, 3] and out.row_pooling_sequence.shape.as_list() == [7]
        grads = af.gradients(af.reduce_sum(out.output * 2.0) + af.reduce_sum(avg.output), x)[0]
        with af.Session() as s:
            y, rows, cols, y2, rows2, av, ar, ac, gx = s.run([*out, again.output, again.row_pooling_sequence, *avg,
                                                              grads])
        np.testing.assert_array_equal(y, y2)
        np.testing.assert_array_equal(rows, rows2)
        for seq, n_in, n_out in ((rows, 9, 6), (cols, 8, 4), (ar, 9, 6), (ac, 8, 5)):
            assert seq[0] == 0 and seq[-1] == n_in and len(seq) == n_out + 1
            assert set(np.diff(seq)) <= {n_in // n_out, n_in // n_out + 1}
        np.testing.assert_allclose(y, pool_with_sequences(X, rows, cols, False, True))
        np.testing.assert_allclose(av, pool_with_sequences(X, ar, ac, True, False), rtol=1e-6)
        # d/dx of 2*sum(max pool): 2 at each window's first maximum (windows do not overlap)
        want = np.zeros_like(X)
        for i in range(len(rows) - 1):
            for j in range(len(cols) - 1):
                win = X[:, rows[i]:rows[i + 1], cols[j]:cols[j + 1]].reshape(2, -1, 3)
                arg = win.argmax(axis=1)
                w = cols[j + 1] - cols[j]
                for b in range(2):
                    for ch in range(3):
                        want[b, rows[i] + arg[b, ch] // w, cols[j] + arg[b, ch] % w, ch] += 2.0
        for i in range(len(ar) - 1):
            for j in range(len(ac) - 1):
                r1, c1 = min(ar[i + 1] + 1, 9), min(ac[j + 1] + 1, 8)
                want[:, ar[i]:r1, ac[j]:c1] += 1.0 / ((r1 - ar[i]) * (c1 - ac[j]))
        np.testing.assert_allclose(gx, want, rtol=1e-6, atol=1e-6)


def test_bad_pooling_ratio_is_an_error():
    with af.Graph().as_default():
        with pytest.raises(Exception, match="pooling_ratio"):
            af.nn.fractional_max_pool(af.constant(X), [2.0, 1.5, 1.5, 1.0])
        with pytest.raises(Exception, match="pooling_ratio"):
            af.nn.fractional_avg_pool(af.constant(X), [1.0, 0.5, 1.5, 1.0])
