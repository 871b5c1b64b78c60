"""af.gfile and af.io.gfile: TF's file API (tf.compat.v1.gfile, tf.io.gfile) on the local file system.

Both spellings are here: TF 1.x's `GFile`, `Open`, `FastGFile`, `Exists`, `MakeDirs`, `MkDir`,
`DeleteRecursively`, `Remove`, `Glob`, `ListDirectory`, `IsDirectory`, `Copy`, `Rename`, `Stat`,
`Walk`, and TF 2.x's `exists`, `makedirs`, `mkdir`, `glob`, `listdir`, `isdir`, `remove`, `rmtree`,
`copy`, `rename`, `stat`, `walk`, `join`. Failures raise TF's error classes naming the path:
NotFoundError for a missing file or directory, AlreadyExistsError, PermissionDeniedError,
FailedPreconditionError (a directory where a file is expected, a directory not empty).

Differs from TF: only local paths (and `file://` URLs); another scheme (gs://, s3://, hdfs://)
raises UnimplementedError, as TF does for a file system it has no plugin for.
"""
from __future__ import annotations

import errno
import glob as _glob
import os
import shutil

from actorflow import errors

__all__ = ["GFile", "Open", "FastGFile", "Exists", "MakeDirs", "MkDir", "DeleteRecursively", "Remove", "Glob",
           "ListDirectory", "IsDirectory", "Copy", "Rename", "Stat", "Walk", "FileStatistics",
           "exists", "makedirs", "mkdir", "glob", "listdir", "isdir", "remove", "rmtree", "copy", "rename", "stat",
           "walk", "join", "get_registered_schemes"]


def _path(name) -> str:
    p = os.fspath(name)
    if isinstance(p, bytes):
        p = p.decode("utf-8")
    if "://" in p:
        scheme, _, rest = p.partition("://")
        if scheme != "file":
            raise errors.UnimplementedError(None, None, f"File system scheme '{scheme}' not implemented "
                                                        f"(file: '{p}')")
        p = rest
    return p


def os_error(e: OSError, what: str) -> errors.OpError:
    """An OSError as TF's error class, the message naming `what` (the operation and path)."""
    reason = e.strerror or str(e)
    cls = {errno.ENOENT: errors.NotFoundError, errno.EEXIST: errors.AlreadyExistsError,
           errno.EACCES: errors.PermissionDeniedError, errno.EPERM: errors.PermissionDeniedError,
           errno.EROFS: errors.PermissionDeniedError, errno.ENOTDIR: errors.FailedPreconditionError,
           errno.EISDIR: errors.FailedPreconditionError, errno.ENOTEMPTY: errors.FailedPreconditionError,
           errno.ENOSPC: errors.ResourceExhaustedError}.get(e.errno, errors.UnknownError)
    return cls(None, None, f"{what}: {reason}")


def get_registered_schemes():
    """The URL schemes this file API handles (tf.io.gfile.get_registered_schemes): the local file
    system only."""
    return ["", "file"]


def join(path, *paths):
    """Joins path components with '/' (tf.io.gfile.join)."""
    return os.path.join(os.fspath(path), *[os.fspath(p) for p in paths])


def exists(path) -> bool:
    """True when `path` (a file or directory) exists (tf.io.gfile.exists, TF-1.x gfile.Exists)."""
    return os.path.exists(_path(path))


def isdir(path) -> bool:
    """True when `path` is a directory (tf.io.gfile.isdir, TF-1.x gfile.IsDirectory)."""
    return os.path.isdir(_path(path))


def makedirs(path) -> None:
    """Creates `path` and any missing parents; an existing directory is fine (tf.io.gfile.makedirs,
    TF-1.x gfile.MakeDirs). A file in the way is FailedPreconditionError."""
    p = _path(path)
    try:
        os.makedirs(p, exist_ok=True)
    except FileExistsError:
        raise errors.FailedPreconditionError(None, None, f"Cannot create directory '{p}': a file of that name "
                                                         f"exists") from None
    except OSError as e:
        raise os_error(e, f"Cannot create directory '{p}'") from None


def mkdir(path) -> None:
    """Creates the directory `path`, whose parent must exist (tf.io.gfile.mkdir, TF-1.x gfile.MkDir).
    AlreadyExistsError if it exists, NotFoundError if the parent does not."""
    p = _path(path)
    try:
        os.mkdir(p)
    except OSError as e:
        raise os_error(e, f"Cannot create directory '{p}'") from None


def remove(path) -> None:
    """Deletes the file `path` (tf.io.gfile.remove, TF-1.x gfile.Remove): NotFoundError if it does not
    exist, FailedPreconditionError for a directory."""
    p = _path(path)
    if os.path.isdir(p) and not os.path.islink(p):
        raise errors.FailedPreconditionError(None, None, f"Cannot delete '{p}': it is a directory")
    try:
        os.remove(p)
    except OSError as e:
        raise os_error(e, f"Cannot delete file '{p}'") from None


def rmtree(path) -> None:
    """Deletes the directory `path` and everything under it (tf.io.gfile.rmtree, TF-1.x
    gfile.DeleteRecursively): NotFoundError if it does not exist; a file is deleted."""
    p = _path(path)
    if not os.path.lexists(p):
        raise errors.NotFoundError(None, None, f"Cannot delete '{p}': no such file or directory")
    try:
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.remove(p)
    except OSError as e:
        raise os_error(e, f"Cannot delete '{p}' recursively") from None


def listdir(path) -> list:
    """The names of the entries of directory `path`, without '.' and '..' (tf.io.gfile.listdir,
    TF-1.x gfile.ListDirectory); NotFoundError if it is not a directory."""
    p = _path(path)
    if not os.path.isdir(p):
        raise errors.NotFoundError(None, None, f"Could not find directory {p}")
    try:
        return os.listdir(p)
    except OSError as e:
        raise os_error(e, f"Cannot list directory '{p}'") from None


def glob(pattern) -> list:
    """The paths matching `pattern` (a string or a list of them), dotfiles included
    (tf.io.gfile.glob, TF-1.x gfile.Glob)."""
    patterns = [pattern] if isinstance(pattern, (str, bytes, os.PathLike)) else list(pattern)
    out = []
    for pat in patterns:
        out.extend(_glob.glob(_path(pat), include_hidden=True))
    return out


def copy(src, dst, overwrite=False) -> None:
    """Copies the file `src` to `dst` (tf.io.gfile.copy, TF-1.x gfile.Copy): AlreadyExistsError if
    `dst` exists and not `overwrite`, NotFoundError if `src` does not exist."""
    s, d = _path(src), _path(dst)
    if not overwrite and os.path.exists(d):
        raise errors.AlreadyExistsError(None, None, f"Cannot copy '{s}' to '{d}': file already exists")
    if os.path.isdir(s):
        raise errors.FailedPreconditionError(None, None, f"Cannot copy '{s}': it is a directory")
    try:
        shutil.copyfile(s, d)
    except OSError as e:
        raise os_error(e, f"Cannot copy '{s}' to '{d}'") from None


def rename(src, dst, overwrite=False) -> None:
    """Renames (moves) `src` to `dst` (tf.io.gfile.rename, TF-1.x gfile.Rename): AlreadyExistsError if
    `dst` exists and not `overwrite`, NotFoundError if `src` does not exist."""
    s, d = _path(src), _path(dst)
    if not overwrite and os.path.exists(d):
        raise errors.AlreadyExistsError(None, None, f"Cannot rename '{s}' to '{d}': file already exists")
    try:
        os.replace(s, d)
    except OSError as e:
        raise os_error(e, f"Cannot rename '{s}' to '{d}'") from None


class FileStatistics:
    """What `stat` returns (TF's FileStatistics): `length` in bytes, `mtime_nsec`, `is_directory`."""

    __slots__ = ("length", "mtime_nsec", "is_directory")

    def __init__(self, length=None, mtime_nsec=None, is_directory=None):
        self.length = length
        self.mtime_nsec = mtime_nsec
        self.is_directory = is_directory

    def __repr__(self):
        return f"FileStatistics(length={self.length}, mtime_nsec={self.mtime_nsec}, is_directory={self.is_directory})"


def stat(path) -> FileStatistics:
    """The size, modification time and kind of `path` (tf.io.gfile.stat, TF-1.x gfile.Stat);
    NotFoundError if it does not exist."""
    p = _path(path)
    try:
        st = os.stat(p)
    except OSError as e:
        raise os_error(e, f"Cannot stat '{p}'") from None
    return FileStatistics(length=st.st_size, mtime_nsec=st.st_mtime_ns, is_directory=os.path.isdir(p))


def walk(top, topdown=True, onerror=None):
    """Yields `(dirname, subdirnames, filenames)` for `top` and every directory under it
    (tf.io.gfile.walk); nothing when `top` is not a directory. `onerror` is called with the
    NotFoundError of a directory that cannot be listed."""
    top = _path(top)
    try:
        names = listdir(top)
    except errors.NotFoundError as e:
        if onerror is not None:
            onerror(e)
        return
    files, subdirs = [], []
    for name in names:
        (subdirs if os.path.isdir(os.path.join(top, name)) else files).append(name)
    here = (top, subdirs, files)
    if topdown:
        yield here
    for sub in subdirs:
        yield from walk(os.path.join(top, sub), topdown, onerror)
    if not topdown:
        yield here


# -- files -----------------------------------------------------------------------------------------------

_MODES = ("r", "w", "a", "r+", "w+", "a+")


class GFile:
    """A file object over a local path (tf.io.gfile.GFile, TF-1.x gfile.GFile / gfile.Open).

    `mode` is 'r', 'w', 'a', 'r+', 'w+' or 'a+', with 'b' for bytes (else str, UTF-8). As in TF the
    file is opened on first use, not by the constructor: reading a missing file raises
    NotFoundError at the first read, and a file opened for writing and never written is not
    created. Reading a file opened only for writing (or the reverse) is PermissionDeniedError.
    """

    def __init__(self, name, mode="r"):
        self.__name = _path(name)
        self.__mode = mode
        base = mode.replace("b", "")
        if base not in _MODES or mode.count("b") > 1:
            raise errors.InvalidArgumentError(None, None, "mode is not 'r' or 'w' or 'a' or 'r+' or 'w+' or 'a+'")
        self._binary = "b" in mode
        self._read_check_passed = base in ("r", "r+", "w+", "a+")
        self._write_check_passed = base in ("w", "a", "r+", "w+", "a+")
        self._f = None

    @property
    def name(self):
        return self.__name

    @property
    def mode(self):
        return self.__mode

    def _open(self):
        if self._f is None:
            mode = self.__mode if self._binary else self.__mode + "b"
            try:
                self._f = open(self.__name, mode)   # noqa: SIM115 - owned by this object, closed by close()
            except OSError as e:
                raise os_error(e, f"Cannot open '{self.__name}'") from None
        return self._f

    def _preread_check(self):
        if not self._read_check_passed:
            raise errors.PermissionDeniedError(None, None, f"File isn't open for reading: '{self.__name}'")
        return self._open()

    def _prewrite_check(self):
        if not self._write_check_passed:
            raise errors.PermissionDeniedError(None, None, f"File isn't open for writing: '{self.__name}'")
        return self._open()

    def _prepare(self, data):
        return data if self._binary else data.decode("utf-8")

    def size(self) -> int:
        """The size of the file in bytes."""
        return stat(self.__name).length

    def write(self, file_content):
        """Writes `file_content` (str, encoded as UTF-8, or bytes)."""
        f = self._prewrite_check()
        f.write(file_content.encode("utf-8") if isinstance(file_content, str) else bytes(file_content))

    def read(self, n=-1):
        """Reads `n` bytes (or characters' bytes), or the rest of the file when n is -1."""
        f = self._preread_check()
        return self._prepare(f.read(-1 if n is None else n))

    def readline(self):
        """The next line, with its newline; empty at the end of the file."""
        return self._prepare(self._preread_check().readline())

    def readlines(self):
        """All the remaining lines."""
        return [self._prepare(x) for x in self._preread_check().readlines()]

    def seek(self, offset=None, whence=0, position=None):
        """Moves to `offset` (relative to `whence`: 0 start, 1 current, 2 end); `position` is TF's old
        name for offset."""
        if position is not None:
            offset = position
        if offset is None:
            raise TypeError("seek(): offset argument required")
        self._open().seek(offset, whence)

    def tell(self):
        """The current position in the file."""
        return self._open().tell()

    def __iter__(self):
        return self

    def __next__(self):
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    next = __next__

    def flush(self):
        """Writes what is buffered to the file."""
        if self._f is not None:
            self._f.flush()

    def close(self):
        """Closes the file (flushing it)."""
        if self._f is not None:
            self._f.close()
            self._f = None

    def seekable(self):
        return True

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()

    def __del__(self):
        f = getattr(self, "_f", None)
        if f is not None:
            f.close()


# TF 1.x names.
Open = GFile
FastGFile = GFile
Exists = exists
IsDirectory = isdir
MakeDirs = makedirs
MkDir = mkdir
Remove = remove
DeleteRecursively = rmtree
ListDirectory = listdir
Glob = glob
Copy = copy
Rename = rename
Stat = stat


def Walk(top, in_order=True):  # noqa: N802 - TF's name
    """Yields `(dirname, subdirnames, filenames)` for `top` and every directory under it, parents
    first when `in_order` (TF-1.x gfile.Walk)."""
    return walk(top, topdown=in_order)
