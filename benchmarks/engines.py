"""The same 1 PS + 2 worker digits job started by LocalCluster and by RayCluster (and Slurm where it
runs): time to start the cluster, steps per second, and time to recover from a killed worker.

    python benchmarks/engines.py [--steps 1500] [--engines local ray]

Each engine runs in its own process, one after the other; the figures print side by side with Ray's
as a ratio to LocalCluster's from the same run. Recovery is the time from kill -9 of worker 1 until
that worker's client has completed a training step again (the engine restarts the task; the client's
MonitoredTrainingSession reconnects).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))


def one(engine: str, steps: int) -> dict:
    import distributed_digits as dd
    import numpy as np
    from sklearn.datasets import load_digits

    import actorflow as af
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    t0 = time.perf_counter()
    if engine == "ray":
        import ray
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False, address="local")
        ray_up = time.perf_counter() - t0
        cluster = af.cluster.RayCluster(ps=1, workers=2, host="127.0.0.1", resources_per_task={"num_cpus": 0.25})
    else:
        ray_up = 0.0
        cluster = af.cluster.LocalCluster(ps=1, workers=2, restart="on-failure")
    with cluster:
        start_s = time.perf_counter() - t0
        args = type("Args", (), dict(steps=steps, batch_size=64, learning_rate=2e-3))()
        marks: list[tuple[float, int, int]] = []          # (time, worker, global step)
        errors: list = []

        def progress_of(i):
            return lambda step: marks.append((time.perf_counter(), i, step))
        threads = [threading.Thread(target=dd.worker, args=(cluster, i, args, (x, y), progress_of(i), errors))
                   for i in range(2)]
        t1 = time.perf_counter()
        for t in threads:
            t.start()
        while not marks or marks[-1][2] < steps // 2:
            if errors:
                raise errors[0]
            time.sleep(0.01)
        # steps/s over the first half, before any fault
        half_t, half_step = marks[-1][0], marks[-1][2]
        first = next(m for m in marks if m[2] >= 50)
        rate = (half_step - first[2]) / (half_t - first[0])
        t_kill = time.perf_counter()
        cluster.kill("worker", 1)
        while not any(m[1] == 1 and m[0] > t_kill + 0.05 for m in list(marks)):
            if errors:
                raise errors[0]
            if time.perf_counter() - t_kill > 120:
                raise TimeoutError("worker 1 did not recover in 120 s")
            time.sleep(0.01)
        recovery = next(m[0] for m in marks if m[1] == 1 and m[0] > t_kill + 0.05) - t_kill
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        total = time.perf_counter() - t1
    if engine == "ray":
        import ray
        ray.shutdown()
    return {"engine": engine, "start_s": start_s, "ray_init_s": ray_up, "steps_per_s": rate,
            "recovery_s": recovery, "train_s": total}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--engines", nargs="+", default=["local", "ray"])
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        print("RESULT " + json.dumps(one(a.one, a.steps)), flush=True)
        return 0
    results = {}
    for engine in a.engines:
        r = subprocess.run([sys.executable, __file__, "--one", engine, "--steps", str(a.steps)],
                           capture_output=True, text=True)
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
        if r.returncode or not line:
            print(f"{engine}: failed\n{r.stderr[-2000:]}", file=sys.stderr)
            continue
        results[engine] = json.loads(line[-1][7:])
    base = results.get("local")
    print(f"{'engine':8s} {'start s':>8s} {'(ray.init)':>10s} {'steps/s':>8s} {'vs local':>8s} {'recovery s':>10s}")
    for engine, r in results.items():
        ratio = r["steps_per_s"] / base["steps_per_s"] if base else float("nan")
        print(f"{engine:8s} {r['start_s']:8.2f} {r['ray_init_s']:10.2f} {r['steps_per_s']:8.1f} {ratio:8.2f} "
              f"{r['recovery_s']:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
