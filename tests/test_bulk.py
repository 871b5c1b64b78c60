"""Bulk tensor frames (actorflow.transport.bulk): the stream splitter as a hypothesis property, the
negotiated path between real processes, and refusal of malformed bulk frames.

The splitter's contract: whatever way the socket cuts the byte stream, aiohttp receives exactly the
bytes of every ordinary frame, in order, and `take()` returns every bulk payload, in order, bit for bit.
Each bulk frame directly follows the data message that announces it (issue 15: no payload is
accepted, or allocated, for a bulk frame that no header announced).
"""
from __future__ import annotations

import asyncio
import struct

import aiohttp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actorflow.transport.bulk import BULK_HEADER, BULK_MIN, BULK_OPCODE, BulkStream, bulk_frame_head
from actorflow.transport.channel import TOKEN_HEADER, Peer
from actorflow.transport.codec import FrameError, encode

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class FakeTransport:
    def __init__(self, inner):
        self.protocol = inner
        self.aborted = False
        self.paused = False
        self.written: list[bytes] = []

    def pause_reading(self):
        self.paused = True

    def resume_reading(self):
        self.paused = False

    def get_protocol(self):
        return self.protocol

    def set_protocol(self, p):
        self.protocol = p

    def is_closing(self):
        return self.aborted

    def abort(self):
        self.aborted = True

    def write(self, data):
        self.written.append(bytes(data))


class FakeInner:
    def __init__(self):
        self.data = bytearray()
        self.lost = None
        self.paused = 0

    def data_received(self, data):
        assert type(data) is bytes
        self.data += data

    def connection_lost(self, exc):
        self.lost = exc

    def eof_received(self):
        return False

    def pause_writing(self):
        self.paused += 1

    def resume_writing(self):
        self.paused -= 1


def ws_frame(payload: bytes, opcode: int = 0x2, mask: bytes | None = None, fin: bool = True) -> bytes:
    """An RFC 6455 frame as aiohttp (or a browser) would put it on the wire."""
    n = len(payload)
    b0 = (0x80 if fin else 0) | opcode
    mbit = 0x80 if mask is not None else 0
    if n < 126:
        head = struct.pack("!BB", b0, n | mbit)
    elif n < 65536:
        head = struct.pack("!BBH", b0, 126 | mbit, n)
    else:
        head = struct.pack("!BBQ", b0, 127 | mbit, n)
    if mask is not None:
        head += mask
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + payload


def feed(stream: BulkStream, data: bytes, cuts) -> None:
    """Delivers `data` the way a socket would: into whatever buffer the protocol offers, in pieces."""
    pos = 0
    cuts = list(cuts) or [len(data)]
    i = 0
    while pos < len(data):
        buf = stream.get_buffer(-1)
        k = min(len(buf), cuts[i % len(cuts)], len(data) - pos)
        buf[:k] = data[pos:pos + k]
        stream.buffer_updated(k)
        pos += k
        i += 1


def install():
    inner = FakeInner()
    tr = FakeTransport(inner)
    stream = BulkStream.install(tr, "test-peer")
    assert tr.protocol is stream
    return stream, inner, tr


frames = st.lists(
    st.one_of(
        st.tuples(st.just("ws"), st.sampled_from([0, 1, 125, 126, 200, 65535, 65536, 70000]),
                  st.sampled_from([0x1, 0x2, 0x9, 0xA]), st.booleans()),
        st.tuples(st.just("bulk"), st.sampled_from([0, 1, 7, 1000, 65536, 300_000]), st.just(0), st.just(False)),
    ),
    min_size=1, max_size=8)


# Reads cycle through `cuts`; one large cut among them keeps a property run to a bounded number of reads.
CUTS = st.lists(st.sampled_from([1, 2, 3, 7, 10, 14, 100, 4096, 65536, 300_000]), min_size=1, max_size=6).filter(
    lambda c: max(c) >= 4096)


@SETTINGS
@given(frames, CUTS, st.integers(0, 2**32 - 1))
def test_every_cut_of_the_stream_splits_the_same(spec, cuts, seed):
    rng = np.random.default_rng(seed)
    wire = bytearray()
    expect_inner = bytearray()
    expect_bulk = []
    reader = []           # what the reader of aiohttp's messages will say, message by message
    seq = 0
    for kind, n, opcode, masked in spec:
        payload = rng.integers(0, 256, n, np.uint8).tobytes()
        if kind == "bulk":
            announcing = ws_frame(b"header announcing a bulk payload")
            wire += announcing + bulk_frame_head(seq, n) + payload
            expect_inner += announcing
            expect_bulk.append(payload)
            reader.append(n)
            seq += 1
        else:
            if opcode >= 0x8:
                payload = payload[:125]       # control frames are short
            else:
                reader.append(None)
            f = ws_frame(payload, opcode, mask=rng.integers(0, 256, 4, np.uint8).tobytes() if masked else None)
            wire += f
            expect_inner += f
    stream, inner, tr = install()
    # The reader runs ahead of the socket here: announcements wait, matched by message position.
    for n in reader:
        stream.received() if n is None else stream.announce(n)
    feed(stream, bytes(wire), cuts)
    assert bytes(inner.data) == bytes(expect_inner)
    got = [bytes(b) for b in stream._ready]
    assert got == expect_bulk
    assert not tr.aborted and not tr.paused


async def test_take_waits_for_the_payload_and_sees_a_lost_connection():
    stream, inner, tr = install()
    payload = np.arange(300_000, dtype=np.uint8).tobytes()
    waiter = asyncio.ensure_future(stream.take(len(payload)))
    await asyncio.sleep(0)
    feed(stream, ws_frame(b"header") + bulk_frame_head(0, len(payload)) + payload[:1000], [4096])
    assert not waiter.done()
    feed(stream, payload[1000:], [65536])
    assert bytes(await waiter) == payload
    # A connection lost mid-payload fails the next take and reaches aiohttp too.
    feed(stream, ws_frame(b"header") + bulk_frame_head(1, 10) + b"12345", [4096])
    waiter = asyncio.ensure_future(stream.take(10))
    await asyncio.sleep(0)
    stream.connection_lost(None)
    with pytest.raises(ConnectionResetError, match="test-peer"):
        await waiter
    assert inner.lost is None or isinstance(inner.lost, Exception)


@pytest.mark.parametrize("wire, match", [
    (bulk_frame_head(1, 4) + b"abcd", "arrived where 0 was expected"),
    (struct.pack("!BBQ", 0x80 | BULK_OPCODE, 127 | 0x80, 12) + b"mask" + b"\0" * 12, "masked"),
    (struct.pack("!BBQ", BULK_OPCODE, 127, 12) + b"\0" * 12, "fragmented"),
    (struct.pack("!BB", 0x80 | BULK_OPCODE, 4) + b"abcd", "invalid length 4"),
    (struct.pack("!BBQ", 0x80 | BULK_OPCODE, 127, 1 << 63), "invalid length"),
])
async def test_malformed_bulk_frame_aborts_the_socket(wire, match, caplog):
    stream, inner, tr = install()
    waiter = asyncio.ensure_future(stream.take(4))
    await asyncio.sleep(0)
    feed(stream, ws_frame(b"header") + wire, [7])
    assert tr.aborted
    with pytest.raises(FrameError, match=match):
        await waiter
    assert "refusing malformed bulk frame from test-peer" in caplog.text


async def test_write_flow_control_reaches_aiohttp_and_drain():
    stream, inner, tr = install()
    stream.pause_writing()
    assert inner.paused == 1
    d = asyncio.ensure_future(stream.drain())
    await asyncio.sleep(0)
    assert not d.done()
    stream.resume_writing()
    await d
    assert inner.paused == 0
    await stream.drain()          # not paused: returns at once


def test_encode_marks_large_payloads_bulk():
    from actorflow.transport.codec import decode_header
    small, _ = encode({"k": "t"}, [np.zeros(10, np.float32)], bulk_min=BULK_MIN)
    large, bufs = encode({"k": "t"}, [np.zeros(BULK_MIN // 4, np.float32)], bulk_min=BULK_MIN)
    assert "b" not in decode_header(small)[0]
    h, off = decode_header(large)
    assert h["b"] == 1 and h["n"] == BULK_MIN and off == len(large) and sum(len(b) for b in bufs) == BULK_MIN


# ---------------------------------------------------------------------------------------------------
# Between real processes
# ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster():
    from actorflow.cluster import LocalCluster
    with LocalCluster(ps=0, workers=1) as c:
        yield c


def _address(cluster) -> str:
    return cluster.spec.task_address("worker", 0)


async def test_peers_negotiate_bulk_and_stay_in_step(cluster):
    peer = Peer(_address(cluster), cluster.token, lambda *a: None, connect_timeout=10)
    try:
        conn = await peer.connection()
        assert conn.bulk is not None
        sizes = [0, 1, BULK_MIN - 1, BULK_MIN, BULK_MIN + 3, 3 << 20, 17, 9 << 20]
        # Posted back to back, bulk and inline payloads interleave on the wire; every call is answered.
        calls = [conn.call("ping", tensors=[np.ones(n, np.uint8)], timeout=30) for n in sizes]
        results = await asyncio.gather(*calls)
        assert all(r["task"] == "/job:worker/task:0" for r, _ in results)
        assert conn.bulk.seq_out == sum(n >= BULK_MIN for n in sizes)
    finally:
        await peer.close()


async def test_tensors_of_every_size_cross_both_ways_intact(cluster):
    import actorflow as af
    g = af.Graph()
    with g.as_default(), af.device("/job:worker/task:0"):
        x = af.placeholder(af.float32, [None], name="x")
        y = af.identity(x) * 2.0
    sizes = [0, 5, BULK_MIN // 4 - 1, BULK_MIN // 4, BULK_MIN // 4 + 1, 1 << 20, 5 << 20]
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    with af.Session(cluster.target, graph=g) as sess:
        outs = await asyncio.gather(*(sess.arun(y, {x: v}) for v in xs))
    for v, out in zip(xs, outs):
        np.testing.assert_array_equal(out, v * 2.0)


async def _raw_bulk_connection(cluster):
    http = aiohttp.ClientSession()
    ws = await http.ws_connect(f"http://{_address(cluster)}/ws", headers={TOKEN_HEADER: cluster.token,
                                                                          BULK_HEADER: "1"})
    assert ws._response.headers.get(BULK_HEADER) == "1"
    ws._writer.use_mask = False
    return http, ws


async def _await_closed(ws):
    async with asyncio.timeout(10):
        msg = await ws.receive()
        while msg.type not in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSING,
                               aiohttp.WSMsgType.ERROR):
            msg = await ws.receive()


@pytest.mark.parametrize("case", ["wrong-seq", "size-mismatch", "masked", "unannounced-without-negotiation"])
async def test_malformed_bulk_frame_closes_that_connection_only(cluster, case):
    bystander = Peer(_address(cluster), cluster.token, lambda *a: None, connect_timeout=10)
    try:
        other = await bystander.connection()
        if case == "unannounced-without-negotiation":
            http = aiohttp.ClientSession()
            ws = await http.ws_connect(f"http://{_address(cluster)}/ws", headers={TOKEN_HEADER: cluster.token})
            head, _ = encode({"k": "t", "s": 1, "key": ["x"]}, [np.zeros(BULK_MIN, np.uint8)], bulk_min=BULK_MIN)
            await ws.send_bytes(head)
        else:
            http, ws = await _raw_bulk_connection(cluster)
            tr = ws._writer.transport
            head, _ = encode({"k": "t", "s": 1, "key": ["x"]}, [np.zeros(BULK_MIN, np.uint8)], bulk_min=BULK_MIN)
            await ws.send_bytes(head)
            if case == "wrong-seq":
                tr.write(bulk_frame_head(5, BULK_MIN) + b"\0" * BULK_MIN)
            elif case == "size-mismatch":
                tr.write(bulk_frame_head(0, 8) + b"\0" * 8)
            else:
                tr.write(struct.pack("!BBQ", 0x80 | BULK_OPCODE, 127 | 0x80, 8 + BULK_MIN) + b"mask"
                         + b"\0" * (8 + BULK_MIN))
        await _await_closed(ws)
        await ws.close()
        await http.close()
        result, _ = await other.call("ping", timeout=5)
        assert result["task"] == "/job:worker/task:0"
        assert not other.closed
    finally:
        await bystander.close()


async def test_bulk_header_without_a_websocket_handshake_leaves_http_alone(cluster):
    # The stream is only installed for a real upgrade; the same keep-alive connection then serves HTTP.
    conn = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(connector=conn) as http:
        headers = {TOKEN_HEADER: cluster.token, BULK_HEADER: "1"}
        async with http.get(f"http://{_address(cluster)}/ws", headers=headers) as r:
            assert r.status >= 400
            await r.read()
        for _ in range(3):
            async with http.get(f"http://{_address(cluster)}/health", headers=headers) as r:
                assert r.status == 200
                assert (await r.json())["task"] == "/job:worker/task:0"


def test_accept_bulk_needs_the_header_and_a_real_handshake():
    from types import SimpleNamespace

    from actorflow.transport.channel import accept_bulk

    class WS:
        def __init__(self, ok):
            self.ok = ok
            self.headers = {}

        def can_prepare(self, request):
            return SimpleNamespace(ok=self.ok)

    def request(headers):
        inner = FakeInner()
        return SimpleNamespace(headers=headers, transport=FakeTransport(inner)), inner

    req, inner = request({BULK_HEADER: "1"})
    ws = WS(ok=False)
    assert accept_bulk(req, ws, "x") is None and req.transport.protocol is inner and not ws.headers
    req, inner = request({})
    assert accept_bulk(req, WS(ok=True), "x") is None and req.transport.protocol is inner
    req, inner = request({BULK_HEADER: "1"})
    ws = WS(ok=True)
    stream = accept_bulk(req, ws, "x")
    assert req.transport.protocol is stream and ws.headers[BULK_HEADER] == "1"
    stream.uninstall()
    assert req.transport.protocol is inner
