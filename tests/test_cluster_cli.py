"""The `actorflow` command for clusters: `cluster up | status | down` and `worker` (configured by a spec
file or by TF_CONFIG), run as real subprocesses on loopback."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import actorflow as af
from actorflow.cluster import ClusterSpec
from actorflow.cluster.local import free_ports, task_health

pytestmark = pytest.mark.timeout(120)

CLI = [sys.executable, "-m", "actorflow.cli"]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is gone for our purposes once nothing runs.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = predicate()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def cli(*args, timeout=60, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=timeout, env=env)


# ---------------------------------------------------------------------------------------------------
# cluster up / status / down
# ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def up(tmp_path_factory):
    """`actorflow cluster up --ps 1 --workers 2` running in the background for the module."""
    d = tmp_path_factory.mktemp("cluster")
    proc = subprocess.Popen(CLI + ["cluster", "up", "--ps", "1", "--workers", "2", "--dir", str(d)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []

    def ready():
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"cluster up exited ({proc.poll()}):\n" + "".join(lines))
        lines.append(line)
        return "Ctrl-C" in line or "cluster down" in line
    try:
        wait_for(ready, 60, "cluster up to report its tasks")
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    # Reap `up` as soon as it exits, as an interactive shell would: `cluster down` watches its pid,
    # and an unreaped zombie would still answer kill(pid, 0).
    rest = []
    reaper = threading.Thread(target=lambda: (rest.append(proc.stdout.read()), proc.wait()), daemon=True)
    reaper.start()
    state = json.loads((d / "cluster.json").read_text())
    # The task table: task, address, pid, state.
    printed = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(/job:\S+)\s+\S+\s+(\d+)\s", "".join(lines), re.M)}
    yield {"dir": d, "proc": proc, "stdout": "".join(lines), "state": state, "printed_pids": printed,
           "reaper": reaper, "rest": rest}
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for pid in printed.values():
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_up_writes_spec_and_token(up):
    state = up["state"]
    spec = ClusterSpec(state["cluster"])
    assert spec.num_tasks("ps") == 1 and spec.num_tasks("worker") == 2
    assert all(a.startswith("127.0.0.1:") for j in spec.jobs for a in spec.job_tasks(j))
    assert isinstance(state["token"], str) and len(state["token"]) >= 16
    # The spec file holds the token: only its owner may read it.
    assert os.stat(up["dir"] / "cluster.json").st_mode & 0o077 == 0
    assert len(up["printed_pids"]) == 3
    assert "healthy" in up["stdout"] and "DOWN" not in up["stdout"]
    assert state["token"] not in up["stdout"], "the token is printed only when asked (--show-token)"


def test_up_records_task_pids_in_the_state_file(up):
    pids = up["state"].get("pids", {})
    assert pids == up["printed_pids"], "cluster.json must name every task's pid (for `down` and for tooling)"


def test_status_lists_healthy_tasks(up):
    r = cli("cluster", "status", "--dir", str(up["dir"]))
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("/job:")]
    assert len(lines) == 3
    assert all("healthy" in ln for ln in lines)
    for task in ("/job:ps/task:0", "/job:worker/task:0", "/job:worker/task:1"):
        assert any(ln.startswith(task) for ln in lines)
    # A table: every column starts at the same offset on every line, header included, whatever the
    # width of the job names ("ps" and "worker").
    table = [ln for ln in r.stdout.splitlines() if ln.strip()]
    assert table[0].split() == ["task", "address", "state", "pid", "steps", "up", "(s)"]
    offsets = {tuple(m.start() for m in re.finditer(r"(?:^|(?<=\s\s))\S", ln)) for ln in table}
    assert len(offsets) == 1, table
    assert {p for p in (int(ln.split()[3]) for ln in lines)} == set(up["state"]["pids"].values())


def test_a_second_up_in_the_same_folder_is_refused(up):
    """`cluster up` twice in one folder used to overwrite cluster.json, leaving the first cluster
    running with no way for `down` to find it."""
    before = (up["dir"] / "cluster.json").read_bytes()
    r = cli("cluster", "up", "--ps", "1", "--workers", "1", "--dir", str(up["dir"]), timeout=60)
    assert r.returncode == 1
    assert "still running" in r.stderr and f"actorflow cluster down --dir {up['dir']}" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert (up["dir"] / "cluster.json").read_bytes() == before
    assert json.loads((up["dir"] / "up.pid").read_text())["pid"] == up["proc"].pid
    assert all(alive(p) for p in up["printed_pids"].values())


def test_session_on_the_cli_cluster(up):
    state = up["state"]
    spec = ClusterSpec(state["cluster"])
    target = f"af://{spec.task_address('worker', 1)}?token={state['token']}"
    g = af.Graph()
    with g.as_default():
        with af.device("/job:ps/task:0"):
            v = af.Variable(np.arange(3, dtype=np.float32), name="cli_v")
        with af.device("/job:worker/task:0"):
            y = v * 2.0
        with af.Session(target) as sess:
            sess.run(v.initializer)
            np.testing.assert_array_equal(sess.run(y), [0, 2, 4])


def test_status_without_a_cluster_fails(tmp_path):
    r = cli("cluster", "status", "--dir", str(tmp_path))
    assert r.returncode != 0
    assert "no cluster" in r.stderr


def test_down_without_a_cluster_fails(tmp_path):
    r = cli("cluster", "down", "--dir", str(tmp_path))
    assert r.returncode != 0


def test_down_signals_nothing_but_what_up_started(tmp_path):
    """A stale up.pid whose pid now belongs to another process (same number, another start time), and a
    cluster.json naming pids that are not workers of this folder: `down` stops none of them."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "up.pid").write_text(json.dumps({"pid": other.pid, "start": 1}))
        (tmp_path / "cluster.json").write_text(json.dumps({"cluster": {"worker": ["127.0.0.1:1"]}, "token": "t",
                                                           "pids": {"/job:worker/task:0": other.pid}}))
        r = cli("cluster", "down", "--dir", str(tmp_path))
        assert r.returncode == 0, r.stderr
        assert "was not running" in r.stdout
        assert other.poll() is None and alive(other.pid)
        assert not (tmp_path / "up.pid").exists()
    finally:
        other.kill()
        other.wait()


def test_down_stops_tasks_that_outlived_a_killed_launcher(tmp_path):
    """`cluster up` killed with -9 cannot stop its tasks; a task that is stuck (here: SIGSTOPped, so it
    cannot notice its parent is gone) is left behind. `down` stops it, by the pid cluster.json records
    and only after checking it is a worker of this folder's spec file."""
    proc = subprocess.Popen(CLI + ["cluster", "up", "--ps", "0", "--workers", "1", "--dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    worker = None
    try:
        out = []
        wait_for(lambda: out.append(proc.stdout.readline()) or "Ctrl-C" in out[-1] or not out[-1], 60, "cluster up")
        worker = json.loads((tmp_path / "cluster.json").read_text())["pids"]["/job:worker/task:0"]
        os.kill(worker, signal.SIGSTOP)
        proc.kill()
        proc.wait()
        assert alive(worker)
        r = cli("cluster", "down", "--dir", str(tmp_path), timeout=60)
        assert r.returncode == 0, r.stderr
        assert f"stopping /job:worker/task:0 (pid {worker})" in r.stdout
        wait_for(lambda: not alive(worker), 10, "the stuck worker to be gone")
        assert not (tmp_path / "up.pid").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if worker and alive(worker):
            os.kill(worker, signal.SIGKILL)


def test_up_replaces_the_record_of_a_launcher_that_is_gone(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (tmp_path / "up.pid").write_text(str(gone.pid))          # the format older versions wrote
    proc = subprocess.Popen(CLI + ["cluster", "up", "--ps", "0", "--workers", "1", "--dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out = []
        wait_for(lambda: out.append(proc.stdout.readline()) or "Ctrl-C" in out[-1] or not out[-1], 60, "cluster up")
        assert "Ctrl-C" in out[-1], "".join(out)
        assert json.loads((tmp_path / "up.pid").read_text())["pid"] == proc.pid
        r = cli("cluster", "down", "--dir", str(tmp_path))
        assert r.returncode == 0, r.stderr
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_zz_down_stops_everything(up):
    pids = set(up["printed_pids"].values()) | set(up["state"].get("pids", {}).values())
    assert pids and all(alive(p) for p in pids)
    r = cli("cluster", "down", "--dir", str(up["dir"]), timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    up["reaper"].join(10)
    assert up["proc"].returncode == 0
    assert "cluster down" in "".join(up["rest"])
    left = [p for p in pids if alive(p)]
    assert not left, f"worker processes left behind: {left}"
    # Status now reports the tasks down and fails.
    r = cli("cluster", "status", "--dir", str(up["dir"]))
    assert r.returncode != 0


def test_ctrl_c_stops_everything(tmp_path):
    proc = subprocess.Popen(CLI + ["cluster", "up", "--ps", "1", "--workers", "1", "--dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out = []
        wait_for(lambda: out.append(proc.stdout.readline()) or "Ctrl-C" in out[-1] or not out[-1], 60, "cluster up")
        pids = [int(p) for p in re.findall(r"^/job:\S+\s+\S+\s+(\d+)\s", "".join(out), re.M)]
        assert len(pids) == 2
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
        assert not [p for p in pids if alive(p)]
        assert not (tmp_path / "up.pid").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------------------------------------------
# actorflow worker
# ---------------------------------------------------------------------------------------------------

def _start_workers(cluster: dict, env_for) -> list[subprocess.Popen]:
    procs = []
    for job, addrs in cluster.items():
        for i in range(len(addrs)):
            args, env = env_for(job, i)
            procs.append(subprocess.Popen(CLI + ["worker"] + args, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
    return procs


def _stop(procs) -> list[int]:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(20))
        except subprocess.TimeoutExpired:
            p.kill()
            codes.append(p.wait())
    return codes


def _check_cluster(cluster: dict, token: str, procs):
    spec = ClusterSpec(cluster)
    for job, task in spec.tasks():
        addr = spec.task_address(job, task)

        def healthy(addr=addr):
            dead = [p for p in procs if p.poll() is not None]
            if dead:
                pytest.fail(f"a worker exited with {dead[0].returncode}:\n{dead[0].stdout.read()}")
            return task_health(addr, token, 0.5)
        wait_for(healthy, 30, f"/job:{job}/task:{task} to be healthy")
    g = af.Graph()
    with g.as_default():
        with af.device("/job:ps/task:0"):
            v = af.Variable(np.ones(4, np.float32), name="tf_config_v")
        with af.device("/job:worker/task:0"):
            y = af.reduce_sum(v * 3.0)
        with af.Session(f"af://{spec.task_address('worker', 0)}?token={token}") as sess:
            sess.run(v.initializer)
            assert sess.run(y) == 12.0


def test_worker_configured_by_tf_config(tmp_path):
    ps, worker = free_ports(2)
    cluster = {"ps": [f"127.0.0.1:{ps}"], "worker": [f"127.0.0.1:{worker}"]}
    token_file = tmp_path / "token"
    token_file.write_text("token-from-a-file\n")

    def env_for(job, i):
        env = dict(os.environ)
        env.pop("ACTORFLOW_TOKEN", None)
        env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": job, "index": i}})
        return ["--token-file", str(token_file)], env
    procs = _start_workers(cluster, env_for)
    try:
        _check_cluster(cluster, "token-from-a-file", procs)
    finally:
        codes = _stop(procs)
    assert codes == [0, 0], [p.stdout.read() for p in procs]


def test_worker_with_tf_config_and_an_explicit_token():
    ps, worker = free_ports(2)
    cluster = {"ps": [f"127.0.0.1:{ps}"], "worker": [f"127.0.0.1:{worker}"]}

    def env_for(job, i):
        env = dict(os.environ)
        env["ACTORFLOW_TOKEN"] = "s3cret-token-for-this-test"
        env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": job, "index": i}})
        return [], env
    procs = _start_workers(cluster, env_for)
    try:
        _check_cluster(cluster, "s3cret-token-for-this-test", procs)
        assert task_health(cluster["ps"][0], "not-the-token") is None
    finally:
        _stop(procs)


def test_worker_configured_by_a_spec_file(tmp_path):
    ps, worker = free_ports(2)
    cluster = {"ps": [f"127.0.0.1:{ps}"], "worker": [f"127.0.0.1:{worker}"]}
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps({"cluster": cluster, "token": "file-token"}))

    def env_for(job, i):
        env = dict(os.environ)
        env.pop("TF_CONFIG", None)
        env.pop("ACTORFLOW_TOKEN", None)
        return ["--cluster", str(spec_file), "--job", job, "--task", str(i)], env
    procs = _start_workers(cluster, env_for)
    try:
        _check_cluster(cluster, "file-token", procs)
    finally:
        codes = _stop(procs)
    assert codes == [0, 0]


def test_worker_without_configuration_fails():
    env = dict(os.environ)
    env.pop("TF_CONFIG", None)
    r = cli("worker", env=env, timeout=30)
    assert r.returncode == 2
    assert "TF_CONFIG" in r.stderr


def test_worker_with_invalid_tf_config_fails():
    env = dict(os.environ)
    env["TF_CONFIG"] = "{not json"
    r = cli("worker", env=env, timeout=30)
    assert r.returncode != 0
    assert "TF_CONFIG" in (r.stderr + r.stdout)
