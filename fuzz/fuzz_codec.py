"""Fuzzing the frame codec (actorflow/transport/codec.py): random bytes and mutated valid frames into
the decoder.

Properties, for every input:
- `decode_header` and `decode` either succeed or raise FrameError: no other exception, no crash;
- what they accept is consistent: the tensors are views of the input, their sizes add up to the
  declared payload size, which the input really holds;
- decoding allocates nothing in proportion to what a header *declares* (a 4 GiB tensor spec costs
  nothing): peak traced allocation stays within a small multiple of the input's own length;
- a frame made by `encode` decodes to the same tensors.

Two ways to run it:
- in the test suite, bounded (tests/security/test_mem_fuzz.py runs `test_*` below with few examples);
- by hand, for a given time: ``python fuzz/fuzz_codec.py --minutes 10`` prints executions per second
  and totals; ``--atheris`` uses atheris's coverage-guided engine instead, where it is installed.
"""
from __future__ import annotations

import argparse
import logging
import struct
import sys
import time
import tracemalloc

import msgpack
import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from actorflow.transport.codec import ALLOWED_DTYPES, FrameError, decode, decode_header, encode

# Decoding may allocate the header's Python objects (msgpack expands a 1-byte nil into an 8-byte
# list slot) and a little bookkeeping; never anything a header merely declares.
ALLOC_FACTOR = 16
ALLOC_CONST = 256 << 10

EXECUTIONS = [0]
# Each generated input is also fed in this many cheap random variants (byte flips, truncations,
# rewritten length fields): hypothesis's generation costs far more than one decode.
AMPLIFY = [4]
MEASURE_EVERY = 16         # variants measured with tracemalloc (it slows decoding about 4x)


def check_with_variants(data: bytes) -> None:
    """`check_frame(data)`, then AMPLIFY[0] random variants of it."""
    check_frame(data)
    if not data:
        return
    rng = np.random.default_rng(int.from_bytes(data[-8:].rjust(8, b"\0"), "little") ^ len(data))
    buf = np.frombuffer(data, np.uint8)
    for k in range(AMPLIFY[0]):
        v = buf.copy()
        op = rng.integers(0, 4)
        if op == 0:
            idx = rng.integers(0, len(v), rng.integers(1, 4))
            v[idx] ^= rng.integers(1, 256, len(idx), dtype=np.uint8)
        elif op == 1:
            v = v[:rng.integers(0, len(v))]
        elif op == 2 and len(v) >= 4:
            v[:4] = np.frombuffer(struct.pack("<I", int(rng.integers(0, len(v) + 8))), np.uint8)
        else:
            v = np.concatenate([v, rng.integers(0, 256, rng.integers(1, 32), dtype=np.uint8)])
        check_frame(v.tobytes(), measure=k % MEASURE_EVERY == 0)


def check_frame(data: bytes, measure: bool = True) -> list | None:
    """One execution: decodes `data` as a whole frame; returns its tensors, or None if refused."""
    EXECUTIONS[0] += 1
    if measure:
        tracemalloc.start()
    try:
        try:
            header, off = decode_header(data)
            tensors = decode(header, data, off)
        except FrameError:
            return None
        finally:
            if measure:
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
                assert peak <= ALLOC_FACTOR * len(data) + ALLOC_CONST, \
                    f"decoding {len(data)} bytes allocated {peak} bytes"
    except FrameError:
        return None
    mv = memoryview(data)
    assert off + header["n"] == len(mv)
    assert sum(t.nbytes for t in tensors) == header["n"]
    for t, (ds, shape, nbytes) in zip(tensors, header["t"]):
        assert t.dtype == np.dtype(ds) and list(t.shape) == shape and t.nbytes == nbytes
        assert t.base is not None or t.nbytes == 0        # a view of the input, never a copy
    return tensors


# -- strategies -----------------------------------------------------------------------------------
DTYPES = sorted(ALLOWED_DTYPES)
msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.floats(allow_nan=True) | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=5), inner, max_size=5),
    max_leaves=20)
dims = st.one_of(st.integers(0, 6), st.sampled_from([0, 1, 2**31, 2**32 + 1, 2**40, 2**40 + 1, 2**63, -1]))
specs = st.lists(st.tuples(st.sampled_from(DTYPES + ["<c8", "O", ">f4", "", "<f4\0"]),
                           st.lists(dims, max_size=5),
                           st.one_of(st.integers(0, 64), st.sampled_from([-1, 2**32, 2**62, 2**64 - 1]))),
                 max_size=4)


@st.composite
def valid_frames(draw):
    """(frame bytes, tensors) as `encode` makes them."""
    tensors = []
    for _ in range(draw(st.integers(0, 3))):
        dt = np.dtype(draw(st.sampled_from(DTYPES)))
        shape = draw(st.lists(st.integers(0, 4), max_size=3))
        n = int(np.prod(shape)) if shape else 1
        raw = draw(st.binary(min_size=n * dt.itemsize, max_size=n * dt.itemsize))
        tensors.append(np.frombuffer(raw, dt).reshape(shape))
    header = draw(st.dictionaries(st.sampled_from(["k", "s", "key", "i", "m", "a", "dead"]), msgpack_values, max_size=4))
    head, bufs = encode(header, tensors)
    return head + b"".join(bytes(b) for b in bufs), tensors


@st.composite
def mutated_frames(draw):
    data, _ = draw(valid_frames())
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "truncate", "extend", "splice", "length"]))
        if op == "flip" and data:
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= draw(st.integers(1, 255))
        elif op == "truncate" and data:
            del data[draw(st.integers(0, len(data) - 1)):]
        elif op == "extend":
            data += draw(st.binary(max_size=64))
        elif op == "splice" and data:
            i = draw(st.integers(0, len(data)))
            data[i:i] = draw(st.binary(min_size=1, max_size=16))
        elif op == "length":
            data[:4] = struct.pack("<I", draw(st.sampled_from([0, 1, 3, 2**20, 2**20 + 1, 2**32 - 1])))
    return bytes(data)


@st.composite
def crafted_frames(draw):
    """Headers built field by field (any msgpack values, any tensor specs), with any payload."""
    header = draw(st.dictionaries(st.sampled_from(["k", "s", "t", "n", "b", "key"]), msgpack_values, max_size=4))
    if draw(st.booleans()):
        header["t"] = [list(s) for s in draw(specs)]
    if draw(st.booleans()):
        header["n"] = draw(st.one_of(st.integers(0, 256), st.sampled_from([-1, 2**32, 2**40, 2**64 - 1])))
    packed = msgpack.packb(header if draw(st.booleans()) else draw(msgpack_values), use_bin_type=True)
    return struct.pack("<I", len(packed)) + packed + draw(st.binary(max_size=256))


FUZZ_SETTINGS = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck),
                     phases=[Phase.explicit, Phase.generate, Phase.shrink])


def make_tests(max_examples: int):
    """The properties as hypothesis tests running `max_examples` each."""
    s = settings(max_examples=max_examples, **FUZZ_SETTINGS)

    @s
    @given(st.binary(max_size=2048))
    def test_random_bytes(data):
        check_with_variants(data)

    @s
    @given(mutated_frames())
    def test_mutated_frames(data):
        check_with_variants(data)

    @s
    @given(crafted_frames())
    def test_crafted_headers(data):
        check_with_variants(data)

    @s
    @given(valid_frames())
    def test_valid_frames_round_trip(frame):
        data, tensors = frame
        got = check_frame(data)
        assert got is not None and len(got) == len(tensors)
        for a, b in zip(got, tensors):
            assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()

    return [test_random_bytes, test_mutated_frames, test_crafted_headers, test_valid_frames_round_trip]


# -- by hand -------------------------------------------------------------------------------------
def run_for(minutes: float, batch: int = 200, report_every: float = 30.0, name: str = "codec",
            tests_factory=make_tests) -> int:
    """Runs the properties round-robin, `batch` examples at a time, for `minutes`, printing
    executions per second as it goes."""
    tests = tests_factory(batch)
    start = time.monotonic()
    last = start
    calls = 0
    while time.monotonic() - start < minutes * 60:
        tests[calls % len(tests)]()
        calls += 1
        now = time.monotonic()
        if now - last >= report_every:
            last = now
            print(f"[{name}] {now - start:7.0f} s  {EXECUTIONS[0]:>10} executions  "
                  f"{EXECUTIONS[0] / (now - start):8.0f}/s", flush=True)
    elapsed = time.monotonic() - start
    print(f"[{name}] done: {EXECUTIONS[0]} executions in {elapsed:.0f} s ({EXECUTIONS[0] / elapsed:.0f}/s), "
          f"{calls * batch} generated inputs ({calls} runs of {batch} examples over {len(tests)} properties), "
          "no failure", flush=True)
    return 0


def atheris_main(one_input) -> int:
    try:
        import atheris
    except ImportError:
        print("atheris is not installed (pip install atheris; it needs clang/libFuzzer to build)", file=sys.stderr)
        return 2
    atheris.instrument_all()
    atheris.Setup([sys.argv[0]] + [a for a in sys.argv[1:] if a.startswith("-") and a != "--atheris"], one_input)
    atheris.Fuzz()
    return 0


def _atheris_input(data: bytes) -> None:
    check_frame(data, measure=False)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=200, help="examples per property run")
    ap.add_argument("--amplify", type=int, default=64, help="random variants decoded per generated input")
    ap.add_argument("--atheris", action="store_true", help="use atheris (libFuzzer) instead of hypothesis")
    args, _ = ap.parse_known_args(argv)
    quiet = logging.getLogger("actorflow")
    level = quiet.level
    quiet.setLevel(logging.ERROR)     # every refused input logs a warning
    if args.atheris:
        return atheris_main(_atheris_input)
    AMPLIFY[0] = args.amplify
    try:
        return run_for(args.minutes, args.batch)
    finally:
        quiet.setLevel(level)


if __name__ == "__main__":
    sys.exit(main())
