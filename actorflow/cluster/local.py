"""Local multi-process clusters on loopback: each task is its own `actorflow worker` process.

    with af.cluster.LocalCluster(ps=1, workers=2) as cluster:
        with af.Session(cluster.target) as sess: ...

`async with` works too. `restart="on-failure"` restarts a task that dies (a local cluster heals).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from actorflow.cluster.spec import ClusterSpec, make_target, task_key
from actorflow.transport.channel import TOKEN_HEADER
from actorflow.transport.tls import TLSConfig

__all__ = ["LocalCluster", "free_port", "free_ports", "task_health", "wait_until_healthy", "write_private_json",
           "ClusterLauncher", "process_running"]

log = logging.getLogger(__name__)


def free_port(host: str = "127.0.0.1") -> int:
    """A port on `host` that was free a moment ago (bound to port 0, then released)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """`n` distinct ports on `host` that were free a moment ago. Every socket stays bound until all are
    picked: a port released by one `free_port` call may come back from the next (about 1 pair in 14,000
    on Linux), and then two tasks of one cluster would share an address."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind((host, 0))
        return [s.getsockname()[1] for s in socks]


def task_health(address: str, token: str, timeout: float = 1.0, tls: TLSConfig | None = None):
    """The task's /health document, or None when it does not answer (https with `tls`)."""
    scheme = "https" if tls is not None else "http"
    req = urllib.request.Request(f"{scheme}://{address}/health", headers={TOKEN_HEADER: token})
    ctx = tls.client_context() if tls is not None else None
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
            return json.loads(r.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None


def write_private_json(path: str, doc: dict) -> None:
    """Writes `doc` to `path` atomically, readable by its owner only (mode 0600 from creation on)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)          # O_CREAT's mode does not apply to a file that already existed
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=2)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    os.replace(tmp, path)


def wait_until_healthy(spec: ClusterSpec, token: str, timeout: float, tasks=None, tls: TLSConfig | None = None,
                       exited=None, what: str = "task") -> None:
    """Waits until every task of `spec` (or `tasks`) answers /health with `token`; TimeoutError naming
    the first that does not within `timeout` s. `exited(job, task)` may say why a task will never answer
    (its process ended), which fails at once."""
    deadline = time.monotonic() + timeout
    for job, task in tasks or spec.tasks():
        addr = spec.task_address(job, task)
        while task_health(addr, token, 0.5, tls) is None:
            why = exited(job, task) if exited is not None else None
            if why:
                raise RuntimeError(f"{what} {task_key(job, task)} {why} while starting")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} {task_key(job, task)} at {addr} did not become healthy in {timeout:g} s")
            time.sleep(0.05)


class ClusterLauncher:
    """What LocalCluster and RayCluster share: `with`/`async with` start and stop the tasks."""

    def start(self):
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def restart_task(self, job: str, task: int, timeout: float = 60.0) -> None:
        raise NotImplementedError

    def restart(self, job: str, task: int, timeout: float = 60.0) -> None:
        """Kills one task's process and waits until it serves again (`restart_task`)."""
        self.restart_task(job, task, timeout)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    async def __aenter__(self):
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(self, *exc):
        await asyncio.to_thread(self.stop)
        return False


def process_running(pid: int) -> bool:
    """Whether `pid` runs; a process that exited but is not yet reaped by its parent (a zombie) does not."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:          # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


class LocalCluster(ClusterLauncher):
    """Starts `ps` parameter-server tasks and `workers` worker tasks as processes on 127.0.0.1.

    The cluster gets a random token unless `token` is given; the spec file (`spec_file`, else a
    temporary file removed at stop) holds the spec, the token, the pids and the TLS files, with mode
    0600. `tls` (a TLSConfig or a dict), or `tls_cert`/`tls_key`/`tls_ca`, makes every task serve
    TLS with that certificate (which must name `host`) and connect to the others over (mutual) TLS.
    """

    def __init__(self, ps: int = 1, workers: int = 2, token: str | None = None, host: str = "127.0.0.1",
                 restart: str = "never", spec_file: str | None = None, env: dict | None = None,
                 start_timeout: float = 60.0, log_dir: str | None = None, tls=None, tls_cert: str | None = None,
                 tls_key: str | None = None, tls_ca: str | None = None):
        if restart not in ("never", "on-failure"):
            raise ValueError("restart must be 'never' or 'on-failure'")
        self.n_ps, self.n_workers = int(ps), int(workers)
        if self.n_workers < 1:
            raise ValueError("a cluster needs at least one worker")
        self.token = token or secrets.token_urlsafe(32)
        self.tls = TLSConfig.make(tls, cert=tls_cert, key=tls_key, ca=tls_ca)
        if self.tls is not None and self.tls.cert is None:
            raise ValueError("a TLS cluster needs a certificate and key (tls_cert, tls_key) for its tasks")
        self.host = host
        self.restart = restart
        self.env = dict(env or {})
        self.start_timeout = start_timeout
        self.log_dir = log_dir
        self.spec_file = spec_file
        self.spec: ClusterSpec | None = None
        self.procs: dict[tuple[str, int], subprocess.Popen] = {}
        self.restarts: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        self._stopping = False
        self._monitor: threading.Thread | None = None
        self._own_spec_file = False

    # -- lifecycle ----------------------------------------------------------------------------------------
    def start(self) -> "LocalCluster":
        jobs = {}
        ports = free_ports(self.n_ps + self.n_workers, self.host)
        if self.n_ps:
            jobs["ps"] = [f"{self.host}:{p}" for p in ports[:self.n_ps]]
        jobs["worker"] = [f"{self.host}:{p}" for p in ports[self.n_ps:]]
        self.spec = ClusterSpec(jobs, tls=self.tls)
        if self.spec_file is None:
            import tempfile
            fd, self.spec_file = tempfile.mkstemp(prefix="actorflow-cluster-", suffix=".json")
            os.close(fd)
            self._own_spec_file = True
        self._write_spec()
        try:
            for job, task in self.spec.tasks():
                self._spawn(job, task)
            self._write_spec()          # again, now that the pids are known
            self.wait_healthy(self.start_timeout)
        except BaseException:
            self.stop()
            raise
        if self.restart == "on-failure":
            self._monitor = threading.Thread(target=self._watch, name="actorflow-cluster-monitor", daemon=True)
            self._monitor.start()
        return self

    def _write_spec(self) -> None:
        doc = {"cluster": self.spec.as_dict(), "token": self.token,
               "pids": {task_key(j, t): p.pid for (j, t), p in self.procs.items()}}
        if self.tls is not None:
            doc["tls"] = self.tls.as_dict()
        write_private_json(self.spec_file, doc)

    def _spawn(self, job: str, task: int) -> None:
        env = dict(os.environ)
        env.update(self.env)
        env["ACTORFLOW_TOKEN"] = self.token
        env.pop("TF_CONFIG", None)
        cmd = [sys.executable, "-m", "actorflow.cli", "worker", "--cluster", self.spec_file, "--job", job,
               "--task", str(task), "--bind", self.host, "--parent-pid", str(os.getpid())]
        # The token reaches the task through its environment (readable by this user only), never argv.
        out = subprocess.DEVNULL
        if self.log_dir:
            os.makedirs(self.log_dir, exist_ok=True)
            out = open(os.path.join(self.log_dir, f"{job}-{task}.log"), "ab")
        self.procs[(job, task)] = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                                   start_new_session=True)
        if out is not subprocess.DEVNULL:
            out.close()

    def wait_healthy(self, timeout: float = 60.0, tasks=None) -> None:
        def exited(job, task):
            p = self.procs.get((job, task))
            return None if p is None or p.poll() is None else f"exited with code {p.returncode}"
        wait_until_healthy(self.spec, self.token, timeout, tasks, self.tls, exited)

    def _watch(self) -> None:
        while not self._stopping:
            time.sleep(0.2)
            with self._lock:
                for key, p in list(self.procs.items()):
                    if self._stopping:
                        return
                    if p.poll() is not None:
                        log.warning("task %s exited with %s; restarting", task_key(*key), p.returncode)
                        self.restarts[key] = self.restarts.get(key, 0) + 1
                        self._spawn(*key)
                        self._write_spec()

    def stop(self, timeout: float = 10.0) -> None:
        """Stops every task: SIGTERM, then SIGKILL after `timeout`."""
        self._stopping = True
        with self._lock:
            for p in self.procs.values():
                if p.poll() is None:
                    try:
                        p.send_signal(signal.SIGTERM)
                    except ProcessLookupError:
                        pass
            deadline = time.monotonic() + timeout
            for p in self.procs.values():
                try:
                    p.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if self._own_spec_file and self.spec_file and os.path.exists(self.spec_file):
            os.unlink(self.spec_file)

    # -- fault injection -----------------------------------------------------------------------------------
    def kill(self, job: str, task: int, sig: int | None = None) -> int:
        """Kills one task's process (kill -9 by default: `sig` None; Windows has no SIGKILL, so the
        default is looked up here, not at import); returns its pid."""
        p = self.procs[(job, task)]
        if sig is None:
            p.kill()
        else:
            p.send_signal(sig)
        p.wait()
        return p.pid

    def restart_task(self, job: str, task: int, timeout: float = 60.0) -> None:
        with self._lock:
            p = self.procs.get((job, task))
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
            self._spawn(job, task)
            self._write_spec()
        self.wait_healthy(timeout, [(job, task)])

    # -- addresses -------------------------------------------------------------------------------------------
    @property
    def target(self) -> str:
        """The master target of worker 0, for `af.Session(target=...)` (carries the token and TLS files)."""
        return self.task_target("worker", 0)

    def task_target(self, job: str, task: int) -> str:
        return make_target(self.spec.task_address(job, task), self.token, self.tls)

    def pids(self) -> dict:
        return {task_key(j, t): p.pid for (j, t), p in self.procs.items()}

