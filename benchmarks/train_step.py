"""Training-step time (issue 3: training end to end). Prints, in one run, the median time of one SGD
training step (forward, backward, update; the loss fetched) of

(a) an MLP 784-1024-1024-10 (ReLU, softmax cross-entropy, batch 256, float32), and
(b) a LeNet-like convnet: 28x28x1 input, conv 5x5x32 SAME + ReLU, max-pool 2x2, conv 5x5x64 SAME
    + ReLU, max-pool 2x2, dense 1024 + ReLU, dense 10 (batch 64, float32),

for actorflow and, beside it, baselines of the same model from the same initial parameters:
- "actorflow, fusion off": the same session with the fusion pass off (no _FusedMatMul, no GEMM
  accumulating the SGD update into the variable): what fusion is worth.
- "numpy floor": a hand-written numpy forward/backward/update (the kernels-only floor: what is left
  with no graph, no runtime and no autodiff). The convnet floor is im2col + GEMM in plain numpy
  (sliding_window_view im2col, slice-add col2im, reshape pooling).
- "af kernels, no runtime" (convnet only): the same step calling actorflow's own CPU kernels
  (Conv2D, Conv2DBackpropInput/Filter, MaxPool, MaxPoolGrad through
  actorflow.kernels.registry.get_kernel) one after the other, with numpy for the rest: the floor of
  this implementation's kernels, so that actorflow / this is the cost of the runtime itself.
- PyTorch (when `import torch` works) and TensorFlow 1.x graph mode (tf.compat.v1.Session), in
  process when `import tensorflow` works, else in a subprocess of the interpreter named by
  --tf-python or $AF_BENCH_TF_PYTHON (a virtualenv holding tensorflow; install both with the
  `bench` extra).

Every contender uses 2 threads: torch.set_num_threads(2); TF intra_op = inter_op = 2; the numpy
floors run BLAS on 2 threads ("BLAS 1 thread" rows show the floor under actorflow's own setting:
its runtime limits BLAS to 1 thread and runs independent kernels on a 2-thread pool instead).
Steps are timed one by one, in rounds that interleave the contenders so that a change of machine
load hits all of them alike; the figure is the median. "(paired)" is the median over rounds of the
ratio of the two contenders' round medians (each ratio from steps a second apart). The loss of the
first step, from identical parameters and data, is printed as a check that every contender trains
the same model.

Targets (issue 3): MLP no slower than the numpy floor and at most 1.15x PyTorch; convnet at most
2.0x PyTorch.

Run: python benchmarks/train_step.py [--tf-python /path/to/venv/bin/python] [--model mlp|convnet]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

LEARNING_RATE = 0.01
MLP_BATCH, MLP_SIZES = 256, (784, 1024, 1024, 10)
CONV_BATCH = 64


# ---------------------------------------------------------------------------------------------
# Shared data and initial parameters (all contenders start from these)
# ---------------------------------------------------------------------------------------------

def _glorot(rng, shape, fan_in, fan_out):
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, shape).astype(np.float32)


def make_problem(model: str, seed: int = 0, batch: int | None = None) -> dict:
    """Inputs, labels and initial parameters (NHWC activations, HWIO filters, [in, out] kernels)."""
    rng = np.random.default_rng(seed)
    if model == "mlp":
        sizes = MLP_SIZES
        batch = batch or MLP_BATCH
        p = {"x": rng.standard_normal((batch, sizes[0]), dtype=np.float32),
             "y": rng.integers(0, sizes[-1], batch).astype(np.int64)}
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            p[f"w{i}"] = _glorot(rng, (a, b), a, b)
            p[f"b{i}"] = np.full(b, 0.01, np.float32)
        return p
    p = {"x": rng.random((CONV_BATCH, 28, 28, 1), dtype=np.float32),
         "y": rng.integers(0, 10, CONV_BATCH).astype(np.int64),
         "c0": _glorot(rng, (5, 5, 1, 32), 25, 25 * 32), "cb0": np.full(32, 0.01, np.float32),
         "c1": _glorot(rng, (5, 5, 32, 64), 25 * 32, 25 * 64), "cb1": np.full(64, 0.01, np.float32),
         "w0": _glorot(rng, (7 * 7 * 64, 1024), 7 * 7 * 64, 1024), "b0": np.full(1024, 0.01, np.float32),
         "w1": _glorot(rng, (1024, 10), 1024, 10), "b1": np.full(10, 0.01, np.float32)}
    return p


def _copy_params(p):
    return {k: np.array(v) for k, v in p.items()}


def _xent_and_grad(logits, y):
    """Mean sparse softmax cross-entropy and its gradient with respect to the logits."""
    n = logits.shape[0]
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    s = e.sum(axis=1, keepdims=True)
    rows = np.arange(n)
    loss = float(np.mean(np.log(s[:, 0]) - shifted[rows, y]))
    e /= s
    e[rows, y] -= 1.0
    e *= np.float32(1.0 / n)
    return loss, e


def _sgd(params, grads):
    lr = np.float32(LEARNING_RATE)
    for k, g in grads.items():
        g *= lr
        params[k] -= g


# ---------------------------------------------------------------------------------------------
# numpy floors
# ---------------------------------------------------------------------------------------------

def numpy_mlp(prob):
    """Hand-written forward/backward/SGD of the MLP. Returns step() -> loss."""
    p = _copy_params(prob)
    x, y = p.pop("x"), p.pop("y")
    n_layers = len(MLP_SIZES) - 1

    def step():
        acts = [x]
        h = x
        for i in range(n_layers):
            z = h @ p[f"w{i}"]
            z += p[f"b{i}"]
            if i < n_layers - 1:
                np.maximum(z, 0, out=z)
            acts.append(z)
            h = z
        loss, d = _xent_and_grad(h, y)
        grads = {}
        for i in reversed(range(n_layers)):
            grads[f"w{i}"] = acts[i].T @ d
            grads[f"b{i}"] = d.sum(axis=0)
            if i:
                d = d @ p[f"w{i}"].T
                d *= acts[i] > 0
        _sgd(p, grads)
        return loss
    return step


def numpy_mlp_gemms(prob):
    """Only the GEMMs of the MLP step (3 forward, 5 backward): the floor under the floor."""
    p = _copy_params(prob)
    x = p["x"]
    w = [p[f"w{i}"] for i in range(3)]

    def step():
        h1 = x @ w[0]
        h2 = h1 @ w[1]
        lg = h2 @ w[2]
        _ = h2.T @ lg
        d2 = lg @ w[2].T
        _ = h1.T @ d2
        d1 = d2 @ w[1].T
        _ = x.T @ d1
        return float("nan")
    return step


def _im2col_np(x, k, pad):
    """[N, H, W, C] -> [N*H*W, k*k*C] patches (SAME, stride 1), in HWIO filter order."""
    n, h, w, c = x.shape
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(1, 2))   # [N, H, W, C, k, k]
    return win.transpose(0, 1, 2, 4, 5, 3).reshape(n * h * w, k * k * c)


def _col2im_np(dcols, shape, k, pad):
    n, h, w, c = shape
    d = dcols.reshape(n, h, w, k, k, c)
    dxp = np.zeros((n, h + 2 * pad, w + 2 * pad, c), dcols.dtype)
    for a in range(k):
        for b in range(k):
            dxp[:, a:a + h, b:b + w] += d[:, :, :, a, b]
    return dxp[:, pad:pad + h, pad:pad + w]


def _pool_np(x):
    n, h, w, c = x.shape
    r = x.reshape(n, h // 2, 2, w // 2, 2, c)
    return r, r.max(axis=(2, 4))


def _pool_grad_np(r, out, g):
    # Ties (zeros after ReLU) all receive the gradient here, but their ReLU gradient is zero anyway.
    mask = r == out[:, :, None, :, None]
    return (mask * g[:, :, None, :, None]).reshape(r.shape[0], r.shape[1] * 2, r.shape[3] * 2, r.shape[5])


def _numpy_convnet(prob, conv, conv_grads, pool, pool_grad):
    p = _copy_params(prob)
    x, y = p.pop("x"), p.pop("y")

    def step():
        z0 = conv(x, p["c0"])
        z0 += p["cb0"]
        np.maximum(z0, 0, out=z0)
        s0 = pool(z0)
        z1 = conv(s0[-1], p["c1"])
        z1 += p["cb1"]
        np.maximum(z1, 0, out=z1)
        s1 = pool(z1)
        flat = s1[-1].reshape(x.shape[0], -1)
        h = flat @ p["w0"]
        h += p["b0"]
        np.maximum(h, 0, out=h)
        logits = h @ p["w1"]
        logits += p["b1"]
        loss, d = _xent_and_grad(logits, y)
        g = {"w1": h.T @ d, "b1": d.sum(axis=0)}
        dh = d @ p["w1"].T
        dh *= h > 0
        g["w0"], g["b0"] = flat.T @ dh, dh.sum(axis=0)
        dp1 = (dh @ p["w0"].T).reshape(s1[-1].shape)
        dz1 = pool_grad(z1, s1, dp1)
        dz1 *= z1 > 0
        g["cb1"] = dz1.sum(axis=(0, 1, 2))
        g["c1"], dp0 = conv_grads(s0[-1], p["c1"], dz1, True)
        dz0 = pool_grad(z0, s0, dp0)
        dz0 *= z0 > 0
        g["cb0"] = dz0.sum(axis=(0, 1, 2))
        g["c0"], _ = conv_grads(x, p["c0"], dz0, False)
        _sgd(p, g)
        return loss
    return step


def numpy_convnet(prob):
    """Hand-written im2col convnet step in plain numpy. Returns step() -> loss."""
    cache = {}

    def conv(x, f):
        k, ci, co = f.shape[0], f.shape[2], f.shape[3]
        cols = _im2col_np(x, k, k // 2)
        cache[id(f)] = cols                      # the backward pass reuses the forward's columns
        return (cols @ f.reshape(k * k * ci, co)).reshape(*x.shape[:3], co)

    def conv_grads(x, f, dz, need_dx):
        k, ci, co = f.shape[0], f.shape[2], f.shape[3]
        dz2 = dz.reshape(-1, co)
        df = (cache.pop(id(f)).T @ dz2).reshape(f.shape)
        dx = _col2im_np(dz2 @ f.reshape(k * k * ci, co).T, x.shape, k, k // 2) if need_dx else None
        return df, dx

    def pool(x):
        return _pool_np(x)

    def pool_grad(z, saved, g):
        return _pool_grad_np(saved[0], saved[1], g)
    return _numpy_convnet(prob, conv, conv_grads, pool, pool_grad)


def kernels_convnet(prob):
    """The convnet step calling actorflow's CPU kernels directly (no graph, no runtime, sequential)."""
    from actorflow.kernels.registry import get_kernel
    conv_attrs = {"strides": (1, 1, 1, 1), "padding": "SAME", "data_format": "NHWC", "dilations": (1, 1, 1, 1)}
    pool_attrs = {"ksize": (1, 2, 2, 1), "strides": (1, 2, 2, 1), "padding": "VALID", "data_format": "NHWC"}
    conv2d = get_kernel("Conv2D").factory(conv_attrs)
    bp_input = get_kernel("Conv2DBackpropInput").factory(conv_attrs)
    bp_filter = get_kernel("Conv2DBackpropFilter").factory(conv_attrs)
    max_pool = get_kernel("MaxPool").factory(pool_attrs)
    max_pool_grad = get_kernel("MaxPoolGrad").factory(pool_attrs)

    def conv_grads(x, f, dz, need_dx):
        df = bp_filter(x, np.array(f.shape, np.int32), dz)
        dx = bp_input(np.array(x.shape, np.int32), f, dz) if need_dx else None
        return df, dx

    def pool(x):
        return (max_pool(x),)

    def pool_grad(z, saved, g):
        return max_pool_grad(z, saved[0], g)
    return _numpy_convnet(prob, conv2d, conv_grads, pool, pool_grad)


# ---------------------------------------------------------------------------------------------
# actorflow
# ---------------------------------------------------------------------------------------------

def actorflow_graph(model, prob):
    """(graph, initializer, [train, loss], feed): the model built with af.layers, trained by
    GradientDescentOptimizer, from the weights and batch of `prob` (make_problem)."""
    import actorflow as af
    g = af.Graph()
    with g.as_default():
        def init(name):
            return af.constant_initializer(prob[name])
        if model == "mlp":
            x = af.placeholder(af.float32, [None, MLP_SIZES[0]], name="x")
            h = x
            n = len(MLP_SIZES) - 1
            for i in range(n):
                h = af.layers.dense(h, MLP_SIZES[i + 1], activation=af.nn.relu if i < n - 1 else None,
                                    kernel_initializer=init(f"w{i}"), bias_initializer=init(f"b{i}"))
            logits = h
        else:
            x = af.placeholder(af.float32, [None, 28, 28, 1], name="x")
            h = x
            for i, filters in enumerate((32, 64)):
                h = af.layers.conv2d(h, filters, 5, padding="same", activation=af.nn.relu,
                                     kernel_initializer=init(f"c{i}"), bias_initializer=init(f"cb{i}"))
                h = af.layers.max_pooling2d(h, 2, 2)
            h = af.layers.dense(af.layers.flatten(h), 1024, activation=af.nn.relu,
                                kernel_initializer=init("w0"), bias_initializer=init("b0"))
            logits = af.layers.dense(h, 10, kernel_initializer=init("w1"), bias_initializer=init("b1"))
        y = af.placeholder(af.int64, [None], name="y")
        loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        train = af.train.GradientDescentOptimizer(LEARNING_RATE).minimize(loss)
        initializer = af.global_variables_initializer()
    return g, initializer, [train, loss], {x: prob["x"], y: prob["y"]}


def sync_program(model: str, jit: bool):
    """`model`'s training step in a Session (global_jit_level ON_1 when `jit`, else OFF), run once:
    (session, fetches, feed, the SyncTrainProgram that ran it). Exits when the step did not take the
    synchronous training path (actors/sync_step.py)."""
    import actorflow as af
    from actorflow.actors.sync_step import SyncTrainProgram
    g, initializer, fetches, feed = actorflow_graph(model, make_problem(model))
    oo = af.OptimizerOptions(global_jit_level=af.OptimizerOptions.ON_1 if jit else af.OptimizerOptions.OFF)
    sess = af.Session(graph=g, config=af.ConfigProto(graph_options=af.GraphOptions(optimizer_options=oo)))
    sess.run(initializer)
    programs = []
    run = SyncTrainProgram.run

    def capture(self, *a):
        programs.append(self)
        return run(self, *a)
    SyncTrainProgram.run = capture
    try:
        sess.run(fetches, feed)
    finally:
        SyncTrainProgram.run = run
    if not programs:
        sys.exit("the step did not run on the synchronous training path (AF_SYNC_TRAIN=0?)")
    return sess, fetches, feed, programs[-1]


def actorflow_step(model, prob, fuse=True):
    """actorflow_graph's training step; step() -> loss. fuse=False turns the fusion pass off
    (RewriterConfig.remapping = OFF)."""
    import actorflow as af
    g, initializer, fetches, feed = actorflow_graph(model, prob)
    config = None if fuse else af.ConfigProto(graph_options=af.GraphOptions(
        rewrite_options=af.RewriterConfig(remapping=af.RewriterConfig.OFF)))
    sess = af.Session(graph=g, config=config)
    sess.run(initializer)

    def step():
        return float(sess.run(fetches, feed)[1])
    return step, sess.close


# ---------------------------------------------------------------------------------------------
# PyTorch
# ---------------------------------------------------------------------------------------------

def torch_step(model, prob, device="cpu"):
    """The PyTorch step on `device` ("cpu": 2 threads; "cuda": float32 without TF32)."""
    import torch
    if device == "cpu":
        torch.set_num_threads(2)
    else:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    nn = torch.nn
    if model == "mlp":
        layers = []
        n = len(MLP_SIZES) - 1
        for i in range(n):
            lin = nn.Linear(MLP_SIZES[i], MLP_SIZES[i + 1])
            with torch.no_grad():
                lin.weight.copy_(torch.from_numpy(prob[f"w{i}"].T))
                lin.bias.copy_(torch.from_numpy(prob[f"b{i}"]))
            layers += [lin, nn.ReLU()] if i < n - 1 else [lin]
        net = nn.Sequential(*layers).to(device)
        x = torch.from_numpy(prob["x"]).to(device)
    else:
        convs = []
        for i, (ci, co) in enumerate(((1, 32), (32, 64))):
            c = nn.Conv2d(ci, co, 5, padding=2)
            with torch.no_grad():
                c.weight.copy_(torch.from_numpy(prob[f"c{i}"].transpose(3, 2, 0, 1).copy()))   # HWIO -> OIHW
                c.bias.copy_(torch.from_numpy(prob[f"cb{i}"]))
            convs.append(c)
        fc0, fc1 = nn.Linear(3136, 1024), nn.Linear(1024, 10)
        with torch.no_grad():
            # NCHW flattens as (c, h, w); the shared kernel rows are in NHWC (h, w, c) order.
            w0 = prob["w0"].reshape(7, 7, 64, 1024).transpose(2, 0, 1, 3).reshape(3136, 1024)
            fc0.weight.copy_(torch.from_numpy(w0.T.copy()))
            fc0.bias.copy_(torch.from_numpy(prob["b0"]))
            fc1.weight.copy_(torch.from_numpy(prob["w1"].T.copy()))
            fc1.bias.copy_(torch.from_numpy(prob["b1"]))
        net = nn.Sequential(convs[0], nn.ReLU(), nn.MaxPool2d(2), convs[1], nn.ReLU(), nn.MaxPool2d(2),
                            nn.Flatten(), fc0, nn.ReLU(), fc1).to(device)
        x = torch.from_numpy(prob["x"].transpose(0, 3, 1, 2).copy()).to(device)
    y = torch.from_numpy(prob["y"]).to(device)
    opt = torch.optim.SGD(net.parameters(), lr=LEARNING_RATE)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return float(loss.item())
    return step


# ---------------------------------------------------------------------------------------------
# TensorFlow 1.x graph mode (in process, or in a worker process of another interpreter)
# ---------------------------------------------------------------------------------------------

def tf_step(model, prob):
    import tensorflow as tf
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    g = tf.Graph()
    with g.as_default():
        def var(name):
            return tf.Variable(prob[name], name=name)
        if model == "mlp":
            x = v1.placeholder(tf.float32, [None, MLP_SIZES[0]])
            h = x
            n = len(MLP_SIZES) - 1
            for i in range(n):
                h = tf.nn.bias_add(tf.matmul(h, var(f"w{i}")), var(f"b{i}"))
                if i < n - 1:
                    h = tf.nn.relu(h)
            logits = h
        else:
            x = v1.placeholder(tf.float32, [None, 28, 28, 1])
            h = x
            for i in range(2):
                h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(h, var(f"c{i}"), 1, "SAME"), var(f"cb{i}")))
                h = tf.nn.max_pool2d(h, 2, 2, "VALID")
            h = tf.reshape(h, [-1, 7 * 7 * 64])
            h = tf.nn.relu(tf.nn.bias_add(tf.matmul(h, var("w0")), var("b0")))
            logits = tf.nn.bias_add(tf.matmul(h, var("w1")), var("b1"))
        y = v1.placeholder(tf.int64, [None])
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        train = v1.train.GradientDescentOptimizer(LEARNING_RATE).minimize(loss)
        init = v1.global_variables_initializer()
    config = v1.ConfigProto(intra_op_parallelism_threads=2, inter_op_parallelism_threads=2)
    sess = v1.Session(graph=g, config=config)
    sess.run(init)
    feed = {x: prob["x"], y: prob["y"]}

    def step():
        return float(sess.run([train, loss], feed)[1])
    return step, sess.close


def tf_worker(problem_dir: str) -> None:
    """Serves TF timings over stdin/stdout: 'MODEL N' runs N timed steps and answers a JSON line."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    steps = {}
    for model in ("mlp", "convnet"):
        with np.load(os.path.join(problem_dir, f"{model}.npz")) as f:
            steps[model] = tf_step(model, {k: f[k] for k in f.files})[0]
    import tensorflow as tf
    print(json.dumps({"version": tf.__version__}), flush=True)
    for line in sys.stdin:
        model, n = line.split()
        print(json.dumps(_time_steps(steps[model], int(n))), flush=True)


class _RemoteTF:
    """A TF worker process running this file under another interpreter."""

    def __init__(self, python: str, problems: dict):
        self._dir = tempfile.TemporaryDirectory(prefix="af-bench-")
        for model, prob in problems.items():
            np.savez(os.path.join(self._dir.name, f"{model}.npz"), **prob)
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
        self.proc = subprocess.Popen([python, os.path.abspath(__file__), "--tf-worker", self._dir.name],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        hello = self.proc.stdout.readline()
        if not hello:
            self.close()
            raise RuntimeError(f"the TensorFlow worker ({python}) exited with status {self.proc.wait()}")
        self.version = json.loads(hello)["version"]

    def stepper(self, model):
        def run(n):
            self.proc.stdin.write(f"{model} {n}\n")
            self.proc.stdin.flush()
            return json.loads(self.proc.stdout.readline())
        return run

    def close(self):
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self._dir.cleanup()


# ---------------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------------

def _time_steps(step, n):
    """{"times": per-step seconds of n steps, "loss": the first step's loss}."""
    times, first = [], None
    for _ in range(n):
        t0 = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t0)
        first = loss if first is None else first
    return {"times": times, "loss": first}


@contextlib.contextmanager
def _blas_threads(n):
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=n, user_api="blas"):
        yield


class Contender:
    """One row of the table: a name and a function running n timed steps."""

    def __init__(self, name, run, blas=None, close=None):
        self.name, self.run, self.blas, self.close = name, run, blas, close
        self.times: list = []
        self.rounds: list = []      # the median of each interleaved round
        self.loss = None

    def measure(self, n, settle=0.0):
        # The previous contender's idle threads (OpenBLAS, OpenMP, Eigen) spin-wait for a while
        # after their last task; on 2 cores that steals a core from this one. Let them fall asleep,
        # and drop the first step, which pays for waking this contender's own threads.
        time.sleep(settle)
        ctx = _blas_threads(self.blas) if self.blas else contextlib.nullcontext()
        with ctx:
            r = self.run(n + 1)
        if self.loss is None:
            self.loss = r["loss"]
        self.times += r["times"][1:]
        self.rounds.append(statistics.median(r["times"][1:]))

    @property
    def median_ms(self):
        return statistics.median(self.times) * 1e3

    @property
    def best_ms(self):
        return min(self.times) * 1e3


def local(step):
    return lambda n: _time_steps(step, n)


def bench_model(model, prob, args, remote_tf):
    contenders = []
    af_step, af_close = actorflow_step(model, prob)
    contenders.append(Contender("actorflow", local(af_step), close=af_close))
    unfused_step, unfused_close = actorflow_step(model, prob, fuse=False)
    contenders.append(Contender("actorflow, fusion off", local(unfused_step), close=unfused_close))
    floor = numpy_mlp if model == "mlp" else numpy_convnet
    contenders.append(Contender("numpy floor", local(floor(prob)), blas=2))
    contenders.append(Contender("numpy floor (BLAS 1 thread)", local(floor(prob)), blas=1))
    if model == "mlp":
        contenders.append(Contender("numpy GEMMs only", local(numpy_mlp_gemms(prob)), blas=2))
    else:
        contenders.append(Contender("af kernels, no runtime", local(kernels_convnet(prob)), blas=2))
    if not args.no_torch:
        try:
            import torch
            contenders.append(Contender(f"PyTorch {torch.__version__}", local(torch_step(model, prob))))
        except ImportError:
            print("(PyTorch not installed: skipped)")
    if remote_tf is not None:
        contenders.append(Contender(f"TensorFlow {remote_tf[0]} (v1 Session)", remote_tf[1](model)))

    # Warm-up (plan preparation, numba compilation, allocator and BLAS buffers), then interleaved rounds.
    for c in contenders:
        c.measure(args.warmup)
        c.times.clear()
        c.rounds.clear()
    per_round = max(1, -(-args.steps // args.rounds))
    for _ in range(args.rounds):
        for c in contenders:
            c.measure(per_round, settle=args.settle)
    for c in contenders:
        if c.close:
            c.close()
    return contenders


def _paired(a, b):
    """The median over interleaved rounds of a's round median / b's: load that changes between
    rounds cancels out of each ratio."""
    return statistics.median(x / y for x, y in zip(a.rounds, b.rounds))


def report(model, contenders):
    title = {"mlp": f"MLP 784-1024-1024-10, batch {MLP_BATCH}",
             "convnet": f"LeNet-like convnet, 28x28x1, batch {CONV_BATCH}"}[model]
    af_ms = contenders[0].median_ms
    print(f"\n{title}: median ms per training step over {len(contenders[0].times)} steps")
    print(f"  {'':34} {'ms/step':>9} {'actorflow/this':>15} {'(paired)':>9} {'(best)':>8} {'best ms':>9} "
          f"{'first loss':>11}")
    for c in contenders:
        ratio = "" if c is contenders[0] else f"{af_ms / c.median_ms:.2f}x"
        paired = "" if c is contenders[0] else f"{_paired(contenders[0], c):.2f}x"
        best_ratio = "" if c is contenders[0] else f"{contenders[0].best_ms / c.best_ms:.2f}x"
        loss = "" if c.loss is None or c.loss != c.loss else f"{c.loss:.5f}"
        print(f"  {c.name:34} {c.median_ms:9.2f} {ratio:>15} {paired:>9} {best_ratio:>8} {c.best_ms:9.2f} {loss:>11}")
    by = {c.name: c for c in contenders}
    torch_c = next((c for c in contenders if c.name.startswith("PyTorch")), None)
    tf_c = next((c for c in contenders if c.name.startswith("TensorFlow")), None)
    verdict = []
    if model == "mlp":
        r = af_ms / by["numpy floor"].median_ms
        verdict.append(f"vs numpy floor {r:.2f}x (target <= 1.00x: {'met' if r <= 1.0 else 'MISSED'})")
        if torch_c:
            r = af_ms / torch_c.median_ms
            verdict.append(f"vs PyTorch {r:.2f}x (target <= 1.15x: {'met' if r <= 1.15 else 'MISSED'})")
    elif torch_c:
        r = af_ms / torch_c.median_ms
        verdict.append(f"vs PyTorch {r:.2f}x (target <= 2.00x: {'met' if r <= 2.0 else 'MISSED'})")
    if tf_c:
        verdict.append(f"vs TensorFlow {af_ms / tf_c.median_ms:.2f}x")
    print("  actorflow " + "; ".join(verdict))


def main(argv=None):
    p = argparse.ArgumentParser(description="Training-step time of actorflow beside numpy, PyTorch and TensorFlow.")
    p.add_argument("--model", choices=("mlp", "convnet", "both"), default="both")
    p.add_argument("--steps", type=int, default=30, help="timed steps per contender (default 30)")
    p.add_argument("--rounds", type=int, default=6, help="interleaved rounds the timed steps are split into")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--settle", type=float, default=0.3, help="seconds of idle between contenders")
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--no-tf", action="store_true")
    p.add_argument("--tf-python", default=os.environ.get("AF_BENCH_TF_PYTHON"),
                   help="an interpreter with tensorflow, when this one has none ($AF_BENCH_TF_PYTHON)")
    p.add_argument("--tf-worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.tf_worker:
        return tf_worker(args.tf_worker)

    models = ("mlp", "convnet") if args.model == "both" else (args.model,)
    problems = {m: make_problem(m) for m in ("mlp", "convnet")}
    remote = None
    tf_info = None
    if not args.no_tf:
        try:
            import tensorflow as tf  # noqa: F401
            tf_info = (tf.__version__, lambda m: local(tf_step(m, problems[m])[0]))
        except ImportError:
            if args.tf_python:
                remote = _RemoteTF(args.tf_python, problems)
                tf_info = (remote.version, remote.stepper)
            else:
                print("(TensorFlow not importable and no --tf-python given: skipped)")
    print(f"training-step time, SGD lr {LEARNING_RATE}, float32, 2 threads per framework; {os.cpu_count()} CPUs")
    from actorflow.kernels.cpu.blas import backend
    print(f"actorflow GEMM backend: {backend()} (numpy floors: numpy's own BLAS; `pip install actorflow[mkl]` "
          f"for MKL, AF_BLAS=numpy to compare)")
    _check_load("before the run")
    try:
        for m in models:
            report(m, bench_model(m, problems[m], args, tf_info))
    finally:
        if remote is not None:
            remote.close()
    _check_load("after the run (includes this benchmark)")


def _check_load(when):
    """Warns when other processes keep the CPUs busy: on a loaded machine, contenders whose threads
    meet at barriers (2-thread BLAS, OpenMP) slow down far more than single-threaded kernels, and
    the ratios say more about the load than about the frameworks."""
    if not hasattr(os, "getloadavg"):
        return
    load = os.getloadavg()[0]
    note = "  WARNING: the machine is busy; timings and ratios are unreliable" if load > 0.5 * (os.cpu_count() or 1) else ""
    print(f"load average {when}: {load:.2f}{note}")


if __name__ == "__main__":
    main()
