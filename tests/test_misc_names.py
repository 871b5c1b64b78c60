"""The smaller TF-1.x names (docs/compat.md's last "Not yet"s): values against TensorFlow 2.21's
(tests/fixtures/misc_names.json, written by tests/fixtures/make_misc_names.py), and the errors of
bad input."""
from __future__ import annotations

import importlib.metadata

import numpy as np
import pytest

import actorflow as af
from tests import tf_reference

FIX = tf_reference.load("misc_names.json")


@pytest.mark.parametrize("expr", list(FIX["cases"]))
def test_values_and_gradients_equal_tensorflows(expr):
    tf_reference.check(FIX, expr)


def _run(*fetches, feed=None):
    with af.Session() as s:
        return s.run(list(fetches), feed)


# -- hashes ------------------------------------------------------------------------------------

def test_hash_buckets_reject_bad_input():
    with pytest.raises(ValueError, match="string input"):
        af.string_to_hash_bucket(af.constant([1, 2]), 10)
    with pytest.raises(ValueError, match="num_buckets must be >= 1"):
        af.strings.to_hash_bucket_strong(["a"], 0, [1, 2])
    with pytest.raises(ValueError, match="two unsigned 64-bit integers"):
        af.strings.to_hash_bucket_strong(["a"], 10, [1])
    with pytest.raises(ValueError, match="rank at least one"):
        af.fingerprint(af.constant(3))
    bad_method = af.fingerprint(af.constant([1, 2]), method="md5")
    with pytest.raises(af.errors.InvalidArgumentError, match="unsupported fingerprint method"):
        _run(bad_method)


def test_fingerprint_of_a_bool_row_is_of_its_bytes():
    (fp,) = _run(af.fingerprint(af.constant([[True, False]])))
    (same,) = _run(af.fingerprint(af.constant([[1, 0]], af.uint8)))
    np.testing.assert_array_equal(fp, same)


# -- bit ops -----------------------------------------------------------------------------------

def test_bitwise_rejects_floats_and_mixed_types():
    with pytest.raises(TypeError, match="not in list of allowed values"):
        af.bitwise.bitwise_and(af.constant([1.0]), af.constant([2.0]))
    with pytest.raises(TypeError, match="same dtype"):
        af.bitwise.bitwise_or(af.constant([1], af.int32), af.constant([1], af.int64))
    with pytest.raises(TypeError, match="not in list"):
        af.bitwise.invert(af.constant([True]))


def test_bitwise_on_uint32_and_uint64():
    a = af.constant(np.array([1, 2 ** 31, 2 ** 32 - 1], np.uint32))
    b = af.constant(np.array([2 ** 63, 5], np.uint64))
    got = _run(af.bitwise.left_shift(a, af.constant(np.uint32(1))), af.bitwise.invert(b),
               af.bitwise.right_shift(b, af.constant(np.array([63, 70], np.uint64))))
    np.testing.assert_array_equal(got[0], np.array([2, 0, 2 ** 32 - 2], np.uint32))
    np.testing.assert_array_equal(got[1], ~np.array([2 ** 63, 5], np.uint64))
    np.testing.assert_array_equal(got[2], np.array([1, 0], np.uint64))


def test_bitcast_shapes_and_errors():
    assert af.bitcast(af.placeholder(af.float64, [None, 3]), af.int8).shape.as_list() == [None, 3, 8]
    assert af.bitcast(af.placeholder(af.int8, [2, 4]), af.float32).shape.as_list() == [2]
    with pytest.raises(TypeError, match="last dimension"):
        af.bitcast(af.placeholder(af.int8, [2, 3]), af.float32)
    with pytest.raises(TypeError, match="scalar"):
        af.bitcast(af.constant(np.int8(1)), af.int32)
    with pytest.raises(TypeError, match="that can be bitcast"):
        af.bitcast(af.constant(["a"]), af.int32)
    p = af.placeholder(af.uint8, [None, None])
    with pytest.raises(af.errors.InvalidArgumentError, match="last dimension must be 4"):
        _run(af.bitcast(p, af.int32), feed={p: np.zeros((2, 3), np.uint8)})


# -- sets --------------------------------------------------------------------------------------

def test_set_ops_errors():
    with pytest.raises(TypeError, match="SparseTensor"):
        af.sets.set_size(af.constant([[1, 2]]))
    with pytest.raises(TypeError, match="invalid dtype float32"):
        af.sets.set_union(af.constant([[1.0]]), af.constant([[2.0]]))
    with pytest.raises(ValueError, match="leading shapes"):
        af.sets.set_union(af.constant([[1, 2]]), af.constant([[1], [2]]))
    with pytest.raises(ValueError, match="rank at least 2"):
        af.sets.set_union(af.constant([1, 2]), af.constant([1, 2]))
    unordered = af.SparseTensor([[1, 0], [0, 0]], af.constant([1, 2], af.int64), [2, 2])
    with pytest.raises(af.errors.InvalidArgumentError, match="out of order"):
        _run(af.sets.set_size(unordered))
    (n,) = _run(af.sets.set_size(unordered, validate_indices=False))
    np.testing.assert_array_equal(n, [1, 1])


def test_set_results_are_sparse_tensors_with_empty_sets():
    out = af.sets.set_intersection(af.constant([[1, 2], [3, 4]]), af.constant([[5, 6], [3, 3]]))
    assert isinstance(out, af.SparseTensor)
    (v,) = _run(out)
    np.testing.assert_array_equal(v.indices, [[1, 0]])
    np.testing.assert_array_equal(v.values, [3])
    np.testing.assert_array_equal(v.dense_shape, [2, 1])
    (empty,) = _run(af.sets.set_difference(af.constant([[1]]), af.constant([[1]])))
    assert empty.indices.shape == (0, 2) and empty.values.shape == (0,)
    np.testing.assert_array_equal(empty.dense_shape, [1, 0])


# -- fake quantization ---------------------------------------------------------------------------

def test_fake_quant_errors():
    x = af.constant([0.5])
    with pytest.raises(af.errors.InvalidArgumentError, match="min has to be smaller than max"):
        af.fake_quant_with_min_max_args(x, min=1.0, max=-1.0)
    with pytest.raises(af.errors.InvalidArgumentError, match="num_bits is out of range"):
        af.fake_quant_with_min_max_args(x, num_bits=1)
    with pytest.raises(ValueError, match="num_bits is out of range"):
        af.fake_quant_with_min_max_vars(x, -1.0, 1.0, num_bits=17)
    with pytest.raises(ValueError, match="float32"):
        af.fake_quant_with_min_max_vars(af.constant([0.5], af.float64), -1.0, 1.0)
    with pytest.raises(ValueError, match="3 channels but the inputs' last dimension is 2"):
        af.fake_quant_with_min_max_vars_per_channel(af.zeros([4, 2]), [-1.0] * 3, [1.0] * 3)
    with pytest.raises(ValueError, match="must be a scalar"):
        af.fake_quant_with_min_max_vars(x, [-1.0], 1.0)


def test_fake_quant_vars_trains_its_range():
    x = af.constant([-9.0, -0.5, 0.5, 9.0])
    mn, mx = af.Variable(-1.0), af.Variable(1.0)
    y = af.fake_quant_with_min_max_vars(x, mn, mx)
    gx, gmin, gmax = af.gradients(af.reduce_sum(y * af.constant([1.0, 2.0, 3.0, 4.0])), [x, mn, mx])
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        vx, vmin, vmax = s.run([gx, gmin, gmax])
    np.testing.assert_array_equal(vx, [0.0, 2.0, 3.0, 0.0])
    assert vmin == 1.0 and vmax == 4.0


# -- namespaces and constants ----------------------------------------------------------------------

def test_version_constants_and_namespace():
    assert af.VERSION == af.version.VERSION == af.__version__
    # the TF-1.x API level, so that TF-1.x programs' version checks take their TF-1.x branch
    assert af.__version__ == "1.15.0" and int(af.__version__.split(".")[0]) == 1
    assert af.version.ACTORFLOW_VERSION == importlib.metadata.version("actorflow")
    assert af.GRAPH_DEF_VERSION == af.Graph().as_graph_def().versions.producer
    assert af.GRAPH_DEF_VERSION_MIN_CONSUMER <= af.GRAPH_DEF_VERSION
    assert af.GRAPH_DEF_VERSION_MIN_PRODUCER <= af.GRAPH_DEF_VERSION
    assert isinstance(af.GIT_VERSION, str) and isinstance(af.COMPILER_VERSION, str)
    assert af.MONOLITHIC_BUILD == 0 and af.CXX11_ABI_FLAG == 0
    assert af.newaxis is None


def test_dtypes_namespace_and_unsigned_types():
    assert af.dtypes.as_dtype("uint32") is af.uint32 is af.dtypes.uint32
    assert af.as_dtype(np.uint64) is af.uint64 and af.uint64.as_datatype_enum == 23
    assert af.uint32.is_unsigned and not af.int32.is_unsigned and af.uint32.max == 2 ** 32 - 1
    assert af.dtypes.complex64.real_dtype is af.float32 and af.float64.real_dtype is af.float64
    assert af.dtypes.bool is af.bool and af.dtypes.DType is af.DType
    assert af.int32.is_compatible_with(af.int32) and not af.int32.is_compatible_with("int64")
    (v,) = _run(af.dtypes.cast(af.constant(np.array([2 ** 32 - 1], np.uint32)), af.uint64) + 1)
    assert v.dtype == np.uint64 and v[0] == 2 ** 32


def test_queue_and_manip_namespaces_are_afs_functions():
    assert af.queue.FIFOQueue is af.FIFOQueue and af.queue.RandomShuffleQueue is af.RandomShuffleQueue
    (r,) = _run(af.manip.roll(af.constant([1, 2, 3]), 1, 0))
    np.testing.assert_array_equal(r, [3, 1, 2])
    assert af.manip.tile is af.tile and af.manip.reshape is af.reshape


def test_op_error_and_logger():
    assert af.OpError is af.errors.OpError
    assert af.get_logger() is af.logging.get_logger() and af.get_logger().name == "actorflow"


# -- session tensors -----------------------------------------------------------------------------

def test_session_handles_keep_values_between_runs():
    with af.Session() as s:
        h = s.run(af.get_session_handle(af.constant([1.0, 2.0]) * 2.0))
        assert isinstance(h.handle, str) and h.handle.startswith("GetSessionHandle;0;")
        np.testing.assert_array_equal(h.eval(), [2.0, 4.0])
        holder, t = af.get_session_tensor(h.handle, af.float32)
        np.testing.assert_array_equal(s.run(t + 1.0, {holder: h.handle}), [3.0, 5.0])
        x = af.placeholder(af.float32, [2])
        np.testing.assert_array_equal(s.run(x * 10.0, {x: h}), [20.0, 40.0])      # a handle feeds its value
        other = s.run(af.get_session_handle(af.constant(7)))
        assert other.handle != h.handle
        h.delete()
        with pytest.raises(af.errors.InvalidArgumentError, match="is not in the session store"):
            s.run(t, {holder: h.handle})
        dp, dop = af.delete_session_tensor(h.handle)
        with pytest.raises(af.errors.InvalidArgumentError, match="Failed to delete"):
            s.run(dop, {dp: h.handle})
        wrong_holder, wrong = af.get_session_tensor(other.handle, af.float32)
        with pytest.raises(af.errors.InternalError, match="does not match declared output type float32"):
            s.run(wrong, {wrong_holder: other.handle})
    with af.Session(graph=holder.graph) as fresh:                      # another session: another store
        with pytest.raises(af.errors.InvalidArgumentError, match="not in the session store"):
            fresh.run(wrong, {wrong_holder: other.handle})


# -- py_function, conversion functions, scopes, small ops -------------------------------------------------

def test_py_function_hands_eager_like_arrays_and_converts_python_results():
    x = af.constant([1.0, 2.0])
    word = af.constant("abc")
    y = af.py_function(lambda a, w: a.numpy() * 2.0 + len(w.numpy()), [x, word], af.float32)
    z = af.py_function(lambda a: [float(a.numpy().sum()), 2], [x], [af.float32, af.int64])
    calls = []
    side = af.py_function(lambda: calls.append(1), [], None)
    got = _run(y, z, side)
    np.testing.assert_array_equal(got[0], [5.0, 7.0])
    assert got[1][0] == np.float32(3.0) and got[1][1].dtype == np.int64
    assert calls == [1]
    bad = af.py_function(lambda a: a.numpy().astype(np.float64), [x], af.float32)
    with pytest.raises(af.errors.InvalidArgumentError, match="double|float64"):
        _run(bad)
    with pytest.raises(TypeError, match="callable"):
        af.py_function(3, [x], af.float32)


def test_register_tensor_conversion_function():
    class Meters:
        def __init__(self, v):
            self.v = v

    def to_tensor(value, dtype=None, name=None, as_ref=False):
        return af.constant(value.v, dtype=dtype or af.float32, name=name)
    af.register_tensor_conversion_function(Meters, to_tensor)
    (v,) = _run(af.add(Meters(2.5), 1.0))
    assert v == 3.5
    assert af.convert_to_tensor(Meters(1), dtype=af.float64).dtype is af.float64
    with pytest.raises(TypeError, match="Python numeric types"):
        af.register_tensor_conversion_function(int, to_tensor)
    with pytest.raises(TypeError, match="must be a type"):
        af.register_tensor_conversion_function("x", to_tensor)
    with pytest.raises(TypeError, match="callable"):
        af.register_tensor_conversion_function(Meters, 3)

    class Bad:
        pass
    af.register_tensor_conversion_function(Bad, lambda value, dtype=None, name=None, as_ref=False: 7)
    with pytest.raises(RuntimeError, match="returned non-Tensor"):
        af.convert_to_tensor(Bad())


def test_container_op_scope_variable_op_scope():
    with af.Graph().as_default():
        x = af.constant(1.0)
        with af.container("experiment"):
            v = af.Variable(1.0, name="v")
            q = af.FIFOQueue(3, af.float32)
        w = af.Variable(2.0, name="w")
        assert v.op.attrs["container"] == "experiment" and w.op.attrs["container"] == ""
        assert q.queue_ref.op.attrs["container"] == "experiment"
        with af.op_scope([x], "outer", "default") as scope:
            assert scope == "outer/"
            assert af.identity(x).name == "outer/Identity:0"
        with af.variable_op_scope([x], None, "block") as vs:
            assert vs.name == "block" and af.get_variable("k", [1]).name == "block/k:0"
        with pytest.raises(TypeError, match="string"):
            with af.container(3):
                pass


def test_guarantee_const_timestamp_is_symbolic():
    x = af.constant(2.0)
    g = af.guarantee_const(x)
    assert g.op.type == "GuaranteeConst"
    with pytest.raises(LookupError, match="GuaranteeConst"):
        af.gradients(g * x, x)
    t = af.timestamp()
    import time
    before = time.time()
    t1, t2, gv = _run(t, t, g)
    assert t1.dtype == np.float64 and before - 1 <= t1 <= time.time() + 1 and gv == 2.0
    assert af.is_symbolic_tensor(x) and not af.is_symbolic_tensor(af.Variable(1.0))
    assert not af.is_symbolic_tensor(3.0)
    assert not af.is_symbolic_tensor(af.SparseTensor([[0]], [1], [2]))


def test_batch_scatter_update_writes_rows_per_batch():
    init = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    v = af.Variable(init)
    idx = np.array([[2, 0], [1, 2]])
    upd = -np.arange(8, dtype=np.float32).reshape(2, 2, 2) - 1
    out = af.batch_scatter_update(v, idx, upd)
    with af.Session() as s:
        s.run(af.global_variables_initializer())
        got = s.run(out)
    want = init.copy()
    for b in range(2):
        for j in range(2):
            want[b, idx[b, j]] = upd[b, j]
    np.testing.assert_array_equal(got, want)
    with pytest.raises(TypeError, match="int32 or int64"):
        af.batch_scatter_update(v, af.constant([[0.0]]), upd[:, :1])


def test_raise_exception_on_not_ok_status():
    with af.errors.raise_exception_on_not_ok_status() as status:
        assert status.ok()
    with pytest.raises(af.errors.NotFoundError, match="no such file"):
        with af.errors.raise_exception_on_not_ok_status() as status:
            status.set(af.errors.NOT_FOUND, "no such file")
    with pytest.raises(ValueError, match="unknown error code"):
        af.errors.Status().set(99, "x")


# -- partitioned variables -------------------------------------------------------------------------

def test_create_partitioned_variables_as_tf_names_and_slices_them():
    with af.Graph().as_default():
        parts = af.create_partitioned_variables([5, 3], [2, 1], af.constant_initializer(1.0))
        assert [v.name for v in parts] == ["PartitionedVariable/part_0:0", "PartitionedVariable/part_1:0"]
        assert [v.shape.as_list() for v in parts] == [[3, 3], [2, 3]]
        assert [v._save_slice_info.spec for v in parts] == ["5 3 0,3:0,3", "5 3 3,2:0,3"]
        emb = af.create_partitioned_variables([4, 2], [1, 2], np.arange(8, dtype=np.float32).reshape(4, 2),
                                              name="emb")
        assert [v.name for v in emb] == ["emb/part_0:0", "emb/part_1:0"]
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            a, b = s.run(emb)
        np.testing.assert_array_equal(np.concatenate([a, b], axis=1), np.arange(8).reshape(4, 2))
        with pytest.raises(ValueError, match="must have the length"):
            af.create_partitioned_variables([4], [2, 1], af.zeros_initializer())
        with pytest.raises(ValueError, match="one dimension"):
            af.create_partitioned_variables([4, 4], [2, 2], af.zeros_initializer())


def test_min_max_variable_partitioner():
    p = af.min_max_variable_partitioner(max_partitions=16, min_slice_size=1024)
    assert p(af.TensorShape([1024, 64]), af.float32) == [16, 1]        # 256 KiB / 1 KiB, capped at 16
    assert p(af.TensorShape([10, 64]), af.float32) == [3, 1]           # ceil(2560 / 1024)
    assert p(af.TensorShape([3, 5]), af.string) == [1, 1]              # 15 * 16 bytes
    assert af.min_max_variable_partitioner(8, axis=1, min_slice_size=4)(af.TensorShape([2, 3]), af.float32) == [1, 3]
    with pytest.raises(ValueError, match="along axis 2"):
        af.min_max_variable_partitioner(axis=2)(af.TensorShape([4]), af.float32)
    with af.Graph().as_default():
        with af.variable_scope("s", partitioner=af.min_max_variable_partitioner(4, min_slice_size=64)):
            v = af.get_variable("w", [32, 2])
        assert len(v) == 4 and v[0].name == "s/w/part_0:0"


# -- data options and numpy iteration, saved_model main ops, protos, summary descriptions ------------

def test_data_options_flow_downstream_and_later_ones_win():
    o = af.data.Options()
    o.deterministic = False
    o.threading.private_threadpool_size = 4
    d = af.data.Dataset.range(5).with_options(o)
    later = af.data.Options()
    later.deterministic = True
    d2 = d.map(lambda x: x * 2).with_options(later)
    assert d.options().deterministic is False and d.map(lambda x: x).options().deterministic is False
    assert d2.options().deterministic is True and d2.options().threading.private_threadpool_size == 4
    assert af.data.Dataset.range(2).options() == af.data.Options()
    assert o.experimental_threading is o.threading and o.experimental_deterministic is False
    with pytest.raises(AttributeError, match="Cannot set the property foo on Options"):
        o.foo = 1
    with pytest.raises(TypeError, match='"deterministic" must be of type'):
        o.deterministic = 3
    with pytest.raises(TypeError, match="private_threadpool_size"):
        af.data.ThreadingOptions().private_threadpool_size = "4"
    with pytest.raises(TypeError, match="with_options expects"):
        d.with_options({"deterministic": True})
    assert (af.data.INFINITE_CARDINALITY, af.data.UNKNOWN_CARDINALITY) == (-1, -2)


def test_numpy_iterator_runs_the_dataset_in_its_own_session():
    d = af.data.Dataset.from_tensor_slices({"a": [1, 2], "b": ["x", "y"]})
    it = d.as_numpy_iterator()
    assert isinstance(it, af.data.NumpyIterator)
    assert list(it) == [{"a": 1, "b": b"x"}, {"a": 2, "b": b"y"}]
    assert list(it) == []                                         # exhausted, its session closed
    evens = af.data.NumpyIterator(af.data.Dataset.range(10).filter(lambda x: af.equal(x % 2, 0)).batch(2))
    np.testing.assert_array_equal(next(evens), [0, 2])
    evens.close()
    with pytest.raises(StopIteration):
        next(evens)
    with pytest.raises(TypeError, match="expects a tf.data.Dataset"):
        af.data.NumpyIterator([1, 2])


def test_saved_model_main_ops():
    with af.Graph().as_default():
        local = af.Variable(3.0, collections=[af.GraphKeys.LOCAL_VARIABLES])
        table = af.lookup.StaticHashTable(af.lookup.KeyValueTensorInitializer(["a"], [7]), -1)
        af.Variable(1.0, name="g")
        saver = af.train.Saver()
        m = af.saved_model.main_op.main_op()
        r = af.saved_model.main_op_with_restore("save/restore_all")
        names = sorted(c.name for c in r.control_inputs)
        assert len(names) == 2 and "save/restore_all" in names       # the restore, after a fresh main_op
        (inner,) = [c for c in r.control_inputs if c.name != "save/restore_all"]
        assert sorted(c.type for c in inner.control_inputs) == sorted(c.type for c in m.control_inputs)
        with af.Session() as s:
            s.run(m)
            assert s.run(local) == 3.0 and s.run(table.lookup(af.constant(["a"])))[0] == 7
        del saver


def test_graph_protos_and_summary_description():
    mg = af.MetaGraphDef()
    mg.graph_def.CopyFrom(af.Graph().as_graph_def())
    info = af.TensorInfo(name="x:0", dtype=af.float32.as_datatype_enum)
    assert af.TensorInfo.FromString(info.SerializeToString()).name == "x:0"
    assert af.NameAttrList(name="f").name == "f"
    node = af.NodeDef(op="TensorSummary", name="s")
    node.attr["description"].s = b'{"type_hint": "image"}'
    assert af.summary.get_summary_description(node).type_hint == "image"
    with pytest.raises(ValueError, match="Can't get_summary_description on TensorSummaryV2"):
        af.summary.get_summary_description(af.NodeDef(op="TensorSummaryV2", name="t"))


# -- debugging -------------------------------------------------------------------------------------

def test_enable_check_numerics_instruments_new_float_ops():
    with af.Graph().as_default():
        x = af.placeholder(af.float32, [2])
        before = af.log(x)
        af.debugging.enable_check_numerics()
        try:
            checked = af.log(x) * 2.0
            ints = af.constant([1, 2]) + 1
        finally:
            af.debugging.disable_check_numerics()
        after = af.log(x)
        types = [op.type for op in af.get_default_graph().get_operations()]
        assert types.count("CheckNumerics") == 2                      # Log and Mul; not the ints, not after
        assert ints.op.type != "CheckNumerics"
        with af.Session() as s:
            np.testing.assert_array_equal(s.run(before, {x: [1.0, 0.0]}), [0.0, -np.inf])
            np.testing.assert_array_equal(s.run(after, {x: [1.0, 0.0]}), [0.0, -np.inf])
            np.testing.assert_allclose(s.run(checked, {x: [1.0, np.e]}), [0.0, 2.0], rtol=1e-6)
            with pytest.raises(af.errors.InvalidArgumentError,
                               match='Detected Infinity or NaN in output 0 of graph op "Log"'):
                s.run(checked, {x: [1.0, -1.0]})
        g = af.gradients(checked, x)[0]                                 # gradients pass through the checks
        with af.Session() as s:
            np.testing.assert_allclose(s.run(g, {x: [1.0, 2.0]}), [2.0, 1.0], rtol=1e-6)
    af.debugging.disable_check_numerics()                               # disabling twice is harmless


def test_log_device_placement_logs_each_op(caplog):
    import logging
    assert af.debugging.get_log_device_placement() is False
    af.debugging.set_log_device_placement(True)
    try:
        with caplog.at_level(logging.INFO, logger="actorflow.actors.session"), af.Graph().as_default():
            x = af.placeholder(af.float32, [], name="x")
            y = af.square(x, name="sq")
            with af.Session() as s:
                s.run(y, {x: 3.0})
    finally:
        af.debugging.set_log_device_placement(False)
    assert "sq: (Square): /job:localhost/replica:0/task:0/device:CPU:0" in caplog.text


def test_more_top_level_names():
    assert af.resource is af.dtypes.resource and af.resource.name == "resource"
    assert issubclass(af.ConditionalAccumulator, af.ConditionalAccumulatorBase)
    msg = af.LogMessage(level=af.LogMessage.WARN, message="careful")
    assert af.Event(log_message=msg).log_message.message == "careful"


def test_resource_loader_paths(tmp_path):
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    assert af.resource_loader.get_data_files_path() == here
    assert af.resource_loader.get_path_to_datafile("fixtures/x.json") == os.path.join(here, "fixtures/x.json")
    assert af.resource_loader.get_root_dir_with_all_resources() == here
    assert af.resource_loader.load_resource("version.py").startswith(b'"""af.version')
    with pytest.raises(OSError):
        af.resource_loader.load_resource("no/such/file")
    assert af.resource_loader.readahead_file_path("/a/b") == "/a/b"


def test_vectorized_map_is_map_fn_with_traced_dtypes():
    x = af.constant(np.arange(6, dtype=np.float32).reshape(3, 2))
    w = af.constant([1.0, 2.0])
    pair = af.vectorized_map(lambda r: (af.reduce_sum(r * r), af.cast(r[0], af.int32)), x)
    scaled = af.vectorized_map(lambda r: r * w, x)               # uses a tensor of this graph
    grad = af.gradients(af.reduce_sum(scaled), x)[0]
    (sq, first), sc, g = _run(pair, scaled, grad)
    np.testing.assert_array_equal(sq, [1.0, 13.0, 41.0])
    assert first.dtype == np.int32 and list(first) == [0, 2, 4]
    np.testing.assert_array_equal(sc, np.arange(6).reshape(3, 2) * [1.0, 2.0])
    np.testing.assert_array_equal(g, np.tile([1.0, 2.0], (3, 1)))
    with pytest.raises(TypeError, match="callable"):
        af.vectorized_map(None, x)


def test_variable_creator_scope_chains_creators():
    seen = []

    def frozen(next_creator, **kwargs):
        seen.append(("frozen", kwargs["name"]))
        kwargs["trainable"] = False
        return next_creator(**kwargs)

    def outer(next_creator, **kwargs):
        seen.append(("outer", kwargs["name"]))
        return next_creator(**kwargs)

    with af.Graph().as_default():
        with af.variable_creator_scope(outer), af.variable_creator_scope(frozen):
            v = af.Variable(1.0, name="v")
            w = af.get_variable("w", [2])
        u = af.Variable(2.0, name="u")
        assert seen == [("frozen", "v"), ("outer", "v"), ("frozen", "w"), ("outer", "w")]
        assert not v.trainable and not w.trainable and u.trainable
        assert af.trainable_variables() == [u]
        with af.variable_creator_scope(lambda next_creator, **kw: "not a variable"):
            assert af.Variable(3.0) == "not a variable"
        with pytest.raises(TypeError, match="callable"):
            with af.variable_creator_scope(None):
                pass


def test_dataset_cardinality_follows_tfs_rules():
    D = af.data.Dataset
    # (what TF 2.21's tf.compat.v1 gives for each, run once by hand with tf.data.experimental.cardinality)
    cases = {
        "range10": (D.range(10), 10), "range_neg": (D.range(5, 1, -2), 2),
        "slices": (D.from_tensor_slices([1, 2, 3]), 3), "tensors": (D.from_tensors([1, 2]), 1),
        "batch3": (D.range(10).batch(3), 4), "batch3drop": (D.range(10).batch(3, drop_remainder=True), 3),
        "repeat": (D.range(3).repeat(), -1), "repeat2": (D.range(3).repeat(2), 6), "repeat0": (D.range(0).repeat(), 0),
        "take_inf": (D.range(3).repeat().take(5), 5), "take": (D.range(3).take(5), 3),
        "skip": (D.range(10).skip(4), 6), "skip_big": (D.range(3).skip(9), 0),
        "filter": (D.range(3).filter(lambda x: x > 0), -2),
        "filter_repeat": (D.range(3).filter(lambda x: x > 0).repeat(), -1),
        "filter_take": (D.range(3).filter(lambda x: x > 0).take(2), -2),
        "zip": (D.zip((D.range(3), D.range(5))), 3), "zip_inf": (D.zip((D.range(3).repeat(), D.range(5))), 5),
        "concat": (D.range(3).concatenate(D.range(4)), 7),
        "concat_inf": (D.range(3).concatenate(D.range(4).repeat()), -1),
        "map": (D.range(4).map(lambda x: x * 2), -2), "shuffle_prefetch": (D.range(4).shuffle(2).prefetch(1), 4),
        "padded": (D.range(7).padded_batch(2), 4), "enumerate": (D.range(4).enumerate(), 4),
    }
    names = list(cases)
    got = _run(*[af.data.experimental.cardinality(cases[k][0]) for k in names])
    assert {k: int(v) for k, v in zip(names, got)} == {k: cases[k][1] for k in names}
    assert got[0].dtype == np.int64
    assert af.data.experimental.INFINITE_CARDINALITY == af.data.INFINITE_CARDINALITY == -1
