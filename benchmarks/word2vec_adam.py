"""A word2vec training step with Adam (ageron/handson-ml chapter 14's skip-gram: a 50,000 x 150
embedding, tf.nn.nce_loss with 64 sampled classes, batch 128), actorflow against TensorFlow 2.21
(tf.compat.v1), each in its own process, alternating rounds.

The gradients of both big variables are IndexedSlices, and TF 1.x's Adam applies them through its
composite sparse path: each step decays both slots densely (m = m * beta1 and v = v * beta2,
assigned), scatter-adds the rows, and updates the whole variable (sqrt, add, div, mul,
assign_sub): some twenty passes over 30 MB arrays a step, which is what this measures.

    python benchmarks/word2vec_adam.py [--tf-python /work/tfvenv/bin/python] [--steps 100] [--rounds 3]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np


def worker(lib: str, steps: int, optimizer: str) -> None:
    if lib == "tf":
        import tensorflow.compat.v1 as tf
        tf.disable_v2_behavior()
    else:
        import actorflow as tf
    tf.set_random_seed(42)
    vocab, dim, batch, sampled = 50000, 150, 128, 64
    labels = tf.placeholder(tf.int32, shape=[batch, 1])
    inputs = tf.placeholder(tf.int32, shape=[None])
    embeddings = tf.Variable(tf.random_uniform([vocab, dim], -1.0, 1.0))
    nce_w = tf.Variable(tf.truncated_normal([vocab, dim], stddev=1.0 / np.sqrt(dim)))
    nce_b = tf.Variable(tf.zeros([vocab]))
    embed = tf.nn.embedding_lookup(embeddings, inputs)
    loss = tf.reduce_mean(tf.nn.nce_loss(nce_w, nce_b, labels, embed, sampled, vocab))
    opt = tf.train.AdamOptimizer(0.01) if optimizer == "adam" else tf.train.GradientDescentOptimizer(1.0)
    train = opt.minimize(loss)
    rng = np.random.RandomState(0)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())

        def step():
            sess.run([train, loss], {inputs: rng.randint(0, vocab, batch), labels: rng.randint(0, vocab, (batch, 1))})
        for _ in range(10):
            step()
        print("ready", flush=True)
        for line in sys.stdin:
            if line.strip() != "go":
                break
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(steps):
                step()
            print(json.dumps({"ms": (time.perf_counter() - t0) / steps * 1e3,
                              "cpu_ms": (time.process_time() - c0) / steps * 1e3}), flush=True)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--role", choices=["main", "af", "tf"], default="main", help=argparse.SUPPRESS)
    p.add_argument("--tf-python", dest="tf_python")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    a = p.parse_args(argv)
    if a.role != "main":
        worker(a.role, a.steps, a.optimizer)
        return
    contenders = [("actorflow", sys.executable, "af")] + ([("TF 2.21", a.tf_python, "tf")] if a.tf_python else [])
    procs = {}
    for name, py, role in contenders:
        procs[name] = subprocess.Popen([py, __file__, "--role", role, "--steps", str(a.steps), "--optimizer",
                                        a.optimizer], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        while procs[name].stdout.readline().strip() != "ready":
            if procs[name].poll() is not None:
                raise SystemExit(f"{name} failed to start")
    res = {name: [] for name in procs}
    for _ in range(a.rounds):
        for name, proc in procs.items():
            proc.stdin.write("go\n")
            proc.stdin.flush()
            res[name].append(json.loads(proc.stdout.readline()))
    for proc in procs.values():
        proc.stdin.close()
        proc.wait(60)
    print(f"# word2vec step ({a.optimizer}), {a.steps} steps per round, median of {a.rounds} rounds")
    med = {}
    for name, rs in res.items():
        med[name] = statistics.median(r["ms"] for r in rs)
        cpu = statistics.median(r["cpu_ms"] for r in rs)
        print(f"{name:10s} {med[name]:8.2f} ms/step   CPU {cpu:8.2f} ms/step")
    if "TF 2.21" in med:
        print(f"actorflow / TF: {med['actorflow'] / med['TF 2.21']:.2f}")


if __name__ == "__main__":
    main()
