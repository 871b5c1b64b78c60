"""Random ops: seeds (tf.compat.v1's get_seed rules), inference, distributions and reproducibility."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from actorflow.graph.ops import random_ops
from tests.conftest import run

pytestmark = pytest.mark.usefixtures("graph")


def _random_op(t):
    """The random op feeding a wrapper's output (through the scaling arithmetic)."""
    stack = [t.op]
    while stack:
        op = stack.pop()
        if op.op_def.stateful:
            return op
        stack.extend(i.op for i in op.inputs)
    raise AssertionError(f"no random op behind {t}")


# ---------------------------------------------------------------------------------------------
# Seeds
# ---------------------------------------------------------------------------------------------

def test_get_seed_rules(graph):
    assert af.get_seed(None) == (None, None)
    assert af.get_seed(7) == (random_ops.DEFAULT_GRAPH_SEED, 7)
    af.set_random_seed(42)
    assert graph.seed == 42
    assert af.get_seed(7) == (42, 7)
    s1 = af.get_seed(None)
    for _ in range(5):
        af.constant(1.0)                                # other ops do not move the op seeds
    s2 = af.get_seed(None)
    assert (s1, s2) == ((42, 0), (42, 1))               # TF 2's count of seeds drawn in the graph
    af.set_random_seed(0)
    assert af.get_seed(0) == (0, 2**31 - 1)             # (0, 0) would mean "non-deterministic"
    af.set_random_seed(2**31 + 5)
    assert af.get_seed(2**32) == (6, 2)                  # truncated modulo 2**31 - 1, as in TF


def test_seed_attrs_on_ops(graph):
    unseeded = _random_op(af.random_normal([2]))
    assert (unseeded.attrs["seed"], unseeded.attrs["seed2"]) == (0, 0)
    op_seeded = _random_op(af.random_uniform([2], seed=3))
    assert (op_seeded.attrs["seed"], op_seeded.attrs["seed2"]) == (random_ops.DEFAULT_GRAPH_SEED, 3)
    af.set_random_seed(9)
    a, b = _random_op(af.truncated_normal([2])), _random_op(af.truncated_normal([2]))
    assert a.attrs["seed"] == b.attrs["seed"] == 9 and a.attrs["seed2"] != b.attrs["seed2"]
    assert all(op.op_def.stateful for op in (unseeded, op_seeded, a, b))


def test_graph_seed_serializes(graph):
    af.set_random_seed(123)
    af.random_normal([3])
    assert af.Graph.from_msgpack(graph.to_msgpack()).seed == 123


# ---------------------------------------------------------------------------------------------
# Inference and argument checks
# ---------------------------------------------------------------------------------------------

def test_shapes_and_dtypes():
    assert af.random_normal([2, 3]).shape.dims == (2, 3)
    assert af.random_normal((4,), dtype=af.float64).dtype is af.float64
    assert af.truncated_normal(af.TensorShape([5, 1])).shape.dims == (5, 1)
    n = af.placeholder(af.int32, [])
    assert af.random_uniform([n, 3]).shape.dims == (None, 3)
    assert af.random_uniform(af.placeholder(af.int32, [2])).shape.dims == (None, None)
    i = af.random_uniform([4], maxval=10, dtype=af.int64)
    assert i.dtype is af.int64 and i.op.type == "RandomUniformInt"
    assert af.random_uniform([], dtype=af.float64).shape.dims == ()


def test_argument_errors():
    with pytest.raises(ValueError, match="Must specify maxval"):
        af.random_uniform([2], dtype=af.int32)
    with pytest.raises(ValueError, match="Invalid dtype"):
        af.random_uniform([2], maxval=3, dtype=af.uint8)
    with pytest.raises(ValueError, match="minval < maxval"):
        af.random_uniform([2], minval=5, maxval=5, dtype=af.int32)
    with pytest.raises(ValueError, match=r"floating-point.*RandomStandardNormal"):
        random_ops.RandomStandardNormal(af.constant([2]), dtype=af.int32, seed=0, seed2=0)
    with pytest.raises(ValueError, match="1-D"):
        random_ops.RandomUniform(af.constant([[2]]), dtype=af.float32, seed=0, seed2=0)
    with pytest.raises(TypeError, match="integer"):
        af.random_normal(af.constant([2.0]))


# ---------------------------------------------------------------------------------------------
# Distributions
# ---------------------------------------------------------------------------------------------

def test_distributions():
    n = 200_000
    normal, uniform, trunc, ints, uniform64 = run([
        af.random_normal([n], mean=2.0, stddev=3.0, seed=1),
        af.random_uniform([n], minval=-1.0, maxval=3.0, seed=2),
        af.truncated_normal([n], mean=1.0, stddev=0.5, seed=3),
        af.random_uniform([n], minval=-3, maxval=4, dtype=af.int32, seed=4),
        af.random_uniform([n], dtype=af.float64, seed=5),
    ])
    assert normal.dtype == np.float32 and uniform64.dtype == np.float64 and ints.dtype == np.int32
    assert abs(normal.mean() - 2.0) < 0.05 and abs(normal.std() - 3.0) < 0.05
    assert uniform.min() >= -1.0 and uniform.max() < 3.0 and abs(uniform.mean() - 1.0) < 0.02
    assert 0.0 <= uniform64.min() and uniform64.max() < 1.0
    assert trunc.min() >= 0.0 and trunc.max() <= 2.0
    # A normal truncated at two standard deviations has a std of about 0.8796 of the original.
    assert abs(trunc.std() - 0.5 * 0.8796) < 0.01 and abs(trunc.mean() - 1.0) < 0.01
    assert set(np.unique(ints).tolist()) == set(range(-3, 4))
    counts = np.bincount(ints + 3)
    assert counts.min() > n / 7 * 0.95


def test_tensor_bounds_and_shape():
    lo = af.placeholder(af.float32, [])
    dim = af.placeholder(af.int32, [])
    x = af.random_uniform([dim, 2], minval=lo, maxval=lo + 1.0, seed=1)
    out = run(x, {lo: 10.0, dim: 500})
    assert out.shape == (500, 2) and out.min() >= 10.0 and out.max() < 11.0


# ---------------------------------------------------------------------------------------------
# Reproducibility
# ---------------------------------------------------------------------------------------------

def _build_program():
    af.set_random_seed(1234)
    return [af.random_normal([50]), af.random_uniform([50]), af.truncated_normal([50]),
            af.random_uniform([50], maxval=1000, dtype=af.int64)]


def test_graph_seed_reproducible_across_sessions_and_graphs():
    ts = _build_program()
    first, second = run(ts), run(ts)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    g2 = af.Graph()
    with g2.as_default():
        ts2 = _build_program()
        with af.Session(graph=g2) as sess:
            third = sess.run(ts2)
    for a, b in zip(first, third):
        np.testing.assert_array_equal(a, b)
    # Distinct ops draw distinct streams.
    assert not np.array_equal(first[0], run(af.random_normal([50])))


def test_op_seed_reproducible_and_distinct():
    a = af.random_normal([100], seed=7)
    b = af.random_normal([100], seed=7)
    c = af.random_normal([100], seed=8)
    va, vb, vc = run([a, b, c])
    # Same op seed without a graph seed: the same stream, as in TF.
    np.testing.assert_array_equal(va, vb)
    assert not np.array_equal(va, vc)
    np.testing.assert_array_equal(run(a), va)


def test_stream_continues_within_a_session_and_unseeded_differs():
    x = af.random_uniform([20], seed=5)
    with af.Session() as sess:
        first, second = sess.run(x), sess.run(x)
    assert not np.array_equal(first, second)
    u = af.random_uniform([20])
    assert not np.array_equal(run(u), run(u))


def test_same_op_fetched_once_per_step():
    x = af.random_normal([10], seed=3)
    y = x * 2.0
    vx, vy = run([x, y])
    np.testing.assert_allclose(vy, vx * 2)
