"""Issue 15, finding 5: a peer holding the cluster token must not be able to grow a worker's memory
without limit. Each test connects to a real worker process as a misbehaving peer (a raw websocket),
sends one flooding pattern, and reads the worker's resident set size (VmRSS in /proc/PID/status):
it must stay within a stated bound while the flood lasts, return near its baseline once the
connection is closed, and the worker must still serve a good client afterwards.

The worker runs with small limits (given by environment variables, as an operator would) so that
each flood crosses them with modest volume: 48 MiB in flight per connection, 64 MiB per process,
16 MiB of tensors waiting per peer, and a 3 s grace period for tensors of steps that never start;
and with glibc's mmap threshold fixed at 1 MiB, so that freed buffers leave RSS at once.
"""
from __future__ import annotations

import asyncio
import itertools
import struct

import aiohttp
import msgpack
import numpy as np
import pytest

import actorflow as af
from actorflow.cluster import LocalCluster
from actorflow.transport.bulk import BULK_HEADER, BULK_MIN, bulk_frame_head
from actorflow.transport.channel import TOKEN_HEADER
from actorflow.transport.codec import decode_header, encode

pytestmark = pytest.mark.timeout(120)

MiB = 1 << 20
LIMITS = {"ACTORFLOW_MAX_INFLIGHT_PER_CONNECTION": "48MiB", "ACTORFLOW_MAX_INFLIGHT_PER_PROCESS": "64MiB",
          "ACTORFLOW_MAX_PENDING_PER_PEER": "16MiB", "ACTORFLOW_PENDING_GRACE_S": "3",
          # glibc raises its mmap threshold to the size of the largest buffer freed so far (up to
          # 32 MiB) and then keeps up to twice that in its heap for reuse: RSS that is reused, not
          # leaked, but it would blur "back near baseline". A fixed threshold returns every freed
          # buffer of 1 MiB or more to the system at once (glibc ignores this elsewhere).
          "MALLOC_MMAP_THRESHOLD_": str(1 << 20)}
# RSS may move by this much for reasons unrelated to the flood (aiohttp's buffers, the allocator).
SLACK = 40 * MiB


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("mem-logs")


@pytest.fixture(scope="module")
def cluster(log_dir):
    with LocalCluster(ps=0, workers=1, env=LIMITS, log_dir=str(log_dir)) as c:
        yield c


def rss(cluster) -> int:
    """The worker's resident set size in bytes."""
    pid = cluster.pids()["/job:worker/task:0"]
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS line")


async def settled_rss(cluster, above: int | None = None, within: int = SLACK, wait: float = 10.0) -> int:
    """The worker's RSS once it is at most `above + within` (or after `wait` seconds)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + wait
    r = rss(cluster)
    while above is not None and r > above + within and loop.time() < end:
        await asyncio.sleep(0.1)
        r = rss(cluster)
    return r


def address(cluster) -> str:
    return cluster.spec.task_address("worker", 0)


async def connect(cluster, bulk: bool = False):
    http = aiohttp.ClientSession()
    headers = {TOKEN_HEADER: cluster.token, "X-Actorflow-Task": "/job:worker/task:7"}
    if bulk:
        headers[BULK_HEADER] = "1"
    ws = await http.ws_connect(f"http://{address(cluster)}/ws", headers=headers, max_msg_size=0)
    if bulk:
        assert ws._response.headers.get(BULK_HEADER) == "1"
        ws._writer.use_mask = False
    return http, ws


_ids = itertools.count(1)


async def call(ws, method: str, tensors=(), header_only: bool = False):
    """Sends one RPC; returns the reply header (None with `header_only`: the payload is not sent)."""
    i = next(_ids)
    head, bufs = encode({"k": "call", "m": method, "i": i, "a": {}}, tensors)
    if header_only:
        await ws.send_bytes(head)
        return i
    for m in _messages(head, bufs):
        await ws.send_bytes(m)
    return await reply(ws, i)


async def reply(ws, i: int, timeout: float = 60.0) -> dict:
    async with asyncio.timeout(timeout):
        while True:
            msg = await ws.receive()
            assert msg.type == aiohttp.WSMsgType.BINARY, msg
            h, _ = decode_header(msg.data)
            if h.get("k") == "reply" and h.get("i") == i:
                return h


def _messages(head, bufs, chunk=4 * MiB):
    total = sum(len(b) for b in bufs)
    if total <= chunk:
        return [head + b"".join(bytes(b) for b in bufs)]
    payload = memoryview(b"".join(bytes(b) for b in bufs))
    return [head] + [payload[k:k + chunk] for k in range(0, total, chunk)]


async def closed(ws, timeout: float = 10.0) -> bool:
    try:
        async with asyncio.timeout(timeout):
            while True:
                msg = await ws.receive()
                if msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSING,
                                aiohttp.WSMsgType.ERROR):
                    return True
    except TimeoutError:
        return False


def assert_good_client_served(cluster):
    g = af.Graph()
    with g.as_default(), af.device("/job:worker/task:0"):
        x = af.placeholder(af.float32, [None], name="x")
        y = x * 2.0
    big = np.arange(16 * MiB // 4, dtype=np.float32)       # bulk path both ways
    with af.Session(cluster.target, graph=g) as sess:
        np.testing.assert_array_equal(sess.run(y, {x: big}, timeout=30), big * 2.0)


def unannounced(n):
    return bulk_frame_head(0, n)


@pytest.mark.parametrize("case", ["unannounced", "wrong-size"])
async def test_bulk_frames_need_an_announcing_header_of_their_size(cluster, log_dir, case):
    """Old behaviour: bulk frames (opcode 0x3) sent with no header announcing them were read into
    freshly allocated arrays and queued without limit; 48 frames of 8 MiB made the worker's RSS
    grow by about 369 MiB, still held after the connection closed. A header announcing 1 KiB
    followed by a bulk frame declaring 1 GiB was allocated at the frame's size too. Now the first
    such frame closes the connection with a logged error naming the peer, nothing is allocated for
    it, and the worker's RSS stays within SLACK of its baseline."""
    before = rss(cluster)
    http, ws = await connect(cluster, bulk=True)
    tr = ws._writer.transport
    sent = 0
    try:
        if case == "wrong-size":
            head, _ = encode({"k": "t", "s": 1, "key": ["x"]}, [np.zeros(BULK_MIN, np.uint8)], bulk_min=BULK_MIN)
            await ws.send_bytes(head)
            tr.write(bulk_frame_head(0, 1 << 30))
        chunk = b"\1" * (8 * MiB)
        for seq in range(32):                     # up to 256 MiB
            if tr.is_closing():
                break
            if case == "unannounced":
                tr.write(bulk_frame_head(seq, len(chunk)))
            tr.write(chunk)
            sent += len(chunk)
            await asyncio.sleep(0.01)
            peak = rss(cluster)
            assert peak < before + SLACK, f"RSS grew by {(peak - before) / MiB:.0f} MiB after {sent / MiB:.0f} MiB"
        assert await closed(ws), "the worker kept the connection open"
    finally:
        await ws.close()
        await http.close()
    after = await settled_rss(cluster, before)
    assert after < before + SLACK, f"RSS {(after - before) / MiB:.0f} MiB above baseline after close"
    text = (log_dir / "worker-0.log").read_text()
    want = "follows no header that announces it" if case == "unannounced" else "where its header announced"
    assert want in text and "/job:worker/task:7" in text
    await asyncio.to_thread(assert_good_client_served, cluster)


async def test_tensors_for_steps_that_never_run_are_capped_and_expire(cluster, log_dir):
    """Old behaviour: 20,000 tensor frames of 5 KiB, each for a step id that never runs on the
    worker, were kept in its rendezvous for ever: +100 MiB of RSS, never released. Here 10,000
    frames of 10 KiB (100 MiB again, in fewer messages) are sent. Now one peer may
    have at most 16 MiB (the configured ACTORFLOW_MAX_PENDING_PER_PEER) waiting: the worker's RSS
    stays within that plus SLACK while 100 MiB are sent, the tensors expire after the 3 s grace
    period, and RSS returns near its baseline."""
    before = rss(cluster)
    http, ws = await connect(cluster)
    tensor = np.ones(10 * 1024 // 4, np.float32)
    try:
        for s in range(10_000):
            head, bufs = encode({"k": "t", "s": 1_000_000 + s, "key": ["t:0;/job:worker/task:7->x", "f"]}, [tensor])
            await ws.send_bytes(head + bytes(bufs[0]))
            if s % 1000 == 999:
                h = await call(ws, "ping")           # the worker has read everything sent so far
                assert "e" not in h
                peak = rss(cluster)
                assert peak < before + 16 * MiB + SLACK, f"RSS grew by {(peak - before) / MiB:.0f} MiB"
        # Still connected: only the grace period can free what was accepted.
        async with asyncio.timeout(15):
            while "did not start here within 3 s" not in (log_dir / "worker-0.log").read_text():
                await asyncio.sleep(0.1)
        after = await settled_rss(cluster, before, within=10 * MiB)
        assert after < before + 10 * MiB, f"RSS {(after - before) / MiB:.0f} MiB above baseline after expiry"
    finally:
        await ws.close()
        await http.close()
    text = (log_dir / "worker-0.log").read_text()
    assert "tensors waiting from one peer" in text and "/job:worker/task:7" in text
    await asyncio.to_thread(assert_good_client_served, cluster)


async def test_tensors_of_a_closed_peer_are_freed_at_once(cluster):
    """Old behaviour: tensors received for steps that never ran stayed after their sender's
    connection closed (three peers sending 15 MiB each left the worker 45 MiB larger). Now closing
    a connection drops what it delivered for steps that have not started, without waiting for the
    grace period: the worker's RSS is back near baseline well before the 3 s grace."""
    before = rss(cluster)
    conns = [await connect(cluster) for _ in range(3)]
    tensor = np.ones(256 * 1024 // 4, np.float32)
    try:
        for k, (_, ws) in enumerate(conns):
            for s in range(60):                          # 15 MiB each, under the per-peer cap
                head, bufs = encode({"k": "t", "s": 2_000_000 + 100 * k + s, "key": ["t:0;/job:worker/task:7->x", "f"]},
                                    [tensor])
                await ws.send_bytes(head + bytes(bufs[0]))
            assert "e" not in await call(ws, "ping")
    finally:
        for http, ws in conns:
            await ws.close()
            await http.close()
    after = await settled_rss(cluster, before, within=12 * MiB, wait=1.5)
    assert after < before + 12 * MiB, f"RSS {(after - before) / MiB:.0f} MiB above baseline"


async def test_huge_announcements_are_refused_naming_the_peer(cluster):
    """Old behaviour: each connection could announce a payload of up to 4 GiB and the worker
    allocated it up front, so a few connections announcing 4 GiB each and trickling bytes could
    take all of its memory. Now an announcement over the connection's in-flight budget (48 MiB
    here) is answered at once with ResourceExhaustedError naming the peer; announcements that
    together exceed the process budget (64 MiB) are refused the same way; the refused payload's
    bytes are read and dropped; the budget is given back when a payload completes or its
    connection closes; and RSS stays within the bytes actually sent plus SLACK."""
    before = rss(cluster)
    conns = [await connect(cluster) for _ in range(4)]
    (_, a), (_, b), (_, c), (_, d) = conns
    try:
        # Over the per-connection budget: refused at once, and the connection keeps working.
        huge = {"k": "call", "m": "ping", "i": 1, "a": {}, "t": [["|u1", [3 << 30], 3 << 30]], "n": 3 << 30}
        packed = msgpack.packb(huge, use_bin_type=True)
        await a.send_bytes(struct.pack("<I", len(packed)) + packed)
        h = await reply(a, 1)
        assert h["e"][0] == af.errors.ResourceExhaustedError.error_code
        assert "/job:worker/task:7" in h["e"][1] and "connection" in h["e"][1]
        await a.close()             # else its next 3 GiB would be read and dropped as that payload
        # 24 MiB announced on each of b, c and d: two fit the process budget of 64 MiB, one does not.
        payload = np.ones(24 * MiB, np.uint8)
        ids = {ws: await call(ws, "ping", [payload], header_only=True) for ws in (b, c, d)}
        readers = {asyncio.ensure_future(reply(ws, ids[ws])): ws for ws in (b, c, d)}
        done, _ = await asyncio.wait(readers, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        assert len(done) == 1
        first = done.pop()
        h = first.result()
        assert h["e"][0] == af.errors.ResourceExhaustedError.error_code and "/job:worker/task:0" in h["e"][1]
        refused = readers.pop(first)
        (rx, x), (ry, y) = readers.items()
        assert rss(cluster) < before + SLACK, "announced but unsent payloads must not be resident"
        # y sends its payload: it completes, is answered, and its budget comes back.
        for m in _messages(b"", [payload]):
            await y.send_bytes(m)
        assert "e" not in await ry
        # x closes half way: its budget comes back too.
        for m in _messages(b"", [payload[:12 * MiB]]):
            await x.send_bytes(m)
        rx.cancel()
        await x.close()
        # The refused payload is read and dropped; that connection then works again.
        for m in _messages(b"", [payload]):
            await refused.send_bytes(m)
        assert "e" not in await call(refused, "ping")
        # With x's and y's budget back, two more 24 MiB payloads fit.
        conns.append(await connect(cluster))
        got = await asyncio.gather(call(conns[-1][1], "ping", [payload]), call(refused, "ping", [payload]))
        assert all("e" not in h for h in got), got
        del payload
    finally:
        for http, ws in conns:
            await ws.close()
            await http.close()
    after = await settled_rss(cluster, before)
    assert after < before + SLACK, f"RSS {(after - before) / MiB:.0f} MiB above baseline after close"
    await asyncio.to_thread(assert_good_client_served, cluster)
