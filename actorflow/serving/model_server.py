"""The model server: TensorFlow Serving's REST API over SavedModel directories, on aiohttp.

Routes (NAME a model name, N a version):
  POST /v1/models/NAME[/versions/N]:predict    {"instances": [...]} or {"inputs": ...} (JSON), or a
                                               binary frame (Content-Type application/x-actorflow-frame)
  POST /v1/models/NAME[/versions/N]:classify   {"examples": [...]}   (classify signatures)
  POST /v1/models/NAME[/versions/N]:regress    {"examples": [...]}   (regress signatures)
  GET  /v1/models/NAME[/versions/N]            version status
  GET  /v1/models/NAME[/versions/N]/metadata   signatures
  GET  /monitoring/prometheus/metrics          Prometheus text format
Errors are `{"error": "..."}` with a 4xx (bad request, unknown model, too large, overloaded) or
5xx status, as TF Serving answers them.

State: `_models` (name -> _Model, each with its loaded versions), `_inflight` (requests being
handled; `stop` waits for it to reach zero), `_tasks` (the pollers, owned and cancelled by `stop`).
A model's base path is polled every `poll_interval_s`: a new numbered version directory with a
complete SavedModel is loaded in a thread, then swapped in on the loop between two requests; the
version it replaces stops being handed out at once and is closed when its last request finishes,
so a swap drops no request.
"""
from __future__ import annotations

import asyncio
import dataclasses
import gc
import hmac
import json
import logging
import os
import re
import time

import numpy as np
from aiohttp import web

from actorflow import errors
from actorflow.saved_model import constants, signature_constants, tag_constants
from actorflow.serving.batching import BatchingParameters, BatchQueue
from actorflow.serving.servable import RequestError, Servable
from actorflow.transport import codec

try:   # orjson writes numpy arrays directly, several times faster than json + tolist
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is in the serving extra
    _orjson = None

log = logging.getLogger(__name__)

__all__ = ["ModelServer", "ModelConfig", "BatchingParameters", "FRAME_CONTENT_TYPE"]

FRAME_CONTENT_TYPE = "application/x-actorflow-frame"
_DT_NAMES = {"float16": "DT_HALF", "float32": "DT_FLOAT", "float64": "DT_DOUBLE", "int8": "DT_INT8",
             "int16": "DT_INT16", "int32": "DT_INT32", "int64": "DT_INT64", "uint8": "DT_UINT8",
             "uint16": "DT_UINT16", "uint32": "DT_UINT32", "uint64": "DT_UINT64", "bool": "DT_BOOL",
             "string": "DT_STRING"}


@dataclasses.dataclass
class ModelConfig:
    """One served model (TF Serving's ModelConfig): `name`, `base_path` (holding version directories
    1, 2, ...), and how many of the highest versions to serve (`num_versions`, TF's latest policy)."""
    name: str
    base_path: str
    num_versions: int = 1


def _dumps(obj) -> bytes:
    if _orjson is not None:
        return _orjson.dumps(obj, option=_orjson.OPT_SERIALIZE_NUMPY)
    return json.dumps(obj, default=lambda a: a.tolist() if isinstance(a, np.ndarray) else a.item()).encode()


def _json(obj, status=200) -> web.Response:
    return web.Response(body=_dumps(obj), status=status, content_type="application/json")


def _error(status: int, message: str) -> web.Response:
    return _json({"error": message}, status)


def _is_frame(content_type: str | None) -> bool:
    # The raw header, not request.content_type, which parses every request's header into a new object.
    return content_type is not None and content_type.partition(";")[0].strip().lower() == FRAME_CONTENT_TYPE


def _native(a: np.ndarray):
    # orjson serializes only native-endian C-contiguous arrays of common dtypes; others go as lists.
    if _orjson is not None and a.flags.c_contiguous and a.dtype.kind in "fiub" and a.dtype.isnative and a.ndim:
        return a
    return a.tolist()


_POST_PATH = re.compile(r"/v1/models/([^/:]+(?:/versions/\d+)?):([^/{}]+)\Z")
_GET_PATH = re.compile(r"/v1/models/([^/:]+)(?:/versions/(\d+))?(/metadata)?\Z")
_METRICS_PATH = "/monitoring/prometheus/metrics"
# ModelServer(tune_gc=True): the GC's first-generation threshold (CPython's default is 700).
GC_THRESHOLD0 = 10_000


class _ServingRunner(web.ServerRunner):
    """The runner of `ModelServer.serve`: on cleanup, after its sites stop listening, the model
    server stops gracefully (requests in flight finish) before the connections close."""

    def __init__(self, model_server: "ModelServer", server: web.Server):
        super().__init__(server)
        self._model_server = model_server

    async def shutdown(self) -> None:
        await self._model_server.stop()


class _Model:
    """A served model: its loaded versions (version -> Servable), their states, and load failures."""

    def __init__(self, cfg: ModelConfig):
        self.cfg = cfg
        self.versions: dict[int, Servable] = {}
        self.states: dict[int, tuple[str, str, str]] = {}     # version -> (state, error code, message)
        self.failed: dict[int, float] = {}                     # version -> mtime of the file that failed
        self.loading = False

    def latest(self) -> Servable | None:
        return self.versions[max(self.versions)] if self.versions else None


class ModelServer:
    """Serves SavedModel directories over TF Serving's REST API, with dynamic batching and hot reload
    (the server of `actorflow serve`; TensorFlow Serving's model server, in process).

    `models`: a list of ModelConfig, or {name: base_path}. `batching`: BatchingParameters, or None for
    one step per request. `max_inflight_steps` bounds the unbatched steps in flight; more concurrent
    requests than `max_concurrent_requests` get 429. `client_max_size` bounds a request body (413).
    `api_key`: when set, requests need `Authorization: Bearer KEY` or `X-API-Key: KEY` (401
    otherwise); the cluster token can be used as the key. A step running over `step_timeout_s` is
    aborted (504); a body not received within `body_timeout_s` gets 408. Embed in an existing aiohttp app with
    `server.attach(app)`, or run alone with `await server.serve(host, port)` / `actorflow serve`.

    `tune_gc`: the cyclic garbage collector's settings for a server process. (1) Once the models are
    loaded, and after each new version loads, the objects alive then move to the collector's
    permanent generation (`gc.freeze`), so that a full collection walks only what was allocated since:
    without it, a full collection of a serving process (about 150,000 objects: actorflow, numpy,
    numba, aiohttp, the graphs) stops the event loop for 40-400 ms every few seconds under load,
    every request in flight waiting behind it. (2) The first generation's threshold goes from 700 to
    `GC_THRESHOLD0` allocations: with tens of requests in flight the live young objects cross 700
    every ~80 requests. Measured with benchmarks/serving_probe.py (64 wrk clients, batching on, the
    collector's own CPU time): CPython's settings cost the digits MLP 6.5 us of CPU per request in
    young collections plus a 120 ms full one every few seconds, and the convnet 105 us per request
    (five 220-320 ms full collections in 4 s); with tune_gc, under 1 us for both. The settings are
    process-wide, so this is off by default and `actorflow serve` turns it on; `stop` restores them.
    When a version is unloaded, the frozen objects are thawed and collected once (one full collection
    per version swap), so that the old version's graph is freed.
    """

    def __init__(self, models, *, batching: BatchingParameters | None = None, poll_interval_s: float = 1.0,
                 max_inflight_steps: int = 8, max_concurrent_requests: int = 4096,
                 client_max_size: int = 64 << 20, api_key: str | None = None, tags=(tag_constants.SERVING,),
                 session_config=None, load_timeout_s: float = 600.0, step_timeout_s: float = 60.0,
                 body_timeout_s: float = 30.0, tune_gc: bool = False):
        if isinstance(models, dict):
            models = [ModelConfig(n, p) for n, p in models.items()]
        self._configs = [m if isinstance(m, ModelConfig) else ModelConfig(*m) for m in models]
        if not self._configs:
            raise ValueError("ModelServer: no models to serve")
        names = [c.name for c in self._configs]
        if len(set(names)) != len(names):
            raise ValueError(f"ModelServer: model names repeat: {names}")
        self.batching = batching
        self.poll_interval_s = float(poll_interval_s)
        self.client_max_size = int(client_max_size)
        self.api_key = api_key or None
        self.tags = tuple(tags)
        self.session_config = session_config
        self.load_timeout_s = load_timeout_s
        self.step_timeout_s = step_timeout_s
        self.body_timeout_s = body_timeout_s
        self.tune_gc = bool(tune_gc)
        self._frozen = False               # tune_gc, and the models of `start` are loaded
        self._gc_threshold = None          # the thresholds tune_gc replaced
        self._models = {c.name: _Model(c) for c in self._configs}
        self._step_slots: asyncio.Semaphore | None = None
        self._max_inflight_steps = int(max_inflight_steps)
        self._max_requests = int(max_concurrent_requests)
        self._inflight = 0
        self._idle: asyncio.Event | None = None
        self._draining = False
        self._tasks: set = set()
        self._retiring: set = set()        # versions no longer handed out, closed once their requests end
        self._started = False
        self.stats: dict = {"requests": 0, "errors": 0, "steps": 0, "rejected": 0, "reloads": 0}
        self._codes: dict = {}
        self._latency_sum = 0.0

    # -- wiring ----------------------------------------------------------------------------------------
    def routes(self) -> list:
        """The aiohttp route definitions (for embedding into another app's router)."""
        return [web.post(r"/v1/models/{spec:[^/:]+(?:/versions/\d+)?}:{verb}", self._route_post),
                web.get(r"/v1/models/{name:[^/:]+}", self._route_status),
                web.get(r"/v1/models/{name:[^/:]+}/versions/{version:\d+}", self._route_status),
                web.get(r"/v1/models/{name:[^/:]+}/metadata", self._route_metadata),
                web.get(r"/v1/models/{name:[^/:]+}/versions/{version:\d+}/metadata", self._route_metadata),
                web.get(_METRICS_PATH, self._handle_metrics)]

    async def _route_post(self, request: web.Request) -> web.StreamResponse:
        return await self._handle_post(request, request.match_info["spec"], request.match_info["verb"])

    async def _route_status(self, request: web.Request) -> web.Response:
        return await self._handle_status(request, request.match_info["name"], request.match_info.get("version"))

    async def _route_metadata(self, request: web.Request) -> web.Response:
        return await self._handle_metadata(request, request.match_info["name"], request.match_info.get("version"))

    async def _dispatch(self, request: web.BaseRequest) -> web.StreamResponse:
        """The routes of `routes()`, matched by hand: the request handler of the server that `serve`
        starts (aiohttp's low-level Server, without an Application's router, middleware and signals,
        which cost a fifth of the event loop's time per request under load)."""
        path = request.path
        m = _POST_PATH.match(path)
        if m is not None:
            if request.method != "POST":
                return _error(405, f"method {request.method} not allowed on {path} (use POST)")
            return await self._handle_post(request, m.group(1), m.group(2))
        m = _GET_PATH.match(path)
        if m is None and path != _METRICS_PATH:
            return _error(404, f"no route for {path} (see TF Serving's REST API: /v1/models/NAME[:predict])")
        if request.method not in ("GET", "HEAD"):
            return _error(405, f"method {request.method} not allowed on {path} (use GET)")
        if m is None:
            return await self._handle_metrics(request)
        if m.group(3):
            return await self._handle_metadata(request, m.group(1), m.group(2))
        return await self._handle_status(request, m.group(1), m.group(2))

    def attach(self, app: web.Application) -> web.Application:
        """Adds the routes to `app` and starts/stops the server with it (on_startup / on_shutdown)."""
        app.router.add_routes(self.routes())

        async def on_startup(_app):
            await self.start()

        async def on_shutdown(_app):
            await self.stop()
        app.on_startup.append(on_startup)
        app.on_shutdown.append(on_shutdown)
        return app

    def make_app(self) -> web.Application:
        """A new aiohttp Application serving only this server's routes."""
        return self.attach(web.Application(client_max_size=self.client_max_size))

    async def serve(self, host: str = "127.0.0.1", port: int = 8501, backlog: int = 1024) -> web.BaseRunner:
        """Loads the models and starts an HTTP server on host:port; returns its runner (`await
        runner.cleanup()` stops it gracefully: new requests get 503 while the ones in flight finish).
        The server is aiohttp's low-level `web.Server` with the routes of `routes()` matched in
        `_dispatch`; `make_app` gives the same API as an Application. `backlog`: connections the
        kernel queues before they are accepted (aiohttp's 128 overflows when a few hundred clients
        connect at once, and each overflowed connection waits a second or more for a SYN retry)."""
        await self.start()
        runner = _ServingRunner(self, web.Server(self._dispatch, access_log=None))
        try:
            await runner.setup()
            await web.TCPSite(runner, host, port, backlog=backlog).start()
        except BaseException:
            await runner.cleanup()
            raise
        return runner

    # -- lifecycle ---------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Loads the highest version of every model (refusing to start when a model has none that
        loads) and starts polling for new ones."""
        if self._started:
            return
        self._started = True
        self._step_slots = asyncio.Semaphore(self._max_inflight_steps)
        for m in self._models.values():
            await self._reload(m)
            if not m.versions:
                why = "; ".join(f"version {v}: {s[2]}" for v, s in sorted(m.states.items())) or "no version directories"
                await self.stop()
                raise errors.NotFoundError(None, None, f"model '{m.cfg.name}': no servable version under "
                                           f"{m.cfg.base_path} ({why})")
        if self.tune_gc:
            gc.collect()            # before any traffic: what is garbage now must not be frozen
            gc.freeze()
            self._frozen = True
            self._gc_threshold = gc.get_threshold()
            if self._gc_threshold[0] and self._gc_threshold[0] < GC_THRESHOLD0:
                gc.set_threshold(GC_THRESHOLD0, *self._gc_threshold[1:])
        if self.poll_interval_s > 0:
            t = asyncio.get_running_loop().create_task(self._poll())
            self._tasks.add(t)

    async def stop(self, timeout: float = 30.0) -> None:
        """Graceful shutdown: refuses new requests (503), waits up to `timeout` s for those in flight,
        then stops polling and closes every version."""
        self._draining = True
        if self._inflight:
            self._idle = asyncio.Event()
            try:
                async with asyncio.timeout(timeout):
                    await self._idle.wait()
            except TimeoutError:
                log.warning("ModelServer.stop: %d requests still running after %.0f s", self._inflight, timeout)
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            try:
                await t
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - the poller's errors are logged already
                pass
        self._tasks.clear()
        for s in list(self._retiring):
            s.close()
        self._retiring.clear()
        for m in self._models.values():
            for s in list(m.versions.values()):
                for b in s.batchers.values():
                    b.cancel()
                s.close()
            m.versions.clear()
        if self._frozen:
            self._frozen = False
            gc.unfreeze()           # the process goes on (an embedding app, tests): collect as before
            gc.set_threshold(*self._gc_threshold)

    # -- versions and hot reload --------------------------------------------------------------------------
    @staticmethod
    def _scan(base: str) -> dict:
        """{version: mtime of its SavedModel file} for the complete version directories under `base`."""
        out = {}
        try:
            names = os.listdir(base)
        except OSError:
            return out
        for n in names:
            if not n.isdigit():
                continue
            f = os.path.join(base, n, constants.SAVED_MODEL_FILENAME)
            try:
                out[int(n)] = os.stat(f).st_mtime
            except OSError:
                continue      # still being written, or not a SavedModel
        return out

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.poll_interval_s)
            for m in self._models.values():
                try:
                    await self._reload(m)
                except Exception:  # noqa: BLE001 - keep serving what is loaded; the next poll retries
                    log.exception("model '%s': reload failed", m.cfg.name)

    async def _reload(self, m: _Model) -> None:
        loop = asyncio.get_running_loop()
        found = await loop.run_in_executor(None, self._scan, m.cfg.base_path)
        wanted = sorted(found, reverse=True)
        wanted = [v for v in wanted if not (v in m.failed and m.failed[v] == found[v])][:m.cfg.num_versions]
        for v in wanted:
            if v in m.versions:
                continue
            m.states[v] = ("LOADING", "OK", "")
            path = os.path.join(m.cfg.base_path, str(v))
            try:
                async with asyncio.timeout(self.load_timeout_s):
                    s = await loop.run_in_executor(None, Servable.load, m.cfg.name, v, path, self.tags,
                                                   self.session_config, self._warmup_sizes(), self.step_timeout_s)
            except Exception as e:  # noqa: BLE001 - a bad export must not take the server down
                m.failed[v] = found[v]
                code = "DATA_LOSS" if isinstance(e, errors.DataLossError) else "UNKNOWN"
                m.states[v] = ("END", code, f"{type(e).__name__}: {e}")
                log.error("model '%s' version %d at %s failed to load: %s", m.cfg.name, v, path, e)
                continue
            m.versions[v] = s
            m.states[v] = ("AVAILABLE", "OK", "")
            if self._frozen:
                gc.freeze()         # the new version's graph and plans live as long as it does
            self.stats["reloads"] += 1
            log.info("model '%s' version %d loaded from %s", m.cfg.name, v, path)
        if found:
            # Versions beyond the newest num_versions, and versions whose directory was removed, are
            # unloaded (as TF Serving does); when nothing is found at all (a base path that is briefly
            # unreadable), what is loaded stays.
            keep = set(sorted((v for v in m.versions if v in found), reverse=True)[:m.cfg.num_versions])
        else:
            keep = set(m.versions)
            if m.versions:
                log.warning("model '%s': no versions found under %s; still serving %s", m.cfg.name,
                            m.cfg.base_path, sorted(m.versions))
        for v in [v for v in m.versions if v not in keep]:
            s = m.versions.pop(v)
            m.states[v] = ("UNLOADING", "OK", "")
            self._retiring.add(s)
            t = loop.create_task(self._retire(m, s))
            self._tasks.add(t)
            t.add_done_callback(self._tasks.discard)

    async def _retire(self, m: _Model, s: Servable) -> None:
        await s.drain()
        self._retiring.discard(s)
        s.close()
        version = s.version
        if self._frozen:
            # The old version's graph was frozen with everything else: thaw, collect once (without
            # holding the servable here), refreeze.
            del s
            gc.unfreeze()
            gc.collect()
            gc.freeze()
        m.states[version] = ("END", "OK", "")
        log.info("model '%s' version %d unloaded", m.cfg.name, version)

    def _warmup_sizes(self) -> tuple:
        if self.batching is None:
            return (1,)
        n = self.batching.max_batch_size
        return tuple(sorted({1, max(1, n // 2), n}))

    def _servable(self, name: str, version: int | None) -> Servable:
        m = self._models.get(name)
        if m is None:
            raise RequestError(404, f"Servable not found for request: Latest({name})")
        s = m.latest() if version is None else m.versions.get(version)
        if s is None:
            what = f"Latest({name})" if version is None else f"Specific({name}, {version})"
            raise RequestError(404, f"Servable not found for request: {what}")
        return s

    # -- request plumbing -----------------------------------------------------------------------------
    def _check_auth(self, request) -> None:
        if self.api_key is None:
            return
        given = request.headers.get("X-API-Key")
        if given is None:
            auth = request.headers.get("Authorization", "")
            given = auth[7:] if auth.startswith("Bearer ") else None
        if given is None or not hmac.compare_digest(given.encode(), self.api_key.encode()):
            raise RequestError(401, "missing or wrong API key (send 'Authorization: Bearer KEY' or 'X-API-Key: KEY')")

    async def _body(self, request) -> bytes:
        n = request.content_length
        if n is not None and n > self.client_max_size:
            raise RequestError(413, f"request body of {n} bytes exceeds the limit of {self.client_max_size} bytes")
        content = request.content
        if n is not None and content.is_eof():
            # The whole body arrived with the headers (a small request): take it without a timeout
            # scope or a waiter, which cost more than the read itself.
            body = content.read_nowait(n)
            if len(body) == n:
                return body
            raise RequestError(400, f"request body ended after {len(body)} of {n} bytes")
        try:
            async with asyncio.timeout(self.body_timeout_s):
                if n is not None:
                    return await request.content.readexactly(n) if n else b""
                chunks, total = [], 0
                async for c in request.content.iter_any():
                    total += len(c)
                    if total > self.client_max_size:
                        raise RequestError(413, f"request body exceeds the limit of {self.client_max_size} bytes")
                    chunks.append(c)
                return b"".join(chunks)
        except TimeoutError:
            raise RequestError(408, f"request body not received within {self.body_timeout_s:g} s") from None
        except asyncio.IncompleteReadError as e:
            raise RequestError(400, f"request body ended after {len(e.partial)} of {n} bytes") from None

    def _enter(self) -> None:
        if self._draining:
            raise RequestError(503, "server is shutting down")
        if self._inflight >= self._max_requests:
            self.stats["rejected"] += 1
            raise RequestError(429, f"too many concurrent requests (limit {self._max_requests}); retry later")
        self._inflight += 1

    def _leave(self) -> None:
        self._inflight -= 1
        if self._inflight == 0 and self._idle is not None:
            self._idle.set()

    def _count(self, status: int, t0: float) -> None:
        self.stats["requests"] += 1
        if status >= 400:
            self.stats["errors"] += 1
        self._codes[status] = self._codes.get(status, 0) + 1
        self._latency_sum += time.perf_counter() - t0

    async def _run(self, s: Servable, runner, feeds: dict) -> dict:
        """Runs converted feeds through the batching queue, or as one step of their own."""
        if self.batching is not None and runner.batchable:
            b = s.batchers.get(runner.key)
            if b is None:
                b = s.batchers[runner.key] = BatchQueue(runner, self.batching, self.stats)
            return await b.submit(feeds)
        async with self._step_slots:
            self.stats["steps"] += 1
            return await runner.run(feeds)

    # -- handlers --------------------------------------------------------------------------------------
    async def _handle_post(self, request: web.BaseRequest, spec: str, verb: str) -> web.StreamResponse:
        t0 = time.perf_counter()
        status = 200
        try:
            if self.api_key is not None:
                self._check_auth(request)
            self._enter()
        except RequestError as e:
            self._count(e.status, t0)
            return _error(e.status, e.message)
        try:
            name, _, ver = spec.partition("/versions/")
            version = int(ver) if ver else None
            if verb not in ("predict", "classify", "regress"):
                raise RequestError(404, f"unknown method ':{verb}' (expected :predict, :classify or :regress)")
            body = await self._body(request)
            s = self._servable(name, version)
            s.acquire()
            try:
                if _is_frame(request.headers.get("Content-Type")):
                    if verb != "predict":
                        raise RequestError(400, f"binary frames are accepted by :predict only, not :{verb}")
                    return await self._predict_frame(s, body)
                doc = self._parse_json(body)
                if verb == "predict":
                    return await self._predict_json(s, doc)
                return await self._classify_regress(s, doc, verb)
            finally:
                s.release()
        except RequestError as e:
            status = e.status
            return _error(e.status, e.message)
        except errors.InvalidArgumentError as e:
            status = 400
            return _error(400, str(e))
        except errors.DeadlineExceededError as e:
            status = 504
            return _error(504, str(e))
        except errors.OpError as e:
            status = 500
            log.warning("request failed: %s", e)
            return _error(500, f"{type(e).__name__}: {e}")
        finally:
            self._leave()
            self._count(status, t0)

    @staticmethod
    def _parse_json(body: bytes):
        if not body:
            raise RequestError(400, "empty request body: expected a JSON object")
        try:
            doc = _orjson.loads(body) if _orjson is not None else json.loads(body)
        except ValueError as e:
            raise RequestError(400, f"JSON Parse error: {e}") from None
        if not isinstance(doc, dict):
            raise RequestError(400, f"JSON value must be an object, got {type(doc).__name__}")
        return doc

    async def _predict_json(self, s: Servable, doc: dict) -> web.Response:
        runner = s.signature(doc.get("signature_name"))
        has_rows, has_cols = "instances" in doc, "inputs" in doc
        if has_rows == has_cols:
            raise RequestError(400, "Missing 'inputs' or 'instances' key" if not has_rows else
                               "Not both 'inputs' and 'instances' keys may be given")
        if has_rows:
            inst = doc["instances"]
            if not isinstance(inst, list) or not inst:
                raise RequestError(400, "'instances' must be a non-empty list")
            if len(runner.input_keys) == 1:
                k = runner.input_keys[0]
                if isinstance(inst[0], dict):
                    rows = []
                    for r in inst:
                        if not isinstance(r, dict):
                            raise RequestError(400, "instances mix objects and plain values")
                        runner.check_keys(r)
                        rows.append(r[k])
                else:
                    rows = inst
                feeds = {k: runner.convert(k, rows, batched=True)}
            else:
                cols: dict = {k: [] for k in runner.input_keys}
                for r in inst:
                    if not isinstance(r, dict):
                        raise RequestError(400, f"signature '{runner.key}' has several inputs "
                                                f"{runner.input_keys}: each instance must be an object naming them")
                    runner.check_keys(r)
                    for k in runner.input_keys:
                        cols[k].append(r[k])
                feeds = {k: runner.convert(k, v, batched=True) for k, v in cols.items()}
            n = len(inst)
            outs = await self._run(s, runner, feeds)
            for k, v in outs.items():
                if np.ndim(v) == 0 or np.shape(v)[0] != n:
                    raise RequestError(400, f"output '{k}' has shape {list(np.shape(v))}, which has no batch "
                                            f"dimension of {n} rows: use the columnar 'inputs' format")
            if len(outs) == 1:
                return _json({"predictions": _native(next(iter(outs.values())))})
            keys = list(outs)
            vals = [outs[k].tolist() for k in keys]
            return _json({"predictions": [dict(zip(keys, r)) for r in zip(*vals)]})
        data = doc["inputs"]
        if len(runner.input_keys) == 1 and not (isinstance(data, dict) and set(data) == set(runner.input_keys)):
            data = {runner.input_keys[0]: data}
        if not isinstance(data, dict):
            raise RequestError(400, f"'inputs' must be an object naming the inputs {runner.input_keys}")
        runner.check_keys(data)
        feeds = {k: runner.convert(k, v, batched=False) for k, v in data.items()}
        outs = await self._run(s, runner, feeds)
        if len(outs) == 1:
            return _json({"outputs": _native(next(iter(outs.values())))})
        return _json({"outputs": {k: _native(v) for k, v in outs.items()}})

    async def _predict_frame(self, s: Servable, body: bytes) -> web.Response:
        try:
            header, off = codec.decode_header(body)
            tensors = codec.decode(header, body, off)
        except codec.FrameError as e:
            raise RequestError(400, f"bad binary frame: {e}") from None
        runner = s.signature(header.get("signature_name"))
        keys = header.get("inputs")
        if not isinstance(keys, list) or len(keys) != len(tensors) or not all(isinstance(k, str) for k in keys):
            raise RequestError(400, "bad binary frame: header 'inputs' must list one name per tensor")
        runner.check_keys(keys)
        feeds = {k: runner.convert(k, t, batched=runner.batchable) for k, t in zip(keys, tensors)}
        outs = await self._run(s, runner, feeds)
        head, bufs = codec.encode({"outputs": list(outs)}, [np.asarray(v) for v in outs.values()])
        return web.Response(body=head + b"".join(bytes(b) for b in bufs), content_type=FRAME_CONTENT_TYPE)

    async def _classify_regress(self, s: Servable, doc: dict, verb: str) -> web.Response:
        runner = s.signature(doc.get("signature_name"))
        want = signature_constants.CLASSIFY_METHOD_NAME if verb == "classify" else signature_constants.REGRESS_METHOD_NAME
        if runner.method_name != want:
            raise RequestError(400, f"Expected {verb} signature method_name to be {want}. Was: {runner.method_name}")
        ex = doc.get("examples")
        if not isinstance(ex, list) or not ex:
            raise RequestError(400, "'examples' must be a non-empty list")
        ctx = doc.get("context") or {}
        if not isinstance(ctx, dict):
            raise RequestError(400, "'context' must be an object")
        k = runner.input_keys[0]
        rows = []
        for e in ex:
            if isinstance(e, dict):
                e = {**ctx, **e}
                if len(e) != 1:
                    raise RequestError(400, f"each example must carry one feature (the '{k}' tensor's row), "
                                            f"got {sorted(e)}")
                e = next(iter(e.values()))
            rows.append(e)
        feeds = {k: runner.convert(k, rows, batched=True)}
        outs = await self._run(s, runner, feeds)
        if verb == "regress":
            v = np.asarray(outs[signature_constants.REGRESS_OUTPUTS]).reshape(len(rows), -1)
            if v.shape[1] != 1:
                raise RequestError(400, f"regress output has {v.shape[1]} values per example, expected 1")
            return _json({"result": v[:, 0].tolist()})
        scores = outs.get(signature_constants.CLASSIFY_OUTPUT_SCORES)
        classes = outs.get(signature_constants.CLASSIFY_OUTPUT_CLASSES)
        result = []
        for i in range(len(rows)):
            sc = None if scores is None else np.asarray(scores[i]).reshape(-1).tolist()
            cl = None if classes is None else np.asarray(classes[i]).reshape(-1).tolist()
            if cl is None:
                cl = [str(j) for j in range(len(sc))]
            if sc is None:
                result.append([[str(c), 0.0] for c in cl])
            else:
                result.append([[str(c), float(x)] for c, x in zip(cl, sc)])
        return _json({"result": result})

    async def _handle_status(self, request: web.BaseRequest, name: str, ver: str | None) -> web.Response:
        try:
            self._check_auth(request)
            m = self._models.get(name)
            if m is None:
                raise RequestError(404, f"Could not find any versions of model {name}")
            items = sorted(m.states.items(), reverse=True)
            if ver is not None:
                items = [(v, st) for v, st in items if v == int(ver)]
                if not items:
                    raise RequestError(404, f"Could not find version {ver} of model {name}")
            return _json({"model_version_status": [
                {"version": str(v), "state": st, "status": {"error_code": code, "error_message": msg}}
                for v, (st, code, msg) in items]})
        except RequestError as e:
            return _error(e.status, e.message)

    async def _handle_metadata(self, request: web.BaseRequest, name: str, ver: str | None) -> web.Response:
        try:
            self._check_auth(request)
            s = self._servable(name, None if ver is None else int(ver))
            sigs = {}
            for key, sig in s.meta_graph.signature_def.items():
                sigs[key] = {"inputs": {k: _info_json(i) for k, i in sig.inputs.items()},
                             "outputs": {k: _info_json(i) for k, i in sig.outputs.items()},
                             "method_name": sig.method_name}
            return _json({"model_spec": {"name": name, "signature_name": "", "version": str(s.version)},
                          "metadata": {"signature_def": {"signature_def": sigs}}})
        except RequestError as e:
            return _error(e.status, e.message)

    async def _handle_metrics(self, request: web.Request) -> web.Response:
        try:
            self._check_auth(request)
        except RequestError as e:
            return _error(e.status, e.message)
        st = self.stats
        lines = ["# TYPE actorflow_serving_requests_total counter"]
        for code, n in sorted(self._codes.items()):
            lines.append(f'actorflow_serving_requests_total{{code="{code}"}} {n}')
        lines += ["# TYPE actorflow_serving_request_seconds_sum counter",
                  f"actorflow_serving_request_seconds_sum {self._latency_sum:.6f}",
                  "# TYPE actorflow_serving_steps_total counter",
                  f"actorflow_serving_steps_total {st['steps'] + st.get('batch_steps', 0)}",
                  "# TYPE actorflow_serving_batch_steps_total counter",
                  f"actorflow_serving_batch_steps_total {st.get('batch_steps', 0)}",
                  "# TYPE actorflow_serving_batched_rows_total counter",
                  f"actorflow_serving_batched_rows_total {st.get('batched_rows', 0)}",
                  "# TYPE actorflow_serving_batched_requests_total counter",
                  f"actorflow_serving_batched_requests_total {st.get('batched_requests', 0)}",
                  "# TYPE actorflow_serving_rejected_total counter",
                  f"actorflow_serving_rejected_total {st['rejected'] + st.get('rejected_batches', 0)}",
                  "# TYPE actorflow_serving_inflight_requests gauge",
                  f"actorflow_serving_inflight_requests {self._inflight}",
                  "# TYPE actorflow_serving_model_versions gauge"]
        for name, m in sorted(self._models.items()):
            lines.append(f'actorflow_serving_model_versions{{model="{name}"}} {len(m.versions)}')
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")


def _info_json(info) -> dict:
    shape = info.tensor_shape
    ts = {"dim": [], "unknown_rank": True} if shape is None else \
        {"dim": [{"size": str(-1 if d is None else d), "name": ""} for d in shape], "unknown_rank": False}
    return {"dtype": _DT_NAMES.get(info.dtype, "DT_INVALID"), "tensor_shape": ts, "name": info.name}
