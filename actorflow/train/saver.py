"""Checkpoints of variables: `Saver`, `latest_checkpoint`, `list_variables` (tf.compat.v1.train.*).

Save and Restore are graph ops (SaveShard, RestoreShard; see actorflow/graph/ops/io_ops.py). A
sharded Saver groups the variables by the task that holds them and gives each group its own
SaveShard and RestoreShard placed on that task, so every parameter server writes and reads its own
shard file, in parallel, without moving a variable over the network. The client then writes the
index, last, so a checkpoint either has a valid index listing every shard with its checksums or is
not a checkpoint at all. The "checkpoint" state file (TF's text format) lists the checkpoints the
Saver keeps, newest last.

As in TF, the checkpoint directory must be one file system seen by the client and every task that
holds variables (a local disk for a local cluster, a shared mount otherwise).

A checkpoint is untrusted input until checked (see actorflow/checkpoint_format.py): its index is
validated field by field, its shard files must lie in its directory, and in a distributed session
the index carries an HMAC keyed by the cluster token, which restore and the recovery path
(`latest_checkpoint`, `get_checkpoint_state`, MonitoredTrainingSession) require. Without a cluster
token the index is only checksummed: that detects corruption (integrity), not forgery (authenticity).
"""
from __future__ import annotations

import glob
import json
import logging
import os
import re
from dataclasses import dataclass, field

import numpy as np

from actorflow import checkpoint_format as ckpt_io
from actorflow import clock, errors
from actorflow.graph import dtypes
from actorflow.graph.device_spec import DeviceSpec
from actorflow.graph.graph import GraphKeys, Tensor, get_default_graph
from actorflow.graph.ops import io_ops, state_ops
from actorflow.graph.ops.constant import group, placeholder
from actorflow.graph.variables import Variable

__all__ = ["Saver", "latest_checkpoint", "list_variables", "load_variable", "checkpoint_exists",
           "get_checkpoint_state", "update_checkpoint_state", "CheckpointState", "NewCheckpointReader",
           "CheckpointReader", "generate_checkpoint_state_proto"]

log = logging.getLogger(__name__)

_STATE_FILE = "checkpoint"


# -- the "checkpoint" state file ---------------------------------------------------------------------------

@dataclass
class CheckpointState:
    """The contents of a "checkpoint" state file (TF's CheckpointState proto)."""
    model_checkpoint_path: str = ""
    all_model_checkpoint_paths: list = field(default_factory=list)
    all_model_checkpoint_timestamps: list = field(default_factory=list)
    last_preserved_timestamp: float = 0.0


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


_ESCAPE = re.compile(rb"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|(.))", re.S)
_SIMPLE = {b"n": b"\n", b"t": b"\t", b"r": b"\r", b"a": b"\a", b"b": b"\b", b"f": b"\f", b"v": b"\v"}


def _unquote(s: str) -> str:
    s = s.strip()
    if len(s) < 2 or s[0] != s[-1] or s[0] not in "\"'":
        raise ValueError(f"expected a quoted string, got {s!r}")

    def sub(m):
        if m.group(1):
            return bytes([int(m.group(1), 8) & 0xFF])
        if m.group(2):
            return bytes([int(m.group(2), 16)])
        c = m.group(3)
        return _SIMPLE.get(c, c)
    return _ESCAPE.sub(sub, s[1:-1].encode()).decode("utf-8")


def _parse_state(text: str) -> CheckpointState:
    st = CheckpointState()
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"malformed line {line!r}")
        key = key.strip()
        if key == "model_checkpoint_path":
            st.model_checkpoint_path = _unquote(value)
        elif key == "all_model_checkpoint_paths":
            st.all_model_checkpoint_paths.append(_unquote(value))
        elif key == "all_model_checkpoint_timestamps":
            st.all_model_checkpoint_timestamps.append(float(value))
        elif key == "last_preserved_timestamp":
            st.last_preserved_timestamp = float(value)
    return st


def _format_state(st: CheckpointState) -> str:
    lines = [f"model_checkpoint_path: {_quote(st.model_checkpoint_path)}"]
    lines += [f"all_model_checkpoint_paths: {_quote(p)}" for p in st.all_model_checkpoint_paths]
    lines += [f"all_model_checkpoint_timestamps: {t!r}" for t in st.all_model_checkpoint_timestamps]
    lines.append(f"last_preserved_timestamp: {st.last_preserved_timestamp!r}")
    return "\n".join(lines) + "\n"


def _read_state(checkpoint_dir, latest_filename):
    """The state file's CheckpointState with relative paths joined to the directory, or None."""
    path = os.path.join(checkpoint_dir, latest_filename or _STATE_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            st = _parse_state(f.read())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, UnicodeDecodeError) as e:
        log.warning("ignoring unreadable checkpoint state file %s: %s", path, e)
        return None
    if not st.model_checkpoint_path:
        return None

    def absolute(p):
        return p if os.path.isabs(p) else os.path.join(checkpoint_dir, p)
    st.model_checkpoint_path = absolute(st.model_checkpoint_path)
    st.all_model_checkpoint_paths = [absolute(p) for p in st.all_model_checkpoint_paths]
    return st


def _checked_state(checkpoint_dir, latest_filename, key):
    """(state, the newest good checkpoint it lists or None, the paths tried)."""
    st = _read_state(checkpoint_dir, latest_filename)
    tried: set = set()
    if st is None:
        return None, None, tried
    candidates = [st.model_checkpoint_path] + [p for p in reversed(st.all_model_checkpoint_paths)
                                               if p != st.model_checkpoint_path]
    for p in candidates:
        tried.add(os.path.abspath(p))
        if _is_good(p, key):
            if p != st.model_checkpoint_path:
                log.warning("the newest checkpoint listed in %s, %s, is not good; falling back to %s",
                            checkpoint_dir, st.model_checkpoint_path, p)
            return st, p, tried
    return st, None, tried


def get_checkpoint_state(checkpoint_dir, latest_filename=None, *, key=None):
    """The CheckpointState of the "checkpoint" file in `checkpoint_dir`, with relative paths joined to
    the directory, or None when there is none (tf.compat.v1.train.get_checkpoint_state). An unreadable
    state file is logged and treated as missing.

    Unlike TF, `model_checkpoint_path` is the newest listed checkpoint that is good (see
    latest_checkpoint; `key` as there): a malformed, corrupt or unauthenticated newer one is skipped
    with a warning naming it and why, so the usual `saver.restore(sess, ckpt.model_checkpoint_path)`
    falls back to the previous good checkpoint. When no listed checkpoint is good, the state is
    returned as the file has it (and restoring its newest raises the reason).
    `all_model_checkpoint_paths` lists every checkpoint of the file, good or not (the Saver still
    deletes them in turn).
    """
    st, good, _ = _checked_state(os.fspath(checkpoint_dir), latest_filename, key)
    if st is not None and good is not None:
        st.model_checkpoint_path = good
    return st


def _state_for(save_dir, model_checkpoint_path, all_model_checkpoint_paths, all_model_checkpoint_timestamps,
               last_preserved_timestamp, save_relative_paths) -> CheckpointState:
    paths = list(all_model_checkpoint_paths or [])
    if not paths or paths[-1] != model_checkpoint_path:
        paths = [p for p in paths if p != model_checkpoint_path] + [model_checkpoint_path]

    def rel(p):
        if save_relative_paths and os.path.isabs(p):
            r = os.path.relpath(p, save_dir)
            return p if r.startswith("..") else r
        if save_relative_paths and os.path.dirname(os.path.abspath(p)) == os.path.abspath(save_dir):
            return os.path.basename(p)
        return p
    return CheckpointState(rel(model_checkpoint_path), [rel(p) for p in paths],
                           list(all_model_checkpoint_timestamps or []), float(last_preserved_timestamp or 0.0))


def generate_checkpoint_state_proto(save_dir, model_checkpoint_path, all_model_checkpoint_paths=None,
                                    all_model_checkpoint_timestamps=None, last_preserved_timestamp=None):
    """A CheckpointState for these arguments, as TF builds it: `model_checkpoint_path` listed last;
    when `save_dir` is relative, relative paths are made relative to it
    (tf.compat.v1.train.generate_checkpoint_state_proto; a dataclass, not TF's proto class)."""
    paths = list(all_model_checkpoint_paths or [])
    if not paths or paths[-1] != model_checkpoint_path:
        paths.append(model_checkpoint_path)
    stamps = list(all_model_checkpoint_timestamps or [])
    if stamps and len(stamps) != len(paths):
        raise ValueError(f"generate_checkpoint_state_proto: {len(stamps)} timestamps for {len(paths)} checkpoints")
    if not os.path.isabs(save_dir):
        def rel(p):
            return p if os.path.isabs(p) else os.path.relpath(p, save_dir)
        model_checkpoint_path, paths = rel(model_checkpoint_path), [rel(p) for p in paths]
    return CheckpointState(model_checkpoint_path, paths, stamps, float(last_preserved_timestamp or 0.0))


def update_checkpoint_state(save_dir, model_checkpoint_path, all_model_checkpoint_paths=None, latest_filename=None,
                            all_model_checkpoint_timestamps=None, last_preserved_timestamp=None,
                            save_relative_paths=True):
    """Rewrites the "checkpoint" state file of `save_dir` atomically and durably
    (tf.compat.v1.train.update_checkpoint_state). `model_checkpoint_path` is the newest checkpoint;
    with `save_relative_paths`, paths inside `save_dir` are stored relative to it."""
    st = _state_for(save_dir, model_checkpoint_path, all_model_checkpoint_paths, all_model_checkpoint_timestamps,
                    last_preserved_timestamp, save_relative_paths)
    ckpt_io.atomic_write(os.path.join(save_dir, latest_filename or _STATE_FILE), _format_state(st).encode())


# -- checkpoints on disk --------------------------------------------------------------------------------

def _prefix_of(path: str) -> str:
    path = os.fspath(path)
    return path[:-len(".index")] if path.endswith(".index") else path


def checkpoint_exists(checkpoint_prefix) -> bool:
    """Whether a checkpoint with this prefix has an index, i.e. was completely written
    (tf.compat.v1.train.checkpoint_exists). It does not verify checksums: see latest_checkpoint."""
    # exists, not isfile: whatever sits under the index's name is the reader's to refuse (DataLossError).
    path = ckpt_io.index_filename(_prefix_of(checkpoint_prefix))
    return os.path.exists(path) and not os.path.isdir(path)


def _is_good(prefix: str, key=None) -> bool:
    if not checkpoint_exists(prefix):
        log.warning("skipping checkpoint %s: it has no index (incomplete or deleted)", prefix)
        return False
    try:
        ckpt_io.verify_checkpoint(prefix, key)
        return True
    except errors.OpError as e:
        log.warning("skipping checkpoint %s: %s", prefix, e.message)
        return False


def _indexed_prefixes(checkpoint_dir: str) -> list:
    """Every checkpoint prefix with an index in the directory, newest first."""
    found = []
    for p in glob.glob(os.path.join(glob.escape(checkpoint_dir), "*.index")):
        try:
            found.append((os.stat(p).st_mtime_ns, p[:-len(".index")]))
        except OSError:
            continue
    return [p for _, p in sorted(found, reverse=True)]


def latest_checkpoint(checkpoint_dir, latest_filename=None, *, key=None):
    """The prefix of the newest good checkpoint in `checkpoint_dir`, or None
    (tf.compat.v1.train.latest_checkpoint).

    Unlike TF, a checkpoint counts only when it is complete and intact: its index is valid (every
    field checked, shard files inside the directory) and every shard file is present with the size
    and checksums the index lists. With `key` (the cluster token, str or bytes; see
    `Saver.checkpoint_key_for`) its index must also carry a valid HMAC under that key. An incomplete
    checkpoint (a crash in the middle of a save), a corrupt one (truncated, bit-flipped), a malformed
    or a forged one is skipped, with a warning naming it and why, in favour of the previous good one
    the state file lists; when the state file is missing or lists no good checkpoint, the directory's
    other indexed checkpoints are tried, newest first.
    """
    checkpoint_dir = os.fspath(checkpoint_dir)
    _, good, tried = _checked_state(checkpoint_dir, latest_filename, key)
    if good is not None:
        return good
    for p in _indexed_prefixes(checkpoint_dir):
        if os.path.abspath(p) not in tried and _is_good(p, key):
            return p
    return None


def _resolve(ckpt_dir_or_file, key=None) -> str:
    path = os.fspath(ckpt_dir_or_file)
    if os.path.isdir(path):
        p = latest_checkpoint(path, key=key)
        if p is None:
            raise ValueError(f"Couldn't find 'checkpoint' file or checkpoints in given directory {path}")
        return p
    return _prefix_of(path)


def list_variables(ckpt_dir_or_file, *, key=None):
    """[(name, shape)] of every tensor in a checkpoint, sorted by name; a directory means its latest
    good checkpoint (tf.compat.v1.train.list_variables). DataLossError for a malformed index, or one
    without a valid HMAC under `key` when a key is given."""
    prefix = _resolve(ckpt_dir_or_file, key)
    index = ckpt_io.read_index(prefix, key)
    ckpt_io.check_shard_files(prefix, index)
    out = []
    for entry in index["shards"]:
        for name, t in entry["tensors"].items():
            out.append((name, list(t["shape"])))
    return sorted(out)


def load_variable(ckpt_dir_or_file, name, *, key=None):
    """The value of tensor `name` in a checkpoint, as a numpy array, checksum verified
    (tf.compat.v1.train.load_variable). DataLossError for a malformed or corrupt checkpoint (never a
    bare MemoryError: a declared shape is checked against the shard file before anything is
    allocated), or one without a valid HMAC under `key` when a key is given."""
    return ckpt_io.read_tensors(_resolve(ckpt_dir_or_file, key), [name], key=key)[0]


class CheckpointReader:
    """Reads the tensors of one checkpoint (TF's CheckpointReader, from NewCheckpointReader)."""

    def __init__(self, prefix: str, key=None):
        self._prefix = prefix
        self._key = key
        self._where = {}
        index = ckpt_io.read_index(prefix, key)
        ckpt_io.check_shard_files(prefix, index)
        for entry in index["shards"]:
            for name, t in entry["tensors"].items():
                self._where[name] = t

    def has_tensor(self, name) -> bool:
        """Whether the checkpoint holds a tensor `name`."""
        return name in self._where

    def get_tensor(self, name):
        """The value of tensor `name`, checksum verified; NotFoundError when the checkpoint lacks it."""
        return ckpt_io.read_tensors(self._prefix, [name], key=self._key)[0]

    def get_variable_to_shape_map(self) -> dict:
        """{tensor name: shape as a list of ints}."""
        return {n: list(t["shape"]) for n, t in self._where.items()}

    def get_variable_to_dtype_map(self) -> dict:
        """{tensor name: af dtype}."""
        return {n: dtypes.as_dtype(np.dtype(t["dtype"])) for n, t in self._where.items()}

    def debug_string(self) -> bytes:
        """One line per tensor, sorted by name: name, dtype, shape (TF prints its own format)."""
        return "".join(f"{n} ({t['dtype']}) {t['shape']}\n" for n, t in sorted(self._where.items())).encode()


def NewCheckpointReader(filepattern, *, key=None):  # noqa: N802 - TF's name
    """A CheckpointReader of the checkpoint `filepattern` (a prefix, or a directory meaning its latest
    good checkpoint) (tf.compat.v1.train.NewCheckpointReader). NotFoundError when there is no index,
    DataLossError when it is malformed or, with `key`, not authenticated."""
    path = os.fspath(filepattern)
    if os.path.isdir(path):
        found = latest_checkpoint(path, key=key)
        if found is None:
            raise errors.NotFoundError(None, None, f"Unsuccessful TensorSliceReader constructor: no checkpoint "
                                                   f"in directory {path}")
        path = found
    return CheckpointReader(_prefix_of(path), key)


def _delete_checkpoint(prefix: str) -> None:
    # The index goes first: from then on the checkpoint is incomplete, never half-deleted and "good".
    esc = glob.escape(prefix)
    for p in [ckpt_io.index_filename(prefix)] + glob.glob(esc + ".data-?????-of-?????") + \
            glob.glob(esc + ".data-?????-of-?????.tmp-*") + [prefix + ".meta"]:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass
        except OSError as e:
            log.warning("could not delete old checkpoint file %s: %s", p, e)


def _encode_path(path: str, digest: str | None = None) -> np.ndarray:
    return np.frombuffer(ckpt_io.encode_restore_path(path, digest), dtype=np.uint8)


def _cluster_token(sess):
    """The cluster token of a distributed session (None for a local one): its master's, which is the
    target's `?token=`, $ACTORFLOW_TOKEN or the user's cookie. The train layer sits above the cluster layer, so it may
    ask the session's cluster backend directly."""
    seen = 0
    while hasattr(sess, "_sess") and not hasattr(sess, "sess_str") and seen < 8:
        sess, seen = sess._sess, seen + 1      # a MonitoredSession and its wrappers
    target = getattr(sess, "sess_str", "") or ""
    if not target:
        return None
    token = getattr(getattr(sess, "_backend", None), "token", None)
    if not token:
        from actorflow.cluster.cookie import user_cookie
        from actorflow.cluster.spec import parse_target
        token = parse_target(target)[1] or os.environ.get("ACTORFLOW_TOKEN") or user_cookie()
    return token or None


# -- Saver ------------------------------------------------------------------------------------------------

def _saveables(var_list):
    """[(checkpoint key, variable ref tensor)] from a Saver's var_list."""
    if isinstance(var_list, dict):
        items = list(var_list.items())
    else:
        items = []
        for v in var_list:
            if hasattr(v, "_get_variable_list"):
                # A PartitionedVariable: each part is saved under its own name ("emb/part_0", ...), so
                # restoring needs the same partitioning (TF would also re-slice).
                items.extend((p.op.name, p) for p in v._get_variable_list())
            elif isinstance(v, Variable):
                items.append((v.op.name, v))
            elif isinstance(v, Tensor) and v.op.op_def.resource == "variable":
                items.append((v.op.name, v))
            else:
                raise TypeError(f"Saver: variable to save is not a Variable: {v!r}")
    out = []
    keys_of: dict = {}    # ref -> key
    keys: set = set()
    for key, v in items:
        if not isinstance(key, str) or not key:
            raise TypeError(f"Saver: checkpoint keys must be non-empty strings, got {key!r}")
        if isinstance(v, Variable):
            ref = v._ref()
        elif isinstance(v, Tensor) and v.op.op_def.resource == "variable":
            ref = v
        else:
            raise TypeError(f"Saver: the value for key '{key}' is not a Variable: {v!r}")
        if key in keys:
            raise ValueError(f"At least two variables have the same name: {key}")
        if ref in keys_of:
            raise ValueError(f"Saver: variable '{ref.op.name}' is listed twice (as '{keys_of[ref]}' and '{key}')")
        keys_of[ref] = key
        keys.add(key)
        out.append((key, ref))
    return out


def _task_device(ref: Tensor) -> str:
    """The CPU of the task holding a variable ('' when the variable is not pinned to a task):
    its checkpoint shard is read and written there."""
    spec = DeviceSpec.from_string(ref.op.device)
    if spec.job is None and spec.replica is None and spec.task is None:
        return ""
    return DeviceSpec(spec.job, spec.replica, spec.task, "CPU", 0).to_string()


class Saver:
    """Saves and restores variables to and from checkpoints (tf.compat.v1.train.Saver).

    The graph pieces (one SaveShard and one RestoreShard per task with `sharded=True`, or one of each
    with `sharded=False`, the Assigns that restore, and the path placeholder) are built once, here.
    Differences from TF: checkpoints are safetensors shards plus a JSON index with sha256 checksums;
    `save` writes the index last, atomically, and `restore` raises DataLossError on a checksum
    mismatch or a malformed index; `keep_checkpoint_every_n_hours=None` keeps no extra checkpoints.
    `write_version` is accepted and ignored (there is one format); `saver_def` and `builder` are not
    supported.

    `checkpoint_key` (not in TF) is the secret that authenticates the index (HMAC-SHA256): by default
    the cluster token of the session that saves or restores (see `checkpoint_key_for`), none for a
    local session; a str or bytes to use that secret instead (e.g. one that outlives the cluster's
    token); False for none at all. With a key, save writes an HMAC, and restore refuses (DataLossError)
    an index without a valid one: a checkpoint written by a local session, by an older actorflow
    (index version 1) or by another cluster. To restore such a checkpoint in a cluster deliberately,
    use a Saver with `checkpoint_key=False`. Without a key the index is checksummed only: integrity
    (corruption is detected), not authenticity (whoever can write the directory can forge one).
    """

    def __init__(self, var_list=None, reshape=False, sharded=True, max_to_keep=5, keep_checkpoint_every_n_hours=None,
                 name=None, restore_sequentially=False, saver_def=None, builder=None, defer_build=False,
                 allow_empty=False, write_version=2, pad_step_number=False, save_relative_paths=True, filename=None,
                 checkpoint_key=None):
        if saver_def is not None or builder is not None:
            raise NotImplementedError("Saver: saver_def and builder are not supported")
        if not (checkpoint_key is None or checkpoint_key is False or
                (isinstance(checkpoint_key, (str, bytes)) and checkpoint_key)):
            raise TypeError(f"Saver: checkpoint_key must be None, False or a non-empty str or bytes, "
                            f"got {type(checkpoint_key).__name__}")
        self._checkpoint_key = checkpoint_key
        self._reshape = bool(reshape)
        self._sharded = bool(sharded)
        self._max_to_keep = max_to_keep
        self._keep_hours = keep_checkpoint_every_n_hours
        self._next_keep_time = None if not keep_checkpoint_every_n_hours else \
            clock.time() + keep_checkpoint_every_n_hours * 3600
        self._name = name
        self._restore_sequentially = bool(restore_sequentially)
        self._allow_empty = bool(allow_empty)
        self._pad_step_number = bool(pad_step_number)
        self._save_relative_paths = bool(save_relative_paths)
        self._filename = filename
        self._var_list = var_list
        self._last_checkpoints: list[tuple[str, float]] = []
        self._to_delete: list[tuple[str, float]] = []
        self._built = False
        self._empty = False
        self._graph = None
        self._meta = None           # (graph version, packed meta graph): rewritten only when the graph changed
        if not defer_build:
            self.build()

    # -- graph ---------------------------------------------------------------------------------------------
    def build(self) -> None:
        """Builds the save and restore ops (done by the constructor unless `defer_build`)."""
        if self._built:
            return
        g = get_default_graph()
        var_list = self._var_list
        if var_list is None:
            var_list = g.get_collection(GraphKeys.GLOBAL_VARIABLES)
        items = _saveables(var_list)
        self._graph = g
        self._built = True
        if not items:
            if not self._allow_empty:
                raise ValueError("No variables to save")
            self._empty = True
            return
        groups: dict[str, list] = {}
        for key, ref in items:
            groups.setdefault(_task_device(ref) if self._sharded else "", []).append((key, ref))
        ordered = sorted(groups.items())
        n = len(ordered)
        with g.name_scope(self._name or "save"), g.control_dependencies(None), g.device(None), \
                g.colocate_with(None, ignore_existing=True):
            self._path = placeholder(dtypes.uint8, [None], name="filename")
            self._save_outputs = []
            for i, (dev, entries) in enumerate(ordered):
                with g.device(dev or None):
                    self._save_outputs.append(io_ops.save_shard(
                        self._path, [ref for _, ref in entries], [k for k, _ in entries], shard=i, num_shards=n,
                        name="save_shard"))
            restores = []
            for dev, entries in ordered:
                deps = [restores[-1]] if self._restore_sequentially and restores else []
                with g.device(dev or None), g.control_dependencies(deps):
                    outs = io_ops.restore_shard(self._path, [k for k, _ in entries], [r.dtype for _, r in entries],
                                                [r.shape for _, r in entries], reshape=self._reshape,
                                                name="restore_shard")
                outs = outs if isinstance(outs, tuple) else (outs,)
                assigns = []
                for (_, ref), value in zip(entries, outs):
                    with g.colocate_with(ref.op):
                        assigns.append(state_ops.Assign(ref, value, validate_shape=ref.shape.is_fully_defined(),
                                                        use_locking=True, name="restore_assign").op)
                with g.device(dev or None):
                    restores.append(group(*assigns, name="restore_shard_done"))
            self._restore_op = group(*restores, name="restore_all")
        self._keys = [k for k, _ in items]

    def checkpoint_key_for(self, sess):
        """The secret that authenticates this Saver's checkpoints in `sess` (None: checksum only):
        `checkpoint_key` when given, else the cluster token of a distributed session."""
        if self._checkpoint_key is False:
            return None
        if self._checkpoint_key is not None:
            return self._checkpoint_key
        return _cluster_token(sess)

    @property
    def last_checkpoints(self) -> list:
        """The checkpoints this Saver keeps, oldest first."""
        return [p for p, _ in self._last_checkpoints]

    def set_last_checkpoints(self, last_checkpoints) -> None:
        """Replaces the list of kept checkpoints (tf.compat.v1.train.Saver.set_last_checkpoints)."""
        self._last_checkpoints = [(p, 0.0) for p in last_checkpoints]

    def set_last_checkpoints_with_time(self, last_checkpoints_with_time) -> None:
        self._last_checkpoints = [(p, float(t)) for p, t in last_checkpoints_with_time]

    def recover_last_checkpoints(self, checkpoint_paths) -> None:
        """Adopts the existing ones of `checkpoint_paths` (oldest first), e.g. a restarted chief's
        previous checkpoints, so that max_to_keep keeps deleting them in turn."""
        out = []
        for p in checkpoint_paths:
            try:
                out.append((p, os.stat(ckpt_io.index_filename(p)).st_mtime))
            except OSError:
                continue
        self._last_checkpoints = out

    # -- save ---------------------------------------------------------------------------------------------
    def save(self, sess, save_path=None, global_step=None, latest_filename=None, meta_graph_suffix="meta",
             write_meta_graph=True, write_state=True, strip_default_attrs=False, save_debug_info=False):
        """Saves the variables; returns the checkpoint prefix (`save_path-global_step`)
        (tf.compat.v1.train.Saver.save).

        Each shard is written by its task to a temporary file, fsynced and renamed; then the index is
        written, last, and atomically; then the state file. Old checkpoints beyond `max_to_keep` are
        deleted after that. If any shard fails, the step fails, no index is written, and the previous
        checkpoint stays the latest. `write_meta_graph` (on by default, as in TF) writes the meta graph
        beside it as `<prefix>.meta`, which `import_meta_graph` reads back with its variables. The
        index carries an HMAC under `checkpoint_key_for(sess)` when there is one. Temporary files
        that interrupted saves left in the directory are removed first (only those no live writer
        holds: see actorflow.checkpoint_format.remove_stale_temps).
        """
        if not self._built:
            self.build()
        if self._empty:
            return None
        save_path = save_path if save_path is not None else self._filename
        if save_path is None:
            raise ValueError("Saver.save needs a save_path")
        save_path = os.fspath(save_path)
        step = None
        if global_step is not None:
            step = int(global_step) if isinstance(global_step, (int, np.integer)) else int(sess.run(global_step))
            prefix = f"{save_path}-{step:08d}" if self._pad_step_number else f"{save_path}-{step}"
        else:
            prefix = save_path
        if os.path.basename(prefix) == (latest_filename or _STATE_FILE):
            raise ValueError(f"'latest_filename' collides with the checkpoint path '{prefix}'")
        abs_prefix = os.path.abspath(prefix)
        save_dir = os.path.dirname(abs_prefix)
        os.makedirs(save_dir, exist_ok=True)
        ckpt_io.remove_stale_temps(save_dir)
        index = ckpt_io.index_filename(abs_prefix)
        if os.path.exists(index):
            # Saving over an existing checkpoint: invalidate it first, so that the time while its shards
            # are being replaced never passes for a good checkpoint.
            os.unlink(index)
            ckpt_io.fsync_dir(save_dir)
        entries = sess.run(self._save_outputs, {self._path: _encode_path(abs_prefix)})
        extra = {"created": clock.time(), "global_step": step}
        ckpt_io.write_index(abs_prefix, [json.loads(bytes(e)) for e in entries], key=self.checkpoint_key_for(sess),
                            **extra)
        if write_meta_graph:
            ckpt_io.atomic_write(f"{abs_prefix}.{meta_graph_suffix}", self._packed_meta_graph())
        if write_state:
            self._record(prefix)
            preserved = self._next_keep_time - self._keep_hours * 3600 if self._next_keep_time else 0.0
            update_checkpoint_state(save_dir, prefix, self.last_checkpoints, latest_filename,
                                    [t for _, t in self._last_checkpoints], preserved,
                                    save_relative_paths=self._save_relative_paths)
            self._delete_old()
        return prefix

    def _packed_meta_graph(self) -> bytes:
        """The saver's graph as an export_meta_graph file, packed again only when the graph changed."""
        from actorflow.train.meta_graph import FORMAT, make_meta_graph, pack_file
        version = self._graph.version
        if self._meta is None or self._meta[0] != version:
            self._meta = (version, pack_file(FORMAT, make_meta_graph(self._graph).to_dict()))
        return self._meta[1]

    def export_meta_graph(self, filename=None, collection_list=None, as_text=False, export_scope=None,
                          clear_devices=False, clear_extraneous_savers=False, strip_default_attrs=False,
                          save_debug_info=False):
        """The saver's graph as a MetaGraphDef, written to `filename` if given
        (tf.compat.v1.train.Saver.export_meta_graph; see af.train.export_meta_graph)."""
        from actorflow.train.meta_graph import export_meta_graph
        if not self._built:
            self.build()
        return export_meta_graph(filename=filename, collection_list=collection_list, as_text=as_text,
                                 export_scope=export_scope, clear_devices=clear_devices, graph=self._graph)

    def _record(self, prefix: str) -> None:
        self._last_checkpoints = [(p, t) for p, t in self._last_checkpoints if p != prefix]
        self._last_checkpoints.append((prefix, clock.time()))
        if not self._max_to_keep:
            # TF: with max_to_keep None or 0 nothing is deleted and only the newest is listed.
            self._last_checkpoints = self._last_checkpoints[-1:]
            return
        while len(self._last_checkpoints) > self._max_to_keep:
            self._to_delete.append(self._last_checkpoints.pop(0))

    def _delete_old(self) -> None:
        while self._to_delete:
            p, t = self._to_delete.pop(0)
            if self._next_keep_time is not None and t > self._next_keep_time:
                self._next_keep_time += self._keep_hours * 3600
                continue
            _delete_checkpoint(os.path.abspath(p))

    # -- restore ---------------------------------------------------------------------------------------------
    def restore(self, sess, save_path):
        """Restores every variable from the checkpoint `save_path` (tf.compat.v1.train.Saver.restore).

        Each task reads its variables (from whichever shard files hold them) and checks them against
        the index's checksums: DataLossError naming the file and tensor on a mismatch or a truncated
        file; InvalidArgumentError naming the variable when a shape or dtype differs (with
        `reshape=True`, only the element count must agree); NotFoundError for a variable the checkpoint
        lacks. ValueError when `save_path` has no checkpoint at all, as in TF.

        The index is checked here, in the client, first: DataLossError naming it and what is wrong when
        it is malformed or, with a key (see `checkpoint_key_for`), lacks a valid HMAC. The tasks then
        read that very index file (its sha256 travels with the path) and nothing else.
        """
        if not self._built:
            self.build()
        if self._empty:
            return
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        save_path = _prefix_of(save_path)
        if not checkpoint_exists(save_path):
            raise ValueError(f"The passed save_path is not a valid checkpoint: {save_path}")
        abs_prefix = os.path.abspath(save_path)
        _, digest = ckpt_io.load_index(abs_prefix, self.checkpoint_key_for(sess))
        sess.run(self._restore_op, {self._path: _encode_path(abs_prefix, digest)})

    def __repr__(self):
        return f"<af.train.Saver of {len(getattr(self, '_keys', []))} variables, sharded={self._sharded}>"
