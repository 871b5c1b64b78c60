"""Readers (tf.compat.v1's ReaderBase family): TextLineReader, TFRecordReader,
FixedLengthRecordReader, WholeFileReader and IdentityReader, the queue-based way of reading files.

A reader op (TextLineReaderV2, ...) creates a reader resource in the task that owns its device; the
operations on it (ReaderReadV2, ...) take it as reference input 0, and ReaderReadV2 and
ReaderReadUpToV2 take the filename queue as reference input 1: both resources are bound when the
actor is built, so the reader and its queue live in one task (placement colocates an op with
everything it references). actors/reader.py holds the state and TF's semantics: a read takes the
next record of the current file, and dequeues the next file name when that file is done.
"""
from __future__ import annotations

import collections

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["ReaderBase", "TextLineReader", "TFRecordReader", "FixedLengthRecordReader", "WholeFileReader",
           "IdentityReader"]

_SCALAR = TensorShape([])


def _infer_reader(inputs, attrs):
    return [(dtypes.resource, _SCALAR)]


def _infer_fixed(inputs, attrs):
    if int(attrs["record_bytes"]) <= 0:
        raise InferenceError(f"record_bytes must be > 0, got {attrs['record_bytes']}")
    for k in ("header_bytes", "footer_bytes", "hop_bytes"):
        if int(attrs.get(k, 0)) < 0:
            raise InferenceError(f"{k} must be >= 0, got {attrs[k]}")
    return _infer_reader(inputs, attrs)


TextLineReaderV2 = define_op("TextLineReaderV2", _infer_reader, stateful=True, resource="reader", actor="handle")
TFRecordReaderV2 = define_op("TFRecordReaderV2", _infer_reader, stateful=True, resource="reader", actor="handle")
FixedLengthRecordReaderV2 = define_op("FixedLengthRecordReaderV2", _infer_fixed, stateful=True, resource="reader",
                                      actor="handle")
WholeFileReaderV2 = define_op("WholeFileReaderV2", _infer_reader, stateful=True, resource="reader", actor="handle")
IdentityReaderV2 = define_op("IdentityReaderV2", _infer_reader, stateful=True, resource="reader", actor="handle")


def _check(inputs, queue=False):
    r = inputs[0]
    if r.op.op_def.resource != "reader":
        raise InferenceError(f"input '{r.name}' must be a reader handle, got the output of a {r.op.type} op")
    if queue and inputs[1].op.op_def.resource != "queue":
        raise InferenceError(f"input '{inputs[1].name}' must be a queue handle, got the output of a "
                             f"{inputs[1].op.type} op")


def _infer_read(inputs, attrs):
    _check(inputs, queue=True)
    return [(dtypes.string, _SCALAR), (dtypes.string, _SCALAR)]


def _infer_read_up_to(inputs, attrs):
    _check(inputs, queue=True)
    if inputs[2].dtype is not dtypes.int64:
        raise InferenceError(f"num_records must be an int64 scalar, got {inputs[2].dtype.name}")
    return [(dtypes.string, TensorShape([None])), (dtypes.string, TensorShape([None]))]


def _infer_scalar(dtype):
    def infer(inputs, attrs):
        _check(inputs)
        return [(dtype, _SCALAR)]
    return infer


def _infer_restore(inputs, attrs):
    _check(inputs)
    if inputs[1].dtype is not dtypes.string:
        raise InferenceError(f"the state must be a string scalar, got {inputs[1].dtype.name}")
    return []


# Input 0 is the reader, whose resource runs the op; input 1 of a read is the filename queue, which
# the actor binds too and hands to the reader (actors/reader.py).
ReaderReadV2 = define_op("ReaderReadV2", _infer_read, ref_inputs=(0, 1), actor="resource", stateful=True)
ReaderReadUpToV2 = define_op("ReaderReadUpToV2", _infer_read_up_to, ref_inputs=(0, 1), actor="resource",
                             stateful=True)
ReaderNumRecordsProducedV2 = define_op("ReaderNumRecordsProducedV2", _infer_scalar(dtypes.int64), ref_inputs=(0,),
                                       actor="resource", stateful=True)
ReaderNumWorkUnitsCompletedV2 = define_op("ReaderNumWorkUnitsCompletedV2", _infer_scalar(dtypes.int64),
                                          ref_inputs=(0,), actor="resource", stateful=True)
ReaderSerializeStateV2 = define_op("ReaderSerializeStateV2", _infer_scalar(dtypes.string), ref_inputs=(0,),
                                   actor="resource", stateful=True)
ReaderRestoreStateV2 = define_op("ReaderRestoreStateV2", _infer_restore, ref_inputs=(0,), actor="resource",
                                 stateful=True)
ReaderResetV2 = define_op("ReaderResetV2", lambda i, a: (_check(i), [])[1], ref_inputs=(0,), actor="resource",
                          stateful=True)

ReaderReadResult = collections.namedtuple("ReaderReadV2", ["key", "value"])
ReaderReadUpToResult = collections.namedtuple("ReaderReadUpToV2", ["keys", "values"])


class ReaderBase:
    """A reader of records from the work units (file names) of a queue (tf.compat.v1.ReaderBase).
    `read(queue)` gives the next record as (key, value); when the current work unit is exhausted
    it dequeues the next one, and it fails with OutOfRangeError once the queue is closed and empty.

    Differs from TF: a work unit that fails (a missing file, a damaged record) is given up, and the
    next read starts on the next one; TF's WholeFileReader and TFRecordReader try the same one again."""

    def __init__(self, reader_ref, supports_serialize=False):
        self._reader_ref = reader_ref
        self._supports_serialize = supports_serialize

    @property
    def reader_ref(self):
        """The reader's resource handle."""
        return self._reader_ref

    @property
    def supports_serialize(self) -> bool:
        """Whether serialize_state and restore_state work on this reader."""
        return self._supports_serialize

    @staticmethod
    def _queue_ref(queue):
        if isinstance(queue, Tensor):
            return queue
        ref = getattr(queue, "queue_ref", None)
        if ref is None:
            raise TypeError(f"a reader reads from a queue (or its queue_ref), got {type(queue).__name__}")
        return ref

    def read(self, queue, name=None):
        """The next record: (key, value) string scalars (tf.compat.v1.ReaderBase.read). The key
        says where the record is: "file:line" (TextLineReader, lines from 1), "file:offset"
        (TFRecordReader), "file:index" (FixedLengthRecordReader, from 0), "file" (WholeFileReader)."""
        key, value = ReaderReadV2(self._reader_ref, self._queue_ref(queue), name=name)
        return ReaderReadResult(key, value)

    def read_up_to(self, queue, num_records, name=None):
        """Up to `num_records` records, all from one work unit: fewer when it ends first
        (tf.compat.v1.ReaderBase.read_up_to); 1-D string tensors (keys, values)."""
        n = convert_to_tensor(num_records, dtype=dtypes.int64)
        keys, values = ReaderReadUpToV2(self._reader_ref, self._queue_ref(queue), n, name=name)
        return ReaderReadUpToResult(keys, values)

    def num_records_produced(self, name=None):
        """How many records this reader has produced (an int64 scalar)."""
        return ReaderNumRecordsProducedV2(self._reader_ref, name=name)

    def num_work_units_completed(self, name=None):
        """How many work units (files) this reader has finished (an int64 scalar)."""
        return ReaderNumWorkUnitsCompletedV2(self._reader_ref, name=name)

    def serialize_state(self, name=None):
        """The reader's state as a string (TF's ReaderBaseState message); UnimplementedError when
        run on a reader that does not support it (`supports_serialize`)."""
        return ReaderSerializeStateV2(self._reader_ref, name=name)

    def restore_state(self, state, name=None):
        """Restores a state that serialize_state gave (an op); on a bad state the reader is reset
        and the op fails with InvalidArgumentError."""
        state = convert_to_tensor(state, dtype=dtypes.string)
        return ReaderRestoreStateV2(self._reader_ref, state, name=name)

    def reset(self, name=None):
        """Restores the reader to its initial clean state (an op): no current work unit, counters 0."""
        return ReaderResetV2(self._reader_ref, name=name)


class TextLineReader(ReaderBase):
    """Reads the lines of its files, without their line endings ("\\n", "\\r\\n"), skipping the first
    `skip_header_lines` lines of each file (tf.compat.v1.TextLineReader)."""

    def __init__(self, skip_header_lines=None, name=None):
        ref = TextLineReaderV2(skip_header_lines=int(skip_header_lines or 0), container="", shared_name="",
                               name=name)
        super().__init__(ref)


def _compression_name(options) -> str:
    """"", "ZLIB" or "GZIP" of a TFRecordOptions, a TFRecordCompressionType or a name."""
    c = getattr(options, "compression_type", options)
    names = {None: "", "": "", "NONE": "", 0: "", "ZLIB": "ZLIB", 1: "ZLIB", "GZIP": "GZIP", 2: "GZIP"}
    key = c.upper() if isinstance(c, str) else c
    if key not in names:
        raise ValueError(f"Unsupported compression type {c!r}: use '', 'ZLIB' or 'GZIP'")
    return names[key]


class TFRecordReader(ReaderBase):
    """Reads the records of TFRecord files, compressed as `options` say (a TFRecordOptions)
    (tf.compat.v1.TFRecordReader)."""

    def __init__(self, name=None, options=None):
        ref = TFRecordReaderV2(compression_type=_compression_name(options), container="", shared_name="", name=name)
        super().__init__(ref)


class FixedLengthRecordReader(ReaderBase):
    """Reads records of `record_bytes` bytes after a header of `header_bytes` and before a footer of
    `footer_bytes` of each file; with `hop_bytes`, record i starts at header + i * hop_bytes (they
    may overlap); bytes left at the end that make no whole record are ignored. `encoding`: "",
    "ZLIB" or "GZIP" (tf.compat.v1.FixedLengthRecordReader)."""

    def __init__(self, record_bytes, header_bytes=None, footer_bytes=None, hop_bytes=None, name=None,
                 encoding=None):
        ref = FixedLengthRecordReaderV2(record_bytes=int(record_bytes), header_bytes=int(header_bytes or 0),
                                        footer_bytes=int(footer_bytes or 0), hop_bytes=int(hop_bytes or 0),
                                        encoding=_compression_name(encoding), container="", shared_name="",
                                        name=name)
        super().__init__(ref)


class WholeFileReader(ReaderBase):
    """Reads each file whole: the key is its name, the value its contents (tf.compat.v1.WholeFileReader)."""

    def __init__(self, name=None):
        super().__init__(WholeFileReaderV2(container="", shared_name="", name=name), supports_serialize=True)


class IdentityReader(ReaderBase):
    """Gives each work unit as its own record: key and value are the work unit
    (tf.compat.v1.IdentityReader)."""

    def __init__(self, name=None):
        super().__init__(IdentityReaderV2(container="", shared_name="", name=name), supports_serialize=True)
