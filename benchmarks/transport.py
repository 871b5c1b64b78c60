"""Transport throughput and latency (issue: distributed runtime). Prints, in one run on loopback:

(a) worker-to-worker throughput for 64 MiB tensors: a 64 MiB variable on worker 0 summed on worker 1
    of a LocalCluster, minus the same step with the sum on worker 0 (no crossing), beside raw TCP
    between two processes moving the same 64 MiB (target: at least 50% of raw TCP). For context it
    also prints the transport alone: one 64 MiB frame sent over an established Connection to a task.
(b) small-message round trip: a `ping` RPC over an established Connection to a task, beside a raw TCP
    ping-pong between two processes (target: at most 200 us).

Run: python benchmarks/transport.py [--quick]
"""
from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import socket
import statistics
import time

import numpy as np

import actorflow as af
from actorflow.actors.dispatcher import default_runtime
from actorflow.cluster import LocalCluster
from actorflow.transport.channel import Peer

MIB = 1 << 20
SIZE = 64 * MIB


# ---------------------------------------------------------------------------------------------------
# Raw TCP baselines: a second process on loopback
# ---------------------------------------------------------------------------------------------------

def _tcp_sink(port_q, size: int, rounds: int) -> None:
    """Receives `rounds` messages of `size` bytes, acknowledging each with one byte."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port_q.put(srv.getsockname()[1])
    conn, _ = srv.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray(size)
    view = memoryview(buf)
    for _ in range(rounds):
        got = 0
        while got < size:
            n = conn.recv_into(view[got:], size - got)
            if not n:
                return
            got += n
        conn.sendall(b"k")
    conn.close()


def _tcp_echo(port_q, size: int, rounds: int) -> None:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port_q.put(srv.getsockname()[1])
    conn, _ = srv.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(rounds):
        data = b""
        while len(data) < size:
            chunk = conn.recv(size - len(data))
            if not chunk:
                return
            data += chunk
        conn.sendall(data)
    conn.close()


def _connect(target, *args):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=target, args=(q, *args), daemon=True)
    p.start()
    port = q.get(timeout=30)
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return p, s


def raw_tcp_throughput(rounds: int) -> list[float]:
    """Seconds per 64 MiB moved from this process to another over loopback TCP (send to ack)."""
    payload = np.random.default_rng(0).integers(0, 255, SIZE, np.uint8)
    p, s = _connect(_tcp_sink, SIZE, rounds)
    times = []
    try:
        for _ in range(rounds):
            t0 = time.perf_counter()
            s.sendall(memoryview(payload))
            s.recv(1)
            times.append(time.perf_counter() - t0)
    finally:
        s.close()
        p.join(10)
    return times


def raw_tcp_rtt(rounds: int, size: int = 64) -> list[float]:
    """Seconds per round trip of a `size`-byte message to an echo process over loopback TCP."""
    p, s = _connect(_tcp_echo, size, rounds)
    msg = b"x" * size
    times = []
    try:
        for _ in range(rounds):
            t0 = time.perf_counter()
            s.sendall(msg)
            got = 0
            while got < size:
                got += len(s.recv(size - got))
            times.append(time.perf_counter() - t0)
    finally:
        s.close()
        p.join(10)
    return times


# ---------------------------------------------------------------------------------------------------
# actorflow: steps on a LocalCluster, and RPCs over an established Connection
# ---------------------------------------------------------------------------------------------------

def timed_run(sess, fetch) -> float:
    t0 = time.perf_counter()
    sess.run(fetch)
    return time.perf_counter() - t0


def worker_to_worker(cluster: LocalCluster, rounds: int) -> tuple[list[float], list[float]]:
    """(step with the 64 MiB edge worker 0 -> worker 1, the same step without it)."""
    g = af.Graph()
    with g.as_default():
        with af.device("/job:worker/task:0"):
            v = af.Variable(af.ones([SIZE // 4], af.float32), name="transport_bench_v")
            local_sum = af.reduce_sum(v)
        with af.device("/job:worker/task:1"):
            remote_sum = af.reduce_sum(v)        # the read happens on worker 0; the value crosses
        with af.Session(cluster.target, graph=g) as sess:
            sess.run(v.initializer)
            assert sess.run(remote_sum) == SIZE // 4
            for _ in range(2):                   # registration and first-touch costs: not timed
                sess.run(remote_sum)
                sess.run(local_sum)
            crossing, local = [], []
            # Interleaved, so that drift on a shared machine hits both alike.
            for _ in range(rounds):
                crossing.append(timed_run(sess, remote_sum))
                local.append(timed_run(sess, local_sum))
    return crossing, local


def _on_runtime(coro_fn, *args):
    rt = default_runtime()
    return asyncio.run_coroutine_threadsafe(coro_fn(*args), rt.loop).result(600)


async def _rpc_bench(address: str, token: str, pings: int, frames: int):
    peer = Peer(address, token, lambda *a: None, name=address)
    try:
        conn = await peer.connection()
        for _ in range(50):
            await conn.call("ping", timeout=10)
        rtts = []
        for _ in range(pings):
            t0 = time.perf_counter()
            await conn.call("ping", timeout=10)
            rtts.append(time.perf_counter() - t0)
        big = np.ones(SIZE // 4, np.float32)
        await conn.call("ping", tensors=[big], timeout=60)
        sends = []
        for _ in range(frames):
            t0 = time.perf_counter()
            await conn.call("ping", tensors=[big], timeout=60)
            sends.append(time.perf_counter() - t0)
        return rtts, sends
    finally:
        await peer.close()


def fmt_gbs(seconds: float) -> str:
    return f"{SIZE / seconds / 1e9:6.2f} GB/s" if seconds > 0 else "   n/a"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = ap.parse_args(argv)
    rounds = 5 if args.quick else 15
    pings = 500 if args.quick else 3000

    print("raw loopback TCP (two processes) ...", flush=True)
    tcp = statistics.median(raw_tcp_throughput(rounds + 2)[2:])
    tcp_rtt = statistics.median(raw_tcp_rtt(pings + 100)[100:])

    print("actorflow LocalCluster (2 workers) ...", flush=True)
    with LocalCluster(ps=0, workers=2) as cluster:
        crossing, local = worker_to_worker(cluster, rounds)
        rtts, sends = _on_runtime(_rpc_bench, cluster.spec.task_address("worker", 1), cluster.token, pings,
                                  rounds)
    t_cross, t_local = statistics.median(crossing), statistics.median(local)
    edge = t_cross - t_local
    rtt = statistics.median(rtts)
    frame = statistics.median(sends)

    print()
    print("64 MiB tensors")
    print(f"  raw TCP, process to process         {tcp * 1e3:8.1f} ms   {fmt_gbs(tcp)}")
    print(f"  step with worker0->worker1 edge     {t_cross * 1e3:8.1f} ms")
    print(f"  same step without the edge          {t_local * 1e3:8.1f} ms")
    print(f"  worker-to-worker edge (difference)  {edge * 1e3:8.1f} ms   {fmt_gbs(edge)}   "
          f"{tcp / edge if edge > 0 else float('nan'):5.0%} of raw TCP (target >= 50%)")
    print(f"  one 64 MiB frame over a Connection  {frame * 1e3:8.1f} ms   {fmt_gbs(frame)}   "
          f"{tcp / frame:5.0%} of raw TCP (client -> task, transport only)")
    print("small-message round trip")
    print(f"  raw TCP ping-pong (64 B)            {tcp_rtt * 1e6:8.1f} us")
    print(f"  ping RPC over a Connection          {rtt * 1e6:8.1f} us   {rtt / tcp_rtt:4.1f}x raw TCP "
          f"(target <= 200 us); p10 {np.percentile(rtts, 10) * 1e6:.0f} us, p90 {np.percentile(rtts, 90) * 1e6:.0f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
