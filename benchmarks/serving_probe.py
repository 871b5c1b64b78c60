"""Where the batching model server's tail latency comes from: one `actorflow serve`-equivalent server in
this process, instrumented, driven by wrk at C closed-loop clients (benchmarks/serving.py's load).

It records, over the measured run:
- every garbage collection (gc.callbacks): generation, duration, objects collected;
- event-loop lag: a 1 ms heartbeat on the server's loop, and how late each beat fires;
- every batch step: requests and rows, the first request's queue wait, the step's duration (on the loop);
- wrk's p50/p99 and requests/s, and the process's CPU time per request.
It prints distributions and, for the slowest loop stalls, what ran then (a GC or a step).

With --no-http the handler's work past HTTP (parse, convert, batch, step, answer) runs in a closed
loop in process, without wrk or sockets, beside the numpy baseline handler's work: a CPU-per-request
comparison that a loaded machine barely moves.

Run: nice -n 10 python benchmarks/serving_probe.py [--model mlp] [--clients 64] [--duration 5]
         [--batch-threads 1] [--timeout-micros 0] [--off] [--tune-gc 0|1] [--inter-op -1] [--no-http]
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def wrk_run(url, lines_path, script_path, clients, seconds) -> dict:
    cmd = ["wrk", "-t1", f"-c{clients}", f"-d{seconds}s", "--timeout", "30s", "-s", script_path, url, "--",
           lines_path]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120)
    d = json.loads([ln for ln in r.stdout.splitlines() if ln.startswith("{")][-1])
    d["rps"] = d["n"] / (d["duration_us"] / 1e6)
    for k in ("p50", "p90", "p99", "p999", "max"):
        d[k + "_ms"] = d[k + "_us"] / 1e3
    return d


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="mlp")
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--duration", type=int, default=5)
    p.add_argument("--batch-threads", dest="batch_threads", type=int, default=1)
    p.add_argument("--timeout-micros", dest="timeout_micros", type=int, default=0)
    p.add_argument("--max-batch", dest="max_batch", type=int, default=64)
    p.add_argument("--off", action="store_true", help="batching off")
    p.add_argument("--tune-gc", dest="tune_gc", type=int, default=1,
                   help="ModelServer(tune_gc=...): 1 as `actorflow serve` runs, 0 off")
    p.add_argument("--inter-op", dest="inter_op", type=int, default=0,
                   help="the sessions' inter_op_parallelism_threads (-1: no kernel on the pool)")
    p.add_argument("--gc-threshold0", dest="gc_threshold0", type=int, default=0,
                   help="(experiment) gc.set_threshold(N, ...) in the server process")
    p.add_argument("--no-offload", dest="no_offload", action="store_true",
                   help="(experiment) kernels never go to the kernel pool")
    p.add_argument("--no-http", dest="no_http", action="store_true",
                   help="drive the handler's work past HTTP in process (no wrk, no sockets): CPU per request "
                        "of the parse-batch-step-answer path alone, beside the numpy baseline handler's")
    p.add_argument("--json", help="write the raw records here")
    args = p.parse_args(argv)

    from sklearn.datasets import load_digits

    from actorflow.actors.dispatcher import default_runtime
    from actorflow.actors.session import ConfigProto
    from actorflow.serving import batching as batching_mod
    from actorflow.serving.model_server import BatchingParameters, ModelConfig, ModelServer
    from benchmarks.serving import WRK_SCRIPT, build_and_export

    if args.no_offload:
        import actorflow.actors.node as node_mod
        node_mod.OFFLOAD_NS = 1 << 62           # read when the executables' actors are built
    tmp = tempfile.mkdtemp()
    base = os.path.join(tmp, args.model)
    weights = os.path.join(tmp, "w.npz")
    build_and_export(args.model, base, weights)
    images = (load_digits().images[:256] / 16.0).astype(np.float32)
    rows = images.reshape(256, 64) if args.model == "mlp" else images.reshape(256, 8, 8, 1)
    lines = os.path.join(tmp, "b.lines")
    with open(lines, "w") as f:
        f.write("".join(json.dumps({"instances": [r.tolist()]}) + "\n" for r in rows))
    script = os.path.join(tmp, "post.lua")
    with open(script, "w") as f:
        # benchmarks/serving.py's script, with more of the latency distribution.
        f.write(WRK_SCRIPT.replace('"errors": %d}', '"errors": %d, "p90_us": %d, "p999_us": %d, "max_us": %d}')
                .replace("e.status + e.timeout)", "e.status + e.timeout, latency:percentile(90), "
                         "latency:percentile(99.9), latency.max)"))

    rec = {"gc": [], "lag": [], "batch": [], "req": []}
    conns: dict = {}
    on = {"v": False}
    gc_t0 = [0.0, 0.0]

    def gc_cb(phase, info):
        # (start, generation, wall seconds, objects collected, CPU seconds of the collecting thread)
        if phase == "start":
            gc_t0[0], gc_t0[1] = time.perf_counter(), time.thread_time()
        elif on["v"]:
            rec["gc"].append((gc_t0[0], info["generation"], time.perf_counter() - gc_t0[0], info["collected"],
                              time.thread_time() - gc_t0[1]))
    gc.callbacks.append(gc_cb)

    # Per batch step: (t start, requests, rows, queue wait of the first request, step seconds).
    orig_run = batching_mod.BatchQueue._run

    async def run(self, batch):
        t0 = time.perf_counter()
        wait = time.monotonic() - batch[0].t
        r0 = self._runner.run

        async def timed(feeds):
            t1 = time.perf_counter()
            try:
                return await r0(feeds)
            finally:
                if on["v"]:
                    rec["batch"].append((t0, len(batch), sum(it.rows for it in batch), wait,
                                         time.perf_counter() - t1))
        self._runner.run = timed
        try:
            await orig_run(self, batch)
        finally:
            self._runner.run = r0
    batching_mod.BatchQueue._run = run

    # Per request, in the handler: (t start, seconds until the response is built).
    from actorflow.serving import model_server as ms_mod
    orig_post = ms_mod.ModelServer._handle_post

    async def handle_post(self, request, spec, verb):
        t0 = time.perf_counter()
        try:
            return await orig_post(self, request, spec, verb)
        finally:
            if on["v"]:
                rec["req"].append((t0, time.perf_counter() - t0))
                conns[id(request.transport)] = conns.get(id(request.transport), 0) + 1
    ms_mod.ModelServer._handle_post = handle_post

    params = None if args.off else BatchingParameters(max_batch_size=args.max_batch,
                                                      batch_timeout_micros=args.timeout_micros,
                                                      num_batch_threads=args.batch_threads)
    server = ModelServer([ModelConfig("m", base)], batching=params, poll_interval_s=0,
                         tune_gc=bool(args.tune_gc),
                         session_config=ConfigProto(inter_op_parallelism_threads=args.inter_op) if args.inter_op else None)
    rt = default_runtime()
    runner = asyncio.run_coroutine_threadsafe(server.serve("127.0.0.1", 0), rt.loop).result()
    port = runner.addresses[0][1]

    async def beat():
        while True:
            t, c = time.perf_counter(), time.thread_time()
            await asyncio.sleep(0.001)
            if on["v"]:
                # (start, lag, CPU the loop's thread used meanwhile): a lag without CPU is time the
                # thread did not run (the OS ran something else, or it waited for the GIL).
                rec["lag"].append((t, time.perf_counter() - t - 0.001, time.thread_time() - c))
    hb = asyncio.run_coroutine_threadsafe(beat(), rt.loop)

    if args.gc_threshold0:
        gc.set_threshold(args.gc_threshold0, *gc.get_threshold()[1:])
    url = f"http://127.0.0.1:{port}/v1/models/m:predict"
    if args.no_http:
        bodies = [ln.encode() for ln in open(lines).read().splitlines()]
        servable = server._servable("m", None)

        async def closed_loop(seconds):
            # The handler's work past HTTP (parse, convert, batch, step, answer) for C clients, each
            # sending its next request when its answer is built.
            n = 0
            end = time.perf_counter() + seconds

            async def client(i):
                nonlocal n
                k = i
                while time.perf_counter() < end:
                    await server._predict_json(servable, server._parse_json(bodies[k % len(bodies)]))
                    n += 1
                    k += args.clients
            await asyncio.gather(*[client(i) for i in range(args.clients)])
            return {"n": n, "rps": n / seconds, "p50_ms": float("nan"), "p99_ms": float("nan"),
                    "p90_ms": float("nan"), "p999_ms": float("nan"), "max_ms": float("nan"), "errors": 0}

        def drive(seconds):
            return asyncio.run_coroutine_threadsafe(closed_loop(seconds), rt.loop).result()
    else:
        def drive(seconds):
            return wrk_run(url, lines, script, args.clients, seconds)
    drive(1)                                                   # warm-up
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    on["v"] = True
    t_start = time.perf_counter()
    res = drive(args.duration)
    on["v"] = False
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    hb.cancel()
    cpu = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / max(res["n"], 1) * 1e6
    gc_state = f"gc thresholds {gc.get_threshold()}, frozen {gc.get_freeze_count()}"
    asyncio.run_coroutine_threadsafe(runner.cleanup(), rt.loop).result(timeout=60)

    print(f"# load {os.getloadavg()[0]:.1f}; {args.model}, {args.clients} clients, "
          f"{'batching off' if args.off else f'batching on (threads {args.batch_threads}, timeout {args.timeout_micros} us)'}, "
          f"tune_gc {args.tune_gc}, inter_op {args.inter_op}; {gc_state}")
    print(f"wrk: {res['rps']:.0f} req/s  p50 {res['p50_ms']:.2f} ms  p99 {res['p99_ms']:.2f} ms  "
          f"p90 {res['p90_ms']:.2f} p99.9 {res['p999_ms']:.2f} max {res['max_ms']:.2f} ms  "
          f"errors {res['errors']}  process CPU {cpu:.0f} us/req")
    if args.no_http:
        import orjson

        from benchmarks.serving import numpy_forward
        w = dict(np.load(weights))
        bodies = [ln.encode() for ln in open(lines).read().splitlines()]
        t = time.process_time()
        for i in range(20_000):
            x = np.asarray(orjson.loads(bodies[i % len(bodies)])["instances"], dtype=np.float32)
            if args.model == "convnet":
                x = x.reshape(-1, 8, 8, 1)
            orjson.dumps({"predictions": numpy_forward(args.model, w, x)}, option=orjson.OPT_SERIALIZE_NUMPY)
        print(f"numpy baseline handler (parse, forward pass, answer; no HTTP): "
              f"{(time.process_time() - t) / 20_000 * 1e6:.0f} us CPU/request")
    if conns:
        cs = sorted(conns.values())
        print(f"requests per connection: min {cs[0]} p10 {cs[len(cs) // 10]} median {cs[len(cs) // 2]} max {cs[-1]} "
              f"({len(cs)} connections)")
    for g in (0, 1, 2):
        ds = [d for _, gg, d, _, _ in rec["gc"] if gg == g]
        cs = [c for _, gg, _, _, c in rec["gc"] if gg == g]
        if ds:
            print(f"gc gen{g}: {len(ds)} collections, total {1e3 * sum(ds):.1f} ms "
                  f"({1e6 * sum(ds) / max(res['n'], 1):.2f} us/request; CPU {1e3 * sum(cs):.1f} ms, "
                  f"{1e6 * sum(cs) / max(res['n'], 1):.2f} us/request), p50 {1e3 * _pct(ds, .5):.2f} ms, "
                  f"max {1e3 * max(ds):.2f} ms")
    rq = [d for _, d in rec["req"]]
    print(f"handler latency ({len(rq)} requests): p50 {1e3 * _pct(rq, .5):.2f} p99 {1e3 * _pct(rq, .99):.2f} "
          f"max {1e3 * max(rq, default=0):.2f} ms")
    lags = [lag for _, lag, _ in rec["lag"]]
    print(f"loop lag (1 ms beat, {len(lags)} beats): p50 {1e3 * _pct(lags, .5):.2f} p99 {1e3 * _pct(lags, .99):.2f} "
          f"max {1e3 * max(lags, default=0):.2f} ms; beats > 10 ms: {sum(1 for x in lags if x > 0.01)}")
    b = rec["batch"]
    if b:
        reqs = [x[1] for x in b]
        waits = [x[3] for x in b]
        steps = [x[4] for x in b]
        print(f"batches: {len(b)} steps, {sum(reqs)} requests; requests/step p50 {_pct(reqs, .5)} mean "
              f"{np.mean(reqs):.1f} max {max(reqs)}; first-request queue wait p50 {1e3 * _pct(waits, .5):.2f} "
              f"p99 {1e3 * _pct(waits, .99):.2f} max {1e3 * max(waits):.2f} ms; step p50 {1e3 * _pct(steps, .5):.3f} "
              f"p99 {1e3 * _pct(steps, .99):.3f} max {1e3 * max(steps):.2f} ms")
        hist = np.bincount(reqs)
        print("requests/step histogram:", {i: int(c) for i, c in enumerate(hist) if c})
    # The worst loop stalls: what overlapped them.
    long = [x for x in rec["lag"] if x[1] > 0.01]
    if long:
        idle = sum(1e-3 + lag - cpu for _, lag, cpu in long) / sum(1e-3 + lag for _, lag, _ in long)
        print(f"beats > 10 ms: the loop's thread was off the CPU for {100 * idle:.0f}% of their time")
    worst = sorted(rec["lag"], key=lambda x: -x[1])[:8]
    for t, lag, cpu in worst:
        gcs = [(g, round(1e3 * d, 2)) for t0, g, d, _, _ in rec["gc"] if t <= t0 <= t + lag + 0.001]
        st = [round(1e3 * s, 2) for t0, _, _, _, s in b if t <= t0 <= t + lag + 0.001]
        print(f"  stall {1e3 * lag:6.2f} ms (loop thread CPU {1e3 * cpu:5.2f} ms) at +{t - t_start:6.3f} s: gc {gcs} steps(ms) {st[:6]}{'...' if len(st) > 6 else ''}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({k: v for k, v in rec.items()}, f)


if __name__ == "__main__":
    main()
