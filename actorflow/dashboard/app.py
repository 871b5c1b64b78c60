"""The live cluster dashboard: an aiohttp app on loopback that shows what the tasks expose.

    actorflow dashboard --cluster .actorflow/cluster.json      # or: actorflow cluster up --dashboard

Routes: `/` the page (static/index.html), `/static/...` its script, style and the vendored uPlot
(MIT, static/vendor/), `/login` (POST the cluster token), `/api/snapshot` (the Collector's JSON),
`/api/graph.svg` (the placed graph, dashboard/graph_picture.py), `/ws` (a snapshot pushed after every
poll). Everything but the static files needs the cluster token: an `X-Actorflow-Token` header, or a
session cookie that `/login` sets (HttpOnly, SameSite=Strict) for a browser. The token never travels
in a URL, so it never lands in a log or the browser history: a link `http://127.0.0.1:PORT/#token=T`
keeps it in the fragment, which browsers do not send, and the page posts it to /login and drops it.
A request without the token gets 401 with a login form.
"""
from __future__ import annotations

import asyncio
import contextlib
import html
import ipaddress
import json
import logging
import secrets
import threading
from pathlib import Path

from aiohttp import web

from actorflow.cluster.spec import ClusterSpec
from actorflow.dashboard.collector import Collector
from actorflow.dashboard.graph_picture import render_svg, to_dot
from actorflow.transport.channel import TOKEN_HEADER

__all__ = ["Dashboard", "make_app"]

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
COOKIE = "actorflow_dashboard"
SOCKETS = web.AppKey("sockets", set)       # the open websockets of the page

_LOGIN = """<!doctype html><html><head><meta charset="utf-8"><title>actorflow dashboard: log in</title>
<link rel="stylesheet" href="/static/dashboard.css"></head><body class="login">
<main><h1>actorflow dashboard</h1><p class="why">{why}</p>
<form method="post" action="/login"><label>Cluster token
<input type="password" name="token" autocomplete="off" autofocus></label><button type="submit">Log in</button></form>
<p class="hint">The token is in the cluster's spec file (the <code>"token"</code> entry of
<code>.actorflow/cluster.json</code>, mode 0600).</p></main>
<script>
// A link ending in #token=...: the fragment never reaches a server log; post it and drop it.
if (location.hash.startsWith("#token=")) {{
  const t = decodeURIComponent(location.hash.slice(7)); history.replaceState(null, "", location.pathname);
  fetch("/login", {{method: "POST", headers: {{"Content-Type": "application/x-www-form-urlencoded"}},
    body: "token=" + encodeURIComponent(t), redirect: "manual"}}).then(() => location.replace("/"));
}}
</script></body></html>"""


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def make_app(collector: Collector, token: str) -> web.Application:
    """The dashboard's aiohttp app over `collector` (polled by the caller), guarded by `token`."""
    sessions: set = set()
    sockets: set = set()
    graph_cache: dict = {"key": None, "svg": None, "error": None}
    graph_lock = asyncio.Lock()

    def authorized(request: web.Request) -> bool:
        got = request.headers.getall(TOKEN_HEADER, ())
        if len(got) == 1 and secrets.compare_digest(got[0].encode("utf-8", "surrogateescape"), token.encode()):
            return True
        sid = request.cookies.get(COOKIE)
        return sid is not None and sid in sessions

    def refuse(request: web.Request, why: str = "This dashboard needs the cluster token.") -> web.Response:
        if request.path == "/":
            return web.Response(status=401, text=_LOGIN.format(why=html.escape(why)), content_type="text/html")
        return web.json_response({"error": "401 Unauthorized: the dashboard needs the cluster token (an "
                                           f"{TOKEN_HEADER} header, or log in at /)"}, status=401)

    @web.middleware
    async def guard(request: web.Request, handler):
        if request.path.startswith("/static/") or request.path == "/login" or authorized(request):
            resp = await handler(request)
        else:
            resp = refuse(request)
        resp.headers.setdefault("Cache-Control", "no-store")
        resp.headers.setdefault("X-Content-Type-Options", "nosniff")
        resp.headers.setdefault("Referrer-Policy", "no-referrer")
        return resp

    async def index(request):
        return web.FileResponse(STATIC / "index.html")

    async def login(request):
        form = await request.post()
        given = str(form.get("token", "")).strip()
        if not given or not secrets.compare_digest(given.encode("utf-8", "surrogateescape"), token.encode()):
            log.warning("dashboard: refused a login from %s (wrong token)", request.remote)
            return web.Response(status=401, content_type="text/html",
                                text=_LOGIN.format(why="That is not the cluster token."))
        sid = secrets.token_urlsafe(32)
        sessions.add(sid)
        resp = web.HTTPSeeOther("/")
        resp.set_cookie(COOKIE, sid, httponly=True, samesite="Strict", path="/")
        raise resp

    async def snapshot(request):
        return web.json_response(collector.snapshot())

    async def graph_svg(request):
        async with graph_lock:
            if graph_cache["key"] != collector.graph_key:
                graphs = await collector.graphs()
                try:
                    if not any(p["nodes"] for parts in graphs.values() for p in parts):
                        raise RuntimeError("no graph is registered yet: run a step")
                    graph_cache["svg"], graph_cache["error"] = await render_svg(to_dot(graphs)), None
                except RuntimeError as e:
                    graph_cache["svg"], graph_cache["error"] = None, str(e)
                graph_cache["key"] = collector.graph_key
        if graph_cache["svg"] is None:
            return web.json_response({"error": graph_cache["error"]}, status=503)
        return web.Response(text=graph_cache["svg"], content_type="image/svg+xml")

    async def ws(request):
        # A cookie alone is not enough from another origin's page (SameSite=Strict already keeps it
        # out; this is the belt to those braces).
        origin = request.headers.get("Origin")
        if origin is not None and origin.split("://", 1)[-1] != request.host:
            return web.json_response({"error": f"websocket from another origin ({origin}) refused"}, status=403)
        sock = web.WebSocketResponse(heartbeat=30.0)
        await sock.prepare(request)
        sockets.add(sock)
        try:
            await sock.send_str(json.dumps(collector.snapshot()))
            async for _ in sock:          # the page sends nothing; this waits for it to close
                pass
        finally:
            sockets.discard(sock)
        return sock

    app = web.Application(middlewares=[guard])
    app.router.add_get("/", index)
    app.router.add_post("/login", login)
    app.router.add_get("/api/snapshot", snapshot)
    app.router.add_get("/api/graph.svg", graph_svg)
    app.router.add_get("/ws", ws)
    app.router.add_static("/static/", STATIC, follow_symlinks=False)
    app[SOCKETS] = sockets
    return app


async def _broadcast(sockets: set, text: str) -> None:
    for sock in list(sockets):
        try:
            async with asyncio.timeout(5.0):
                await sock.send_str(text)
        except Exception:  # noqa: BLE001 - a page that went away or stalls is dropped
            sockets.discard(sock)
            with contextlib.suppress(Exception):
                await sock.close()


class Dashboard:
    """The dashboard of one cluster, served on `host:port` (loopback) from a thread of its own.

    `spec` is a ClusterSpec (or its dict) and `token` the cluster token; `spec_file` (a file like
    the one `cluster up` writes) gives both. `interval`: seconds between polls of the tasks.
    `restarts`: a callable giving {task: restarts} that a launcher counted (LocalCluster.restarts).
    """

    def __init__(self, spec=None, token: str | None = None, *, spec_file: str | None = None, host: str = "127.0.0.1",
                 port: int = 8470, interval: float = 1.0, restarts=None):
        tls = None
        if spec_file is not None:
            with open(spec_file) as f:
                doc = json.load(f)
            if not isinstance(doc, dict) or "cluster" not in doc or not doc.get("token"):
                raise ValueError(f"{spec_file}: a cluster spec file with a \"cluster\" and a \"token\" entry "
                                 "(as `actorflow cluster up` writes) is needed")
            spec, token, tls = doc["cluster"], token or doc["token"], doc.get("tls")
        if spec is None or not token:
            raise ValueError("Dashboard needs a cluster spec and its token (or spec_file)")
        if not _is_loopback(host):
            raise ValueError(f"the dashboard serves plain HTTP and binds loopback only, not {host!r}; reach it "
                             "from elsewhere through an SSH tunnel (ssh -L)")
        self.spec = spec if isinstance(spec, ClusterSpec) else ClusterSpec(spec)
        self.token = token
        self.host, self.port = host, int(port)
        self.interval = interval
        self._restarts = restarts
        self._tls = tls
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.collector: Collector | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    async def serve(self, ready=None) -> None:
        """Polls the tasks and serves the page until `stop()`."""
        from actorflow.transport.tls import TLSConfig
        tls = TLSConfig.make(self._tls) or self.spec.tls
        ssl = tls.client_context() if tls is not None else None
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with Collector(self.spec, self.token, self.interval, ssl=ssl, restarts=self._restarts) as coll:
            self.collector = coll
            app = make_app(coll, self.token)
            runner = web.AppRunner(app, access_log=None, handle_signals=False)
            await runner.setup()
            site = web.TCPSite(runner, self.host, self.port)
            try:
                await site.start()
            except OSError:
                await runner.cleanup()
                raise
            if ready is not None:
                ready()
            try:
                while not self._stop.is_set():
                    await coll.poll()
                    await _broadcast(app[SOCKETS], json.dumps(coll.snapshot()))
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self.interval):
                            await self._stop.wait()
            finally:
                for sock in list(app[SOCKETS]):
                    with contextlib.suppress(Exception):
                        await sock.close()
                async with asyncio.timeout(5.0):
                    await runner.cleanup()

    def start(self) -> "Dashboard":
        """Serves from a daemon thread; returns once the port listens (or raises why it cannot)."""
        started = threading.Event()
        failure: list = []

        def run():
            try:
                asyncio.run(self.serve(started.set))
            except BaseException as e:  # noqa: BLE001 - handed to start()'s caller
                failure.append(e)
            finally:
                started.set()
        self._thread = threading.Thread(target=run, name="actorflow-dashboard", daemon=True)
        self._thread.start()
        started.wait(30)
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False
