"""Fault injectors that are off cost nothing measurable (issue: simulator harness).

The runtime checks two hooks, `channel.fault_hook` before every frame a connection sends and
`server.step_fault_hook` before every step a worker service starts (installed by actorflow/sim/faults.py). This compares,
in one run, a cross-task training-like step (a variable on one task, read, updated and fetched from
another: requests, replies and tensor frames both ways) with:

  A. the code as it is, injectors off (the hooks are None);
  B. the same two methods recompiled from their source with the seam lines removed: no injector
     code path at all.

Two in-process servers form the cluster; the variants alternate in rounds, and the ratio of their
median step times is printed with the spread between rounds. It also prints the cost of the bare
check (`hook is not None`) beside one websocket frame's.

Run: python benchmarks/sim_overhead.py [--rounds 8] [--steps 400]
"""
from __future__ import annotations

import argparse
import inspect
import statistics
import textwrap
import time
import timeit

import numpy as np

import actorflow as af
from actorflow.cluster import server as server_mod
from actorflow.cluster.local import free_port
from actorflow.sim import faults
from actorflow.transport import channel as channel_mod

SEAM = "# sim: fault-injection seam"


def without_seam(cls, name):
    """`cls.name` recompiled from its source with the seam (its comment, the `if` and the awaited
    call under it) removed, in its module's globals."""
    fn = getattr(cls, name)
    src = textwrap.dedent(inspect.getsource(fn))
    lines = src.splitlines()
    out, skip = [], 0
    for line in lines:
        if skip:
            skip -= 1
            continue
        if SEAM in line:
            skip = 2
            continue
        out.append(line)
    if len(out) != len(lines) - 3:
        raise RuntimeError(f"{cls.__name__}.{name}: seam not found where expected")
    ns = {}
    exec(compile("\n".join(out), inspect.getsourcefile(fn), "exec"), fn.__globals__, ns)
    return ns[name]


ORIGINAL = {(channel_mod.Connection, "_write_loop"): channel_mod.Connection._write_loop,
            (server_mod.WorkerService, "rpc_run_graph"): server_mod.WorkerService.rpc_run_graph}
STRIPPED = {key: without_seam(*key) for key in ORIGINAL}


def use(variant) -> None:
    for (cls, name), fn in variant.items():
        setattr(cls, name, fn)


def one_round(steps: int) -> float:
    """Median step time (s) on a fresh two-task cluster in this process."""
    cluster = {"ps": [f"127.0.0.1:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]}
    servers = [af.train.Server(cluster, "ps", 0, token="bench"), af.train.Server(cluster, "worker", 0, token="bench")]
    try:
        with af.Graph().as_default():
            with af.device("/job:ps/task:0"):
                v = af.Variable(np.zeros(4096, np.float32), name="v")
            with af.device("/job:worker/task:0"):
                x = af.placeholder(af.float32, [4096])
                g = v * 0.5 + x
            with af.device("/job:ps/task:0"):
                update = af.assign_sub(v, g * 0.01)
            with af.Session(servers[1].target) as sess:
                sess.run(v.initializer)
                feed = {x: np.ones(4096, np.float32)}
                for _ in range(50):
                    sess.run(update, feed)
                times = []
                for _ in range(steps):
                    t0 = time.perf_counter()
                    sess.run(update, feed)
                    times.append(time.perf_counter() - t0)
        return statistics.median(times)
    finally:
        for s in servers:
            s.stop()


class _Count:
    """A hook that only counts its calls (to say how many checks one step makes)."""

    def __init__(self):
        self.n = 0

    async def before_send(self, conn, frame):
        self.n += 1

    async def before_step(self, service, exe, feeds=()):
        self.n += 1


def checks_per_step(steps: int = 100) -> tuple:
    faults.set_injectors(_Count(), _Count())
    try:
        one_round(steps)
        # one_round runs 50 warm-up steps and the initializer besides `steps`.
        return faults.TRANSPORT.n / (steps + 51), faults.STEP.n / (steps + 51)
    finally:
        faults.set_injectors(None, None)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--steps", type=int, default=400)
    args = p.parse_args(argv)
    assert faults.TRANSPORT is None and faults.STEP is None, "the injectors must be off"
    a, b = [], []
    for _ in range(args.rounds):
        use(ORIGINAL)
        a.append(one_round(args.steps))
        use(STRIPPED)
        b.append(one_round(args.steps))
    use(ORIGINAL)
    ma, mb = statistics.median(a), statistics.median(b)
    ratios = [x / y for x, y in zip(a, b)]
    print(f"cross-task step, median of {args.rounds} rounds x {args.steps} steps:")
    print(f"  A  injectors off (hooks None)      {ma * 1e6:9.1f} us   rounds {min(a) * 1e6:.1f}..{max(a) * 1e6:.1f}")
    print(f"  B  no injector code path at all    {mb * 1e6:9.1f} us   rounds {min(b) * 1e6:.1f}..{max(b) * 1e6:.1f}")
    print(f"  A / B = {ma / mb:.4f}  (per-round ratios {min(ratios):.3f}..{max(ratios):.3f}: "
          f"{'indistinguishable' if min(ratios) <= 1.0 <= max(ratios) else 'distinguishable'})")
    frames, starts = checks_per_step()
    check = timeit.timeit("fault_hook is not None", globals=vars(channel_mod), number=1_000_000) / 1e6
    print(f"the check itself: {check * 1e9:.1f} ns; a step here makes {frames:.1f} frame checks and "
          f"{starts:.1f} step checks: {(frames + starts) * check / ma * 100:.4f}% of its time")


if __name__ == "__main__":
    main()
