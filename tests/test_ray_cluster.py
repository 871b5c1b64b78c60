"""RayCluster on a real local Ray instance (loopback, this machine's CPUs, fractional CPUs per task):
the digits example trains on it unchanged, a task killed with kill -9 is restarted by Ray and training
goes on, and stopping the cluster leaves no task process behind."""
from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np
import pytest

import actorflow as af

ray = pytest.importorskip("ray", reason="the ray extra is part of the test extra; install it with .[test]")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import distributed_digits  # noqa: E402

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, address="local")
    yield
    ray.shutdown()


def _alive(pid):
    return os.path.exists(f"/proc/{pid}") and "zombie" not in open(f"/proc/{pid}/status").read().lower()


def _data():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    return train_test_split(x, d.target.astype(np.int64), test_size=0.25, random_state=0, stratify=d.target)


def test_digits_example_runs_unchanged_on_ray(local_ray):
    acc = distributed_digits.main(["--steps", "300", "--quiet", "--engine", "ray"])
    assert acc >= 0.95


def test_killed_task_is_restarted_by_ray_and_training_goes_on(local_ray):
    xtr, xte, ytr, yte = _data()
    args = type("Args", (), dict(steps=500, batch_size=64, learning_rate=2e-3))()
    cluster = af.cluster.RayCluster(ps=1, workers=2, host="127.0.0.1", resources_per_task={"num_cpus": 0.25})
    with cluster:
        before = cluster.pids()
        steps, errors = [0], []

        def progress(step):
            steps[0] = max(steps[0], step)

        threads = [threading.Thread(target=distributed_digits.worker,
                                    args=(cluster, i, args, (xtr, ytr), progress, errors)) for i in range(2)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 120
        while steps[0] < 150 and time.monotonic() < deadline and not errors:
            time.sleep(0.05)
        assert steps[0] >= 150, errors
        killed = cluster.kill("worker", 1)
        t0 = time.monotonic()
        while True:                            # Ray restarts the actor: a new process at the same address
            pid = cluster.pids()["/job:worker/task:1"]
            if pid != killed:
                break
            assert time.monotonic() - t0 < 60, "Ray did not restart the killed task"
            time.sleep(0.2)
        cluster.wait_healthy(60, [("worker", 1)])
        assert not _alive(killed) and _alive(pid)
        # Ray starts workers at niceness 15; the tasks (the restarted one too) run at the driver's.
        mine = os.getpriority(os.PRIO_PROCESS, 0)
        assert {p: os.getpriority(os.PRIO_PROCESS, p) for p in cluster.pids().values()} == \
            {p: mine for p in cluster.pids().values()}
        for t in threads:
            t.join(300)
        assert not errors, errors
        # (a fetched global step may be read before its own run's increment: the two ops race)
        assert steps[0] >= args.steps - 1
        g, m = distributed_digits.build_model(1, args.learning_rate)
        with g.as_default(), af.Session(cluster.target) as sess:
            acc = float(sess.run(m["acc"], {m["x"]: xte, m["y"]: yte}))
            assert int(sess.run(m["gs"])) >= args.steps
        assert acc >= 0.95
        assert before["/job:ps/task:0"] == cluster.pids()["/job:ps/task:0"]
        pids = list(cluster.pids().values())
    assert not [p for p in pids if _alive(p)], "a task process outlived the cluster"


def test_niceness_none_leaves_the_tasks_at_rays_worker_niceness(local_ray):
    with af.cluster.RayCluster(ps=0, workers=1, host="127.0.0.1", niceness=None) as cluster:
        (pid,) = cluster.pids().values()
        assert os.getpriority(os.PRIO_PROCESS, pid) == 15 != os.getpriority(os.PRIO_PROCESS, 0)
        cluster.restart("worker", 0)            # LocalCluster's surface: kill, then wait until it serves
        (new,) = cluster.pids().values()
        assert new != pid and os.getpriority(os.PRIO_PROCESS, new) == 15


def test_cluster_up_on_ray_then_status_and_down(tmp_path):
    import subprocess
    state = tmp_path / "state"
    up = subprocess.Popen([sys.executable, "-m", "actorflow.cli", "cluster", "up", "--on", "ray", "--ps", "1",
                           "--workers", "1", "--dir", str(state), "--host", "127.0.0.1"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=dict(os.environ, RAY_ADDRESS=""))
    lines = []
    try:
        deadline = time.monotonic() + 240
        while not any("cluster down" in ln or "stops it" in ln for ln in lines):
            line = up.stdout.readline()
            assert line or up.poll() is None, "".join(lines)
            lines.append(line)
            assert time.monotonic() < deadline, "".join(lines)
        # Keep reading: Ray forwards the tasks' logs to this pipe, and a full pipe would stall `up`.
        threading.Thread(target=lambda: [lines.append(ln) for ln in up.stdout], daemon=True).start()
        assert (state / "cluster.json").stat().st_mode & 0o777 == 0o600
        status = subprocess.run([sys.executable, "-m", "actorflow.cli", "cluster", "status", "--dir", str(state)],
                                capture_output=True, text=True, timeout=60)
        assert status.returncode == 0 and status.stdout.count("healthy") == 2, status.stdout + status.stderr
        pids = [int(ln.split()[2]) for ln in lines if ln.startswith("/job:")]     # task, address, pid
        down = subprocess.run([sys.executable, "-m", "actorflow.cli", "cluster", "down", "--dir", str(state)],
                              capture_output=True, text=True, timeout=90)
        assert down.returncode == 0, down.stderr
        up.wait(60)
        assert len(pids) == 2 and not [p for p in pids if _alive(p)]
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
