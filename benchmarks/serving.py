"""Model-server throughput and latency (issue 22, item 3): `actorflow serve` against a plain aiohttp
handler calling numpy on each request (the no-framework baseline), on loopback, in one run.

Models (random weights, Glorot-initialized from a fixed seed: serving cost does not depend on the
values, and the baseline computes the same function from the same weights, checked at start):
- mlp: the digits MLP 64-256-128-10 (ReLU), float32, as in examples/digits_mlp.py;
- convnet: the digits convnet of examples/digits_convnet.py (8x8x1 input, conv 3x3x32 SAME + ReLU,
  max-pool 2x2, conv 3x3x64 SAME + ReLU, max-pool 2x2, dense 128 + ReLU, dense 10), without dropout.
Each request is one real digit image (scikit-learn's digits, no download) as TF Serving row-format
JSON, `{"instances": [[...64 or 8x8x1 floats...]]}`; the answer is `{"predictions": [[10 logits]]}`.

Contenders, each server in its own process (started with the same nice level as this script):
- "numpy baseline": aiohttp on uvloop; the handler parses the JSON (orjson), runs the model's forward
  pass in numpy on that one request (im2col + GEMM for the convnet; BLAS on one thread, as actorflow
  sets it, since more threads only spin on one-row GEMMs) and answers JSON (orjson).
- "actorflow, batching off": `actorflow serve` (one session step per request).
- "actorflow, batching on": `actorflow serve --enable_batching` (max_batch_size 64,
  batch_timeout_micros 0 (a batch closes when a step slot frees: no added wait), num_batch_threads
  --batch-threads, 1 by default: on 2 cores the event loop's HTTP work needs the other core, and with
  one step in flight the next batch fills while it runs (2 measured 0.65x the baseline at 64 clients
  for the MLP, 1 measured 1.04x; CPU per request 170 against 93 us)), and
  --tensorflow_inter_op_parallelism from --inter-op, 0 by default (`actorflow serve`'s own default:
  kernels worth it on the kernel pool). A batch step that only reads the model's variables runs on
  the server's loop while its kernels are cheap, and as one task on a pool thread when one is worth
  the pool (actors/sync_step.py), so the loop pays one hand-off each way per batch. With that, -1
  (every kernel inline on the loop) measured the same req/s as 0 for both models (1.00-1.01x, via
  --variant="--tensorflow_inter_op_parallelism -1"); before it, each big kernel of a batch was a
  round trip through the busy loop, and the MLP needed -1 and the convnet 0.
- "aiohttp null handler (ceiling)": the same aiohttp app on uvloop answering a constant prediction
  without parsing the request: what aiohttp alone costs per request, the most requests/s any
  aiohttp server reaches here. The last table divides 5x batching off's requests/s by it: above 1,
  the 5x target is out of reach of an aiohttp server on this machine.
Both actorflow servers run `actorflow serve` as it starts by default, with --tune_gc (a frozen heap
and a young-generation threshold of 10,000: see ModelServer's docstring). --variant FLAGS adds a
fourth contender, the batching server with FLAGS appended (e.g. --variant=--no-tune_gc), for a
same-run A/B of a server option.
Latency percentiles come from wrk's histogram, which wrk corrects for coordinated omission: a
response that took S ms on a connection whose requests normally take I ms also counts samples at
S - I, S - 2I, ... So one stall of the server (a 50 ms pause with 64 requests in flight, at I ~ 8 ms)
adds some 400 samples between I and S, enough to move the p99 of a 3 s run by itself.
All three servers run at once (idle when not driven); for each number of clients the contenders are
driven in turn, in --rounds interleaved rounds, and the round with the median requests/s is shown.
The load generator is its own process: a bounded closed loop of C clients, each sending its next
request when the previous answer arrives, for --duration seconds after a warm-up; it reports
requests/s and p50/p99 latency, and counts errors (non-2xx answers, socket errors, timeouts), which
must be 0. Two load generators (--load-generator):
- "wrk" (the default when `wrk` is on PATH; Debian/Ubuntu: `apt-get install -y wrk`, macOS: `brew
  install wrk`): C, one thread (-t 1) holding C keep-alive connections (-c C), each connection one
  closed-loop client; a Lua script cycles through the request bodies and writes the count, the
  duration and the p50/p99 of wrk's latency histogram (`--latency`) as JSON. It costs a few
  microseconds of CPU per request, so on a small machine nearly all the CPU goes to the servers.
  wrk takes whole seconds: --duration and --warmup are rounded up (a warm-up is a separate,
  discarded run on the same server).
- "python": aiohttp on uvloop (the fallback). It costs about 0.2 ms of CPU per request, which on a
  2-core machine takes CPU from the server it measures and caps every contender near 2,000 req/s.
Beside requests/s the table gives each server's CPU time per request (user + system, from
/proc/PID/stat over the measured run, Linux only): unlike requests/s it barely moves when other
programs load the machine, and on a CPU-bound machine it is what bounds the requests/s.

Targets (issue 22): with batching, >= 5x the requests/s of batching off at 64 clients; p99 < 50 ms at
64 clients for the MLP; >= 1.0x the numpy baseline's requests/s at 64 clients.

Run: nice -n 10 python benchmarks/serving.py [--duration 3] [--clients 1,8,64,256] [--model mlp,convnet]
         [--load-generator auto|wrk|python]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANT = "actorflow, batching on, variant"
NULL = "aiohttp null handler (ceiling)"


# -- models -------------------------------------------------------------------------------------------------

def build_and_export(model: str, export_dir: str, weights_path: str) -> None:
    """Builds `model` with seeded random weights, exports it as SavedModel version 1, and writes the
    weights (by variable name) to `weights_path` for the numpy baseline."""
    import actorflow as af
    g = af.Graph()
    with g.as_default():
        af.set_random_seed(0)
        if model == "mlp":
            x = af.placeholder(af.float32, [None, 64], name="x")
            h = af.layers.dense(x, 256, activation=af.nn.relu, name="hidden0")
            h = af.layers.dense(h, 128, activation=af.nn.relu, name="hidden1")
        else:
            x = af.placeholder(af.float32, [None, 8, 8, 1], name="x")
            h = af.layers.conv2d(x, 32, 3, padding="same", activation=af.nn.relu, name="conv1")
            h = af.layers.max_pooling2d(h, 2, 2, name="pool1")
            h = af.layers.conv2d(h, 64, 3, padding="same", activation=af.nn.relu, name="conv2")
            h = af.layers.max_pooling2d(h, 2, 2, name="pool2")
            h = af.layers.dense(af.layers.flatten(h), 128, activation=af.nn.relu, name="fc1")
        logits = af.layers.dense(h, 10, name="logits")
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            names = [v.op.name for v in af.global_variables()]
            vals = sess.run(af.global_variables())
            np.savez(weights_path, **{n.replace("/", "__"): v for n, v in zip(names, vals)})
            af.saved_model.simple_save(sess, os.path.join(export_dir, "1"), {"x": x}, {"logits": logits})


def numpy_forward(model: str, w: dict, x: np.ndarray) -> np.ndarray:
    """The model's forward pass in plain numpy."""
    relu = lambda a: np.maximum(a, 0)  # noqa: E731
    if model == "mlp":
        h = relu(x @ w["hidden0__kernel"] + w["hidden0__bias"])
        h = relu(h @ w["hidden1__kernel"] + w["hidden1__bias"])
        return h @ w["logits__kernel"] + w["logits__bias"]

    def conv_same(a, k, b):
        n, hh, ww, c = a.shape
        p = np.pad(a, ((0, 0), (1, 1), (1, 1), (0, 0)))
        cols = np.lib.stride_tricks.sliding_window_view(p, (3, 3), axis=(1, 2))     # n, h, w, c, 3, 3
        cols = cols.transpose(0, 1, 2, 4, 5, 3).reshape(n * hh * ww, 9 * c)
        return relu(cols @ k.reshape(9 * c, -1) + b).reshape(n, hh, ww, -1)

    def pool(a):
        n, hh, ww, c = a.shape
        return a.reshape(n, hh // 2, 2, ww // 2, 2, c).max(axis=(2, 4))
    h = pool(conv_same(x, w["conv1__kernel"], w["conv1__bias"]))
    h = pool(conv_same(h, w["conv2__kernel"], w["conv2__bias"]))
    h = relu(h.reshape(len(h), -1) @ w["fc1__kernel"] + w["fc1__bias"])
    return h @ w["logits__kernel"] + w["logits__bias"]


# -- the baseline server ------------------------------------------------------------------------------------

def baseline_server(model: str, weights_path: str, port: int) -> None:
    """A plain aiohttp app on uvloop answering the same URL with numpy on each request."""
    import orjson
    from aiohttp import web
    from threadpoolctl import threadpool_limits
    # One BLAS thread, as actorflow's runtime sets it: for one row per request more threads only spin.
    threadpool_limits(1)
    w = dict(np.load(weights_path))

    async def predict(request):
        try:
            doc = orjson.loads(await request.read())
            x = np.asarray(doc["instances"], dtype=np.float32)
            if model == "convnet":
                x = x.reshape(-1, 8, 8, 1)
            y = numpy_forward(model, w, x)
        except (ValueError, KeyError, TypeError) as e:
            return web.Response(body=orjson.dumps({"error": str(e)}), status=400, content_type="application/json")
        return web.Response(body=orjson.dumps({"predictions": y}, option=orjson.OPT_SERIALIZE_NUMPY),
                            content_type="application/json")
    _run_app(predict, port)


def null_server(port: int) -> None:
    """The HTTP ceiling: the same aiohttp app on uvloop whose handler reads the body and answers a
    constant prediction: no JSON parsing, no model, nothing but aiohttp's own per-request work."""
    from aiohttp import web
    answer = b'{"predictions": [[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]}'

    async def predict(request):
        await request.read()
        return web.Response(body=answer, content_type="application/json")
    _run_app(predict, port)


def _run_app(predict, port: int) -> None:
    """Serves `predict` at the model's predict URL (and a status URL) with aiohttp on uvloop."""
    import uvloop
    from aiohttp import web

    async def status(request):
        return web.json_response({"model_version_status": [{"version": "1", "state": "AVAILABLE"}]})
    app = web.Application()
    app.router.add_post("/v1/models/m:predict", predict)
    app.router.add_get("/v1/models/m", status)
    uvloop.install()
    # The accept backlog of `actorflow serve` (aiohttp's 128 drops SYNs when 256 clients connect at once).
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None, backlog=1024)


# -- the load generator -------------------------------------------------------------------------------------

def load_generator(url: str, bodies_path: str, clients: int, duration: float, warmup: float) -> None:
    """Closed loop of `clients` concurrent clients; prints one JSON line of results."""
    import aiohttp
    import uvloop
    with open(bodies_path) as f:
        bodies = [b.encode() for b in json.load(f)]

    async def main():
        lat = []
        errors = 0
        total = 0
        t_measure = time.perf_counter() + warmup
        end = t_measure + duration
        headers = {"Content-Type": "application/json"}
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as s:
            async def client(i):
                nonlocal errors, total
                k = i
                while True:
                    t0 = time.perf_counter()
                    if t0 >= end:
                        return
                    async with s.post(url, data=bodies[k % len(bodies)], headers=headers) as r:
                        await r.read()
                        ok = r.status == 200
                    t1 = time.perf_counter()
                    total += 1
                    if t0 >= t_measure:
                        lat.append(t1 - t0)
                        if not ok:
                            errors += 1
                    k += clients
            await asyncio.gather(*[client(i) for i in range(clients)])
        lat.sort()
        n = len(lat)
        print(json.dumps({"n": n, "rps": n / duration, "p50_ms": 1e3 * lat[n // 2] if n else None,
                          "p99_ms": 1e3 * lat[min(n - 1, int(n * 0.99))] if n else None, "errors": errors,
                          "n_total": total}))
    uvloop.run(main())


# The wrk script: `init` (per wrk thread) reads the bodies, one per line, and pre-formats one POST each;
# `request` cycles through them (the connections of a thread share the cycle);
# `done` writes one JSON line. wrk's error counts cover non-2xx/3xx answers (status), timeouts and
# socket errors.
WRK_SCRIPT = r"""
local reqs = {}
local idx = 0
init = function(args)
  local f = assert(io.open(args[1], "r"))
  for line in f:lines() do
    reqs[#reqs + 1] = wrk.format("POST", nil, {["Content-Type"] = "application/json"}, line)
  end
  f:close()
end
request = function()
  idx = idx % #reqs + 1
  return reqs[idx]
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('{"n": %d, "duration_us": %d, "mean_us": %.1f, "p50_us": %d, "p99_us": %d, '
    .. '"errors": %d}\n', summary.requests, summary.duration, latency.mean, latency:percentile(50),
    latency:percentile(99), e.connect + e.read + e.write + e.status + e.timeout))
end
"""


def wrk_run(url: str, lines_path: str, script_path: str, clients: int, seconds: float) -> dict:
    """One wrk run: `clients` closed-loop connections on one thread for `seconds` (rounded up to whole
    seconds); requests/s over wrk's own measured duration, p50/p99 from its latency histogram."""
    cmd = ["wrk", "-t1", f"-c{clients}", f"-d{max(1, math.ceil(seconds))}s", "--timeout", "30s", "--latency",
           "-s", script_path, url, "--", lines_path]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        raise RuntimeError(f"wrk failed ({r.returncode}): {r.stderr[-2000:] or r.stdout[-2000:]}")
    d = json.loads(lines[-1])
    n, dur = d["n"], d["duration_us"] / 1e6
    return {"n": n, "rps": n / dur, "p50_ms": d["p50_us"] / 1e3, "p99_ms": d["p99_us"] / 1e3,
            "mean_ms": d["mean_us"] / 1e3, "errors": d["errors"], "n_total": n}


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process `pid` so far (all its threads), or None off Linux."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- orchestration ------------------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(url: str, proc, timeout: float = 120.0) -> None:
    import urllib.request
    t_end = time.time() + timeout
    while time.time() < t_end:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"server at {url} not ready after {timeout:.0f} s")


def _post(url: str, body: bytes) -> dict:
    import urllib.request
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def _median(runs: list) -> dict:
    """The run with the median requests/s (its latencies with it); errors summed over all runs."""
    r = dict(sorted(runs, key=lambda x: x["rps"])[len(runs) // 2])
    r["errors"] = sum(x["errors"] for x in runs)
    return r


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--role", choices=["main", "baseline", "load", "null"], default="main", help=argparse.SUPPRESS)
    p.add_argument("--model", default="mlp,convnet")
    p.add_argument("--batch-threads", dest="batch_threads", type=int, default=1,
                   help="num_batch_threads of the batching server (steps in flight)")
    p.add_argument("--inter-op", dest="inter_op", type=int, default=0,
                   help="--tensorflow_inter_op_parallelism of the batching server")
    p.add_argument("--variant", default=None,
                   help="extra `actorflow serve` flags for a fourth contender, the batching server with them")
    p.add_argument("--clients", default="1,8,64,256")
    p.add_argument("--duration", type=float, default=3.0, help="measured seconds per point")
    p.add_argument("--warmup", type=float, default=0.5)
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds per point (the median is shown)")
    p.add_argument("--load-generator", dest="load_generator", choices=["auto", "wrk", "python"], default="auto",
                   help="wrk (C, cheap per request) or the Python client; auto: wrk when it is on PATH")
    p.add_argument("--weights")
    p.add_argument("--bodies")
    p.add_argument("--url")
    p.add_argument("--port", type=int)
    args = p.parse_args(argv)
    if args.role == "baseline":
        return baseline_server(args.model, args.weights, args.port)
    if args.role == "null":
        return null_server(args.port)
    if args.role == "load":
        return load_generator(args.url, args.bodies, int(args.clients), args.duration, args.warmup)

    gen = args.load_generator
    if gen == "auto":
        gen = "wrk" if shutil.which("wrk") else "python"
    elif gen == "wrk" and not shutil.which("wrk"):
        p.error("--load-generator wrk: wrk is not on PATH (Debian/Ubuntu: apt-get install -y wrk)")
    from sklearn.datasets import load_digits
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    images = (load_digits().images[:256] / 16.0).astype(np.float32)
    clients = [int(c) for c in args.clients.split(",")]
    if gen == "wrk":
        args.duration, args.warmup = math.ceil(args.duration), math.ceil(args.warmup)
    print(f"# serving benchmark: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start, "
          f"{args.duration:g} s per point after {args.warmup:g} s warm-up, load generator {gen}; "
          f"random (seeded Glorot) weights")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.model.split(","):
            base = os.path.join(tmp, model)
            weights = os.path.join(tmp, f"{model}.npz")
            subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {ROOT!r}); "
                            f"from benchmarks.serving import build_and_export; "
                            f"build_and_export({model!r}, {base!r}, {weights!r})"], check=True, env=env)
            rows = images.reshape(256, 64) if model == "mlp" else images.reshape(256, 8, 8, 1)
            bodies = os.path.join(tmp, f"{model}.json")
            docs = [json.dumps({"instances": [r.tolist()]}) for r in rows]
            with open(bodies, "w") as f:
                json.dump(docs, f)
            body_lines = os.path.join(tmp, f"{model}.lines")      # for wrk: one body per line
            with open(body_lines, "w") as f:
                f.write("".join(d + "\n" for d in docs))
            script = os.path.join(tmp, "post.lua")
            with open(script, "w") as f:
                f.write(WRK_SCRIPT)
            inter_op = args.inter_op
            batching_cmd = [sys.executable, "-m", "actorflow.cli", "serve", "--model_name", "m",
                            "--model_base_path", base, "--port", "{port}", "--enable_batching",
                            "--max_batch_size", "64", "--batch_timeout_micros", "0",
                            "--num_batch_threads", str(args.batch_threads),
                            "--tensorflow_inter_op_parallelism", str(inter_op),
                            "--file_system_poll_wait_seconds", "0"]
            contenders = [
                ("numpy baseline", [sys.executable, __file__, "--role", "baseline", "--model", model,
                                    "--weights", weights, "--port", "{port}"]),
                ("actorflow, batching off", [sys.executable, "-m", "actorflow.cli", "serve", "--model_name", "m",
                                             "--model_base_path", base, "--port", "{port}",
                                             "--file_system_poll_wait_seconds", "0"]),
                ("actorflow, batching on", batching_cmd),
            ]
            if args.variant:
                contenders.append((VARIANT, batching_cmd + args.variant.split()))
            contenders.append((NULL, [sys.executable, __file__, "--role", "null", "--port", "{port}"]))
            w = dict(np.load(weights))
            want = numpy_forward(model, w, rows[:1])
            procs = {}
            try:
                for name, cmd in contenders:
                    port = _free_port()
                    cmd = [c.replace("{port}", str(port)) for c in cmd]
                    procs[name] = (subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                                    stderr=subprocess.DEVNULL), port)
                for name, (proc, port) in procs.items():
                    _wait_ready(f"http://127.0.0.1:{port}/v1/models/m", proc)
                    url = f"http://127.0.0.1:{port}/v1/models/m:predict"
                    got = np.array(_post(url, json.dumps({"instances": [rows[0].tolist()]}).encode())["predictions"])
                    if name == NULL:
                        continue                    # (answers a constant)
                    err = float(np.max(np.abs(got - want)))
                    if err > 1e-3:
                        raise RuntimeError(f"{name}: answers differ from the numpy forward pass by {err}")
                # Rounds interleave the contenders, so that a change of machine load hits them alike.
                for c in clients:
                    for _ in range(args.rounds):
                        for name, (proc, port) in procs.items():
                            url = f"http://127.0.0.1:{port}/v1/models/m:predict"
                            if gen == "wrk":
                                if args.warmup:
                                    wrk_run(url, body_lines, script, c, args.warmup)
                                cpu0 = _cpu_seconds(proc.pid)
                                res = wrk_run(url, body_lines, script, c, args.duration)
                            else:
                                cpu0 = _cpu_seconds(proc.pid)
                                r = subprocess.run([sys.executable, __file__, "--role", "load", "--url", url,
                                                    "--bodies", bodies, "--clients", str(c), "--duration",
                                                    str(args.duration), "--warmup", str(args.warmup)], env=env,
                                                   capture_output=True, text=True,
                                                   timeout=args.duration + args.warmup + 120)
                                if r.returncode != 0:
                                    raise RuntimeError(f"load generator failed: {r.stderr[-2000:]}")
                                res = json.loads(r.stdout.strip().splitlines()[-1])
                            cpu1 = _cpu_seconds(proc.pid)
                            res["cpu_us"] = (1e6 * (cpu1 - cpu0) / res["n_total"]
                                             if cpu0 is not None and cpu1 is not None and res["n_total"] else None)
                            results.setdefault((model, name, c), []).append(res)
                    for name in procs:
                        res = _median(results[(model, name, c)])
                        cpu = statistics.median(x["cpu_us"] for x in results[(model, name, c)]) \
                            if res.get("cpu_us") is not None else float("nan")
                        print(f"{model:8s} {name:26s} {c:4d} clients: {res['rps']:8.0f} req/s  "
                              f"p50 {res['p50_ms']:7.2f} ms  p99 {res['p99_ms']:7.2f} ms  "
                              f"server CPU {cpu:6.0f} us/req  errors {res['errors']}", flush=True)
            finally:
                for proc, _ in procs.values():
                    proc.terminate()
                for proc, _ in procs.values():
                    try:
                        proc.wait(timeout=60)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
    names = ("numpy baseline", "actorflow, batching off", "actorflow, batching on", VARIANT, NULL)
    print(f"\n# load average at end {os.getloadavg()[0]:.1f}; median round of {args.rounds} per row; "
          f"CPU: the server process's user+system time per request (median over rounds)\n")
    print("| model | clients | server | req/s | p50 ms | p99 ms | CPU us/req | errors |")
    print("|---|---|---|---|---|---|---|---|")
    for model in args.model.split(","):
        for c in clients:
            for name in names:
                runs = results.get((model, name, c))
                if not runs:
                    continue
                r = _median(runs)
                cpus = [x["cpu_us"] for x in runs if x.get("cpu_us") is not None]
                cpu = f"{statistics.median(cpus):.0f}" if cpus else "-"
                print(f"| {model} | {c} | {name} | {r['rps']:.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
                      f"{cpu} | {r['errors']} |")
    print()
    print("| model | clients | on/off req/s (paired) | on/baseline req/s (paired) | off/on CPU per request "
          "| on/ceiling req/s | 5x off / ceiling |")
    print("|---|---|---|---|---|---|---|")
    for model in args.model.split(","):
        for c in clients:
            b, off, on, var, null = (results.get((model, n, c)) for n in names)
            if not (b and off and on):
                continue
            # Paired ratios: per round (contenders measured seconds apart), then the median over rounds.
            r_off = statistics.median(x["rps"] / max(y["rps"], 1e-9) for x, y in zip(on, off))
            r_base = statistics.median(x["rps"] / max(y["rps"], 1e-9) for x, y in zip(on, b))
            cpu = [y["cpu_us"] / x["cpu_us"] for x, y in zip(on, off) if x.get("cpu_us") and y.get("cpu_us")]
            cpu_s = f"{statistics.median(cpu):.2f}x" if cpu else "-"
            # the HTTP ceiling: a server doing nothing but aiohttp's work; 5x batching off above it
            # means no aiohttp server on this machine can reach the 5x target
            r_null = statistics.median(x["rps"] / max(y["rps"], 1e-9) for x, y in zip(on, null)) if null else None
            r_5x = statistics.median(5 * x["rps"] / max(y["rps"], 1e-9) for x, y in zip(off, null)) if null else None
            print(f"| {model} | {c} | {r_off:.2f}x | {r_base:.2f}x | {cpu_s} | "
                  + (f"{r_null:.2f}x | {r_5x:.2f}x |" if null else "- | - |"))
            if var:
                r_var = statistics.median(x["rps"] / max(y["rps"], 1e-9) for x, y in zip(var, on))
                print(f"| {model} | {c} | variant {args.variant}: {r_var:.2f}x the batching server's req/s | "
                      f"{statistics.median(x['rps'] / max(y['rps'], 1e-9) for x, y in zip(var, b)):.2f}x | - |")


if __name__ == "__main__":
    main()
