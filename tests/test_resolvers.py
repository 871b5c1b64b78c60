"""Cluster resolvers (TF_CONFIG, Simple, Slurm, Kubernetes) on recorded environments, the rendered
Kubernetes objects against the API schemas, the Slurm script, and servers started from resolvers."""
import json
import types

import numpy as np
import pytest

import actorflow as af
from actorflow.cluster.launchers import render_k8s, render_sbatch
from actorflow.cluster.local import free_port, free_ports
from actorflow.cluster.resolver import expand_hostlist, expand_tasks_per_node

cr = af.distribute.cluster_resolver


# -- TF_CONFIG and Simple --------------------------------------------------------------------------------

def test_tf_config_resolver_reads_the_variable_each_time(monkeypatch):
    cfg = {"cluster": {"ps": ["h0:2222"], "worker": ["h1:2222", "h2:2222"]},
           "task": {"type": "worker", "index": 1}, "rpc_layer": "grpc", "environment": "cloud"}
    monkeypatch.setenv("TF_CONFIG", json.dumps(cfg))
    r = cr.TFConfigClusterResolver()
    assert r.cluster_spec().as_dict() == cfg["cluster"]
    assert (r.task_type, r.task_id, r.rpc_layer, r.environment) == ("worker", 1, "grpc", "cloud")
    assert r.master() == "grpc://h2:2222"
    assert r.master("ps", 0, rpc_layer="af") == "af://h0:2222"
    cfg["task"]["index"] = 0
    monkeypatch.setenv("TF_CONFIG", json.dumps(cfg))
    assert r.task_id == 0                          # read again, as TF's resolver does
    r.task_type, r.task_id = "ps", 0               # explicit values win
    assert r.master() == "grpc://h0:2222"


def test_tf_config_resolver_without_the_variable(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    r = cr.TFConfigClusterResolver()
    assert not r.cluster_spec() and r.master() == "" and r.task_type is None
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="TF_CONFIG is not valid JSON"):
        r.cluster_spec()


def test_simple_resolver():
    spec = af.train.ClusterSpec({"worker": ["a:1", "b:2"]})
    r = cr.SimpleClusterResolver(spec, master="grpc://a:1", task_type="worker", task_id=1, num_accelerators={"GPU": 2})
    assert r.cluster_spec() == spec
    assert r.master() == "grpc://a:1"
    assert r.master(rpc_layer="af") == "af://a:1"
    assert r.master("worker", 1) == "b:2"
    assert r.num_accelerators() == {"GPU": 2}


def test_union_resolver_merges_and_refuses_conflicts():
    a = cr.SimpleClusterResolver({"ps": ["p:1"]}, task_type="worker", task_id=0)
    b = cr.SimpleClusterResolver({"worker": ["w:1"]})
    u = cr.UnionClusterResolver(a, b)
    assert u.cluster_spec().as_dict() == {"ps": ["p:1"], "worker": ["w:1"]}
    assert u.master() == "w:1"
    with pytest.raises(KeyError, match="/job:ps/task:0"):
        cr.UnionClusterResolver(a, cr.SimpleClusterResolver({"ps": ["q:1"]})).cluster_spec()


# -- Slurm ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, hosts", [
    ("node1", ["node1"]),
    ("node[1-3]", ["node1", "node2", "node3"]),
    ("cn[003-005,010],gpu7", ["cn003", "cn004", "cn005", "cn010", "gpu7"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("a[09-11]", ["a09", "a10", "a11"]),
    ("login-1,compute-[2,4]", ["login-1", "compute-2", "compute-4"]),
])
def test_expand_hostlist(text, hosts):
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize("bad", ["node[1-3", "node1-3]", "node[3-1]", "node[a-b]"])
def test_bad_hostlist_is_named(bad):
    with pytest.raises(ValueError, match="Slurm host list"):
        expand_hostlist(bad)


def test_expand_tasks_per_node():
    assert expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert expand_tasks_per_node("4") == [4]
    with pytest.raises(ValueError, match="tasks-per-node"):
        expand_tasks_per_node("2(3)")


# Environments as srun sets them (recorded from real multi-node jobs, trimmed to what the resolver reads).
MULTI_NODE = {"SLURM_PROCID": "6", "SLURM_STEP_NODELIST": "cn[003-005,010]", "SLURM_STEP_TASKS_PER_NODE": "2(x3),1",
              "SLURM_STEP_NUM_TASKS": "7", "SLURM_JOB_NODELIST": "cn[003-005,010]", "SLURM_NTASKS": "7"}


def test_slurm_several_tasks_per_node():
    r = cr.SlurmClusterResolver(jobs={"ps": 2, "worker": 5}, port_base=9000, environ=MULTI_NODE)
    assert r.cluster_spec().as_dict() == {
        "ps": ["cn003:9000", "cn003:9001"],
        "worker": ["cn004:9000", "cn004:9001", "cn005:9000", "cn005:9001", "cn010:9000"]}
    assert (r.task_type, r.task_id) == ("worker", 4)
    assert r.master() == "af://cn010:9000"
    env0 = dict(MULTI_NODE, SLURM_PROCID="1")
    assert cr.SlurmClusterResolver(jobs={"ps": 2, "worker": 5}, environ=env0).get_task_info() == ("ps", 1)


def test_slurm_defaults_to_all_workers_and_reads_af_slurm_jobs():
    r = cr.SlurmClusterResolver(environ=MULTI_NODE)
    assert r.cluster_spec().num_tasks("worker") == 7 and r.task_id == 6
    env = dict(MULTI_NODE, AF_SLURM_JOBS='{"ps": 1, "worker": 6}', AF_SLURM_PORT_BASE="7000")
    r = cr.SlurmClusterResolver(environ=env)
    assert r.cluster_spec().task_address("ps", 0) == "cn003:7000" and r.get_task_info() == ("worker", 5)


def test_slurm_heterogeneous_job_component():
    env = {"SLURM_PROCID": "1",
           "SLURM_JOB_NODELIST_HET_GROUP_0": "gpu01", "SLURM_TASKS_PER_NODE_HET_GROUP_0": "1",
           "SLURM_JOB_NODELIST_HET_GROUP_1": "cpu[01-02]", "SLURM_TASKS_PER_NODE_HET_GROUP_1": "2,1",
           "SLURM_JOB_NODELIST": "gpu01,cpu[01-02]"}
    r = cr.SlurmClusterResolver(jobs={"ps": 1, "worker": 2}, environ=env, het_group=1)
    assert r.cluster_spec().as_dict() == {"ps": ["cpu01:8888"], "worker": ["cpu01:8889", "cpu02:8888"]}
    assert r.get_task_info() == ("worker", 0)


@pytest.mark.parametrize("env, jobs, message", [
    ({}, None, "SLURM_PROCID is not set"),
    ({"SLURM_PROCID": "0"}, None, "no node list"),
    (dict(MULTI_NODE, SLURM_STEP_TASKS_PER_NODE="2(x2)"), None, "4 nodes .* but 2 tasks-per-node"),
    (dict(MULTI_NODE, SLURM_STEP_NUM_TASKS="8"), None, "SLURM_STEP_NUM_TASKS=8"),
    (MULTI_NODE, {"ps": 3, "worker": 5}, "need 8 tasks, the step has 7"),
    (dict(MULTI_NODE, SLURM_PROCID="7"), None, "SLURM_PROCID=7 outside"),
])
def test_slurm_errors_name_the_variable(env, jobs, message):
    with pytest.raises((RuntimeError, ValueError), match=message):
        cr.SlurmClusterResolver(jobs=jobs, environ=env)


def test_slurm_sets_visible_gpus_per_task(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    env = dict(MULTI_NODE, SLURM_PROCID="3")          # second task on cn004
    r = cr.SlurmClusterResolver(jobs={"ps": 2, "worker": 5}, gpus_per_task=2, environ=env)
    import os
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2,3" and r.num_accelerators() == {"GPU": 2}


def test_slurm_script():
    text = render_sbatch("train", ps=2, workers=8, nodes=5, time_limit="01:00:00")
    assert "#SBATCH --ntasks=10" in text and "#SBATCH --nodes=5" in text and "#SBATCH --time=01:00:00" in text
    assert "export AF_SLURM_JOBS='{\"ps\": 2, \"worker\": 8}'" in text
    assert "srun --ntasks=10 --kill-on-bad-exit=0 actorflow worker --from-slurm --bind 0.0.0.0" in text
    assert "echo" not in text                          # the token is never printed
    with pytest.raises(ValueError, match="at least one worker"):
        render_sbatch("x", ps=1, workers=0)


# -- Kubernetes -----------------------------------------------------------------------------------------

K8S_ENV = {"AF_K8S_NAME": "mnist", "AF_K8S_JOBS": '{"ps": 2, "worker": 3}', "AF_K8S_JOB": "worker",
           "AF_K8S_PORT": "2222", "POD_NAMESPACE": "team-a", "JOB_COMPLETION_INDEX": "2",
           "HOSTNAME": "mnist-worker-2"}


def test_kubernetes_resolver_from_downward_api():
    r = cr.KubernetesClusterResolver(environ=K8S_ENV)
    spec = r.cluster_spec()
    assert spec.job_tasks("ps") == ["mnist-ps-0.mnist-ps.team-a.svc:2222", "mnist-ps-1.mnist-ps.team-a.svc:2222"]
    assert spec.task_address("worker", 2) == "mnist-worker-2.mnist-worker.team-a.svc:2222"
    assert (r.task_type, r.task_id) == ("worker", 2)
    assert r.master() == "af://mnist-worker-2.mnist-worker.team-a.svc:2222"


def test_kubernetes_resolver_statefulset_ordinal():
    env = {k: v for k, v in K8S_ENV.items() if k != "JOB_COMPLETION_INDEX"}
    env.update(AF_K8S_JOB="ps", HOSTNAME="mnist-ps-1")
    assert cr.KubernetesClusterResolver(environ=env).task_id == 1


def test_kubernetes_resolver_needs_jobs_or_client():
    with pytest.raises(ValueError, match="AF_K8S_JOBS"):
        cr.KubernetesClusterResolver(environ={})


def test_kubernetes_resolver_with_api_client():
    # The shape of kubernetes.client.CoreV1Api().list_pod_for_all_namespaces(label_selector=...).
    def pod(name, ip, phase="Running"):
        return types.SimpleNamespace(metadata=types.SimpleNamespace(name=name),
                                     status=types.SimpleNamespace(pod_ip=ip, phase=phase))
    pods = {"job-name=ps": [pod("ps-0", "10.0.0.5")],
            "job-name=worker": [pod("worker-1", "10.0.0.7"), pod("worker-0", "10.0.0.6")]}
    client = types.SimpleNamespace(
        list_pod_for_all_namespaces=lambda label_selector: types.SimpleNamespace(items=pods[label_selector]))
    r = cr.KubernetesClusterResolver(tf_server_port=8470, override_client=client, environ={})
    assert r.cluster_spec().as_dict() == {"worker": ["10.0.0.6:8470", "10.0.0.7:8470"], "ps": ["10.0.0.5:8470"]}
    pods["job-name=ps"] = [pod("ps-0", None, phase="Pending")]
    with pytest.raises(RuntimeError, match="ps-0 of job ps is Pending"):
        r.cluster_spec()


def _latest_versions(n=2):
    from kubernetes_validate import utils
    seen = sorted({tuple(int(x) for x in v.split(".")) for v in utils.all_versions()})
    return [".".join(map(str, v)) for v in seen[-n:]]


@pytest.mark.parametrize("version", _latest_versions())
def test_manifests_validate_against_the_kubernetes_schema(version):
    import kubernetes_validate
    objects = render_k8s("mnist", ps=2, workers=8, image="registry.local/actorflow:0.1",
                         command=["python", "train.py", "--steps", "1000"], namespace="team-a")
    assert [o["kind"] for o in objects] == ["Secret", "Service", "Job", "Service", "Job"]
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)
    ps_job, worker_job = objects[2], objects[4]
    assert worker_job["spec"]["completions"] == 8 and worker_job["spec"]["completionMode"] == "Indexed"
    pod = worker_job["spec"]["template"]["spec"]
    assert pod["subdomain"] == "mnist-worker" and pod["restartPolicy"] == "OnFailure"
    assert pod["containers"][0]["command"][:2] == ["python", "train.py"]
    assert ps_job["spec"]["template"]["spec"]["containers"][0]["command"][:3] == ["actorflow", "worker", "--from-k8s"]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["ACTORFLOW_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "mnist-token"


def test_manifest_and_resolver_agree_on_names():
    """The pods the manifest makes find each other under the names the resolver computes."""
    objects = render_k8s("mnist", ps=2, workers=3, image="img")
    job = objects[4]
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    env.update(POD_NAMESPACE="default", JOB_COMPLETION_INDEX="1")
    r = cr.KubernetesClusterResolver(environ=env)
    host = r.cluster_spec().task_address("worker", 1).split(".")
    # <job name>-<index>.<subdomain>.<namespace>.svc: Indexed Job pods get exactly this DNS name.
    assert host[0] == f"{job['metadata']['name']}-1"
    assert host[1] == job["spec"]["template"]["spec"]["subdomain"]


def test_manifest_refuses_a_bad_name():
    with pytest.raises(ValueError, match="DNS label"):
        render_k8s("My_Cluster", ps=1, workers=1, image="img")


def test_cli_manifest_keeps_the_token_off_stdout(capsys, tmp_path):
    from actorflow.cli import main
    assert main(["k8s", "manifest", "--image", "img", "--name", "demo"]) == 0
    out, err = capsys.readouterr()
    assert "kind: Secret" not in out and "kubectl create secret generic demo-token" in err
    path = tmp_path / "m.yaml"
    assert main(["k8s", "manifest", "--image", "img", "--out", str(path)]) == 0
    assert "kind: Secret" in path.read_text() and (path.stat().st_mode & 0o777) == 0o600


# -- Servers started from resolvers, on loopback --------------------------------------------------------

def test_servers_from_resolvers_train_together(monkeypatch):
    ps, worker = free_ports(2)
    cluster = {"ps": [f"127.0.0.1:{ps}"], "worker": [f"127.0.0.1:{worker}"]}
    token = "resolver-test-token"
    servers = []
    try:
        for job in ("ps", "worker"):
            monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": job, "index": 0}}))
            servers.append(af.train.Server.create_from_resolver(cr.TFConfigClusterResolver(), token=token))
        assert servers[0].address == cluster["ps"][0]
        g = af.Graph()
        with g.as_default():
            with af.device("/job:ps/task:0"):
                v = af.Variable(np.zeros(3, np.float32))
            with af.device("/job:worker/task:0"):
                step = af.assign_add(v, af.ones([3]))
            resolver = cr.TFConfigClusterResolver(rpc_layer="af")
            target = resolver.master() + f"?token={token}"
            with af.Session(target, graph=g) as sess:
                sess.run(v.initializer)
                for _ in range(3):
                    sess.run(step)
                np.testing.assert_array_equal(sess.run(v), [3, 3, 3])
    finally:
        for s in servers:
            s.stop()


def test_server_from_resolver_without_a_role():
    with pytest.raises(ValueError, match="does not name this process's task"):
        af.train.Server.create_from_resolver(cr.SimpleClusterResolver({"worker": ["127.0.0.1:1"]}))


# -- `actorflow worker --from-slurm` / `--from-k8s` ------------------------------------------------------

def _start_worker(flag, env):
    import os
    import subprocess
    import sys
    return subprocess.Popen([sys.executable, "-m", "actorflow.cli", "worker", flag], env=dict(os.environ, **env),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_worker_from_slurm_serves_its_task(tmp_path):
    from actorflow.cluster.local import task_health
    port = free_port()
    env = {"SLURM_PROCID": "0", "SLURM_STEP_NODELIST": "localhost", "SLURM_STEP_TASKS_PER_NODE": "1",
           "SLURM_STEP_NUM_TASKS": "1", "AF_SLURM_JOBS": '{"worker": 1}', "AF_SLURM_PORT_BASE": str(port),
           "ACTORFLOW_TOKEN": "slurm-token"}
    p = _start_worker("--from-slurm", env)
    try:
        import time
        deadline = time.monotonic() + 60
        while task_health(f"localhost:{port}", "slurm-token", 0.5) is None:
            assert p.poll() is None, p.stdout.read()
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        p.terminate()
        out = p.communicate(timeout=30)[0]
    assert "/job:worker/task:0 serving on localhost:" in out


def test_worker_from_k8s_without_its_environment_says_what_is_missing():
    p = _start_worker("--from-k8s", {"ACTORFLOW_TOKEN": "t"})
    out = p.communicate(timeout=60)[0]
    assert p.returncode == 2 and "--from-k8s" in out and "AF_K8S_JOBS" in out
