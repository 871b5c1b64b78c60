"""The SparseTensor ops (graph/ops/sparse_math_ops.py, sparse_manip_ops.py) against TensorFlow 2.21's
values and gradients (tests/fixtures/make_sparse_ops.py), over ordered, unordered and empty
SparseTensors; TF's serialized bytes both ways; errors that name the op."""
from __future__ import annotations

import base64

import numpy as np
import pytest

import actorflow as af
from tests import tf_reference

FIX = tf_reference.load("sparse_ops.json")


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_and_gradients_match_tensorflow(expr):
    tf_reference.check(FIX, expr)


def _setup_env():
    env = {"tf": af, "np": np}
    env.update(tf_reference.inputs(FIX))
    exec(FIX["setup"], env)  # noqa: S102 (the fixture's own code)
    return env


@pytest.mark.parametrize("key", list(FIX["serialized"]))
def test_serialized_bytes_match_tensorflow_both_ways(key):
    case = FIX["serialized"][key]
    want = np.array([base64.b64decode(x) for x in case["base64"]], dtype=object).reshape(case["shape"])
    with af.Graph().as_default():
        env = _setup_env()
        ser = eval(case["expr"], env)  # noqa: S307 (the fixture's own expressions)
        sp = eval(case["expr"].split("(", 1)[1].rsplit(")", 1)[0], env)  # noqa: S307 (its SparseTensor)
        back = (af.io.deserialize_many_sparse(want, sp.dtype) if len(case["shape"]) == 2
                else af.io.deserialize_sparse(want, sp.dtype))
        with af.Session() as s:
            got = s.run(ser)
            assert got.shape == want.shape and got.tolist() == want.tolist()
            orig, dec = s.run([sp, back])
        if len(case["shape"]) == 1:     # serialize_sparse: the SparseTensor as it was
            for x, y in zip(orig, dec):
                np.testing.assert_array_equal(x, y)
        else:                           # serialize_many_sparse: the same dense tensor
            dense = np.zeros(orig.dense_shape, orig.values.dtype)
            dense[tuple(orig.indices.T)] = orig.values
            rebuilt = np.zeros(dec.dense_shape, dec.values.dtype)
            rebuilt[tuple(dec.indices.T)] = dec.values
            np.testing.assert_array_equal(dense, rebuilt)


def _run(fetch, feeds):
    with af.Session() as s:
        return s.run(fetch, feeds)


def test_sparse_fed_at_run_time_errors_name_the_op():
    with af.Graph().as_default():
        x = af.sparse_placeholder(af.float32, name="x")
        y = af.sparse_placeholder(af.float32, name="y")
        two_by_two = ([[0, 0], [1, 1]], [1.0, 2.0], [2, 2])
        two_by_three = ([[0, 0]], [1.0], [2, 3])
        rank3 = ([[0, 0, 0]], [1.0], [2, 2, 1])
        cases = [
            (af.sparse_add(x, y), "SparseAdd.*shapes do not match.*\\[2, 2\\].*\\[2, 3\\]", two_by_three),
            (af.sparse_maximum(x, y), "SparseSparseMaximum.*shapes do not match", two_by_three),
            (af.sparse_concat(0, [x, y]), "SparseConcat.*ranks of all input tensors must match", rank3),
            (af.sparse_concat(0, [x, y]), "SparseConcat.*input shapes must match", two_by_three),
        ]
        for fetch, pattern, yv in cases:
            with pytest.raises(af.errors.InvalidArgumentError, match=pattern):
                _run(fetch, {x: two_by_two, y: yv})
        with pytest.raises(af.errors.InvalidArgumentError, match="SparseReshape.*4 dense values.*multiple of 3"):
            _run(af.sparse_reshape(x, [3, -1]), {x: two_by_two})
        with pytest.raises(af.errors.InvalidArgumentError, match="SparseReshape.*4 dense values.*has 6"):
            _run(af.sparse_reshape(x, [2, 3]), {x: two_by_two})
        with pytest.raises(af.errors.InvalidArgumentError, match="SparseSlice.*rank 2"):
            _run(af.sparse_slice(x, [0], [1]), {x: two_by_two})
        with pytest.raises(af.errors.InvalidArgumentError, match="SparseReorder.*out of bounds"):
            _run(af.sparse_reorder(x), {x: ([[5, 0]], [1.0], [2, 2])})
        with pytest.raises(af.errors.InvalidArgumentError, match="SparseSoftmax.*at least a matrix"):
            _run(af.sparse_softmax(x), {x: ([[1]], [1.0], [3])})
        with pytest.raises(af.errors.InvalidArgumentError, match="SparseSplit.*num_split 3 is larger"):
            _run(af.sparse_split(sp_input=x, num_split=3, axis=1), {x: two_by_two})
        with pytest.raises(af.errors.InvalidArgumentError, match="must not be smaller"):
            _run(af.sparse_reset_shape(x, [1, 5]), {x: two_by_two})


def test_sparse_segment_errors_name_the_op():
    with af.Graph().as_default():
        ids = af.placeholder(af.int32, [None])
        data = af.ones([4, 2])
        with pytest.raises(af.errors.InvalidArgumentError, match="SparseSegmentSum.*not increasing"):
            _run(af.sparse_segment_sum(data, [0, 1, 2], ids), {ids: [0, 2, 1]})
        with pytest.raises(af.errors.InvalidArgumentError, match="SparseSegmentMean.*indices\\[1\\] = 9 is out of"):
            _run(af.sparse_segment_mean(data, [0, 9], [0, 0]), {})
        with pytest.raises(af.errors.InvalidArgumentError, match="SparseSegmentSqrtNWithNumSegments.*num_segments"):
            _run(af.sparse.segment_sqrt_n(data, [0, 1], ids, num_segments=2), {ids: [0, 4]})


def test_static_shape_errors_name_the_op():
    with af.Graph().as_default():
        a = af.SparseTensor([[0, 0]], [1.0], [2, 2])
        b = af.SparseTensor([[0, 0, 0]], [1.0], [2, 2, 1])
        with pytest.raises(ValueError, match="sparse_add: the operands. shapes \\(2, 2\\) and \\(2, 2, 1\\) are incompatible"):
            af.sparse_add(a, b)
        with pytest.raises(ValueError, match="sparse_concat.*does not match"):
            af.sparse_concat(0, [a, af.SparseTensor([[0, 0]], [1.0], [2, 3])])
        with pytest.raises(ValueError, match="cannot reshape a SparseTensor of shape \\[2, 2\\]"):
            af.sparse_reshape(a, [3, 2])
        with pytest.raises(ValueError, match="at least a matrix, got rank 1 .op .SparseSoftmax"):
            af.sparse_softmax(af.SparseTensor([[0]], [1.0], [3]))
        with pytest.raises(ValueError, match="to_retain has 3 entries for a SparseTensor with 1 values"):
            af.sparse_retain(a, [True, False, True])
        with pytest.raises(ValueError, match="keyword arguments only"):
            af.sparse_split(a, 2, 1)
        with pytest.raises(TypeError, match="must be a SparseTensor"):
            af.sparse_reorder(af.constant([1.0]))


def test_deserializing_garbage_names_the_op():
    with af.Graph().as_default():
        bad = af.io.deserialize_many_sparse(af.constant([[b"\x08", b"", b""]]), af.float32)
        with pytest.raises(af.errors.InvalidArgumentError, match="DeserializeManySparse.*could not be parsed"):
            _run(bad, {})
        wrong = af.io.deserialize_sparse(af.io.serialize_sparse(af.SparseTensor([[0]], [1.0], [2])), af.float64)
        with pytest.raises(af.errors.InvalidArgumentError, match="DeserializeSparse.*float64.*float32"):
            _run(wrong, {})


def test_sparse_segment_gradient_matches_finite_differences_on_an_embedding():
    rng = np.random.default_rng(0)
    table = rng.standard_normal((7, 3))
    with af.Graph().as_default():
        params = af.constant(table)
        bag = af.sparse_segment_sqrt_n(params, [6, 0, 0, 3, 2], [0, 0, 1, 1, 3])
        loss = af.reduce_sum(af.square(bag))
        grad, = af.gradients(loss, [params])
        with af.Session() as s:
            g = s.run(grad)
    eps = 1e-6

    def f(t):
        out = np.zeros((4, 3))
        for i, seg in zip([6, 0, 0, 3, 2], [0, 0, 1, 1, 3]):
            out[seg] += t[i]
        counts = np.maximum(np.bincount([0, 0, 1, 1, 3], minlength=4), 1)
        return float(np.sum((out / np.sqrt(counts)[:, None]) ** 2))
    num = np.zeros_like(table)
    for ij in np.ndindex(*table.shape):
        d = np.zeros_like(table)
        d[ij] = eps
        num[ij] = (f(table + d) - f(table - d)) / (2 * eps)
    np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("expr", list(FIX["crossed"]))
def test_string_crosses_match_tensorflow(expr):
    want = FIX["crossed"][expr]
    with af.Graph().as_default():
        sp = eval(expr, _setup_env())  # noqa: S307 (the fixture's own expressions)
        with af.Session() as s:
            got = s.run(sp)
    assert got.indices.tolist() == want["indices"] and got.dense_shape.tolist() == want["dense_shape"]
    assert [v.decode() for v in got.values] == want["values"]


def test_cross_inputs_of_different_batch_sizes_name_the_op():
    with af.Graph().as_default():
        a = af.SparseTensor([[0, 0]], ["a"], [2, 1])
        with pytest.raises(af.errors.InvalidArgumentError, match="SparseCrossV2.*one batch size: 2 and 3"):
            _run(af.sparse.cross([a, af.constant([["x"], ["y"], ["z"]])]), {})


def test_bincount_of_negative_values_names_the_op():
    with af.Graph().as_default():
        sp = af.SparseTensor([[0, 0], [1, 0]], af.constant([3, -4], af.int64), [2, 2])
        with pytest.raises(af.errors.InvalidArgumentError, match="SparseCountSparseOutput.*non-negative, got -4"):
            _run(af.sparse.bincount(sp, axis=-1), {})
        with pytest.raises(ValueError, match="binary_output and weights are mutually exclusive"):
            af.sparse.bincount(sp, weights=sp, binary_output=True)


def test_sparse_times_a_dense_tensor_that_does_not_broadcast_names_the_op():
    with af.Graph().as_default():
        x = af.sparse_placeholder(af.float32, name="x")
        with pytest.raises(af.errors.InvalidArgumentError, match="SparseDenseCwiseMul.*shape \\[3\\] does not broadcast"):
            _run(x * af.ones([3]), {x: ([[0, 0]], [1.0], [2, 2])})
        with pytest.raises(ValueError, match="higher rank than the SparseTensor"):
            af.SparseTensor([[0]], [1.0], [2]) * af.ones([2, 2])


def test_indices_of_a_huge_dense_shape_keep_their_order():
    big = 1 << 61
    with af.Graph().as_default():
        a = af.SparseTensor([[3, big - 1], [0, 5], [3, 2]], [1.0, 2.0, 3.0], [4, big])
        b = af.SparseTensor([[0, 5], [3, big - 1]], [10.0, 20.0], [4, big])
        with af.Session() as s:
            r, t = s.run([af.sparse_reorder(a), af.sparse_add(af.sparse_reorder(a), b)])
    assert r.indices.tolist() == [[0, 5], [3, 2], [3, big - 1]] and r.values.tolist() == [2.0, 3.0, 1.0]
    assert t.indices.tolist() == [[0, 5], [3, 2], [3, big - 1]] and t.values.tolist() == [12.0, 3.0, 21.0]


def test_convert_to_tensor_or_sparse_tensor():
    with af.Graph().as_default():
        value = af.SparseTensorValue([[0, 1]], np.array([2.0], np.float32), [2, 2])
        sp = af.convert_to_tensor_or_sparse_tensor(value)
        assert isinstance(sp, af.SparseTensor) and sp.dtype == af.float32
        assert af.convert_to_tensor_or_sparse_tensor(sp) is sp
        t = af.convert_to_tensor_or_sparse_tensor([1, 2], dtype=af.int64)
        assert isinstance(t, af.Tensor) and t.dtype == af.int64
        with pytest.raises(ValueError, match="dtype float32 is not the requested int32"):
            af.convert_to_tensor_or_sparse_tensor(sp, dtype=af.int32)


def test_a_graph_def_tensorflow_wrote_with_the_sparse_ops_imports_and_matches():
    """The raw ops by TF's names and attributes (tests/fixtures/make_sparse_graph_def.py), gradients
    included."""
    import json
    import pathlib
    here = pathlib.Path(__file__).parent / "fixtures"
    case = json.loads((here / "sparse_graph_def.json").read_text())
    gd = af.GraphDef()
    gd.ParseFromString((here / "sparse_graph_def.pb").read_bytes())
    with af.Graph().as_default() as g:
        af.import_graph_def(gd, name="")
        feeds = {k + ":0": np.array(v, dtype=case["feed_dtypes"][k]) for k, v in case["feeds"].items()}
        keys = list(case["fetches"])
        with af.Session(graph=g) as s:
            got = s.run([case["fetches"][k] for k in keys], feeds)
    for k, a in zip(keys, got):
        want = np.array(case["outputs"][k], dtype=case["dtypes"][k]).reshape(case["shapes"][k])
        assert np.asarray(a).dtype == want.dtype and np.shape(a) == want.shape, k
        if want.dtype.kind == "f":
            np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-6, err_msg=k)
        else:
            np.testing.assert_array_equal(a, want, err_msg=k)


def test_unordered_operands_give_what_their_canonical_order_gives():
    """(TF's SparseAdd, SparseSparseMaximum and SparseSoftmax assume canonical order; actorflow's do not.)"""
    with af.Graph().as_default():
        env = _setup_env()
        a, b = env["a"], env["b"]
        perm = [3, 0, 4, 2, 1]
        u = af.SparseTensor(af.gather(a.indices, perm), af.gather(a.values, perm), a.dense_shape)  # a shuffled
        pairs = [(af.sparse_add(u, b), af.sparse_add(a, b)), (af.sparse_maximum(u, b), af.sparse_maximum(a, b)),
                 (af.sparse_reorder(af.sparse_softmax(u)), af.sparse_softmax(a))]
        with af.Session() as s:
            for got, want in s.run(pairs):
                assert got.indices.tolist() == want.indices.tolist()
                np.testing.assert_allclose(got.values, want.values, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn,norm", [(af.sparse_segment_sum, None), (af.sparse.segment_mean, "mean"),
                                     (af.sparse_segment_sqrt_n, "sqrtn")])
def test_big_embedding_bags_take_the_fused_loop_and_agree_with_numpy(fn, norm, dtype):
    """Above 2,048 ids the kernels and their gradients run one numba loop (kernels/cpu/sparse.py);
    the fixture's cases are smaller and take numpy's path."""
    rng = np.random.default_rng(5)
    vocab, dim, batch, nnz = 300, 3, 40, 5000
    table = rng.standard_normal((vocab, dim)).astype(dtype)
    ids = rng.integers(0, vocab, nnz)
    rows = np.sort(rng.integers(0, batch, nnz))
    counts = np.maximum(np.bincount(rows, minlength=batch + 2), 1).astype(np.float64)
    scale = {None: np.ones_like(counts), "mean": 1 / counts, "sqrtn": 1 / np.sqrt(counts)}[norm]
    want = np.zeros((batch + 2, dim))
    np.add.at(want, rows, table[ids].astype(np.float64))
    want *= scale[:, None]
    w = rng.standard_normal((batch + 2, dim))
    want_grad = np.zeros((vocab, dim))
    np.add.at(want_grad, ids, (w * scale[:, None])[rows])
    with af.Graph().as_default():
        t = af.constant(table)
        y = fn(t, ids, rows, num_segments=batch + 2)
        grad, = af.gradients(af.reduce_sum(y * af.constant(w.astype(dtype))), [t])
        with af.Session() as s:
            got, got_grad = s.run([y, grad])
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == np.float32 else {"rtol": 1e-10, "atol": 1e-10}
    assert got.dtype == dtype and got_grad.dtype == dtype
    np.testing.assert_allclose(got, want, **tol)
    np.testing.assert_allclose(got_grad, want_grad, **tol)
