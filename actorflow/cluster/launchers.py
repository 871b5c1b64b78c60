"""What a cluster manager needs to start an actorflow cluster: Kubernetes objects and Slurm batch scripts.

Both only describe the tasks; the engine schedules, restarts and collects logs. Each task learns its
role at start from its environment through a resolver (actorflow/cluster/resolver.py), so one image
or one script serves every task.

Kubernetes (`render_k8s`): per job a headless Service and an Indexed Job whose pods are
`<name>-<job>-<index>` (the names Kubeflow's TFJob gives its replicas), the cluster token in a
Secret, and `restartPolicy: OnFailure`, so a task that dies is restarted in place under the same DNS
name and rejoins as a restarted actorflow task does; the parameter servers' state survives a worker
restart, and the chief restores the latest checkpoint after a parameter server restart.

Slurm (`render_sbatch`): one `srun` step whose tasks run the command (by default
`actorflow worker --from-slurm`, a server); `AF_SLURM_JOBS` tells each task's SlurmClusterResolver
how ranks map to jobs.
"""
from __future__ import annotations

import json
import secrets
import shlex

__all__ = ["render_k8s", "render_sbatch", "to_yaml"]

LABEL = "actorflow.io"


def _jobs(ps: int, workers: int) -> dict[str, int]:
    if ps < 0 or workers < 1:
        raise ValueError(f"a cluster needs at least one worker and no negative counts (ps={ps}, workers={workers})")
    jobs = {}
    if ps:
        jobs["ps"] = int(ps)
    jobs["worker"] = int(workers)
    return jobs


def _dns_label(name: str) -> str:
    import re
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) or len(name) > 40:
        raise ValueError(f"cluster name {name!r} must be a DNS label: lower-case letters, digits and '-', "
                         f"at most 40 characters (pod names add '-<job>-<index>')")
    return name


def render_k8s(name: str, *, ps: int, workers: int, image: str, command: list[str] | None = None,
               port: int = 2222, namespace: str | None = None, token: str | None = None,
               cpu: str = "1", memory: str = "2Gi", image_pull_policy: str = "IfNotPresent",
               backoff_limit: int = 6) -> list[dict]:
    """The Kubernetes objects of a cluster: a Secret, then a headless Service and an Indexed Job per job.

    Parameter servers run `actorflow worker --from-k8s`; workers run `command` when given (a training
    program that starts its server with `Server.create_from_resolver(KubernetesClusterResolver())`, as
    TF-1.x programs do under TFJob), else a server too."""
    _dns_label(name)
    jobs = _jobs(ps, workers)
    token = token or secrets.token_urlsafe(32)
    meta_ns = {"namespace": namespace} if namespace else {}
    secret_name = f"{name}-token"
    objects: list[dict] = [{
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": secret_name, "labels": {f"{LABEL}/cluster": name}, **meta_ns},
        "type": "Opaque", "stringData": {"token": token},
    }]
    server = ["actorflow", "worker", "--from-k8s", "--bind", "0.0.0.0"]
    for job, n in jobs.items():
        full = f"{name}-{job}"
        labels = {f"{LABEL}/cluster": name, f"{LABEL}/job": job}
        objects.append({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": full, "labels": dict(labels), **meta_ns},
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": dict(labels),
                     "ports": [{"name": "actorflow", "port": port, "targetPort": port, "protocol": "TCP"}]},
        })
        env = [
            {"name": "AF_K8S_NAME", "value": name},
            {"name": "AF_K8S_JOBS", "value": json.dumps(jobs)},
            {"name": "AF_K8S_JOB", "value": job},
            {"name": "AF_K8S_PORT", "value": str(port)},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "ACTORFLOW_TOKEN", "valueFrom": {"secretKeyRef": {"name": secret_name, "key": "token"}}},
        ]
        cmd = list(command) if (command and job == "worker") else server
        objects.append({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": full, "labels": dict(labels), **meta_ns},
            "spec": {
                "completionMode": "Indexed", "completions": n, "parallelism": n,
                "backoffLimit": backoff_limit * n,
                "template": {
                    "metadata": {"labels": dict(labels)},
                    "spec": {
                        "subdomain": full,
                        "restartPolicy": "OnFailure",
                        "containers": [{
                            "name": "actorflow", "image": image, "imagePullPolicy": image_pull_policy,
                            "command": cmd, "env": [dict(e) for e in env],
                            "ports": [{"name": "actorflow", "containerPort": port, "protocol": "TCP"}],
                            "resources": {"requests": {"cpu": cpu, "memory": memory},
                                          "limits": {"memory": memory}},
                            "readinessProbe": {"httpGet": {"path": "/health", "port": port},
                                               "periodSeconds": 5},
                        }],
                    },
                },
            },
        })
    return objects


def to_yaml(objects: list[dict]) -> str:
    """The objects as one multi-document YAML stream, as `kubectl apply -f` takes it."""
    import yaml
    return "---\n".join(yaml.safe_dump(o, sort_keys=False) for o in objects)


def render_sbatch(name: str, *, ps: int, workers: int, command: list[str] | None = None, nodes: int | None = None,
                  port_base: int = 8888, cpus_per_task: int = 1, time_limit: str | None = None,
                  partition: str | None = None, extra: list[str] | None = None) -> str:
    """An sbatch script that starts every task of the cluster in one srun step.

    Each task runs `command` (default: `actorflow worker --from-slurm`, a server); a training program
    run this way starts its server with `Server.create_from_resolver(SlurmClusterResolver())`, which
    reads `AF_SLURM_JOBS` to know which ranks are parameter servers. The token is made once per job
    unless ACTORFLOW_TOKEN is already set, and never echoed."""
    jobs = _jobs(ps, workers)
    ntasks = sum(jobs.values())
    cmd = list(command) if command else ["actorflow", "worker", "--from-slurm", "--bind", "0.0.0.0"]
    lines = ["#!/bin/bash", f"#SBATCH --job-name={name}", f"#SBATCH --ntasks={ntasks}",
             f"#SBATCH --cpus-per-task={cpus_per_task}", f"#SBATCH --output={name}-%j.out"]
    if nodes:
        lines.append(f"#SBATCH --nodes={nodes}")
    if time_limit:
        lines.append(f"#SBATCH --time={time_limit}")
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    lines += [f"#SBATCH {e}" for e in (extra or [])]
    lines += [
        "set -euo pipefail",
        "umask 077",
        "# One secret per job, shared by its tasks through the environment srun passes on.",
        'if [ -z "${ACTORFLOW_TOKEN:-}" ]; then',
        '  ACTORFLOW_TOKEN=$(python3 -c "import secrets; print(secrets.token_urlsafe(32))")',
        "fi",
        "export ACTORFLOW_TOKEN",
        f"export AF_SLURM_JOBS={shlex.quote(json.dumps(jobs))}",
        f"export AF_SLURM_PORT_BASE={int(port_base)}",
        f"srun --ntasks={ntasks} --kill-on-bad-exit=0 {shlex.join(cmd)}",
        "",
    ]
    return "\n".join(lines)
