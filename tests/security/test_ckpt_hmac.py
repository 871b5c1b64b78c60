"""Issue 15, finding 2 (second half): the index checksum was an unkeyed sha256.

Reproduced before the fix: an attacker who can write the checkpoint directory replaced the values
of variable `v` in the newest shard file, updated the tensor's sha256 in the index and recomputed
the index's own sha256; `latest_checkpoint` took the checkpoint as good and restore loaded the
attacker's values into the cluster.

Fixed: in a distributed session the index carries an HMAC-SHA256 keyed by (a key derived from) the
cluster token; restore, `latest_checkpoint`, `get_checkpoint_state` and MonitoredTrainingSession,
given the key, refuse (DataLossError) an index whose HMAC is missing or wrong, and recovery falls
back to the previous good checkpoint. Without a key the index is checksummed only: integrity, not
authenticity (the forgery is accepted there, as documented). Old (version 1) indexes, which have no
HMAC, still restore when no key is required, and are refused when one is.
"""
from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pytest

import actorflow as af
from actorflow import errors
from actorflow.cluster.local import free_port
from actorflow.train import Saver, get_checkpoint_state, latest_checkpoint

from .ckpt_crafting import (
    A,
    B,
    make_vars,
    monitored_values,
    read_doc,
    reseal,
    restored_values,
    two_checkpoints,
    write_doc,
)

KEY = "a-cluster-token"
EVIL = np.full((3, 4), 666.0, np.float32)


def _forge_values(p2, key=None):
    """Writes EVIL into v's bytes of the newest shard and makes the index agree, as far as `key` allows."""
    doc = read_doc(p2)
    entry = doc["shards"][0]
    t = entry["tensors"]["v"]
    with open(os.path.join(os.path.dirname(p2), entry["file"]), "r+b") as f:
        f.seek(t["offset"])
        f.write(EVIL.tobytes())
    t["sha256"] = hashlib.sha256(EVIL.tobytes()).hexdigest()
    doc.pop("hmac", None)
    write_doc(p2, reseal(doc, key))


def test_forged_index_with_recomputed_sha256_fails_the_hmac(tmp_path):
    d = str(tmp_path)
    p1, p2 = two_checkpoints(d, checkpoint_key=KEY)
    assert "hmac" in read_doc(p2)
    _forge_values(p2)
    with pytest.raises(errors.DataLossError, match="no HMAC") as e:
        restored_values(p2, checkpoint_key=KEY)
    assert p2 in str(e.value)
    assert latest_checkpoint(d, key=KEY) == p1
    assert get_checkpoint_state(d, key=KEY).model_checkpoint_path == p1
    np.testing.assert_array_equal(monitored_values(d, checkpoint_key=KEY)["v"], A["v"])
    # A forger who keeps the old HMAC field fails just the same.
    doc = read_doc(p2)
    doc["hmac"] = read_doc(p1)["hmac"]
    write_doc(p2, doc)
    with pytest.raises(errors.DataLossError, match="HMAC does not match"):
        restored_values(p2, checkpoint_key=KEY)
    # Without a key the index is only checksummed: the forgery passes (integrity, not authenticity).
    assert latest_checkpoint(d) == p2
    np.testing.assert_array_equal(restored_values(p2, checkpoint_key=False)["v"], EVIL)


def test_holder_of_the_key_can_rewrite(tmp_path):
    # The HMAC is what a legitimate holder of the token can produce; the check is not something else.
    d = str(tmp_path)
    p1, p2 = two_checkpoints(d, checkpoint_key=KEY)
    _forge_values(p2, key=KEY)
    assert latest_checkpoint(d, key=KEY) == p2
    np.testing.assert_array_equal(restored_values(p2, checkpoint_key=KEY)["v"], EVIL)
    with pytest.raises(errors.DataLossError, match="HMAC does not match"):
        restored_values(p2, checkpoint_key="another-cluster-token")


def _to_version_1(prefix):
    doc = read_doc(prefix)
    doc.pop("hmac", None)
    doc["version"] = 1
    body = {k: v for k, v in doc.items() if k != "checksum"}
    doc["checksum"] = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    write_doc(prefix, doc)


def test_old_version_1_checkpoints_restore_without_a_key_only(tmp_path):
    d = str(tmp_path)
    p1, p2 = two_checkpoints(d)
    _to_version_1(p1)
    _to_version_1(p2)
    assert latest_checkpoint(d) == p2
    np.testing.assert_array_equal(restored_values(p2)["w"], B["w"])
    with pytest.raises(errors.DataLossError, match="no HMAC"):
        restored_values(p2, checkpoint_key=KEY)
    assert latest_checkpoint(d, key=KEY) is None


def test_bad_key_argument():
    with af.Graph().as_default():
        make_vars(A)
        with pytest.raises(TypeError, match="checkpoint_key"):
            Saver(checkpoint_key=12)


def _server(token):
    return af.train.Server({"worker": [f"127.0.0.1:{free_port()}"]}, "worker", 0, token=token)


def test_distributed_session_keys_the_index_with_the_cluster_token(tmp_path):
    d = str(tmp_path)
    server = _server("ckpt-hmac-token")
    try:
        with af.Graph().as_default():
            with af.device("/job:worker/task:0"):
                vs = make_vars(A)
            saver = Saver()
            with af.Session(server.target) as sess:
                assert saver.checkpoint_key_for(sess) == "ckpt-hmac-token"
                sess.run(af.global_variables_initializer())
                p1 = saver.save(sess, os.path.join(d, "model"), global_step=1)
                sess.run([vs[n].assign(B[n]) for n in B])
                p2 = saver.save(sess, os.path.join(d, "model"), global_step=2)
            assert "hmac" in read_doc(p2) and "hmac" in read_doc(p1)
            _forge_values(p2)
            assert latest_checkpoint(d, key="ckpt-hmac-token") == p1
            with af.Session(server.target) as sess:
                with pytest.raises(errors.DataLossError, match="no HMAC"):
                    saver.restore(sess, p2)
    finally:
        server.stop()
    # The cluster restarts (same token, empty variables): its chief skips the forgery by itself.
    server = _server("ckpt-hmac-token")
    try:
        with af.Graph().as_default():
            with af.device("/job:worker/task:0"):
                fresh = make_vars({n: np.zeros_like(a) for n, a in A.items()})
            scaffold = af.train.Scaffold(saver=Saver())
            with af.train.MonitoredTrainingSession(master=server.target, checkpoint_dir=d, scaffold=scaffold,
                                                   save_checkpoint_secs=None, log_step_count_steps=None) as mts:
                got = mts.run(fresh)
    finally:
        server.stop()
    np.testing.assert_array_equal(got["v"], A["v"])
    np.testing.assert_array_equal(got["w"], A["w"])


def test_index_swapped_after_the_check_is_refused_by_the_task(tmp_path, monkeypatch):
    # The client checks the index (and its HMAC); the task that reads the shards gets the sha256 of the
    # file the client checked, so a forgery swapped in between the two is refused, not read.
    d = str(tmp_path)
    p1, p2 = two_checkpoints(d, checkpoint_key=KEY)
    forged = read_doc(p2)
    forged["shards"][0]["tensors"]["v"]["sha256"] = hashlib.sha256(EVIL.tobytes()).hexdigest()
    from actorflow import checkpoint_format as ckpt_io
    real = ckpt_io.load_index

    def check_then_swap(prefix, key=None, digest=None):
        out = real(prefix, key, digest)
        if key is not None:
            write_doc(p2, reseal(forged))
        return out
    monkeypatch.setattr(ckpt_io, "load_index", check_then_swap)
    with pytest.raises(errors.DataLossError, match="changed after it was checked") as e:
        restored_values(p2, checkpoint_key=KEY)
    assert "restore_shard" in str(e.value)
