"""Between-graph training as each task of a cluster manager runs it: the digits MLP, asynchronously.

Every task runs this same program; its cluster resolver says what it is. Parameter servers serve
until the job ends; each worker starts its server, trains against the shared variables (worker 0 is
the chief: it initializes them and checkpoints), and the chief prints the test accuracy.

    srun python examples/resolver_digits.py --resolver slurm              # in `actorflow slurm script --command`
    python examples/resolver_digits.py --resolver tf_config               # TF_CONFIG set by the engine
    python examples/resolver_digits.py --resolver k8s                     # `actorflow k8s manifest --command`
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import actorflow as af

RESOLVERS = {
    "slurm": lambda: af.distribute.cluster_resolver.SlurmClusterResolver(),
    "tf_config": lambda: af.distribute.cluster_resolver.TFConfigClusterResolver(),
    "k8s": lambda: af.distribute.cluster_resolver.KubernetesClusterResolver(),
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--resolver", choices=sorted(RESOLVERS), required=True)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--checkpoint-dir", help="where the chief checkpoints (a shared file system)")
    p.add_argument("--result", help="the chief writes its test accuracy to this file")
    args = p.parse_args(argv)
    resolver = RESOLVERS[args.resolver]()
    server = af.train.Server.create_from_resolver(resolver)
    job, index = resolver.task_type, resolver.task_id
    if job == "ps":
        server.join()                      # serves the variables until the job is cancelled
        return 0
    n_ps = resolver.cluster_spec().num_tasks("ps") if "ps" in resolver.cluster_spec().jobs else 0
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    xtr, xte, ytr, yte = train_test_split(x, d.target.astype(np.int64), test_size=0.25, random_state=0,
                                          stratify=d.target)
    with af.device(af.train.replica_device_setter(ps_tasks=n_ps, worker_device=f"/job:worker/task:{index}")):
        af.set_random_seed(7)
        gs = af.train.get_or_create_global_step()
        xp = af.placeholder(af.float32, [None, 64], name="x")
        yp = af.placeholder(af.int64, [None], name="y")
        h = af.layers.dense(xp, 256, activation=af.nn.relu, name="hidden")
        logits = af.layers.dense(h, 10, name="logits")
        loss = af.reduce_mean(af.nn.sparse_softmax_cross_entropy_with_logits(labels=yp, logits=logits))
        train = af.train.AdamOptimizer(2e-3).minimize(loss, global_step=gs)
        acc = af.reduce_mean(af.cast(af.equal(af.argmax(logits, 1), yp), af.float32))
    rng = np.random.default_rng(100 + index)
    with af.train.MonitoredTrainingSession(master=server.target, is_chief=index == 0,
                                           checkpoint_dir=args.checkpoint_dir,
                                           hooks=[af.train.StopAtStepHook(last_step=args.steps)],
                                           log_step_count_steps=0) as sess:
        while not sess.should_stop():
            i = rng.integers(0, len(xtr), args.batch_size)
            sess.run(train, {xp: xtr[i], yp: ytr[i]})
    if index == 0:
        with af.Session(server.target) as sess:
            a = float(sess.run(acc, {xp: xte, yp: yte}))
        print(f"/job:worker/task:0: test accuracy {a:.4f}", flush=True)
        if args.result:
            with open(args.result, "w") as f:
                f.write(f"{a}\n")
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
