"""Issue 15, finding 5, piece by piece: the bulk stream accepts a payload only for an announced
tensor of exactly its size, the rendezvous expires and caps what peers leave in it, byte budgets
refuse a frame with ResourceExhaustedError naming the peer (the step fails, the servers keep
serving), and buffers are released when a connection goes away, without waiting for the cycle
collector. Each test's docstring states the old behaviour first.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import tracemalloc

import numpy as np
import pytest

import actorflow as af
from actorflow import errors
from actorflow.cluster.local import free_ports
from actorflow.transport.budget import ByteBudget, TransportLimits, parse_bytes
from actorflow.transport.bulk import bulk_frame_head
from actorflow.transport.codec import FrameError
from actorflow.transport.rendezvous import Rendezvous
from tests.test_bulk import feed, install, ws_frame

MiB = 1 << 20


# -- the bulk stream ------------------------------------------------------------------------------

async def test_a_bulk_frame_waits_unallocated_for_its_header():
    """Old behaviour: the stream allocated every bulk frame's declared size as soon as its 10-byte
    frame header arrived, announced or not. Now a bulk frame whose announcing header the reader has
    not taken yet is held: the socket is paused, nothing is allocated, and reading resumes once
    the header announces exactly that size."""
    stream, inner, tr = install()
    payload = np.arange(64 * MiB // 8, dtype=np.int64).view(np.uint8)
    tracemalloc.start()
    try:
        feed(stream, ws_frame(b"header") + bulk_frame_head(0, len(payload)) + payload[:100_000].tobytes(), [1 << 20])
        held_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert tr.paused and held_peak < 2 * MiB
    waiter = asyncio.ensure_future(stream.take(len(payload)))
    await asyncio.sleep(0)
    assert not tr.paused
    feed(stream, payload[100_000:].tobytes(), [1 << 20])
    assert bytes(await waiter) == payload.tobytes()


@pytest.mark.parametrize("case", ["no-header", "header-was-not-announcing", "wrong-size", "not-directly-after"])
async def test_a_bulk_frame_nobody_announced_closes_the_connection(case, caplog):
    """Old behaviour: bulk frames with no announcing header were queued, each allocated at its
    declared size, for as long as the connection lived and after; a frame of another size than
    announced was allocated and read in full before the mismatch was noticed. Now each of these
    aborts the connection at the bulk frame's header, logging the peer's name, allocating nothing."""
    stream, inner, tr = install()
    n = 8 * MiB
    with caplog.at_level(logging.WARNING):
        if case == "no-header":
            feed(stream, bulk_frame_head(0, n), [4096])
        elif case == "header-was-not-announcing":
            feed(stream, ws_frame(b"ordinary") + bulk_frame_head(0, n), [4096])
            assert tr.paused and not tr.aborted
            stream.received()                        # the reader took "ordinary": it announced nothing
        elif case == "wrong-size":
            feed(stream, ws_frame(b"header") + bulk_frame_head(0, n), [4096])
            with pytest.raises(FrameError, match="announced 1024"):
                await stream.take(1024)
        else:
            feed(stream, ws_frame(b"header") + ws_frame(b"another") + bulk_frame_head(0, n), [4096])
            with pytest.raises(FrameError, match="does not directly follow"):
                stream.announce(n)
    assert tr.aborted
    assert "test-peer" in caplog.text
    with pytest.raises(FrameError):
        await stream.take(n)


async def test_a_refused_payload_is_read_and_dropped():
    """Old behaviour: no payload could be refused: whatever was announced was allocated. Now a
    payload over budget is announced with discard=True: its bytes are read into the stream's
    scratch buffer and dropped, and the next frame is parsed as usual."""
    stream, inner, tr = install()
    n = 32 * MiB
    waiter = asyncio.ensure_future(stream.take(n, discard=True))
    await asyncio.sleep(0)
    tracemalloc.start()
    try:
        chunk = b"\7" * MiB
        feed(stream, ws_frame(b"header") + bulk_frame_head(0, n), [4096])
        for _ in range(32):
            feed(stream, chunk, [1 << 20])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * MiB
    assert await waiter is None
    feed(stream, ws_frame(b"next") + bulk_frame_head(1, 3) + b"abc", [4096])
    assert bytes(await stream.take(3)) == b"abc"
    assert not tr.aborted


def test_a_lost_connection_frees_its_payloads_without_the_cycle_collector():
    """Old behaviour: payloads queued on a connection stayed referenced by its stream after the
    connection was lost (+369 MiB observed). Now losing the connection releases every payload it
    held, received or half received, by reference counting alone."""
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        stream, inner, tr = install()
        stream.announce(16 * MiB)
        stream.announce(16 * MiB)
        feed(stream, ws_frame(b"h1") + bulk_frame_head(0, 16 * MiB), [4096])
        feed(stream, bytes(16 * MiB), [1 << 20])
        feed(stream, ws_frame(b"h2") + bulk_frame_head(1, 16 * MiB) + bytes(MiB), [1 << 20])
        assert tracemalloc.get_traced_memory()[0] - base > 30 * MiB
        stream.connection_lost(None)
        assert tracemalloc.get_traced_memory()[0] - base < 2 * MiB
    finally:
        tracemalloc.stop()
        gc.enable()


# -- the rendezvous ------------------------------------------------------------------------------

class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_values_of_a_step_that_never_starts_expire():
    """Old behaviour: values for a step id that never ran here were kept for ever. Now they are
    dropped `grace` seconds after the first arrived; should the step start after all, its Recv
    fails at once with DeadlineExceededError instead of waiting for them."""
    clock = Clock()
    rv = Rendezvous(grace=5.0, max_pending=MiB, clock=clock)
    rv.put(7, "a", np.ones(1000, np.float32), origin="peer-x")
    rv.put(8, "a", np.ones(10, np.float32), origin="peer-x")
    rv.start(8)                                   # running: kept however long it takes
    clock.now = 4.9
    assert rv.expire() == []
    clock.now = 5.0
    assert rv.expire() == [7]
    assert rv.pending_bytes("peer-x") == 40
    got = []
    rv.recv(7, "a", lambda v, e: got.append((v, e)))
    assert got[0][0] is None and isinstance(got[0][1], errors.DeadlineExceededError)
    rv.recv(8, "a", lambda v, e: got.append((v, e)))
    assert got[1][1] is None and rv.pending_bytes() == 0


def test_values_of_a_finished_step_are_dropped():
    """Old behaviour: a value arriving after its step finished here created a new entry that
    nothing would ever take. Now it is dropped on arrival."""
    rv = Rendezvous()
    rv.start(3)
    rv.finish(3)
    rv.put(3, "late", np.ones(100), origin="p")
    assert rv.pending() == 0 and rv.pending_bytes() == 0


def test_pending_bytes_are_capped_per_peer_and_per_process():
    """Old behaviour: one peer could leave any amount of values waiting. Now a value over the
    peer's cap (or the process budget) is dropped and its step fails with ResourceExhaustedError
    naming the peer; other peers are unaffected."""
    budget = ByteBudget(3000, "/job:worker/task:0")
    rv = Rendezvous(max_pending=1500, budget=budget)
    assert rv.put(1, "k", np.ones(1000, np.uint8), origin="peer-a") is None
    err = rv.put(2, "k", np.ones(1000, np.uint8), origin="peer-a")
    assert isinstance(err, errors.ResourceExhaustedError) and "peer-a" in err.message
    assert err.__traceback__ is None
    got = []
    rv.recv(2, "k", lambda v, e: got.append(e))
    assert got == [err]
    assert rv.put(3, "k", np.ones(1000, np.uint8), origin="peer-b") is None
    assert rv.put(4, "k", np.ones(1000, np.uint8), origin="peer-c") is None
    err = rv.put(5, "k", np.ones(1000, np.uint8), origin="peer-d")
    assert isinstance(err, errors.ResourceExhaustedError) and "/job:worker/task:0" in err.message
    rv.recv(1, "k", lambda v, e: None)
    assert budget.used == 2000 and rv.pending_bytes("peer-a") == 0


def test_a_closed_peer_leaves_nothing_for_steps_that_have_not_started():
    """Old behaviour: values from a peer whose connection closed stayed until their step ran,
    for ever if it never did. Now they are dropped when the peer goes away, and those steps fail
    with the connection's error; values for running steps stay."""
    rv = Rendezvous()
    rv.put(1, "k", np.ones(100), origin="gone")
    rv.start(2)
    rv.put(2, "k", np.ones(100), origin="gone")
    lost = errors.UnavailableError(None, None, "lost gone")
    rv.drop_origin("gone", lost)
    got = []
    rv.recv(1, "k", lambda v, e: got.append(e))
    rv.recv(2, "k", lambda v, e: got.append(e))
    assert got == [lost, None]


# -- limits and budgets ---------------------------------------------------------------------------

def test_limits_come_from_arguments_or_the_environment(monkeypatch):
    """Old behaviour: nothing to configure (4 GiB per frame, unlimited otherwise). Now the limits
    have documented defaults that environment variables and arguments override."""
    assert parse_bytes("64MiB") == 64 * MiB and parse_bytes("1024") == 1024 and parse_bytes("2G") == 2 << 30
    with pytest.raises(ValueError, match="ACTORFLOW_MAX_PENDING_PER_PEER"):
        monkeypatch.setenv("ACTORFLOW_MAX_PENDING_PER_PEER", "lots")
        TransportLimits.from_env()
    monkeypatch.setenv("ACTORFLOW_MAX_PENDING_PER_PEER", "3MiB")
    monkeypatch.setenv("ACTORFLOW_PENDING_GRACE_S", "2.5")
    lim = TransportLimits.from_env(inflight_per_process=5 * MiB)
    assert (lim.pending_per_peer, lim.pending_grace, lim.inflight_per_process) == (3 * MiB, 2.5, 5 * MiB)
    assert lim.inflight_per_connection == TransportLimits().inflight_per_connection == 2 << 30
    with pytest.raises(ValueError):
        TransportLimits(inflight_per_connection=0)


@pytest.fixture
def small_budget_servers():
    spec = {"worker": [f"127.0.0.1:{p}" for p in free_ports(2)]}
    limits = af.train.TransportLimits(inflight_per_connection=2 * MiB)
    servers = [af.train.Server(spec, "worker", i, token="mem-token", transport_limits=limits) for i in range(2)]
    try:
        yield servers
    finally:
        for s in servers:
            s.stop()


def test_a_tensor_over_the_connection_budget_fails_its_step_naming_the_peer(small_budget_servers):
    """Old behaviour: a tensor between two tasks could be as large as 4 GiB, allocated up front
    by the receiver. Now a tensor over the receiving connection's in-flight budget (2 MiB here)
    fails its step with ResourceExhaustedError naming the sending peer; its bytes are dropped as
    they arrive, and the same connection carries the next step's tensors."""
    g = af.Graph()
    with g.as_default():
        n = af.placeholder(af.int32, [1], name="n")
        with af.device("/job:worker/task:0"):
            y = af.fill(n, 2.0)
        with af.device("/job:worker/task:1"):
            z = af.reduce_sum(y)
    with af.Session(small_budget_servers[0].target, graph=g) as sess:
        with pytest.raises(errors.ResourceExhaustedError, match=r"/job:worker/task:0 .*-> /job:worker/task:1"):
            sess.run(z, {n: [MiB]}, timeout=30)                          # 4 MiB
        assert sess.run(z, {n: [1000]}, timeout=30) == 2000.0
        assert sess.run(z, {n: [256 * 1024]}, timeout=30) == 2 * 256 * 1024
