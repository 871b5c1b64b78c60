"""The reader resource: TF 1.x's ReaderBase and its readers (text lines, TFRecords, fixed-length
records, whole files, identity), as the ops of graph/ops/reader_ops.py use them.

State, as TF's ReaderBase keeps it: the current work unit (a file name the filename queue gave),
`started` and `finished` work-unit counts (a unit is in progress while finished < started), the
records produced, and the subclass's position in the current file.

Operations run on the owning runtime's loop and are served one at a time in arrival order (`ops`),
as TF serves them under the reader's mutex: a read that needs the next work unit dequeues it from
its queue (the read's second resource, bound by its actor) and the operations behind it wait, so
two reads in flight at once never skip or duplicate a record. A dequeue may answer at once or much
later (`_got`); what it gives is kept in `works` until a read takes it, so a work unit is never
lost, even when the read that asked for it belonged to a step that failed meanwhile. Operations of
a failed step are dropped, as the queue drops its waiters.

Files are read through buffered file objects on the loop, as TextLineDataset reads them (a line or a
record costs no system call most of the time); a WholeFileReader reads a file in one call.
"""
from __future__ import annotations

import collections
import os

import numpy as np

from actorflow import errors, tfrecord
from actorflow.actors.resource import register_resource
from actorflow.protowire import decode_varint, encode_varint

__all__ = ["ReaderResource"]


def _string(b: bytes) -> np.ndarray:
    a = np.empty((), dtype=object)
    a[()] = b
    return a


def _strings(items) -> np.ndarray:
    a = np.empty(len(items), dtype=object)
    a[:] = items
    return a


def _open(work: bytes):
    """The file `work` names, opened for binary reading; TF's error classes naming it."""
    path = os.fsdecode(work)
    if path.startswith("file://"):
        path = path[len("file://"):]
    try:
        return open(path, "rb")  # noqa: SIM115 - the reader closes it when its work unit ends
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"{path}; No such file or directory") from None
    except IsADirectoryError:
        raise errors.FailedPreconditionError(None, None, f"{path} is a directory, not a file") from None
    except PermissionError:
        raise errors.PermissionDeniedError(None, None, f"{path}; Permission denied") from None
    except OSError as e:
        raise errors.UnknownError(None, None, f"{path}: {e.strerror}") from None


class _Op:
    """One operation waiting for its turn: a read (`n` None), a read_up_to (`n` records), or a call."""
    __slots__ = ("step", "done", "queue", "n", "keys", "values", "call")

    def __init__(self, step, done, queue=None, n=None, call=None):
        self.step = step
        self.done = done
        self.queue = queue
        self.n = n
        self.keys: list = []
        self.values: list = []
        self.call = call

    @property
    def cancelled(self) -> bool:
        return self.step is not None and self.step.error is not None


# ReaderBaseState (tensorflow/core/framework/reader_base.proto): work_started = 1,
# work_finished = 2, num_records_produced = 3 (int64), current_work = 4 (bytes).
def _encode_state(started: int, finished: int, produced: int, work: bytes) -> bytes:
    out = b""
    for field, v in ((1, started), (2, finished), (3, produced)):
        if v:
            out += bytes([field << 3]) + encode_varint(v)
    if work:
        out += bytes([4 << 3 | 2]) + encode_varint(len(work)) + work
    return out


def _decode_state(data: bytes):
    """(started, finished, produced, work) of a serialized ReaderBaseState; ValueError when it is not one."""
    vals = {1: 0, 2: 0, 3: 0, 4: b""}
    i, n = 0, len(data)

    def varint():
        nonlocal i
        v, i = decode_varint(data, i)
        return v
    while i < n:
        tag = varint()
        field, wire = tag >> 3, tag & 7
        if field == 0:
            raise ValueError("field 0")
        if wire == 0:
            v = varint()
            if field in (1, 2, 3):
                vals[field] = v - (1 << 64) if v >= 1 << 63 else v
        elif wire == 2:
            ln = varint()
            if i + ln > n:
                raise ValueError("truncated bytes")
            if field == 4:
                vals[4] = data[i:i + ln]
            i += ln
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
            if i > n:
                raise ValueError("truncated fixed field")
        else:
            raise ValueError(f"wire type {wire}")
    return vals[1], vals[2], vals[3], vals[4]


def _escape(b: bytes) -> str:
    """C-style escaping of bytes, as TF's CEscape writes a state it cannot parse."""
    out = []
    for c in b:
        ch = chr(c)
        if ch in "\n\r\t\"'\\":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "'": "\\'", "\\": "\\\\"}[ch])
        elif 32 <= c < 127:
            out.append(ch)
        else:
            out.append(f"\\{c:03o}")
    return "".join(out)


class ReaderResource:
    """A reader's state and TF's ReaderBase operations over it. Subclasses implement the work-unit
    hooks: `start_work` (open the file), `read_record` -> (key, value) or None at the end of the
    unit (`at_end` set by the subclass when the unit is done), and `end_work` (close it)."""

    type_name = "ReaderBase"
    supports_serialize = False

    def __init__(self, name: str, attrs: dict):
        self.name = name
        self.label = f"{self.type_name} '{name}'"
        self.work = b""
        self.started = 0
        self.finished = 0
        self.produced = 0
        self.ops: collections.deque[_Op] = collections.deque()
        self.works: collections.deque = collections.deque()   # what dequeues gave: (value, error)
        self.waiting = None        # the _Op whose dequeue has not answered yet
        self.serving = False

    # -- entry point for the runtime ------------------------------------------------------------------
    def run(self, op_type: str, attrs: dict, args, done, step) -> None:
        if op_type == "ReaderReadV2":
            op = _Op(step, done, queue=args[0])
        elif op_type == "ReaderReadUpToV2":
            n = int(args[1])
            if n < 0:
                raise errors.InvalidArgumentError(None, None, f"num_records must be >= 0, got {n} ({self.label})")
            op = _Op(step, done, queue=args[0], n=n)
        elif op_type == "ReaderNumRecordsProducedV2":
            op = _Op(step, done, call=lambda: np.int64(self.produced))
        elif op_type == "ReaderNumWorkUnitsCompletedV2":
            op = _Op(step, done, call=lambda: np.int64(self.finished))
        elif op_type == "ReaderSerializeStateV2":
            op = _Op(step, done, call=self._serialize)
        elif op_type == "ReaderRestoreStateV2":
            state = np.asarray(args[0]).reshape(())[()]
            op = _Op(step, done, call=lambda: self._restore(state))
        elif op_type == "ReaderResetV2":
            op = _Op(step, done, call=self.reset)
        else:
            raise errors.UnimplementedError(None, None, f"reader '{self.name}' cannot run {op_type}")
        self.ops.append(op)
        self._service()

    def release(self) -> None:
        """The session or server closes: the current file is closed."""
        self.end_work()

    # -- serving operations in order -----------------------------------------------------------------
    def _service(self) -> None:
        if self.serving:            # a dequeue answered inside _advance: it sees the answer itself
            return
        self.serving = True
        try:
            ops = self.ops
            while ops:
                op = ops[0]
                if op.cancelled:
                    ops.popleft()
                    if self.waiting is op:
                        self.waiting = None     # the queue drops its dequeue (same failed step)
                    continue
                if self.waiting is op:
                    break                       # still waiting for the queue
                try:
                    finished = self._advance(op)
                except Exception as e:  # noqa: BLE001 - fails this operation only
                    finished = True
                    op.done(None, e)
                if not finished:
                    break
                ops.popleft()
        finally:
            self.serving = False

    def _got(self, op, value, error) -> None:
        """A dequeue answered: its value (or error) waits in `works` for the next read."""
        if self.waiting is op:
            self.waiting = None
        elif error is not None:
            return                              # the read that asked is gone, and nothing was taken
        self.works.append((value, error))
        self._service()

    def _next_work(self, op) -> bool:
        """Starts the next work unit; False while it is being dequeued. Errors (the queue closed and
        empty, a file that cannot be opened) raise."""
        if not self.works:
            self.waiting = op
            op.queue.run("QueueDequeueV2", {}, (), lambda v, e: self._got(op, v, e), op.step)
            if not self.works:
                return False
            self.waiting = None
        value, error = self.works.popleft()
        self.work = b""              # what TF's failed GetNextWorkLocked leaves
        if error is not None:
            raise error
        if isinstance(value, tuple):
            raise errors.InvalidArgumentError(None, None, "Expected single component queue")
        value = np.asarray(value)
        if value.dtype != object:
            raise errors.InvalidArgumentError(None, None, "Expected queue with single string component")
        if value.size != 1:
            raise errors.InvalidArgumentError(None, None, "Expected to dequeue a one-element string tensor")
        work = value.reshape(())[()]
        self.work = work.encode() if isinstance(work, str) else bytes(work)
        self.at_end = False
        try:
            self.start_work()
        except Exception:
            self.end_work()          # a file it cannot open (or whose header is short): not started
            raise
        self.started += 1
        return True

    def _advance(self, op) -> bool:
        """Runs `op` as far as it goes: True when it is done (its `done` called), False when it
        waits for the queue."""
        if op.call is not None:
            op.done(op.call(), None)
            return True
        while True:
            if op.n is not None and len(op.keys) == op.n:
                op.done((_strings(op.keys), _strings(op.values)), None)
                return True
            if self.finished >= self.started and not self._next_work(op):
                return False
            try:
                rec = self.read_record()
            except Exception:
                self._end()          # a unit that fails is given up (TF would retry some of them)
                raise
            if rec is not None:
                self.produced += 1
                if op.n is None:
                    if self.at_end:
                        self._end()
                    op.done((_string(rec[0]), _string(rec[1])), None)
                    return True
                op.keys.append(rec[0])
                op.values.append(rec[1])
            if self.at_end:
                self._end()
                if op.keys:          # read_up_to stops at the end of a work unit that gave records
                    op.done((_strings(op.keys), _strings(op.values)), None)
                    return True

    def _end(self) -> None:
        self.end_work()
        self.finished = self.started

    # -- calls -----------------------------------------------------------------------------------------
    def reset(self) -> None:
        """TF's ResetLocked: no current work unit, every count 0."""
        self.end_work()
        self.started = self.finished = self.produced = 0
        self.work = b""

    def _serialize(self):
        if not self.supports_serialize:
            raise errors.UnimplementedError(None, None, f"Reader SerializeState ({self.label})")
        return _string(_encode_state(self.started, self.finished, self.produced, self.work))

    def _restore(self, state) -> None:
        if not self.supports_serialize:
            raise errors.UnimplementedError(None, None, f"Reader RestoreState ({self.label})")
        state = state.encode() if isinstance(state, str) else bytes(state)
        try:
            started, finished, produced, work = _decode_state(state)
        except ValueError:
            self.reset()
            raise errors.InvalidArgumentError(None, None, f"Could not parse state for {self.label}: "
                                                          f"{_escape(state)}") from None
        if min(started, finished, produced) < 0:
            self.reset()
            raise errors.InvalidArgumentError(None, None, f"Unexpected negative value when restoring in "
                                                          f"{self.label}: started {started}, finished {finished}, "
                                                          f"produced {produced}")
        if started > finished:
            self.reset()
            raise errors.InvalidArgumentError(None, None, f"Inconsistent work started vs. finished when restoring "
                                                          f"in {self.label}: started {started}, finished {finished}")
        self.end_work()
        self.started, self.finished, self.produced, self.work = started, finished, produced, work

    # -- the work-unit hooks -----------------------------------------------------------------------------
    at_end = False

    def start_work(self) -> None:
        pass

    def read_record(self):
        raise NotImplementedError

    def end_work(self) -> None:
        pass


class _FileReader(ReaderResource):
    """A reader that holds the current work unit's file open."""

    def __init__(self, name, attrs):
        super().__init__(name, attrs)
        self.f = None

    def end_work(self) -> None:
        if self.f is not None:
            self.f.close()
            self.f = None


class TextLineReader(_FileReader):
    """Lines, keyed "file:line" with lines counted from 1 (header lines included); a line loses its
    "\\n" and then one "\\r", as TF's InputBuffer::ReadLine."""

    type_name = "TextLineReader"

    def __init__(self, name, attrs):
        super().__init__(name, attrs)
        self.skip = int(attrs.get("skip_header_lines", 0))
        self.line = 0

    def _line(self):
        line = self.f.readline()
        if not line:
            return None
        if line.endswith(b"\n"):
            line = line[:-1]
        if line.endswith(b"\r"):
            line = line[:-1]
        return line

    def start_work(self) -> None:
        self.f = _open(self.work)
        self.line = 0
        while self.line < self.skip and self._line() is not None:
            self.line += 1

    def read_record(self):
        line = self._line()
        self.line += 1
        if line is None:
            self.at_end = True
            return None
        return b"%s:%d" % (self.work, self.line), line


class TFRecordReader(_FileReader):
    """TFRecords, keyed "file:offset" with the record's offset in the (uncompressed) file; CRCs checked."""

    type_name = "TFRecordReader"

    def __init__(self, name, attrs):
        super().__init__(name, attrs)
        self.compression = attrs.get("compression_type") or ""

    def start_work(self) -> None:
        self.f = tfrecord.RecordReader(os.fsdecode(self.work), self.compression, raw=_open(self.work))

    def read_record(self):
        offset = self.f.offset
        rec = self.f.next()
        if rec is None:
            self.at_end = True
            return None
        return b"%s:%d" % (self.work, offset), rec


class FixedLengthRecordReader(_FileReader):
    """Records of `record_bytes` after a header and before a footer, record i at header + i * hop
    (hop_bytes, or record_bytes when 0), keyed "file:i" from 0: TF's lookahead over the stream."""

    type_name = "FixedLengthRecordReader"

    def __init__(self, name, attrs):
        super().__init__(name, attrs)
        self.record = int(attrs["record_bytes"])
        self.header = int(attrs.get("header_bytes", 0))
        self.footer = int(attrs.get("footer_bytes", 0))
        self.hop = int(attrs.get("hop_bytes", 0))
        self.encoding = attrs.get("encoding") or ""
        self.index = 0
        self.cache = b""

    def _read(self, n: int) -> bytes:
        try:
            return self.f.read(n)
        except (OSError, EOFError) as e:
            raise errors.DataLossError(None, None, f"{os.fsdecode(self.work)}: the compressed stream is "
                                                   f"damaged ({e}) ({self.label})") from None

    def start_work(self) -> None:
        self.f = tfrecord.open_for_read(_open(self.work), self.encoding)
        self.index = 0
        self.cache = b""
        self._read(self.header)

    def read_record(self):
        if self.index and self.hop:
            if len(self.cache) >= self.hop:
                self.cache = self.cache[self.hop:]
            else:
                left = self.hop - len(self.cache)
                self.cache = b""
                if len(self._read(left)) < left:
                    self.at_end = True
                    return None
        want = self.record + self.footer - len(self.cache)
        data = self._read(want)
        self.cache += data
        if len(data) < want:
            self.at_end = True
            return None
        value = self.cache[:self.record]
        if not self.hop:
            self.cache = self.cache[self.record:]
        key = b"%s:%d" % (self.work, self.index)
        self.index += 1
        return key, value


class WholeFileReader(ReaderResource):
    """Each file whole, keyed by its name. Serializes its base state (as TF's)."""

    type_name = "WholeFileReader"
    supports_serialize = True

    def read_record(self):
        self.at_end = True
        with _open(self.work) as f:
            data = f.read()
        return self.work, data


class IdentityReader(ReaderResource):
    """Each work unit is its own record: key and value are the work unit."""

    type_name = "IdentityReader"
    supports_serialize = True

    def read_record(self):
        self.at_end = True
        return self.work, self.work


for _op_type, _cls in (("TextLineReaderV2", TextLineReader), ("TFRecordReaderV2", TFRecordReader),
                       ("FixedLengthRecordReaderV2", FixedLengthRecordReader),
                       ("WholeFileReaderV2", WholeFileReader), ("IdentityReaderV2", IdentityReader)):
    register_resource(_op_type, _cls)
