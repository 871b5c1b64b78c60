"""The master of a session with a cluster target: place, partition, register, run.

The master lives in the client's process, on the actorflow runtime loop. It places the plan's ops on
the cluster's tasks, cuts the graph into one partition per task (with _Send/_Recv on cut edges),
registers each partition with its task once, and then runs a step by asking every task to run its
partition under one step id; tasks exchange tensors directly, never through the master.

Every wait of a step (connecting to a task, registering a partition, running the partitions, and the
client thread waiting for the master) ends at the step's deadline (`RunOptions(timeout_in_ms=...)`,
`ConfigProto(operation_timeout_in_ms=...)` or `run(timeout=...)`) with a DeadlineExceededError that
names what it waited for. A step whose fetches are all fed or constant runs no partition at all and
completes in the client.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import os
import random
from dataclasses import dataclass

import msgpack
import numpy as np

from actorflow import clock, errors
from actorflow.actors.dispatcher import default_runtime
from actorflow.actors.tracing import now_us, shift_step_stats
from actorflow.cluster.cookie import user_cookie
from actorflow.cluster.spec import ClusterSpec, parse_target, target_tls, task_key
from actorflow.graph.device_spec import DeviceSpec
from actorflow.scheduler.lower import LowerOptions, lower_for_cluster
from actorflow.transport.channel import Peer
from actorflow.transport.listener import ConnectionLimits

__all__ = ["Master", "connect_master"]

log = logging.getLogger(__name__)

# How long the client thread waits past the step's deadline for the master (on the runtime loop) to
# report it: the master's own deadline fires first unless the loop itself is stuck.
CLIENT_GRACE = 1.0


@dataclass(slots=True)
class _Part:
    task: str
    handle: int
    feeds: list        # plan feed indices, in the order the partition's placeholders are fed
    fetches: list      # plan fetch indices, in the order the partition returns them
    args: dict         # the registration request, kept to re-register with a restarted task
    pid: int = 0       # the process that holds `handle`


@dataclass(slots=True)
class DistributedExecutable:
    plan: object
    parts: list
    local_fetches: list   # (fetch index, ("feed", feed index) | ("const", value))


def connect_master(target: str, graph, config) -> "Master":
    return Master(target, graph, config)


class Master:
    def __init__(self, target: str, graph, config):
        self.address, token = parse_target(target)
        self.token = token or os.environ.get("ACTORFLOW_TOKEN") or user_cookie()
        tls = target_tls(target)
        self._ssl = tls.client_context() if tls is not None else None   # afs:// targets: TLS to every task
        self._ws_heartbeat = ConnectionLimits.from_env().ws_heartbeat
        self.graph = graph
        self.config = config
        # What the tasks' compilers honour of the session's config (soft placement, the RewriterConfig
        # switches of every pass, OptimizerOptions' global_jit_level): sent with each registration.
        self._options = LowerOptions.from_config(config)
        self.rt = default_runtime()
        self.loop = self.rt.loop
        self.peers: dict[str, Peer] = {}
        self._ids = itertools.count(1)
        self._base = random.getrandbits(31) << 24
        self.connect_timeout = float(os.environ.get("ACTORFLOW_CONNECT_TIMEOUT", "10"))
        self.heartbeat_interval = float(os.environ.get("ACTORFLOW_HEARTBEAT_INTERVAL", "0.5"))
        self.heartbeat_timeout = float(os.environ.get("ACTORFLOW_HEARTBEAT_TIMEOUT", "4.0"))
        self._heartbeat: asyncio.Task | None = None
        self._watched: set[str] = set()
        self._pids: dict[str, int] = {}
        self._stale: set[str] = set()
        self._inflight: dict[int, tuple] = {}
        self._aborts: set[asyncio.Task] = set()      # best-effort abort_step calls, cancelled by close()
        # Both waits inside are bounded by connect_timeout; this bounds the client thread's wait too.
        info = self._sync(self._first_contact(), 2 * self.connect_timeout + CLIENT_GRACE,
                          f"the first contact with {self.address}")
        self.cluster = ClusterSpec(info["cluster"])
        self.default = DeviceSpec(job=info["job"], task=int(info["task"]))
        self.default_task = task_key(self.default.job, self.default.task)
        self.peers[self.default_task] = self._bootstrap

    async def _first_contact(self):
        self._bootstrap = Peer(self.address, self.token, self._handle, name=self.address,
                               connect_timeout=self.connect_timeout, ssl=self._ssl, heartbeat=self._ws_heartbeat)
        conn = await self._bootstrap.connection()
        result, _ = await conn.call("cluster", timeout=self.connect_timeout)
        return result

    def _handle(self, conn, header, tensors):
        return None

    def _sync(self, coro, timeout=None, what="the master"):
        """Runs `coro` on the runtime loop and waits for it in this (client) thread, at most `timeout`
        seconds: past it, the coroutine is cancelled and DeadlineExceededError names `what`."""
        # sim: a simulated client blocks on the simulation's loop (actorflow/clock.py); not otherwise
        if clock.installed() is not None:
            return clock.block_on(self._bounded(coro, timeout, what), timeout)
        if self.rt.in_loop():
            coro.close()
            raise RuntimeError("a blocking Session call was made on the actorflow runtime loop; use arun")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            if fut.done() and not fut.cancelled():
                raise                       # the coroutine itself raised a TimeoutError
            fut.cancel()
            raise errors.DeadlineExceededError(
                None, None, f"Timed out after {timeout:g} s waiting for {what} (the actorflow runtime loop did "
                            "not answer in time)") from None

    @staticmethod
    async def _bounded(coro, timeout, what):
        if timeout is None:
            return await coro
        try:
            async with asyncio.timeout(timeout):
                return await coro
        except TimeoutError:
            raise errors.DeadlineExceededError(
                None, None, f"Timed out after {timeout:g} s waiting for {what}") from None

    async def _within(self, aw, deadline, what: str, timeout):
        """Awaits `aw` until the step's `deadline` (loop time, or None for no limit)."""
        if deadline is None:
            return await aw
        try:
            async with asyncio.timeout_at(deadline):
                return await aw
        except TimeoutError:
            raise errors.DeadlineExceededError(
                None, None, f"Timed out after {timeout:g} s waiting for {what}") from None

    def _peer(self, task: str) -> Peer:
        p = self.peers.get(task)
        if p is None:
            job, idx = task.split("/")[1][4:], int(task.split("/")[2][5:])
            p = self.peers[task] = Peer(self.cluster.task_address(job, idx), self.token, self._handle, name=task,
                                        connect_timeout=self.connect_timeout, ssl=self._ssl,
                                        heartbeat=self._ws_heartbeat)
        return p

    async def _call(self, task: str, method: str, args=None, tensors=(), timeout=30.0, deadline=None,
                    step_timeout=None):
        """One RPC to `task`: connecting and the call itself both end at `deadline` when one is given."""
        conn = await self._within(self._peer(task).connection(), deadline, f"the connection to {task}",
                                  step_timeout)
        return await self._within(conn.call(method, args, tensors, timeout=timeout), deadline,
                                  f"{method} on {task}", step_timeout)

    # -- preparation -------------------------------------------------------------------------------------
    def build(self, plan, timeout=None) -> DistributedExecutable:
        """Places and partitions `plan` (scheduler.lower_for_cluster) and registers each partition with
        its task, which compiles it once; registration ends after `timeout` seconds."""
        parts, local = lower_for_cluster(plan, self.default, self.cluster.tasks(), self._options)
        if not parts:
            return DistributedExecutable(plan, [], local)
        regs = self._sync(self._register(parts, timeout), None if timeout is None else timeout + CLIENT_GRACE,
                          "the registration of the partitions")
        return DistributedExecutable(plan, regs, local)

    async def _register(self, parts, timeout=None):
        deadline = None if timeout is None else self.loop.time() + timeout

        async def reg(p):
            # The graph travels as a payload tensor: constants can make it large.
            args = {"graph": np.frombuffer(p.graph.to_msgpack(), np.uint8), "feeds": [n for _, n in p.feeds],
                    "fetches": [n for _, n in p.fetches], "targets": p.targets,
                    "soft_placement": self._options.soft_placement,
                    "rewrites": [list(r) for r in self._options.rewrites],
                    "jit_level": self._options.jit_level}
            part = _Part(p.task, 0, [i for i, _ in p.feeds], [i for i, _ in p.fetches], args)
            await self._register_part(part, deadline, timeout)
            return part
        regs = list(await asyncio.gather(*(reg(p) for p in parts.values())))
        self._ensure_heartbeat()
        for r in regs:
            self._watched.add(r.task)
        return regs

    async def _register_part(self, part: _Part, deadline=None, step_timeout=None) -> None:
        args = {k: v for k, v in part.args.items() if k != "graph"}
        result, _ = await self._call(part.task, "register_graph", args, [part.args["graph"]], timeout=60.0,
                                     deadline=deadline, step_timeout=step_timeout)
        part.handle = result["handle"]
        part.pid = result.get("pid", 0)

    # -- failure detection ------------------------------------------------------------------------------
    def _ensure_heartbeat(self) -> None:
        if self._heartbeat is None:
            self._heartbeat = self.loop.create_task(self._heartbeat_loop())

    async def _heartbeat_loop(self) -> None:
        """Pings every task this master uses; a task that fails to answer, or answers from a new
        process, fails the in-flight steps that involve it with UnavailableError."""
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            tasks = list(self._watched)
            results = await asyncio.gather(*(self._ping(t) for t in tasks), return_exceptions=True)
            for task, res in zip(tasks, results):
                if isinstance(res, BaseException):
                    self._task_lost(task, f"{task} is unavailable: {getattr(res, 'message', res)}")
                else:
                    pid = res.get("pid", 0)
                    old = self._pids.get(task)
                    if old is not None and pid != old:
                        self._task_lost(task, f"{task} restarted (pid {old} -> {pid})")
                    self._pids[task] = pid

    async def _ping(self, task):
        result, _ = await self._call(task, "ping", timeout=self.heartbeat_timeout)
        return result

    def _task_lost(self, task: str, why: str) -> None:
        log.warning("master: %s", why)
        self._stale.add(task)
        err = errors.UnavailableError(None, None, why)
        for tasks, abort in list(self._inflight.values()):
            if task in tasks and not abort.done():
                abort.set_exception(err)

    # -- running -------------------------------------------------------------------------------------------
    async def run_step(self, exe: DistributedExecutable, feed_values, timeout, trace=None):
        """Runs one step of `exe` on its tasks; every wait ends at the step's deadline (`timeout` s).
        `trace`: (trace level, {}) to trace it; the dict receives {task: _aligned_stats(...)}."""
        step_id = self._base + next(self._ids)
        results = [None] * len(exe.plan.fetches)
        for i, (kind, v) in exe.local_fetches:
            results[i] = feed_values[v] if kind == "feed" else v
        if not exe.parts:
            return results                 # every fetch is fed or constant: no task has anything to run
        deadline = None if timeout is None else self.loop.time() + timeout
        if self._stale:
            # A task restarted (or came back): its registrations are gone; register again.
            for p in exe.parts:
                if p.task in self._stale:
                    await self._register_part(p, deadline, timeout)
            self._stale.difference_update({p.task for p in exe.parts})

        async def run_part(p: _Part):
            args = {"handle": p.handle, "step": step_id, "timeout": timeout}
            if trace is not None:
                args["trace"] = trace[0]
                t_req = now_us()
            try:
                # The step's deadline bounds the wait below; the task times the step out by itself too.
                reply, out = await self._call(p.task, "run_graph", args, [feed_values[i] for i in p.feeds],
                                              timeout=None, deadline=deadline, step_timeout=timeout)
            except errors.NotFoundError as e:
                if "is not registered" not in e.message:
                    raise
                # The task restarted before the heartbeat noticed: register again on the next step.
                self._stale.add(p.task)
                raise errors.AbortedError(None, None, f"{p.task} restarted and lost its graphs; retry the step "
                                                      f"({e.message})") from None
            if trace is not None and reply:
                trace[1][p.task] = _aligned_stats(reply, out[-1], t_req, now_us())
                out = out[:-1]
            for i, v in zip(p.fetches, out):
                results[i] = v

        tasks = {asyncio.ensure_future(run_part(p)): p.task for p in exe.parts}
        abort = self.loop.create_future()
        self._inflight[step_id] = ({p.task for p in exe.parts}, abort)
        waiting = set(tasks) | {abort}
        err = None
        try:
            while True:
                left = None if deadline is None else max(0.0, deadline - self.loop.time())
                done, waiting = await asyncio.wait(waiting, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    names = sorted({tasks[t] for t in waiting if t is not abort})
                    err = errors.DeadlineExceededError(
                        None, None, f"Timed out after {timeout:g} s waiting for step {step_id}: run_graph on "
                                    f"{', '.join(names)} did not finish")
                    break
                failed = [t for t in done if not t.cancelled() and t.exception() is not None]
                if failed:
                    err = failed[0].exception()
                    break
                if waiting == {abort}:
                    break
        except asyncio.CancelledError:
            for t in tasks:
                t.cancel()
            self._abort_later(exe, step_id, errors.CancelledError(None, None, f"step {step_id} cancelled"))
            raise
        finally:
            self._inflight.pop(step_id, None)
            if not abort.done():
                abort.cancel()
        if err is not None:
            pending = [t for t in waiting if t is not abort]
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            self._abort_later(exe, step_id, err)
            raise err
        return results

    def _abort_later(self, exe, step_id, err) -> None:
        """Tells every task of the step to abort it, without holding up the step's own error: the
        calls are owned by the master (close() cancels them) and bounded by their own timeout."""
        t = self.loop.create_task(self._abort(exe, step_id, err))
        self._aborts.add(t)
        t.add_done_callback(self._aborts.discard)

    async def _abort(self, exe, step_id, err):
        code = getattr(err, "error_code", errors.AbortedError.error_code)
        msg = getattr(err, "message", str(err))

        async def one(p):
            try:
                await self._call(p.task, "abort_step", {"step": step_id, "code": code, "message": msg}, timeout=2.0,
                                 deadline=self.loop.time() + 2.0, step_timeout=2.0)
            except Exception:  # noqa: BLE001 - a dead task has nothing to abort
                pass
        await asyncio.gather(*(one(p) for p in exe.parts))

    def run(self, exe, feed_values, timeout, trace=None):
        """Runs one step from a client thread; past the step's deadline the client stops waiting."""
        return self._sync(self.run_step(exe, feed_values, timeout, trace),
                          None if timeout is None else timeout + CLIENT_GRACE, "the master to run the step")

    async def arun(self, exe, feed_values, timeout, trace=None):
        """Runs one step from any event loop without blocking it; bounded like `run`."""
        if asyncio.get_running_loop() is self.loop:
            return await self.run_step(exe, feed_values, timeout, trace)
        fut = asyncio.run_coroutine_threadsafe(self.run_step(exe, feed_values, timeout, trace), self.loop)
        wrapped = asyncio.wrap_future(fut)
        try:
            async with asyncio.timeout(None if timeout is None else timeout + CLIENT_GRACE):
                return await asyncio.shield(wrapped)
        except TimeoutError:
            if wrapped.done() and not wrapped.cancelled() and wrapped.exception() is not None:
                raise
            fut.cancel()
            raise errors.DeadlineExceededError(
                None, None, f"Timed out after {timeout + CLIENT_GRACE:g} s waiting for the master to run the step "
                            "(the actorflow runtime loop did not answer in time)") from None
        except asyncio.CancelledError:
            fut.cancel()
            raise

    def close(self):
        async def close_all():
            if self._heartbeat is not None:
                self._heartbeat.cancel()
            for t in list(self._aborts):
                t.cancel()
            for p in self.peers.values():
                await p.close()
        try:
            if clock.installed() is not None:
                clock.block_on(close_all(), 5.0)
                return
            if not self.rt.in_loop():
                asyncio.run_coroutine_threadsafe(close_all(), self.loop).result(5)
        except Exception:  # noqa: BLE001
            pass


def _aligned_stats(reply: dict, payload, t_req: int, t_reply: int) -> dict:
    """A task's step stats moved onto this process's clock, NTP-style: with t0 = request sent,
    t1 = request received (task clock), t2 = reply sent (task clock), t3 = reply received, the task's
    clock is ahead by offset = ((t1 - t0) + (t2 - t3)) / 2, exact when both legs of the round trip
    take equally long and off by at most half the network round trip (t3 - t0) - (t2 - t1)."""
    t1, t2 = int(reply["t_recv"]), int(reply["t_send"])
    offset = ((t1 - t_req) + (t2 - t_reply)) // 2
    rtt = (t_reply - t_req) - (t2 - t1)
    stats = msgpack.unpackb(np.asarray(payload, np.uint8).tobytes(), raw=False, strict_map_key=False)
    return {"stats": shift_step_stats(stats, -offset), "offset_us": offset, "round_trip_us": rtt}
