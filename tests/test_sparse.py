"""SparseTensor and the sparse ops against TensorFlow 2.21's values and gradients
(tests/fixtures/make_sparse.py); feeding and fetching sparse values; errors."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from tests import tf_reference

FIX = tf_reference.load("sparse.json")


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_and_gradients_match_tensorflow(expr):
    tf_reference.check(FIX, expr)


def test_feeding_and_fetching_sparse_values():
    with af.Graph().as_default():
        sp = af.sparse_placeholder(af.float32, name="sp")
        assert [t.op.name for t in sp] == ["sp/indices", "sp/values", "sp/shape"]
        fixed = af.sparse_placeholder(af.float32, shape=[2, 3])
        dense = af.sparse.to_dense(sp)
        value = af.SparseTensorValue([[0, 2], [1, 0]], np.array([1.5, -2.0], np.float32), [2, 3])
        with af.Session() as s:
            np.testing.assert_array_equal(s.run(dense, {sp: value}), [[0, 0, 1.5], [-2.0, 0, 0]])
            got = s.run(sp, {sp: ([[1, 1]], [3.0], [2, 2])})
            assert isinstance(got, af.SparseTensorValue)
            np.testing.assert_array_equal(got.indices, [[1, 1]])
            assert got.dense_shape.tolist() == [2, 2] and fixed.shape.as_list() == [2, 3]
            back = s.run(af.sparse.from_dense(af.constant([[0, 7], [8, 0]])))
            assert back.indices.tolist() == [[0, 1], [1, 0]] and back.values.tolist() == [7, 8]


def test_bad_sparse_input_is_named():
    with af.Graph().as_default():
        sp = af.sparse_placeholder(af.float32, name="sp")
        dense = af.sparse_tensor_to_dense(sp)
        prod = af.sparse_tensor_dense_matmul(sp, af.ones([5, 2]))
        with af.Session() as s:
            with pytest.raises(af.errors.InvalidArgumentError, match=r"indices\[1\] = \[0, 1\] is out of order"):
                s.run(dense, {sp: ([[1, 0], [0, 1]], [1.0, 2.0], [2, 2])})
            with pytest.raises(af.errors.InvalidArgumentError, match="out of bounds"):
                s.run(dense, {sp: ([[3, 0]], [1.0], [2, 2])})
            with pytest.raises(af.errors.InvalidArgumentError, match="inner dimension does not match: 4 vs. 5"):
                s.run(prod, {sp: ([[0, 0]], [1.0], [2, 4])})
        with pytest.raises(TypeError, match="must be a SparseTensor"):
            af.sparse_tensor_to_dense(af.constant([1.0]))


@pytest.mark.parametrize("adj_a,adj_b", [(False, False), (True, False), (False, True), (True, True)])
def test_sparse_dense_matmul_sums_each_row_in_the_nonzeros_order(adj_a, adj_b):
    """The compiled loop adds the products in the nonzeros' order, as TF's kernel (and np.add.at) do:
    the same float32 bits, repeated indices included."""
    rng = np.random.RandomState(0)
    idx = np.concatenate([rng.randint(0, 7, (40, 1)), rng.randint(0, 5, (40, 1))], axis=1).astype(np.int64)
    idx = np.concatenate([idx, idx[:6]])                 # repeated entries add up
    vals = rng.randn(len(idx)).astype(np.float32)
    b = rng.randn(3, 7 if adj_a else 5).astype(np.float32) if adj_b else \
        rng.randn(7 if adj_a else 5, 3).astype(np.float32)
    sp = af.SparseTensor(idx, vals, [7, 5])
    out = af.sparse_tensor_dense_matmul(sp, af.constant(b), adjoint_a=adj_a, adjoint_b=adj_b)
    with af.Session() as sess:
        got = sess.run(out)
    r, c = (idx[:, 1], idx[:, 0]) if adj_a else (idx[:, 0], idx[:, 1])
    bb = b.T if adj_b else b
    want = np.zeros((5 if adj_a else 7, 3), np.float32)
    np.add.at(want, r, vals[:, None] * bb[c])
    np.testing.assert_array_equal(got, want)
