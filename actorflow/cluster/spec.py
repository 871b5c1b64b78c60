"""ClusterSpec and TF_CONFIG (tf.train.ClusterSpec)."""
from __future__ import annotations

import json
import os
from urllib.parse import quote, unquote

from actorflow.transport.tls import TLSConfig

__all__ = ["ClusterSpec", "tf_config", "task_key", "parse_target", "target_tls", "make_target"]


class ClusterSpec:
    """Jobs of a cluster and their tasks' addresses (tf.train.ClusterSpec).

    `ClusterSpec({"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223", ...]})`; a job may also map
    task indices to addresses (`{"worker": {1: "host:port"}}`).

    Differs from TF: `tls` (a TLSConfig, or a dict of cert/key/ca PEM paths) says how the cluster's
    tasks talk to each other; a Server of this spec uses it unless given its own. It is not part
    of the job map (`as_dict`, equality) and a copy keeps it.
    """

    def __init__(self, cluster, tls=None):
        self.tls = TLSConfig.make(tls)
        if isinstance(cluster, ClusterSpec):
            if self.tls is None:
                self.tls = cluster.tls
            cluster = cluster.as_dict()
        if not isinstance(cluster, dict):
            raise TypeError(f"ClusterSpec expects a dict of job name -> addresses, got {type(cluster).__name__}")
        self._jobs: dict[str, dict[int, str]] = {}
        for job, tasks in cluster.items():
            if isinstance(tasks, dict):
                self._jobs[job] = {int(i): str(a) for i, a in tasks.items()}
            elif isinstance(tasks, (list, tuple)):
                self._jobs[job] = {i: str(a) for i, a in enumerate(tasks)}
            else:
                raise TypeError(f"Tasks of job '{job}' must be a list or dict of addresses")
            for i, a in self._jobs[job].items():
                if ":" not in a:
                    raise ValueError(f"Address of /job:{job}/task:{i} must be host:port, got '{a}'")

    @property
    def jobs(self) -> list[str]:
        return list(self._jobs)

    def num_tasks(self, job_name: str) -> int:
        return len(self._job(job_name))

    def task_indices(self, job_name: str) -> list[int]:
        return sorted(self._job(job_name))

    def task_address(self, job_name: str, task_index: int) -> str:
        job = self._job(job_name)
        try:
            return job[int(task_index)]
        except KeyError:
            raise ValueError(f"No task with index {task_index} in job '{job_name}'") from None

    def job_tasks(self, job_name: str) -> list[str]:
        job = self._job(job_name)
        return [job[i] for i in sorted(job)]

    def tasks(self) -> list[tuple[str, int]]:
        return [(j, i) for j in self._jobs for i in sorted(self._jobs[j])]

    def _job(self, job_name):
        try:
            return self._jobs[job_name]
        except KeyError:
            raise ValueError(f"No such job in cluster: '{job_name}' (jobs: {', '.join(self._jobs)})") from None

    def as_dict(self) -> dict:
        out = {}
        for job, tasks in self._jobs.items():
            idx = sorted(tasks)
            out[job] = [tasks[i] for i in idx] if idx == list(range(len(idx))) else dict(tasks)
        return out

    def to_json(self) -> str:
        return json.dumps(self.as_dict())

    def __eq__(self, other):
        return isinstance(other, ClusterSpec) and other._jobs == self._jobs

    def __repr__(self):
        return f"ClusterSpec({self.as_dict()!r})"

    def __bool__(self):
        return bool(self._jobs)


def task_key(job: str, task: int) -> str:
    return f"/job:{job}/task:{task}"


def tf_config():
    """(ClusterSpec, job name, task index) from the TF_CONFIG environment variable, or None."""
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        return None
    try:
        cfg = json.loads(raw)
        task = cfg.get("task", {})
        return ClusterSpec(cfg["cluster"]), task.get("type"), int(task.get("index", 0))
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"TF_CONFIG is not valid: {e}") from None


def parse_target(target: str) -> tuple[str, str | None]:
    """'af://host:port?token=T' (or afs://..., grpc://..., or host:port) -> (host:port, token or None)."""
    t = target
    for prefix in ("af://", "afs://", "grpc://", "http://"):
        if t.startswith(prefix):
            t = t[len(prefix):]
    t, _, q = t.partition("?")
    return t.rstrip("/"), _query(q).get("token")


def target_tls(target: str) -> TLSConfig | None:
    """How to connect to a target: None for plain TCP (af://), a TLSConfig for afs:// targets.

    The files come from the target's `ca`, `cert` and `key` query parameters (Server.target writes
    them), else from $ACTORFLOW_TLS_CA/CERT/KEY; with none, the system's CAs verify the server.
    """
    if not target.startswith("afs://"):
        return None
    q = _query(target.partition("?")[2])
    return TLSConfig.make(cert=q.get("cert"), key=q.get("key"), ca=q.get("ca")) or TLSConfig.from_env() or TLSConfig()


def make_target(address: str, token: str, tls: TLSConfig | None = None) -> str:
    """The session target of a task: af://address?token=T, or afs://...&ca=...&cert=...&key=... with TLS."""
    if tls is None:
        return f"af://{address}?token={quote(token, safe='')}"
    extra = "".join(f"&{k}={quote(v, safe='/')}" for k, v in tls.as_dict().items())
    return f"afs://{address}?token={quote(token, safe='')}{extra}"


def _query(q: str) -> dict:
    out = {}
    for part in q.split("&") if q else ():
        k, _, v = part.partition("=")
        out[k] = unquote(v)
    return out
