"""Crafted checkpoints for the checkpoint security tests: a real checkpoint saved by a real Saver,
then its index rewritten the way an attacker (or a broken disk) would, with the checksum (and, for
an attacker holding the key, the HMAC) recomputed so that the rewrite reaches the schema checks."""
from __future__ import annotations

import hashlib
import hmac
import json
import os

import numpy as np

import actorflow as af
from actorflow.train import Saver

A = {"v": np.full((3, 4), 1.0, np.float32), "w": np.arange(5, dtype=np.int64)}
B = {"v": np.full((3, 4), 2.0, np.float32), "w": np.arange(5, dtype=np.int64) * 10}


def make_vars(values):
    return {name: af.Variable(val, name=name) for name, val in values.items()}


def two_checkpoints(ckpt_dir, **saver_kw):
    """Saves checkpoint 1 holding A and checkpoint 2 holding B in `ckpt_dir` (in a graph of its own);
    returns their prefixes."""
    with af.Graph().as_default():
        vs = make_vars(A)
        saver = Saver(**saver_kw)
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            p1 = saver.save(sess, os.path.join(ckpt_dir, "model"), global_step=1)
            sess.run([vs[n].assign(B[n]) for n in B])
            p2 = saver.save(sess, os.path.join(ckpt_dir, "model"), global_step=2)
    return p1, p2


def read_doc(prefix):
    with open(prefix + ".index", "rb") as f:
        return json.loads(f.read())


def body_bytes(doc):
    body = {k: v for k, v in doc.items() if k not in ("checksum", "hmac")}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def reseal(doc, key=None):
    """Recomputes what a forger can: the plain sha256 always; the HMAC only with the key."""
    doc["checksum"] = hashlib.sha256(body_bytes(doc)).hexdigest()
    if key is not None:
        k = hmac.new(key.encode(), b"actorflow checkpoint index", hashlib.sha256).digest()
        doc["hmac"] = hmac.new(k, body_bytes(doc), hashlib.sha256).hexdigest()
    return doc


def write_doc(prefix, doc):
    with open(prefix + ".index", "wb") as f:
        f.write(json.dumps(doc, indent=1).encode())


def restored_values(prefix, **saver_kw):
    """Restores `prefix` into fresh variables with a fresh Saver; returns their values."""
    with af.Graph().as_default():
        vs = make_vars({n: np.zeros_like(a) for n, a in A.items()})
        saver = Saver(**saver_kw)
        with af.Session() as sess:
            saver.restore(sess, prefix)
            return {n: sess.run(v) for n, v in vs.items()}


def monitored_values(ckpt_dir, **saver_kw):
    """Starts a MonitoredTrainingSession on `ckpt_dir`, as a training job restarting would; returns the
    variables' values it starts from."""
    with af.Graph().as_default():
        vs = make_vars({n: np.zeros_like(a) for n, a in A.items()})
        scaffold = af.train.Scaffold(saver=Saver(**saver_kw))
        with af.train.MonitoredTrainingSession(checkpoint_dir=ckpt_dir, scaffold=scaffold, save_checkpoint_secs=None,
                                               log_step_count_steps=None) as mts:
            return mts.run(vs)
