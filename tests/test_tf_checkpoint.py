"""Reading checkpoints written by TensorFlow 2.21 (fixtures made by tests/fixtures/make_tf_checkpoint.py)."""
import json
import os
import shutil

import numpy as np
import pytest

import actorflow as af

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.path.join(HERE, "fixtures", "tf_checkpoint", "model.ckpt")
with open(os.path.join(HERE, "fixtures", "tf_checkpoint.json")) as _f:
    REF = json.load(_f)


def test_reads_every_tensor_exactly():
    assert af.train.is_tf_checkpoint(PREFIX)
    r = af.train.load_checkpoint(PREFIX)
    assert r.get_variable_to_shape_map() == {k: v["shape"] for k, v in REF.items()}
    assert {k: d.name for k, d in r.get_variable_to_dtype_map().items()} == {k: v["dtype"] for k, v in REF.items()}
    for name, want in REF.items():
        t = r.get_tensor(name)
        assert t.dtype == np.dtype(want["dtype"]) and list(t.shape) == want["shape"]
        assert t.reshape(-1).tolist() == want["values"], name
    with pytest.raises(af.errors.NotFoundError, match="nope"):
        r.get_tensor("nope")


def test_directory_with_state_file_and_new_checkpoint_reader(tmp_path):
    for n in os.listdir(os.path.dirname(PREFIX)):
        shutil.copy(os.path.join(os.path.dirname(PREFIX), n), tmp_path / n)
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt"\n')
    r = af.train.load_checkpoint(str(tmp_path))
    assert r.has_tensor("dense/kernel")
    r2 = af.train.NewCheckpointReader(str(tmp_path / "model.ckpt"))
    np.testing.assert_array_equal(r2.get_tensor("counts"), np.arange(6).reshape(2, 3))


def test_corruption_is_data_loss_naming_the_file(tmp_path):
    for n in os.listdir(os.path.dirname(PREFIX)):
        shutil.copy(os.path.join(os.path.dirname(PREFIX), n), tmp_path / n)
    data = tmp_path / "model.ckpt.data-00000-of-00001"
    raw = bytearray(data.read_bytes())
    raw[5] ^= 0x40
    data.write_bytes(bytes(raw))
    r = af.train.load_checkpoint(str(tmp_path / "model.ckpt"))
    bad = [n for n in REF if _fails(r, n)]
    assert bad, "a flipped bit in the data file went unnoticed"
    with pytest.raises(af.errors.DataLossError, match="data-00000-of-00001"):
        r.get_tensor(bad[0])
    index = tmp_path / "model.ckpt.index"
    raw = bytearray(index.read_bytes())
    raw[10] ^= 0x01
    index.write_bytes(bytes(raw))
    with pytest.raises(af.errors.DataLossError, match=r"model\.ckpt\.index"):
        af.train.load_checkpoint(str(tmp_path / "model.ckpt"))
    index.write_bytes(b"short")
    assert not af.train.is_tf_checkpoint(str(tmp_path / "model.ckpt"))


def _fails(reader, name):
    try:
        reader.get_tensor(name)
    except af.errors.DataLossError:
        return True
    return False


def test_init_from_checkpoint_loads_tf_values_into_variables():
    g = af.Graph()
    with g.as_default():
        with af.variable_scope("model"):
            k = af.get_variable("dense/kernel", [3, 4])
            b = af.get_variable("dense/bias", [4])
        step = af.Variable(np.int64(0), name="step")
        af.train.init_from_checkpoint(PREFIX, {"dense/": "model/dense/", "global_step": "step"})
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            kv, bv, sv = s.run([k, b, step])
    np.testing.assert_array_equal(kv.reshape(-1), np.float32(REF["dense/kernel"]["values"]))
    np.testing.assert_array_equal(bv.reshape(-1), np.float32(REF["dense/bias"]["values"]))
    assert sv == 1234
    with g.as_default(), pytest.raises(ValueError, match="doesn't match"):
        af.train.init_from_checkpoint(PREFIX, {"counts": "step"})
    with g.as_default(), pytest.raises(ValueError, match="not found"):
        af.train.init_from_checkpoint(PREFIX, {"absent": "step"})


def test_load_checkpoint_reads_actorflow_checkpoints_too(tmp_path):
    g = af.Graph()
    with g.as_default():
        v = af.Variable(np.arange(4, dtype=np.float32), name="v")
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            prefix = af.train.Saver().save(s, str(tmp_path / "m"))
    assert not af.train.is_tf_checkpoint(prefix)
    r = af.train.load_checkpoint(prefix)
    assert r.get_variable_to_shape_map() == {"v": [4]}
    np.testing.assert_array_equal(r.get_tensor("v"), np.arange(4, dtype=np.float32))
    del v


def test_write_then_read_round_trip(tmp_path):
    r = af.train.load_checkpoint(PREFIX)
    vals = {k: r.get_tensor(k) for k in REF}
    # Enough keys for several restart points and shared key prefixes in the table block.
    vals.update({f"extra/layer_{i:02d}/w": np.arange(i, dtype=np.float32) * 0.5 for i in range(40)})
    vals["half"] = np.array([[1.5, -2.0]], dtype=np.float16)
    prefix = af.train.write_tf_checkpoint(str(tmp_path / "out" / "model"), vals)
    assert af.train.is_tf_checkpoint(prefix)
    r2 = af.train.load_checkpoint(prefix)
    assert sorted(r2.get_variable_to_shape_map()) == sorted(vals)
    for k, v in vals.items():
        got = r2.get_tensor(k)
        assert got.dtype == v.dtype and got.shape == v.shape, k
        np.testing.assert_array_equal(got, v)


def test_save_tf_checkpoint_from_a_session(tmp_path):
    g = af.Graph()
    with g.as_default():
        w = af.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="dense/kernel")
        step = af.Variable(np.int64(7), name="global_step")
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            s.run(w.assign(w * 2))
            prefix = af.train.save_tf_checkpoint(s, str(tmp_path / "tf" / "model.ckpt"))
    r = af.train.load_checkpoint(prefix)
    np.testing.assert_array_equal(r.get_tensor("dense/kernel"), np.arange(6, dtype=np.float32).reshape(2, 3) * 2)
    assert r.get_tensor("global_step") == 7
    del step


def test_tensorflow_reads_what_actorflow_wrote(tmp_path):
    tf = pytest.importorskip("tensorflow")      # the `bench` extra installs it
    vals = {"dense/kernel": np.arange(12, dtype=np.float32).reshape(3, 4), "global_step": np.int64(42)}
    prefix = af.train.write_tf_checkpoint(str(tmp_path / "m"), vals)
    r = tf.train.load_checkpoint(prefix)
    np.testing.assert_array_equal(r.get_tensor("dense/kernel"), vals["dense/kernel"])
    assert r.get_tensor("global_step") == 42
