"""Input pipeline overhead (issue 16, item 4): the digits MLP's training step fed by af.data
against the same step fed numpy batches through feed_dict.

Contenders, each in its own process (this script starts itself twice with --contender):
- "numpy feed_dict": batches of 32 from a per-epoch permutation of the training set, precomputed
  as numpy arrays, fed to placeholders: the step alone, the baseline.
- "af.data pipeline": `Dataset.from_tensor_slices((x, y)).shuffle(len).batch(32).repeat()
  .prefetch(2)` with `make_initializable_iterator`; the model reads `get_next()` directly.

The model is examples/digits_mlp.py's (64-256-128-10 ReLU, Adam, sparse softmax cross-entropy);
each step runs the training op and fetches the loss. Both processes warm up, then time rounds of
steps in turn (never at once), so that a change of machine load hits both alike; the figures are
the median ms per step over rounds and the median of the per-round ratios. Target: the pipeline
within 10% of the numpy-fed step (ratio <= 1.10).

Run: nice -n 10 python benchmarks/data_pipeline.py [--steps 300] [--rounds 15]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

BATCH = 32


def _data():
    from sklearn.datasets import load_digits
    d = load_digits()
    x = d.data.astype(np.float32)
    x = (x - x.mean(axis=0)) / (x.std(axis=0) + 1.0)
    return x, d.target.astype(np.int64)


def _model(af, x, y):
    h = x
    for i, units in enumerate((256, 128)):
        h = af.layers.dense(h, units, activation=af.nn.relu, name=f"hidden{i}")
    logits = af.layers.dense(h, 10, name="logits")
    loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    return loss, af.train.AdamOptimizer(1e-3).minimize(loss)


def contender(name, steps):
    """Runs in a child process: builds the contender, warms it up, then times one round of `steps`
    steps each time the parent writes a line, answering with ms per step."""
    import actorflow as af
    x_all, y_all = _data()
    af.set_random_seed(0)
    if name == "pipeline":
        ds = (af.data.Dataset.from_tensor_slices((x_all, y_all)).shuffle(len(x_all), seed=0)
              .batch(BATCH).repeat().prefetch(2))
        it = ds.make_initializable_iterator()
        xb, yb = it.get_next()
        loss, train = _model(af, xb, yb)
        sess = af.Session()
        sess.run([af.global_variables_initializer(), it.initializer])

        def step(i):
            return sess.run([train, loss])
    else:
        xp = af.placeholder(af.float32, [None, 64])
        yp = af.placeholder(af.int64, [None])
        loss, train = _model(af, xp, yp)
        sess = af.Session()
        sess.run(af.global_variables_initializer())
        rng = np.random.default_rng(0)
        batches = []
        while len(batches) < steps + 100:
            order = rng.permutation(len(x_all))
            batches += [(x_all[order[s:s + BATCH]], y_all[order[s:s + BATCH]]) for s in range(0, len(order), BATCH)]

        def step(i):
            bx, by = batches[i % len(batches)]
            return sess.run([train, loss], {xp: bx, yp: by})
    for i in range(100):                     # warm-up: kernels compiled, caches filled
        step(i)
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() != "round":
            break
        t0 = time.perf_counter()
        for i in range(steps):
            step(i)
        print(json.dumps({"ms": (time.perf_counter() - t0) / steps * 1e3}), flush=True)
    sess.close()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300, help="steps per round")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--contender", choices=["numpy", "pipeline"], help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.contender:
        contender(a.contender, a.steps)
        return None
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                         env.get("PYTHONPATH", "")])
    procs = {}
    for name in ("numpy", "pipeline"):
        procs[name] = subprocess.Popen([sys.executable, __file__, "--contender", name, "--steps", str(a.steps)],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        for name, proc in procs.items():
            if proc.stdout.readline().strip() != "ready":
                sys.exit(f"{name} failed to start")
        results = {"numpy": [], "pipeline": []}
        for _ in range(a.rounds):
            for name, proc in procs.items():      # alternate: a change of load hits both alike
                proc.stdin.write("round\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
                if not line:
                    sys.exit(f"{name} died")
                results[name].append(json.loads(line)["ms"])
    finally:
        for proc in procs.values():
            try:
                proc.stdin.close()
            except OSError:
                pass
            proc.wait(timeout=60)
    np_ms = statistics.median(results["numpy"])
    pl_ms = statistics.median(results["pipeline"])
    paired = statistics.median(p / n for p, n in zip(results["pipeline"], results["numpy"]))
    print(f"digits MLP training step, batch {BATCH}: {a.rounds} alternating rounds of {a.steps} steps per contender")
    print(f"  numpy feed_dict : {np_ms:.3f} ms/step (median over rounds)")
    print(f"  af.data pipeline: {pl_ms:.3f} ms/step")
    print(f"  ratio pipeline / numpy: {pl_ms / np_ms:.3f}; paired (median of per-round ratios): {paired:.3f}  "
          f"(target <= 1.10: {'met' if paired <= 1.10 else 'NOT met'})")
    return paired


if __name__ == "__main__":
    main()
