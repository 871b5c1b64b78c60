"""The `actorflow` command: demo, local clusters, workers, and the simulator."""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time


def _demo(args) -> int:
    import numpy as np

    import actorflow as af
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None, 3], name="x")
        w = af.Variable(np.arange(6, dtype=np.float32).reshape(3, 2), name="w")
        y = af.nn.relu(af.matmul(x, w) - 4.0, name="y")
        total = af.reduce_sum(y, name="total")
        i = af.constant(0)
        fact = af.while_loop(lambda i, f: i < 5, lambda i, f: (i + 1, f * af.cast(i + 1, af.float32)),
                             [i, af.constant(1.0)])[1]
        with af.Session(graph=g) as sess:
            sess.run(af.global_variables_initializer())
            feed = {x: np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32)}
            yv, tv, fv = sess.run([y, total, fact], feed)
    print("relu(x @ w - 4) =")
    print(yv)
    print(f"sum = {tv:g}")
    print(f"5! by while_loop = {fv:g}")
    return 0


def _load_spec(path: str):
    with open(path) as f:
        doc = json.load(f)
    if "cluster" in doc:
        return doc["cluster"], doc.get("token")
    return doc, None


def _worker(args) -> int:
    from actorflow.cluster.server import Server
    from actorflow.cluster.spec import tf_config
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.cluster:
        cluster, token = _load_spec(args.cluster)
        job, task = args.job, args.task
    else:
        cfg = tf_config()
        if cfg is None:
            print("actorflow worker: give --cluster FILE, or set TF_CONFIG", file=sys.stderr)
            return 2
        cluster, job, task = cfg
        token = None
    if job is None:
        print("actorflow worker: --job is required with --cluster", file=sys.stderr)
        return 2
    # sim: fault injection (actorflow/sim/faults.py); a no-op unless $ACTORFLOW_FAULTS is set
    from actorflow.sim.faults import install_from_env
    install_from_env(job, task)
    server = Server(cluster, job, task, token=args.token or token or None, bind=args.bind)
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"actorflow worker /job:{job}/task:{task} serving on {server.address} (pid {os.getpid()})", flush=True)
    while not stop.wait(0.5):
        if server._stopped.is_set():
            return 1
        if args.parent_pid and os.getppid() != args.parent_pid:
            # Started by a LocalCluster that is gone: do not outlive it.
            print(f"actorflow worker /job:{job}/task:{task}: parent {args.parent_pid} exited; stopping",
                  file=sys.stderr, flush=True)
            break
    server.stop()
    return 0


def _state_file(args) -> str:
    return os.path.join(args.dir, "cluster.json")


def _cluster_up(args) -> int:
    from actorflow.cluster.local import LocalCluster, task_health
    os.makedirs(args.dir, exist_ok=True)
    spec_file = _state_file(args)
    cluster = LocalCluster(ps=args.ps, workers=args.workers, restart=args.restart, spec_file=spec_file,
                           log_dir=os.path.join(args.dir, "logs"))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    cluster.start()
    with open(os.path.join(args.dir, "up.pid"), "w") as f:
        f.write(str(os.getpid()))
    print(f"cluster up: spec and token in {spec_file}")
    print(f"target: {cluster.target}")
    for key, pid in cluster.pids().items():
        job, task = key.split("/")[1][4:], int(key.split("/")[2][5:])
        ok = task_health(cluster.spec.task_address(job, task), cluster.token) is not None
        print(f"  {key:24s} {cluster.spec.task_address(job, task):22s} pid {pid:<8d} {'healthy' if ok else 'DOWN'}")
    print("Ctrl-C or `actorflow cluster down` stops it.", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        cluster.stop()
        for name in ("up.pid",):
            try:
                os.unlink(os.path.join(args.dir, name))
            except FileNotFoundError:
                pass
        print("cluster down", flush=True)
    return 0


def _cluster_status(args) -> int:
    from actorflow.cluster.local import task_health
    from actorflow.cluster.spec import ClusterSpec
    try:
        cluster, token = _load_spec(_state_file(args))
    except FileNotFoundError:
        print(f"no cluster state in {args.dir}", file=sys.stderr)
        return 1
    spec = ClusterSpec(cluster)
    bad = 0
    for job, task in spec.tasks():
        addr = spec.task_address(job, task)
        h = task_health(addr, token or "")
        bad += h is None
        state = f"healthy pid {h['pid']} steps {h['steps']} up {h['uptime']:.0f}s" if h else "DOWN"
        print(f"/job:{job}/task:{task:<3d} {addr:22s} {state}")
    return 1 if bad else 0


def _cluster_down(args) -> int:
    pid_file = os.path.join(args.dir, "up.pid")
    try:
        with open(pid_file) as f:
            pid = int(f.read().strip())
    except FileNotFoundError:
        print(f"no running cluster in {args.dir}", file=sys.stderr)
        return 1
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        os.unlink(pid_file)
        print("cluster was not running")
        return 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            print("cluster down")
            return 0
        time.sleep(0.1)
    print("cluster did not stop in 30 s", file=sys.stderr)
    return 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="actorflow", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="build and run a small graph and print its result")
    d.set_defaults(fn=_demo)
    w = sub.add_parser("worker", help="run one task of a cluster in this process")
    w.add_argument("--cluster", help="cluster spec JSON (a ClusterSpec dict, or {cluster, token}); else TF_CONFIG")
    w.add_argument("--job")
    w.add_argument("--task", type=int, default=0)
    w.add_argument("--token", help="cluster token (default: from the spec file or $ACTORFLOW_TOKEN)")
    w.add_argument("--bind", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    w.add_argument("--parent-pid", type=int, default=0, help="stop when this process (the launcher) exits")
    w.set_defaults(fn=_worker)
    c = sub.add_parser("cluster", help="local multi-process clusters")
    csub = c.add_subparsers(dest="cluster_cmd", required=True)
    up = csub.add_parser("up", help="start a local cluster and keep it running")
    up.add_argument("--ps", type=int, default=1)
    up.add_argument("--workers", type=int, default=2)
    up.add_argument("--restart", choices=["never", "on-failure"], default="never")
    up.add_argument("--dir", default=".actorflow")
    up.set_defaults(fn=_cluster_up)
    st = csub.add_parser("status", help="health of each task of the local cluster")
    st.add_argument("--dir", default=".actorflow")
    st.set_defaults(fn=_cluster_status)
    dn = csub.add_parser("down", help="stop the local cluster")
    dn.add_argument("--dir", default=".actorflow")
    dn.set_defaults(fn=_cluster_down)
    # -- sim: `actorflow sim ...`, the simulator harness (actorflow/sim/cli.py) ------------------------------
    from actorflow.sim.cli import add_parser as add_sim_parser
    add_sim_parser(sub)
    # -- end sim -------------------------------------------------------------------------------------------
    # -- serve: `actorflow serve ...`, the model server (actorflow/serving/cli.py) ----------------------------
    from actorflow.serving.cli import add_parser as add_serve_parser
    add_serve_parser(sub)
    # -- end serve -----------------------------------------------------------------------------------------
    args = p.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
