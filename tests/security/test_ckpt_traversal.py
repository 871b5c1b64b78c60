"""Issue 15, finding 2 (first half): path traversal in checkpoint restore.

Reproduced before the fix: an index whose shard entry named `../outside/secret` (or an absolute
path), with its sha256 checksum recomputed, made restore open and read that file outside the
checkpoint directory, and the size check's error said how many bytes the outside file had
("it has 12340 bytes, the index says ..."), so a crafted index probed any readable file's size;
`latest_checkpoint` took such a checkpoint as good when the sizes agreed.

Fixed: shard names must be plain file names; the resolved path must lie in the checkpoint
directory (a symbolic link pointing out is refused too); the outside file is never opened, and no
message carries its size or contents.
"""
from __future__ import annotations

import os

import pytest

from actorflow import errors
from actorflow.train import latest_checkpoint, load_variable

from .ckpt_crafting import read_doc, reseal, restored_values, two_checkpoints, write_doc


@pytest.fixture
def layout(tmp_path):
    d = tmp_path / "ckpt"
    d.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret"
    secret.write_bytes(b"TOP-SECRET" * 1234)
    p1, p2 = two_checkpoints(str(d))
    return str(d), p1, p2, secret


def _point_shard_at(p2, name, size=None):
    doc = read_doc(p2)
    doc["shards"][0]["file"] = name
    if size is not None:
        # The forger makes the index agree with the target's size, as the old size check wanted.
        doc["shards"][0]["size"] = size
    write_doc(p2, reseal(doc))


@pytest.mark.parametrize("how", ["relative", "absolute"])
def test_index_naming_a_file_outside_is_refused(layout, how, monkeypatch):
    d, p1, p2, secret = layout
    name = "../outside/secret" if how == "relative" else str(secret)
    _point_shard_at(p2, name, size=os.path.getsize(secret))
    opened = []
    real_open = os.open

    def spy(path, *a, **kw):
        opened.append(os.fspath(path))
        return real_open(path, *a, **kw)
    monkeypatch.setattr(os, "open", spy)
    with pytest.raises(errors.DataLossError, match="plain file name") as e:
        restored_values(p2)
    with pytest.raises(errors.DataLossError, match="plain file name"):
        load_variable(p2, "v")
    assert latest_checkpoint(d) == p1
    monkeypatch.undo()
    assert not [p for p in opened if os.path.realpath(p) == os.path.realpath(secret)]
    assert "TOP-SECRET" not in str(e.value)


def test_size_of_an_outside_file_is_not_leaked(layout):
    d, p1, p2, secret = layout
    _point_shard_at(p2, "../outside/secret")
    with pytest.raises(errors.DataLossError) as e:
        restored_values(p2)
    assert str(os.path.getsize(secret)) not in str(e.value)


def test_symlink_out_of_the_directory_is_refused(layout):
    d, p1, p2, secret = layout
    os.symlink(secret, os.path.join(d, "innocent-looking"))
    _point_shard_at(p2, "innocent-looking", size=os.path.getsize(secret))
    with pytest.raises(errors.DataLossError, match="resolves outside the checkpoint directory") as e:
        restored_values(p2)
    assert str(os.path.getsize(secret)) not in str(e.value) and "TOP-SECRET" not in str(e.value)
    assert latest_checkpoint(d) == p1


def test_truncated_shard_message_says_which_way_not_how_much(layout):
    d, p1, p2, _ = layout
    shard = p2 + ".data-00000-of-00001"
    size = os.path.getsize(shard)
    with open(shard, "ab") as f:
        f.write(b"\0" * 777)
    with pytest.raises(errors.DataLossError, match="longer than") as e:
        restored_values(p2)
    assert str(size + 777) not in str(e.value)
