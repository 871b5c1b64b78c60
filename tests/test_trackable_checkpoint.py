"""af.train.Checkpoint / CheckpointManager in graph mode (tf.compat.v1.train.Checkpoint semantics):
object-path keys, save counter, nested checkpoints, optimizer slots, partial restores, the
manager's retention and state file."""
from __future__ import annotations

import os

import numpy as np
import pytest

import actorflow as af


def _model():
    v = af.Variable([1.0, 2.0], name="v")
    w = af.Variable(3.0, name="w")
    return v, w


def test_save_restore_nested_and_keys(tmp_path):
    g = af.Graph()
    with g.as_default():
        v, w = _model()
        inner = af.train.Checkpoint(w=w)
        ckpt = af.train.Checkpoint(v=v, model=inner)
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            p1 = ckpt.save(str(tmp_path / "ck"), session=sess)
            sess.run(v.assign([5.0, 6.0]))
            p2 = ckpt.save(str(tmp_path / "ck"), session=sess)
            assert p1.endswith("ck-1") and p2.endswith("ck-2")
            assert af.train.latest_checkpoint(str(tmp_path)) == p2
            assert sorted(n for n, _ in af.train.list_variables(p1)) == [
                "model/w/.ATTRIBUTES/VARIABLE_VALUE", "save_counter/.ATTRIBUTES/VARIABLE_VALUE",
                "v/.ATTRIBUTES/VARIABLE_VALUE"]
            n_ops = len(g.get_operations())
            ckpt.save(str(tmp_path / "ck"), session=sess)
            assert len(g.get_operations()) == n_ops          # repeated saves add no ops
    g2 = af.Graph()
    with g2.as_default():
        v, w = _model()
        ckpt = af.train.Checkpoint(v=v, model=af.train.Checkpoint(w=w))
        status = ckpt.restore(p1)
        status.assert_consumed()
        with af.Session() as sess:
            status.run_restore_ops(sess)
            np.testing.assert_array_equal(sess.run(v), [1.0, 2.0])
            assert sess.run(w) == 3.0 and sess.run(ckpt.save_counter) == 1


def test_partial_restore_and_initialize_or_restore(tmp_path):
    with af.Graph().as_default():
        v, _ = _model()
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            path = af.train.Checkpoint(v=v).write(str(tmp_path / "only_v"), session=sess)
    assert path.endswith("only_v") and af.train.get_checkpoint_state(str(tmp_path)) is None
    with af.Graph().as_default():
        v, w = _model()
        status = af.train.Checkpoint(v=v, w=w).restore(path)
        with pytest.raises(AssertionError, match="w/.ATTRIBUTES"):
            status.assert_consumed()
        with af.Session() as sess:
            status.initialize_or_restore(sess)
            np.testing.assert_array_equal(sess.run(v), [1.0, 2.0])
            assert sess.run(w) == 3.0      # initialized, not restored
        # a tracked object the checkpoint lacks entirely, and a checkpoint value nothing tracks
        status = af.train.Checkpoint(w=w).restore(path)
        with pytest.raises(AssertionError):
            status.assert_existing_objects_matched()
        with pytest.raises(AssertionError, match="unused"):
            status.assert_consumed()


def test_optimizer_slots_are_saved_and_restored(tmp_path):
    def build():
        x = af.Variable([1.0, -1.0], name="x")
        opt = af.train.AdamOptimizer(0.1)
        train = opt.minimize(af.reduce_sum(af.square(x)))
        return x, opt, train, af.train.Checkpoint(x=x, opt=opt)
    with af.Graph().as_default():
        x, opt, train, ckpt = build()
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            sess.run(train)
            path = ckpt.save(str(tmp_path / "adam"), session=sess)
            keys = {n for n, _ in af.train.list_variables(path)}
            # the keys TF 2.21's compat.v1 Checkpoint writes for the same objects
            assert keys == {"opt/beta1_power/.ATTRIBUTES/VARIABLE_VALUE", "opt/beta2_power/.ATTRIBUTES/VARIABLE_VALUE",
                            "save_counter/.ATTRIBUTES/VARIABLE_VALUE", "x/.ATTRIBUTES/VARIABLE_VALUE",
                            "x/.OPTIMIZER_SLOT/opt/m/.ATTRIBUTES/VARIABLE_VALUE",
                            "x/.OPTIMIZER_SLOT/opt/v/.ATTRIBUTES/VARIABLE_VALUE"}
            sess.run(train)
            want = sess.run(x)
    with af.Graph().as_default():
        x, opt, train, ckpt = build()
        with af.Session() as sess:
            status = ckpt.restore(path)
            status.assert_consumed()
            status.run_restore_ops(sess)
            sess.run(train)       # the second step from restored moments equals the original one
            np.testing.assert_allclose(sess.run(x), want, rtol=1e-6)


def test_checkpoint_manager_keeps_max_to_keep_and_recovers(tmp_path):
    d = str(tmp_path / "mgr")
    with af.Graph().as_default():
        v, _ = _model()
        ckpt = af.train.Checkpoint(v=v)
        mgr = af.train.CheckpointManager(ckpt, d, max_to_keep=2)
        assert mgr.latest_checkpoint is None and mgr.checkpoints == []
        with af.Session() as sess:
            mgr.restore_or_initialize(sess)
            paths = [mgr.save(session=sess) for _ in range(3)]
            assert [os.path.basename(p) for p in paths] == ["ckpt-1", "ckpt-2", "ckpt-3"]
            assert mgr.checkpoints == paths[1:] and mgr.latest_checkpoint == paths[2]
            assert not af.train.checkpoint_exists(paths[0]) and af.train.checkpoint_exists(paths[1])
            p = mgr.save(checkpoint_number=100, session=sess)
            assert os.path.basename(p) == "ckpt-100"
            assert af.train.latest_checkpoint(d) == p
    with af.Graph().as_default():
        v, _ = _model()
        mgr = af.train.CheckpointManager(af.train.Checkpoint(v=v), d, max_to_keep=2, checkpoint_name="other")
        assert [os.path.basename(p) for p in mgr.checkpoints] == ["ckpt-3", "ckpt-100"]
        with af.Session() as sess:
            assert mgr.restore_or_initialize(sess).endswith("ckpt-100")
            assert sess.run(mgr.checkpoint.save_counter) == 4


def test_errors_name_the_problem(tmp_path):
    with af.Graph().as_default():
        with pytest.raises(ValueError, match="`x` is not trackable"):
            af.train.Checkpoint(x=3)
        v, _ = _model()
        with pytest.raises(ValueError, match="session"):
            af.train.Checkpoint(v=v).save(str(tmp_path / "c"))
        with pytest.raises(ValueError, match="max_to_keep"):
            af.train.CheckpointManager(af.train.Checkpoint(v=v), str(tmp_path), max_to_keep=0)
        assert af.train.CheckpointOptions(experimental_io_device="/cpu:0").experimental_io_device == "/cpu:0"


def test_generate_checkpoint_state_proto_as_tf():
    # TF 2.21: relative save_dir makes relative paths relative to it; absolute ones stay as given
    st = af.train.generate_checkpoint_state_proto("d", "d/ckpt-2", ["d/ckpt-1"])
    assert st.model_checkpoint_path == "ckpt-2" and st.all_model_checkpoint_paths == ["ckpt-1", "ckpt-2"]
    st = af.train.generate_checkpoint_state_proto("/abs/d", "/abs/d/ckpt-2", ["/abs/d/ckpt-1"])
    assert st.all_model_checkpoint_paths == ["/abs/d/ckpt-1", "/abs/d/ckpt-2"]
