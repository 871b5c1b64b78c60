"""The resize ops and their gradients (af.image) against TensorFlow 2.21's tf.compat.v1, one session step
each, fed placeholders (the images, and the gradients' incoming gradient), so that neither library
folds the work away. Two shapes: a small-channel image
batch (32x64x64x3 -> 128x128, an input pipeline's upscale) and a channel-heavy feature map
(8x32x32x128 -> 64x64, a segmentation net's upsampling layer).

Each library runs in its own subprocess, in alternating rounds (af, tf, af, tf, ...) so that load from
other processes hits both alike; each figure is the minimum over rounds of the minimum over repeats.
Prints ms per step and af / tf.

Run: python benchmarks/image_resize.py [--tf-python /work/tfvenv/bin/python] [--rounds 3]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r'''
import json, sys, time
import numpy as np
lib = sys.argv[1]
if lib == "af":
    import actorflow as tf
else:
    import tensorflow.compat.v1 as tf
    tf.disable_v2_behavior()
res = {}
for shape, size in (((32, 64, 64, 3), [128, 128]), ((8, 32, 32, 128), [64, 64])):
    x0 = np.random.default_rng(0).uniform(0, 1, shape).astype(np.float32)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, shape)
        cases = {}
        for name, f in (("bilinear", tf.image.resize_bilinear), ("nearest", tf.image.resize_nearest_neighbor),
                        ("bicubic", tf.image.resize_bicubic), ("area", tf.image.resize_area)):
            y = f(x, size)
            cases[name] = y
            if name != "area":
                gy = tf.placeholder(tf.float32, y.shape)   # fed: a constant gradient would be folded away
                cases[name + " grad"] = (tf.gradients(y, x, grad_ys=gy)[0], gy)
        with tf.Session() as s:
            for name, t in cases.items():
                feed = {x: x0}
                if isinstance(t, tuple):
                    t, gy = t
                    feed[gy] = np.ones(gy.shape.as_list(), np.float32)
                s.run(t, feed)
                best = 1e9
                for _ in range(7):
                    t0 = time.perf_counter()
                    s.run(t, feed)
                    best = min(best, time.perf_counter() - t0)
                res[f"{'x'.join(map(str, shape))} {name}"] = best * 1e3
print(json.dumps(res))
'''


def _run(python, lib):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([python, "-c", CHILD, lib], capture_output=True, text=True, env=env, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tf-python", default="/work/tfvenv/bin/python")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    best = {"af": {}, "tf": {}}
    for _ in range(args.rounds):
        for lib, py in (("af", sys.executable), ("tf", args.tf_python)):
            for k, v in _run(py, lib).items():
                best[lib][k] = min(v, best[lib].get(k, v))
    print(f"{'case':40s} {'af ms':>8s} {'tf ms':>8s} {'af/tf':>6s}")
    for k in best["af"]:
        a, t = best["af"][k], best["tf"].get(k)
        print(f"{k:40s} {a:8.2f} {t:8.2f} {a / t:6.2f}" if t else f"{k:40s} {a:8.2f}")


if __name__ == "__main__":
    main()
