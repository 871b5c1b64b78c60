"""Distributed training on a local cluster: the digits MLP with 1 parameter server and 2 workers.

Starts the cluster's tasks as processes on 127.0.0.1, then runs one client per worker (between-graph
replication: each client builds its own graph; replica_device_setter puts the variables on the PS
and the computation on the client's worker). Training is asynchronous: each worker applies its own
gradients to the shared variables. Prints the test accuracy, which matches a single-process run.

    python examples/distributed_digits.py [--ps 1] [--workers 2] [--steps 800] [--engine local|ray]

`--engine ray` starts the same tasks as Ray actors (af.cluster.RayCluster, the `ray` extra) on a
local Ray instance, or on the cluster RAY_ADDRESS names; the training code is the same.
"""
from __future__ import annotations

import argparse
import sys
import threading
import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from tqdm import tqdm

import actorflow as af


def build_model(n_ps: int, learning_rate: float):
    g = af.Graph()
    with g.as_default(), af.device(af.train.replica_device_setter(ps_tasks=n_ps, worker_device="/job:worker")):
        af.set_random_seed(7)
        gs = af.train.get_or_create_global_step()
        x = af.placeholder(af.float32, [None, 64], name="x")
        y = af.placeholder(af.int64, [None], name="y")
        h = af.layers.dense(x, 256, activation=af.nn.relu, name="hidden")
        logits = af.layers.dense(h, 10, name="logits")
        loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        train = af.train.AdamOptimizer(learning_rate).minimize(loss, global_step=gs)
        acc = af.reduce_mean(af.cast(af.equal(af.argmax(logits, 1), y), af.float32))
    return g, dict(gs=gs, x=x, y=y, loss=loss, train=train, acc=acc)


def worker(cluster, index, args, data, progress, errors):
    xtr, ytr = data
    g, m = build_model(cluster.n_ps, args.learning_rate)
    rng = np.random.default_rng(100 + index)
    try:
        with g.as_default(), af.train.MonitoredTrainingSession(
                master=cluster.task_target("worker", index), is_chief=index == 0,
                hooks=[af.train.StopAtStepHook(last_step=args.steps)], log_step_count_steps=0) as sess:
            while not sess.should_stop():
                idx = rng.integers(0, len(xtr), args.batch_size)
                _, step = sess.run([m["train"], m["gs"]], {m["x"]: xtr[idx], m["y"]: ytr[idx]})
                # The global step fetched beside the train op may be read before or after this run's
                # increment (the two ops race); the bar's last value comes from a read after training.
                progress(int(step))
    except Exception as e:  # noqa: BLE001 - reported by the main thread
        errors.append(e)


def main(argv=None) -> float:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ps", type=int, default=1)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--steps", type=int, default=800)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--learning-rate", type=float, default=2e-3)
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--engine", choices=["local", "ray"], default="local", help="who starts the tasks")
    args = p.parse_args(argv)
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    xtr, xte, ytr, yte = train_test_split(x, d.target.astype(np.int64), test_size=0.25, random_state=0,
                                          stratify=d.target)
    t0 = time.perf_counter()
    if args.engine == "ray":
        launcher = af.cluster.RayCluster(ps=args.ps, workers=args.workers, host="127.0.0.1",
                                         resources_per_task={"num_cpus": 0.25})
    else:
        launcher = af.cluster.LocalCluster(ps=args.ps, workers=args.workers)
    with launcher as cluster:
        if not args.quiet:
            print(f"cluster up in {time.perf_counter() - t0:.1f} s: {cluster.spec.as_dict()}", file=sys.stderr)
        bar = tqdm(total=args.steps, desc="global step", disable=args.quiet, file=sys.stderr)
        lock = threading.Lock()

        def progress(step):
            with lock:
                if step > bar.n:
                    bar.update(min(step, args.steps) - bar.n)
        errors: list = []
        t1 = time.perf_counter()
        threads = [threading.Thread(target=worker, args=(cluster, i, args, (xtr, ytr), progress, errors))
                   for i in range(args.workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        train_s = time.perf_counter() - t1
        if errors:
            bar.close()
            raise errors[0]
        g, m = build_model(args.ps, args.learning_rate)
        with g.as_default(), af.Session(cluster.target) as sess:
            # The last run's fetch may have read the step before its own increment: the bar ends at the
            # global step's real value, so a finished run shows 800/800, not 799/800.
            progress(int(sess.run(m["gs"])))
            bar.close()
            acc = float(sess.run(m["acc"], {m["x"]: xte, m["y"]: yte}))
    print(f"trained {args.steps} steps on {args.workers} workers + {args.ps} PS in {train_s:.1f} s "
          f"({args.steps / train_s:.0f} steps/s)")
    print(f"test accuracy: {acc:.4f}")
    return acc


if __name__ == "__main__":
    main()
