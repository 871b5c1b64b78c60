"""The names of branch arrays2 against TensorFlow 2.21 (tests/fixtures/arrays2.json, written by
make_arrays2.py): space/batch rearrangement, patch extraction, N-d scatter, and the math and array
names TF 1.x programs use; plus the errors they raise on bad input."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af
from tests import tf_reference

FIX = tf_reference.load("arrays2.json")


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_and_gradients_match_tensorflow(expr):
    tf_reference.check(FIX, expr)


def test_space_to_batch_errors_name_the_problem():
    x = af.constant(np.zeros((1, 5, 4, 1)))
    with pytest.raises(ValueError, match="not divisible by block_shape"):
        af.space_to_batch_nd(x, [2, 2], [[0, 0], [0, 0]])
    with pytest.raises(ValueError, match=r"paddings must have shape \[M, 2\]"):
        af.space_to_batch_nd(x, [2, 2], [[0, 0, 0]])
    p = af.placeholder(af.float64, [None, None, 4, 1])
    y = af.space_to_batch_nd(p, [2, 2], [[0, 0], [0, 0]])
    assert y.shape.as_list() == [None, None, 2, 1]
    with af.Session() as s, pytest.raises(af.errors.InvalidArgumentError, match="SpaceToBatchND: padded size 5"):
        s.run(y, {p: np.zeros((1, 5, 4, 1))})
    with pytest.raises(ValueError, match="block_size must be an int of at least 2"):
        af.space_to_batch(x, [[0, 0], [0, 0]], 1)


def test_extract_patches_of_unknown_size_and_its_gradient():
    p = af.placeholder(af.float32, [None, None, None, 2])
    e = af.extract_image_patches(p, [1, 2, 2, 1], [1, 1, 1, 1], [1, 1, 1, 1], "VALID")
    assert e.shape.as_list() == [None, None, None, 8]
    (g,) = af.gradients(af.reduce_sum(e), p)
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 2)).astype(np.float32)
    with af.Session() as s:
        ev, gv = s.run([e, g], {p: x})
    assert ev.shape == (2, 2, 3, 8)
    np.testing.assert_array_equal(ev[1, 1, 2].reshape(2, 2, 2), x[1, 1:3, 2:4])
    # Each pixel's gradient counts the windows it lies in.
    counts = np.outer([1, 2, 1], [1, 2, 2, 1])
    np.testing.assert_array_equal(gv, np.broadcast_to(counts[None, :, :, None], x.shape))
    with pytest.raises(ValueError, match="ksizes must be a list of 4 ints with 1 for the batch"):
        af.extract_image_patches(p, [2, 2, 2, 1], [1, 1, 1, 1], [1, 1, 1, 1], "VALID")


@pytest.mark.parametrize("key", list(FIX["variables"]))
def test_variable_scatters_match_tensorflow(key):
    case = FIX["variables"][key]
    with af.Graph().as_default():
        env = {"tf": af, "np": np}
        env.update(tf_reference.inputs(FIX))
        exec(case["program"], env)  # noqa: S102 (the fixture's own programs)
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            got = s.run(env["result"])
            after = s.run(env["v"])
    want = np.array(case["value"], dtype=case["dtype"])
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(after, np.array(case["after"], dtype=case["dtype"]), rtol=1e-12)


def test_variable_scatter_errors_leave_the_variable_alone():
    v = af.Variable(np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"updates must have shape indices.shape\[:-1\] \+ variable.shape\[K:\]"):
        af.scatter_nd_add(v, [[0]], np.ones((1, 3)))
    with pytest.raises(TypeError, match="Expected a Variable"):
        af.scatter_nd_add(af.constant(np.zeros(3)), [[0]], [1.0])
    bad = af.scatter_nd_update(v, [[1], [3]], np.ones((2, 2)))
    iv = af.Variable([4, 6])
    div0 = af.scatter_div(iv, [1], [0])
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        with pytest.raises(af.errors.InvalidArgumentError, match=r"ScatterNdUpdate: indices\[1\] = \[3\]"):
            s.run(bad)
        with pytest.raises(af.errors.InvalidArgumentError, match="ScatterDiv: integer division by zero"):
            s.run(div0)
        np.testing.assert_array_equal(s.run(v), np.zeros((3, 2)))
        np.testing.assert_array_equal(s.run(iv), [4, 6])


def test_special_math_errors_and_edges():
    with pytest.raises(ValueError, match="innermost dimension of a and b must be 3"):
        af.cross(af.constant(np.zeros((2, 4))), af.constant(np.zeros((2, 4))))
    with pytest.raises(TypeError, match="floating"):
        af.lbeta(af.constant([1, 2]))
    q = af.truncatediv(af.constant([4, 5]), af.constant([2, 0]))
    d = af.math.igamma(af.constant([-1.0, 2.0, 2.0]), af.constant([1.0, 0.0, -1.0]))
    with af.Session() as s:
        with pytest.raises(af.errors.InvalidArgumentError, match="TruncateDiv: Integer division by zero"):
            s.run(q)
        got = s.run(d)
    assert np.isnan(got[0]) and got[1] == 0.0 and np.isnan(got[2])


def test_broadcast_static_shape_and_shape_errors():
    got = af.broadcast_static_shape(af.TensorShape([2, None, 3, None]), af.TensorShape([None, 1, 1, 4]))
    assert got.as_list() == [2, None, 3, 4]  # TF 2.21's answer
    assert af.broadcast_static_shape(af.TensorShape([5, 1]), af.TensorShape([3])).as_list() == [5, 3]
    with pytest.raises(ValueError, match="Incompatible shapes"):
        af.broadcast_static_shape(af.TensorShape([2]), af.TensorShape([3]))
    p = af.placeholder(af.int32, [2])
    s = af.broadcast_dynamic_shape([2, 3], p)
    with af.Session() as sess, pytest.raises(af.errors.InvalidArgumentError, match="BroadcastArgs: Incompatible"):
        sess.run(s, {p: [4, 3]})


def test_searchsorted_repeat_histogram_and_parallel_stack_errors():
    with pytest.raises(ValueError, match="side must be 'left' or 'right'"):
        af.searchsorted([[1.0, 2.0]], [[1.5]], side="middle")
    with pytest.raises(ValueError, match="same leading dimensions"):
        af.searchsorted(af.constant(np.zeros((2, 3))), af.constant(np.zeros((3, 1))))
    with pytest.raises(ValueError, match="nbins must be positive"):
        af.histogram_fixed_width([1.0, 2.0], [0.0, 1.0], nbins=0)
    with pytest.raises(ValueError, match="must be fully defined"):
        af.parallel_stack([af.placeholder(af.float32, [None, 2])])
    vr, reps = af.placeholder(af.float32, [2]), af.placeholder(af.int32, [None])
    bad_range = af.histogram_fixed_width([1.0, 2.0], vr, nbins=3)
    r = af.repeat(af.constant([1.0, 2.0]), reps)
    with af.Session() as s:
        with pytest.raises(af.errors.InvalidArgumentError, match=r"value_range\[0\] < value_range\[1\]"):
            s.run(bad_range, {vr: [2.0, 1.0]})
        np.testing.assert_array_equal(s.run(r, {reps: [0, 3]}), [2.0, 2.0, 2.0])


def test_gradient_options_are_checked():
    x = af.placeholder(af.float32, [None])
    with pytest.raises(ValueError, match="must have a static shape"):
        af.hessians(af.reduce_sum(x * x), x)
    c = af.constant([1.0, 2.0])
    with pytest.raises(ValueError, match="Invalid aggregation_method"):
        af.gradients(af.reduce_sum(c), c, aggregation_method=7)
    assert af.UnconnectedGradients("zero") is af.UnconnectedGradients.ZERO


def test_device_spec_is_tf1s():
    # The strings are TensorFlow 2.21's tf.compat.v1.DeviceSpec answers.
    d = af.DeviceSpec.from_string("/job:ps/task:1/gpu:2")
    assert (d.to_string(), d.device_type) == ("/job:ps/task:1/device:GPU:2", "GPU")
    d2 = af.DeviceSpec(job="worker", device_type="cpu")
    assert d2.to_string() == "/job:worker/device:CPU:*"
    d.merge_from(d2)
    assert d.to_string() == "/job:worker/task:1/device:CPU:2"
    assert af.DeviceSpec(device_type="GPU").to_string() == "/device:GPU:*"
    assert af.DeviceSpec().parse_from_string("/replica:1/device:CPU:0").to_string() == "/replica:1/device:CPU:0"
    merged = af.DeviceSpec.from_string("/job:a/task:0").make_merged_spec(af.DeviceSpec(task=3))
    assert merged.to_string() == "/job:a/task:3"
    with pytest.raises(ValueError, match="Malformed device specification"):
        af.DeviceSpec.from_string("/jobs:a")
    with af.Graph().as_default(), af.device(af.DeviceSpec(job="ps", task=0)):
        assert af.constant(1.0).device == "/job:ps/task:0"


def test_switch_case_runs_the_indexed_branch_or_the_default():
    i = af.placeholder(af.int32, [])
    c = af.constant(3.0)
    y = af.switch_case(i, [lambda: c * 2.0, lambda: c + 1.0, lambda: -c])
    z = af.switch_case(i, {0: lambda: c, 1: lambda: c * c}, default=lambda: c - 10.0)
    with af.Session() as s:
        assert [s.run(y, {i: k}) for k in (0, 1, 2, 7, -1)] == [6.0, 4.0, -3.0, -3.0, -3.0]
        assert [s.run(z, {i: k}) for k in (0, 1, 5)] == [3.0, 9.0, -7.0]
    with pytest.raises(ValueError, match="keys must be 0..1"):
        af.switch_case(i, {0: lambda: c, 2: lambda: c})
    with pytest.raises(TypeError, match="int32 scalar"):
        af.switch_case(af.constant(1.0), [lambda: c])


def test_convert_to_tensor_or_indexed_slices():
    s = af.IndexedSlices(af.constant([[1.0, 2.0]]), af.constant([0]), af.constant([3, 2]))
    assert af.convert_to_tensor_or_indexed_slices(s) is s
    with pytest.raises(ValueError, match="requested dtype int32"):
        af.convert_to_tensor_or_indexed_slices(s, dtype=af.int32)
    t = af.convert_to_tensor_or_indexed_slices([1, 2], dtype=af.int64)
    assert isinstance(t, af.Tensor) and t.dtype == af.int64


@pytest.mark.parametrize("args", list(FIX["protos"]))
def test_make_tensor_proto_writes_tfs_bytes_and_make_ndarray_reads_them(args):
    pytest.importorskip("tensorboard")
    want = FIX["protos"][args]
    proto = eval(f"tf.make_tensor_proto({args})", {"tf": af, "np": np})  # noqa: S307 (the fixture's own arguments)
    assert proto.SerializeToString().hex() == want
    back = af.make_ndarray(type(proto).FromString(bytes.fromhex(want)))
    np.testing.assert_array_equal(back, af.make_ndarray(proto))


def test_make_tensor_proto_errors():
    pytest.importorskip("tensorboard")
    with pytest.raises(TypeError, match="Expected Tensor's shape"):
        af.make_tensor_proto([1, 2, 3], shape=[2, 2], verify_shape=True)
    with pytest.raises(TypeError, match="graph tensor"):
        af.make_tensor_proto(af.constant(1.0))
    with pytest.raises(TypeError, match="expected a TensorProto"):
        af.make_ndarray(np.zeros(2))


def test_variable_synchronization_and_aggregation_as_in_tf():
    # TF 2.21 (compat.v1): ON_READ makes a variable non-trainable unless told otherwise; bad modes raise.
    with af.Graph().as_default():
        v = af.Variable(1.0, synchronization=af.VariableSynchronization.ON_READ)
        assert not v.trainable and v.aggregation is af.VariableAggregation.NONE
        w = af.Variable(1.0, aggregation=af.VariableAggregation.MEAN)
        assert w.trainable and w.synchronization is af.VariableSynchronization.AUTO
        assert af.Variable(1.0, synchronization=af.VariableSynchronization.ON_READ, trainable=True).trainable
        with pytest.raises(ValueError, match="Invalid variable aggregation mode: sum"):
            af.Variable(1.0, aggregation="sum")
        g = af.get_variable("g", [2], synchronization=af.VariableSynchronization.ON_READ)
        assert g not in af.trainable_variables() and w in af.trainable_variables()
        assert af.VariableAggregation.ONLY_FIRST_TOWER is af.VariableAggregation.ONLY_FIRST_REPLICA


def test_tensor_spec_as_tf():
    # The reprs and answers are TensorFlow 2.21's (tf.compat.v1.TensorSpec, graph mode).
    s = af.TensorSpec([2, None], af.float32, "x")
    assert repr(s) == "TensorSpec(shape=(2, ?), dtype=af.float32, name='x')"
    assert (str(s.shape), s.dtype, s.name) == ("(2, ?)", af.float32, "x")
    assert s.is_compatible_with(af.TensorSpec([2, 3])) and s.is_compatible_with(af.zeros([2, 3]))
    assert not s.is_compatible_with(af.zeros([2, 3], af.int32)) and not s.is_compatible_with(af.TensorSpec([3, 3]))
    p = af.placeholder(af.int32, [None], name="p")
    assert af.TensorSpec.from_tensor(p) == af.TensorSpec([None], af.int32, "p")
    assert af.TensorSpec([1]) == af.TensorSpec([1], af.float32)
    assert repr(af.TensorSpec(None)) == "TensorSpec(shape=<unknown>, dtype=af.float32, name=None)"
    assert af.TensorSpec.from_spec(s, name="y").name == "y"
    assert len({af.TensorSpec([1]), af.TensorSpec([1])}) == 1
    with pytest.raises(TypeError, match="Cannot convert 'nope'"):
        af.TensorSpec([2], "nope")


def test_edit_distance_against_an_empty_truth_and_bad_input():
    h = af.SparseTensor([[0, 0], [0, 1]], [1, 2], [2, 2])
    t = af.SparseTensor([[1, 0]], [1], [2, 1])
    d = af.edit_distance(h, t)
    raw = af.edit_distance(h, t, normalize=False)
    assert d.shape.as_list() == [2]
    with af.Session() as s:
        got, got_raw = s.run([d, raw])
    # TF's kernel: a non-empty hypothesis against an empty truth is inf when normalized.
    np.testing.assert_array_equal(got, [np.inf, 1.0])
    np.testing.assert_array_equal(got_raw, [2.0, 1.0])
    with pytest.raises(ValueError, match="same dtype"):
        af.edit_distance(h, af.SparseTensor([[0, 0]], [1.0], [2, 2]))
    with pytest.raises(TypeError, match="truth must be a SparseTensor"):
        af.edit_distance(h, af.constant([1]))


def test_integer_scatter_div_is_exact_beyond_float_precision():
    big = 2**62 + 1
    v = af.Variable(np.array([[big, -7], [9, 4]], np.int64))
    o = af.scatter_div(v, [0, 0, 1], np.array([[3, 2], [1, 1], [-4, 3]], np.int64))
    with af.Session() as s:
        s.run(v.initializer)
        assert s.run(o).tolist() == [[big // 3, -3], [-2, 1]]


def test_a_graph_def_tensorflow_wrote_imports_and_computes_tfs_values():
    pytest.importorskip("tensorboard")
    rec = FIX["graph_def"]
    with af.Graph().as_default():
        gd = af.GraphDef.FromString(bytes.fromhex(rec["graph_def"]))
        outs = af.import_graph_def(gd, return_elements=rec["fetches"], name="")
        with af.Session() as s:
            got = s.run(outs)
    for name, g, want, dt in zip(rec["fetches"], got, rec["values"], rec["dtypes"]):
        want = np.array(want, dtype=dt)
        assert np.asarray(g).dtype == want.dtype, name
        np.testing.assert_allclose(g, want, rtol=1e-6, err_msg=name)
