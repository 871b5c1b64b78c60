"""af.train.warm_start and VocabInfo (tf.compat.v1.train.warm_start semantics): selection by regex,
renaming, vocabulary remapping with a backup initializer, and the errors."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as af


@pytest.fixture
def ckpt(tmp_path):
    with af.Graph().as_default():
        af.Variable(np.arange(6, dtype=np.float32).reshape(3, 2), name="emb")
        af.Variable(7.0, name="bias")
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            return af.train.Saver().save(sess, str(tmp_path / "old"))


def test_warm_start_by_regex_and_rename(ckpt):
    with af.Graph().as_default():
        b = af.Variable(0.0, name="bias")
        other = af.Variable(1.0, name="other")
        renamed = af.Variable(0.0, name="new_bias")
        af.train.warm_start(ckpt, vars_to_warm_start=["bias"])
        af.train.warm_start(ckpt, vars_to_warm_start=[renamed], var_name_to_prev_var_name={"new_bias": "bias"})
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            assert sess.run([b, other, renamed]) == [7.0, 1.0, 7.0]


def test_vocab_remapping_with_backup_initializer(ckpt, tmp_path):
    old_vocab, new_vocab = tmp_path / "old.txt", tmp_path / "new.txt"
    old_vocab.write_text("a\nb\nc\n")
    new_vocab.write_text("c\nz\na\n")
    with af.Graph().as_default():
        emb = af.Variable(af.zeros([4, 2]), name="emb")      # 3 words + 1 OOV bucket
        info = af.train.VocabInfo(str(new_vocab), 3, 1, str(old_vocab),
                                  backup_initializer=af.constant_initializer(-1.0))
        af.train.warm_start(ckpt, vars_to_warm_start=".*emb", var_name_to_vocab_info={"emb": info})
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            np.testing.assert_array_equal(sess.run(emb), [[4, 5], [-1, -1], [0, 1], [-1, -1]])


def test_warm_start_errors(ckpt):
    with af.Graph().as_default():
        af.Variable(af.zeros([2]), name="bias")
        with pytest.raises(ValueError, match="shape of variable bias"):
            af.train.warm_start(ckpt, "bias")
    with af.Graph().as_default():
        af.Variable(0.0, name="missing")
        with pytest.raises(ValueError, match="'missing'.*not in checkpoint"):
            af.train.warm_start(ckpt, "missing")
        with pytest.raises(ValueError, match="not warm-started"):
            af.train.warm_start(ckpt, None, var_name_to_prev_var_name={"x": "y"})
