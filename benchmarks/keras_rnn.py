"""A Keras sequence model's training step (hunkim's klab-12-5 seq2seq: LSTM 32 -> RepeatVector ->
LSTM 32 (sequences) -> TimeDistributed(Dense 20) -> softmax, 7 steps, batch 32, Adam), actorflow
(DEFAULT, and global_jit_level ON_1) against TensorFlow 2.21's graph-mode tf_keras, each contender
in its own process, in turns; ms a step (the best of each turn's epochs) and the ratios to TF.

The Keras LSTM's loops run over a batch of unknown size: actorflow compiles them (symbolic shapes,
the gate weights split before the loop, the input's gradient one row an iteration) at DEFAULT
once they have cost 0.2 s, and at ON_1 before the first step.

Run: python benchmarks/keras_rnn.py [--rounds 5] [--tf-python /work/tfvenv/bin/python]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORKER = r'''
import json, os, sys, time
import numpy as np
lib = sys.argv[1]
if lib == "tf":
    import tensorflow.compat.v1 as tf
    tf.disable_v2_behavior()
    import tf_keras as keras
    opt = keras.optimizers.legacy.Adam()
    sess = None
else:
    import actorflow as tf
    from actorflow import keras
    opt = "adam"
    level = {"af-default": tf.OptimizerOptions.DEFAULT, "af-on": tf.OptimizerOptions.ON_1}[lib]
    cfg = tf.ConfigProto(graph_options=tf.GraphOptions(optimizer_options=tf.OptimizerOptions(global_jit_level=level)))
    keras.backend.set_session(tf.Session(config=cfg))
L = keras.layers
rng = np.random.RandomState(0)
X = np.eye(20, dtype=np.float32)[rng.randint(0, 20, (1024, 7))]
Y = np.eye(20, dtype=np.float32)[rng.randint(0, 20, (1024, 7))]
model = keras.Sequential([L.LSTM(32, input_shape=(7, 20)), L.RepeatVector(7), L.LSTM(32, return_sequences=True),
                          L.TimeDistributed(L.Dense(20)), L.Activation("softmax")])
model.compile(loss="categorical_crossentropy", optimizer=opt, metrics=["accuracy"])
model.fit(X, Y, epochs=2, batch_size=32, verbose=0)        # warm-up (and, at DEFAULT, the tiered compile)
best = float("inf")
for _ in range(3):
    t = time.perf_counter()
    model.fit(X, Y, epochs=1, batch_size=32, verbose=0)
    best = min(best, (time.perf_counter() - t) / 32)
print(json.dumps({"ms": best * 1e3}))
'''


def run(lib, tf_python):
    py = tf_python if lib == "tf" else sys.executable
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_USE_LEGACY_KERAS="1",
               PYTHONPATH=os.pathsep.join([ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    r = subprocess.run([py, "-c", WORKER, lib], capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        raise SystemExit(f"{lib} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])["ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tf-python", default="/work/tfvenv/bin/python")
    args = ap.parse_args()
    libs = ["af-default", "af-on"] + (["tf"] if os.path.exists(args.tf_python) else [])
    res = {lib: [] for lib in libs}
    for k in range(args.rounds):
        for lib in libs:
            res[lib].append(run(lib, args.tf_python))
        print(f"  round {k + 1}: " + ", ".join(f"{lib} {res[lib][-1]:.2f} ms" for lib in libs), flush=True)
    print("Keras LSTM seq2seq training step (batch 32), ms/step, median over rounds:")
    for lib in libs:
        line = f"  {lib:11s} {statistics.median(res[lib]):7.2f}"
        if "tf" in res and lib != "tf":
            ratios = [a / b for a, b in zip(res[lib], res["tf"])]
            line += f"   /tf {statistics.median(ratios):.2f}"
        print(line)


if __name__ == "__main__":
    main()
