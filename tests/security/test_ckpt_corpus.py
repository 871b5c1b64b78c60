"""Issue 15, finding 3 (and the recovery half of finding 2): one malformed newer checkpoint must not
block recovery.

Reproduced before the fix, from a checkpoint saved by a real Saver whose index was rewritten and
its plain sha256 recomputed: an index with a missing key made `latest_checkpoint` raise a bare
KeyError, a wrong type a TypeError, a negative offset a ValueError, so MonitoredTrainingSession could
not start at all; overlapping tensor offsets were accepted; `load_variable` of a 4 PiB declared shape
raised a bare MemoryError; a shard named `../outside/x` or by an absolute path was read.

Fixed: every case of the corpus below is refused by `Saver.restore` with DataLossError naming the
checkpoint and what is wrong, skipped (with a warning naming it) by `latest_checkpoint` and by
`get_checkpoint_state`, and MonitoredTrainingSession starts from the previous good checkpoint (the
restored values are the older checkpoint's). `load_variable`, `list_variables` and
NewCheckpointReader raise DataLossError too.
"""
from __future__ import annotations

import json
import logging
import os

import numpy as np
import pytest

from actorflow import errors
from actorflow.train import NewCheckpointReader, get_checkpoint_state, latest_checkpoint, list_variables, load_variable

from .ckpt_crafting import A, monitored_values, read_doc, reseal, restored_values, two_checkpoints, write_doc

KEY = "corpus-cluster-token"


def _t(doc, name="v"):
    return doc["shards"][0]["tensors"][name]


def _set(path, value):
    def mutate(doc, ctx):
        obj = doc
        for k in path[:-1]:
            obj = obj[k]
        obj[path[-1]] = value(ctx) if callable(value) else value
    return mutate


def _delete(path):
    def mutate(doc, ctx):
        obj = doc
        for k in path[:-1]:
            obj = obj[k]
        del obj[path[-1]]
    return mutate


def _overlap(doc, ctx):
    _t(doc, "w")["offset"] = _t(doc, "v")["offset"] + 4


def _huge_consistent(doc, ctx):
    # A 4 PiB float32 tensor whose nbytes and shard size agree with it: only the shard file itself can
    # tell, and it must be asked before anything is allocated.
    t = _t(doc)
    t["shape"] = [1 << 50]
    t["nbytes"] = 4 << 50
    doc["shards"][0]["size"] = t["offset"] + t["nbytes"]


S = ("shards", 0)
V = ("shards", 0, "tensors", "v")

# (id, mutation of the index, what the error says). Every mutated index is resealed (plain sha256, and
# the HMAC in the keyed run) so that it reaches the checks a forger cannot satisfy by recomputing.
CORPUS = [
    ("traversal", _set(S + ("file",), "../outside/secret"), "plain file name"),
    ("traversal-deep", _set(S + ("file",), "sub/../../outside/secret"), "plain file name"),
    ("absolute-path", _set(S + ("file",), lambda ctx: ctx["outside"]), "plain file name"),
    ("dot-dot", _set(S + ("file",), ".."), "plain file name"),
    ("missing-shards", _delete(("shards",)), "lacks the required key 'shards'"),
    ("missing-size", _delete(S + ("size",)), "lacks the required key 'size'"),
    ("missing-offset", _delete(V + ("offset",)), "lacks the required key 'offset'"),
    ("missing-sha256", _delete(V + ("sha256",)), "lacks the required key 'sha256'"),
    ("type-offset-str", _set(V + ("offset",), "232"), "offset must be an integer"),
    ("type-offset-bool", _set(V + ("offset",), True), "offset must be an integer"),
    ("type-shape-str", _set(V + ("shape",), "3x4"), "shape must be a list"),
    ("type-dim-float", _set(V + ("shape",), [3.0, 4]), "a dimension must be an integer"),
    ("type-tensors-list", _set(S + ("tensors",), []), "tensors must be a JSON object"),
    ("type-shards-dict", _set(("shards",), {}), "shards must be a list"),
    ("type-num-shards", _set(("num_shards",), "1"), "num_shards must be an integer"),
    ("type-version", _set(("version",), "2"), "version"),
    ("type-file-int", _set(S + ("file",), 7), "plain file name"),
    ("negative-offset", _set(V + ("offset",), -8), "offset must be an integer in [0"),
    ("negative-dim", _set(V + ("shape",), [-3, -4]), "a dimension must be an integer in [0"),
    ("negative-size", _set(S + ("size",), -1), "size must be an integer in [0"),
    ("overlapping", _overlap, "overlap"),
    ("offset-out-of-range", _set(V + ("offset",), lambda ctx: ctx["size"] - 4), "outside the shard file"),
    ("offset-past-end", _set(V + ("offset",), lambda ctx: ctx["size"] + 4096), "offset must be an integer in"),
    ("huge-shape", _set(V + ("shape",), [1 << 50]), "nbytes is 48"),
    ("huge-shape-consistent", _huge_consistent, "truncated"),
    # Found by fuzz/fuzz_checkpoint_index.py: zero bytes, yet numpy cannot make the array.
    ("zero-times-huge-shape", _set(("shards", 0, "tensors", "w", "shape"), [0, 1 << 62]),
     "too large for any array"),
    ("nbytes-mismatch", _set(V + ("nbytes",), 44), "nbytes is 44"),
    ("dtype-unknown", _set(V + ("dtype",), "float128"), "dtype must be one of"),
    ("dtype-object", _set(V + ("dtype",), "object"), "dtype must be one of"),
    ("dtype-numpy-code", _set(V + ("dtype",), "<f4"), "dtype must be one of"),
    ("tensor-sha-not-hex", _set(V + ("sha256",), "x" * 64), "sha256 must be 64"),
    ("shard-number", _set(S + ("shard",), 1), "shard must be 0"),
    ("format", _set(("format",), "tensorflow"), "format"),
]


def _craft(tmp_path, mutate, key=None):
    d = tmp_path / "ckpt"
    d.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret"
    secret.write_bytes(b"TOP-SECRET" * 1234)
    kw = {"checkpoint_key": key} if key else {}
    p1, p2 = two_checkpoints(str(d), **kw)
    doc = read_doc(p2)
    ctx = {"outside": str(secret), "size": doc["shards"][0]["size"]}
    mutate(doc, ctx)
    write_doc(p2, reseal(doc, key))
    return str(d), p1, p2, kw


# Every case with a checksummed index, and a sample with an HMAC'd one (resealed by a key holder: the
# schema checks hold for an authenticated index too, e.g. one written by a buggy task).
_KEYED = {"traversal", "absolute-path", "missing-offset", "type-offset-str", "negative-offset", "overlapping",
          "huge-shape-consistent", "dtype-unknown"}
_RUNS = [(*c, None) for c in CORPUS] + [(*c, KEY) for c in CORPUS if c[0] in _KEYED]


@pytest.mark.parametrize("case,mutate,why,key", _RUNS, ids=[f"{r[0]}-{'hmac' if r[3] else 'sha256'}" for r in _RUNS])
def test_crafted_index_refused_and_skipped(tmp_path, caplog, case, mutate, why, key):
    d, p1, p2, kw = _craft(tmp_path, mutate, key)
    # Restore of the named bad checkpoint: DataLossError naming it and what is wrong.
    with pytest.raises(errors.DataLossError) as e:
        restored_values(p2, **kw)
    msg = str(e.value)
    assert p2 in msg and why in msg, msg
    # Nothing of the file outside leaks into the message: neither its contents nor its size.
    assert "TOP-SECRET" not in msg and "12340" not in msg
    # Recovery: skipped with a warning naming it, the previous good checkpoint taken instead.
    with caplog.at_level(logging.WARNING, logger="actorflow.train.saver"):
        assert latest_checkpoint(d, key=key) == p1
    assert any(p2 in r.getMessage() and "skipping" in r.getMessage() for r in caplog.records)
    assert get_checkpoint_state(d, key=key).model_checkpoint_path == p1
    got = monitored_values(d, **kw)
    for n in A:
        np.testing.assert_array_equal(got[n], A[n])
    # The readers of single tensors refuse it the same way.
    with pytest.raises(errors.DataLossError, match="invalid|shard file"):
        load_variable(p2, "v", key=key)
    with pytest.raises(errors.DataLossError):
        list_variables(p2, key=key)
    with pytest.raises(errors.DataLossError):
        NewCheckpointReader(p2, key=key)


RAW = [
    ("not-json", lambda data: data[: len(data) // 2], "not valid JSON"),
    ("deep-nesting", lambda data: b"[" * 100000 + b"]" * 100000, "not valid JSON"),
    ("duplicate-key", lambda data: data.replace(b'"version": 2,', b'"version": 2, "version": 2,', 1),
     "appears twice"),
    ("not-an-object", lambda data: b"[1, 2, 3]", "not an index of format"),
    ("huge-int", lambda data: data.replace(b'"offset": ', b'"offset": ' + b"9" * 5000, 1), "not valid JSON"),
]


@pytest.mark.parametrize("case,mutate,why", RAW, ids=[c[0] for c in RAW])
def test_unparsable_index_refused_and_skipped(tmp_path, case, mutate, why):
    d = tmp_path / "ckpt"
    d.mkdir()
    p1, p2 = two_checkpoints(str(d))
    with open(p2 + ".index", "rb") as f:
        data = f.read()
    new = mutate(data)
    assert new != data
    with open(p2 + ".index", "wb") as f:
        f.write(new)
    with pytest.raises(errors.DataLossError, match=why):
        restored_values(p2)
    assert latest_checkpoint(str(d)) == p1
    np.testing.assert_array_equal(monitored_values(str(d))["v"], A["v"])


def test_truncated_shard_refused_and_skipped(tmp_path):
    d = tmp_path / "ckpt"
    d.mkdir()
    p1, p2 = two_checkpoints(str(d))
    shard = p2 + ".data-00000-of-00001"
    with open(shard, "r+b") as f:
        f.truncate(os.path.getsize(shard) - 10)
    with pytest.raises(errors.DataLossError, match="truncated") as e:
        restored_values(p2)
    assert shard in str(e.value)
    assert latest_checkpoint(str(d)) == p1
    np.testing.assert_array_equal(monitored_values(str(d))["v"], A["v"])
    with pytest.raises(errors.DataLossError, match="truncated"):
        load_variable(p2, "v")


def test_index_that_is_a_fifo_does_not_hang(tmp_path):
    d = tmp_path / "ckpt"
    d.mkdir()
    p1, p2 = two_checkpoints(str(d))
    os.unlink(p2 + ".index")
    os.mkfifo(p2 + ".index")
    with pytest.raises(errors.DataLossError, match="not a regular file"):
        restored_values(p2)
    assert latest_checkpoint(str(d)) == p1


def test_shard_that_is_a_fifo_does_not_hang(tmp_path):
    d = tmp_path / "ckpt"
    d.mkdir()
    p1, p2 = two_checkpoints(str(d))
    shard = p2 + ".data-00000-of-00001"
    os.unlink(shard)
    os.mkfifo(shard)
    with pytest.raises(errors.DataLossError, match="not a regular file"):
        restored_values(p2)
    assert latest_checkpoint(str(d)) == p1


def test_every_valid_index_still_restores(tmp_path):
    # The checks refuse what is wrong, not what is merely unusual: a benign rewrite (extra keys,
    # reordered tensors) of a resealed index restores.
    d = tmp_path / "ckpt"
    d.mkdir()
    p1, p2 = two_checkpoints(str(d))
    doc = read_doc(p2)
    doc["note"] = "copied from another machine"
    doc["shards"][0]["tensors"] = dict(reversed(list(doc["shards"][0]["tensors"].items())))
    write_doc(p2, reseal(doc))
    assert latest_checkpoint(str(d)) == p2
    assert restored_values(p2)["w"].tolist() == [0, 10, 20, 30, 40]
    assert json.loads(open(p2 + ".index").read())["note"] == "copied from another machine"
    reader = NewCheckpointReader(str(d))
    assert reader.get_variable_to_shape_map() == {"v": [3, 4], "w": [5]}
    assert reader.has_tensor("w") and not reader.has_tensor("nope")
    np.testing.assert_array_equal(reader.get_tensor("w"), [0, 10, 20, 30, 40])
    assert list_variables(str(d)) == [("v", [3, 4]), ("w", [5])]
