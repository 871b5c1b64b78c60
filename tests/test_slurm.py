"""A real single-node Slurm (Debian's slurmctld and slurmd, started here on loopback with a generated
slurm.conf): the batch script `actorflow slurm script` writes starts a parameter server and two
workers in one srun step, each finds its role with SlurmClusterResolver, and they train the digits
model together. .ci/run installs the Slurm packages."""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from actorflow.cli import main as cli
from actorflow.cluster.local import free_ports

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(400)

CONF = """ClusterName=aftest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/none
CredType=cred/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmUser=root
SlurmdUser=root
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
ReturnToService=2
MpiDefault=none
SlurmdParameters=config_overrides
NodeName=localhost NodeAddr=127.0.0.1 NodeHostname={host} CPUs=8 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
"""


def _free_port_run(n: int) -> int:
    """A port p such that p, p + 1, ..., p + n - 1 are all free now: the script's tasks on one node
    listen on consecutive ports from --port-base (a base from free_port alone leaves p + 1... to chance)."""
    for _ in range(100):
        base = free_ports(1)[0]
        if base + n - 1 > 65535:
            continue
        with contextlib.ExitStack() as stack:
            try:
                for p in range(base, base + n):
                    stack.enter_context(socket.socket()).bind(("127.0.0.1", p))
            except OSError:
                continue
        return base
    raise RuntimeError(f"no run of {n} free ports found")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("the Slurm test runs slurmd, which needs root (CI and the dev machines run as root)")
    for tool in ("slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo"):
        assert shutil.which(tool), f"{tool} is missing: .ci/run installs slurmctld, slurmd and slurm-client"
    d = tmp_path_factory.mktemp("slurm")
    (d / "state").mkdir()
    (d / "spool").mkdir()
    conf = d / "slurm.conf"
    ports = free_ports(2)
    conf.write_text(CONF.format(host=socket.gethostname(), ctld_port=ports[0], d_port=ports[1], dir=d))
    env = dict(os.environ, SLURM_CONF=str(conf))
    ctld = subprocess.Popen(["slurmctld", "-D", "-i", "-f", str(conf)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT, start_new_session=True)
    time.sleep(1.0)
    slurmd = subprocess.Popen(["slurmd", "-D", "-f", str(conf), "-N", "localhost"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            out = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True).stdout
            if out.strip() in ("idle", "mix", "alloc"):
                break
            assert time.monotonic() < deadline, f"slurm did not come up: {out!r}\n" + \
                (d / "slurmctld.log").read_text()[-2000:] if (d / "slurmctld.log").exists() else ""
            time.sleep(0.5)
        yield env, d
    finally:
        for p in (slurmd, ctld):
            p.terminate()
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _wait_gone(env, job_id, timeout=60):
    deadline = time.monotonic() + timeout
    while subprocess.run(["squeue", "-h", "-j", job_id], env=env, capture_output=True, text=True).stdout.strip():
        assert time.monotonic() < deadline, f"slurm job {job_id} did not end"
        time.sleep(0.5)


def test_sbatch_script_trains_digits_on_slurm(slurm, tmp_path):
    env, d = slurm
    result = tmp_path / "accuracy.txt"
    script = tmp_path / "train.sbatch"
    command = f"{sys.executable} {ROOT / 'examples' / 'resolver_digits.py'} --resolver slurm --steps 400 " \
              f"--result {result}"
    assert cli(["slurm", "script", "--name", "aftest", "--ps", "1", "--workers", "2", "--command", command,
                "--port-base", str(_free_port_run(3)), "--out", str(script)]) == 0
    env = dict(env, PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    job_id = subprocess.run(["sbatch", "--parsable", f"--chdir={tmp_path}", str(script)], env=env,
                            capture_output=True, text=True, check=True).stdout.strip().split(";")[0]
    try:
        deadline = time.monotonic() + 300
        while not result.exists() or not result.read_text().strip():
            state = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T %r"], env=env, capture_output=True,
                                   text=True).stdout.strip()
            out = next(tmp_path.glob("aftest-*.out"), None)
            assert state or result.exists(), f"job {job_id} ended without a result:\n" + \
                (out.read_text()[-3000:] if out else "(no output file)")
            assert time.monotonic() < deadline, f"no result in 300 s; job state {state}"
            time.sleep(0.5)
        assert float(result.read_text()) >= 0.95
    finally:
        subprocess.run(["scancel", job_id], env=env)          # the parameter server serves until cancelled
        _wait_gone(env, job_id)
