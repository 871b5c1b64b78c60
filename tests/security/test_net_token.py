"""Finding 1 of issue 15: a guessable default cluster token.

Before: with no token given and no $ACTORFLOW_TOKEN, `cluster_token` returned
`sha256("actorflow:" + spec_json)[:32]`. `af.train.Server(cluster)`, `Server.create_local_server()`
and `actorflow worker --cluster plain.json` all used it. Ports are listed in /proc/net/tcp for every
local user, so a local user rebuilt the spec from the listening ports, computed the token in one
guess, was answered 200 by /health and made a worker write a file of their choosing.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys

import pytest

import actorflow as af
from actorflow.cluster import ClusterSpec
from actorflow.cluster.cookie import user_cookie
from actorflow.cluster.local import free_port, task_health, write_private_json
from actorflow.cluster.server import cluster_token

from .net_support import healthy

CLI = [sys.executable, "-m", "actorflow.cli"]


def _old_derived_token(spec: ClusterSpec) -> str:
    """What the old code used when no token was given (the attacker's one guess)."""
    return hashlib.sha256(("actorflow:" + spec.to_json()).encode()).hexdigest()[:32]


@pytest.fixture
def no_env_token(monkeypatch):
    monkeypatch.delenv("ACTORFLOW_TOKEN", raising=False)
    monkeypatch.delenv("TF_CONFIG", raising=False)


def test_server_without_a_token_is_not_reachable_with_the_derived_one(no_env_token):
    """Sent: /health with the token derived from the spec (answered 200 before). Now: refused, and the
    server's own token (the user's cookie, 32 random bytes) is not that one; its own target still works."""
    spec = ClusterSpec({"worker": [f"127.0.0.1:{free_port()}"]})
    server = af.train.Server(spec, "worker", 0)
    try:
        guess = _old_derived_token(spec)
        assert server.token != guess
        assert task_health(server.address, guess, 5.0) is None
        assert len(server.token) >= 43          # secrets.token_urlsafe(32): the user's cookie
        assert healthy(server)
        g = af.Graph()
        with g.as_default(), af.Session(server.target) as sess:   # an in-process client gets the token
            assert sess.run(af.constant(3.0) * 2.0) == 6.0
    finally:
        server.stop()


def test_servers_without_a_token_share_the_users_cookie(no_env_token, tmp_path, monkeypatch):
    """With no token and no $ACTORFLOW_TOKEN, servers take the user's cookie: random (a new cookie file
    gives a new token), mode 0600 in a 0700 directory, and the same for every server of this user, so
    that the processes a TF-1.x program forks can talk. The spec-derived guess is none of them."""
    monkeypatch.setenv("ACTORFLOW_COOKIE", str(tmp_path / "home" / "cookie"))
    spec = {"worker": [f"127.0.0.1:{free_port()}"]}
    a = af.train.Server(spec, "worker", 0, start=False)
    b = af.train.Server.create_local_server(start=False)
    cookie = (tmp_path / "home" / "cookie").read_text().strip()
    assert a.token == b.token == cookie and len(cookie) >= 43 and f"token={cookie}" in b.target
    assert stat.S_IMODE(os.stat(tmp_path / "home" / "cookie").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "home").st_mode) == 0o700
    assert _old_derived_token(ClusterSpec(spec)) != a.token
    monkeypatch.setenv("ACTORFLOW_COOKIE", str(tmp_path / "other"))
    assert af.train.Server(spec, "worker", 0, start=False).token != cookie


def test_a_cookie_others_may_read_is_refused(no_env_token, tmp_path, monkeypatch):
    path = tmp_path / "cookie"
    path.write_text("a-cookie-the-group-can-read\n")
    os.chmod(path, 0o640)
    monkeypatch.setenv("ACTORFLOW_COOKIE", str(path))
    with pytest.raises(af.errors.PermissionDeniedError, match=f"{path}.*mode 640.*chmod 600"):
        af.train.Server({"worker": [f"127.0.0.1:{free_port()}"]}, "worker", 0, start=False)
    os.chmod(path, 0o600)
    assert cluster_token() == "a-cookie-the-group-can-read"


def test_processes_creating_the_cookie_at_once_agree(tmp_path):
    """Four processes started together, none finding a cookie: they all end with the same one."""
    code = ("import sys; from actorflow.cluster.cookie import user_cookie; print(user_cookie(sys.argv[1]))")
    path = str(tmp_path / "d" / "cookie")
    procs = [subprocess.Popen([sys.executable, "-c", code, path], stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    got = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert len(got) == 1 and len(got.pop()) >= 43
    assert sorted(os.listdir(tmp_path / "d")) == ["cookie"]           # no temporary file left


def _ps_task(spec):
    af.train.Server(spec, "ps", 0).join()


def test_a_cluster_of_forked_processes_without_tokens_trains(no_env_token, tmp_path, monkeypatch):
    """The TF-1.x idiom (MorvanZhou's 504_distributed_training.py): a ps and a worker, each a forked
    process building its own `tf.train.Server` from one ClusterSpec, no token anywhere."""
    import multiprocessing as mp
    monkeypatch.setenv("ACTORFLOW_COOKIE", str(tmp_path / "cookie"))
    spec = {"ps": [f"127.0.0.1:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]}
    ps = mp.get_context("spawn").Process(target=_ps_task, args=(spec,), daemon=True)
    ps.start()
    try:
        server = af.train.Server(spec, "worker", 0)
        g = af.Graph()
        with g.as_default():
            with af.device("/job:ps/task:0"):
                v = af.Variable(1.0)
            with af.device("/job:worker/task:0"):
                step = af.assign_add(v, 2.0)
            with af.Session(server.target) as sess:
                sess.run(v.initializer)
                sess.run(step)
                assert sess.run(v) == 3.0
        server.stop()
    finally:
        ps.kill()
        ps.join(10)


def test_a_given_token_wins_then_the_environment_then_the_cookie(monkeypatch):
    monkeypatch.setenv("ACTORFLOW_TOKEN", "from-the-environment")
    assert cluster_token() == "from-the-environment"
    assert cluster_token("given") == "given"
    monkeypatch.delenv("ACTORFLOW_TOKEN")
    assert cluster_token() == cluster_token() == user_cookie()


@pytest.mark.parametrize("bad", ["caf\u00e9", "with space", "new\nline"])
def test_a_token_that_cannot_travel_in_a_header_is_refused(bad):
    with pytest.raises(ValueError, match="visible ASCII"):
        cluster_token(bad)


def test_worker_without_a_token_source_refuses_to_start(tmp_path, no_env_token):
    """Sent: `actorflow worker --cluster plain.json` (a spec with no token) with no $ACTORFLOW_TOKEN.
    Before: the worker started with the derived token. Now: exit 2 and a message naming every way
    to give a token; nothing listens."""
    port = free_port()
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"worker": [f"127.0.0.1:{port}"]}))
    env = {k: v for k, v in os.environ.items() if k not in ("ACTORFLOW_TOKEN", "TF_CONFIG")}
    r = subprocess.run(CLI + ["worker", "--cluster", str(plain), "--job", "worker"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    for way in ("--token-file", "$ACTORFLOW_TOKEN", "--cluster FILE", "actorflow cluster up"):
        assert way in r.stderr
    assert "serving" not in r.stdout
    # The same with TF_CONFIG instead of a spec file.
    env["TF_CONFIG"] = json.dumps({"cluster": {"worker": [f"127.0.0.1:{port}"]}, "task": {"type": "worker"}})
    r = subprocess.run(CLI + ["worker"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "$ACTORFLOW_TOKEN" in r.stderr


def test_spec_files_with_a_token_are_private(tmp_path):
    """The spec file a LocalCluster (and `cluster up`) writes holds the token: mode 0600, also when a
    file of that name already existed with a wider mode."""
    path = tmp_path / "cluster.json"
    path.write_text("{}")
    os.chmod(path, 0o644)
    write_private_json(str(path), {"cluster": {"worker": ["127.0.0.1:1"]}, "token": "t"})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert json.loads(path.read_text())["token"] == "t"
    assert not [p for p in tmp_path.iterdir() if p.name != "cluster.json"]     # no temporary file left


def test_local_cluster_token_and_spec_file(tmp_path):
    spec_file = tmp_path / "spec.json"
    with af.cluster.LocalCluster(ps=0, workers=1, spec_file=str(spec_file)) as cluster:
        assert stat.S_IMODE(os.stat(spec_file).st_mode) == 0o600
        doc = json.loads(spec_file.read_text())
        assert doc["token"] == cluster.token and len(cluster.token) >= 43
        assert cluster.token != _old_derived_token(cluster.spec)
        assert task_health(cluster.spec.task_address("worker", 0), _old_derived_token(cluster.spec)) is None
        g = af.Graph()
        with g.as_default(), af.Session(cluster.target) as sess:
            assert sess.run(af.constant(1.5) + 1.0) == 2.5
