"""Checkpoints (af.train.Saver, latest_checkpoint, list_variables; SaveShard/RestoreShard ops):
round trips, the safetensors shard format, max_to_keep, detection of incomplete, truncated and
bit-flipped checkpoints, shape checks on restore, crashes in the middle of a save (in-process
failure injection and a real process killed between shard writes), and a sharded save on a local
cluster where each parameter server writes its own shard."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import actorflow as af
from actorflow import checkpoint_format as ckpt_io
from actorflow import errors
from actorflow.graph.ops import io_ops
from actorflow.train import (
    Saver,
    checkpoint_exists,
    get_checkpoint_state,
    latest_checkpoint,
    list_variables,
    load_variable,
)

pytestmark = pytest.mark.usefixtures("graph")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _data_files(d, prefix=""):
    return sorted(f for f in os.listdir(d) if ".data-" in f and f.startswith(prefix))


VALUES = {
    "f16": np.array([[1.5, -2.25], [0.0, 65504.0]], np.float16),
    "f32": np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32),
    "f64": np.array(3.25, np.float64),                       # a scalar
    "i8": np.array([-128, 0, 127], np.int8),
    "i16": np.arange(-6, 6, dtype=np.int16).reshape(3, 4),
    "i32": np.array([2**31 - 1, -2**31], np.int32),
    "i64": np.array([[2**62], [-5]], np.int64),
    "u8": np.arange(256, dtype=np.uint8),
    "flags": np.array([True, False, True]),
    "empty": np.zeros((0, 3), np.float32),
    "big": np.random.default_rng(1).standard_normal((1100, 1000)).astype(np.float32),   # > the threading cut-off
}


def _make_vars(values=VALUES, device_of=lambda i: None):
    out = {}
    for i, (name, v) in enumerate(values.items()):
        with af.device(device_of(i)):
            out[name] = af.Variable(v, name=name)
    return out


def _zero_all(sess, vs):
    sess.run([v.assign(np.zeros(v.shape.as_list(), v.dtype.np)) for v in vs.values()])


# -- round trips ------------------------------------------------------------------------------------------

def test_round_trip_dtypes_and_shapes(tmp_path):
    vs = _make_vars()
    saver = Saver()
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        prefix = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=7)
        assert prefix == str(tmp_path / "model.ckpt-7")
        _zero_all(sess, vs)
        saver.restore(sess, prefix)
        got = sess.run(vs)
    for name, want in VALUES.items():
        assert got[name].dtype == want.dtype and got[name].shape == want.shape, name
        np.testing.assert_array_equal(got[name], want, err_msg=name)
    assert checkpoint_exists(prefix)
    assert list_variables(str(tmp_path)) == sorted((k, list(v.shape)) for k, v in VALUES.items())
    np.testing.assert_array_equal(load_variable(prefix, "i64"), VALUES["i64"])


def test_shard_files_are_safetensors(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    _make_vars(device_of=lambda i: f"/job:ps/task:{i % 2}")
    saver = Saver()
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        prefix = saver.save(sess, str(tmp_path / "m"))
    files = _data_files(tmp_path)
    assert files == ["m.data-00000-of-00002", "m.data-00001-of-00002"]
    loaded = {}
    for i, f in enumerate(files):
        part = st.load_file(str(tmp_path / f))
        # Sharded by task: each file holds exactly the variables of its task.
        assert sorted(part) == sorted(k for j, k in enumerate(VALUES) if j % 2 == i)
        loaded.update(part)
    for name, want in VALUES.items():
        np.testing.assert_array_equal(loaded[name], want, err_msg=name)
    with open(prefix + ".index") as f:
        index = json.load(f)
    assert [s["file"] for s in index["shards"]] == files
    assert all(len(t["sha256"]) == 64 for s in index["shards"] for t in s["tensors"].values())
    assert not [f for f in os.listdir(tmp_path) if ".tmp-" in f]


def test_unsharded_save_writes_one_file(tmp_path):
    vs = _make_vars({"a": np.ones(3, np.float32), "b": np.arange(4)}, device_of=lambda i: f"/job:ps/task:{i}")
    saver = Saver(sharded=False)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        prefix = saver.save(sess, str(tmp_path / "m"), global_step=af.constant(12, af.int64))
        assert prefix.endswith("m-12")
        assert _data_files(tmp_path) == ["m-12.data-00000-of-00001"]
        _zero_all(sess, vs)
        saver.restore(sess, prefix)
        np.testing.assert_array_equal(sess.run(vs["b"]), np.arange(4))


def test_var_list_dict_renames_keys(tmp_path):
    a = af.Variable(np.array([1.0, 2.0], np.float32), name="a")
    saver = Saver({"renamed/a": a}, pad_step_number=True)
    with af.Session() as sess:
        sess.run(a.initializer)
        prefix = saver.save(sess, str(tmp_path / "m"), global_step=3)
    assert prefix.endswith("m-00000003")
    assert list_variables(prefix) == [("renamed/a", [2])]
    with af.Graph().as_default():
        b = af.Variable(np.zeros(2, np.float32), name="b")
        with af.Session() as sess:
            sess.run(b.initializer)
            Saver({"renamed/a": b}).restore(sess, prefix)
            np.testing.assert_array_equal(sess.run(b), [1.0, 2.0])


def test_saver_builds_its_ops_once(tmp_path):
    v = af.Variable(np.zeros(4, np.float32), name="v")
    g = af.get_default_graph()
    saver = Saver()
    n = len(g.get_operations())
    g.finalize()    # as MonitoredTrainingSession does: save and restore must not add ops
    with af.Session() as sess:
        sess.run(v.initializer)
        for step in range(3):
            p = saver.save(sess, str(tmp_path / "m"), global_step=step)
            saver.restore(sess, p)
    assert len(g.get_operations()) == n


def test_save_over_existing_prefix(tmp_path):
    v = af.Variable(np.float32(1.0), name="v")
    saver = Saver()
    with af.Session() as sess:
        sess.run(v.initializer)
        p1 = saver.save(sess, str(tmp_path / "m"), global_step=5)
        sess.run(v.assign(2.0))
        p2 = saver.save(sess, str(tmp_path / "m"), global_step=5)
        assert p1 == p2 and saver.last_checkpoints == [p2]
        sess.run(v.assign(0.0))
        saver.restore(sess, latest_checkpoint(str(tmp_path)))
        assert sess.run(v) == 2.0


def test_no_variables():
    with pytest.raises(ValueError, match="No variables to save"):
        Saver()
    saver = Saver(allow_empty=True)
    with af.Session() as sess:
        assert saver.save(sess, "/nonexistent/never-written") is None


# -- max_to_keep and the state file -------------------------------------------------------------------------

def test_max_to_keep(tmp_path):
    v = af.Variable(np.zeros(2, np.float32), name="v")
    saver = Saver(max_to_keep=2)
    base = str(tmp_path / "model.ckpt")
    with af.Session() as sess:
        sess.run(v.initializer)
        paths = [saver.save(sess, base, global_step=s) for s in (10, 20, 30, 40)]
    assert saver.last_checkpoints == paths[-2:]
    assert not checkpoint_exists(paths[0]) and not checkpoint_exists(paths[1])
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["checkpoint"] + [f"model.ckpt-{s}{ext}" for s in (30, 40) for ext in (".index", ".data-00000-of-00001", ".meta")])
    st = get_checkpoint_state(str(tmp_path))
    assert st.model_checkpoint_path == paths[-1]
    assert st.all_model_checkpoint_paths == paths[-2:]
    with open(tmp_path / "checkpoint") as f:
        text = f.read()
    # TF's text format, with paths relative to the directory.
    assert 'model_checkpoint_path: "model.ckpt-40"' in text
    assert 'all_model_checkpoint_paths: "model.ckpt-30"' in text
    assert latest_checkpoint(str(tmp_path)) == paths[-1]


def test_max_to_keep_none_keeps_every_file(tmp_path):
    v = af.Variable(np.zeros(2, np.float32), name="v")
    saver = Saver(max_to_keep=None)
    with af.Session() as sess:
        sess.run(v.initializer)
        paths = [saver.save(sess, str(tmp_path / "m"), global_step=s) for s in range(3)]
    assert all(checkpoint_exists(p) for p in paths)
    assert saver.last_checkpoints == paths[-1:]


def test_keep_checkpoint_every_n_hours_preserves_old_ones(tmp_path):
    v = af.Variable(np.zeros(2, np.float32), name="v")
    saver = Saver(max_to_keep=1, keep_checkpoint_every_n_hours=1e-9)
    with af.Session() as sess:
        sess.run(v.initializer)
        paths = [saver.save(sess, str(tmp_path / "m"), global_step=s) for s in range(3)]
    assert saver.last_checkpoints == paths[-1:]
    assert all(checkpoint_exists(p) for p in paths)


def test_recover_last_checkpoints(tmp_path):
    v = af.Variable(np.zeros(2, np.float32), name="v")
    with af.Session() as sess:
        sess.run(v.initializer)
        s1 = Saver(max_to_keep=2)
        paths = [s1.save(sess, str(tmp_path / "m"), global_step=s) for s in range(2)]
        # A restarted chief adopts the previous checkpoints, so that max_to_keep keeps deleting them.
        s2 = Saver(max_to_keep=2)
        s2.recover_last_checkpoints(get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths)
        assert s2.last_checkpoints == paths
        p3 = s2.save(sess, str(tmp_path / "m"), global_step=2)
    assert not checkpoint_exists(paths[0]) and s2.last_checkpoints == [paths[1], p3]


def test_state_file_quoting(tmp_path):
    from actorflow.train import update_checkpoint_state
    odd = str(tmp_path / 'we"ird\\name ü')
    update_checkpoint_state(str(tmp_path), odd, [odd])
    st = get_checkpoint_state(str(tmp_path))
    assert st.model_checkpoint_path == odd and st.all_model_checkpoint_paths == [odd]


# -- detection of incomplete and corrupt checkpoints ----------------------------------------------------------

def _two_checkpoints(tmp_path, max_to_keep=5):
    """Saves v=1 at step 1 and v=2 at step 2; returns (saver, v, [prefix1, prefix2])."""
    v = af.Variable(np.full(1000, 1.0, np.float32), name="v")
    af.Variable(np.arange(10, dtype=np.int32), name="w")
    saver = Saver(max_to_keep=max_to_keep)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        p1 = saver.save(sess, str(tmp_path / "m"), global_step=1)
        sess.run(v.assign(np.full(1000, 2.0, np.float32)))
        p2 = saver.save(sess, str(tmp_path / "m"), global_step=2)
    return saver, v, [p1, p2]


def _restored_v(saver, v, prefix):
    with af.Session() as sess:
        saver.restore(sess, prefix)
        return sess.run(v)


def test_latest_checkpoint_skips_checkpoint_without_index(tmp_path):
    saver, v, (p1, p2) = _two_checkpoints(tmp_path)
    assert latest_checkpoint(str(tmp_path)) == p2
    os.unlink(p2 + ".index")      # a crash after the shards, before the index
    assert latest_checkpoint(str(tmp_path)) == p1
    np.testing.assert_array_equal(_restored_v(saver, v, latest_checkpoint(str(tmp_path))), 1.0)
    with pytest.raises(ValueError, match="not a valid checkpoint"):
        _restored_v(saver, v, p2)


def test_truncated_shard(tmp_path):
    saver, v, (p1, p2) = _two_checkpoints(tmp_path)
    shard = p2 + ".data-00000-of-00001"
    size = os.path.getsize(shard)
    with open(shard, "r+b") as f:
        f.truncate(size - 100)
    assert latest_checkpoint(str(tmp_path)) == p1
    with pytest.raises(errors.DataLossError, match="truncated") as e:
        _restored_v(saver, v, p2)
    assert shard in str(e.value)


@pytest.mark.parametrize("where", ["tensor", "header"])
def test_bit_flipped_shard(tmp_path, where):
    saver, v, (p1, p2) = _two_checkpoints(tmp_path)
    shard = p2 + ".data-00000-of-00001"
    with open(p2 + ".index") as f:
        t = json.load(f)["shards"][0]["tensors"]["v"]
    pos = t["offset"] + 123 if where == "tensor" else 20
    with open(shard, "r+b") as f:
        f.seek(pos)
        byte = f.read(1)[0]
        f.seek(pos)
        f.write(bytes([byte ^ 0x10]))
    assert latest_checkpoint(str(tmp_path)) == p1
    np.testing.assert_array_equal(_restored_v(saver, v, p1), 1.0)
    if where == "tensor":
        with pytest.raises(errors.DataLossError, match="checksum mismatch for tensor 'v'") as e:
            _restored_v(saver, v, p2)
        assert shard in str(e.value) and "save/restore_shard" in str(e.value)


def test_corrupt_index(tmp_path):
    saver, v, (p1, p2) = _two_checkpoints(tmp_path)
    with open(p2 + ".index", "r+b") as f:
        data = bytearray(f.read())
        data[len(data) // 2] ^= 0x01
        f.seek(0)
        f.write(data)
    assert latest_checkpoint(str(tmp_path)) == p1
    with pytest.raises(errors.DataLossError, match="index"):
        _restored_v(saver, v, p2)


def test_missing_shard_file(tmp_path):
    saver, v, (p1, p2) = _two_checkpoints(tmp_path)
    os.unlink(p2 + ".data-00000-of-00001")
    assert latest_checkpoint(str(tmp_path)) == p1
    with pytest.raises(errors.DataLossError, match="missing"):
        _restored_v(saver, v, p2)


def test_latest_checkpoint_without_state_file(tmp_path):
    _, _, (p1, p2) = _two_checkpoints(tmp_path)
    os.unlink(tmp_path / "checkpoint")
    assert latest_checkpoint(str(tmp_path)) == p2
    assert latest_checkpoint(str(tmp_path / "nothing-here")) is None


# -- restore checks -------------------------------------------------------------------------------------------

def test_shape_mismatch_names_the_variable(tmp_path):
    w = af.Variable(np.arange(12, dtype=np.float32).reshape(3, 4), name="layer/w")
    with af.Session() as sess:
        sess.run(w.initializer)
        prefix = Saver().save(sess, str(tmp_path / "m"))
    with af.Graph().as_default():
        w2 = af.Variable(np.zeros((4, 3), np.float32), name="layer/w")
        with af.Session() as sess:
            sess.run(w2.initializer)
            with pytest.raises(errors.InvalidArgumentError, match=r"'layer/w'.*shape \[4, 3\].*shape \[3, 4\]"):
                Saver().restore(sess, prefix)
            # The variable is untouched by the failed restore.
            np.testing.assert_array_equal(sess.run(w2), 0.0)
            Saver(reshape=True).restore(sess, prefix)
            np.testing.assert_array_equal(sess.run(w2), np.arange(12, dtype=np.float32).reshape(4, 3))
    with af.Graph().as_default():
        w3 = af.Variable(np.zeros(5, np.float32), name="layer/w")
        with af.Session() as sess:
            with pytest.raises(errors.InvalidArgumentError, match="'layer/w'"):
                Saver(reshape=True).restore(sess, prefix)
    with af.Graph().as_default():
        af.Variable(np.zeros((3, 4), np.float64), name="layer/w")
        with af.Session() as sess:
            with pytest.raises(errors.InvalidArgumentError, match=r"'layer/w'.*dtype float64"):
                Saver().restore(sess, prefix)
    del w3


def test_missing_variable_in_checkpoint(tmp_path):
    a = af.Variable(np.float32(1.0), name="a")
    with af.Session() as sess:
        sess.run(a.initializer)
        prefix = Saver().save(sess, str(tmp_path / "m"))
    af.Variable(np.float32(0.0), name="b")
    with af.Session() as sess:
        with pytest.raises(errors.NotFoundError, match="'b' not found"):
            Saver().restore(sess, prefix)


def test_restore_initializes_uninitialized_variables(tmp_path):
    v = af.Variable(np.arange(3.0), name="v")
    saver = Saver()
    with af.Session() as sess:
        sess.run(v.initializer)
        prefix = saver.save(sess, str(tmp_path / "m"))
    with af.Session() as sess:     # a fresh session: v has no value until restored
        saver.restore(sess, prefix)
        np.testing.assert_array_equal(sess.run(v), np.arange(3.0))


def test_variable_of_unknown_shape(tmp_path):
    v = af.Variable(np.arange(3.0), name="v", validate_shape=False)
    saver = Saver()
    with af.Session() as sess:
        sess.run(v.initializer)
        prefix = saver.save(sess, str(tmp_path / "m"))
        # With no static shape to check against, restore replaces the value, shape included.
        sess.run(af.assign(v, np.zeros(5), validate_shape=False))
        assert sess.run(v).shape == (5,)
        saver.restore(sess, prefix)
        np.testing.assert_array_equal(sess.run(v), np.arange(3.0))


def test_partitioned_variable_parts(tmp_path):
    from actorflow.graph.variable_scope import fixed_size_partitioner, get_variable
    full = np.arange(40, dtype=np.float32).reshape(10, 4)
    emb = get_variable("emb", initializer=full, partitioner=fixed_size_partitioner(2))
    saver = Saver([emb])
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        prefix = saver.save(sess, str(tmp_path / "m"))
        sess.run([p.assign(np.zeros(p.shape.as_list(), np.float32)) for p in emb])
        saver.restore(sess, prefix)
        np.testing.assert_array_equal(np.concatenate(sess.run(list(emb))), full)
    assert [n for n, _ in list_variables(prefix)] == ["emb/part_0", "emb/part_1"]


def test_restore_sequentially(tmp_path):
    vs = _make_vars({"a": np.ones(3), "b": np.arange(3), "c": np.float32(2)}, device_of=lambda i: f"/job:ps/task:{i}")
    saver = Saver(restore_sequentially=True)
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        p = saver.save(sess, str(tmp_path / "m"))
        _zero_all(sess, vs)
        saver.restore(sess, p)
        assert sess.run(vs["c"]) == 2.0


# -- the ops at graph level ------------------------------------------------------------------------------------

def test_op_inference_errors_name_the_op():
    path = af.placeholder(af.uint8, [None])
    x = af.constant([1.0, 2.0])
    out = io_ops.save_shard(path, [x], ["x"], shard=1, num_shards=2)
    assert out.dtype == af.uint8 and out.shape.as_list() == [None]
    with pytest.raises(ValueError, match=r"1 tensors but 2 names.*'my_save'"):
        io_ops.save_shard(path, [x], ["x", "y"], name="my_save")
    with pytest.raises(ValueError, match="uint8"):
        io_ops.save_shard(af.placeholder(af.float32, [None]), [x], ["x"])
    with pytest.raises(ValueError, match="shard < num_shards"):
        io_ops.save_shard(path, [x], ["x"], shard=2, num_shards=2)
    with pytest.raises(ValueError, match="twice"):
        io_ops.save_shard(path, [x, x], ["x", "x"])
    a, b = io_ops.restore_shard(path, ["a", "b"], [af.float32, af.int64], [[2, 3], []])
    assert (a.dtype, a.shape.as_list(), b.dtype, b.shape.as_list()) == (af.float32, [2, 3], af.int64, [])


# -- crashes in the middle of a save ---------------------------------------------------------------------------

def test_failed_shard_write_leaves_previous_checkpoint(tmp_path, monkeypatch):
    vs = _make_vars({"a": np.ones(1000, np.float32), "b": np.arange(5)}, device_of=lambda i: f"/job:ps/task:{i}")
    saver = Saver()
    with af.Session() as sess:
        sess.run(af.global_variables_initializer())
        p1 = saver.save(sess, str(tmp_path / "m"), global_step=1)

        def fail_second_shard(stage, shard, path):
            if shard == 1 and stage == "write":
                raise OSError(28, "No space left on device")
        monkeypatch.setattr(ckpt_io, "fault_hook", fail_second_shard)
        sess.run(vs["a"].assign(np.zeros(1000, np.float32)))
        with pytest.raises(errors.ResourceExhaustedError, match="m-2.data-00001-of-00002"):
            saver.save(sess, str(tmp_path / "m"), global_step=2)
        monkeypatch.setattr(ckpt_io, "fault_hook", None)
        assert not checkpoint_exists(str(tmp_path / "m-2"))
        # The failed shard removed its temporary file (shard 0 may still be finishing its own: the step
        # fails as soon as one kernel fails).
        assert not [f for f in os.listdir(tmp_path) if f.startswith("m-2.data-00001-of-00002")]
        assert latest_checkpoint(str(tmp_path)) == p1 and saver.last_checkpoints == [p1]
        saver.restore(sess, latest_checkpoint(str(tmp_path)))
        np.testing.assert_array_equal(sess.run(vs["a"]), 1.0)


_KILLED_SAVE = textwrap.dedent("""
    import os, signal, sys, time
    import numpy as np
    import actorflow as af
    from actorflow import checkpoint_format as ckpt_io
    from actorflow.train import Saver

    d = sys.argv[1]
    with af.device("/job:ps/task:0"):
        a = af.Variable(np.full(100000, 1.0, np.float32), name="a")
    with af.device("/job:ps/task:1"):
        b = af.Variable(np.full(100000, 1.0, np.float32), name="b")
    saver = Saver()
    sess = af.Session()
    sess.run(af.global_variables_initializer())
    saver.save(sess, os.path.join(d, "m"), global_step=1)
    sess.run([a.assign(a * 2), b.assign(b * 2)])

    def die_between_shards(stage, shard, path):
        if shard == 1 and stage == "write":
            # Shard 1 has its header on disk; wait until shard 0 is complete, then die.
            deadline = time.monotonic() + 30
            while not os.path.exists(os.path.join(d, "m-2.data-00000-of-00002")) and time.monotonic() < deadline:
                time.sleep(0.001)
            os.kill(os.getpid(), signal.SIGKILL)
    ckpt_io.fault_hook = die_between_shards
    saver.save(sess, os.path.join(d, "m"), global_step=2)
    print("the save survived its own death", flush=True)
""")


def test_process_killed_between_shard_writes(tmp_path):
    script = tmp_path / "killed_save.py"
    script.write_text(_KILLED_SAVE)
    ckpt_dir = tmp_path / "ckpt"
    ckpt_dir.mkdir()
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, str(script), str(ckpt_dir)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    files = os.listdir(ckpt_dir)
    assert "m-2.data-00000-of-00002" in files and "m-2.index" not in files
    assert [f for f in files if f.startswith("m-2.data-00001-of-00002.tmp-")]     # the half-written shard
    good = latest_checkpoint(str(ckpt_dir))
    assert good == str(ckpt_dir / "m-1")
    a = af.Variable(np.zeros(100000, np.float32), name="a")
    b = af.Variable(np.zeros(100000, np.float32), name="b")
    with af.Session() as sess:
        Saver().restore(sess, good)
        np.testing.assert_array_equal(sess.run(a), 1.0)
        np.testing.assert_array_equal(sess.run(b), 1.0)


# -- a sharded save on a local cluster -------------------------------------------------------------------------

@pytest.mark.slow
def test_sharded_save_on_local_cluster(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    from actorflow.cluster import LocalCluster
    rng = np.random.default_rng(5)
    a0 = rng.standard_normal((64, 32)).astype(np.float32)
    b0 = rng.integers(0, 100, size=(7,)).astype(np.int64)
    c0 = rng.standard_normal(5)
    with LocalCluster(ps=2, workers=1) as cluster:
        with af.device("/job:ps/task:0"):
            a = af.Variable(a0, name="a")
            c = af.Variable(c0, name="c")
        with af.device("/job:ps/task:1"):
            b = af.Variable(b0, name="b")
        saver = Saver(max_to_keep=2)
        with af.Session(cluster.target) as sess:
            sess.run(af.global_variables_initializer())
            prefix = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=100)
            sess.run([a.assign(np.zeros_like(a0)), b.assign(np.zeros_like(b0))])
        pids = cluster.pids()
        with open(prefix + ".index") as f:
            index = json.load(f)
        # Each PS wrote the shard of the variables it holds, itself.
        assert [(s["file"], s["writer"]["pid"], sorted(s["tensors"])) for s in index["shards"]] == [
            ("model.ckpt-100.data-00000-of-00002", pids["/job:ps/task:0"], ["a", "c"]),
            ("model.ckpt-100.data-00001-of-00002", pids["/job:ps/task:1"], ["b"])]
        assert sorted(st.load_file(prefix + ".data-00001-of-00002")) == ["b"]
        # A restarted PS has lost its variables; a fresh session restores them (and ps:0's as well).
        cluster.restart_task("ps", 1)
        with af.Session(cluster.target) as sess:
            saver.restore(sess, latest_checkpoint(str(tmp_path)))
            got = sess.run([a, b, c])
        np.testing.assert_array_equal(got[0], a0)
        np.testing.assert_array_equal(got[1], b0)
        np.testing.assert_array_equal(got[2], c0)


def test_save_writes_a_meta_graph_that_import_meta_graph_restores(tmp_path):
    # The TF-1.x evaluation idiom: a training program saves; another imports <prefix>.meta, restores
    # through the Saver it returns, and runs ops it finds by name.
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None, 2], name="input_x")
        w = af.Variable(np.array([[1.0], [2.0]], np.float32), name="w")
        af.identity(af.matmul(x, w), name="output/predictions")
        saver = Saver()
        with af.Session() as sess:
            sess.run(w.initializer)
            sess.run(w.assign([[3.0], [4.0]]))
            prefix = saver.save(sess, str(tmp_path / "model"), global_step=7)
    assert os.path.exists(prefix + ".meta")
    g2 = af.Graph()
    with g2.as_default(), af.Session() as sess:
        restorer = af.train.import_meta_graph(prefix + ".meta")
        restorer.restore(sess, prefix)
        x2 = g2.get_operation_by_name("input_x").outputs[0]
        pred = g2.get_operation_by_name("output/predictions").outputs[0]
        np.testing.assert_allclose(sess.run(pred, {x2: [[1.0, 1.0]]}), [[7.0]])
    assert not os.path.exists(str(tmp_path / "other.meta"))
    with g.as_default(), af.Session() as sess:
        sess.run(w.initializer)
        saver.save(sess, str(tmp_path / "other"), write_meta_graph=False)
    assert not os.path.exists(str(tmp_path / "other.meta"))
