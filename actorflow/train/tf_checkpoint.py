"""Reading TensorFlow's V2 checkpoints (the tensor-bundle format) and loading them into variables.

A TF V2 checkpoint `prefix` is `prefix.index`, a LevelDB-format table (prefix-compressed keys in
blocks, each block followed by a compression byte and a masked CRC32C; a footer with the index block's
handle and a magic number) mapping "" to a BundleHeaderProto and each tensor name to a
BundleEntryProto (dtype, shape, shard, offset, size, masked CRC32C of the bytes), and the shards
`prefix.data-NNNNN-of-MMMMM` holding the raw little-endian tensor bytes. The protocol buffers are
decoded with the protobuf library (the two messages are declared here, field for field as in
tensorflow/core/protobuf/tensor_bundle.proto) and checksums computed with google-crc32c. Every block
and every tensor is checked: a mismatch is a DataLossError naming the file and the tensor.

`write_tf_checkpoint` / `save_tf_checkpoint` write the same format (one shard, uncompressed blocks,
as TensorFlow's own writer does), so TensorFlow's Saver and tf.train.load_checkpoint read what
actorflow trained.

Not supported (UnimplementedError naming the tensor): string tensors, partitioned (sliced) entries,
compressed table blocks (TensorFlow writes none), big-endian bundles.
"""
from __future__ import annotations

import os
import struct

import numpy as np

from actorflow import errors
from actorflow.protowire import decode_varint

__all__ = ["load_checkpoint", "NewCheckpointReader", "init_from_checkpoint", "is_tf_checkpoint",
           "write_tf_checkpoint", "save_tf_checkpoint"]

_MAGIC = 0xdb4775248b80fb57
_MASK_DELTA = 0xa282ead8
_DTYPES = {1: np.float32, 2: np.float64, 3: np.int32, 4: np.uint8, 5: np.int16, 6: np.int8, 9: np.int64,
           10: np.bool_, 17: np.uint16, 19: np.float16, 22: np.uint32, 23: np.uint64}
_messages = None


def _protos():
    """The BundleHeaderProto and BundleEntryProto classes, declared once through protobuf's descriptors."""
    global _messages
    if _messages is not None:
        return _messages
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="actorflow_tensor_bundle.proto", package="actorflow_tf", syntax="proto3")

    def msg(name, fields, parent=None):
        m = (parent.nested_type.add() if parent is not None else fdp.message_type.add())
        m.name = name
        for num, fname, ftype, label, tname in fields:
            f = m.field.add(name=fname, number=num, type=ftype, label=label)
            if tname:
                f.type_name = tname
        return m
    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    shape = msg("TensorShapeProto", [(2, "dim", F.TYPE_MESSAGE, rep, ".actorflow_tf.TensorShapeProto.Dim"),
                                     (3, "unknown_rank", F.TYPE_BOOL, opt, None)])
    msg("Dim", [(1, "size", F.TYPE_INT64, opt, None), (2, "name", F.TYPE_STRING, opt, None)], shape)
    msg("VersionDef", [(1, "producer", F.TYPE_INT32, opt, None), (2, "min_consumer", F.TYPE_INT32, opt, None),
                       (3, "bad_consumers", F.TYPE_INT32, rep, None)])
    msg("TensorSliceProto", [(1, "extent", F.TYPE_BYTES, rep, None)])   # only counted: slices are refused
    msg("BundleHeaderProto", [(1, "num_shards", F.TYPE_INT32, opt, None), (2, "endianness", F.TYPE_INT32, opt, None),
                              (3, "version", F.TYPE_MESSAGE, opt, ".actorflow_tf.VersionDef")])
    msg("BundleEntryProto", [(1, "dtype", F.TYPE_INT32, opt, None),
                             (2, "shape", F.TYPE_MESSAGE, opt, ".actorflow_tf.TensorShapeProto"),
                             (3, "shard_id", F.TYPE_INT32, opt, None), (4, "offset", F.TYPE_INT64, opt, None),
                             (5, "size", F.TYPE_INT64, opt, None), (6, "crc32c", F.TYPE_FIXED32, opt, None),
                             (7, "slices", F.TYPE_MESSAGE, rep, ".actorflow_tf.TensorSliceProto")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    _messages = (message_factory.GetMessageClass(pool.FindMessageTypeByName("actorflow_tf.BundleHeaderProto")),
                 message_factory.GetMessageClass(pool.FindMessageTypeByName("actorflow_tf.BundleEntryProto")))
    return _messages


def _crc32c(data) -> int:
    import google_crc32c
    return google_crc32c.value(bytes(data))


def _unmask(c: int) -> int:
    rot = (c - _MASK_DELTA) & 0xffffffff
    return ((rot >> 17) | (rot << 15)) & 0xffffffff


def _block(path, data, offset, size):
    """The contents of the table block at offset/size, its trailer's checksum checked."""
    if offset + size + 5 > len(data):
        raise errors.DataLossError(None, None, f"{path}: block at {offset} (+{size}) runs past the end of the file")
    raw = data[offset:offset + size]
    kind = data[offset + size]
    (stored,) = struct.unpack_from("<I", data, offset + size + 1)
    if _unmask(stored) != _crc32c(data[offset:offset + size + 1]):
        raise errors.DataLossError(None, None, f"{path}: block checksum mismatch at offset {offset}")
    if kind != 0:
        raise errors.UnimplementedError(None, None, f"{path}: compressed table blocks (type {kind}) are not supported")
    return raw


def _entries(raw):
    """(key, value) pairs of one block."""
    (n_restarts,) = struct.unpack_from("<I", raw, len(raw) - 4)
    end = len(raw) - 4 - 4 * n_restarts
    pos, key = 0, b""
    while pos < end:
        shared, pos = decode_varint(raw, pos)
        unshared, pos = decode_varint(raw, pos)
        vlen, pos = decode_varint(raw, pos)
        key = key[:shared] + bytes(raw[pos:pos + unshared])
        pos += unshared
        yield key, bytes(raw[pos:pos + vlen])
        pos += vlen


def _mask(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xffffffff) + _MASK_DELTA) & 0xffffffff


def _put_varint(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7f) | 0x80)
        v >>= 7
    out.append(v)


def _make_block(items) -> bytes:
    """A table block of sorted (key, value) pairs, a restart point at every 16th entry (LevelDB's)."""
    out = bytearray()
    restarts = []
    prev = b""
    for i, (k, v) in enumerate(items):
        if i % 16 == 0:
            restarts.append(len(out))
            shared = 0
        else:
            shared = 0
            while shared < min(len(k), len(prev)) and k[shared] == prev[shared]:
                shared += 1
        _put_varint(out, shared)
        _put_varint(out, len(k) - shared)
        _put_varint(out, len(v))
        out += k[shared:]
        out += v
        prev = k
    if not restarts:
        restarts = [0]
    for r in restarts:
        out += struct.pack("<I", r)
    out += struct.pack("<I", len(restarts))
    return bytes(out)


def _with_trailer(block: bytes) -> bytes:
    return block + b"\x00" + struct.pack("<I", _mask(_crc32c(block + b"\x00")))


_NP_TO_TF = {np.dtype(v): k for k, v in _DTYPES.items()}


def write_tf_checkpoint(prefix, tensors: dict) -> str:
    """Writes {name: array} as a TensorFlow V2 checkpoint at `prefix` (one data shard); returns the
    prefix. Files are written to temporary names, fsynced and renamed, the index last."""
    header_cls, entry_cls = _protos()
    prefix = os.fspath(prefix)
    os.makedirs(os.path.dirname(os.path.abspath(prefix)) or ".", exist_ok=True)
    data = bytearray()
    entries = []
    for name in sorted(tensors):
        a = np.asarray(tensors[name])
        dt = a.dtype.newbyteorder("=") if a.dtype.byteorder not in "=|<" else a.dtype
        if np.dtype(dt).newbyteorder("=") not in _NP_TO_TF and a.dtype not in _NP_TO_TF:
            raise errors.UnimplementedError(None, None, f"write_tf_checkpoint: tensor '{name}' has dtype {a.dtype}, "
                                            "which cannot be written")
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        if not a.flags.c_contiguous:
            a = a.copy(order="C")            # (np.ascontiguousarray would make a 0-d array 1-d)
        raw = a.tobytes()
        e = entry_cls(dtype=_NP_TO_TF[a.dtype.newbyteorder("=")], shard_id=0, offset=len(data), size=len(raw),
                      crc32c=_mask(_crc32c(raw)))
        for d in a.shape:
            e.shape.dim.add(size=d)
        entries.append((name.encode(), e.SerializeToString()))
        data += raw
    header = header_cls(num_shards=1, endianness=0)
    header.version.producer = 1
    items = [(b"", header.SerializeToString())] + entries
    data_block = _make_block(items)
    index = bytearray(_with_trailer(data_block))
    handle = bytearray()
    _put_varint(handle, 0)
    _put_varint(handle, len(data_block))
    meta_off = len(index)
    meta_block = _make_block([])
    index += _with_trailer(meta_block)
    idx_off = len(index)
    # The index block's key must be >= the last key of the data block it points to.
    idx_block = _make_block([(items[-1][0] + b"\x00" if items[-1][0] else b"\x00", bytes(handle))])
    index += _with_trailer(idx_block)
    footer = bytearray()
    for v in (meta_off, len(meta_block), idx_off, len(idx_block)):
        _put_varint(footer, v)
    footer += b"\x00" * (40 - len(footer)) + struct.pack("<Q", _MAGIC)
    index += footer
    from actorflow.train.meta_graph import atomic_write
    atomic_write(f"{prefix}.data-00000-of-00001", bytes(data))
    atomic_write(f"{prefix}.index", bytes(index))
    return prefix


def save_tf_checkpoint(sess, prefix, var_list=None) -> str:
    """Saves variables (default: the global variables) of `sess` as a TensorFlow V2 checkpoint under
    their op names, for TensorFlow's Saver or tf.train.load_checkpoint to read."""
    from actorflow.graph.graph import GraphKeys
    vs = var_list if var_list is not None else sess.graph.get_collection(GraphKeys.GLOBAL_VARIABLES)
    if isinstance(vs, dict):
        names, refs = list(vs), list(vs.values())
    else:
        refs = list(vs)
        names = [v.op.name for v in refs]
    values = sess.run([getattr(v, "value", lambda v=v: v)() for v in refs])
    return write_tf_checkpoint(prefix, dict(zip(names, values)))


def is_tf_checkpoint(prefix) -> bool:
    """Whether `prefix.index` exists and ends with the table magic of TensorFlow's V2 checkpoints."""
    path = os.fspath(prefix) + ".index"
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() < 48:
                return False
            f.seek(-8, os.SEEK_END)
            return struct.unpack("<Q", f.read(8))[0] == _MAGIC
    except OSError:
        return False


class TFCheckpointReader:
    """Reads the tensors of a TensorFlow V2 checkpoint (tf.train.load_checkpoint's CheckpointReader)."""

    def __init__(self, prefix):
        self._prefix = os.fspath(prefix)
        path = self._prefix + ".index"
        try:
            with open(path, "rb") as f:
                data = memoryview(f.read())
        except FileNotFoundError:
            raise errors.NotFoundError(None, None, f"Unsuccessful TensorSliceReader constructor: Failed to find "
                                       f"any matching files for {self._prefix}") from None
        if len(data) < 48 or struct.unpack_from("<Q", data, len(data) - 8)[0] != _MAGIC:
            raise errors.DataLossError(None, None, f"{path}: not a TensorFlow checkpoint index (bad magic number)")
        header_cls, entry_cls = _protos()
        try:
            pos = len(data) - 48
            _, pos = decode_varint(data, pos)                   # metaindex handle: unused
            _, pos = decode_varint(data, pos)
            idx_off, pos = decode_varint(data, pos)
            idx_size, pos = decode_varint(data, pos)
            self._entries = {}
            header = None
            for _, handle in _entries(_block(path, data, idx_off, idx_size)):
                off, p = decode_varint(handle, 0)
                size, _ = decode_varint(handle, p)
                for key, value in _entries(_block(path, data, off, size)):
                    if key == b"":
                        header = header_cls.FromString(value)
                    else:
                        self._entries[key.decode()] = entry_cls.FromString(value)
        except (ValueError, struct.error, UnicodeDecodeError) as e:
            raise errors.DataLossError(None, None, f"{path}: corrupt checkpoint index ({e})") from None
        except Exception as e:  # noqa: BLE001 - protobuf's DecodeError
            if isinstance(e, errors.OpError):
                raise
            raise errors.DataLossError(None, None, f"{path}: corrupt checkpoint index ({type(e).__name__}: {e})") from None
        if header is None:
            raise errors.DataLossError(None, None, f"{path}: checkpoint index has no bundle header")
        if header.endianness != 0:
            raise errors.UnimplementedError(None, None, f"{path}: big-endian checkpoints are not supported")
        self._num_shards = header.num_shards
        self._path = path

    def _entry(self, name):
        try:
            return self._entries[name]
        except KeyError:
            raise errors.NotFoundError(None, None, f"Key {name} not found in checkpoint {self._prefix}") from None

    def has_tensor(self, name) -> bool:
        return name in self._entries

    def get_variable_to_shape_map(self) -> dict:
        return {k: [d.size for d in e.shape.dim] for k, e in self._entries.items()}

    def get_variable_to_dtype_map(self) -> dict:
        from actorflow.graph import dtypes
        return {k: dtypes.as_dtype(_DTYPES[e.dtype]) for k, e in self._entries.items() if e.dtype in _DTYPES}

    def get_tensor(self, name) -> np.ndarray:
        """The tensor `name`, its bytes checked against the entry's CRC32C."""
        e = self._entry(name)
        if e.dtype not in _DTYPES:
            raise errors.UnimplementedError(None, None, f"checkpoint {self._prefix}: tensor '{name}' has TF dtype "
                                            f"enum {e.dtype}, which actorflow does not read (strings, bfloat16, ...)")
        if len(e.slices):
            raise errors.UnimplementedError(None, None, f"checkpoint {self._prefix}: tensor '{name}' is partitioned "
                                            "(sliced); partitioned TF checkpoints are not supported")
        shard = f"{self._prefix}.data-{e.shard_id:05d}-of-{self._num_shards:05d}"
        try:
            with open(shard, "rb") as f:
                f.seek(e.offset)
                raw = f.read(e.size)
        except FileNotFoundError:
            raise errors.NotFoundError(None, None, f"checkpoint data file {shard} (tensor '{name}') is missing") from None
        if len(raw) != e.size:
            raise errors.DataLossError(None, None, f"{shard}: truncated; tensor '{name}' needs {e.size} bytes at "
                                       f"offset {e.offset}, got {len(raw)}")
        if _unmask(e.crc32c) != _crc32c(raw):
            raise errors.DataLossError(None, None, f"{shard}: checksum does not match for tensor '{name}'")
        dt = np.dtype(_DTYPES[e.dtype]).newbyteorder("<")
        shape = [d.size for d in e.shape.dim]
        if int(np.prod(shape, dtype=np.int64)) * dt.itemsize != e.size:
            raise errors.DataLossError(None, None, f"{self._path}: tensor '{name}' of shape {shape} and dtype "
                                       f"{dt.name} cannot be {e.size} bytes")
        return np.frombuffer(raw, dtype=dt).reshape(shape).astype(dt.newbyteorder("="), copy=True)


class _ActorflowCheckpointReader:
    """The same reader interface over an actorflow checkpoint (train/saver.py's format)."""

    def __init__(self, prefix):
        from actorflow.train import saver
        self._saver = saver
        self._prefix = prefix
        self._vars = dict(saver.list_variables(prefix))

    def has_tensor(self, name) -> bool:
        return name in self._vars

    def get_variable_to_shape_map(self) -> dict:
        return {k: list(v) for k, v in self._vars.items()}

    def get_variable_to_dtype_map(self) -> dict:
        from actorflow.graph import dtypes
        return {k: dtypes.as_dtype(self.get_tensor(k).dtype) for k in self._vars}

    def get_tensor(self, name) -> np.ndarray:
        if name not in self._vars:
            raise errors.NotFoundError(None, None, f"Key {name} not found in checkpoint {self._prefix}")
        return np.asarray(self._saver.load_variable(self._prefix, name))


def _resolve_prefix(ckpt_dir_or_file) -> str:
    path = os.fspath(ckpt_dir_or_file)
    if os.path.isdir(path):
        from actorflow.train.saver import get_checkpoint_state
        st = get_checkpoint_state(path)
        if st is None or not st.model_checkpoint_path:
            raise ValueError(f"Couldn't find 'checkpoint' file or checkpoints in given directory {path}")
        p = st.model_checkpoint_path
        return p if os.path.isabs(p) else os.path.join(path, p)
    return path[:-len(".index")] if path.endswith(".index") else path


def load_checkpoint(ckpt_dir_or_file):
    """A reader (`get_tensor`, `has_tensor`, `get_variable_to_shape_map`, `get_variable_to_dtype_map`) for
    the checkpoint at a prefix or the latest in a directory, written by TensorFlow (V2 format) or by
    actorflow (tf.train.load_checkpoint)."""
    prefix = _resolve_prefix(ckpt_dir_or_file)
    if is_tf_checkpoint(prefix):
        return TFCheckpointReader(prefix)
    return _ActorflowCheckpointReader(prefix)


def NewCheckpointReader(filepattern, *, key=None):  # noqa: N802 - TF's name
    """tf.compat.v1.train.NewCheckpointReader: a TensorFlow V2 checkpoint gets the TF bundle reader; an
    actorflow checkpoint (or a directory: its latest good one) gets the Saver's reader, which checks the
    index's HMAC under `key` when one is given."""
    from actorflow.train import saver
    path = os.fspath(filepattern)
    prefix = path[:-len(".index")] if path.endswith(".index") else path
    if not os.path.isdir(path) and is_tf_checkpoint(prefix):
        return TFCheckpointReader(prefix)
    return saver.NewCheckpointReader(filepattern, key=key)


def init_from_checkpoint(ckpt_dir_or_file, assignment_map):
    """Makes variables' initializers load values from a checkpoint (TF or actorflow format)
    (tf.compat.v1.train.init_from_checkpoint).

    `assignment_map` maps checkpoint names or scopes to variables, variable names or scopes, as in TF:
    {"old/": "new/"} (every checkpoint tensor under old/ to the variable of the same name under new/),
    {"/": "scope/"}, {"ckpt_name": "var_name"} or {"ckpt_name": variable}. Run the initializers
    afterwards (e.g. `global_variables_initializer()`). Raises ValueError naming a checkpoint tensor
    that is missing or whose shape differs from its variable's.
    """
    from actorflow.graph.graph import GraphKeys, get_default_graph
    from actorflow.graph.ops import state_ops
    from actorflow.graph.ops.constant import constant
    from actorflow.graph.variables import Variable
    reader = load_checkpoint(ckpt_dir_or_file)
    shapes = reader.get_variable_to_shape_map()
    g = get_default_graph()
    by_name = {v.op.name: v for v in g.get_collection(GraphKeys.GLOBAL_VARIABLES) if isinstance(v, Variable)}
    pairs = []
    for src, dst in assignment_map.items():
        if isinstance(dst, Variable):
            pairs.append((src, dst))
        elif src.endswith("/") or src == "/":
            s_scope = "" if src == "/" else src
            d_scope = "" if dst == "/" else dst
            for name in shapes:
                if name.startswith(s_scope):
                    target = d_scope + name[len(s_scope):]
                    if target in by_name:
                        pairs.append((name, by_name[target]))
        else:
            if dst not in by_name:
                raise ValueError(f"init_from_checkpoint: no variable named '{dst}' (for checkpoint tensor '{src}')")
            pairs.append((src, by_name[dst]))
    for src, v in pairs:
        if src not in shapes:
            raise ValueError(f"Tensor {src} is not found in {ckpt_dir_or_file} checkpoint")
        value = reader.get_tensor(src)
        if list(v.shape.as_list()) != list(value.shape):
            raise ValueError(f"Shape of variable {v.op.name} ({v.shape}) doesn't match with shape of tensor {src} "
                             f"({list(value.shape)}) from checkpoint reader.")
        with g.as_default(), g.name_scope(v.op.name + "/"), g.control_dependencies(None), g.colocate_with(v.op):
            init = constant(value.astype(v.dtype.as_numpy_dtype, copy=False), name="checkpoint_initializer")
            v._initializer_op = state_ops.Assign(v._variable, init, validate_shape=True, use_locking=True,
                                                 name="Assign_from_checkpoint").op
            v._initial_value = init
