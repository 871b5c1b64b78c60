"""The listening side of a task: what a connection may cost before it proves it holds the token.

aiohttp reads request headers for as long as a client cares to trickle them and keeps an idle
connection until its keep-alive timer (75 s) fires, so a local user could hold hundreds of sockets
open without any token (slowloris: partial headers; or nothing at all). Here every accepted
connection gets a deadline: unless a handler calls `trust(request)` (after checking the cluster
token) within `handshake_timeout` seconds of the accept, the connection is closed, whatever state
its request is in. At most `max_unauthenticated` connections wait for that at once; one more is
answered `503` and closed. A TLS handshake must finish within half the deadline (asyncio's
`ssl_handshake_timeout`), so that a connection still without an HTTP handler at the deadline is
known to be gone.

Trusted connections are the cluster's own tasks and clients; they carry websocket heartbeats
(`ConnectionLimits.ws_heartbeat`) that close a peer that stops answering pings.
"""
from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, fields, replace

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

__all__ = ["ConnectionLimits", "GuardedSite"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Timeouts and caps of a task's server (and the heartbeat of its outgoing connections).

    - `handshake_timeout`: seconds from accept (TLS handshake included) to a valid cluster token.
    - `ws_heartbeat`: websocket ping interval; a peer that does not answer within half of it is closed.
      A pong queues behind a tensor being sent, so half of it must cover sending the largest tensor
      (30 s: about 3.5 GiB at 1 Gbit/s).
    - `idle_timeout`: keep-alive of a trusted plain-HTTP connection (e.g. health checks).
    - `max_unauthenticated`: connections allowed to wait for their token check at once.
    - `max_field_size`, `max_headers`: request header limits (larger is answered 400).

    Every field can be set by an environment variable `ACTORFLOW_<FIELD>` (upper case), so that
    worker processes started by a LocalCluster or a cluster manager pick them up.
    """
    handshake_timeout: float = 10.0
    ws_heartbeat: float = 60.0
    idle_timeout: float = 60.0
    max_unauthenticated: int = 128
    max_field_size: int = 8190
    max_headers: int = 64

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if not v > 0:
                raise ValueError(f"ConnectionLimits.{f.name} must be positive, got {v!r}")

    @classmethod
    def from_env(cls, **overrides) -> ConnectionLimits:
        """Defaults, then $ACTORFLOW_<FIELD> variables, then the non-None `overrides`."""
        values = {}
        for f in fields(cls):
            raw = os.environ.get("ACTORFLOW_" + f.name.upper())
            if raw:
                try:
                    values[f.name] = int(float(raw)) if f.type == "int" else float(raw)
                except ValueError:
                    raise ValueError(f"$ACTORFLOW_{f.name.upper()} must be a number, got {raw!r}") from None
        values.update({k: v for k, v in overrides.items() if v is not None})
        return replace(cls(), **values)

    def runner_kwargs(self) -> dict:
        """Keyword arguments for aiohttp's AppRunner (its per-connection request handler)."""
        return {"keepalive_timeout": self.idle_timeout, "max_field_size": self.max_field_size,
                "max_line_size": self.max_field_size, "max_headers": self.max_headers,
                "logger": _HTTPLog(log, {})}
        # handler_cancellation stays off: a websocket handler owns its connection and closes it on
        # the peer's EOF (failing the steps that waited on it with UnavailableError); cancelling it
        # from under the reader would turn that into a CancelledError. /health has nothing to cancel.


class _HTTPLog(logging.LoggerAdapter):
    """aiohttp's request-handler logger, minus the traceback for requests that are merely malformed.

    aiohttp logs every request its parser refuses (a control byte in a header, a line too long) with
    "Error handling request" and a traceback at ERROR: anyone who can connect could fill the log.
    Those become one INFO line (the first ten, then one in a thousand); real handler failures keep
    their traceback.
    """

    refused = 0

    def exception(self, msg, *args, exc_info=True, **kwargs):
        if isinstance(exc_info, HttpProcessingError):
            _HTTPLog.refused += 1
            if _HTTPLog.refused <= 10 or _HTTPLog.refused % 1000 == 0:
                self.logger.info(msg + " (malformed request, answered %s: %s; %d so far)", *args, exc_info.code,
                                 str(exc_info.message).splitlines()[0] if exc_info.message else "", _HTTPLog.refused)
            return
        self.logger.error(msg, *args, exc_info=exc_info, **kwargs)


class _Refused(asyncio.Protocol):
    """Answers one connection over the cap with 503 and closes it."""

    def __init__(self, what: str):
        self.what = what

    def connection_made(self, transport) -> None:
        body = f"too many unauthenticated connections to {self.what}; try again later\n".encode()
        transport.write(b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: text/plain\r\n"
                        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        transport.close()


class GuardedSite(web.BaseSite):
    """A TCP site (like aiohttp's TCPSite) that enforces `ConnectionLimits` on untrusted connections."""

    __slots__ = ("_host", "_port", "_limits", "_what", "_pending", "_over_cap", "_reuse_address", "refused")

    def __init__(self, runner: web.BaseRunner, host: str, port: int, limits: ConnectionLimits, *,
                 ssl_context=None, what: str = "this task", reuse_address: bool = True, backlog: int = 128):
        super().__init__(runner, ssl_context=ssl_context, backlog=backlog)
        self._host = host
        self._port = port
        self._limits = limits
        self._what = what
        self._reuse_address = reuse_address
        self._pending: dict[object, asyncio.TimerHandle] = {}   # request handler -> its deadline
        self._over_cap = False
        self.refused = 0            # connections closed over the cap or at their deadline

    @property
    def name(self) -> str:
        return f"{'https' if self._ssl_context else 'http'}://{self._host}:{self._port}"

    @property
    def untrusted(self) -> int:
        """Connections accepted and not yet trusted (nor closed at their deadline)."""
        return len(self._pending)

    async def start(self) -> None:
        await super().start()
        loop = asyncio.get_running_loop()
        server = self._runner.server
        tls = self._ssl_context is not None
        self._server = await loop.create_server(
            lambda: self._accept(server, loop), self._host, self._port, ssl=self._ssl_context,
            backlog=self._backlog, reuse_address=self._reuse_address,
            ssl_handshake_timeout=self._limits.handshake_timeout / 2 if tls else None)

    def _accept(self, server, loop):
        if len(self._pending) >= self._limits.max_unauthenticated:
            self.refused += 1
            if not self._over_cap:
                self._over_cap = True
                log.warning("%s: %d connections are waiting for their token check; refusing more (503) until "
                            "some finish or time out", self._what, len(self._pending))
            return _Refused(self._what)
        self._over_cap = False
        handler = server()
        self._pending[handler] = loop.call_later(self._limits.handshake_timeout, self._expire, handler)
        return handler

    def _expire(self, handler) -> None:
        self._pending.pop(handler, None)
        if handler.transport is not None:      # None: the connection is gone already
            self.refused += 1
            log.info("%s: closing a connection that did not present a valid token within %g s", self._what,
                     self._limits.handshake_timeout)
            handler.force_close()

    def trust(self, request: web.BaseRequest) -> None:
        """The connection of `request` presented the cluster token: no deadline, not counted any more."""
        timer = self._pending.pop(request.protocol, None)
        if timer is not None:
            timer.cancel()

    async def stop(self) -> None:
        for timer in self._pending.values():
            timer.cancel()
        self._pending.clear()
        await super().stop()
