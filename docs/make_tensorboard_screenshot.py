"""Makes docs/tensorboard_scalars.png: TensorBoard's scalars page on a short actorflow training run.

A softmax regression on scikit-learn's digits trains under MonitoredTrainingSession, which writes
its summaries (loss, accuracy, weight histograms, global_step/sec) to a temporary directory; a
TensorBoard process serves it on loopback and headless Chromium takes the screenshot.

    PYTHONPATH=$PWD python docs/make_tensorboard_screenshot.py   # needs tensorboard and chromium
    PYTHONPATH=$PWD python docs/make_tensorboard_screenshot.py graphs /tmp/graphs.png   # another page
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np
from sklearn.datasets import load_digits

import actorflow as af

HERE = os.path.dirname(os.path.abspath(__file__))


def train(logdir: str, steps: int = 300) -> None:
    digits = load_digits()
    xs = (digits.data / 16.0).astype(np.float32)
    ys = digits.target.astype(np.int64)
    x = af.placeholder(af.float32, [None, 64], name="x")
    y = af.placeholder(af.int64, [None], name="y")
    with af.name_scope("model"):
        w = af.Variable(af.zeros([64, 10]), name="weights")
        b = af.Variable(af.zeros([10]), name="bias")
        logits = af.matmul(x, w) + b
    loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    acc = af.reduce_mean(af.cast(af.equal(af.argmax(logits, 1), y), af.float32))
    af.summary.scalar("loss", loss, family="train")
    af.summary.scalar("accuracy", acc, family="train")
    af.summary.histogram("weights", w)
    gs = af.train.get_or_create_global_step()
    opt = af.train.GradientDescentOptimizer(0.5).minimize(loss, global_step=gs)
    rng = np.random.default_rng(0)
    with af.train.MonitoredTrainingSession(summary_dir=logdir, save_summaries_steps=5, log_step_count_steps=50,
                                           hooks=[af.train.StopAtStepHook(last_step=steps)]) as sess:
        while not sess.should_stop():
            idx = rng.integers(0, len(xs), 64)
            sess.run(opt, {x: xs[idx], y: ys[idx]})
    af.summary.FileWriterCache.clear()


def main(page: str = "scalars", png: str = os.path.join(HERE, "tensorboard_scalars.png")) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("chromium not found (apt-get install chromium)")
    tmp = tempfile.mkdtemp()
    logdir = os.path.join(tmp, "digits")
    train(logdir)
    out = open(os.path.join(tmp, "tb.log"), "w")
    tb = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", tmp, "--port", "0",
                           "--host", "127.0.0.1", "--load_fast", "false"], stdout=out, stderr=subprocess.STDOUT,
                          start_new_session=True)
    try:
        port = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            m = re.search(r"http://127\.0\.0\.1:(\d+)/", open(out.name).read())
            if m:
                port = int(m.group(1))
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/runs", timeout=5) as r:
                        if b"digits" in r.read():
                            break
                except OSError:
                    pass
            time.sleep(0.5)
        else:
            sys.exit("TensorBoard did not come up:\n" + open(out.name).read())
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--screenshot={png}", "--window-size=1400,900", "--virtual-time-budget=20000",
                        f"http://127.0.0.1:{port}/#{page}"], check=True, timeout=180,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print("wrote", png)
    finally:
        os.killpg(tb.pid, signal.SIGTERM)
        tb.wait(timeout=30)
        out.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
