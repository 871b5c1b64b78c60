"""The `actorflow` command: a demo, local clusters and their workers, cluster-manager launchers, graph
pictures, the model server, and the simulator."""
from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import signal
import sys
import threading
import time

from actorflow.console import HelpFormatter, subparser


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


def _load_spec(path: str) -> dict:
    """A spec file: a ClusterSpec dict, or {"cluster": ..., "token": ..., "tls": {...}}; warns when a
    file that holds a token can be read by other users."""
    with open(path) as f:
        doc = json.load(f)
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: a cluster spec file holds a JSON object")
    if "cluster" not in doc:
        return {"cluster": doc, "token": None, "tls": None}
    if doc.get("token") and os.stat(path).st_mode & 0o077:
        print(f"actorflow: warning: {path} holds the cluster token and other users can read it; "
              f"chmod 600 {path}", file=sys.stderr)
    return {"cluster": doc["cluster"], "token": doc.get("token"), "tls": doc.get("tls")}


NO_TOKEN = """actorflow worker: no cluster token. Every task and client of a cluster must present the same
secret token; give it one of these ways:
  --token-file FILE       a file that holds the token (mode 0600)
  $ACTORFLOW_TOKEN        the environment variable
  --cluster FILE          a spec file with a "token" entry, like the one `actorflow cluster up` writes
                          (e.g. .actorflow/cluster.json)
  --token TOKEN           (visible to every local user in the process list: prefer the above)
A new random token: python -c "import secrets; print(secrets.token_urlsafe(32))"
"""


def _worker(args) -> int:
    from actorflow.cluster.server import Server
    from actorflow.cluster.spec import tf_config
    from actorflow.transport.listener import ConnectionLimits
    from actorflow.transport.tls import TLSConfig
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    tls = None
    if args.from_resolver:
        # A task started by a cluster manager: its resolver says which one it is.
        from actorflow.cluster import resolver as resolvers
        make = {"slurm": resolvers.SlurmClusterResolver, "k8s": resolvers.KubernetesClusterResolver,
                "tf_config": resolvers.TFConfigClusterResolver}[args.from_resolver]
        try:
            r = make()
            cluster, job, task = r.cluster_spec(), r.task_type, r.task_id
        except (RuntimeError, ValueError) as e:
            print(f"actorflow worker --from-{args.from_resolver.replace('_', '-')}: {e}", file=sys.stderr)
            return 2
        if job is None or task is None or not cluster:
            print(f"actorflow worker --from-{args.from_resolver.replace('_', '-')}: the environment names no task "
                  f"for this process (job {job!r}, index {task!r})", file=sys.stderr)
            return 2
        token = None
    elif args.cluster:
        try:
            spec = _load_spec(args.cluster)
        except (OSError, ValueError) as e:
            print(f"actorflow worker: cannot read the cluster spec {args.cluster}: {e}", file=sys.stderr)
            return 2
        cluster, token, tls = spec["cluster"], spec["token"], spec["tls"]
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
    if args.token_file:
        try:
            with open(args.token_file) as f:
                args.token = f.read().strip()
        except OSError as e:
            print(f"actorflow worker: cannot read the token file: {e}", file=sys.stderr)
            return 2
    token = args.token or token or os.environ.get("ACTORFLOW_TOKEN")
    if not token:
        print(NO_TOKEN, file=sys.stderr, end="")
        return 2
    try:
        tls = TLSConfig.make(cert=args.tls_cert, key=args.tls_key, ca=args.tls_ca) or TLSConfig.make(tls)
        limits = ConnectionLimits.from_env(handshake_timeout=args.handshake_timeout, ws_heartbeat=args.ws_heartbeat,
                                           max_unauthenticated=args.max_unauthenticated)
    except (TypeError, ValueError) as e:
        print(f"actorflow worker: {e}", file=sys.stderr)
        return 2
    # sim: fault injection (actorflow/sim/faults.py); a no-op unless $ACTORFLOW_FAULTS is set
    from actorflow.sim.faults import install_from_env
    install_from_env(job, task)
    try:
        server = Server(cluster, job, task, token=token, bind=args.bind, tls=tls, limits=limits)
    except ValueError as e:
        print(f"actorflow worker: {e}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"actorflow worker /job:{job}/task:{task} serving on {server.address}{' (TLS)' if tls else ''} "
          f"(pid {os.getpid()})", flush=True)
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


def _pid_file(args) -> str:
    return os.path.join(args.dir, "up.pid")


def _process_start(pid: int):
    """The process's start time in clock ticks since boot (/proc), or None where there is no /proc: with
    the pid, it tells a process apart from a later one that reuses its pid."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _read_launcher(args):
    """The `cluster up` process recorded in DIR/up.pid: {"pid", "start"}, or None without one."""
    try:
        with open(_pid_file(args)) as f:
            text = f.read().strip()
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if isinstance(doc, int):          # an older `cluster up` wrote the bare pid
        return {"pid": doc, "start": None}
    if not isinstance(doc, dict) or not isinstance(doc.get("pid"), int):
        return {"pid": None, "start": None}
    return {"pid": doc["pid"], "start": doc.get("start")}


def _launcher_running(rec) -> bool:
    from actorflow.cluster.local import process_running
    if rec is None or rec["pid"] is None or not process_running(rec["pid"]):
        return False
    # The same pid with another start time is a new process that reuses the number, not our launcher.
    return rec["start"] is None or _process_start(rec["pid"]) in (None, rec["start"])


def _claim_dir(args) -> str | None:
    """Makes this process the one `cluster up` of DIR: creates DIR/up.pid exclusively (so two `up`s
    racing for one folder cannot both win), replacing the record of a launcher that is gone. Returns
    why not when a cluster started from DIR still runs: its state file is never overwritten."""
    path = _pid_file(args)
    for _ in range(3):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            rec = _read_launcher(args)
            if _launcher_running(rec):
                return (f"a cluster started from {args.dir} is still running (`cluster up` pid {rec['pid']}); "
                        f"stop it with `actorflow cluster down --dir {args.dir}`, or give this one another --dir")
            try:
                os.unlink(path)     # the record of a launcher that is gone: its cluster went with it
            except FileNotFoundError:
                pass
            continue
        with os.fdopen(fd, "w") as f:
            json.dump({"pid": os.getpid(), "start": _process_start(os.getpid())}, f)
        return None
    return f"cannot claim {path}: another `cluster up` is starting in {args.dir}"


def _release_dir(args) -> None:
    rec = _read_launcher(args)
    if rec is not None and rec["pid"] == os.getpid():
        try:
            os.unlink(_pid_file(args))
        except FileNotFoundError:
            pass


def _cluster_up(args) -> int:
    from actorflow.cluster.local import LocalCluster, task_health
    os.makedirs(args.dir, exist_ok=True)
    spec_file = _state_file(args)
    why = _claim_dir(args)
    if why:
        print(f"actorflow cluster up: {why}", file=sys.stderr)
        return 1
    if args.on == "ray" and args.dashboard:
        print(f"actorflow cluster up: --dashboard is for local clusters; run `actorflow dashboard --cluster "
              f"{spec_file}` beside a Ray cluster", file=sys.stderr)
    try:
        if args.on == "ray":
            return _cluster_up_ray(args, spec_file)
        return _cluster_up_local(args, spec_file, LocalCluster, task_health)
    finally:
        _release_dir(args)


def _cluster_up_local(args, spec_file, LocalCluster, task_health) -> int:
    from actorflow.console import print_table
    try:
        # The tasks get the spec file's absolute path: `cluster down` recognizes them by it (from any folder).
        cluster = LocalCluster(ps=args.ps, workers=args.workers, restart=args.restart,
                               spec_file=os.path.abspath(spec_file), log_dir=os.path.join(args.dir, "logs"),
                               tls_cert=args.tls_cert, tls_key=args.tls_key, tls_ca=args.tls_ca)
    except ValueError as e:
        print(f"actorflow cluster up: {e}", file=sys.stderr)
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    try:
        cluster.start()
    except (RuntimeError, TimeoutError, OSError) as e:
        # start() stopped what it had started; the task logs say why.
        print(f"actorflow cluster up: {e} (task logs in {os.path.join(args.dir, 'logs')})", file=sys.stderr)
        return 1
    dash = None
    try:
        print(f"cluster up: spec and token in {spec_file} (mode 0600)")
        if args.dashboard:
            from actorflow.cluster.spec import task_key
            from actorflow.dashboard import Dashboard
            try:
                dash = Dashboard(cluster.spec, cluster.token, port=args.dashboard_port,
                                 restarts=lambda: {task_key(*k): n for k, n in cluster.restarts.items()}).start()
                print(f"dashboard: {dash.url} (log in with the token in {spec_file})")
            except (OSError, ValueError) as e:
                print(f"actorflow cluster up: no dashboard: {e}", file=sys.stderr)
        if args.show_token:
            print(f"target: {cluster.target}")
        else:
            scheme = "afs" if cluster.tls is not None else "af"
            print(f"target: {scheme}://{cluster.spec.task_address('worker', 0)}?token=<the token in {spec_file}> "
                  "(--show-token prints it)")
        rows = []
        for key, pid in cluster.pids().items():
            job, task = key.split("/")[1][4:], int(key.split("/")[2][5:])
            ok = task_health(cluster.spec.task_address(job, task), cluster.token, tls=cluster.tls) is not None
            rows.append((key, cluster.spec.task_address(job, task), pid, "healthy" if ok else "DOWN"))
        print_table(["task", "address", "pid", "state"], rows)
        print(f"Ctrl-C or `actorflow cluster down --dir {args.dir}` stops it.", flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        if dash is not None:
            dash.stop()
        cluster.stop()
        print("cluster down", flush=True)
    return 0


def _cluster_up_ray(args, spec_file: str) -> int:
    """`cluster up --on ray`: the tasks as Ray actors; the state file and `cluster down` work as for a
    local cluster (down stops this process, which kills the actors)."""
    from actorflow.cluster.local import write_private_json
    from actorflow.cluster.ray_cluster import RayCluster
    try:
        cluster = RayCluster(ps=args.ps, workers=args.workers, address=args.address, host=args.host,
                             resources_per_task={"num_cpus": args.cpus_per_task})
    except (ImportError, ValueError) as e:
        print(f"actorflow cluster up --on ray: {e}", file=sys.stderr)
        return 2
    stop = threading.Event()
    cluster.start()
    # After start: ray.init installs its own SIGTERM handler in the driver.
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    try:
        write_private_json(spec_file, {"cluster": cluster.spec.as_dict(), "token": cluster.token,
                                       "pids": cluster.pids(), "engine": "ray"})
        print(f"cluster up on Ray: spec and token in {spec_file} (mode 0600)")
        print(f"target: {cluster.target}" if args.show_token else
              f"target: af://{cluster.spec.task_address('worker', 0)}?token=<the token in {spec_file}>")
        from actorflow.console import print_table
        print_table(["task", "address", "pid"], [(key, cluster.spec.task_address(key.split("/")[1][4:],
                                                                                int(key.split("/")[2][5:])), pid)
                                                 for key, pid in cluster.pids().items()])
        print(f"Ctrl-C or `actorflow cluster down --dir {args.dir}` stops it.", flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        cluster.stop()
        print("cluster down", flush=True)
    return 0


def _cluster_status(args) -> int:
    from actorflow.cluster.local import task_health
    from actorflow.cluster.spec import ClusterSpec
    from actorflow.transport.tls import TLSConfig
    try:
        doc = _load_spec(_state_file(args))
    except FileNotFoundError:
        print(f"no cluster state in {args.dir}", file=sys.stderr)
        return 1
    spec = ClusterSpec(doc["cluster"])
    token = doc["token"] or os.environ.get("ACTORFLOW_TOKEN") or ""
    tls = TLSConfig.make(doc["tls"])
    bad = 0
    rows = []
    for job, task in spec.tasks():
        addr = spec.task_address(job, task)
        h = task_health(addr, token, tls=tls)
        bad += h is None
        rows.append((f"/job:{job}/task:{task}", addr, "healthy" if h else "DOWN", h["pid"] if h else "-",
                     h["steps"] if h else "-", f"{h['uptime']:.0f}" if h else "-"))
    from actorflow.console import print_table
    print_table(["task", "address", "state", "pid", "steps", "up (s)"], rows)
    return 1 if bad else 0


def _is_our_task(pid: int, spec_file: str) -> bool:
    """Whether `pid` is a task that a `cluster up` of this folder started: an `actorflow worker` given
    this spec file (read from /proc; where there is none, whatever runs under the recorded pid)."""
    from actorflow.cluster.local import process_running
    if not process_running(pid):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().decode(errors="replace").split("\0")
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return "worker" in argv and any(os.path.abspath(a) == os.path.abspath(spec_file) for a in argv)


def _cluster_down(args) -> int:
    """Stops the cluster that `cluster up` started from DIR: that launcher (which stops its tasks),
    then any of the tasks recorded in DIR/cluster.json that outlived it, and nothing else."""
    from actorflow.cluster.local import process_running
    rec = _read_launcher(args)
    spec_file = _state_file(args)
    try:
        with open(spec_file) as f:
            task_pids = {k: int(v) for k, v in (json.load(f).get("pids") or {}).items()}
    except (OSError, ValueError, TypeError, AttributeError):
        task_pids = {}
    if rec is None:
        left = {k: p for k, p in task_pids.items() if _is_our_task(p, spec_file)}
        if not left:
            print(f"no running cluster in {args.dir}", file=sys.stderr)
            return 1
    elif _launcher_running(rec):
        try:
            os.kill(rec["pid"], signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 30
        while process_running(rec["pid"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        if process_running(rec["pid"]):
            print(f"actorflow cluster down: `cluster up` (pid {rec['pid']}) did not stop in 30 s", file=sys.stderr)
            return 1
    else:
        print(f"the `cluster up` of {args.dir} (pid {rec['pid']}) was not running")
    try:
        os.unlink(_pid_file(args))
    except FileNotFoundError:
        pass
    # Tasks that outlived their launcher (it was killed with -9): exactly those it recorded, checked to
    # be workers of this spec file, so that a pid reused by another program is never signalled.
    left = {k: p for k, p in task_pids.items() if _is_our_task(p, spec_file)}
    for key, pid in left.items():
        print(f"stopping {key} (pid {pid}), left running by its launcher")
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while any(process_running(p) for p in left.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    stubborn = [p for p in left.values() if process_running(p)]
    for pid in stubborn:
        try:
            os.kill(pid, getattr(signal, "SIGKILL", signal.SIGTERM))
        except ProcessLookupError:
            pass
    print("cluster down")
    return 0


def _dashboard(args) -> int:
    from actorflow.dashboard import Dashboard
    try:
        dash = Dashboard(spec_file=args.cluster, port=args.port, interval=args.interval)
    except (OSError, ValueError) as e:
        print(f"actorflow dashboard: {e}", file=sys.stderr)
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    try:
        dash.start()
    except OSError as e:
        print(f"actorflow dashboard: cannot listen on {dash.host}:{dash.port}: {e}", file=sys.stderr)
        return 1
    print(f"dashboard of {len(dash.spec.tasks())} tasks: {dash.url} (log in with the token in {args.cluster}); "
          "Ctrl-C stops it", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        dash.stop()
    return 0


def _k8s_manifest(args) -> int:
    from actorflow.cluster.launchers import render_k8s, to_yaml
    command = shlex.split(args.command) if args.command else None
    try:
        objects = render_k8s(args.name, ps=args.ps, workers=args.workers, image=args.image, command=command,
                             port=args.port, namespace=args.namespace, cpu=args.cpu, memory=args.memory)
    except ValueError as e:
        print(f"actorflow k8s manifest: {e}", file=sys.stderr)
        return 2
    if not args.out and not args.show_token:
        # stdout may be a terminal or a log: the token stays out of it unless asked for.
        secret = objects.pop(0)["metadata"]["name"]
        print(f"actorflow k8s manifest: the token Secret is left out of stdout (give --out FILE or --show-token); "
              f"create it with:\n  kubectl create secret generic {secret} "
              f"--from-literal=token=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')",
              file=sys.stderr)
    text = to_yaml(objects)
    if args.out:
        fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)   # it holds the token Secret
        with os.fdopen(fd, "w") as f:
            f.write(text)
        print(f"wrote {args.out}: {len(objects)} objects; apply with kubectl apply -f {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _slurm_script(args) -> int:
    from actorflow.cluster.launchers import render_sbatch
    command = shlex.split(args.command) if args.command else None
    try:
        text = render_sbatch(args.name, ps=args.ps, workers=args.workers, command=command, nodes=args.nodes,
                             port_base=args.port_base, cpus_per_task=args.cpus_per_task, time_limit=args.time,
                             partition=args.partition)
    except ValueError as e:
        print(f"actorflow slurm script: {e}", file=sys.stderr)
        return 2
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        os.chmod(args.out, 0o755)
        print(f"wrote {args.out}; submit with sbatch {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _add_engine_parsers(sub) -> None:
    fmt = HelpFormatter
    k = sub.add_parser("k8s", help="Kubernetes: render the objects of a cluster", formatter_class=fmt)
    ksub = k.add_subparsers(dest="k8s_cmd", required=True)
    km = ksub.add_parser("manifest", formatter_class=fmt,
                         help="headless Services, Indexed Jobs and a token Secret for kubectl apply")
    km.add_argument("--name", default="actorflow", help="cluster name; pods are NAME-JOB-INDEX")
    km.add_argument("--ps", type=int, default=1, help="parameter server tasks")
    km.add_argument("--workers", type=int, default=2, help="worker tasks")
    km.add_argument("--image", required=True, help="container image with actorflow installed (see Dockerfile)")
    km.add_argument("--command", help="the workers' command (a training program); default: a server")
    km.add_argument("--port", type=int, default=2222, help="every task's port")
    km.add_argument("--namespace", help="namespace of the objects (default: kubectl's)")
    km.add_argument("--cpu", default="1", help="CPU request per task")
    km.add_argument("--memory", default="2Gi", help="memory request and limit per task")
    km.add_argument("--out", help="write to this file (mode 0600: it holds the token) instead of stdout")
    km.add_argument("--show-token", action="store_true", help="include the token Secret when writing to stdout")
    km.set_defaults(fn=_k8s_manifest)
    sl = sub.add_parser("slurm", help="Slurm: write a batch script that starts a cluster", formatter_class=fmt)
    ssub = sl.add_subparsers(dest="slurm_cmd", required=True)
    ss = ssub.add_parser("script", formatter_class=fmt, help="an sbatch script: one srun step, every task")
    ss.add_argument("--name", default="actorflow", help="job name")
    ss.add_argument("--ps", type=int, default=1, help="parameter server tasks")
    ss.add_argument("--workers", type=int, default=2, help="worker tasks")
    ss.add_argument("--command", help="what each task runs; default: actorflow worker --from-slurm")
    ss.add_argument("--nodes", type=int, help="number of nodes (default: Slurm's choice)")
    ss.add_argument("--port-base", type=int, default=8888, help="first port on each node")
    ss.add_argument("--cpus-per-task", type=int, default=1, help="CPUs per task")
    ss.add_argument("--time", help="time limit, e.g. 01:00:00")
    ss.add_argument("--partition", help="Slurm partition")
    ss.add_argument("--out", help="write to this file instead of stdout")
    ss.set_defaults(fn=_slurm_script)


def _tls_args(p) -> None:
    p.add_argument("--tls-cert", help="PEM certificate this task presents (serve and connect over TLS)")
    p.add_argument("--tls-key", help="PEM private key of --tls-cert")
    p.add_argument("--tls-ca", help="PEM CA that signed the peers' certificates: turns on mutual TLS")


DEMO = """Builds a small graph in one process (a placeholder, a variable, matmul, relu, reduce_sum and a
while_loop that computes 5!), runs it in a Session and prints the results: a quick check that the
install works, and the shortest example of the API (see actorflow/cli.py:_demo)."""


def _version() -> str:
    from actorflow.version import ACTORFLOW_VERSION
    return f"actorflow {ACTORFLOW_VERSION} (Python {sys.version.split()[0]}, {sys.platform})"


def build_parser() -> argparse.ArgumentParser:
    """The `actorflow` command's parser, every subcommand included."""
    p = argparse.ArgumentParser(prog="actorflow", description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--version", action="version", version=_version(), help="print the version and exit")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = subparser(sub, "demo", "build and run a small graph and print its result", DEMO)
    d.set_defaults(fn=_demo)
    w = subparser(sub, "worker", "run one task of a cluster in this process")
    w.add_argument("--cluster", help="cluster spec JSON (a ClusterSpec dict, or {cluster, token}); else TF_CONFIG")
    src = w.add_mutually_exclusive_group()
    src.add_argument("--from-slurm", dest="from_resolver", action="store_const", const="slurm",
                     help="this task's role from Slurm's environment (SlurmClusterResolver; AF_SLURM_JOBS)")
    src.add_argument("--from-k8s", dest="from_resolver", action="store_const", const="k8s",
                     help="this task's role from the pod's environment (KubernetesClusterResolver)")
    src.add_argument("--from-tf-config", dest="from_resolver", action="store_const", const="tf_config",
                     help="this task's role from TF_CONFIG (the default without --cluster)")
    w.add_argument("--job", help="this task's job in the --cluster spec, e.g. ps or worker (required with --cluster)")
    w.add_argument("--task", type=int, default=0, help="this task's index in its job")
    w.add_argument("--token", help="cluster token (default: $ACTORFLOW_TOKEN, else the spec file's); visible in "
                                   "the process list, prefer --token-file or the environment")
    w.add_argument("--token-file", help="a file holding the cluster token")
    w.add_argument("--bind", default="127.0.0.1", help="address to bind; any other than loopback "
                                                       "should come with --tls-cert/--tls-key/--tls-ca")
    _tls_args(w)
    w.add_argument("--handshake-timeout", type=float, help="seconds a connection may take to present the token "
                                                           "(default 10, or $ACTORFLOW_HANDSHAKE_TIMEOUT)")
    w.add_argument("--ws-heartbeat", type=float, help="websocket ping interval in seconds; a peer that does not "
                                                   "answer within half of it is dropped (default 60)")
    w.add_argument("--max-unauthenticated", type=int, help="connections that may wait for their token check at "
                                                           "once; more are refused with 503 (default 128)")
    w.add_argument("--parent-pid", type=int, default=0, help="stop when this process (the launcher) exits; 0: never")
    w.set_defaults(fn=_worker)
    c = sub.add_parser("cluster", help="local multi-process clusters: up, status, down",
                       description="Start a cluster on this machine, see its health, stop it. A client "
                                   "connects with af.Session(target), the target `cluster up` prints (its "
                                   "token is in DIR/cluster.json).", formatter_class=HelpFormatter)
    csub = c.add_subparsers(dest="cluster_cmd", required=True)
    up = subparser(csub, "up", "start a local cluster and keep it running",
                   "Starts the tasks (processes on this machine, or Ray actors), writes their spec and token to "
                   "DIR/cluster.json (mode 0600) and runs until Ctrl-C or `actorflow cluster down`. One cluster "
                   "per --dir: while it runs, another `cluster up` in the same folder is refused.")
    up.add_argument("--ps", type=int, default=1, help="parameter server tasks")
    up.add_argument("--workers", type=int, default=2, help="worker tasks")
    up.add_argument("--restart", choices=["never", "on-failure"], default="never",
                    help="restart a task whose process exits")
    up.add_argument("--dir", default=".actorflow", help="folder of the cluster's state (cluster.json, up.pid, logs/)")
    up.add_argument("--on", choices=["local", "ray"], default="local",
                    help="who starts the tasks: processes on this machine, or Ray actors")
    up.add_argument("--address", default="auto", help="with --on ray: the Ray cluster to join (auto: RAY_ADDRESS "
                    "or a new local one)")
    up.add_argument("--cpus-per-task", type=float, default=0.25, help="with --on ray: Ray CPUs per task")
    up.add_argument("--host", help="with --on ray: the address every task binds and advertises (e.g. 127.0.0.1 "
                    "on one machine); default: each task's node IP")
    up.add_argument("--show-token", action="store_true", help="print the target with its token")
    up.add_argument("--dashboard", action="store_true", help="also serve the live dashboard (on 127.0.0.1)")
    up.add_argument("--dashboard-port", type=int, default=8470, help="the dashboard's port")
    _tls_args(up)
    up.set_defaults(fn=_cluster_up)
    st = subparser(csub, "status", "health of each task of the local cluster (exit status 1 if one is down)")
    st.add_argument("--dir", default=".actorflow", help="folder of the cluster's state, as given to `cluster up`")
    st.set_defaults(fn=_cluster_status)
    dn = subparser(csub, "down", "stop the local cluster that `cluster up` started from --dir, and only it")
    dn.add_argument("--dir", default=".actorflow", help="folder of the cluster's state, as given to `cluster up`")
    dn.set_defaults(fn=_cluster_down)
    db = subparser(sub, "dashboard", "serve a live web dashboard of a running cluster (on 127.0.0.1)")
    db.add_argument("--cluster", default=".actorflow/cluster.json",
                    help="the cluster's spec file with its token, as `cluster up` writes it")
    db.add_argument("--port", type=int, default=8470, help="port to serve on, on 127.0.0.1")
    db.add_argument("--interval", type=float, default=1.0, help="seconds between polls of the tasks")
    db.set_defaults(fn=_dashboard)
    # -- graph: `actorflow graph show FILE` (actorflow/graphviz.py) ----------------------------------------
    from actorflow.graphviz import add_parser as add_graph_parser
    add_graph_parser(sub)
    # -- cluster managers: `actorflow k8s manifest`, `actorflow slurm script` ---------------------------------
    _add_engine_parsers(sub)
    # -- sim: `actorflow sim ...`, the simulator harness (actorflow/sim/cli.py) ------------------------------
    from actorflow.sim.cli import add_parser as add_sim_parser
    add_sim_parser(sub)
    # -- end sim -------------------------------------------------------------------------------------------
    # -- serve: `actorflow serve ...`, the model server (actorflow/serving/cli.py) ----------------------------
    from actorflow.serving.cli import add_parser as add_serve_parser
    add_serve_parser(sub)
    # -- end serve -----------------------------------------------------------------------------------------
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
