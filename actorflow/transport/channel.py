"""Channels: one persistent aiohttp websocket per pair of tasks, carrying codec frames.

A `Connection` wraps either end of a websocket: `post` queues a frame for its writer task (ordering
kept, never blocking the caller), `call` is a request/response with a timeout, and `serve` reads
frames (reassembling continuations) and dispatches them. A `Peer` keeps a connection to one remote
task alive, reconnecting with exponential backoff.
"""
from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import ssl as ssl_module

import aiohttp
import numpy as np

from actorflow import errors
from actorflow.transport.budget import ByteBudget, TransportLimits, process_budget
from actorflow.transport.bulk import BULK_HEADER, BULK_MIN, BulkStream, bulk_frame_head
from actorflow.transport.codec import CHUNK, FrameError, decode, decode_header, encode, split_payload

__all__ = ["Connection", "Peer", "TOKEN_HEADER", "MAX_MESSAGE", "accept_bulk"]

# Fault injection (installed by the simulator, actorflow/sim/faults.py; None otherwise): an object
# whose `await fault_hook.before_send(connection, frame)` runs before each frame a connection writes,
# and may delay it, hold it, drop it or fail the connection.
fault_hook = None

log = logging.getLogger(__name__)
TOKEN_HEADER = "X-Actorflow-Token"
TASK_HEADER = "X-Actorflow-Task"       # who is connecting ("/job:worker/task:1", or "client")
MAX_MESSAGE = CHUNK + (2 << 20)     # a websocket message: a chunk, or a header with small inline tensors

# sim: `async DIAL(address, local_task, token) -> websocket` replaces aiohttp's connect when a
# deterministic simulation runs (actorflow/sim/network.py); None: real sockets.
DIAL = None


class _BulkPayload:
    """The payload of a frame that travels as one bulk frame (see transport/bulk.py)."""
    __slots__ = ("bufs", "nbytes")

    def __init__(self, bufs, nbytes: int):
        self.bufs = bufs
        self.nbytes = nbytes

    def __len__(self) -> int:
        return self.nbytes


class Connection:
    """Either end of a websocket between tasks (or a client and a task).

    Payload bytes announced by the peer and not yet received count against the connection's
    in-flight limit and the process's `budget` (transport/budget.py). A frame over budget is read
    and dropped, never stored; `on_refuse(conn, header, error)` learns of it (a worker fails the
    frame's step, a call is answered with the error) and the connection keeps serving.
    """

    def __init__(self, ws, handler, name: str, peer_task: str | None = None, on_close=None,
                 bulk: BulkStream | None = None, budget: ByteBudget | None = None, inflight_limit: int | None = None,
                 on_refuse=None):
        self.ws = ws
        self.bulk = bulk                  # set where both ends negotiated bulk frames
        self.handler = handler            # handler(conn, header, tensors) -> None or awaitable
        self.name = name
        self.peer_task = peer_task        # the task at the other end, when it said
        self.on_close = on_close          # on_close(conn, error) when the connection fails
        self._calls: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self._out: collections.deque = collections.deque()
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        self._writer = asyncio.get_running_loop().create_task(self._write_loop())
        self.closed = False
        self.error: BaseException | None = None
        self.budget = budget if budget is not None else process_budget()
        self.inflight = ByteBudget(inflight_limit or TransportLimits.from_env().inflight_per_connection,
                                   f"the connection {name}")
        self.on_refuse = on_refuse

    # -- sending ------------------------------------------------------------------------------
    def post(self, header: dict, tensors=()) -> None:
        """Queues a frame; the writer task sends frames in order."""
        if self.closed:
            raise errors.UnavailableError(None, None, f"connection to {self.name} is closed")
        bulk = self.bulk is not None
        head, bufs = encode(header, tensors, bulk_min=BULK_MIN if bulk else None)
        n = sum(len(b) for b in bufs) if bulk else 0
        self._out.append([head, _BulkPayload(bufs, n)] if n >= BULK_MIN else split_payload(head, bufs))
        self._wake.set()

    async def _write_loop(self):
        ws = self.ws
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._out:
                    frame = self._out.popleft()
                    # sim: fault-injection seam (`fault_hook` above); a no-op unless a scenario installs one
                    if fault_hook is not None:
                        await fault_hook.before_send(self, frame)
                    for m in frame:
                        if type(m) is _BulkPayload:
                            await self._send_bulk(m)
                        else:
                            await ws.send_bytes(m)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - a broken socket closes the connection
            self._close(errors.UnavailableError(None, None, f"connection to {self.name} failed: {e}"))

    async def _send_bulk(self, payload: _BulkPayload) -> None:
        """Writes one bulk frame straight to the socket; the transport holds the buffers, no copy."""
        b = self.bulk
        tr = b.transport
        if tr.is_closing():
            raise ConnectionResetError("transport is closing")
        tr.write(bulk_frame_head(b.seq_out, payload.nbytes))
        b.seq_out += 1
        for buf in payload.bufs:
            if len(buf):
                tr.write(buf)
        await b.drain()

    async def call(self, method: str, args: dict | None = None, tensors=(), timeout: float | None = 30.0):
        """Sends a request and awaits the reply: (result, tensors). Remote errors re-raise here."""
        i = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._calls[i] = fut
        try:
            self.post({"k": "call", "m": method, "i": i, "a": args or {}}, tensors)
            async with asyncio.timeout(timeout):
                header, out = await fut
        except TimeoutError:
            raise errors.DeadlineExceededError(
                None, None, f"call {method} to {self.name} timed out after {timeout:g} s") from None
        finally:
            self._calls.pop(i, None)
        if "e" in header:
            code, msg, op = header["e"]
            raise errors.from_code(code, msg, op)
        return header.get("r"), out

    def reply(self, call_header: dict, result=None, tensors=(), error: BaseException | None = None) -> None:
        h = {"k": "reply", "i": call_header["i"]}
        if error is not None:
            code = getattr(error, "error_code", errors.UnknownError.error_code)
            msg = error.message if isinstance(error, errors.OpError) else f"{type(error).__name__}: {error}"
            h["e"] = [code, msg, getattr(error, "node_def", None) if isinstance(getattr(error, "node_def", None), str) else None]
            tensors = ()
        else:
            h["r"] = result
        if not self.closed:
            try:
                self.post(h, tensors)
            except errors.OpError:
                pass

    # -- receiving ------------------------------------------------------------------------------
    async def serve(self) -> None:
        """Reads frames until the socket closes; a malformed frame closes this connection only."""
        ws = self.ws
        held = 0                  # payload bytes reserved from the budgets for the frame being read
        try:
            while True:
                msg = await ws.receive()
                if msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED,
                                aiohttp.WSMsgType.ERROR):
                    break
                if msg.type != aiohttp.WSMsgType.BINARY:
                    raise FrameError(f"unexpected {msg.type.name} websocket message")
                data = msg.data
                header, off = decode_header(data)
                n = header["n"]
                refused = None
                buf = None
                if header.get("b"):
                    if self.bulk is None or len(data) != off:
                        raise FrameError("a bulk payload announced on a connection that did not negotiate bulk "
                                         "frames, or with inline payload bytes")
                    refused = self._reserve(n, header)
                    held = 0 if refused else n
                    buf = await self.bulk.take(n, discard=refused is not None)
                    tensors = None if refused else decode(header, buf, 0)
                else:
                    if self.bulk is not None:
                        self.bulk.received()
                    if len(data) - off == n:
                        tensors = decode(header, data, off)
                    elif len(data) == off:
                        refused = self._reserve(n, header)
                        held = 0 if refused else n
                        # bytearray(n) would zero every page first; a refused payload is dropped as it arrives
                        buf = None if refused else np.empty(n, np.uint8)
                        view = None if refused else memoryview(buf)
                        pos = 0
                        while pos < n:
                            m = await ws.receive()
                            if m.type != aiohttp.WSMsgType.BINARY:
                                raise FrameError(f"frame truncated after {pos} of {n} payload bytes")
                            if self.bulk is not None:
                                self.bulk.received()
                            d = m.data
                            if pos + len(d) > n:
                                raise FrameError(f"frame payload overruns its declared {n} bytes")
                            if view is not None:
                                view[pos:pos + len(d)] = d
                            pos += len(d)
                        tensors = None if refused else decode(header, buf, 0)
                        view = None
                    else:
                        raise FrameError(f"frame carries {len(data) - off} payload bytes, header declares {n}")
                self._release(held)
                held = 0
                if refused is None:
                    self._dispatch(header, tensors)
                # Hold nothing of this frame while waiting for the next: its receiver owns it now.
                tensors = buf = data = msg = None
        except FrameError as e:
            self._release(held)
            held = 0
            log.warning("refusing malformed frame from %s: %s", self.name, e)
            self._close(errors.UnavailableError(None, None, f"malformed frame from {self.name}: {e}"))
            try:
                await ws.close(code=aiohttp.WSCloseCode.UNSUPPORTED_DATA, message=str(e)[:120].encode())
            except Exception:  # noqa: BLE001 - a bulk stream that refused the frame already dropped the socket
                pass
            return
        except asyncio.CancelledError:
            self._close(errors.CancelledError(None, None, f"connection to {self.name} cancelled"))
            raise
        except Exception as e:  # noqa: BLE001
            log.warning("connection to %s failed: %s", self.name, e)
        finally:
            self._release(held)
        self._close(errors.UnavailableError(None, None, f"connection to {self.name} closed"))

    def _reserve(self, n: int, header: dict):
        """Holds `n` announced payload bytes; when over budget, refuses the frame (its step or call
        fails now, its bytes will be dropped as they arrive) and returns the ResourceExhaustedError."""
        try:
            self.inflight.take(n, self.name)
            try:
                self.budget.take(n, self.name)
            except errors.ResourceExhaustedError:
                self.inflight.give(n)
                raise
        except errors.ResourceExhaustedError as e:
            # Without its traceback: the step keeps its error, and the frames would keep this connection's buffers.
            e = e.with_traceback(None)
            log.warning("refusing a %d-byte payload from %s: %s", n, self.name, e.message)
            self._refuse(header, e)
            return e
        return None

    def _release(self, n: int) -> None:
        if n:
            self.inflight.give(n)
            self.budget.give(n)

    def _refuse(self, header: dict, error) -> None:
        """A frame whose payload was over budget (and dropped): its call or step fails with `error`."""
        if header.get("k") == "reply":
            fut = self._calls.get(header.get("i"))
            if fut is not None and not fut.done():
                fut.set_exception(error)
            return
        if self.on_refuse is not None:
            self.on_refuse(self, header, error)
        elif header.get("k") == "call" and isinstance(header.get("i"), int):
            self.reply(header, error=error)

    def _dispatch(self, header, tensors) -> None:
        kind = header.get("k")
        if kind == "reply":
            fut = self._calls.get(header.get("i"))
            if fut is not None and not fut.done():
                fut.set_result((header, tensors))
            return
        res = self.handler(self, header, tensors)
        if asyncio.iscoroutine(res):
            t = asyncio.get_running_loop().create_task(res)
            self._tasks.add(t)
            t.add_done_callback(self._tasks.discard)

    def _close(self, error: BaseException) -> None:
        if self.closed:
            return
        self.closed = True
        self.error = error
        self._writer.cancel()
        self._out.clear()                 # frames never to be sent: drop their buffers now
        for fut in self._calls.values():
            if not fut.done():
                fut.set_exception(error)
        for t in list(self._tasks):
            t.cancel()
        if not self.ws.closed:
            # Make the other end notice too (it may be waiting for what this connection lost).
            try:
                self._closer = asyncio.get_running_loop().create_task(self.ws.close())
            except RuntimeError:      # no running loop: the process is shutting down
                pass
        if self.on_close is not None:
            try:
                self.on_close(self, error)
            except Exception:  # noqa: BLE001 - a failing observer must not break shutdown
                log.exception("on_close of %s failed", self.name)

    async def close(self) -> None:
        self._close(errors.CancelledError(None, None, f"connection to {self.name} closed locally"))
        try:
            await self.ws.close()
        except Exception:  # noqa: BLE001
            pass


class Peer:
    """A lazily opened, self-healing connection to one remote task."""

    def __init__(self, address: str, token: str, handler, name: str | None = None,
                 connect_timeout: float = 10.0, local_task: str = "client", on_close=None,
                 ssl: ssl_module.SSLContext | None = None, heartbeat: float | None = None,
                 budget: ByteBudget | None = None, inflight_limit: int | None = None, on_refuse=None):
        self.ssl = ssl                    # a client TLS context (transport/tls.py), or None for plain TCP
        self.heartbeat = heartbeat        # websocket ping interval; a server that stops answering is dropped
        self.local_task = local_task
        self.budget = budget
        self.inflight_limit = inflight_limit
        self.on_refuse = on_refuse
        self.on_close = on_close
        self.address = address
        self.token = token
        self.handler = handler
        self.name = name or address
        self.connect_timeout = connect_timeout
        self._session: aiohttp.ClientSession | None = None
        self._conn: Connection | None = None
        self._serve_task: asyncio.Task | None = None
        self._lock = asyncio.Lock()
        self.connects = 0

    async def connection(self, timeout: float | None = None) -> Connection:
        c = self._conn
        if c is not None and not c.closed:
            return c
        async with self._lock:
            c = self._conn
            if c is not None and not c.closed:
                return c
            try:
                return await self._connect(timeout if timeout is not None else self.connect_timeout)
            except errors.OpError:
                # A failed connect leaves no client session open behind it (the next try makes one).
                if self._session is not None:
                    await self._session.close()
                raise

    async def _connect(self, timeout: float) -> Connection:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        delay = 0.02
        last = None
        if DIAL is None and (self._session is None or self._session.closed):
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout))
        scheme = "https" if self.ssl is not None else "http"
        while True:
            try:
                # The whole handshake (TCP, TLS, HTTP upgrade) within what is left of the deadline:
                # a server that accepts and never answers must not hold us.
                async with asyncio.timeout(max(deadline - loop.time(), 0.05)):
                    if DIAL is not None:
                        ws = await DIAL(self.address, self.local_task, self.token)
                    else:
                        ws = await self._session.ws_connect(
                            f"{scheme}://{self.address}/ws",
                            headers={TOKEN_HEADER: self.token, TASK_HEADER: self.local_task, BULK_HEADER: "1"},
                            max_msg_size=MAX_MESSAGE, ssl=self.ssl if self.ssl is not None else True,
                            autoping=True, heartbeat=self.heartbeat, compress=0)
                break
            except TimeoutError:
                last = TimeoutError(f"no websocket handshake within {timeout:g} s")
            except aiohttp.WSServerHandshakeError as e:
                if e.status in (401, 403):
                    raise errors.PermissionDeniedError(
                        None, None, f"{self.name} at {self.address} refused our cluster token (every task and "
                                    "client of a cluster needs the same one: token=, $ACTORFLOW_TOKEN or the "
                                    "spec file)") from None
                last = e
            except (aiohttp.ClientSSLError, ssl_module.SSLError) as e:
                # Not transient: a certificate or protocol mismatch stays one on the next try.
                raise errors.UnavailableError(
                    None, None, f"TLS handshake with {self.name} at {self.address} failed: {e}") from None
            except (aiohttp.ClientError, OSError) as e:
                last = e
            if loop.time() + delay > deadline:
                hint = ""
                if isinstance(last, aiohttp.ServerDisconnectedError) and self.ssl is None:
                    hint = (" (it closed the connection without answering: if the task serves TLS, connect "
                            "with an afs:// target and its CA)")
                raise errors.UnavailableError(None, None,
                                              f"cannot reach {self.name} at {self.address}: {last}{hint}")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
        self.connects += 1
        # Both ends are actorflow tasks that presented the cluster token. RFC 6455 masks client
        # frames to protect HTTP proxy caches, which do not sit between tasks; here masking only
        # costs extra passes over every byte sent. aiohttp's reader accepts unmasked frames.
        writer = getattr(ws, "_writer", None)
        if writer is not None and hasattr(writer, "use_mask"):
            writer.use_mask = False
        bulk = None
        resp = getattr(ws, "_response", None)
        if resp is not None and resp.headers.get(BULK_HEADER) == "1" and writer is not None:
            # The server sends nothing before our first request, so the stream starts at a frame boundary.
            bulk = BulkStream.install(writer.transport, self.name)
        conn = Connection(ws, self.handler, self.name, peer_task=self.name, on_close=self.on_close, bulk=bulk,
                          budget=self.budget, inflight_limit=self.inflight_limit, on_refuse=self.on_refuse)
        self._conn = conn
        self._serve_task = loop.create_task(conn.serve())
        return conn

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
        if self._serve_task is not None:
            self._serve_task.cancel()
            try:
                await self._serve_task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        if self._session is not None:
            await self._session.close()


def accept_bulk(request, ws, name: str) -> BulkStream | None:
    """Server side of the bulk handshake; call before `ws.prepare(request)`.

    Installed before the 101 response goes out, when the client cannot have sent any frame yet, so
    the stream starts at a frame boundary. Returns None when the client did not ask for bulk frames
    or the request is no websocket handshake; the caller uninstalls it if `prepare` fails.
    """
    if request.headers.get(BULK_HEADER) != "1" or request.transport is None or not ws.can_prepare(request).ok:
        return None
    ws.headers[BULK_HEADER] = "1"
    return BulkStream.install(request.transport, name)
