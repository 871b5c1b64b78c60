"""The simulated network's cost model (actorflow/sim/network.py): when each machine's CPU and links are
taken, and TCP's per-connection order under equal times, drops and closes. Virtual time only."""
from __future__ import annotations

import asyncio

import pytest

from actorflow.sim.loop import VirtualLoop
from actorflow.sim.network import NetCosts, SimNetwork, SimSocket

MS = 1e-3


def _net(latency_ms=10.0, cpu_ms=1.0, seed=0):
    loop = VirtualLoop(seed)
    net = SimNetwork(loop, seed, NetCosts(latency_s=latency_ms * MS, jitter=0.0, s_per_mb=0.0,
                                          cpu_per_msg_s=cpu_ms * MS))
    return loop, net


def _connect(net, a, b):
    x, y = SimSocket(net, None, a, b), SimSocket(net, None, b, a)
    x.peer, y.peer = y, x
    net.sockets.setdefault(a, []).append(x)
    net.sockets.setdefault(b, []).append(y)
    return x, y


async def _read(loop, sock, out, n=None):
    while n is None or len(out) < n:
        m = await sock.receive()
        if m.data is None:
            out.append(("closed", loop.time()))
            return
        out.append((m.data, loop.time()))


def test_a_receivers_cpu_is_free_while_its_messages_are_in_flight():
    # a -> b is 10 ms in flight; b sends to c 2 ms in. Booked at send time, b's CPU would be taken
    # from 11 to 12 ms already and b's message would leave at 12 ms (c at 24 ms); booked on arrival,
    # b's message leaves at 3 ms and c has it at 14 ms (its CPU: 1 ms more).
    loop, net = _net()
    ab, ba = _connect(net, "a", "b")
    bc, cb = _connect(net, "b", "c")
    got_b, got_c = [], []

    async def go():
        rb = loop.create_task(_read(loop, ba, got_b, 1))
        rc = loop.create_task(_read(loop, cb, got_c, 1))
        await ab.send_bytes(b"x")
        await asyncio.sleep(2 * MS)
        await bc.send_bytes(b"y")
        await rb
        await rc
    loop.run_until_complete(go())
    assert got_b[0][1] == pytest.approx(12 * MS)
    assert got_c[0][1] == pytest.approx(14 * MS)
    loop.close()


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_arrivals_queue_behind_a_busy_cpu(seed):
    # a and c each send b one message at 0; both reach b at 11 ms and its CPU takes them one at a
    # time: one is delivered at 12 ms, the other at 13 ms (which first is drawn from the seed).
    loop, net = _net(seed=seed)
    ab, ba = _connect(net, "a", "b")
    cb, bc = _connect(net, "c", "b")
    got_a, got_c = [], []

    async def go():
        r1 = loop.create_task(_read(loop, ba, got_a, 1))
        r2 = loop.create_task(_read(loop, bc, got_c, 1))
        await ab.send_bytes(b"a")
        await cb.send_bytes(b"c")
        await r1
        await r2
    loop.run_until_complete(go())
    assert sorted(t for _, t in got_a + got_c) == pytest.approx([12 * MS, 13 * MS])
    assert net.nodes["b"].received == 2 and net.nodes["a"].sent == 1
    loop.close()


@pytest.mark.parametrize("seed", range(6))
def test_one_connection_keeps_its_order_at_equal_times_and_through_a_drop(seed):
    # No costs at all: every message of a burst is due at one instant (the loop shuffles such
    # timers); a drop delays one by its RTO and those behind it wait; the close comes last.
    loop, net = _net(latency_ms=0.0, cpu_ms=0.0, seed=seed)
    ab, ba = _connect(net, "a", "b")
    other, _ = _connect(net, "c", "b")
    got = []

    async def go():
        r = loop.create_task(_read(loop, ba, got))
        for i in range(20):
            if i == 7:
                net.drop({"task": "a", "peer": "b", "fault": 1, "rto_ms": 5.0})
            await ab.send_bytes(bytes([i]))
            await other.send_bytes(b"z")
        await ab.close()
        await r
    loop.run_until_complete(go())
    assert [d for d, _ in got] == [bytes([i]) for i in range(20)] + ["closed"]
    times = [t for _, t in got]
    assert times[:7] == [0.0] * 7 and all(t == pytest.approx(5 * MS) for t in times[7:])
    loop.close()


def test_a_message_to_a_closed_end_takes_no_cpu():
    loop, net = _net()
    ab, ba = _connect(net, "a", "b")

    async def go():
        await ab.send_bytes(b"x")
        await ba.close()
        await asyncio.sleep(50 * MS)
    loop.run_until_complete(go())
    assert net.node("b").received == 0 and net.node("b").cpu == 0.0
    loop.close()
