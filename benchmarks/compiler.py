"""The graph optimizer and the numba JIT (issue 18) against TensorFlow 1.x's C++ executor.

Prints, in one run, for each workload: actorflow with the optimizer and JIT off, actorflow with
both on (the default passes plus ``global_jit_level=ON_1``), actorflow with the JIT on but the
arithmetic optimizer off ("jit only": no constant-chain collapse, so the chain is one compiled
1,000-op function), and TensorFlow 2.21 ``tf.compat.v1`` (grappler on, its default):

- chain: 1,000 dependent scalar ``y = y + 1.0`` from a fed placeholder; per op = step / 1,000;
- while: ``while_loop`` of 100,000 iterations ``(i + 1, x + 1.0)``; per iteration;
- lstm: 10,000 steps of an LSTM cell of width 32 (input 32) in a ``while_loop``; per step;
- lstm_grad: the same loop forward and its gradient loop (``tf.gradients`` of a loss of the final
  h and c with respect to the cell's weights, biases and input); per step of forward + backward;
- mlp: 784-1024-1024-10 ReLU MLP, batch 256, one SGD step (forward, backward, update);
- convnet: LeNet-like (conv 5x5x32, pool, conv 5x5x64, pool, dense 1024, dense 10), batch 64;
- compile time per signature: the first step minus the steady step, with an empty JIT cache
  ("cold", the first round's process) and in a later process reusing it ("warm");
- "af-default": a Session with no config, the JIT at its DEFAULT level (small while loops run as
  one kernel call, interpreted, then compiled once they have run long enough; nothing else);
- "af-tiered": the same with AF_JIT=tiered (scheduler/jit/compile.py): each workload's clusters
  and loops run interpreted until their estimated cost passes TIER_SECONDS, then compile before
  the next step (the steady figure is the best step). The helpers
  generated kernels call (scheduler/jit/rt.py) stay in numba's own cache, beside the package: they
  compile once per installation; run with ``NUMBA_CACHE_DIR=$(mktemp -d)`` to count them in
  "cold" too (the LSTM's loops call none: every shape is static, scheduler/jit/flat.py).

Every contender runs in its own process (numpy/BLAS and TF's thread pools never compete in one
process); processes alternate in rounds (the order rotates), and each figure is the minimum over
rounds (the machine is shared). Ratios are against TF's figure of the same run.

The training steps are then also timed side by side: one process per contender, all alive at
once, taking turns of a few steps (--paired-rounds, --paired-window). The host's speed drifts
over minutes (the same MLP step took 15 ms in one minute and 20 ms in another, our process at
real-time priority), so a ratio of figures from processes minutes apart moves by that much;
the median of the ratios of turns a fraction of a second apart does not.

Targets (issue 18): chain <= 0.5x TF per op; while <= 0.5x TF per iteration; lstm and lstm_grad <= 1.0x TF;
mlp <= 0.95x TF; convnet <= 1.1x TF; a first step that compiles <= 3 s, and <= 0.3 s reusing the
cache in a second process.

Run: python benchmarks/compiler.py [--rounds 3] [--tf-python /work/tfvenv/bin/python]
     [--only chain,while,lstm,lstm_grad,mlp,convnet] [--paired-rounds 15] [--paired-window 5]
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORKLOADS = ("chain", "while", "lstm", "lstm_grad", "rnn", "rnn_embed", "rnn_wide", "rnn_big", "rnn_dropout", "mlp",
             "convnet")
CHAIN, ITERS, LSTM_STEPS, WIDTH = 1000, 100_000, 10_000, 32
# rnn: a real program's RNN, not one of the workloads: tf.nn.dynamic_rnn of an LSTMCell of width
# 32 over 100 time steps of a [32, 100, 16] batch, trained with SGD (the forward loop, its gradient loop
# and the update), per time step; 40 steps, so that DEFAULT's tiered loops are compiled by the best one.
# rnn_embed: the same over an embedding lookup (a vocabulary of 1,000) of fed int ids, as a language
# model has it (the loop then also gives its input a gradient, one row a time step)
RNN_BATCH, RNN_STEPS, RNN_DEPTH, RNN_WIDTH, RNN_REPS, RNN_VOCAB = 32, 100, 16, 32, 40, 1000
# rnn_wide, rnn_big: dynamic_rnn of a BasicLSTMCell over a batch the graph leaves open ([None, steps, depth]),
# trained with SGD, per time step: width 128 over 128 rows, 30 steps, depth 128 (products of 17M
# multiply-adds, compiled at DEFAULT with cblas calls), and width 512 over 64 rows, 20 steps, depth 256
# (100M, which DEFAULT leaves to the actors: one thread's cblas is slower than the pool's split products)
# rnn_dropout: width 64 over 64 rows, 30 steps, depth 64, its cell in a DropoutWrapper (output_keep_prob 0.8):
# a RandomUniform in the loop's body, which the compiled loop draws from the op's stream
RNN_SHAPES = {"rnn": (RNN_BATCH, RNN_STEPS, RNN_DEPTH, RNN_WIDTH, False), "rnn_embed": (RNN_BATCH, RNN_STEPS, RNN_DEPTH, RNN_WIDTH, False),
              "rnn_wide": (128, 30, 128, 128, True), "rnn_big": (64, 20, 256, 512, True),
              "rnn_dropout": (64, 30, 64, 64, True)}
CONTENDERS = ("af-off", "af-on", "af-jit-only", "tf")
TARGETS = {"chain": 0.5, "while": 0.5, "lstm": 1.0, "lstm_grad": 1.0, "mlp": 0.95, "convnet": 1.1,     # x TF
           "rnn": "none", "rnn_embed": "none", "rnn_wide": "none", "rnn_big": "none", "rnn_dropout": "none"}
# seconds between turns side by side (see paired): TF's idle threads spin a few ms after a step (0.05 and
# 0.5 gave the same figures)
SETTLE = float(os.environ.get("AF_BENCH_SETTLE", "0.05"))


# -- the workloads, written once against the TF-1.x API (actorflow or tf.compat.v1) ------------------
def _session(lib, contender):
    if contender == "tf":
        cfg = lib.ConfigProto(intra_op_parallelism_threads=2, inter_op_parallelism_threads=2)
        return lambda g: lib.Session(graph=g, config=cfg)
    RC, OO = lib.RewriterConfig, lib.OptimizerOptions
    if contender == "af-off":
        rw = RC(constant_folding=RC.OFF, arithmetic_optimization=RC.OFF, dependency_optimization=RC.OFF)
        oo = OO(global_jit_level=OO.OFF)
    elif contender == "af-on":
        rw, oo = RC(), OO(global_jit_level=OO.ON_1)
    elif contender == "af-tiered":
        rw, oo = RC(), OO()         # with AF_JIT=tiered: compiles what keeps running
    elif contender == "af-default":
        return lambda g: lib.Session(graph=g)     # no config: the JIT's DEFAULT level (small loops, tiered)
    else:
        rw, oo = RC(arithmetic_optimization=RC.OFF), OO(global_jit_level=OO.ON_1)
    cfg = lib.ConfigProto(graph_options=lib.GraphOptions(rewrite_options=rw, optimizer_options=oo))
    return lambda g: lib.Session(graph=g, config=cfg)


def _timed(fn, reps):
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return first, best


def _chain(lib, sess_of):
    g = lib.Graph()
    with g.as_default():
        x = lib.placeholder(lib.float32, [], name="x")
        y = x
        for _ in range(CHAIN):
            y = y + 1.0
    s = sess_of(g)
    feed = {x: np.float32(1.0)}
    t0 = time.perf_counter()
    assert float(s.run(y, feed)) == 1001.0
    first = time.perf_counter() - t0

    def block():
        for _ in range(50):
            s.run(y, feed)
    g2 = lib.Graph()
    with g2.as_default():
        x2 = lib.placeholder(lib.float32, [], name="x")
        y2 = x2 + 1.0
    s2 = sess_of(g2)
    _, best = _timed(block, 7)
    feed2 = {x2: np.float32(1.0)}
    s2.run(y2, feed2)

    def null_block():
        for _ in range(50):
            s2.run(y2, feed2)
    _, null = _timed(null_block, 7)
    return {"first": first, "steady": best / 50, "null": null / 50}


def _first_and_steady(build_and_run, reps):
    t0 = time.perf_counter()
    run = build_and_run()
    first = time.perf_counter() - t0
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return {"first": first, "steady": best}


def _while(lib, sess_of):
    def build():
        g = lib.Graph()
        with g.as_default():
            x = lib.placeholder(lib.float32, [], name="x")
            _, v = lib.while_loop(lambda i, v: i < ITERS, lambda i, v: (i + 1, v + 1.0), [lib.constant(0), x])
        s = sess_of(g)

        def run():
            assert float(s.run(v, {x: np.float32(0.0)})) == float(ITERS)
        run()
        return run
    return _first_and_steady(build, 3)


def lstm_body(lib, x, w, b):
    """The while_loop body (t, h, c) -> (t + 1, h, c) of an LSTM cell over input x, weights w [2W, 4W]
    and bias b [4W], written with `lib` (actorflow or tensorflow.compat.v1)."""
    def body(t, h, c):
        z = lib.nn.bias_add(lib.matmul(lib.concat([x, h], 1), w), b)
        i, j, f, o = lib.split(z, 4, axis=1)
        c = c * lib.sigmoid(f + 1.0) + lib.sigmoid(i) * lib.tanh(j)
        h = lib.tanh(c) * lib.sigmoid(o)
        return t + 1, h, c
    return body


def _lstm(lib, sess_of, grad=False):
    rng = np.random.default_rng(0)
    w_val = (rng.standard_normal((2 * WIDTH, 4 * WIDTH)) * 0.1).astype(np.float32)
    x_val = rng.standard_normal((1, WIDTH)).astype(np.float32)

    def build():
        g = lib.Graph()
        with g.as_default():
            w = lib.constant(w_val)
            b = lib.constant(np.zeros(4 * WIDTH, np.float32))
            x = lib.placeholder(lib.float32, [1, WIDTH], name="x")

            zero = lib.zeros([1, WIDTH])
            _, h, c = lib.while_loop(lambda t, h, c: t < LSTM_STEPS, lstm_body(lib, x, w, b),
                                     [lib.constant(0), zero, zero])
            fetches = h
            if grad:
                loss = lib.reduce_sum(h * h) + lib.reduce_sum(c)
                fetches = [loss] + lib.gradients(loss, [w, b, x])
        s = sess_of(g)

        def run():
            return s.run(fetches, {x: x_val})
        run()
        return run
    return _first_and_steady(build, 3)


def _rnn(lib, sess_of, embed=False, shape="rnn"):
    batch, steps, depth, width, open_batch = RNN_SHAPES[shape]
    rng = np.random.default_rng(0)
    if embed:
        x_val = rng.integers(0, RNN_VOCAB, (batch, steps)).astype(np.int32)
    else:
        x_val = rng.standard_normal((batch, steps, depth)).astype(np.float32)

    def build():
        g = lib.Graph()
        with g.as_default():
            lib.set_random_seed(0)
            if embed:
                x = lib.placeholder(lib.int32, [batch, steps], name="x")
                inputs = lib.nn.embedding_lookup(lib.get_variable("embedding", [RNN_VOCAB, depth]), x)
            else:
                x = inputs = lib.placeholder(lib.float32, [None if open_batch else batch, steps, depth], name="x")
            cell = lib.nn.rnn_cell.BasicLSTMCell(width) if open_batch else lib.nn.rnn_cell.LSTMCell(width)
            if shape == "rnn_dropout":
                cell = lib.nn.rnn_cell.DropoutWrapper(cell, output_keep_prob=0.8)
            out, _ = lib.nn.dynamic_rnn(cell, inputs, dtype=lib.float32)
            loss = lib.reduce_mean(out * out)
            train = lib.train.GradientDescentOptimizer(0.1).minimize(loss)
            init = lib.global_variables_initializer()
        s = sess_of(g)
        s.run(init)

        def run():
            s.run(train, {x: x_val})
        run()
        return run
    return _first_and_steady(build, RNN_REPS)


def _train_builder(lib, sess_of, model, contender):
    """A function that builds `model`'s training step (train_step.py's graph), runs it once and
    returns it as a callable."""
    sys.path.insert(0, HERE)
    import train_step as ts
    prob = ts.make_problem(model)
    if contender == "tf":
        def build_tf():
            step, _ = ts.tf_step(model, prob)
            step()
            return step
        return build_tf

    def build():
        g, initializer, fetches, feed = ts.actorflow_graph(model, prob)
        s = sess_of(g)
        s.run(initializer)

        def step():
            return float(s.run(fetches, feed)[1])
        step()
        return step
    return build


def _train(lib, sess_of, model, contender):
    return _first_and_steady(_train_builder(lib, sess_of, model, contender), 10 if model == "mlp" else 6)


def _library(contender):
    if contender == "tf":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow.compat.v1 as lib
        lib.disable_v2_behavior()
        return lib
    import actorflow as lib
    return lib


def serve(contender: str, models) -> None:
    """Keeps `contender`'s training steps of `models` built, and times them on request: a line
    'MODEL N' on stdin runs N steps and answers 'TIMES [seconds, ...]' (see `paired`)."""
    lib = _library(contender)
    sess_of = _session(lib, contender)
    steps = {m: _train_builder(lib, sess_of, m, contender)() for m in models}
    print("READY", flush=True)
    for line in sys.stdin:
        model, n = line.split()
        times = []
        for _ in range(int(n)):
            t0 = time.perf_counter()
            steps[model]()
            times.append(time.perf_counter() - t0)
        print("TIMES " + json.dumps(times), flush=True)


def worker(contender: str, only) -> None:
    lib = _library(contender)
    sess_of = _session(lib, contender)
    out = {}
    stats = None
    if contender != "tf":
        from actorflow.scheduler.jit.compile import compile_stats as stats
    for w in only:
        before = dict(stats) if stats is not None else None
        if w == "chain":
            out[w] = _chain(lib, sess_of)
        elif w == "while":
            out[w] = _while(lib, sess_of)
        elif w in ("lstm", "lstm_grad"):
            out[w] = _lstm(lib, sess_of, grad=w == "lstm_grad")
        elif w in RNN_SHAPES:
            out[w] = _rnn(lib, sess_of, embed=w == "rnn_embed", shape=w)
        else:
            out[w] = _train(lib, sess_of, w, contender)
        if stats is not None:
            out[w]["compile_cpu"] = stats["cpu_seconds"] - before["cpu_seconds"]
            out[w]["compiled"] = stats["compiled"] - before["compiled"]
            out[w]["tiered"] = stats["tiered"] - before["tiered"]
    print("RESULT " + json.dumps(out), flush=True)


# -- the driver -------------------------------------------------------------------------------------------
def _run_worker(contender, only, tf_python, cache_dir, env_extra=None):
    py = tf_python if contender == "tf" else sys.executable
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               AF_JIT_CACHE_DIR=cache_dir, TF_CPP_MIN_LOG_LEVEL="3", **(env_extra or {}))
    env.setdefault("TF_USE_LEGACY_KERAS", "1")      # TF's tf.compat.v1 RNN cells need Keras 2 (tf_keras)
    r = subprocess.run([py, os.path.abspath(__file__), "--worker", contender, "--only", ",".join(only)],
                       env=env, capture_output=True, text=True, timeout=3600)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{contender} worker failed (rc {r.returncode}):\n{r.stderr[-3000:]}")


def paired(contenders, models, tf_python, cache_dir, rounds, window):
    """The training steps timed side by side: one serving process per contender, all alive at once,
    taking turns at `window` steps each, `rounds` times (the order rotates). The machine's speed
    drifts over minutes on a shared host (the same step under the same scheduling took 15 ms in one
    minute and 20 ms in another), so figures from processes run one after another compare different
    minutes; turns of a fraction of a second compare the same one. Returns {model: {contender:
    [the best step of each turn, ...]}}."""
    procs = {}
    try:
        for c in contenders:
            # "af-on@AF_SPIN_US=0;VAR=value": contender af-on with those variables set (an A/B of a setting)
            base, _, spec = c.partition("@")
            py = tf_python if base == "tf" else sys.executable
            env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                       AF_JIT_CACHE_DIR=cache_dir, TF_CPP_MIN_LOG_LEVEL="3",
                       **dict(kv.split("=", 1) for kv in spec.split(";") if kv))
            procs[c] = subprocess.Popen([py, os.path.abspath(__file__), "--serve", base, "--only", ",".join(models)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True, env=env)
        for c, p in procs.items():
            for line in p.stdout:
                if line.startswith("READY"):
                    break
            else:
                raise RuntimeError(f"the {c} server exited with status {p.wait()}")
        out = {m: {c: [] for c in contenders} for m in models}
        for r in range(rounds):
            order = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
            for m in models:
                for c in order:
                    time.sleep(SETTLE)    # the last contender's idle threads stop spinning
                    p = procs[c]
                    p.stdin.write(f"{m} {window + 1}\n")
                    p.stdin.flush()
                    line = p.stdout.readline()
                    if not line.startswith("TIMES "):
                        raise RuntimeError(f"the {c} server exited with status {p.wait()}")
                    out[m][c].append(min(json.loads(line[6:])[1:]))   # the first step wakes its threads
        return out
    finally:
        for p in procs.values():
            if p.stdin:
                p.stdin.close()
        for p in procs.values():
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()


def _blas_line() -> str:
    """Which GEMM library actorflow uses here, and which kernels OpenBLAS runs: the MLP and convnet
    steps are GEMM-bound, and an environment that pins OpenBLAS to older kernels
    (OPENBLAS_CORETYPE=Haswell on an AVX-512 CPU) halves actorflow's GEMM rate while TensorFlow's
    oneDNN picks its own."""
    from actorflow.kernels.cpu import blas
    try:
        from threadpoolctl import threadpool_info
        arch = ", ".join(sorted({i.get("architecture") or "?" for i in threadpool_info()
                                 if i.get("internal_api") == "openblas"})) or "none loaded"
    except Exception:  # noqa: BLE001 - threadpoolctl missing: say so
        arch = "unknown"
    pin = os.environ.get("OPENBLAS_CORETYPE")
    return (f"actorflow GEMM: {blas.backend()}; OpenBLAS kernels: {arch} "
            f"(OPENBLAS_CORETYPE={pin!r} in the environment)" if pin else
            f"actorflow GEMM: {blas.backend()}; OpenBLAS kernels: {arch} (its own CPU detection)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tf-python", default=os.environ.get("AF_BENCH_TF_PYTHON", "/work/tfvenv/bin/python"))
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--paired-rounds", type=int, default=15,
                    help="turns of the training steps timed side by side (0: none)")
    ap.add_argument("--paired-window", type=int, default=5, help="steps per turn")
    ap.add_argument("--paired-extra", default="",
                    help="more side-by-side contenders, comma-separated, each a contender with environment "
                         "variables set: 'af-on@AF_SPIN_US=0' (an A/B of a setting, in the same turns)")
    ap.add_argument("--paired-only", action="store_true",
                    help="only the side-by-side training steps (no rounds of every workload)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    args = ap.parse_args()
    only = [w for w in args.only.split(",") if w]
    if args.worker:
        worker(args.worker, only)
        return
    if args.serve:
        serve(args.serve, only)
        return
    contenders = [c for c in CONTENDERS if c != "tf" or os.path.exists(args.tf_python)]
    print(_blas_line())
    # actorflow's modules byte-compiled once, as an installed package's (and TensorFlow's) are: with
    # PYTHONDONTWRITEBYTECODE set and no __pycache__, every worker's first step would compile 36-38
    # modules from source (0.08 s of CPU), which no second process of a normal install pays.
    compileall.compile_dir(os.path.join(ROOT, "actorflow"), quiet=1)
    cache = tempfile.mkdtemp(prefix="afjit_bench_")
    results: dict = {c: [] for c in contenders}
    paired_contenders = contenders + [c for c in args.paired_extra.split(",") if c]
    if args.paired_only:        # af-on and TF (and the extras): the contenders the targets compare
        paired_contenders = [c for c in paired_contenders if c not in ("af-off", "af-jit-only")]
        models = [w for w in only if w in ("mlp", "convnet")]
        try:
            _run_worker("af-on", models, args.tf_python, cache)        # the JIT cache filled first
            out = paired(paired_contenders, models, args.tf_python, cache, max(1, args.paired_rounds),
                         args.paired_window)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        report_paired(out)
        return
    try:
        for r in range(max(1, args.rounds)):
            order = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
            if r == 0:      # the JIT's first process sees an empty cache: "cold" compile times
                order = [c for c in order if c != "af-on"]
                order.insert(0, "af-on")
            for c in order:
                t0 = time.perf_counter()
                results[c].append(_run_worker(c, only, args.tf_python, cache))
                print(f"  round {r + 1}: {c} done in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        # compile on the compile thread, the first steps running the interpreted ops meanwhile
        fresh = tempfile.mkdtemp(prefix="afjit_bench_async_")
        try:
            extra = {"async": _run_worker("af-on", only, args.tf_python, fresh, {"AF_JIT_COMPILE": "async"})}
        finally:
            shutil.rmtree(fresh, ignore_errors=True)
        # AF_JIT=tiered: the same workloads, each cluster and loop compiled once it has run enough
        extra["tiered"] = _run_worker("af-tiered", only, args.tf_python, cache, {"AF_JIT": "tiered"})
        # no config at all: DEFAULT's small loops, tiered (a fresh JIT cache: its first compiles count)
        fresh = tempfile.mkdtemp(prefix="afjit_bench_default_")
        try:
            extra["default"] = _run_worker("af-default", only, args.tf_python, fresh)
        finally:
            shutil.rmtree(fresh, ignore_errors=True)
        models = [w for w in only if w in ("mlp", "convnet")]
        if models and args.paired_rounds > 0:
            print(f"  side by side: {args.paired_rounds} turns of {args.paired_window} steps", file=sys.stderr, flush=True)
            extra["paired"] = paired(paired_contenders, models, args.tf_python, cache, args.paired_rounds,
                                     args.paired_window)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    report(results, only, extra)


def report_paired(paired_out) -> None:
    print("\ntraining steps side by side (every contender's process alive, taking turns; ms: the median over"
          " turns of each turn's best step; ratios: the median of the same turn's ratios, [25%, 75%]):")
    for w, per in paired_out.items():
        line = f"{w:10s} " + " ".join(f"{c} {statistics.median(v) * 1e3:.2f}" for c, v in per.items())
        for base in ("tf", "af-on"):
            if base not in per:
                continue
            for c, v in per.items():
                if c != base and (base == "tf" or c.startswith(base + "@")):
                    q = np.quantile([a / b for a, b in zip(v, per[base])], [0.25, 0.5, 0.75])
                    line += f" | {c}/{base} {q[1]:.3f} [{q[0]:.3f}, {q[2]:.3f}]"
        if "tf" in per:
            line += f"  (target <= {TARGETS[w]} of tf)"
        print(line)


def _best(runs, w, key, skip_first=False):
    vals = [run[w][key] for run in (runs[1:] if skip_first else runs) if w in run]
    return min(vals) if vals else float("nan")


def report(results, only, results_extra=None) -> None:
    results_extra = results_extra or {}
    per = {"chain": (CHAIN, "us/op"), "while": (ITERS, "us/iter"), "lstm": (LSTM_STEPS, "us/step"),
           "lstm_grad": (LSTM_STEPS, "us/step"), "rnn": (RNN_STEPS, "us/step"), "rnn_embed": (RNN_STEPS, "us/step"),
           "rnn_wide": (RNN_SHAPES["rnn_wide"][1], "us/step"), "rnn_big": (RNN_SHAPES["rnn_big"][1], "us/step"),
           "rnn_dropout": (RNN_SHAPES["rnn_dropout"][1], "us/step"),
           "mlp": (1, "ms/step"), "convnet": (1, "ms/step")}
    targets = TARGETS
    has_tf = "tf" in results
    print(f"{'workload':10s} {'unit':8s} " + " ".join(f"{c:>12s}" for c in results)
          + ("   " + " ".join(f"{c + '/tf':>15s}" for c in results if c != "tf") + "  target" if has_tf else ""))
    for w in only:
        n, unit = per[w]
        scale = 1e6 / n if unit.startswith("us") else 1e3
        vals = {c: _best(runs, w, "steady") * scale for c, runs in results.items()}
        line = f"{w:10s} {unit:8s} " + " ".join(f"{vals[c]:12.3f}" for c in results)
        if has_tf:
            line += "   " + " ".join(f"{vals[c] / vals['tf']:15.2f}" for c in results if c != "tf")
            line += f"  <= {targets[w]}"
        print(line)
    if "chain" in only:
        print("\nscalar null step (one fed add), us: " + ", ".join(
            f"{c} {_best(runs, 'chain', 'null') * 1e6:.1f}" for c, runs in results.items()))
    print("\nfirst step - steady step, s (compile time per signature; af-on round 1 had an empty JIT cache):")
    print(f"{'workload':10s} " + " ".join(f"{c:>12s}" for c in results) + f" {'af-on cold':>12s} {'af-on warm':>12s}")
    for w in only:
        row = {c: _best(runs, w, "first") - _best(runs, w, "steady") for c, runs in results.items()}
        on = results.get("af-on", [])
        cold = on[0][w]["first"] - on[0][w]["steady"] if on else float("nan")
        warm = min((r[w]["first"] - r[w]["steady"] for r in on[1:]), default=float("nan"))
        print(f"{w:10s} " + " ".join(f"{row[c]:12.3f}" for c in results) + f" {cold:12.3f} {warm:12.3f}")
    if results.get("af-on"):
        on = results["af-on"]
        print("\naf-on, CPU seconds spent compiling (the machine is shared: wall time above includes waiting for"
              " a core): " + ", ".join(f"{w} cold {on[0][w].get('compile_cpu', 0):.2f} ({on[0][w].get('compiled', 0)} "
                                       f"kernels), warm {min(r[w].get('compile_cpu', 0) for r in on[1:]) if len(on) > 1 else float('nan'):.2f}"
                                       for w in only))
    if "paired" in results_extra:
        report_paired(results_extra["paired"])
    units = {"chain": (CHAIN, "us/op"), "while": (ITERS, "us/iter"), "lstm": (LSTM_STEPS, "us/step"),
             "lstm_grad": (LSTM_STEPS, "us/step"), "rnn": (RNN_STEPS, "us/step"), "rnn_embed": (RNN_STEPS, "us/step"),
             "rnn_wide": (RNN_SHAPES["rnn_wide"][1], "us/step"), "rnn_big": (RNN_SHAPES["rnn_big"][1], "us/step"),
           "rnn_dropout": (RNN_SHAPES["rnn_dropout"][1], "us/step"),
             "mlp": (1, "ms/step"), "convnet": (1, "ms/step")}
    scale = {w: (1e6 / units[w][0] if units[w][1].startswith("us") else 1e3) for w in only}
    for key, title in (("tiered", "af-tiered (AF_JIT=tiered, JIT cache warm)"),
                       ("default", "af-default (no config: DEFAULT's small loops tiered, JIT cache empty)")):
        if key not in results_extra:
            continue
        d = results_extra[key]
        line = f"{title}, steady " + ", ".join(f"{w} {d[w]['steady'] * scale[w]:.3f} {units[w][1]}" for w in only)
        if results.get("tf"):
            line += "; /tf: " + ", ".join(f"{w} {d[w]['steady'] / _best(results['tf'], w, 'steady'):.2f}" for w in only)
        print(line)
        print("  first step - steady step, s: " + ", ".join(
            f"{w} {d[w]['first'] - d[w]['steady']:.3f}" for w in only)
            + "; kernels tiered up: " + ", ".join(f"{w} {d[w].get('tiered', 0)}" for w in only))
    if "async" in results_extra:
        a = results_extra["async"]
        print("af-on with AF_JIT_COMPILE=async, empty cache, first step - steady step, s: " + ", ".join(
            f"{w} {a[w]['first'] - a[w]['steady']:.3f}" for w in only))


if __name__ == "__main__":
    main()
