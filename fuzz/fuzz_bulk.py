"""Fuzzing the bulk-frame parser (actorflow/transport/bulk.py): byte streams cut into random chunks
fed to the BufferedProtocol `BulkStream`, with the reader of aiohttp's messages announcing (or not)
bulk payloads at random points.

Properties, for every input:
- the socket-facing methods (`get_buffer`, `buffer_updated`) never raise: a malformed stream
  aborts the transport; only the reader's calls (`announce`, `take`) raise, and only FrameError;
- a payload is allocated only for an announced tensor of exactly its announced size (a discarded
  one is never allocated); peak traced allocation stays within the announced sizes plus a constant
  (the scratch buffer and the bytes kept while a bulk frame waits for its header);
- a well-formed stream, whatever the cuts and whenever the reader speaks, gives aiohttp exactly
  the bytes of the ordinary frames and the reader every payload, bit for bit.

Run bounded in the suite (tests/security/test_mem_fuzz.py) or by hand:
``python fuzz/fuzz_bulk.py --minutes 10`` (``--atheris`` where atheris is installed).
"""
from __future__ import annotations

import argparse
import logging
import os
import struct
import sys
import tracemalloc

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuzz_codec import EXECUTIONS, FUZZ_SETTINGS, atheris_main, run_for  # noqa: E402

from actorflow.transport import bulk as bulk_mod  # noqa: E402
from actorflow.transport.bulk import BULK_OPCODE, BulkStream, bulk_frame_head  # noqa: E402
from actorflow.transport.codec import FrameError  # noqa: E402

ALLOC_CONST = bulk_mod._SCRATCH + bulk_mod._HOLD_MAX + (1 << 20)


class _Transport:
    def __init__(self, inner):
        self.protocol = inner
        self.aborted = False
        self.paused = False

    def get_protocol(self):
        return self.protocol

    def set_protocol(self, p):
        self.protocol = p

    def is_closing(self):
        return self.aborted

    def abort(self):
        self.aborted = True

    def pause_reading(self):
        self.paused = True

    def resume_reading(self):
        self.paused = False

    def write(self, data):
        pass


class _Inner:
    _reading_paused = False

    def __init__(self):
        self.data = bytearray()

    def data_received(self, data):
        assert type(data) is bytes
        self.data += data

    def connection_lost(self, exc):
        pass

    def eof_received(self):
        return False

    def pause_writing(self):
        pass

    def resume_writing(self):
        pass


def ws_frame(payload: bytes, opcode: int = 0x2, fin: bool = True) -> bytes:
    n = len(payload)
    b0 = (0x80 if fin else 0) | opcode
    if n < 126:
        return struct.pack("!BB", b0, n) + payload
    if n < 65536:
        return struct.pack("!BBH", b0, 126, n) + payload
    return struct.pack("!BBQ", b0, 127, n) + payload


def run_stream(wire: bytes, cuts: list, events: list, schedule: list) -> tuple:
    """Feeds `wire` in pieces of the sizes in `cuts` (cycled); before piece i, the reader performs
    `schedule[i]` (cycled) of its `events` ("recv", or (nbytes, discard)). Returns (stream, inner,
    transport, payloads taken, announced bytes not discarded)."""
    EXECUTIONS[0] += 1
    inner = _Inner()
    tr = _Transport(inner)
    stream = BulkStream.install(tr, "fuzz-peer")
    cuts = [max(1, c) for c in cuts] or [len(wire) or 1]
    schedule = schedule or [len(events)]
    announced = 0
    ev = 0
    pos = 0
    i = 0
    payloads = []

    def reader(k):
        nonlocal ev, announced
        for _ in range(k):
            if ev >= len(events):
                break
            e = events[ev]
            ev += 1
            try:
                if e == "recv":
                    stream.received()
                else:
                    nbytes, discard = e
                    stream.announce(nbytes, discard)
                    if not discard:
                        announced += nbytes
            except FrameError:
                pass
        while stream._ready:               # what `take` would hand the reader
            payloads.append(stream._ready.popleft())

    while pos < len(wire) and not tr.aborted:
        reader(schedule[i % len(schedule)])
        buf = stream.get_buffer(-1)        # called even while paused: aiohttp may resume reading
        k = min(len(buf), cuts[i % len(cuts)], len(wire) - pos)
        buf[:k] = wire[pos:pos + k]
        stream.buffer_updated(k)           # must never raise
        pos += k
        i += 1
    reader(len(events))
    return stream, inner, tr, payloads, announced


def _measured_run(wire, cuts, events, schedule):
    tracemalloc.start()
    try:
        result = run_stream(wire, cuts, events, schedule)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def check_stream(wire, cuts, events, schedule, measure=True):
    if not measure:
        stream, inner, tr, payloads, announced = run_stream(wire, cuts, events, schedule)
    else:
        # tracemalloc counts every thread's allocations: another thread of the process (a test
        # suite's) can lift one run's peak. The run is deterministic, so a stream that really
        # allocates too much does so on the second run too; the smaller peak is the stream's.
        (stream, inner, tr, payloads, announced), peak = _measured_run(wire, cuts, events, schedule)
        limit = 3 * len(wire) + announced + ALLOC_CONST
        if peak > limit:
            (stream, inner, tr, payloads, announced), again = _measured_run(wire, cuts, events, schedule)
            peak = min(peak, again)
        assert peak <= limit, \
            f"{peak} bytes allocated for a {len(wire)}-byte stream with {announced} bytes announced"
    sizes = [n for e in events if e != "recv" for n, d in [e] if not d]
    got = [len(p) for p in payloads if p is not None]
    assert len(got) <= len(sizes) and all(n in sizes for n in got), (got, sizes)
    return stream, inner, tr, payloads


# -- strategies -----------------------------------------------------------------------------------
@st.composite
def well_formed(draw):
    """(wire, reader events, expected bytes for aiohttp, expected payloads)."""
    wire = bytearray()
    inner = bytearray()
    events = []
    expect = []
    seq = 0
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["data", "control", "bulk", "fragmented"]))
        if kind == "bulk":
            n = draw(st.sampled_from([0, 1, 7, 1000, 70_000]))
            discard = draw(st.booleans())
            payload = bytes([seq % 251]) * n
            head = ws_frame(b"announcing header")
            wire += head + bulk_frame_head(seq, n) + payload
            inner += head
            events.append((n, discard))
            expect.append(None if discard else payload)
            seq += 1
        elif kind == "control":
            f = ws_frame(draw(st.binary(max_size=20)), draw(st.sampled_from([0x9, 0xA])))
            wire += f
            inner += f
        elif kind == "fragmented":
            f = ws_frame(b"part", 0x2, fin=False) + ws_frame(b"rest", 0x0, fin=True)
            wire += f
            inner += f
            events.append("recv")
        else:
            f = ws_frame(draw(st.binary(max_size=300)))
            wire += f
            inner += f
            events.append("recv")
    return bytes(wire), events, bytes(inner), expect


# Reads cycle through the cuts; one large cut among them keeps an execution to a bounded number of reads.
cuts_st = st.lists(st.sampled_from([1, 2, 3, 9, 10, 14, 100, 4096, 65536, 300_000]), min_size=1, max_size=6).filter(
    lambda c: max(c) >= 4096)
schedule_st = st.lists(st.integers(0, 3), max_size=8)
events_st = st.lists(st.one_of(st.just("recv"),
                               st.tuples(st.sampled_from([0, 1, 8, 100, 4096, 1 << 20]), st.booleans())),
                     max_size=8)


@st.composite
def mutated(draw):
    wire, events, _, _ = draw(well_formed())
    wire = bytearray(wire)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["flip", "truncate", "insert", "opcode", "length"]))
        if op == "flip" and wire:
            i = draw(st.integers(0, len(wire) - 1))
            wire[i] ^= draw(st.integers(1, 255))
        elif op == "truncate" and wire:
            del wire[draw(st.integers(0, len(wire) - 1)):]
        elif op == "insert":
            i = draw(st.integers(0, len(wire)))
            wire[i:i] = draw(st.one_of(st.binary(min_size=1, max_size=12),
                                       st.just(bulk_frame_head(draw(st.integers(0, 3)), 1 << 30))))
        elif op == "opcode" and wire:
            wire[0] = 0x80 | BULK_OPCODE
        elif op == "length":
            wire += struct.pack("!BBQ", 0x80 | BULK_OPCODE, 127, draw(st.sampled_from([0, 7, 8, 2**40, 2**64 - 1])))
    if draw(st.booleans()):
        events = draw(events_st)
    return bytes(wire), events


AMPLIFY = [4]


def check_with_variants(wire, cuts, events, schedule, seed: int) -> None:
    """`check_stream`, then AMPLIFY[0] more runs with random cuts and reader schedules (cheap,
    where hypothesis's generation is not)."""
    check_stream(wire, cuts, events, schedule)
    rng = np.random.default_rng(seed)
    sizes = np.array([1, 2, 3, 5, 9, 10, 14, 100, 4096, 65536])
    for k in range(AMPLIFY[0]):
        c = [int(x) for x in rng.choice(sizes, rng.integers(1, 5))] + [4096]
        sch = [int(x) for x in rng.integers(0, 4, rng.integers(0, 6))]
        check_stream(wire, c, events, sch, measure=k % 16 == 0)


def make_tests(max_examples: int):
    s = settings(max_examples=max_examples, **FUZZ_SETTINGS)

    @s
    @given(st.binary(max_size=4096), cuts_st, events_st, schedule_st, st.integers(0, 2**32))
    def test_random_bytes(wire, cuts, events, schedule, seed):
        check_with_variants(wire, cuts, events, schedule, seed)

    @s
    @given(mutated(), cuts_st, schedule_st, st.integers(0, 2**32))
    def test_mutated_streams(case, cuts, schedule, seed):
        wire, events = case
        check_with_variants(wire, cuts, events, schedule, seed)

    @s
    @given(well_formed(), cuts_st, schedule_st)
    def test_well_formed_streams_split_exactly(case, cuts, schedule):
        wire, events, inner_bytes, expect = case
        stream, inner, tr, payloads = check_stream(wire, cuts, events, schedule)
        assert not tr.aborted and not tr.paused
        assert bytes(inner.data) == inner_bytes
        assert [None if p is None else bytes(p) for p in payloads] == expect

    return [test_random_bytes, test_mutated_streams, test_well_formed_streams_split_exactly]


def _atheris_input(data: bytes) -> None:
    import atheris
    fdp = atheris.FuzzedDataProvider(data)
    cuts = [fdp.ConsumeIntInRange(1, 70_000) for _ in range(fdp.ConsumeIntInRange(1, 4))]
    events = ["recv" if fdp.ConsumeBool() else (fdp.ConsumeIntInRange(0, 1 << 20), fdp.ConsumeBool())
              for _ in range(fdp.ConsumeIntInRange(0, 6))]
    schedule = [fdp.ConsumeIntInRange(0, 3) for _ in range(fdp.ConsumeIntInRange(0, 6))]
    check_stream(fdp.ConsumeBytes(fdp.remaining_bytes()), cuts, events, schedule, measure=False)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=200, help="examples per property run")
    ap.add_argument("--amplify", type=int, default=32, help="runs with random cuts per generated stream")
    ap.add_argument("--atheris", action="store_true", help="use atheris (libFuzzer) instead of hypothesis")
    args, _ = ap.parse_known_args(argv)
    quiet = logging.getLogger("actorflow")
    level = quiet.level
    quiet.setLevel(logging.ERROR)     # every refused input logs a warning
    if args.atheris:
        return atheris_main(_atheris_input)
    AMPLIFY[0] = args.amplify
    try:
        return run_for(args.minutes, args.batch, name="bulk", tests_factory=make_tests)
    finally:
        quiet.setLevel(level)


if __name__ == "__main__":
    sys.exit(main())
