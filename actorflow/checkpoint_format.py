"""The checkpoint file format: what `af.train.Saver` and the checkpoint kernels (SaveShard,
RestoreShard in actorflow/kernels/cpu/io.py) both read and write. It depends on nothing in
actorflow but `errors`, so every layer may use it.

A checkpoint with prefix P is
- its shard files `P.data-00000-of-00002`, ...: safetensors (an 8-byte little-endian header length,
  a JSON header giving each tensor's dtype, shape and data offsets, then the raw little-endian data),
  so that any safetensors reader opens them. Never pickle.
- its index `P.index`: JSON listing every shard file with its size and the sha256 of its header,
  and per tensor its dtype, shape, offset in the file, byte count and sha256, plus a sha256 of the
  index itself (`checksum`) and, when written with a key (the cluster token), an HMAC-SHA256 of it
  (`hmac`). The index is written last: a checkpoint without a valid index is incomplete.

The checksum is integrity only: it catches a torn or bit-flipped index, but anyone who can write the
directory can recompute it. The HMAC is authenticity: a reader given the key accepts only an index
made by a holder of the key, and then, through the index's per-tensor sha256, only the tensors it
lists. Either way the index is untrusted input until checked: every field is validated against a
schema (types, required keys, dtypes from an allow list, shapes of non-negative ints, byte ranges
inside the shard file, matching dtype size times element count, not overlapping), and shard files
must be plain file names that resolve inside the checkpoint's directory. Anything else is a
DataLossError naming the file and what is wrong, raised before any buffer is allocated.

Every file is written to a temporary file in its final directory (locked while it is written),
fsynced, renamed over the final name, and the directory fsynced: a crash leaves the old file or the
new one, never half of one, plus perhaps a temporary file that the next save removes.
Reads check sizes and checksums and raise DataLossError naming the file and the tensor.

Writing and hashing run on separate threads (os.pwrite, fsync and hashlib release the GIL), so a
save costs about max(write + fsync, sha256) rather than their sum; a restore reads and hashes
tensors on several threads the same way.
"""
from __future__ import annotations

import collections
import concurrent.futures
import errno
import hashlib
import hmac
import json
import logging
import math
import os
import re
import secrets
import socket
import stat
import struct

import numpy as np

try:
    import fcntl
except ImportError:          # Windows: no flock; temporary files are then judged by age alone
    fcntl = None

from actorflow import clock, errors

__all__ = ["shard_filename", "index_filename", "write_shard", "write_index", "read_index", "load_index",
           "encode_restore_path", "decode_restore_path", "check_shard_files",
           "read_tensors", "verify_checkpoint", "atomic_write", "fsync_dir", "fault_hook", "remove_stale_temps",
           "plain_file_name"]

log = logging.getLogger(__name__)

INDEX_FORMAT = "actorflow-checkpoint"
# Version 2: the checksum leaves out an optional "hmac". Version 1 indexes (no HMAC) are still read.
INDEX_VERSION = 2
_READ_VERSIONS = (1, 2)

# Failure injection for tests and the simulator: a callable(stage, shard, path) called while a shard is
# written, at stage "write" (the temporary file holds the header only) and "rename" (the data is written
# and fsynced, not yet renamed into place). Raising there fails the save as a broken disk would;
# os._exit or SIGKILL there is a process dying in the middle of a save.
fault_hook = None

_ST_DTYPES = {"float16": "F16", "float32": "F32", "float64": "F64", "int8": "I8", "int16": "I16",
              "int32": "I32", "int64": "I64", "uint8": "U8", "uint16": "U16", "uint32": "U32",
              "uint64": "U64", "bool": "BOOL"}
# Below this many bytes, two threads cost more than they save.
_PARALLEL_BYTES = 1 << 22
_THREADS = max(2, min(4, os.cpu_count() or 2))
# Verification reads in chunks of this size, so that it never holds a whole tensor.
_CHUNK = 1 << 23
# Bounds of the index schema: far above anything a real checkpoint has, far below what would hurt.
_MAX_INDEX_BYTES = 1 << 28
_MAX_BYTES = 1 << 62
_MAX_SHARDS = 1 << 16
_MAX_RANK = 64
_MAX_NAME = 4096
_HEX64 = re.compile(r"[0-9a-f]{64}")
# Temporary files: "<final name>.tmp-<pid>-<8 hex digits>" (see _temp_name), removed by the next save
# once no writer holds them (see remove_stale_temps).
_TMP_RE = re.compile(r"\.tmp-[0-9]+-[0-9a-f]{8}\Z")
TMP_MIN_AGE = 60.0
_TMP_MIN_AGE_UNLOCKED = 3600.0


def shard_filename(prefix: str, shard: int, num_shards: int) -> str:
    """The file of shard `shard` of `num_shards` (TF's V2 checkpoint naming)."""
    return f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"


def index_filename(prefix: str) -> str:
    return prefix + ".index"


# -- files ----------------------------------------------------------------------------------------------

def _os_error(e: OSError, what: str) -> errors.OpError:
    cls = {errno.ENOSPC: errors.ResourceExhaustedError, errno.EDQUOT: errors.ResourceExhaustedError,
           errno.EACCES: errors.PermissionDeniedError, errno.EPERM: errors.PermissionDeniedError,
           errno.EROFS: errors.PermissionDeniedError, errno.ENOENT: errors.NotFoundError}.get(e.errno,
                                                                                             errors.UnknownError)
    return cls(None, None, f"{what}: {e.strerror or e} [Errno {e.errno}]")


def _flock(fd: int) -> None:
    """An exclusive non-blocking lock on `fd`; OSError where the OS has no flock (Windows)."""
    if fcntl is None:
        raise OSError(errno.ENOSYS, "no flock on this platform")
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _temp_name(path: str) -> str:
    # Same directory as the final file, so that the rename is atomic (never across file systems).
    return f"{path}.tmp-{os.getpid()}-{secrets.token_hex(4)}"


def _open_temp(tmp: str) -> int:
    """Creates temporary file `tmp` and locks it for as long as this process keeps it open: the mark of
    a live writer that remove_stale_temps respects."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        _flock(fd)
    except OSError:
        pass    # a file system (or an OS, Windows) without locks: remove_stale_temps then goes by age alone
    return fd


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def fsync_dir(path: str) -> None:
    """Makes a rename or unlink in directory `path` durable."""
    fd = os.open(path or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as e:
        # Some file systems cannot fsync a directory; the rename is then as durable as they make it.
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _write_all(fd: int, buf: memoryview, offset: int) -> None:
    while buf:
        n = os.pwrite(fd, buf, offset)
        buf = buf[n:]
        offset += n


def _read_full(fd: int, buf: memoryview, offset: int) -> int:
    """Reads into `buf` from `offset`; returns the byte count, short only at the end of the file."""
    done = 0
    while done < len(buf):
        n = os.preadv(fd, [buf[done:]], offset + done)
        if n == 0:
            break
        done += n
    return done


def atomic_write(path: str, data: bytes) -> None:
    """Replaces `path` by `data` atomically and durably (temporary file, fsync, rename, fsync dir)."""
    tmp = _temp_name(path)
    fd = _open_temp(tmp)
    try:
        _write_all(fd, memoryview(data), 0)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        _unlink_quietly(tmp)
        raise
    try:
        # Renamed before it is closed: its lock marks it as live until it has its final name.
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    finally:
        os.close(fd)
    fsync_dir(os.path.dirname(path))


def _bytes_of(a: np.ndarray) -> memoryview:
    return memoryview(a.reshape(-1).view(np.uint8))


def _run(jobs, nbytes: int) -> list:
    """Runs the callables `jobs`, on threads when there are enough bytes to be worth it."""
    if nbytes < _PARALLEL_BYTES or len(jobs) < 2:
        return [j() for j in jobs]
    with concurrent.futures.ThreadPoolExecutor(min(_THREADS, len(jobs)), thread_name_prefix="actorflow-ckpt") as ex:
        return list(ex.map(lambda j: j(), jobs))


def _hook(stage: str, shard: int, path: str) -> None:
    h = fault_hook
    if h is not None:
        h(stage, shard, path)


# -- writing ---------------------------------------------------------------------------------------------

def _prepare(name: str, a) -> np.ndarray:
    if name == "__metadata__":
        raise errors.InvalidArgumentError(None, None, "Cannot save a tensor named '__metadata__': safetensors "
                                                      "reserves that name")
    a = np.asarray(a)
    if a.dtype.name not in _ST_DTYPES:
        raise errors.InvalidArgumentError(None, None, f"Cannot save tensor '{name}': dtype {a.dtype} has no "
                                                      f"safetensors equivalent")
    # safetensors is little-endian and dense; a native little-endian contiguous array is not copied.
    a = np.asarray(a, dtype=a.dtype.newbyteorder("<"))
    # (np.ascontiguousarray would turn a 0-d array into a 1-d one.)
    return a if a.flags.c_contiguous else a.copy(order="C")


# The shards this process wrote lately, newest last (what a task's /status reports as its checkpoint
# history: the dashboard's view of who saved what, when, and how long it took). Bounded.
recent_shards: collections.deque = collections.deque(maxlen=64)


def write_shard(prefix: str, shard: int, num_shards: int, names, arrays) -> dict:
    """Writes one shard file of checkpoint `prefix` durably; returns its index entry (a JSON-able dict)."""
    path = shard_filename(prefix, shard, num_shards)
    t_start = clock.time()
    # The safetensors writer's order (widest dtype first, then by name) keeps every tensor aligned.
    items = sorted(((n, _prepare(n, a)) for n, a in zip(names, arrays)), key=lambda kv: (-kv[1].itemsize, kv[0]))
    header: dict = {}
    offset = 0
    for name, a in items:
        header[name] = {"dtype": _ST_DTYPES[a.dtype.name], "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    header["__metadata__"] = {"format": "actorflow", "shard": str(shard), "num_shards": str(num_shards)}
    hjson = json.dumps(header, separators=(",", ":")).encode()
    hjson += b" " * (-len(hjson) % 8)
    head = struct.pack("<Q", len(hjson)) + hjson
    base = len(head)
    where = f"Cannot write checkpoint shard '{path}'"
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        tmp = _temp_name(path)
        fd = _open_temp(tmp)
    except OSError as e:
        raise _os_error(e, where) from e
    try:
        _write_all(fd, memoryview(head), 0)
        _hook("write", shard, tmp)

        def write_and_sync():
            for name, a in items:
                _write_all(fd, _bytes_of(a), base + header[name]["data_offsets"][0])
            os.fsync(fd)
        # One thread writes and fsyncs while the others hash: the hashing (CPU) hides under the
        # writeback (disk) instead of adding to it.
        jobs = [write_and_sync] + [lambda a=a: hashlib.sha256(_bytes_of(a)).hexdigest() for _, a in items]
        digests = _run(jobs, offset)[1:]
        _hook("rename", shard, tmp)
    except BaseException as e:
        os.close(fd)
        _unlink_quietly(tmp)
        if isinstance(e, OSError):
            raise _os_error(e, where) from e
        raise
    try:
        # Renamed before it is closed: its lock marks it as live until it has its final name.
        os.replace(tmp, path)
    except OSError as e:
        _unlink_quietly(tmp)
        raise _os_error(e, where) from e
    finally:
        os.close(fd)
    try:
        fsync_dir(os.path.dirname(path))
    except OSError as e:
        raise _os_error(e, where) from e
    tensors = {}
    for i, (name, a) in enumerate(items):
        tensors[name] = {"dtype": a.dtype.name, "shape": list(a.shape), "offset": base + header[name]["data_offsets"][0],
                         "nbytes": a.nbytes, "sha256": digests[i]}
    recent_shards.append({"prefix": prefix, "shard": shard, "num_shards": num_shards, "bytes": base + offset,
                          "tensors": len(items), "time": clock.time(), "seconds": clock.time() - t_start})
    return {"shard": shard, "num_shards": num_shards, "file": os.path.basename(path), "size": base + offset,
            "header_sha256": hashlib.sha256(head).hexdigest(), "tensors": tensors,
            "writer": {"host": socket.gethostname(), "pid": os.getpid()}}


# -- the index: integrity, authenticity, schema -----------------------------------------------------------

def _hmac_key(secret) -> bytes:
    """The HMAC key for checkpoint indexes from a secret (the cluster token): derived, not the token
    itself, so that a checkpoint's HMAC can never be replayed as anything else keyed by the token."""
    if isinstance(secret, str):
        secret = secret.encode("utf-8")
    if not isinstance(secret, (bytes, bytearray)) or not secret:
        raise TypeError(f"a checkpoint key must be a non-empty str or bytes, got {type(secret).__name__}")
    return hmac.new(bytes(secret), b"actorflow checkpoint index", hashlib.sha256).digest()


def _index_body(doc: dict) -> bytes:
    # Version 1 summed everything but its checksum; version 2 leaves the HMAC out as well.
    body = {k: v for k, v in doc.items() if k not in ("checksum", "hmac")}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def _index_checksum(doc: dict) -> str:
    return hashlib.sha256(_index_body(doc)).hexdigest()


def _index_hmac(doc: dict, secret) -> str:
    return hmac.new(_hmac_key(secret), _index_body(doc), hashlib.sha256).hexdigest()


def write_index(prefix: str, entries, key=None, **extra) -> dict:
    """Writes the index of checkpoint `prefix` from its shards' entries, atomically; the checkpoint is
    complete once this returns. `extra` (JSON-able) is stored alongside, e.g. the global step.

    The index always carries a sha256 of its contents (`checksum`: integrity, against a torn or
    bit-flipped file, not against someone who can write the directory: they can recompute it). With
    `key` (the cluster token, str or bytes) it also carries `hmac`, an HMAC-SHA256 under a key derived
    from it (authenticity: only a holder of the token can make an index that a keyed reader accepts).
    """
    entries = sorted(entries, key=lambda e: e["shard"])
    n = len(entries)
    if [e["shard"] for e in entries] != list(range(n)) or any(e["num_shards"] != n for e in entries):
        raise errors.InternalError(None, None, f"Checkpoint '{prefix}': shard entries {[e['shard'] for e in entries]} "
                                               f"do not make a complete set of {n}")
    doc = {"format": INDEX_FORMAT, "version": INDEX_VERSION, "num_shards": n, "shards": entries, **extra}
    doc["checksum"] = _index_checksum(doc)
    if key:
        doc["hmac"] = _index_hmac(doc, key)
    try:
        _check_schema(doc)     # never write what no reader would accept
    except _Malformed as e:
        raise errors.InternalError(None, None, f"Checkpoint '{prefix}': refusing to write an invalid index: {e}") from None
    atomic_write(index_filename(prefix), json.dumps(doc, indent=1).encode())
    return doc


class _Malformed(Exception):
    """What is wrong with an index (turned into a DataLossError naming the file)."""


def _show(v) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _int(v, what: str, lo: int = 0, hi: int = _MAX_BYTES) -> int:
    # bool is an int in Python, never in an index.
    if type(v) is not int or not lo <= v <= hi:
        raise _Malformed(f"{what} must be an integer in [{lo}, {hi}], got {_show(v)}")
    return v


def _hex64(v, what: str) -> None:
    if not (isinstance(v, str) and _HEX64.fullmatch(v)):
        raise _Malformed(f"{what} must be 64 lowercase hex digits (a sha256), got {_show(v)}")


def _need(d, keys, what: str) -> None:
    if not isinstance(d, dict):
        raise _Malformed(f"{what} must be a JSON object, got {type(d).__name__}")
    for k in keys:
        if k not in d:
            raise _Malformed(f"{what} lacks the required key '{k}'")


def plain_file_name(name) -> bool:
    """Whether `name` is a plain file name (no directory part, not '.' or '..', no NUL): what a shard
    file of an index must be, so that it can only name a file inside the checkpoint's directory."""
    return (isinstance(name, str) and 0 < len(name) <= 255 and name not in (".", "..") and "/" not in name
            and "\\" not in name and "\0" not in name and not os.path.isabs(name)
            and (os.altsep is None or os.altsep not in name) and os.path.basename(name) == name)


def _check_schema(doc) -> None:
    """Every field of an index, with its type and range; raises _Malformed saying which and why.

    Afterwards every shard entry names a plain file, every tensor has an allowed dtype, a shape of
    non-negative ints, a byte count equal to dtype size times element count, and a byte range inside
    its shard file that overlaps no other tensor's: nothing a reader does with it allocates more than
    the shard file's size or reads outside it.
    """
    _need(doc, ("format", "version", "num_shards", "shards", "checksum"), "the index")
    if doc["format"] != INDEX_FORMAT:
        raise _Malformed(f"format must be {INDEX_FORMAT!r}, got {_show(doc['format'])}")
    version = doc["version"]
    if type(version) is not int or version not in _READ_VERSIONS:
        raise _Malformed(f"version {_show(version)} is not one this actorflow reads {_READ_VERSIONS}")
    _hex64(doc["checksum"], "checksum")
    if "hmac" in doc:
        if version < 2:
            raise _Malformed("a version 1 index has no 'hmac'")
        _hex64(doc["hmac"], "hmac")
    gs = doc.get("global_step")
    if gs is not None and type(gs) is not int:
        raise _Malformed(f"global_step must be an integer or null, got {_show(gs)}")
    created = doc.get("created")
    if created is not None and (type(created) not in (int, float) or not math.isfinite(created)):
        raise _Malformed(f"created must be a finite number or null, got {_show(created)}")
    n = _int(doc["num_shards"], "num_shards", 1, _MAX_SHARDS)
    shards = doc["shards"]
    if not isinstance(shards, list) or len(shards) != n:
        raise _Malformed(f"shards must be a list of num_shards={n} entries, got {_show(shards)}")
    files: set = set()
    names: dict = {}
    for i, e in enumerate(shards):
        what = f"shards[{i}]"
        _need(e, ("shard", "num_shards", "file", "size", "header_sha256", "tensors"), what)
        if type(e["shard"]) is not int or e["shard"] != i:
            raise _Malformed(f"{what}.shard must be {i}, got {_show(e['shard'])}")
        if type(e["num_shards"]) is not int or e["num_shards"] != n:
            raise _Malformed(f"{what}.num_shards must be {n}, got {_show(e['num_shards'])}")
        file = e["file"]
        if not plain_file_name(file):
            raise _Malformed(f"{what}.file must be a plain file name inside the checkpoint directory (no '..', "
                             f"no directory separator, not absolute), got {_show(file)}")
        if file in files:
            raise _Malformed(f"{what}.file {file!r} is listed by two shards")
        files.add(file)
        size = _int(e["size"], f"{what}.size")
        _hex64(e["header_sha256"], f"{what}.header_sha256")
        if "writer" in e and not isinstance(e["writer"], dict):
            raise _Malformed(f"{what}.writer must be a JSON object, got {_show(e['writer'])}")
        tensors = e["tensors"]
        if not isinstance(tensors, dict):
            raise _Malformed(f"{what}.tensors must be a JSON object, got {type(tensors).__name__}")
        spans = []
        for name, t in tensors.items():
            tw = f"tensor {_show(name)} of {what}"
            if not name or name == "__metadata__" or len(name) > _MAX_NAME:
                raise _Malformed(f"{tw}: not a valid tensor name")
            if name in names:
                raise _Malformed(f"{tw} is also listed by shards[{names[name]}]")
            names[name] = i
            _need(t, ("dtype", "shape", "offset", "nbytes", "sha256"), tw)
            dt = t["dtype"]
            if not isinstance(dt, str) or dt not in _ST_DTYPES:
                raise _Malformed(f"{tw}: dtype must be one of {sorted(_ST_DTYPES)}, got {_show(dt)}")
            shape = t["shape"]
            if not isinstance(shape, list) or len(shape) > _MAX_RANK:
                raise _Malformed(f"{tw}: shape must be a list of at most {_MAX_RANK} dimensions, got {_show(shape)}")
            for d in shape:
                _int(d, f"{tw}: a dimension")
            offset = _int(t["offset"], f"{tw}: offset", 0, size)
            nbytes = _int(t["nbytes"], f"{tw}: nbytes", 0, size)
            # Python ints: a declared 4 PiB shape is just a big number here, compared, never allocated.
            itemsize = np.dtype(dt).itemsize
            # numpy refuses a shape whose non-zero dimensions overflow, even with a zero among them.
            if math.prod(d or 1 for d in shape) * itemsize > _MAX_BYTES:
                raise _Malformed(f"{tw}: shape {_show(shape)} is too large for any array")
            want = math.prod(shape) * itemsize
            if nbytes != want:
                raise _Malformed(f"{tw}: nbytes is {nbytes}, but dtype {dt} and shape {_show(shape)} make {want}")
            if offset + nbytes > size:
                raise _Malformed(f"{tw}: bytes [{offset}, {offset + nbytes}) lie outside the shard file's "
                                 f"{size} bytes")
            _hex64(t["sha256"], f"{tw}: sha256")
            if nbytes:
                spans.append((offset, offset + nbytes, name))
        spans.sort()
        for (_, end_a, a), (start_b, _, b) in zip(spans, spans[1:]):
            if start_b < end_a:
                raise _Malformed(f"tensors {_show(a)} and {_show(b)} of {what} overlap in the shard file")


def _read_index_bytes(path: str, prefix: str) -> bytes:
    try:
        # O_NONBLOCK: a FIFO planted under the index's name must not hang the reader.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"Checkpoint '{prefix}' not found: no index file '{path}'") from None
    except OSError as e:
        raise _os_error(e, f"Cannot read checkpoint index '{path}'") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise errors.DataLossError(None, None, f"Checkpoint index '{path}' is not a regular file")
        if st.st_size > _MAX_INDEX_BYTES:
            raise errors.DataLossError(None, None, f"Checkpoint index '{path}' is larger than {_MAX_INDEX_BYTES} "
                                                   f"bytes: not an index this actorflow writes")
        buf = bytearray(st.st_size)
        n = _read_full(fd, memoryview(buf), 0)
        return bytes(buf[:n])
    except OSError as e:
        raise _os_error(e, f"Cannot read checkpoint index '{path}'") from e
    finally:
        os.close(fd)


def _no_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise _Malformed(f"the key {_show(k)} appears twice in one object")
        d[k] = v
    return d


def load_index(prefix: str, key=None, digest: str | None = None) -> tuple[dict, str]:
    """(index, sha256 of the index file's bytes) of checkpoint `prefix`, checked: NotFoundError without
    an index; DataLossError naming the file and what is wrong when it is not valid JSON, fails its
    checksum, fails the HMAC under `key` (a key given requires an HMAC: an index written without one,
    e.g. by an older actorflow or a local session, is refused), breaks the schema (see _check_schema),
    or, with `digest`, is not the very file whose sha256 a caller checked before."""
    path = index_filename(prefix)
    data = _read_index_bytes(path, prefix)
    raw_sha = hashlib.sha256(data).hexdigest()

    def bad(why):
        return errors.DataLossError(None, None, f"Checkpoint index '{path}' is invalid: {why}")
    if digest is not None and not hmac.compare_digest(raw_sha, digest):
        raise bad("it changed after it was checked (it is not the index the restore was asked to read)")
    try:
        doc = json.loads(data, object_pairs_hook=_no_duplicates)
    except _Malformed as e:
        raise bad(str(e)) from None
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise bad("not valid JSON (corrupt or truncated)") from None
    if not isinstance(doc, dict) or doc.get("format") != INDEX_FORMAT:
        raise bad(f"not an index of format {INDEX_FORMAT!r}")
    try:
        ok = isinstance(doc.get("checksum"), str) and hmac.compare_digest(doc["checksum"], _index_checksum(doc))
    except (ValueError, TypeError, RecursionError):
        ok = False
    if not ok:
        raise bad("its checksum does not match its contents (corrupt or truncated)")
    if key:
        mac = doc.get("hmac")
        if not isinstance(mac, str):
            raise bad("it has no HMAC, and this reader requires one (the index was written without the cluster "
                      "token, by an older actorflow, or by someone without the token)")
        if not hmac.compare_digest(mac, _index_hmac(doc, key)):
            raise bad("its HMAC does not match under this cluster's token (written by another cluster, or forged)")
    try:
        _check_schema(doc)
    except _Malformed as e:
        raise bad(str(e)) from None
    return doc, raw_sha


def read_index(prefix: str, key=None, digest: str | None = None) -> dict:
    """The parsed and validated index of checkpoint `prefix` (see load_index for the checks)."""
    return load_index(prefix, key, digest)[0]


class _Shards:
    """Open shard files of one checkpoint, checked against the index's sizes on first use."""

    def __init__(self, prefix: str):
        self.dir = os.path.dirname(prefix)
        self.prefix = prefix
        self.fds: dict[str, int] = {}

    def fd(self, entry: dict) -> int:
        name = entry["file"]
        fd = self.fds.get(name)
        if fd is not None:
            return fd
        path = self.path(entry)
        if not plain_file_name(name):     # (the schema checked this already; a second look costs nothing)
            raise errors.DataLossError(None, None, f"Checkpoint '{self.prefix}': shard file name {_show(name)} is "
                                                   f"not a plain file name")
        real = os.path.realpath(path)
        if os.path.dirname(real) != os.path.realpath(self.dir or "."):
            raise errors.DataLossError(None, None, f"Checkpoint '{self.prefix}': shard file '{path}' resolves "
                                                   f"outside the checkpoint directory")
        try:
            fd = os.open(real, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            raise errors.DataLossError(None, None, f"Checkpoint '{self.prefix}': shard file '{path}' is missing") from None
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise errors.DataLossError(None, None, f"Checkpoint '{self.prefix}': shard file '{path}' was "
                                                       f"replaced by a symbolic link") from None
            raise _os_error(e, f"Cannot open checkpoint shard '{path}'") from e
        self.fds[name] = fd
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise errors.DataLossError(None, None, f"Checkpoint '{self.prefix}': shard file '{path}' is not a "
                                                   f"regular file")
        if st.st_size != entry["size"]:
            # Which way, not by how much: the message may travel to whoever wrote the index.
            how = "truncated (shorter than" if st.st_size < entry["size"] else "corrupt (longer than"
            raise errors.DataLossError(None, None, f"Checkpoint '{self.prefix}': shard file '{path}' is {how} the "
                                                   f"{entry['size']} bytes the index lists)")
        return fd

    def path(self, entry: dict) -> str:
        return os.path.join(self.dir, entry["file"])

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


def _mismatch(prefix, shards, entry, name) -> errors.DataLossError:
    return errors.DataLossError(None, None, f"Checkpoint '{prefix}': checksum mismatch for tensor '{name}' in shard "
                                            f"file '{shards.path(entry)}': the file is corrupt")


def _locations(prefix: str, index: dict) -> dict:
    where = {}
    for entry in index["shards"]:
        for name, t in entry["tensors"].items():
            where[name] = (entry, t)
    return where


def _shape_ok(want, got) -> bool:
    return want is None or (len(want) == len(got) and all(w in (-1, None) or w == g for w, g in zip(want, got)))


def read_tensors(prefix: str, names, dtypes=None, shapes=None, reshape=False, key=None, digest=None) -> list:
    """Reads tensors `names` of checkpoint `prefix`, verifying each one's sha256 against the index.

    `dtypes` and `shapes` (entries may be None; unknown dims -1) are what the caller expects:
    InvalidArgumentError naming the tensor when the checkpoint disagrees (with `reshape`, only the
    element counts must agree, and the tensor is reshaped). NotFoundError for a name not in the
    checkpoint; DataLossError for an invalid index (see load_index; `key` and `digest` are passed on)
    or a missing, truncated or corrupt shard file. No buffer is allocated before its shard file is
    open and of the size the index lists, so a declared shape never allocates more than the file holds.
    """
    index = read_index(prefix, key, digest)
    where = _locations(prefix, index)
    dtypes = dtypes or [None] * len(names)
    shapes = shapes or [None] * len(names)
    plan = []
    locs = []
    for name in names:
        loc = where.get(name)
        if loc is None:
            raise errors.NotFoundError(None, None, f"Key '{name}' not found in checkpoint '{prefix}'")
        locs.append(loc)
    shards = _Shards(prefix)
    try:
        # Open (and size-check) every file up front, on this thread, so that errors come in a fixed order,
        # a file that is not what the index says is reported as such before any dtype or shape is
        # compared, and no buffer is allocated for a tensor whose file does not hold it.
        fds = [shards.fd(entry) for entry, _ in locs]
        for name, (entry, t), want_dt, want_shape in zip(names, locs, dtypes, shapes):
            plan.append((name, entry, t, *_restore_shape(prefix, name, t, want_dt, want_shape, reshape)))

        def load(i):
            name, entry, t, shape, out_shape = plan[i]
            a = np.empty(shape, dtype=np.dtype(t["dtype"]).newbyteorder("<"))
            buf = _bytes_of(a)
            n = _read_full(fds[i], buf, t["offset"])
            if n != len(buf):
                raise errors.DataLossError(None, None, f"Checkpoint '{prefix}': tensor '{name}' in shard file "
                                                       f"'{shards.path(entry)}' is truncated ({n} of {len(buf)} bytes)")
            if not hmac.compare_digest(hashlib.sha256(buf).hexdigest(), t["sha256"]):
                raise _mismatch(prefix, shards, entry, name)
            if not a.dtype.isnative:
                a = a.astype(a.dtype.newbyteorder("="))
            return a.reshape(out_shape)
        return _run([lambda i=i: load(i) for i in range(len(plan))], sum(p[2]["nbytes"] for p in plan))
    except OSError as e:
        raise _os_error(e, f"Cannot read checkpoint '{prefix}'") from e
    finally:
        shards.close()


def _restore_shape(prefix, name, t, want_dt, want_shape, reshape) -> tuple:
    """(stored shape, shape to return) of tensor `name`; InvalidArgumentError when the caller's dtype
    or shape disagrees with the checkpoint's."""
    shape = tuple(t["shape"])
    if want_dt is not None and np.dtype(want_dt) != np.dtype(t["dtype"]):
        raise errors.InvalidArgumentError(
            None, None, f"Cannot restore variable '{name}' from checkpoint '{prefix}': the variable has dtype "
                        f"{np.dtype(want_dt).name}, the checkpoint holds {t['dtype']}")
    out_shape = shape
    if want_shape is not None and not _shape_ok(want_shape, shape):
        known = all(d not in (-1, None) for d in want_shape)
        if not (reshape and known and math.prod(want_shape) == math.prod(shape)):
            raise errors.InvalidArgumentError(
                None, None, f"Cannot restore variable '{name}' from checkpoint '{prefix}': the variable has shape "
                            f"{[None if d == -1 else d for d in want_shape]}, the checkpoint holds shape {list(shape)}")
        out_shape = tuple(want_shape)
    return shape, out_shape


def check_shard_files(prefix: str, index: dict) -> None:
    """Checks, without reading their data, that every shard file of checkpoint `prefix` lies in its
    directory, is a regular file, and has the size `index` lists: DataLossError naming it otherwise."""
    shards = _Shards(prefix)
    try:
        for entry in index["shards"]:
            shards.fd(entry)
    except OSError as e:
        raise _os_error(e, f"Cannot read checkpoint '{prefix}'") from e
    finally:
        shards.close()


def verify_checkpoint(prefix: str, key=None) -> dict:
    """Checks that checkpoint `prefix` is complete and intact: a valid index (authenticated under `key`
    when given, see load_index), every shard file present with its size, header checksum and tensor
    checksums. Returns the index; raises NotFoundError (no index) or DataLossError (naming the file
    and tensor, and what is wrong)."""
    index = read_index(prefix, key)
    shards = _Shards(prefix)
    try:
        jobs = []
        total = 0
        for entry in index["shards"]:
            fd = shards.fd(entry)
            first = min((t["offset"] for t in entry["tensors"].values()), default=entry["size"])
            jobs.append(lambda fd=fd, entry=entry, first=first: _check_range(prefix, shards, entry, fd, 0, first,
                                                                            entry["header_sha256"], "<header>"))
            for name, t in entry["tensors"].items():
                jobs.append(lambda fd=fd, entry=entry, name=name, t=t: _check_range(
                    prefix, shards, entry, fd, t["offset"], t["nbytes"], t["sha256"], name))
                total += t["nbytes"]
        _run(jobs, total)
    except OSError as e:
        raise _os_error(e, f"Cannot read checkpoint '{prefix}'") from e
    finally:
        shards.close()
    return index


def _check_range(prefix, shards, entry, fd, offset, nbytes, want, name) -> None:
    h = hashlib.sha256()
    buf = memoryview(bytearray(min(nbytes, _CHUNK)))
    pos, left = offset, nbytes
    while left:
        n = _read_full(fd, buf[:min(left, len(buf))], pos)
        if n == 0:
            raise errors.DataLossError(None, None, f"Checkpoint '{prefix}': tensor '{name}' in shard file "
                                                   f"'{shards.path(entry)}' is truncated")
        h.update(buf[:n])
        pos += n
        left -= n
    if not hmac.compare_digest(h.hexdigest(), want):
        raise _mismatch(prefix, shards, entry, name)


# -- leftovers of interrupted saves ----------------------------------------------------------------------------

def remove_stale_temps(directory: str, min_age: float | None = None) -> list:
    """Removes the temporary files (`*.tmp-<pid>-<hex>`) that interrupted saves left in `directory`;
    returns their paths.

    A writer holds an exclusive flock on its temporary file from creation to rename, and the kernel
    drops it when the writer dies (kill -9 included), so a temporary file nobody holds a lock on is
    a leftover, whatever host wrote it (NFS maps flock onto its byte-range locks). A file younger than
    `min_age` seconds (60) is left alone all the same: it may be between its creation and its lock.
    Where the file system has no locks, only files untouched for an hour are taken as leftovers (a
    live writer touches its file with every write). Unlike liveness by pid, this holds for writers
    on other hosts of a shared checkpoint directory, and for pids reused since.
    """
    min_age = TMP_MIN_AGE if min_age is None else min_age
    removed = []
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return removed
    now = clock.time()
    for name in names:
        if not _TMP_RE.search(name):
            continue
        path = os.path.join(directory, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        age = now - st.st_mtime
        if not stat.S_ISREG(st.st_mode) or age < min_age:
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            try:
                _flock(fd)
            except BlockingIOError:
                continue                         # a live writer holds it
            except OSError:
                if age < _TMP_MIN_AGE_UNLOCKED:
                    continue
            os.unlink(path)
            removed.append(path)
            log.info("removed %s, left by an interrupted save (%.0f s old)", path, age)
        except OSError as e:
            log.warning("could not remove the leftover temporary file %s: %s", path, e)
        finally:
            os.close(fd)
    return removed


# -- kernels -----------------------------------------------------------------------------------------------

def encode_restore_path(prefix: str, digest: str | None = None) -> bytes:
    """The bytes a RestoreShard reads as its path input: the prefix, and optionally a NUL and the sha256
    of the index file the caller checked (no path holds a NUL, so the two never mix)."""
    return prefix.encode("utf-8") + (b"\0" + digest.encode("ascii") if digest else b"")


def decode_restore_path(op: str, path, digest_allowed: bool = False) -> tuple[str, str | None]:
    """The (prefix, digest or None) a checkpoint kernel `op` reads from its path input (uint8 bytes)."""
    raw = bytes(np.ascontiguousarray(path, dtype=np.uint8).reshape(-1))
    raw, sep, digest = raw.partition(b"\0")
    try:
        s = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise errors.InvalidArgumentError(None, None, f"{op}: the checkpoint path is not valid UTF-8: {e}") from None
    if not s:
        raise errors.InvalidArgumentError(None, None, f"{op}: the checkpoint path is empty")
    if sep and not (digest_allowed and _HEX64.fullmatch(digest.decode("ascii", "replace"))):
        raise errors.InvalidArgumentError(None, None, f"{op}: the checkpoint path holds a NUL byte")
    return s, (digest.decode("ascii") if sep else None)
