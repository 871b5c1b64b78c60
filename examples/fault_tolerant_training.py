"""Fault-tolerant distributed training: survive kill -9 of a worker and of the parameter server.

A local cluster (1 PS, 2 workers, restarted on failure) trains the digits MLP asynchronously with
between-graph replication: one client per worker, each its own graph, variables on the PS. Midway a
worker is killed with SIGKILL, later the PS. MonitoredTrainingSession recovers: the worker's client
reconnects to the restarted worker and carries on; after the PS restarts empty, the chief restores
the latest checkpoint and the others wait for it. The final accuracy matches a run without faults.

    python examples/fault_tolerant_training.py [--steps 600] [--no-faults]
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import tempfile
import threading
import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import actorflow as af


def load_data(seed=0):
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    return train_test_split(x, d.target.astype(np.int64), test_size=0.25, random_state=seed, stratify=d.target)


CHECKPOINT_STEPS = 50


def build_model(n_ps: int, steps: int = 600):
    """The same graph in every client (between-graph replication).

    The learning rate decays to 5% over the run (cosine, keyed on the global step), so the weights
    settle and the final accuracy is the converged model's rather than one noisy late update's.
    """
    g = af.Graph()
    with g.as_default(), af.device(af.train.replica_device_setter(ps_tasks=n_ps, worker_device="/job:worker")):
        af.set_random_seed(1)
        gs = af.train.get_or_create_global_step()
        x = af.placeholder(af.float32, [None, 64], name="x")
        y = af.placeholder(af.int64, [None], name="y")
        h = af.layers.dense(x, 128, activation=af.nn.relu, name="hidden")
        logits = af.layers.dense(h, 10, name="logits")
        loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        lr = af.train.cosine_decay(3e-3, gs, steps, alpha=0.05)
        train = af.train.AdamOptimizer(lr).minimize(loss, global_step=gs)
        acc = af.reduce_mean(af.cast(af.equal(af.argmax(logits, 1), y), af.float32))
    return g, dict(gs=gs, x=x, y=y, loss=loss, train=train, acc=acc)


def worker_loop(cluster, index, steps, ckpt_dir, data, stats, batch=64):
    xtr, xte, ytr, yte = data
    g, m = build_model(cluster.n_ps, steps)
    rng = np.random.default_rng(index)
    with g.as_default():
        hooks = [af.train.StopAtStepHook(last_step=steps)]
        with af.train.MonitoredTrainingSession(master=cluster.task_target("worker", index), is_chief=index == 0,
                                               checkpoint_dir=ckpt_dir if index == 0 else None,
                                               save_checkpoint_steps=CHECKPOINT_STEPS, hooks=hooks,
                                               max_wait_secs=120) as sess:
            prev = -1
            while not sess.should_stop():
                idx = rng.integers(0, len(xtr), batch)
                _, step = sess.run([m["train"], m["gs"]], {m["x"]: xtr[idx], m["y"]: ytr[idx]})
                step = int(step)
                if step < prev:
                    # The global step went back: the PS was restored from a checkpoint.
                    stats.setdefault("rollbacks", []).append((prev, step))
                prev = step
                stats["step"] = max(stats.get("step", 0), step)
            stats[f"recoveries_{index}"] = sess.recoveries


def evaluate(cluster, data):
    xtr, xte, ytr, yte = data
    g, m = build_model(cluster.n_ps)
    with g.as_default(), af.Session(cluster.target) as sess:
        return float(sess.run(m["acc"], {m["x"]: xte, m["y"]: yte}))


def main(argv=None) -> float:
    return run(argv)["accuracy"]


def run(argv=None) -> dict:
    """Trains with the faults; returns accuracy, recoveries, restarts and global-step rollbacks."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--no-faults", action="store_true")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(asctime)s %(name)s: %(message)s")
    data = load_data()
    stats: dict = {}
    with tempfile.TemporaryDirectory() as ckpt_dir, \
            af.cluster.LocalCluster(ps=1, workers=2, restart="on-failure") as cluster:
        threads = [threading.Thread(target=worker_loop, args=(cluster, i, args.steps, ckpt_dir, data, stats))
                   for i in range(2)]
        for t in threads:
            t.start()
        faults = [] if args.no_faults else [(args.steps // 3, "worker", 1), (2 * args.steps // 3, "ps", 0)]
        for at, job, task in faults:
            while stats.get("step", 0) < at and any(t.is_alive() for t in threads):
                time.sleep(0.02)
            pid = cluster.kill(job, task, signal.SIGKILL)
            print(f"step {stats.get('step')}: kill -9 /job:{job}/task:{task} (pid {pid})", file=sys.stderr, flush=True)
        for t in threads:
            t.join()
        acc = evaluate(cluster, data)
        rec = {k: v for k, v in stats.items() if k.startswith("recoveries")}
        print(f"final global step {stats.get('step')}, recoveries {rec}, restarts "
              f"{ {'/'.join(map(str, k)): v for k, v in cluster.restarts.items()} }")
        print(f"test accuracy: {acc:.4f}")
        stats["accuracy"] = acc
        stats["restarts"] = dict(cluster.restarts)
    return stats


if __name__ == "__main__":
    main()
