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
  batch_timeout_micros 0 (a batch closes when a step slot frees: no added wait), num_batch_threads 2).
All three servers run at once (idle when not driven); for each number of clients the contenders are
driven in turn, in --rounds interleaved rounds, and the round with the median requests/s is shown.
The load generator is its own process: a bounded closed loop of C clients (aiohttp on uvloop), each
sending its next request when the previous answer arrives, for --duration seconds after a warm-up;
it reports requests/s and p50/p99 latency, and counts non-200 answers (which must be 0).

Targets (issue 22): with batching, >= 5x the requests/s of batching off at 64 clients; p99 < 50 ms at
64 clients for the MLP; >= 1.0x the numpy baseline's requests/s at 64 clients.

Run: nice -n 10 python benchmarks/serving.py [--duration 3] [--clients 1,8,64,256] [--model mlp,convnet]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
    import uvloop
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

    async def status(request):
        return web.json_response({"model_version_status": [{"version": "1", "state": "AVAILABLE"}]})
    app = web.Application()
    app.router.add_post("/v1/models/m:predict", predict)
    app.router.add_get("/v1/models/m", status)
    uvloop.install()
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


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
        stop_at = 0.0
        t_measure = time.perf_counter() + warmup
        end = t_measure + duration
        headers = {"Content-Type": "application/json"}
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as s:
            async def client(i):
                nonlocal errors
                k = i
                while True:
                    t0 = time.perf_counter()
                    if t0 >= end:
                        return
                    async with s.post(url, data=bodies[k % len(bodies)], headers=headers) as r:
                        await r.read()
                        ok = r.status == 200
                    t1 = time.perf_counter()
                    if t0 >= t_measure:
                        lat.append(t1 - t0)
                        if not ok:
                            errors += 1
                    k += clients
            await asyncio.gather(*[client(i) for i in range(clients)])
        del stop_at
        lat.sort()
        n = len(lat)
        print(json.dumps({"n": n, "rps": n / duration, "p50_ms": 1e3 * lat[n // 2] if n else None,
                          "p99_ms": 1e3 * lat[min(n - 1, int(n * 0.99))] if n else None, "errors": errors}))
    uvloop.run(main())


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
    p.add_argument("--role", choices=["main", "baseline", "load"], default="main", help=argparse.SUPPRESS)
    p.add_argument("--model", default="mlp,convnet")
    p.add_argument("--clients", default="1,8,64,256")
    p.add_argument("--duration", type=float, default=3.0, help="measured seconds per point")
    p.add_argument("--warmup", type=float, default=0.5)
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds per point (the median is shown)")
    p.add_argument("--weights")
    p.add_argument("--bodies")
    p.add_argument("--url")
    p.add_argument("--port", type=int)
    args = p.parse_args(argv)
    if args.role == "baseline":
        return baseline_server(args.model, args.weights, args.port)
    if args.role == "load":
        return load_generator(args.url, args.bodies, int(args.clients), args.duration, args.warmup)

    from sklearn.datasets import load_digits
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    images = (load_digits().images[:256] / 16.0).astype(np.float32)
    clients = [int(c) for c in args.clients.split(",")]
    print(f"# serving benchmark: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, "
          f"{args.duration:g} s per point after {args.warmup:g} s warm-up; random (seeded Glorot) weights")
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
            with open(bodies, "w") as f:
                json.dump([json.dumps({"instances": [r.tolist()]}) for r in rows], f)
            contenders = [
                ("numpy baseline", [sys.executable, __file__, "--role", "baseline", "--model", model,
                                    "--weights", weights, "--port", "{port}"]),
                ("actorflow, batching off", [sys.executable, "-m", "actorflow.cli", "serve", "--model_name", "m",
                                             "--model_base_path", base, "--port", "{port}",
                                             "--file_system_poll_wait_seconds", "0"]),
                ("actorflow, batching on", [sys.executable, "-m", "actorflow.cli", "serve", "--model_name", "m",
                                            "--model_base_path", base, "--port", "{port}", "--enable_batching",
                                            "--max_batch_size", "64", "--batch_timeout_micros", "0",
                                            "--num_batch_threads", "2", "--file_system_poll_wait_seconds", "0"]),
            ]
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
                    err = float(np.max(np.abs(got - want)))
                    if err > 1e-3:
                        raise RuntimeError(f"{name}: answers differ from the numpy forward pass by {err}")
                # Rounds interleave the contenders, so that a change of machine load hits them alike.
                for c in clients:
                    for _ in range(args.rounds):
                        for name, (_proc, port) in procs.items():
                            url = f"http://127.0.0.1:{port}/v1/models/m:predict"
                            r = subprocess.run([sys.executable, __file__, "--role", "load", "--url", url, "--bodies",
                                                bodies, "--clients", str(c), "--duration", str(args.duration),
                                                "--warmup", str(args.warmup)], env=env, capture_output=True,
                                               text=True, timeout=args.duration + args.warmup + 120)
                            if r.returncode != 0:
                                raise RuntimeError(f"load generator failed: {r.stderr[-2000:]}")
                            results.setdefault((model, name, c), []).append(json.loads(r.stdout.strip().splitlines()[-1]))
                    for name in procs:
                        res = _median(results[(model, name, c)])
                        print(f"{model:8s} {name:26s} {c:4d} clients: {res['rps']:8.0f} req/s  "
                              f"p50 {res['p50_ms']:7.2f} ms  p99 {res['p99_ms']:7.2f} ms  errors {res['errors']}",
                              flush=True)
            finally:
                for proc, _ in procs.values():
                    proc.terminate()
                for proc, _ in procs.values():
                    try:
                        proc.wait(timeout=60)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
    print()
    print("| model | clients | numpy baseline req/s | af off req/s | af on req/s | on/off (paired) | "
          "on/baseline (paired) | af on p50 ms | af on p99 ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model in args.model.split(","):
        for c in clients:
            b, off, on = (results.get((model, n, c)) for n in ("numpy baseline", "actorflow, batching off",
                                                                 "actorflow, batching on"))
            if not (b and off and on):
                continue
            # Paired ratios: per round (contenders measured seconds apart), then the median over rounds.
            r_off = statistics.median(x["rps"] / y["rps"] for x, y in zip(on, off))
            r_base = statistics.median(x["rps"] / y["rps"] for x, y in zip(on, b))
            b, off, on = _median(b), _median(off), _median(on)
            print(f"| {model} | {c} | {b['rps']:.0f} | {off['rps']:.0f} | {on['rps']:.0f} | "
                  f"{r_off:.2f}x | {r_base:.2f}x | {on['p50_ms']:.2f} | {on['p99_ms']:.2f} |")


if __name__ == "__main__":
    main()
