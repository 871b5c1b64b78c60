"""Cluster resolvers (tf.distribute.cluster_resolver): map a cluster manager's view of its processes
onto a ClusterSpec, this task's job and index, and the master's address.

- `TFConfigClusterResolver`: the `TF_CONFIG` environment variable (Kubeflow's TFJob, Ray Train, by hand).
- `SimpleClusterResolver`: a ClusterSpec given in code.
- `SlurmClusterResolver`: a Slurm job step's environment (`SLURM_PROCID`, `SLURM_STEP_NODELIST`,
  `SLURM_STEP_TASKS_PER_NODE`...), with Slurm's bracketed host lists and repeat counts.
- `KubernetesClusterResolver`: a pod's downward-API environment and the DNS names of one headless
  Service per job (the objects `actorflow k8s manifest` renders); or, as TensorFlow's does, the pods
  listed through the Kubernetes API when a client is given.

Nothing here starts processes: scheduling, restarts and logs are the cluster manager's.
"""
from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Mapping

from actorflow.cluster.spec import ClusterSpec

__all__ = ["ClusterResolver", "TPUClusterResolver", "TFConfigClusterResolver", "SimpleClusterResolver", "SlurmClusterResolver",
           "KubernetesClusterResolver", "UnionClusterResolver", "expand_hostlist", "expand_tasks_per_node"]


class ClusterResolver:
    """The resolver interface (tf.distribute.cluster_resolver.ClusterResolver)."""

    task_type: str | None = None
    task_id: int | None = None
    rpc_layer: str | None = None
    environment: str = ""

    def cluster_spec(self) -> ClusterSpec:
        raise NotImplementedError

    def master(self, task_type=None, task_id=None, rpc_layer=None) -> str:
        """The address of a task (this one by default) as a session target, `rpc_layer://host:port`.

        As in TF, an empty string when the task is unknown."""
        task_type = self.task_type if task_type is None else task_type
        task_id = self.task_id if task_id is None else task_id
        if task_type is None or task_id is None:
            return ""
        spec = self.cluster_spec()
        if task_type not in spec.jobs:
            return ""
        return _format_master(spec.task_address(task_type, task_id), rpc_layer or self.rpc_layer)

    def num_accelerators(self, task_type=None, task_id=None, config_proto=None) -> dict:
        """Accelerators per task: {'GPU': n} where CuPy sees n devices here, else {}."""
        from actorflow.scheduler.devices import gpu_count
        n = gpu_count()
        return {"GPU": n} if n else {}


def _format_master(address: str, rpc_layer: str | None) -> str:
    return f"{rpc_layer}://{address}" if rpc_layer else address


class SimpleClusterResolver(ClusterResolver):
    """A resolver over a ClusterSpec given in code (tf.distribute.cluster_resolver.SimpleClusterResolver)."""

    def __init__(self, cluster_spec, master="", task_type=None, task_id=None, environment="",
                 num_accelerators=None, rpc_layer=None):
        self._spec = ClusterSpec(cluster_spec)
        self._master = master
        self.task_type = task_type
        self.task_id = None if task_id is None else int(task_id)
        self.environment = environment
        self._accelerators = num_accelerators
        self.rpc_layer = rpc_layer

    def cluster_spec(self) -> ClusterSpec:
        return self._spec

    def master(self, task_type=None, task_id=None, rpc_layer=None) -> str:
        if task_type is not None and task_id is not None:
            return super().master(task_type, task_id, rpc_layer)
        if not self._master:
            return ""
        layer = rpc_layer or self.rpc_layer
        bare = re.sub(r"^\w+://", "", self._master)
        return _format_master(bare, layer) if layer else self._master

    def num_accelerators(self, task_type=None, task_id=None, config_proto=None) -> dict:
        if self._accelerators is not None:
            return dict(self._accelerators)
        return super().num_accelerators(task_type, task_id, config_proto)


class TFConfigClusterResolver(ClusterResolver):
    """Reads TF_CONFIG each time it is asked (tf.distribute.cluster_resolver.TFConfigClusterResolver).

    `TF_CONFIG = {"cluster": {...}, "task": {"type": "worker", "index": 0}, "rpc_layer": ..., "environment": ...}`.
    Explicit `task_type`/`task_id`/`rpc_layer`/`environment` arguments win over the variable."""

    def __init__(self, task_type=None, task_id=None, rpc_layer=None, environment=None):
        self._task_type = task_type
        self._task_id = task_id
        self._rpc_layer = rpc_layer
        self._environment = environment

    @staticmethod
    def _config() -> dict:
        raw = os.environ.get("TF_CONFIG")
        if not raw:
            return {}
        try:
            cfg = json.loads(raw)
        except ValueError as e:
            raise ValueError(f"TF_CONFIG is not valid JSON: {e}") from None
        if not isinstance(cfg, dict):
            raise ValueError(f"TF_CONFIG must be a JSON object, got {type(cfg).__name__}")
        return cfg

    @property
    def task_type(self):
        if self._task_type is not None:
            return self._task_type
        return self._config().get("task", {}).get("type")

    @task_type.setter
    def task_type(self, value):
        self._task_type = value

    @property
    def task_id(self):
        if self._task_id is not None:
            return int(self._task_id)
        index = self._config().get("task", {}).get("index")
        return None if index is None else int(index)

    @task_id.setter
    def task_id(self, value):
        self._task_id = value

    @property
    def rpc_layer(self):
        if self._rpc_layer is not None:
            return self._rpc_layer
        return self._config().get("rpc_layer")

    @rpc_layer.setter
    def rpc_layer(self, value):
        self._rpc_layer = value

    @property
    def environment(self):
        if self._environment is not None:
            return self._environment
        return self._config().get("environment", "")

    def cluster_spec(self) -> ClusterSpec:
        return ClusterSpec(self._config().get("cluster", {}))


# -- Slurm ------------------------------------------------------------------------------------------

def expand_hostlist(hostlist: str) -> list[str]:
    """Slurm's compressed host list -> host names: `node[1-3,05],gpu7` -> node1 node2 node3 node05 gpu7.

    Ranges keep their zero padding (`n[01-03]` -> n01 n02 n03); several bracket groups in one name
    expand as a product (`r[1-2]n[1-2]` -> r1n1 r1n2 r2n1 r2n2), as `scontrol show hostnames` does."""
    hosts: list[str] = []
    for item in _split_top(hostlist):
        hosts.extend(_expand_one(item))
    return hosts


def _split_top(text: str) -> list[str]:
    out, depth, cur = [], 0, []
    for ch in text.strip():
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in Slurm host list {text!r}")
        if ch == "," and depth == 0:
            if cur:
                out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise ValueError(f"unbalanced '[' in Slurm host list {text!r}")
    if cur:
        out.append("".join(cur))
    return out


def _expand_one(item: str) -> list[str]:
    m = re.search(r"\[([^\]]*)\]", item)
    if not m:
        return [item]
    head, tail = item[:m.start()], item[m.end():]
    out = []
    for part in m.group(1).split(","):
        if "-" in part:
            lo, hi = part.split("-", 1)
            if not (lo.isdigit() and hi.isdigit()) or int(hi) < int(lo):
                raise ValueError(f"bad range {part!r} in Slurm host list entry {item!r}")
            width = len(lo)
            values = [str(i).zfill(width) for i in range(int(lo), int(hi) + 1)]
        else:
            if not part.isdigit():
                raise ValueError(f"bad index {part!r} in Slurm host list entry {item!r}")
            values = [part]
        for v in values:
            out.extend(_expand_one(head + v + tail))
    return out


def expand_tasks_per_node(spec: str) -> list[int]:
    """Slurm's tasks-per-node list -> one count per node: `2(x3),1` -> [2, 2, 2, 1]."""
    counts: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part)
        if not m:
            raise ValueError(f"bad entry {part!r} in Slurm tasks-per-node list {spec!r}")
        counts.extend([int(m.group(1))] * int(m.group(2) or 1))
    return counts


class SlurmClusterResolver(ClusterResolver):
    """The cluster of a Slurm job step (tf.distribute.cluster_resolver.SlurmClusterResolver).

    `jobs` maps job names to task counts in order, e.g. `{"ps": 1, "worker": 3}` (default: the
    `AF_SLURM_JOBS` variable that `actorflow slurm script` exports, else every task a worker). Tasks are numbered by Slurm rank (`SLURM_PROCID`), which Slurm lays out node by node:
    ranks go to the jobs in order, and the tasks on one node get ports `port_base`, `port_base + 1`...
    The node list and tasks per node come from the step's variables (`SLURM_STEP_NODELIST`,
    `SLURM_STEP_TASKS_PER_NODE`), else the job's (`SLURM_JOB_NODELIST`, `SLURM_TASKS_PER_NODE`);
    `tasks_per_node` overrides them. For a heterogeneous job, the variables of component
    `het_group` (`SLURM_JOB_NODELIST_HET_GROUP_<n>`...) are read instead.

    Differs from TF: GPUs are not assigned through CUDA_VISIBLE_DEVICES unless `auto_set_gpu` and
    `gpus_per_task` are both given; rpc_layer defaults to "af" (actorflow's transport)."""

    def __init__(self, jobs=None, port_base=8888, gpus_per_node=None, gpus_per_task=None, tasks_per_node=None,
                 auto_set_gpu=True, rpc_layer="af", environ: Mapping[str, str] | None = None, het_group=None):
        self._env = os.environ if environ is None else environ
        self._het = het_group
        self.port_base = int(port_base)
        self.rpc_layer = rpc_layer
        self._gpus_per_node = gpus_per_node
        self._gpus_per_task = gpus_per_task
        rank = self._var("SLURM_PROCID")
        if rank is None:
            raise RuntimeError("SlurmClusterResolver: SLURM_PROCID is not set; run the task under srun "
                               "(or pass environ= a Slurm environment)")
        self._rank = int(rank)
        nodes = self._var("SLURM_STEP_NODELIST") or self._var("SLURM_JOB_NODELIST") or self._var("SLURM_NODELIST")
        if not nodes:
            raise RuntimeError("SlurmClusterResolver: no node list (SLURM_STEP_NODELIST / SLURM_JOB_NODELIST)")
        self._nodes = expand_hostlist(nodes)
        if tasks_per_node is not None:
            counts = [int(tasks_per_node)] * len(self._nodes) if isinstance(tasks_per_node, int) \
                else list(tasks_per_node)
        else:
            raw = self._var("SLURM_STEP_TASKS_PER_NODE") or self._var("SLURM_TASKS_PER_NODE")
            if raw is None:
                raise RuntimeError("SlurmClusterResolver: no tasks per node (SLURM_STEP_TASKS_PER_NODE)")
            counts = expand_tasks_per_node(raw)
        if len(counts) != len(self._nodes):
            raise ValueError(f"SlurmClusterResolver: {len(self._nodes)} nodes ({', '.join(self._nodes)}) but "
                             f"{len(counts)} tasks-per-node entries ({counts})")
        self._counts = counts
        total = sum(counts)
        ntasks = self._var("SLURM_STEP_NUM_TASKS") or self._var("SLURM_NTASKS")
        if ntasks is not None and int(ntasks) != total:
            raise ValueError(f"SlurmClusterResolver: SLURM_STEP_NUM_TASKS={ntasks} but the tasks per node add "
                             f"up to {total}")
        if jobs is None and self._env.get("AF_SLURM_JOBS"):
            try:
                jobs = json.loads(self._env["AF_SLURM_JOBS"])
            except ValueError as e:
                raise ValueError(f"AF_SLURM_JOBS is not valid JSON: {e}") from None
        if self._env.get("AF_SLURM_PORT_BASE") and port_base == 8888:
            self.port_base = int(self._env["AF_SLURM_PORT_BASE"])
        self._jobs = dict(jobs) if jobs is not None else {"worker": total}
        need = sum(int(n) for n in self._jobs.values())
        if need > total:
            raise ValueError(f"SlurmClusterResolver: jobs {self._jobs} need {need} tasks, the step has {total}")
        if not 0 <= self._rank < total:
            raise ValueError(f"SlurmClusterResolver: SLURM_PROCID={self._rank} outside the step's {total} tasks")
        self._layout = self._lay_out()
        self.task_type, self.task_id = self._layout[self._rank][:2]
        if auto_set_gpu and gpus_per_task and self.task_type is not None:
            local = self._layout[self._rank][3]
            first = local * int(gpus_per_task)
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(first + i) for i in range(int(gpus_per_task)))

    def _var(self, name):
        if self._het is not None:
            v = self._env.get(f"{name}_HET_GROUP_{self._het}")
            if v is not None:
                return v
            if name == "SLURM_PROCID":
                return self._env.get(name)
            return None
        return self._env.get(name)

    def _lay_out(self):
        """Per rank: (job, index, host:port, local index on its node)."""
        per_rank = []
        for node, count in zip(self._nodes, self._counts):
            for local in range(count):
                per_rank.append((node, local))
        jobs = [(job, i) for job, n in self._jobs.items() for i in range(int(n))]
        out = []
        for rank, (node, local) in enumerate(per_rank):
            job, index = jobs[rank] if rank < len(jobs) else (None, None)
            out.append((job, index, f"{node}:{self.port_base + local}", local))
        return out

    def cluster_spec(self) -> ClusterSpec:
        spec: dict[str, list[str]] = {job: [] for job in self._jobs}
        for job, _, address, _ in self._layout:
            if job is not None:
                spec[job].append(address)
        return ClusterSpec({job: tasks for job, tasks in spec.items() if tasks})

    def get_task_info(self) -> tuple[str, int]:
        """(job, index) of this task, as TF's resolver."""
        return self.task_type, self.task_id

    def num_accelerators(self, task_type=None, task_id=None, config_proto=None) -> dict:
        if self._gpus_per_task is not None:
            return {"GPU": int(self._gpus_per_task)}
        if self._gpus_per_node is not None:
            return {"GPU": int(self._gpus_per_node)}
        return super().num_accelerators(task_type, task_id, config_proto)


# -- Kubernetes --------------------------------------------------------------------------------------

class KubernetesClusterResolver(ClusterResolver):
    """The cluster of a training job on Kubernetes (tf.distribute.cluster_resolver.KubernetesClusterResolver).

    Without a client (the default), it needs no Kubernetes library: each job is an Indexed Job (or
    StatefulSet) whose pods `<name>-<job>-<index>` sit behind a headless Service `<name>-<job>`, as
    `actorflow k8s manifest` renders them (and as Kubeflow's TFJob names them), so every task's
    address is the DNS name `<name>-<job>-<index>.<name>-<job>.<namespace>.svc:<port>`. The job sizes
    come from `jobs` or `AF_K8S_JOBS` (JSON, e.g. `{"ps": 2, "worker": 8}`), the name from `name` or
    `AF_K8S_NAME`, the namespace from `namespace` or the downward API's `POD_NAMESPACE`, this pod's
    job from `AF_K8S_JOB`, the port from `tf_server_port` or `AF_K8S_PORT` (TF's 8470 without
    either), and its index from `JOB_COMPLETION_INDEX` (Indexed Jobs) or the ordinal at
    the end of the pod's host name (StatefulSets).

    With `override_client` (a `kubernetes.client.CoreV1Api`), it lists the running pods of each job
    by the label selectors of `job_to_label_mapping`, as TensorFlow's resolver does, and uses their
    pod IPs."""

    def __init__(self, job_to_label_mapping=None, tf_server_port=None, rpc_layer="af", override_client=None, *,
                 jobs=None, name=None, namespace=None, environ: Mapping[str, str] | None = None,
                 cluster_domain="svc"):
        self._env = os.environ if environ is None else environ
        self._port = int(tf_server_port if tf_server_port is not None else self._env.get("AF_K8S_PORT", 8470))
        self.rpc_layer = rpc_layer
        self._client = override_client
        self._labels = job_to_label_mapping
        self._domain = cluster_domain
        env_jobs = self._env.get("AF_K8S_JOBS")
        if jobs is None and env_jobs:
            try:
                jobs = json.loads(env_jobs)
            except ValueError as e:
                raise ValueError(f"AF_K8S_JOBS is not valid JSON: {e}") from None
        if override_client is None and not jobs:
            raise ValueError("KubernetesClusterResolver: give jobs= (or AF_K8S_JOBS) with each job's task count, "
                             "or override_client= a kubernetes CoreV1Api to list pods")
        self._jobs = {str(k): int(v) for k, v in (jobs or {}).items()}
        self._name = name or self._env.get("AF_K8S_NAME", "")
        self._namespace = namespace or self._env.get("POD_NAMESPACE", "default")
        self.task_type = self._env.get("AF_K8S_JOB")
        self.task_id = self._own_index()

    def _own_index(self):
        if self._env.get("JOB_COMPLETION_INDEX") is not None:
            return int(self._env["JOB_COMPLETION_INDEX"])
        host = self._env.get("HOSTNAME") or socket.gethostname()
        m = re.search(r"-(\d+)$", host)
        return int(m.group(1)) if m and self.task_type else None

    def _service(self, job):
        return f"{self._name}-{job}" if self._name else job

    def cluster_spec(self) -> ClusterSpec:
        if self._client is not None:
            return self._from_api()
        spec = {}
        for job, n in self._jobs.items():
            svc = self._service(job)
            spec[job] = [f"{svc}-{i}.{svc}.{self._namespace}.{self._domain}:{self._port}" for i in range(n)]
        return ClusterSpec(spec)

    def _from_api(self) -> ClusterSpec:
        labels = self._labels or {"worker": "job-name=worker", "ps": "job-name=ps"}
        spec = {}
        for job, selector in labels.items():
            pods = self._client.list_pod_for_all_namespaces(label_selector=selector).items
            addresses = []
            for pod in sorted(pods, key=lambda p: p.metadata.name):
                if pod.status.phase != "Running":
                    raise RuntimeError(f"KubernetesClusterResolver: pod {pod.metadata.name} of job {job} is "
                                       f"{pod.status.phase}, not Running")
                addresses.append(f"{pod.status.pod_ip}:{self._port}")
            if addresses:
                spec[job] = addresses
        return ClusterSpec(spec)


class TPUClusterResolver(ClusterResolver):
    """tf.distribute.cluster_resolver.TPUClusterResolver: finds a Cloud TPU's workers. actorflow has
    no TPU, so constructing one is a ValueError that names the TPU asked for; programs that build it
    only when told to use a TPU (BERT's `if FLAGS.use_tpu and FLAGS.tpu_name`) run on the CPU."""

    def __init__(self, tpu=None, zone=None, project=None, job_name="worker", coordinator_name=None,
                 coordinator_address=None, credentials="default", service=None, discovery_url=None):
        raise ValueError(f"TPUClusterResolver(tpu={tpu!r}): actorflow has no TPUs to resolve; run the program's "
                         "CPU path (TPUEstimator(use_tpu=False)) or use another ClusterResolver")


class UnionClusterResolver(ClusterResolver):
    """The union of several resolvers' cluster specs (tf.distribute.cluster_resolver.UnionClusterResolver);
    task and master come from the first resolver unless given."""

    def __init__(self, *resolvers, task_type=None, task_id=None, rpc_layer=None):
        if not resolvers:
            raise ValueError("UnionClusterResolver needs at least one resolver")
        self._resolvers = resolvers
        self.task_type = task_type if task_type is not None else resolvers[0].task_type
        self.task_id = task_id if task_id is not None else resolvers[0].task_id
        self.rpc_layer = rpc_layer if rpc_layer is not None else resolvers[0].rpc_layer

    def cluster_spec(self) -> ClusterSpec:
        merged: dict[str, dict[int, str]] = {}
        for r in self._resolvers:
            spec = r.cluster_spec()
            for job in spec.jobs:
                tasks = merged.setdefault(job, {})
                for i in spec.task_indices(job):
                    address = spec.task_address(job, i)
                    if i in tasks and tasks[i] != address:
                        raise KeyError(f"UnionClusterResolver: /job:{job}/task:{i} is both {tasks[i]} and {address}")
                    tasks[i] = address
        return ClusterSpec(merged)


def server_for(resolver: ClusterResolver, **kwargs):
    """A started `af.train.Server` for the task `resolver` names (Server.create_from_resolver).

    It binds to every interface unless the task's address is a loopback one, since a cluster manager's
    peers reach it from other hosts (the server warns when that happens without TLS)."""
    from actorflow.cluster.server import Server
    job, task = resolver.task_type, resolver.task_id
    if job is None or task is None:
        raise ValueError(f"{type(resolver).__name__} does not name this process's task (task_type={job!r}, "
                         f"task_id={task!r}); a parameter server or worker must know its role")
    spec = resolver.cluster_spec()
    host = spec.task_address(job, task).rsplit(":", 1)[0]
    if "bind" not in kwargs:
        kwargs["bind"] = "127.0.0.1" if host in ("localhost", "127.0.0.1", "::1") else "0.0.0.0"
    return Server(spec, job_name=job, task_index=task, **kwargs)
