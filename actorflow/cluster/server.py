"""The worker service of one task (tf.train.Server): an aiohttp app on its own event loop.

It hosts the task's runtime and its resources (variables on a parameter server live here, shared by
every client, as long as the server lives), registers partition graphs sent by masters, runs their
steps, and exchanges tensors with other tasks directly over persistent websockets.
"""
from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import logging
import os
import secrets
import threading

import msgpack
import numpy as np
from aiohttp import web

from actorflow import clock, errors
from actorflow.actors.dispatcher import Runtime, new_loop
from actorflow.actors.executable import Executable
from actorflow.actors.node import DEAD
from actorflow.actors.resource import ResourceContainer
from actorflow.actors.tracing import StepTracer, now_us
from actorflow.cluster.cookie import user_cookie
from actorflow.cluster.metrics import CONTENT_TYPE, TaskMetrics
from actorflow.cluster.spec import ClusterSpec, make_target, task_key, tf_config
from actorflow.graph.graph import Graph
from actorflow.kernels.device_arrays import to_host
from actorflow.scheduler.lower import LowerOptions, lower
from actorflow.scheduler.plan import make_plan
from actorflow.transport.budget import ByteBudget, TransportLimits
from actorflow.transport.bulk import BULK_HEADER
from actorflow.transport.channel import MAX_MESSAGE, TASK_HEADER, TOKEN_HEADER, Connection, Peer, accept_bulk
from actorflow.transport.listener import ConnectionLimits, GuardedSite
from actorflow.transport.rendezvous import Rendezvous
from actorflow.transport.tls import TLSConfig

__all__ = ["Server", "WorkerService", "cluster_token", "token_matches"]

log = logging.getLogger(__name__)

MAX_STATUS_NODES = 5000     # nodes of registered graphs one /status reply lists, over all partitions

# Fault injection (installed by the simulator, actorflow/sim/faults.py; None otherwise): an object
# whose `await step_fault_hook.before_step(service, executable, feeds)` runs before each step a
# worker service starts, and may delay it (a straggler) or kill the process (a crash at a save).
step_fault_hook = None


def cluster_token(token: str | None = None) -> str:
    """The token peers must present: `token` if given, else $ACTORFLOW_TOKEN, else the user's cookie
    (cluster/cookie.py: 32 random bytes in a file of mode 0600 that only this user's processes read),
    so that the processes a TF-1.x program forks, each with its own `Server`, agree on it. A token
    must be visible ASCII (it travels in an HTTP header); anything else is a ValueError.
    """
    if not token:
        token = os.environ.get("ACTORFLOW_TOKEN") or user_cookie()
    if not isinstance(token, str) or not token.isascii() or not token.isprintable() or " " in token:
        raise ValueError("a cluster token must be a string of visible ASCII characters (no spaces)")
    return token


def token_matches(request: web.BaseRequest, token: str) -> bool:
    """Whether the request carries exactly one token header equal to `token` (constant time).

    Header bytes that are not ASCII reach aiohttp's str as surrogate escapes; they are compared as
    bytes, so that any header value is a plain refusal rather than a TypeError.
    """
    got = request.headers.getall(TOKEN_HEADER, ())
    if len(got) != 1:
        return False
    try:
        presented = got[0].encode("utf-8", "surrogateescape")
    except UnicodeError:
        return False
    return secrets.compare_digest(presented, token.encode())


class WorkerService:
    """The task's state and RPC handlers; everything runs on `loop`.

    `limits` (transport.listener.ConnectionLimits) bounds what connections without the token may cost;
    `transport_limits` (transport.budget.TransportLimits; from the ACTORFLOW_MAX_* environment variables
    when not given) bounds the memory each peer can make this task hold.
    """

    def __init__(self, cluster: ClusterSpec, job: str, task: int, token: str, loop, tls: TLSConfig | None = None,
                 limits: ConnectionLimits | None = None, transport_limits: TransportLimits | None = None):
        self.cluster = cluster
        self.tls = tls
        self.limits = limits or ConnectionLimits()
        self._client_ssl = tls.client_context() if tls is not None else None
        self.guard: GuardedSite | None = None     # set once the site listens: trusts connections with the token
        self.job = job
        self.task = task
        self.name = task_key(job, task)
        self.token = token
        self.loop = loop
        self.runtime = Runtime(loop)
        self.container = ResourceContainer()
        self.transport_limits = transport_limits if transport_limits is not None else TransportLimits.from_env()
        self.budget = ByteBudget(self.transport_limits.inflight_per_process, self.name)
        self.rendezvous = Rendezvous(self.transport_limits.pending_grace, self.transport_limits.pending_per_peer,
                                     self.budget,
                                     clock=loop.time)
        # Owned here, cancelled by close(): expires tensors of steps that never start.
        self._expirer = loop.create_task(self._expire_loop())
        self.graphs: dict[int, Executable] = {}
        self._graph_keys: dict[bytes, int] = {}
        self._next_handle = 1
        self.peers: dict[str, Peer] = {}
        self.active: dict[int, object] = {}     # step id -> StepState
        self.started = clock.time()
        self.pid = os.getpid()                  # what pings report: a new one tells masters the task restarted
        self.steps_run = 0
        self.refused = 0
        self.connections: set[Connection] = set()
        self.metrics = TaskMetrics(self)

    # -- transport used by Send/Recv actors -------------------------------------------------------
    def send(self, dst: str, step_id: int, key, value) -> None:
        if dst == self.name:
            self.rendezvous.put(step_id, key, value)
            return
        peer = self._peer(dst)
        conn = peer._conn
        header = {"k": "t", "s": step_id, "key": list(key)}
        if value is DEAD:
            header["dead"] = True
            tensors = ()
        else:
            tensors = (value,)
        self.metrics.sent(dst, getattr(value, "nbytes", 0) if tensors else 0)
        if conn is not None and not conn.closed:
            conn.post(header, tensors)
        else:
            t = self.loop.create_task(self._send_later(peer, step_id, header, tensors))
            t.add_done_callback(lambda f: f.cancelled() or f.exception())

    async def _send_later(self, peer, step_id, header, tensors):
        try:
            conn = await peer.connection()
            conn.post(header, tensors)
        except errors.OpError as e:
            self.abort_local(step_id, e)

    def recv(self, step_id: int, key, callback) -> None:
        self.rendezvous.recv(step_id, key, callback)

    def _peer(self, name: str) -> Peer:
        p = self.peers.get(name)
        if p is None:
            job, task = name.split("/")[1][4:], int(name.split("/")[2][5:])
            p = self.peers[name] = Peer(self.cluster.task_address(job, task), self.token, self.handle,
                                        name=name, local_task=self.name, on_close=self.connection_lost,
                                        ssl=self._client_ssl, heartbeat=self.limits.ws_heartbeat,
                                        budget=self.budget, inflight_limit=self.transport_limits.inflight_per_connection,
                                        on_refuse=self.refuse_frame)
        return p

    # -- incoming frames ------------------------------------------------------------------------------
    def handle(self, conn: Connection, header: dict, tensors):
        kind = header.get("k")
        if kind == "t":
            step_id = header.get("s")
            self.metrics.received(_edge_source(tuple(header["key"])) or conn.name,
                                  getattr(tensors[0], "nbytes", 0) if tensors else 0)
            err = self.rendezvous.put(step_id, tuple(header["key"]), DEAD if header.get("dead") else tensors[0],
                                      origin=conn.name)
            if err is not None:
                self.abort_local(step_id, err)
            return None
        if kind == "call":
            return self._call(conn, header, tensors)
        log.warning("%s: ignoring frame of unknown kind %r from %s", self.name, kind, conn.name)
        return None

    def refuse_frame(self, conn, header: dict, error) -> None:
        """A frame from `conn` was over its byte budget and dropped: fail what it belonged to."""
        kind = header.get("k")
        if kind == "t" and isinstance(header.get("s"), int):
            self.abort_local(header["s"], error)
        elif kind == "call" and isinstance(header.get("i"), int):
            conn.reply(header, error=error)

    async def _expire_loop(self) -> None:
        period = min(max(self.transport_limits.pending_grace / 4, 0.05), 5.0)
        while True:
            await asyncio.sleep(period)
            self.rendezvous.expire()

    async def _call(self, conn, header, tensors):
        method = header.get("m")
        fn = getattr(self, f"rpc_{method}", None)
        try:
            if fn is None:
                raise errors.UnimplementedError(None, None, f"{self.name} has no method '{method}'")
            result, out = await fn(header.get("a") or {}, tensors)
            conn.reply(header, result, out)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - every failure goes back to the caller
            if not isinstance(e, errors.OpError):
                log.exception("%s: %s failed", self.name, method)
            conn.reply(header, error=e)

    # -- RPC methods --------------------------------------------------------------------------------
    async def rpc_ping(self, args, tensors):
        return {"task": self.name, "time": clock.time(), "steps": self.steps_run, "uptime": clock.time() - self.started,
                "pid": self.pid}, ()

    async def rpc_status(self, args, tensors):
        return self.status(graphs=bool(args.get("graphs"))), ()

    def status(self, graphs: bool = False) -> dict:
        """What the dashboard shows of this task beside /metrics: identity, steps, the checkpoint shards
        this process wrote lately, and with `graphs` the registered partitions (nodes, inputs, and the
        peer of each _Send/_Recv), at most MAX_STATUS_NODES nodes in all."""
        from actorflow.checkpoint_format import recent_shards
        doc = {"task": self.name, "pid": os.getpid(), "started": self.started, "uptime": clock.time() - self.started,
               "steps": self.steps_run, "active_steps": len(self.active), "graphs_registered": len(self.graphs),
               "graph_handles": sorted(self.graphs), "checkpoints": list(recent_shards)}
        if graphs:
            budget = MAX_STATUS_NODES
            parts = []
            for h, exe in sorted(self.graphs.items()):
                nodes = []
                for op in exe.plan.ops:
                    if budget <= 0:
                        break
                    budget -= 1
                    node = [op.name, op.type, [t.op.name for t in op.inputs], [c.name for c in op.control_inputs]]
                    if op.type in ("_Send", "_Recv"):
                        node.append({"key": op.attrs.get("key"), "send": op.attrs.get("send_device"),
                                     "recv": op.attrs.get("recv_device")})
                    nodes.append(node)
                parts.append({"handle": h, "nodes": nodes, "truncated": len(nodes) < len(exe.plan.ops)})
            doc["graphs"] = parts
        return doc

    async def rpc_cluster(self, args, tensors):
        return {"cluster": self.cluster.as_dict(), "job": self.job, "task": self.task}, ()

    async def rpc_register_graph(self, args, tensors):
        if not tensors or tensors[0].dtype != np.uint8 or tensors[0].ndim != 1:
            raise errors.InvalidArgumentError(None, None, "register_graph expects the serialized graph as a uint8 payload")
        data = tensors[0].tobytes()
        sig = hashlib.sha256(data + repr((args.get("feeds"), args.get("fetches"), args.get("targets"),
                                          args.get("soft_placement"), args.get("rewrites"),
                                          args.get("jit_level"))).encode()).digest()
        h = self._graph_keys.get(sig)
        if h is not None and h in self.graphs:
            return {"handle": h, "pid": self.pid}, ()
        g = Graph.from_msgpack(data)
        feeds = [g.get_tensor_by_name(n) for n in args.get("feeds", [])]
        fetches = [g.get_tensor_by_name(n) for n in args.get("fetches", [])]
        targets = [g.get_operation_by_name(n) for n in args.get("targets", [])]
        # The partition is compiled here, once: the same passes as a local session's plan, switched as
        # the client's ConfigProto asked (its rewrite switches and global_jit_level travel in `args`).
        # Tasks of a cluster use their GPUs for ops placed there explicitly (e.g. "/job:worker/task:0/
        # device:GPU:0"); unconstrained ops stay on the CPU (see the GPU notes in docs/ops.md).
        options = LowerOptions.from_config(None, soft_placement=bool(args.get("soft_placement", False)),
                                           auto_gpu=False,
                                           rewrites=tuple((str(k), bool(v)) for k, v in args.get("rewrites") or ()),
                                           jit_level=int(args.get("jit_level") or 0))
        exe = Executable(self.runtime, lower(make_plan(g, feeds, fetches, targets), None, options), self.container,
                         transport=self)
        h = self._next_handle
        self._next_handle += 1
        self.graphs[h] = exe
        self._graph_keys[sig] = h
        return {"handle": h, "pid": self.pid}, ()

    async def rpc_deregister_graph(self, args, tensors):
        self.graphs.pop(args.get("handle"), None)
        return None, ()

    async def rpc_run_graph(self, args, tensors):
        exe = self.graphs.get(args["handle"])
        if exe is None:
            raise errors.NotFoundError(None, None, f"{self.name}: graph handle {args['handle']} is not registered "
                                                   "(the task may have restarted)")
        step_id = args["step"]
        t_recv = now_us()
        fut = self.loop.create_future()

        def done(results, error):
            if not fut.done():
                fut.set_result((results, error))
        feeds = list(tensors)
        # sim: fault-injection seam (`step_fault_hook` above); a no-op unless a scenario installs one
        if step_fault_hook is not None:
            await step_fault_hook.before_step(self, exe, feeds)
        # A traced step (RunOptions.trace_level) sends its stats back with the reply, with this
        # task's clock at request and reply so that the master can align them (actors/tracing.py).
        # Unasked, one step in ACTORFLOW_METRICS_TRACE_EVERY is traced for /metrics' kernel times.
        level = args.get("trace") or self.metrics.sample_trace()
        tracer = StepTracer(exe, level, f"{self.name}/device:CPU:0") if level else None
        self.rendezvous.start(step_id)
        step = exe.start(feeds, done, step_id=step_id, trace=tracer)
        self.active[step_id] = step
        timeout = args.get("timeout")
        try:
            async with asyncio.timeout(timeout):
                results, error = await fut
        except TimeoutError:
            err = errors.DeadlineExceededError(None, None, f"{self.name}: step {step_id} timed out after {timeout:g} s")
            self.metrics.step_failures.inc()
            self.abort_local(step_id, err)
            raise err from None
        except asyncio.CancelledError:
            self.abort_local(step_id, errors.CancelledError(None, None, f"step {step_id} cancelled"))
            raise
        finally:
            self.active.pop(step_id, None)
            self.rendezvous.finish(step_id)
        if error is not None:
            self.metrics.step_failures.inc()
            self.rendezvous.abort(step_id, error)
            raise error
        self.steps_run += 1
        self.metrics.steps.inc()
        self.metrics.step_seconds.observe((now_us() - t_recv) / 1e6)
        out = [np.asarray(to_host(r)) for r in results]
        if tracer is not None:
            self.metrics.add_trace(tracer.result)
        if not args.get("trace"):
            return None, out
        # The stats can outgrow a message header: they travel as one more (uint8) payload.
        out.append(np.frombuffer(msgpack.packb(tracer.result), np.uint8))
        return {"t_recv": t_recv, "t_send": now_us()}, out

    async def rpc_abort_step(self, args, tensors):
        err = errors.from_code(args.get("code", errors.AbortedError.error_code), args.get("message", "step aborted"))
        self.abort_local(args["step"], err)
        return None, ()

    def connection_lost(self, conn, error) -> None:
        """A connection to or from another task failed: tensors it carried may be lost, so every
        step here still waiting for a tensor from that task fails now instead of hanging."""
        task = conn.peer_task
        # Tensors it delivered for steps that have not started here would only wait for the grace period.
        self.rendezvous.drop_origin(conn.name, errors.UnavailableError(
            None, None, f"{self.name}: lost the connection to {conn.name} before the step started here: "
                        f"{getattr(error, 'message', error)}"))
        if not task or not task.startswith("/job:"):
            return
        err = errors.UnavailableError(None, None, f"{self.name}: lost the connection to {task}: "
                                                  f"{getattr(error, 'message', error)}")
        for step_id in self.rendezvous.waiting_on(lambda key: _edge_source(key) == task):
            self.abort_local(step_id, err)

    def abort_local(self, step_id: int, error) -> None:
        self.rendezvous.abort(step_id, error)
        step = self.active.get(step_id)
        if step is not None:
            step.fail(error)

    async def rpc_variables(self, args, tensors):
        names = self.container.names()
        return {"names": names}, ()

    async def close(self):
        self._expirer.cancel()
        for p in list(self.peers.values()):
            await p.close()
        for c in list(self.connections):
            try:
                async with asyncio.timeout(1.0):
                    await c.close()
            except (TimeoutError, Exception):  # noqa: BLE001 - closing anyway
                pass
        self.runtime.pool.shutdown()


def _edge_source(key) -> str | None:
    """The sending task of a rendezvous key ((edge, frame key); edge = "tensor;src->dst")."""
    edge = key[0] if isinstance(key, tuple) else key
    if not isinstance(edge, str) or ";" not in edge:
        return None
    return edge.split(";", 1)[1].split("->", 1)[0]


_HANDSHAKE_HEADERS = ("Upgrade", "Connection", "Sec-WebSocket-Key", "Sec-WebSocket-Version",
                      "Sec-WebSocket-Extensions", "Sec-WebSocket-Protocol", BULK_HEADER)


def make_app(service: WorkerService) -> web.Application:
    app = web.Application(client_max_size=MAX_MESSAGE)

    def authorize(request: web.Request) -> None:
        if not token_matches(request, service.token):
            service.refused += 1
            # The first refusals, then one in a thousand: a flood of bad tokens must not flood the log.
            if service.refused <= 10 or service.refused % 1000 == 0:
                log.warning("%s: refused a connection from %s without a valid cluster token (%d refused so far)",
                            service.name, request.remote, service.refused)
            raise web.HTTPUnauthorized(text="invalid or missing cluster token")
        if service.guard is not None:
            service.guard.trust(request)

    async def ws_handler(request: web.Request):
        authorize(request)
        ws = web.WebSocketResponse(max_msg_size=MAX_MESSAGE, compress=False, autoping=True,
                                   heartbeat=service.limits.ws_heartbeat)
        peer = request.headers.get(TASK_HEADER, "client")
        if not peer.isascii() or not peer.isprintable() or len(peer) > 200:
            peer = "client"     # only a label for logs and errors, but it must not garble them
        name = f"{peer} ({request.remote}) -> {service.name}"
        for h in _HANDSHAKE_HEADERS:
            # aiohttp quotes these in its 400 text and fails to encode non-ASCII ones (a 500 and a traceback).
            if any(not v.isascii() for v in request.headers.getall(h, ())):
                raise web.HTTPBadRequest(text=f"the {h} header of a websocket handshake must be ASCII")
        bulk = accept_bulk(request, ws, name)
        try:
            await ws.prepare(request)
        except BaseException:
            if bulk is not None:
                bulk.uninstall()
            raise
        conn = Connection(ws, service.handle, name, peer_task=peer, on_close=service.connection_lost, bulk=bulk,
                          budget=service.budget, inflight_limit=service.transport_limits.inflight_per_connection,
                          on_refuse=service.refuse_frame)
        service.connections.add(conn)
        try:
            await conn.serve()
        finally:
            service.connections.discard(conn)
        return ws

    async def health(request: web.Request):
        authorize(request)
        return web.json_response({"task": service.name, "steps": service.steps_run, "pid": service.pid,
                                  "uptime": clock.time() - service.started})

    async def status(request: web.Request):
        """The task's status document (WorkerService.status); `?graphs=1` adds its partitions."""
        authorize(request)
        return web.json_response(service.status(graphs=request.query.get("graphs") == "1"))

    async def metrics(request: web.Request):
        """Prometheus metrics of this task (cluster/metrics.py); the token as for /health."""
        if not secrets.compare_digest(request.headers.get(TOKEN_HEADER, ""), service.token):
            service.refused += 1
            raise web.HTTPUnauthorized(text="invalid or missing cluster token")
        return web.Response(body=service.metrics.exposition(), headers={"Content-Type": CONTENT_TYPE})

    app.router.add_get("/ws", ws_handler)
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/status", status)
    return app


class Server:
    """An in-process server for one task of a cluster (tf.train.Server).

    `Server(cluster, job_name, task_index)`; with no cluster, TF_CONFIG gives it. Binds to 127.0.0.1
    unless `bind` says otherwise. `target` is the address sessions connect to; it carries the token.

    Differs from TF: peers authenticate with a cluster token: `token`, else $ACTORFLOW_TOKEN, else the
    user's cookie (~/.actorflow/cookie, mode 0600: every process of this user agrees on it, other
    users cannot read it). `tls` (a TLSConfig or a dict of cert/key/ca PEM paths; else the cluster spec's, else
    $ACTORFLOW_TLS_*) serves over TLS and connects to the other tasks over TLS; with a CA, TLS is
    mutual. `limits` (a ConnectionLimits; else $ACTORFLOW_* variables) bounds what connections
    without the token may cost and sets the websocket heartbeat. `transport_limits`
    (af.train.TransportLimits) bounds the memory each peer can make the task hold; by default the
    ACTORFLOW_MAX_* environment variables, else 2 GiB in flight per connection, 4 GiB per process,
    2 GiB waiting per peer, and 60 s for tensors of a step that has not started (transport/budget.py).
    """

    def __init__(self, server_or_cluster_def=None, job_name=None, task_index=None, protocol=None, config=None,
                 start=True, token=None, bind="127.0.0.1", tls=None, limits: ConnectionLimits | None = None,
                 transport_limits: TransportLimits | None = None):
        if server_or_cluster_def is None:
            cfg = tf_config()
            if cfg is None:
                raise ValueError("Server needs a ClusterSpec (or the TF_CONFIG environment variable)")
            server_or_cluster_def, job_name, task_index = cfg
        self.cluster = ClusterSpec(server_or_cluster_def)
        if job_name is None:
            jobs = self.cluster.jobs
            if len(jobs) != 1:
                raise ValueError("job_name must be given when the cluster has several jobs")
            job_name = jobs[0]
        self.job_name = job_name
        self.task_index = int(task_index or 0)
        self.address = self.cluster.task_address(job_name, self.task_index)
        self.token = cluster_token(token)
        self.tls = TLSConfig.make(tls) or self.cluster.tls or TLSConfig.from_env()
        if self.tls is not None and self.tls.cert is None:
            raise ValueError("a TLS server needs a certificate and key (tls_cert, tls_key); only a CA was given")
        self.limits = limits if limits is not None else ConnectionLimits.from_env()
        self.bind = bind
        self.transport_limits = transport_limits if transport_limits is not None else TransportLimits.from_env()
        self._thread = None
        self._loop = None
        self._stopped = threading.Event()
        self.service: WorkerService | None = None
        if start:
            self.start()

    @property
    def target(self) -> str:
        """`af://host:port?token=T` (`afs://...` with the TLS files to connect with, when serving TLS)."""
        return make_target(self.address, self.token, self.tls)

    @property
    def server_def(self):
        return {"cluster": self.cluster.as_dict(), "job_name": self.job_name, "task_index": self.task_index}

    def start(self) -> None:
        if self._thread is not None:
            return
        ready = threading.Event()
        failure = []
        self._loop = new_loop()

        def run():
            asyncio.set_event_loop(self._loop)
            try:
                self._loop.run_until_complete(self._serve(ready))
            except BaseException as e:  # noqa: BLE001
                failure.append(e)
                ready.set()
            finally:
                self._stopped.set()

        self._thread = threading.Thread(target=run, name=f"actorflow-server-{self.job_name}-{self.task_index}",
                                        daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]

    async def _serve(self, ready: threading.Event):
        # Load the kernel modules before reporting healthy: imports must not stall the loop (and
        # heartbeats) during the first steps.
        from actorflow.kernels.cpu.blas import backend
        from actorflow.kernels.registry import registered_ops
        registered_ops("CPU")
        backend()          # loads MKL's libraries (~0.4 s) when it is installed
        self.service = WorkerService(self.cluster, self.job_name, self.task_index, self.token,
                                     asyncio.get_running_loop(), tls=self.tls, limits=self.limits,
                                     transport_limits=self.transport_limits)
        server_ssl = self.tls.server_context() if self.tls is not None else None
        runner = web.AppRunner(make_app(self.service), access_log=None, handle_signals=False,
                               **self.limits.runner_kwargs())
        await runner.setup()
        port = int(self.address.rsplit(":", 1)[1])
        site = GuardedSite(runner, self.bind, port, self.limits, ssl_context=server_ssl, what=self.service.name)
        self.service.guard = site
        await site.start()
        if server_ssl is None and not _is_loopback(self.bind):
            log.warning("%s: serving on %s without TLS: the cluster token and every tensor cross the network in "
                        "clear text, where anyone on the path can read them and, with the token, run code on "
                        "this task; give tls_cert/tls_key and a CA (--tls-cert/--tls-key/--tls-ca)",
                        self.service.name, self.bind)
        elif server_ssl is not None and not self.tls.mutual:
            log.info("%s: TLS without a CA: clients are authenticated by the token only", self.service.name)
        self._stop_event = asyncio.Event()
        ready.set()
        try:
            await self._stop_event.wait()
        finally:
            await self.service.close()
            try:
                async with asyncio.timeout(3.0):
                    await runner.cleanup()
            except TimeoutError:
                log.warning("%s: some connections did not close in time", self.service.name)

    def join(self) -> None:
        """Blocks until the server stops (tf.train.Server.join)."""
        self._stopped.wait()

    def stop(self) -> None:
        if self._loop is not None and not self._stopped.is_set():
            self._loop.call_soon_threadsafe(self._stop_event.set)
            self._stopped.wait(10)

    @staticmethod
    def create_from_resolver(resolver, **kwargs) -> "Server":
        """A server for the task a cluster resolver names (TF_CONFIG, Slurm, Kubernetes...): its
        cluster spec, job and index; binds every interface for a non-loopback address. TF 1.x has no
        such constructor; `tf.distribute.Server(resolver.cluster_spec(), job, index)` is the TF way."""
        from actorflow.cluster.resolver import server_for
        return server_for(resolver, **kwargs)

    @staticmethod
    def create_local_server(config=None, start=True):
        """A one-task server on a free loopback port with a random token (tf.train.Server.create_local_server)."""
        from actorflow.cluster.local import free_port
        return Server({"localhost": [f"127.0.0.1:{free_port()}"]}, "localhost", 0, config=config, start=start)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False       # a host name, or "" / "0.0.0.0" (every interface)
