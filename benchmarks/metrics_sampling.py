"""What the dashboard's sampled traces cost (issue 19): the top-ops figures come from one step in
ACTORFLOW_METRICS_TRACE_EVERY (default 100) that each task traces at SOFTWARE_TRACE for /metrics.

Prints, in one run, the median time of a distributed training step (an MLP 784-512-512-10, batch
128, SGD; the variables on a ps task, the model on a worker task, the loss fetched) on four local
clusters started side by side, alike but for the sampling: off (0), the default (every 100th step)
and ten times the default (every 10th). Steps are timed in rounds that alternate the clusters, so
that a change of machine load hits them alike; a ratio is the median over rounds of the ratio of
the two clusters' round medians. A dashboard polls each cluster's tasks twice a second throughout,
as it would in use (its scrapes are part of what is measured).

Target: the default within noise of off (no further from 1 than the second "off" cluster) (a traced step costs a few percent, one step in 100 of that).

Run: nice -n 10 python benchmarks/metrics_sampling.py [--rounds 15] [--steps 20]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import actorflow as af
from actorflow.cluster.local import free_port
from actorflow.dashboard import Dashboard


def build(cluster):
    g = af.Graph()
    with g.as_default():
        rng = np.random.default_rng(0)
        with af.device("/job:ps/task:0"):
            ws = [af.Variable(rng.normal(0, 0.05, s).astype(np.float32)) for s in ((784, 512), (512, 512), (512, 10))]
        with af.device("/job:worker/task:0"):
            x = af.constant(rng.normal(size=(128, 784)).astype(np.float32))
            y = af.constant(np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)])
            h = af.nn.relu(af.matmul(x, ws[0]))
            h = af.nn.relu(af.matmul(h, ws[1]))
            loss = af.reduce_mean(af.nn.softmax_cross_entropy_with_logits(labels=y, logits=af.matmul(h, ws[2])))
            train = af.train.GradientDescentOptimizer(0.01).minimize(loss)
        sess = af.Session(cluster.target, graph=g)
        sess.run(af.global_variables_initializer())
    return sess, train, loss


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=20, help="steps per cluster per round")
    args = ap.parse_args(argv)
    # Two clusters with sampling off: their ratio is the noise floor of a comparison between clusters.
    modes = {"off (0)": "0", "off, 2nd cluster": "0", "default (100)": "100", "every step (1)": "1"}
    clusters, runs, dashes = {}, {}, []
    try:
        for name, every in modes.items():
            c = clusters[name] = af.cluster.LocalCluster(ps=1, workers=1,
                                                         env={"ACTORFLOW_METRICS_TRACE_EVERY": every}).start()
            dashes.append(Dashboard(c.spec, c.token, port=free_port(), interval=0.5).start())
            runs[name] = build(c)
        for sess, train, loss in runs.values():      # warm up: registration, kernel compilation
            for _ in range(10):
                sess.run([train, loss])
        times = {name: [] for name in modes}
        order = list(runs)
        for r in range(args.rounds):
            for name in order[r % len(order):] + order[:r % len(order)]:     # each cluster leads in turn
                sess, train, loss = runs[name]
                ts = []
                for _ in range(args.steps):
                    t0 = time.perf_counter()
                    sess.run([train, loss])
                    ts.append(time.perf_counter() - t0)
                times[name].append(statistics.median(ts))
        base = times["off (0)"]
        print(f"distributed MLP step, {args.rounds} rounds x {args.steps} steps per cluster")
        print(f"{'sampling':16s} {'median ms':>10s} {'vs off (paired)':>16s}")
        for name, ts in times.items():
            ratio = statistics.median(t / b for t, b in zip(ts, base))
            print(f"{name:16s} {1e3 * statistics.median(ts):10.2f} {ratio:15.3f}x")
        ratio = {name: statistics.median(t / b for t, b in zip(ts, base)) for name, ts in times.items()}
        # A sampled step costs what a step traced every time costs more; the default pays it once in 100.
        per_traced = ratio["every step (1)"] / ratio["off, 2nd cluster"] - 1
        print(f"a sampled (traced) step costs {100 * per_traced:+.1f}% (every-step cluster against the 2nd off "
              f"cluster); at the default, one step in 100: {per_traced / 100:+.2%} per step on average")
        print(f"noise floor (the two 'off' clusters): {abs(ratio['off, 2nd cluster'] - 1):.1%}")
        print(f"dashboard polls of one cluster during the run: {dashes[0].collector.polls if dashes[0].collector else 0}")
    finally:
        for d in dashes:
            d.stop()
        for sess, _, _ in runs.values():
            sess.close()
        for c in clusters.values():
            c.stop()


if __name__ == "__main__":
    main()
