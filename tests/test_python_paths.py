"""The `tensorflow.python.*` import paths of TF-1.x programs under `actorflow.python`, and the
functions they bring that actorflow lacked (assign_moving_average, tf.compat's string helpers)."""
import importlib

import numpy as np
import pytest

import actorflow as af

PATHS = {
    "framework.ops": "reset_default_graph", "framework.dtypes": "float32", "framework.tensor_shape": "TensorShape",
    "framework.graph_util": "convert_variables_to_constants", "framework.tensor_util": "make_tensor_proto",
    "framework.errors": "OutOfRangeError", "client.timeline": "Timeline", "client.device_lib": "list_local_devices",
    "client.session": "Session", "ops.array_ops": "reshape", "ops.math_ops": "matmul", "ops.nn_ops": "relu",
    "ops.rnn": "dynamic_rnn", "ops.rnn_cell_impl": "LSTMCell", "ops.init_ops": "glorot_uniform_initializer",
    "ops.variable_scope": "get_variable", "ops.control_flow_ops": "while_loop", "ops.embedding_ops": "embedding_lookup",
    "ops.random_ops": "random_normal", "ops.lookup_ops": "index_table_from_tensor", "platform.gfile": "Exists",
    "platform.tf_logging": "info", "platform.flags": "DEFINE_integer", "training.moving_averages":
    "ExponentialMovingAverage", "training.saver": "Saver", "util.nest": "flatten", "util.compat": "as_bytes",
    "layers.core": "Dense", "summary.summary": "FileWriter", "profiler.model_analyzer": "profile",
    "profiler.option_builder": "ProfileOptionBuilder", "profiler.tfprof_logger": "write_op_log",
}


@pytest.mark.parametrize("path,name", sorted(PATHS.items()))
def test_paths_give_the_public_names(path, name):
    mod = importlib.import_module("actorflow.python." + path)
    assert getattr(mod, name) is not None
    assert name in dir(mod) or path.startswith("client.")


def test_unknown_internal_name_is_named():
    from actorflow.python.ops import array_ops
    with pytest.raises(AttributeError, match="tensorflow.python.ops.array_ops.gen_array_internal"):
        getattr(array_ops, "gen_array_internal")  # noqa: B009


def test_device_lib_lists_the_cpu():
    from actorflow.python.client import device_lib
    devs = device_lib.list_local_devices()
    assert devs[0].device_type == "CPU" and devs[0].name.endswith("CPU:0")
    assert [d.name for d in devs if d.device_type == "GPU"] == [d.name for d in af.list_devices()
                                                                if d.device_type == "GPU"]


@pytest.mark.parametrize("zero_debias", [False, True])
def test_assign_moving_average(zero_debias):
    from actorflow.python.training.moving_averages import assign_moving_average
    with af.Graph().as_default():
        v = af.Variable(np.zeros(2), name="mean")
        x = af.placeholder(af.float64, [2])
        upd = assign_moving_average(v, x, 0.9, zero_debias=zero_debias)
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            got = [s.run(upd, {x: np.array([1.0, 2.0]) * k}) for k in (1, 2)]
    if zero_debias:                     # the biased average over (1 - 0.9^t): the plain mean of what came
        want = [np.array([1.0, 2.0]), (0.09 * np.array([1.0, 2.0]) + 0.1 * np.array([2.0, 4.0])) / (1 - 0.81)]
    else:
        want = [np.array([0.1, 0.2]), np.array([0.1, 0.2]) * 0.9 + 0.1 * np.array([2.0, 4.0])]
    # decay 0.9 becomes a float32 constant before the cast to float64, as in TF: 1e-7 off
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)


def test_compat_strings():
    c = af.compat
    assert c.as_bytes("é") == "é".encode() and c.as_text(b"abc") == "abc" and c.as_str_any(3) == "3"
    with pytest.raises(TypeError, match="Expected binary or unicode string"):
        c.as_bytes(3)


def test_contrib_lookup_vocabulary_tables(tmp_path):
    lookup = af.contrib.lookup
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("emerson\nlake\npalmer\n")
    with af.Graph().as_default():
        words = af.constant(["lake", "tarkus", "emerson", "palmer"])
        t1 = lookup.index_table_from_tensor(["emerson", "lake", "palmer"])
        t2 = lookup.index_table_from_file(str(vocab), num_oov_buckets=3)
        t3 = lookup.index_to_string_table_from_tensor(["emerson", "lake", "palmer"])
        t4 = lookup.index_to_string_table_from_file(str(vocab), default_value="?")
        ids = af.constant([1, 5, 0], af.int64)
        with af.Session() as s:
            s.run(af.tables_initializer())
            a, b, c, d = s.run([t1.lookup(words), t2.lookup(words), t3.lookup(ids), t4.lookup(ids)])
            oov = s.run(af.string_to_hash_bucket_fast(["tarkus"], 3))[0]
    np.testing.assert_array_equal(a, [1, -1, 0, 2])
    np.testing.assert_array_equal(b, [1, 3 + oov, 0, 2])
    assert list(c) == [b"lake", b"UNK", b"emerson"] and list(d) == [b"lake", b"?", b"emerson"]
    with pytest.raises(ValueError, match="vocabulary_file"):
        lookup.index_table_from_file("")
