"""The simulated disk: real files in the run's directory, with the crash semantics of a page cache.

`SimDisk` stands in for the `os` module of the checkpoint writer (actorflow/checkpoint_format.py) while
a simulation runs (`install()`): every call goes to the real `os`, and the disk remembers what is
durable. Data written and not yet fsynced, and renames whose directory was not fsynced, belong to
the page cache of the machine that made them:

- a process kill (kill -9) loses nothing: the page cache survives its process;
- a power loss of the machine (`crash(machine, rng)`) loses it, as the seed draws, file by file:
  an unsynced file keeps all its new bytes, none of them (back to its last fsynced content, or gone
  if it never was), or a torn prefix of them; an unsynced rename stands or is undone.

A process that was killed reaches its disk no more: its calls raise `ProcessKilled` (a kill inside
a kernel ends the kernel there, with no clean-up, as a real kill -9 does).

`getpid()` answers the simulated process's pid (checkpoint temp names and their writer record).
"""
from __future__ import annotations

import os as _os

from actorflow.sim.loop import OWNER

__all__ = ["SimDisk", "ProcessKilled"]


class ProcessKilled(BaseException):
    """Raised into the code of a simulated process that was killed (not an Exception: nothing
    may catch and carry on)."""


class SimDisk:
    def __init__(self, now=None):
        self._now = now or (lambda: 0.0)
        self._fds: dict = {}             # fd -> (path, machine) for files opened for writing
        self.durable: dict = {}          # path -> bytes at the last fsync (None: created, never synced)
        self.dirty: dict = {}            # machine -> {path}
        self.renames: dict = {}          # machine -> [(src, dst, dst's durable bytes before)]
        self.crashes = []                # what each power loss did, for the record
        # The checkpoint ledger (checkpoint safety): the saves that completed (write_index returned:
        # the writer's word that the checkpoint is durable), what each restore read, and, right after
        # each power loss, whether the newest completed save survived it intact and is the latest.
        self.completed = []              # (time, prefix, sha256 of its index file)
        self.restores = []               # (time, prefix, sha256 of the index read)
        self.power_losses = []           # {t, machine, newest, intact, latest, error}
        self._installed = []

    def __getattr__(self, name):
        return getattr(_os, name)

    # -- who is calling --------------------------------------------------------------------------------
    @staticmethod
    def _machine():
        p = OWNER.get()
        if p is not None and not p.alive:
            raise ProcessKilled(f"{p.name} was killed")
        return None if p is None else p.machine

    def getpid(self):
        p = OWNER.get()
        return _os.getpid() if p is None else p.pid

    # -- writes ----------------------------------------------------------------------------------------
    def open(self, path, flags, mode=0o777, *, dir_fd=None):
        m = self._machine()
        fd = _os.open(path, flags, mode, dir_fd=dir_fd)
        if flags & (_os.O_WRONLY | _os.O_RDWR):
            path = _os.path.abspath(path)
            self._fds[fd] = (path, m)
            if flags & _os.O_CREAT and path not in self.durable:
                self.durable[path] = None
        return fd

    def pwrite(self, fd, data, offset):
        m = self._machine()
        n = _os.pwrite(fd, data, offset)
        path, _ = self._fds.get(fd, (None, None))
        if path is not None:
            self.dirty.setdefault(m, set()).add(path)
        return n

    def fsync(self, fd):
        self._machine()
        _os.fsync(fd)
        ent = self._fds.get(fd)
        if ent is not None:
            path, m = ent
            with open(path, "rb") as f:
                self.durable[path] = f.read()
            self.dirty.get(m, set()).discard(path)
            return
        # A directory: the renames into it are durable now.
        try:
            d = _os.path.realpath(f"/proc/self/fd/{fd}")
        except OSError:
            d = None
        for m, rs in self.renames.items():
            self.renames[m] = [r for r in rs if _os.path.realpath(_os.path.dirname(r[1])) != d]

    def replace(self, src, dst, *, src_dir_fd=None, dst_dir_fd=None):
        m = self._machine()
        src, dst = _os.path.abspath(src), _os.path.abspath(dst)
        before = self.durable.get(dst, None) if _os.path.exists(dst) else None
        _os.replace(src, dst)
        self.renames.setdefault(m, []).append((src, dst, before))
        self.durable[dst] = self.durable.pop(src, None)
        for fd, (p, mm) in list(self._fds.items()):
            if p == src:
                self._fds[fd] = (dst, mm)
        d = self.dirty.get(m)
        if d is not None and src in d:
            d.discard(src)
            d.add(dst)

    rename = replace

    def close(self, fd):
        self._fds.pop(fd, None)
        return _os.close(fd)

    def unlink(self, path, *, dir_fd=None):
        self._machine()
        _os.unlink(path, dir_fd=dir_fd)
        path = _os.path.abspath(path)
        self.durable.pop(path, None)
        for d in self.dirty.values():
            d.discard(path)

    remove = unlink

    # -- a power loss ------------------------------------------------------------------------------------
    def crash(self, machine, rng) -> list:
        """A power loss of `machine`: its unsynced writes and renames are kept, lost or torn as `rng`
        (random.Random) draws. Returns what happened, one entry per file or rename."""
        out = []
        for src, dst, before in reversed(self.renames.pop(machine, [])):
            if rng.random() < 0.5:
                if _os.path.exists(dst):
                    _os.replace(dst, src)
                if before is not None:
                    with open(dst, "wb") as f:
                        f.write(before)
                self.durable[src] = self.durable.pop(dst, None)
                if before is not None:
                    self.durable[dst] = before
                out.append({"rename_undone": _os.path.basename(dst)})
        for path in sorted(self.dirty.pop(machine, set())):
            if not _os.path.exists(path):
                continue
            old = self.durable.get(path)
            u = rng.random()
            if u < 1 / 3:
                out.append({"kept": _os.path.basename(path)})
                continue
            with open(path, "rb") as f:
                new = f.read()
            if u < 2 / 3:
                if old is None:
                    _os.unlink(path)
                    self.durable.pop(path, None)
                else:
                    with open(path, "wb") as f:
                        f.write(old)
                out.append({"lost": _os.path.basename(path)})
            else:
                cut = int(rng.random() * len(new))
                base = old or b""
                torn = new[:cut] + base[cut:] if len(base) > cut else new[:cut]
                with open(path, "wb") as f:
                    f.write(torn)
                out.append({"torn": _os.path.basename(path), "at": cut, "of": len(new)})
        self.crashes.append((machine, out))
        self.power_losses.append(self._after_power_loss(machine))
        return out

    def _after_power_loss(self, machine) -> dict:
        """Whether the newest checkpoint that completed before this power loss is still intact (its
        index and every shard checksum verify) and is what latest_checkpoint() names now. Checked
        outside any simulated process (the one that lost power may be the caller)."""
        import contextvars

        from actorflow import checkpoint_format as ckpt_io
        from actorflow import errors
        from actorflow.train.saver import latest_checkpoint
        rec = {"t": round(self._now(), 6), "machine": machine, "newest": None}
        if not self.completed:
            return rec
        prefix = self.completed[-1][1]
        rec["newest"] = _os.path.basename(prefix)

        def check():
            try:
                ckpt_io.verify_checkpoint(prefix)
                rec["intact"] = True
            except (errors.OpError, OSError) as e:
                rec["intact"] = False
                rec["error"] = (getattr(e, "message", None) or str(e)).splitlines()[0][:300]
            latest = latest_checkpoint(_os.path.dirname(prefix))
            rec["latest"] = _os.path.basename(latest) if latest else None
        contextvars.Context().run(check)
        return rec

    @staticmethod
    def _sha(path) -> str | None:
        import hashlib
        try:
            with open(path, "rb") as f:
                return hashlib.sha256(f.read()).hexdigest()
        except OSError:
            return None

    # -- installation --------------------------------------------------------------------------------------
    def install(self) -> None:
        """Becomes the `os` of the checkpoint writer (actorflow/checkpoint_format.py), and keeps the
        checkpoint ledger: the saves that completed and the restores (af.train.Saver's)."""
        from actorflow import checkpoint_format as ckpt_io
        from actorflow.train import saver as saver_mod
        disk = self
        write_index, restore = ckpt_io.write_index, saver_mod.Saver.restore

        def write_index_logged(prefix, *a, **k):
            doc = write_index(prefix, *a, **k)
            disk.completed.append((round(disk._now(), 6), _os.path.abspath(prefix),
                                   disk._sha(ckpt_io.index_filename(prefix))))
            return doc

        def restore_logged(saver, sess, save_path):
            if save_path is not None:
                from actorflow.train.saver import _prefix_of
                prefix = _os.path.abspath(_prefix_of(save_path))
                disk.restores.append((round(disk._now(), 6), prefix, disk._sha(ckpt_io.index_filename(prefix))))
            return restore(saver, sess, save_path)
        self._installed += [(ckpt_io, "os", ckpt_io.os), (ckpt_io, "write_index", write_index),
                            (saver_mod.Saver, "restore", restore)]
        ckpt_io.os = self
        ckpt_io.write_index = write_index_logged
        saver_mod.Saver.restore = restore_logged

    def uninstall(self) -> None:
        while self._installed:
            obj, name, old = self._installed.pop()
            setattr(obj, name, old)

    def checkpoint_safety(self) -> list:
        """What broke checkpoint safety, one line each (empty: nothing): a restore that read an index
        no completed save wrote (the restored state is not a durably saved one), or a power loss that
        damaged the newest completed checkpoint or left another one as the latest."""
        saved = {sha for _, _, sha in self.completed}
        why = []
        for t, prefix, sha in self.restores:
            if sha not in saved:
                why.append(f"the restore at {t:g} s read {_os.path.basename(prefix)}.index, which no completed "
                           "save wrote" if sha else f"the restore at {t:g} s found no index of "
                           f"{_os.path.basename(prefix)}")
        for pl in self.power_losses:
            if pl["newest"] is None:
                continue
            if not pl.get("intact"):
                why.append(f"the power loss of {pl['machine']} at {pl['t']:g} s damaged {pl['newest']}, a completed "
                           f"save: {pl.get('error', '')}")
            elif pl.get("latest") != pl["newest"]:
                why.append(f"after the power loss of {pl['machine']} at {pl['t']:g} s the latest checkpoint is "
                           f"{pl.get('latest')}, not {pl['newest']} (the newest completed save)")
        return why
