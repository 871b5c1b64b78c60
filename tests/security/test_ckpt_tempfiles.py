"""Issue 15, finding 3 (last part): leftovers of a save killed half way.

Reproduced before the fix: a process killed (SIGKILL) while it wrote a shard left
`model-2.data-00000-of-00001.tmp-<pid>-<hex>` in the checkpoint directory, and no later save ever
removed it: every crash during a save leaked a shard-sized file for good.

Fixed: every save first removes the temporary files of its directory that no live writer holds.
Writers hold an exclusive flock on their temporary file until it is renamed (the kernel releases it
when the writer dies), so a temporary file that can be locked, and is older than a short grace
period (the moment between its creation and its lock), is a leftover; one a concurrent saver is
writing is left alone, on this host or another.
"""
from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np

import actorflow as af
from actorflow import checkpoint_format as ckpt_io
from actorflow.train import Saver, latest_checkpoint

from .ckpt_crafting import A, make_vars

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_KILLED = textwrap.dedent("""
    import os, signal, sys
    import numpy as np
    import actorflow as af
    from actorflow import checkpoint_format as ckpt_io
    from actorflow.train import Saver
    d = sys.argv[1]
    v = af.Variable(np.full(50000, 1.0, np.float32), name="v")
    w = af.Variable(np.arange(5), name="w")
    saver = Saver()
    sess = af.Session()
    sess.run(af.global_variables_initializer())
    saver.save(sess, os.path.join(d, "model"), global_step=1)

    def die(stage, shard, path):
        if stage == "rename":      # the data is written and fsynced, not yet renamed
            os.kill(os.getpid(), signal.SIGKILL)
    ckpt_io.fault_hook = die
    saver.save(sess, os.path.join(d, "model"), global_step=2)
""")


def _age(path, seconds):
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_save_removes_what_a_killed_save_left(tmp_path):
    d = tmp_path / "ckpt"
    d.mkdir()
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", _KILLED, str(d)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    left = [f for f in os.listdir(d) if ".tmp-" in f]
    assert len(left) == 1 and left[0].startswith("model-2.data-00000-of-00001.tmp-")
    assert latest_checkpoint(str(d)) == str(d / "model-1")
    _age(d / left[0], 120)               # the next save comes a while later
    with af.Graph().as_default():
        make_vars(A)
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            Saver().save(sess, str(d / "model"), global_step=3)
    assert not [f for f in os.listdir(d) if ".tmp-" in f]


def test_only_stale_unlocked_temporaries_are_removed(tmp_path):
    d = str(tmp_path)

    def temp(name, age):
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            f.write(b"x" * 100)
        _age(path, age)
        return path
    stale = temp("model-7.data-00000-of-00002.tmp-4242-0badcafe", 3600)
    stale_index = temp("model-7.index.tmp-4242-deadbeef", 120)
    young = temp("model-8.data-00001-of-00002.tmp-4343-00c0ffee", 1)
    live = temp("model-8.data-00000-of-00002.tmp-4444-0123abcd", 3600)
    not_ours = temp("notes.txt.tmp-old", 3600)
    # A concurrent saver (a task still writing its shard) holds its file's lock.
    fd = os.open(live, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        removed = ckpt_io.remove_stale_temps(d)
    finally:
        os.close(fd)
    assert sorted(removed) == sorted([stale, stale_index])
    assert all(os.path.exists(p) for p in (young, live, not_ours))
    assert not os.path.exists(stale) and not os.path.exists(stale_index)
    # Once its writer is gone (the lock released) it is a leftover like any other.
    assert ckpt_io.remove_stale_temps(d) == [live]


def test_writers_lock_their_temporary_files(tmp_path, monkeypatch):
    # The lock is what keeps a concurrent save's cleanup away from a file being written: check that a
    # shard being written is locked at the moment of the fault hook, so cleanup leaves it alone.
    seen = []

    def probe(stage, shard, path):
        _age(path, 3600)
        seen.append((stage, ckpt_io.remove_stale_temps(os.path.dirname(path)), os.path.exists(path)))
    monkeypatch.setattr(ckpt_io, "fault_hook", probe)
    ckpt_io.write_shard(str(tmp_path / "m"), 0, 1, ["v"], [np.arange(10.0)])
    assert seen == [("write", [], True), ("rename", [], True)]
