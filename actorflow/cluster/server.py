"""The worker service of one task (tf.train.Server): an aiohttp app on its own event loop.

It hosts the task's runtime and its resources (variables on a parameter server live here, shared by
every client, as long as the server lives), registers partition graphs sent by masters, runs their
steps, and exchanges tensors with other tasks directly over persistent websockets.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import secrets
import threading
import time

import numpy as np
from aiohttp import web

from actorflow import errors
from actorflow.actors.node import DEAD
from actorflow.actors.resource import ResourceContainer
from actorflow.actors.runtime import Executable, Runtime, _new_loop
from actorflow.cluster.spec import ClusterSpec, task_key, tf_config
from actorflow.graph.graph import Graph
from actorflow.kernels.device_arrays import to_host
from actorflow.scheduler.plan import make_plan
from actorflow.sim import faults  # sim: fault-injection hooks, None unless a scenario installs one
from actorflow.transport.budget import ByteBudget, TransportLimits
from actorflow.transport.channel import MAX_MESSAGE, TASK_HEADER, TOKEN_HEADER, Connection, Peer, accept_bulk
from actorflow.transport.rendezvous import Rendezvous

__all__ = ["Server", "WorkerService", "cluster_token"]

log = logging.getLogger(__name__)


def cluster_token(cluster: ClusterSpec, token: str | None = None) -> str:
    """The token peers must present: given, else $ACTORFLOW_TOKEN, else one derived from the spec
    (not secret: fine on loopback, set a real token for anything else)."""
    if token:
        return token
    env = os.environ.get("ACTORFLOW_TOKEN")
    if env:
        return env
    return hashlib.sha256(("actorflow:" + cluster.to_json()).encode()).hexdigest()[:32]


class WorkerService:
    """The task's state and RPC handlers; everything runs on `loop`.

    `limits` (transport.budget.TransportLimits; from the ACTORFLOW_MAX_* environment variables when
    not given) bounds the memory each peer can make this task hold.
    """

    def __init__(self, cluster: ClusterSpec, job: str, task: int, token: str, loop,
                 limits: TransportLimits | None = None):
        self.cluster = cluster
        self.job = job
        self.task = task
        self.name = task_key(job, task)
        self.token = token
        self.loop = loop
        self.runtime = Runtime(loop)
        self.container = ResourceContainer()
        self.limits = limits if limits is not None else TransportLimits.from_env()
        self.budget = ByteBudget(self.limits.inflight_per_process, self.name)
        self.rendezvous = Rendezvous(self.limits.pending_grace, self.limits.pending_per_peer, self.budget,
                                     clock=loop.time)
        # Owned here, cancelled by close(): expires tensors of steps that never start.
        self._expirer = loop.create_task(self._expire_loop())
        self.graphs: dict[int, Executable] = {}
        self._graph_keys: dict[bytes, int] = {}
        self._next_handle = 1
        self.peers: dict[str, Peer] = {}
        self.active: dict[int, object] = {}     # step id -> StepState
        self.started = time.time()
        self.steps_run = 0
        self.refused = 0
        self.connections: set[Connection] = set()

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
                                        budget=self.budget, inflight_limit=self.limits.inflight_per_connection,
                                        on_refuse=self.refuse_frame)
        return p

    # -- incoming frames ------------------------------------------------------------------------------
    def handle(self, conn: Connection, header: dict, tensors):
        kind = header.get("k")
        if kind == "t":
            step_id = header.get("s")
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
        period = min(max(self.limits.pending_grace / 4, 0.05), 5.0)
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
        return {"task": self.name, "time": time.time(), "steps": self.steps_run, "uptime": time.time() - self.started,
                "pid": os.getpid()}, ()

    async def rpc_cluster(self, args, tensors):
        return {"cluster": self.cluster.as_dict(), "job": self.job, "task": self.task}, ()

    async def rpc_register_graph(self, args, tensors):
        if not tensors or tensors[0].dtype != np.uint8 or tensors[0].ndim != 1:
            raise errors.InvalidArgumentError(None, None, "register_graph expects the serialized graph as a uint8 payload")
        data = tensors[0].tobytes()
        sig = hashlib.sha256(data + repr((args.get("feeds"), args.get("fetches"), args.get("targets"), args.get("soft_placement"))).encode()).digest()
        h = self._graph_keys.get(sig)
        if h is not None and h in self.graphs:
            return {"handle": h, "pid": os.getpid()}, ()
        g = Graph.from_msgpack(data)
        feeds = [g.get_tensor_by_name(n) for n in args.get("feeds", [])]
        fetches = [g.get_tensor_by_name(n) for n in args.get("fetches", [])]
        targets = [g.get_operation_by_name(n) for n in args.get("targets", [])]
        plan = make_plan(g, feeds, fetches, targets)
        # Tasks of a cluster use their GPUs for ops placed there explicitly (e.g. "/job:worker/task:0/
        # device:GPU:0"); unconstrained ops stay on the CPU (see the GPU notes in docs/ops.md).
        exe = Executable(self.runtime, plan, self.container, transport=self,
                         soft_placement=bool(args.get("soft_placement", False)), auto_gpu=False)
        h = self._next_handle
        self._next_handle += 1
        self.graphs[h] = exe
        self._graph_keys[sig] = h
        return {"handle": h, "pid": os.getpid()}, ()

    async def rpc_deregister_graph(self, args, tensors):
        self.graphs.pop(args.get("handle"), None)
        return None, ()

    async def rpc_run_graph(self, args, tensors):
        exe = self.graphs.get(args["handle"])
        if exe is None:
            raise errors.NotFoundError(None, None, f"{self.name}: graph handle {args['handle']} is not registered "
                                                   "(the task may have restarted)")
        step_id = args["step"]
        fut = self.loop.create_future()

        def done(results, error):
            if not fut.done():
                fut.set_result((results, error))
        feeds = list(tensors)
        # sim: fault-injection seam (actorflow/sim/faults.py); a no-op unless a scenario installs one
        if faults.STEP is not None:
            await faults.STEP.before_step(self, exe, feeds)
        self.rendezvous.start(step_id)
        step = exe.start(feeds, done, step_id=step_id)
        self.active[step_id] = step
        timeout = args.get("timeout")
        try:
            async with asyncio.timeout(timeout):
                results, error = await fut
        except TimeoutError:
            err = errors.DeadlineExceededError(None, None, f"{self.name}: step {step_id} timed out after {timeout:g} s")
            self.abort_local(step_id, err)
            raise err from None
        except asyncio.CancelledError:
            self.abort_local(step_id, errors.CancelledError(None, None, f"step {step_id} cancelled"))
            raise
        finally:
            self.active.pop(step_id, None)
            self.rendezvous.finish(step_id)
        if error is not None:
            self.rendezvous.abort(step_id, error)
            raise error
        self.steps_run += 1
        return None, [np.asarray(to_host(r)) for r in results]

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


def make_app(service: WorkerService) -> web.Application:
    app = web.Application(client_max_size=MAX_MESSAGE)

    async def ws_handler(request: web.Request):
        if not secrets.compare_digest(request.headers.get(TOKEN_HEADER, ""), service.token):
            service.refused += 1
            log.warning("%s: refused a connection from %s without a valid cluster token", service.name,
                        request.remote)
            raise web.HTTPUnauthorized(text="invalid or missing cluster token")
        ws = web.WebSocketResponse(max_msg_size=MAX_MESSAGE, compress=False, autoping=True)
        peer = request.headers.get(TASK_HEADER, "client")
        name = f"{peer} ({request.remote}) -> {service.name}"
        bulk = accept_bulk(request, ws, name)
        try:
            await ws.prepare(request)
        except BaseException:
            if bulk is not None:
                bulk.uninstall()
            raise
        conn = Connection(ws, service.handle, name, peer_task=peer, on_close=service.connection_lost, bulk=bulk,
                          budget=service.budget, inflight_limit=service.limits.inflight_per_connection,
                          on_refuse=service.refuse_frame)
        service.connections.add(conn)
        try:
            await conn.serve()
        finally:
            service.connections.discard(conn)
        return ws

    async def health(request: web.Request):
        if not secrets.compare_digest(request.headers.get(TOKEN_HEADER, ""), service.token):
            service.refused += 1
            raise web.HTTPUnauthorized(text="invalid or missing cluster token")
        return web.json_response({"task": service.name, "steps": service.steps_run, "pid": os.getpid(),
                                  "uptime": time.time() - service.started})

    app.router.add_get("/ws", ws_handler)
    app.router.add_get("/health", health)
    return app


class Server:
    """An in-process server for one task of a cluster (tf.train.Server).

    `Server(cluster, job_name, task_index)`; with no cluster, TF_CONFIG gives it. Binds to 127.0.0.1
    unless `bind` says otherwise. `target` is the address sessions connect to. `limits`
    (af.train.TransportLimits) bounds the memory each peer can make the task hold; by default the
    ACTORFLOW_MAX_* environment variables, else 2 GiB in flight per connection, 4 GiB per process,
    2 GiB waiting per peer, and 60 s for tensors of a step that has not started (transport/budget.py).
    """

    def __init__(self, server_or_cluster_def=None, job_name=None, task_index=None, protocol=None, config=None,
                 start=True, token=None, bind="127.0.0.1", limits: TransportLimits | None = None):
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
        self.token = cluster_token(self.cluster, token)
        self.bind = bind
        self.limits = limits if limits is not None else TransportLimits.from_env()
        self._thread = None
        self._loop = None
        self._stopped = threading.Event()
        self.service: WorkerService | None = None
        if start:
            self.start()

    @property
    def target(self) -> str:
        return f"af://{self.address}?token={self.token}"

    @property
    def server_def(self):
        return {"cluster": self.cluster.as_dict(), "job_name": self.job_name, "task_index": self.task_index}

    def start(self) -> None:
        if self._thread is not None:
            return
        ready = threading.Event()
        failure = []
        self._loop = _new_loop()

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
                                     asyncio.get_running_loop(), limits=self.limits)
        runner = web.AppRunner(make_app(self.service), access_log=None, handle_signals=False)
        await runner.setup()
        port = int(self.address.rsplit(":", 1)[1])
        site = web.TCPSite(runner, self.bind, port, reuse_address=True)
        await site.start()
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
    def create_local_server(config=None, start=True):
        from actorflow.cluster.local import free_port
        return Server({"localhost": [f"127.0.0.1:{free_port()}"]}, "localhost", 0, config=config, start=start)
