"""Bulk tensor payloads on a websocket: received straight into the tensor's own memory.

aiohttp's websocket reader copies a large payload three times in user space before it reaches us
(the read buffer, the frame slices, the joined message), and we copied it once more into the
tensor: a 64 MiB edge moved at under half of raw TCP. On a connection where both ends agreed to it
(the `X-Actorflow-Bulk` handshake header), a tensor payload of `BULK_MIN` bytes or more instead
travels as one websocket frame with opcode 0x3, a non-control opcode that RFC 6455 reserves for
extensions, right after the ordinary message that carries its header. A `BulkStream` sits
between the socket transport and aiohttp's protocol. It reads every frame header on the wire, hands
every other frame to aiohttp byte for byte, and as a `BufferedProtocol` gives the socket the
destination array itself to read a bulk payload into: no user-space copy at all.

Bulk frame: ``FIN|0x3, unmasked, 64-bit length | u64 sequence number | payload``. The k-th bulk
frame on a connection belongs to the k-th message whose header says ``"b": 1``; the sequence number
checks that. A malformed bulk frame closes the connection (the server keeps serving the others).

A bulk payload is accepted only for an announced tensor, and only of exactly the announced size: a
bulk frame must directly follow the data message whose header announces it (the stream counts the
data messages it hands to aiohttp; `take(nbytes)` says which message announced what). Until that
header has been read, the stream allocates nothing: it stops reading the socket and keeps only the
bytes of the current read. A bulk frame that no header announces, or of another size, closes the
connection with a logged error naming the peer. `take(nbytes, discard=True)` reads a payload that
was announced but refused (over a byte budget) into scratch memory and drops it.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import struct

import numpy as np

from actorflow.transport.codec import MAX_FRAME, FrameError

__all__ = ["BULK_HEADER", "BULK_MIN", "BULK_OPCODE", "BulkStream", "bulk_frame_head"]

log = logging.getLogger(__name__)

BULK_HEADER = "X-Actorflow-Bulk"
BULK_OPCODE = 0x3
BULK_MIN = 256 << 10            # payloads at least this large travel as bulk frames
_SCRATCH = 256 << 10            # read buffer for everything that is not a bulk payload
_HOLD_MAX = 8 << 20             # bytes kept while a bulk frame waits for its announcing header
_SEQ = struct.Struct(">Q")
_LEN3 = struct.Struct("!BBQ")

# Parser states (_HOLD: a bulk frame's header was read, its announcing message not yet)
_HEAD, _PASS, _SEQNO, _BULK, _HOLD = range(5)


def bulk_frame_head(seq: int, nbytes: int) -> bytes:
    """The bytes that precede a bulk payload of `nbytes`: the frame header and the sequence number."""
    return _LEN3.pack(0x80 | BULK_OPCODE, 127, nbytes + _SEQ.size) + _SEQ.pack(seq)


class BulkStream(asyncio.BufferedProtocol):
    """Installed as the socket transport's protocol in front of aiohttp's (`inner`).

    Everything but bulk frames reaches `inner.data_received` unchanged, so aiohttp keeps handling
    the websocket (messages, pings, close). The reader of those messages calls `received()` for
    each one that announces no bulk payload and `take(nbytes)` for each one that does; bulk
    payloads complete in order. Write flow control (pause/resume) is forwarded to `inner` and
    observed by `drain()`.
    """

    def __init__(self, transport, inner, name: str = "peer"):
        self.transport = transport
        self.inner = inner
        self.name = name
        self._scratch = bytearray(_SCRATCH)
        self._sv = memoryview(self._scratch)
        self._state = _HEAD
        self._head = bytearray()         # a frame header split across reads
        self._remaining = 0              # bytes left in the current frame's payload (or sequence number)
        self._direct = False             # the last get_buffer handed out the destination array
        self._dest: np.ndarray | None = None
        self._dview: memoryview | None = None
        self._dpos = 0
        self._bulk_len = 0
        self._seq_in = 0
        self._msgs_out = 0               # data messages handed to aiohttp
        self._msgs_in = 0                # data messages the reader has taken from aiohttp
        self._after = 0                  # data messages before the current bulk frame
        self._announced: collections.deque = collections.deque()   # (nbytes, message index, discard)
        self._held = bytearray()         # bytes read while a bulk frame waits for its header (_HOLD)
        self._ready: collections.deque = collections.deque()
        self._waiter: asyncio.Future | None = None
        self._error: BaseException | None = None
        self._write_paused = False
        self._drainers: list[asyncio.Future] = []
        self.seq_out = 0                 # the sender's count, used by Connection's writer

    @classmethod
    def install(cls, transport, name: str = "peer") -> BulkStream:
        """Puts a BulkStream in front of the transport's current protocol and returns it."""
        stream = cls(transport, transport.get_protocol(), name)
        transport.set_protocol(stream)
        return stream

    def uninstall(self) -> None:
        """Gives the transport back to aiohttp's protocol (a handshake that failed after install)."""
        if self.transport.get_protocol() is self:
            self.transport.set_protocol(self.inner)

    # -- receiving ------------------------------------------------------------------------------
    def get_buffer(self, sizehint: int):
        if self._state == _BULK and self._remaining and self._dview is not None:
            self._direct = True
            return self._dview[self._dpos:self._dpos + self._remaining]
        self._direct = False
        return self._sv

    def buffer_updated(self, nbytes: int) -> None:
        if self._error is not None:
            return                        # the socket is being dropped: ignore what is still read
        if self._direct:
            self._dpos += nbytes
            self._remaining -= nbytes
            if not self._remaining:
                self._bulk_done()
            return
        try:
            if self._state == _HOLD:
                # aiohttp resumed reading (its own flow control) while we wait for a header.
                self._held += self._sv[:nbytes]
                if len(self._held) > _HOLD_MAX:
                    raise FrameError(f"{self.name} sent {len(self._held)} bytes after bulk frame {self._seq_in - 1} "
                                     "while it still waited for its announcing header")
                self.transport.pause_reading()
                return
            self._parse(self._sv[:nbytes])
        except FrameError as e:
            self._fail(e)

    def _parse(self, data: memoryview) -> None:
        out = []                         # spans handed to aiohttp, joined once per read
        pos = 0
        n = len(data)
        while pos < n:
            st = self._state
            if st == _PASS:
                take = min(self._remaining, n - pos)
                out.append(data[pos:pos + take])
                pos += take
                self._remaining -= take
                if not self._remaining:
                    self._state = _HEAD
            elif st == _HEAD:
                pos = self._read_head(data, pos, out)
            elif st == _SEQNO:
                take = min(self._remaining, n - pos)
                self._head += data[pos:pos + take]
                pos += take
                self._remaining -= take
                if not self._remaining and not self._start_bulk():
                    self._held += data[pos:]     # at most one read: the socket is paused below
                    pos = n
                    self.transport.pause_reading()
            else:   # _BULK: the rest of this read belongs to the payload
                take = min(self._remaining, n - pos)
                if self._dview is not None:      # else a refused payload, dropped as it arrives
                    self._dview[self._dpos:self._dpos + take] = data[pos:pos + take]
                self._dpos += take
                pos += take
                self._remaining -= take
                if not self._remaining:
                    self._bulk_done()
        if out:
            self.inner.data_received(b"".join(out) if len(out) > 1 else bytes(out[0]))

    def _read_head(self, data: memoryview, pos: int, out: list) -> int:
        """Consumes frame-header bytes from `data` at `pos`; returns the new position."""
        head = self._head
        n = len(data)
        if len(head) < 2:
            take = min(2 - len(head), n - pos)
            head += data[pos:pos + take]
            pos += take
            if len(head) < 2:
                return pos
        b1 = head[1]
        ln = b1 & 0x7F
        need = 2 + (8 if ln == 127 else 2 if ln == 126 else 0) + (4 if b1 & 0x80 else 0)
        if len(head) < need:
            take = min(need - len(head), n - pos)
            head += data[pos:pos + take]
            pos += take
            if len(head) < need:
                return pos
        if ln == 126:
            ln = int.from_bytes(head[2:4], "big")
        elif ln == 127:
            ln = int.from_bytes(head[2:10], "big")
        if head[0] & 0x0F == BULK_OPCODE:
            if head[0] & 0xF0 != 0x80 or b1 & 0x80:
                raise FrameError(f"bulk frame from {self.name} is fragmented, masked or sets reserved bits")
            if ln < _SEQ.size or ln - _SEQ.size > MAX_FRAME:
                raise FrameError(f"bulk frame from {self.name} declares an invalid length {ln}")
            self._head = bytearray()
            self._state = _SEQNO
            self._remaining = _SEQ.size
            self._bulk_len = ln - _SEQ.size
            return pos
        if head[0] & 0x80 and head[0] & 0x0F <= 0x2:
            self._msgs_out += 1          # the last frame of a data message (control frames are not counted)
        out.append(bytes(head))
        self._head = bytearray()
        self._remaining = ln
        self._state = _PASS if ln else _HEAD
        return pos

    def _start_bulk(self) -> bool:
        """A bulk frame's header is complete: start its payload if its header was read, else hold."""
        (seq,) = _SEQ.unpack(self._head)
        self._head = bytearray()
        if seq != self._seq_in:
            raise FrameError(f"bulk frame {seq} from {self.name} arrived where {self._seq_in} was expected")
        self._seq_in += 1
        self._after = self._msgs_out
        if not self._announced:
            if self._msgs_in >= self._after:
                raise self._unannounced()
            self._state = _HOLD
            return False
        self._begin(*self._announced.popleft())
        return True

    def _unannounced(self) -> FrameError:
        return FrameError(f"bulk frame {self._seq_in - 1} of {self._bulk_len} bytes from {self.name} follows no "
                          "header that announces it")

    def _begin(self, nbytes: int, index: int, discard: bool) -> None:
        if index != self._after:
            raise FrameError(f"bulk frame {self._seq_in - 1} from {self.name} does not directly follow the "
                             f"header that announced it (message {index}, frame after message {self._after})")
        if nbytes != self._bulk_len:
            raise FrameError(f"bulk frame {self._seq_in - 1} from {self.name} carries {self._bulk_len} bytes where "
                             f"its header announced {nbytes}")
        if discard:
            self._dest = self._dview = None
        else:
            self._dest = np.empty(self._bulk_len, np.uint8)   # np.empty: no page is touched before the socket writes it
            self._dview = memoryview(self._dest)
        self._dpos = 0
        self._remaining = self._bulk_len
        self._state = _BULK
        if not self._remaining:
            self._bulk_done()

    def _bulk_done(self) -> None:
        dest = self._dest
        self._dest = self._dview = None
        self._state = _HEAD
        w = self._waiter
        if w is not None and not w.done():
            self._waiter = None
            w.set_result(dest)
        else:
            self._ready.append(dest)

    def received(self) -> None:
        """The reader took a data message that announces no bulk payload from aiohttp."""
        self._msgs_in += 1
        if self._state == _HOLD and self._msgs_in >= self._after and self._error is None:
            self._fail(self._unannounced())

    def announce(self, nbytes: int, discard: bool = False) -> None:
        """The data message just taken from aiohttp declares a bulk payload of `nbytes` (with
        `discard`, a refused one: its bytes will be read and dropped). Raises FrameError when the
        bulk frame already waiting does not match."""
        self._msgs_in += 1
        if self._error is not None:
            raise self._error
        self._announced.append((nbytes, self._msgs_in, discard))
        if self._state != _HOLD:
            return
        self._state = _BULK
        try:
            self._begin(*self._announced.popleft())
            held, self._held = self._held, bytearray()
            if held:
                self._parse(memoryview(held))
        except FrameError as e:
            self._fail(e)
            raise
        inner = self.inner
        if self._state != _HOLD and not getattr(inner, "_reading_paused", False) \
                and not getattr(inner, "_buffer_paused", False):
            self.transport.resume_reading()     # unless aiohttp's own flow control holds it paused

    async def take(self, nbytes: int, discard: bool = False) -> np.ndarray | None:
        """`announce(nbytes, discard)`, then the next bulk payload in the order the frames arrived
        (None for a discarded one)."""
        self.announce(nbytes, discard)
        if self._ready:
            return self._ready.popleft()
        if self._error is not None:
            raise self._error
        self._waiter = asyncio.get_running_loop().create_future()
        return await self._waiter

    def _fail(self, error: BaseException) -> None:
        """A malformed bulk frame or a lost connection: fail the waiter and drop the socket."""
        if self._error is None:
            self._error = error
        if isinstance(error, FrameError):
            log.warning("refusing malformed bulk frame from %s: %s", self.name, error)
        w, self._waiter = self._waiter, None
        if w is not None and not w.done():
            w.set_exception(error)
        self._state = _HEAD
        # Nothing of this connection's payloads stays referenced once it failed.
        self._dest = self._dview = None
        self._ready.clear()
        self._announced.clear()
        self._held = bytearray()
        if isinstance(error, FrameError) and not self.transport.is_closing():
            self.transport.abort()

    # -- sending ------------------------------------------------------------------------------
    async def drain(self) -> None:
        """Waits until the transport's write buffer is below its low-water mark."""
        if not self._write_paused:
            return
        if self._error is not None:
            raise ConnectionResetError(f"connection to {self.name} lost")
        f = asyncio.get_running_loop().create_future()
        self._drainers.append(f)
        await f

    def pause_writing(self) -> None:
        self._write_paused = True
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self._write_paused = False
        for f in self._drainers:
            if not f.done():
                f.set_result(None)
        self._drainers.clear()
        self.inner.resume_writing()

    # -- the rest of the protocol goes to aiohttp -----------------------------------------------
    def connection_lost(self, exc) -> None:
        err = ConnectionResetError(f"connection to {self.name} lost" + (f": {exc}" if exc else ""))
        self._fail(err)
        for f in self._drainers:
            if not f.done():
                f.set_exception(err)
        self._drainers.clear()
        self.inner.connection_lost(exc)

    def eof_received(self):
        return self.inner.eof_received()
