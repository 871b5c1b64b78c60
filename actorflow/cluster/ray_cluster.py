"""An actorflow cluster on Ray: each task is a Ray actor, in its own worker process, running a server.

    async with af.cluster.RayCluster(ps=1, workers=2, resources_per_task={"num_cpus": 0.5}) as cluster:
        with af.Session(cluster.target) as sess: ...

The surface is LocalCluster's (`spec`, `target`, `token`, `task_target`, `kill`, `restart_task`,
`pids`), and what Ray already does is left to Ray: it places the tasks (a placement group spreads
them over nodes), restarts a task whose process dies (`max_restarts`), and collects their logs.

A small registry actor hands out addresses: each task claims a free port on its own node when it
first starts, waits until every task has claimed one, and then starts its server with the whole
ClusterSpec. A task that Ray restarts finds its address already claimed and binds the same port
again, so its peers and clients reconnect to it as they do to a restarted LocalCluster task.
"""
from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import time

from actorflow.cluster.local import ClusterLauncher, process_running
from actorflow.cluster.spec import ClusterSpec, task_key

__all__ = ["RayCluster"]

log = logging.getLogger(__name__)


def _own_niceness() -> int | None:
    try:
        return os.getpriority(os.PRIO_PROCESS, 0)
    except (AttributeError, OSError):
        return None


def _ray():
    try:
        import ray
    except ImportError:
        raise ImportError("RayCluster needs Ray: pip install 'actorflow[ray]'") from None
    return ray


def _renice(niceness: int, name: str) -> None:
    """Runs this process at `niceness`. Ray starts its worker processes at niceness 15 (raylet's
    `worker_niceness`), meant for background tasks; an actorflow task is the job's compute, and at 15
    it loses the CPU to the clients that drive it (a quarter of the steps on a busy two-core node).
    Raising priority back needs CAP_SYS_NICE or RLIMIT_NICE: without them the task stays as Ray
    started it, with a warning that says how to avoid it."""
    try:
        current = os.getpriority(os.PRIO_PROCESS, 0)
    except (AttributeError, OSError):      # not on this platform
        return
    if current == niceness:
        return
    try:
        os.setpriority(os.PRIO_PROCESS, 0, niceness)
    except OSError as e:
        log.warning("%s runs at niceness %d (Ray's worker_niceness) and could not be set to %d: %s; "
                    "start Ray with RAY_worker_niceness=%d or pass niceness=None to RayCluster",
                    name, current, niceness, e, niceness)


class _Registry:
    """Addresses of the cluster's tasks, claimed by the tasks themselves (an async Ray actor)."""

    def __init__(self, jobs: dict):
        self.jobs = jobs
        self.addresses: dict[tuple[str, int], str] = {}
        self.complete = asyncio.Event()

    async def claim(self, job: str, task: int, address: str) -> str:
        """The task's address: the one it claimed before (a restart), else `address`."""
        key = (job, int(task))
        self.addresses.setdefault(key, address)
        if len(self.addresses) == sum(self.jobs.values()):
            self.complete.set()
        return self.addresses[key]

    async def spec(self, timeout: float) -> dict:
        await asyncio.wait_for(self.complete.wait(), timeout)
        return {job: [self.addresses[(job, i)] for i in range(n)] for job, n in self.jobs.items()}


class _Task:
    """One task of the cluster: claims its address, then serves until Ray kills it."""

    def __init__(self, registry, job: str, task: int, token: str, start_timeout: float, host: str | None,
                 niceness: int | None = None):
        import ray

        if niceness is not None:
            _renice(niceness, task_key(job, task))

        from actorflow.cluster.local import free_port
        from actorflow.cluster.server import Server
        host = host or ray.util.get_node_ip_address()
        if host in ("127.0.0.1", "localhost"):
            bind = host
        else:
            bind = "0.0.0.0"
        want = f"{host}:{free_port(bind if bind != '0.0.0.0' else '')}"
        self.address = ray.get(registry.claim.remote(job, task, want))
        spec = ray.get(registry.spec.remote(start_timeout), timeout=start_timeout + 5)
        self.server = Server(ClusterSpec(spec), job_name=job, task_index=task, token=token, bind=bind)
        self.name = task_key(job, task)

    def pid(self) -> int:
        return os.getpid()

    def address_of(self) -> str:
        return self.address


class RayCluster(ClusterLauncher):
    """`ps` parameter servers and `workers` workers as Ray actors (a LocalCluster on Ray).

    `address` is passed to `ray.init` when Ray is not initialized yet ("auto" joins a running
    cluster; None starts a local one, as `ray.init()` does, and it is shut down with the cluster).
    `resources_per_task` are Ray's actor options (`num_cpus`, `num_gpus`, `memory`, custom
    `resources`); fractional CPUs let several tasks share a core. `max_restarts=-1` restarts a task
    whose process dies for as long as the cluster lives. `host` makes every task bind and advertise
    that address (e.g. "127.0.0.1" for a one-machine Ray); by default each task uses its node's IP.
    `niceness`: the CPU priority of the task processes; by default the driver's, where Ray would run
    them at its background-worker niceness of 15 (None leaves Ray's)."""

    def __init__(self, ps: int = 1, workers: int = 2, *, resources_per_task: dict | None = None,
                 address: str | None = "auto", token: str | None = None, max_restarts: int = -1,
                 start_timeout: float = 120.0, placement_strategy: str = "SPREAD", ray_init_kwargs: dict | None = None,
                 host: str | None = None, niceness: int | None = -1):
        self.n_ps, self.n_workers = int(ps), int(workers)
        if self.n_workers < 1 or self.n_ps < 0:
            raise ValueError("a cluster needs at least one worker and no negative counts")
        self.token = token or secrets.token_urlsafe(32)
        self.resources = dict(resources_per_task or {"num_cpus": 0.25})
        self.address = address
        self.max_restarts = max_restarts
        self.start_timeout = start_timeout
        self.strategy = placement_strategy
        self.ray_init_kwargs = dict(ray_init_kwargs or {})
        self.host = host
        # -1: the driver's own niceness (Ray would start the tasks at 15); None: leave them as Ray does.
        self.niceness = _own_niceness() if niceness == -1 else niceness
        self.spec: ClusterSpec | None = None
        self.actors: dict[tuple[str, int], object] = {}
        self.restarts: dict[tuple[str, int], int] = {}
        self._registry = None
        self._pg = None
        self._started_ray = False
        self._pids: dict[tuple[str, int], int] = {}

    # -- lifecycle ----------------------------------------------------------------------------------------
    def start(self) -> RayCluster:
        ray = _ray()
        if not ray.is_initialized():
            kwargs = dict(self.ray_init_kwargs)
            if self.address == "auto" and not os.environ.get("RAY_ADDRESS"):
                kwargs.setdefault("address", None)      # no running cluster named: start a local one
            else:
                kwargs.setdefault("address", self.address)
            kwargs.setdefault("include_dashboard", False)
            kwargs.setdefault("log_to_driver", True)
            ray.init(**kwargs)
            self._started_ray = True
        try:
            self._start_tasks(ray)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_tasks(self, ray) -> None:
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
        jobs = {"ps": self.n_ps, "worker": self.n_workers} if self.n_ps else {"worker": self.n_workers}
        tasks = [(job, i) for job, n in jobs.items() for i in range(n)]
        bundle = {"CPU": self.resources.get("num_cpus", 0.25)}
        if self.resources.get("num_gpus"):
            bundle["GPU"] = self.resources["num_gpus"]
        self._pg = placement_group([dict(bundle) for _ in tasks], strategy=self.strategy)
        ray.get(self._pg.ready(), timeout=self.start_timeout)
        self._registry = ray.remote(num_cpus=0)(_Registry).remote(jobs)
        task_cls = ray.remote(_Task)
        for n, (job, i) in enumerate(tasks):
            opts = dict(self.resources)
            opts.update(max_restarts=self.max_restarts, max_task_retries=0, name=None,
                        scheduling_strategy=PlacementGroupSchedulingStrategy(
                            placement_group=self._pg, placement_group_bundle_index=n))
            self.actors[(job, i)] = task_cls.options(**opts).remote(self._registry, job, i, self.token,
                                                                    self.start_timeout, self.host, self.niceness)
        spec = ray.get(self._registry.spec.remote(self.start_timeout), timeout=self.start_timeout + 10)
        self.spec = ClusterSpec(spec)
        self.wait_healthy(self.start_timeout)
        self._pids = {key: ray.get(a.pid.remote(), timeout=30) for key, a in self.actors.items()}

    def wait_healthy(self, timeout: float = 60.0, tasks=None) -> None:
        """Waits until every task (or `tasks`) answers /health with the cluster token."""
        from actorflow.cluster.local import wait_until_healthy
        wait_until_healthy(self.spec, self.token, timeout, tasks, what="Ray task")

    def stop(self, timeout: float = 30.0) -> None:
        """Kills every task (no restart) and the registry; shuts Ray down if this cluster started it."""
        ray = _ray()
        if not ray.is_initialized():
            return
        for actor in self.actors.values():
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - an actor that is already gone
                pass
        if self._registry is not None:
            ray.kill(self._registry, no_restart=True)
            self._registry = None
        if self._pg is not None:
            from ray.util.placement_group import remove_placement_group
            try:
                remove_placement_group(self._pg)
            except Exception:  # noqa: BLE001
                pass
            self._pg = None
        deadline = time.monotonic() + timeout
        for pid in self._pids.values():
            while process_running(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
        self.actors.clear()
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False

    # -- fault injection -----------------------------------------------------------------------------------
    def kill(self, job: str, task: int, sig: int | None = None) -> int:
        """Kills one task's process (kill -9 by default: `sig` None); Ray restarts it. Returns the killed pid."""
        pid = self.pids()[task_key(job, task)]
        os.kill(pid, signal.SIGKILL if sig is None else sig)
        self.restarts[(job, task)] = self.restarts.get((job, task), 0) + 1
        return pid

    def restart_task(self, job: str, task: int, timeout: float = 60.0) -> None:
        """Kills the task's process and waits until Ray has restarted it and it serves again."""
        ray = _ray()
        old = self.kill(job, task)
        deadline = time.monotonic() + timeout
        while True:
            try:
                pid = ray.get(self.actors[(job, task)].pid.remote(), timeout=max(1.0, deadline - time.monotonic()))
                if pid != old:
                    break
            except Exception:  # noqa: BLE001 - the actor is restarting
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"Ray did not restart {task_key(job, task)} in {timeout:g} s")
            time.sleep(0.2)
        self._pids[(job, task)] = pid
        self.wait_healthy(max(1.0, deadline - time.monotonic()), [(job, task)])

    def pids(self) -> dict:
        """The current process id of each task (asked of Ray: a restarted task has a new one)."""
        ray = _ray()
        for key, actor in self.actors.items():
            try:
                self._pids[key] = ray.get(actor.pid.remote(), timeout=5)
            except Exception:  # noqa: BLE001 - restarting: keep the last known pid
                pass
        return {task_key(j, t): p for (j, t), p in self._pids.items()}

    # -- addresses -------------------------------------------------------------------------------------------
    @property
    def target(self) -> str:
        """The master target of worker 0, for `af.Session(target=...)`."""
        return self.task_target("worker", 0)

    def task_target(self, job: str, task: int) -> str:
        return f"af://{self.spec.task_address(job, task)}?token={self.token}"

