"""top_k, sort, argsort, cumsum, cumprod, reverse, unique and the segment reductions against
TensorFlow 2.21 (tests/fixtures/seq_ops.json, made by fixtures/make_seq_ops.py from the cases in
fixtures/seq_cases.py): values, static shapes and gradients of a weighted sum of the outputs;
then the errors for bad input."""
import json
import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import actorflow as af
from actorflow.scheduler.devices import gpu_count

_HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
sys.path.insert(0, _HERE)
from seq_cases import CASES  # noqa: E402

with open(os.path.join(_HERE, "seq_ops.json")) as _f:
    FIXTURE = json.load(_f)["cases"]


def _same(got, want, dtype, what):
    got = np.asarray(got)
    assert got.dtype == np.dtype(dtype), f"{what}: dtype {got.dtype}, TF {dtype}"
    want = np.asarray(want, dtype=dtype).reshape(got.shape) if np.size(want) == 0 else np.asarray(want, dtype)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, TF {want.shape}"
    if got.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        rtol = 1e-6 if got.dtype == np.float64 else 1e-5
        np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-6, err_msg=what)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_against_tensorflow(case):
    _check_case(case)


def _check_case(case, device=None):
    want = FIXTURE[case["name"]]
    g = af.Graph()
    config = af.ConfigProto(allow_soft_placement=True)
    with g.as_default(), g.device(device), af.Session(graph=g, config=config) as s:
        env = {"tf": af, "k": af.placeholder_with_default(np.int32(2), [])}
        for n, (v, dt) in case["inputs"].items():
            env[n] = af.constant(np.asarray(v, dtype=dt), name=n)
        out = eval(case["expr"], env)  # noqa: S307 (the fixture's own expressions)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        assert len(outs) == len(want["outputs"])
        for i, (o, w) in enumerate(zip(outs, want["outputs"])):
            static = o.shape.as_list() if o.shape.ndims is not None else None
            assert static == w["shape"], f"output {i}: static shape {static}, TF {w['shape']}"
        vals = s.run(outs)
        for i, (v, w) in enumerate(zip(vals, want["outputs"])):
            _same(v, w["value"], w["dtype"], f"output {i}")
        if "grads" in want:
            floats = [o for o in outs if o.dtype.is_floating]
            ws = [np.asarray(w, dtype=o.dtype.np) for o, w in zip(floats, want["weights"])]
            loss = af.add_n([af.reduce_sum(o * w) for o, w in zip(floats, ws)])
            grads = af.gradients(loss, [env[n] for n in case["wrt"]])
            for n, gv in zip(case["wrt"], s.run(grads)):
                _same(gv, want["grads"][n], env[n].dtype.np, f"gradient w.r.t. {n}")


def test_tf1_names():
    """The names tf.compat.v1 has, in the same namespaces."""
    top = ["sort", "argsort", "cumsum", "cumprod", "reverse", "reverse_v2", "unique", "unique_with_counts",
           "segment_sum", "segment_mean", "segment_max", "segment_min", "segment_prod", "unsorted_segment_sum",
           "unsorted_segment_max", "unsorted_segment_min", "unsorted_segment_prod", "unsorted_segment_mean",
           "unsorted_segment_sqrt_n"]
    math = ["top_k", "cumsum", "cumprod"] + [n for n in top if "segment" in n]
    for n in top:
        assert callable(getattr(af, n)), n
    for n in math:
        assert callable(getattr(af.math, n)), n
    assert af.nn.top_k is af.math.top_k


def _run(fetch, feeds=None):
    with af.Session() as s:
        return s.run(fetch, feeds)


@pytest.fixture(autouse=True)
def _fresh_graph():
    with af.Graph().as_default():
        yield


def test_top_k_k_too_large():
    x = af.constant([[1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="(?s)last dimension >= k = 4 but is 3.*op 'tk' of type TopKV2"):
        af.nn.top_k(x, 4, name="tk")
    k = af.placeholder(af.int32, [])
    v, _ = af.nn.top_k(x, k, name="tk2")
    assert v.shape.as_list() == [1, None]
    with pytest.raises(af.errors.InvalidArgumentError, match=r"(?s)Had 3, needed 4.*tk2"):
        _run(v, {k: 4})
    with pytest.raises(af.errors.InvalidArgumentError, match="Need k >= 0"):
        _run(v, {k: -1})


def test_segment_sum_unsorted_ids_fail_at_run_time():
    ids = af.placeholder(af.int32, [4])
    out = af.segment_sum(af.constant([1.0, 2.0, 3.0, 4.0]), ids, name="segsum")
    assert out.shape.as_list() == [None]
    assert _run(out, {ids: [0, 0, 1, 3]}).tolist() == [3.0, 3.0, 0.0, 4.0]
    with pytest.raises(af.errors.InvalidArgumentError, match=r"(?s)SegmentSum: segment ids are not increasing.*node segsum") as e:
        _run(out, {ids: [0, 1, 0, 2]})
    assert "segment_ids[2] = 0" in str(e.value)
    with pytest.raises(af.errors.InvalidArgumentError, match=r"(?s)segment ids must be >= 0.*segsum"):
        _run(out, {ids: [-1, 0, 0, 1]})


def test_segment_ids_length_and_unsorted_range():
    with pytest.raises(ValueError, match="same size as dimension 0"):
        af.segment_max(af.constant([1.0, 2.0]), [0, 0, 1])
    ids = af.placeholder(af.int32, [3])
    out = af.unsorted_segment_max(af.constant([1.0, 2.0, 3.0]), ids, 2, name="usm")
    with pytest.raises(af.errors.InvalidArgumentError, match=r"(?s)UnsortedSegmentMax: segment_ids\[2\] = 5.*usm"):
        _run(out, {ids: [0, 1, 5]})


def test_axis_out_of_range():
    x = af.constant([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(ValueError, match="(?s)out of range.*op 'cs' of type Cumsum"):
        af.cumsum(x, axis=2, name="cs")
    with pytest.raises(ValueError, match="(?s)out of range.*op 'rv' of type ReverseV2"):
        af.reverse(x, [-3], name="rv")
    with pytest.raises(ValueError, match="(?s)more than once.*op 'rv2'"):
        af.reverse(x, [1, -1], name="rv2")
    with pytest.raises(ValueError, match="out of range"):
        af.sort(x, axis=2)
    a = af.placeholder(af.int32, [])
    with pytest.raises(af.errors.InvalidArgumentError, match=r"(?s)Cumprod: .*\[-2, 2\).*-3.*node cp"):
        _run(af.cumprod(x, a, name="cp"), {a: -3})
    axes = af.placeholder(af.int32, [None])
    with pytest.raises(af.errors.InvalidArgumentError, match=r"(?s)ReverseV2: .*out of valid range.*node rv3"):
        _run(af.reverse(x, axes, name="rv3"), {axes: [0, 2]})


def test_unique_shapes_and_no_gradient():
    x = af.placeholder(af.float32, [5])
    y, idx, count = af.unique_with_counts(x, out_idx=af.int64)
    assert y.shape.as_list() == [None] and idx.shape.as_list() == [5] and count.shape.as_list() == [None]
    assert idx.dtype == af.int64
    with pytest.raises(ValueError, match="rank 1"):
        af.unique(af.constant([[1, 2]]))
    with pytest.raises(LookupError, match="Unique"):
        af.gradients(af.reduce_sum(y), x)
    got = _run([y, idx, count], {x: [3.0, 3.0, -1.0, 0.0, -1.0]})
    assert [v.tolist() for v in got] == [[3.0, -1.0, 0.0], [0, 0, 1, 2, 1], [2, 2, 1]]


def test_sort_needs_constant_axis_and_known_direction():
    x = af.constant([3.0, 1.0])
    with pytest.raises(ValueError, match="constant scalar"):
        af.sort(x, axis=af.placeholder(af.int32, []))
    with pytest.raises(ValueError, match="direction"):
        af.argsort(x, direction="UP")


def test_top_k_gradient_unknown_shape():
    """The gradient's index arithmetic when only the run time knows the shapes."""
    x = af.placeholder(af.float64, None)
    v, _ = af.nn.top_k(x, 2)
    (g,) = af.gradients(af.reduce_sum(v * af.constant([1.0, 10.0], af.float64)), x)
    data = np.array([[[1.0, 4.0, 4.0], [7.0, 2.0, 9.0]]])
    got = _run(g, {x: data})
    assert got.tolist() == [[[0.0, 1.0, 10.0], [10.0, 0.0, 1.0]]]


def test_larger_random_inputs_against_numpy():
    """Many ties, many segments, negative ids: the kernels' grouping against plain numpy loops."""
    rng = np.random.default_rng(7)
    x = rng.integers(-4, 5, size=(6, 50)).astype(np.float32)
    ids = rng.integers(-1, 9, size=50)
    sorted_ids = np.sort(rng.integers(0, 12, size=50))
    v, i = af.nn.top_k(x, 7)
    y, idx, cnt = af.unique_with_counts(af.constant(ids))
    outs = _run([v, i, af.argsort(x, axis=-1, direction="DESCENDING"),
                 af.unsorted_segment_max(af.transpose(x), ids, 10), af.unsorted_segment_prod(af.transpose(x), ids, 10),
                 af.segment_min(af.transpose(x), sorted_ids), y, idx, cnt])
    order = np.argsort(-x, axis=-1, kind="stable")    # descending, equal values by index
    np.testing.assert_array_equal(outs[1], order[:, :7])
    np.testing.assert_array_equal(outs[0], np.take_along_axis(x, order[:, :7], -1))
    np.testing.assert_array_equal(outs[2], order)
    xt = x.T
    for s in range(10):
        rows = xt[ids == s]
        want_max = rows.max(0) if len(rows) else np.full(6, np.finfo(np.float32).min)
        np.testing.assert_array_equal(outs[3][s], want_max)
        np.testing.assert_allclose(outs[4][s], np.prod(rows, 0) if len(rows) else np.ones(6), rtol=1e-6)
    for s in range(sorted_ids[-1] + 1):
        rows = xt[sorted_ids == s]
        np.testing.assert_array_equal(outs[5][s], rows.min(0) if len(rows) else np.zeros(6))
    first = list(dict.fromkeys(ids.tolist()))
    assert outs[6].tolist() == first
    assert [first[j] for j in outs[7]] == ids.tolist()
    assert outs[8].tolist() == [int((ids == u).sum()) for u in first]


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64])
def test_top_k_of_long_rows_with_ties(dtype):
    """k much smaller than the row (the kernel's partial selection): ties at the k-th value still
    go to the lowest indices, as a stable sort would."""
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 4, size=(2, 5, 300)).astype(dtype)
    x[0, 0] = 1                                            # a row of one value
    k = af.placeholder(af.int32, [])
    xv = af.placeholder(dtype, [None, None, None])
    v, i = af.nn.top_k(xv, k)
    for kk in (1, 20, 75):
        got_v, got_i = _run([v, i], {xv: x, k: kk})
        order = np.argsort(-x.astype(np.float64), axis=-1, kind="stable")[..., :kk]
        np.testing.assert_array_equal(got_i, order)
        np.testing.assert_array_equal(got_v, np.take_along_axis(x, order, -1))


def test_tensorflow_graph_def_imports_and_runs():
    """A GraphDef written by TF 2.21 (with its T, Tk, Tidx, Tindices, out_idx attributes) runs here."""
    want = json.load(open(os.path.join(_HERE, "seq_ops.json")))["graph_def"]
    with open(os.path.join(_HERE, "seq_ops_graph.pb"), "rb") as f:
        af.import_graph_def(f.read(), name="")
    g = af.get_default_graph()
    fetch = [g.get_tensor_by_name(n) for n in want["fetch"]]
    x = g.get_tensor_by_name("x:0")
    got = _run(fetch, {x: np.array(want["feed"], np.float32)})
    for n, v, w in zip(want["fetch"], got, want["outputs"]):
        _same(v, w["value"], w["dtype"], n)


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=3), data=st.data())
def test_static_shapes_match_run_shapes(shape, data):
    """Build-time inference agrees with what the kernels return, on shapes with empty dimensions."""
    k = data.draw(st.integers(0, shape[-1]))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n_seg = data.draw(st.integers(0, 3))
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) % 3
    ids = (np.arange(shape[0]) % max(n_seg, 1)).astype(np.int32) if n_seg else np.full(shape[0], -1, np.int32)
    with af.Graph().as_default():
        t = af.constant(x)
        outs = [*af.nn.top_k(t, k), af.cumsum(t, axis, exclusive=True), af.cumprod(t, axis, reverse=True),
                af.reverse(t, [axis]), af.unsorted_segment_min(t, ids, n_seg), af.sort(t, axis)]
        if shape[0] and (ids >= 0).all():
            outs.append(af.segment_mean(t, np.sort(ids)))
        for o, v in zip(outs, _run(outs)):
            assert o.shape.is_compatible_with(v.shape), (o.name, o.shape, v.shape)
            assert o.shape.ndims == v.ndim


_GPU_CASES = [c for c in CASES if c["name"].split("_")[0] in ("top", "sort", "argsort", "cumsum", "cumprod", "reverse")]


@pytest.mark.skipif(gpu_count() == 0, reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("case", _GPU_CASES, ids=[c["name"] for c in _GPU_CASES])
def test_gpu_kernels_against_tensorflow(case):
    """TopKV2, Cumsum, Cumprod and ReverseV2 on the GPU (the graph built under /gpu:0, with soft
    placement for the ops that have no GPU kernel), against the same TF values and gradients."""
    _check_case(case, "/gpu:0")
