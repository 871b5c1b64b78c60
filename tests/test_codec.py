"""The wire codec (actorflow.transport.codec): round trips, zero-copy decoding, chunking, and refusal of
malformed frames, as hypothesis properties.

The contract under test: `encode` + `decode_header` + `decode` give back every tensor bit for bit with
its dtype and shape, and the header's other entries unchanged; decoded tensors are views of the received
bytes; and any frame that is not one `encode` could have produced raises `FrameError` (never another
exception type), so a transport can refuse it and carry on.
"""
from __future__ import annotations

import struct

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from actorflow.transport.codec import (
    ALLOWED_DTYPES,
    CHUNK,
    MAX_FRAME,
    MAX_HEADER,
    FrameError,
    decode,
    decode_header,
    encode,
    split_payload,
)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DTYPES = sorted(ALLOWED_DTYPES)


# ---------------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------------

def arrays(max_side: int = 6, max_dims: int = 4):
    """Arrays of every allowed dtype, 0-d and empty shapes included, with arbitrary bit patterns
    (NaN payloads, infinities, subnormals) since the codec must not touch the bits."""
    shapes = hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=0, max_side=max_side)
    return st.sampled_from(DTYPES).flatmap(
        lambda ds: hnp.arrays(np.dtype(ds), shapes, elements=_bits(np.dtype(ds))))


def _bits(dt: np.dtype):
    """Elements as raw bit patterns, so float arrays include every NaN/inf/subnormal."""
    if dt.kind == "f":
        uint = np.dtype(f"<u{dt.itemsize}")
        return st.integers(0, 2 ** (8 * dt.itemsize) - 1).map(lambda i: np.array(i, uint).view(dt)[()])
    if dt.kind == "c":      # two floats' bit patterns
        uint = np.dtype(f"<u{dt.itemsize // 2}")
        return st.tuples(*[st.integers(0, 2 ** (4 * dt.itemsize) - 1)] * 2).map(
            lambda p: np.array(p, uint).view(dt)[0])
    return None


msgpack_scalars = (st.none() | st.booleans() | st.integers(-(2 ** 63), 2 ** 64 - 1)
                   | st.floats(allow_nan=False) | st.text(max_size=20) | st.binary(max_size=20))
msgpack_values = st.recursive(
    msgpack_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)
# User header entries: anything msgpack carries, except the codec's own "t" and "n".
headers = st.dictionaries(st.text(max_size=10).filter(lambda k: k not in ("t", "n")), msgpack_values, max_size=5)


def frame_bytes(header: dict, tensors=()) -> bytes:
    head, bufs = encode(header, tensors)
    return head + b"".join(bytes(b) for b in bufs)


def raw_frame(header, payload: bytes = b"") -> bytes:
    """A frame with an arbitrary (possibly lying) header, bypassing `encode`'s checks."""
    packed = msgpack.packb(header, use_bin_type=True)
    return struct.pack("<I", len(packed)) + packed + payload


def parse(data):
    header, off = decode_header(data)
    return header, decode(header, data, off)


def reassemble(msgs: list):
    """The receiving side of `split_payload`: the first message holds the header (and small payloads
    inline); continuation messages carry the payload in order."""
    header, off = decode_header(msgs[0])
    if len(msgs) == 1:
        return header, decode(header, msgs[0], off)
    assert len(msgs[0]) == off, "a chunked frame's first message carries no payload"
    buf = bytearray(header["n"])
    pos = 0
    for m in msgs[1:]:
        m = bytes(m)
        buf[pos:pos + len(m)] = m
        pos += len(m)
    assert pos == header["n"]
    return header, decode(header, buf, 0)


def assert_same(a: np.ndarray, b: np.ndarray):
    assert b.dtype == a.dtype and b.shape == a.shape
    assert b.tobytes() == np.ascontiguousarray(a).tobytes()


# ---------------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------------

@SETTINGS
@given(headers, st.lists(arrays(), max_size=4))
def test_round_trip_keeps_tensors_and_header(header, tensors):
    data = frame_bytes(header, tensors)
    h, out = parse(data)
    assert len(out) == len(tensors)
    for a, b in zip(tensors, out):
        assert_same(a, b)
    assert {k: v for k, v in h.items() if k not in ("t", "n")} == header
    assert h["n"] == sum(a.nbytes for a in tensors)
    assert [tuple(s) for s in h["t"]] == [(a.dtype.str, list(a.shape), a.nbytes) for a in tensors]


@pytest.mark.parametrize("ds", DTYPES)
def test_every_allowed_dtype_scalar_and_empty(ds):
    dt = np.dtype(ds)
    scalar = np.ones((), dt)
    empty = np.zeros((0, 3), dt)
    vec = np.arange(7).astype(dt)
    _, out = parse(frame_bytes({"k": "x"}, [scalar, empty, vec]))
    for a, b in zip([scalar, empty, vec], out):
        assert_same(a, b)
    assert out[0].ndim == 0


@SETTINGS
@given(arrays(max_side=5, max_dims=3))
def test_non_contiguous_views_encode(a):
    # A transposed / strided view travels as its C-ordered values.
    b = a.T if a.ndim >= 2 else a[::-1] if a.ndim == 1 else a
    _, out = parse(frame_bytes({}, [b]))
    assert_same(np.array(b, order="C"), out[0])


def test_python_scalars_and_lists():
    _, out = parse(frame_bytes({}, [3, 2.5, True, [1, 2, 3]]))
    assert [o.dtype for o in out] == [np.dtype(np.int64), np.dtype(np.float64), np.dtype(bool), np.dtype(np.int64)]
    assert [o.tolist() for o in out] == [3, 2.5, True, [1, 2, 3]]


@pytest.mark.parametrize("value", [np.zeros(2, ">f4"), np.zeros(2, ">c8"), np.array(["a"]),
                                   np.array([object()], dtype=object), np.zeros(2, "M8[s]")])
def test_unsendable_dtypes_are_refused_by_encode(value):
    with pytest.raises(FrameError):
        encode({}, [value])


def test_encode_refuses_an_oversized_header():
    with pytest.raises(FrameError, match="header"):
        encode({"blob": b"x" * (MAX_HEADER + 1)})


# ---------------------------------------------------------------------------------------------
# Zero copy
# ---------------------------------------------------------------------------------------------

@SETTINGS
@given(st.lists(arrays(), min_size=1, max_size=4))
def test_decode_never_copies(tensors):
    data = frame_bytes({"k": "t"}, tensors)
    whole = np.frombuffer(data, np.uint8)
    _, out = parse(data)
    for t in out:
        assert not t.flags.writeable           # a view of immutable bytes, not a private copy
        if t.nbytes:
            assert np.shares_memory(t, whole)


def test_decode_of_a_bytearray_is_a_view():
    a = np.arange(1000, dtype=np.float32)
    data = bytearray(frame_bytes({}, [a]))
    _, (out,) = parse(data)
    data[-4:] = np.float32(-1).tobytes()          # the decoded tensor sees writes to the buffer
    assert out[-1] == -1


# ---------------------------------------------------------------------------------------------
# Chunking
# ---------------------------------------------------------------------------------------------

@SETTINGS
@given(headers, st.lists(arrays(max_side=40, max_dims=2), max_size=3), st.sampled_from([1, 7, 64, 4096, CHUNK]))
def test_split_payload_reassembles(header, tensors, chunk):
    head, bufs = encode(header, tensors)
    msgs = split_payload(head, bufs, chunk)
    total = sum(a.nbytes for a in tensors)
    if total <= chunk:
        assert len(msgs) == 1
    else:
        assert all(len(m) <= chunk for m in msgs[1:])
        assert msgs[0] == head
    h, out = reassemble(msgs)
    for a, b in zip(tensors, out):
        assert_same(a, b)
    assert {k: v for k, v in h.items() if k not in ("t", "n")} == header


def test_split_payload_of_a_large_tensor_uses_chunk_sized_views():
    a = np.random.default_rng(0).integers(0, 255, (3 * CHUNK + 5,), np.uint8)
    head, bufs = encode({"k": "t"}, [a])
    msgs = split_payload(head, bufs)
    assert [len(m) for m in msgs[1:]] == [CHUNK, CHUNK, CHUNK, 5]
    # The chunks are views of the tensor, not copies of it.
    assert all(isinstance(m, memoryview) for m in msgs[1:])
    assert np.shares_memory(np.frombuffer(msgs[1], np.uint8), a)
    _, (out,) = reassemble(msgs)
    assert_same(a, out)


# ---------------------------------------------------------------------------------------------
# Malformed frames: always FrameError, never anything else
# ---------------------------------------------------------------------------------------------

def refused(data) -> FrameError:
    with pytest.raises(FrameError) as info:
        parse(data)
    return info.value


def parses_or_refuses(data) -> None:
    """Decoding either succeeds or raises FrameError; any other exception fails the test."""
    try:
        parse(data)
    except FrameError:
        pass


@SETTINGS
@example(b"")
@example(b"\x00\x00\x00")
@example(b"\x00\x00\x00\x00")
@example(b"\xff\xff\xff\xff" + b"\x80")
@example(b"\x01\x00\x00\x00\xc1")          # 0xc1 is never valid msgpack
@example(b"\x01\x00\x00\x00\x90")          # a header that is a list, not a map
@given(st.binary(max_size=200))
def test_garbage_bytes_are_refused(data):
    parses_or_refuses(data)
    parses_or_refuses(bytearray(data))


@SETTINGS
@given(st.lists(arrays(max_side=8), min_size=1, max_size=3), st.data())
def test_truncated_frames_are_refused(tensors, data):
    full = frame_bytes({"k": "t"}, tensors)
    assume(len(full) > 0)
    cut = data.draw(st.integers(0, len(full) - 1))
    refused(full[:cut])


@SETTINGS
@given(st.lists(arrays(max_side=8), min_size=1, max_size=3), st.binary(min_size=1, max_size=16))
def test_trailing_bytes_are_refused(tensors, extra):
    refused(frame_bytes({}, tensors) + extra)


@SETTINGS
@given(arrays(max_side=8), st.integers(-5, 5).filter(lambda d: d != 0))
def test_spec_nbytes_disagreeing_with_shape_is_refused(a, delta):
    nbytes = a.nbytes + delta
    assume(nbytes >= 0)
    payload = a.tobytes() + b"\0" * max(delta, 0)
    err = refused(raw_frame({"t": [[a.dtype.str, list(a.shape), nbytes]], "n": nbytes}, payload[:nbytes]))
    assert "spec" in str(err) or "bytes" in str(err)


def test_declared_total_disagreeing_with_specs_is_refused():
    a = np.arange(4, dtype=np.float32)
    spec = [["<f4", [4], 16]]
    refused(raw_frame({"t": spec, "n": 20}, a.tobytes() + b"\0" * 4))
    refused(raw_frame({"t": spec, "n": 12}, a.tobytes()[:12]))
    refused(raw_frame({"t": spec}, a.tobytes()))                # "n" missing means 0


@pytest.mark.parametrize("ds", [">c8", ">f4", ">i4", "|O", "<U1", "|S4", "<M8[s]", "V4", "f4", "float32", "",
                                "<f3", "<i16", 4, None, True, 1.5, b"<f4", [], {}, ["<f4"], {"<f4": 1}])
def test_bad_dtype_strings_are_refused(ds):
    refused(raw_frame({"t": [[ds, [1], 4]], "n": 4}, b"\0" * 4))


@pytest.mark.parametrize("shape", [[-1], [1.0], ["1"], None, 4, [None], [[1]], [True], {"a": 1}, [2 ** 64 - 1],
                                   [1] * 65, [0, 2 ** 63], [2 ** 40, 2 ** 40, 0]])
def test_bad_shapes_are_refused(shape):
    # Each shape here either is not a list of non-negative ints, or cannot be an ndarray shape at all
    # (more than 64 dimensions; a zero-size shape whose other dimensions overflow numpy's index type).
    refused(raw_frame({"t": [["<f4", shape, 0]], "n": 0}))
    refused(raw_frame({"t": [["<f4", shape, 4]], "n": 4}, b"\0" * 4))


@pytest.mark.parametrize("spec", [None, 1, "x", [], ["<f4", [1]], ["<f4", [1], 4, 0], ["<f4", [1], 4.0],
                                  ["<f4", [1], "4"], {"d": "<f4"}, ["<f4", [1], -4]])
def test_malformed_specs_are_refused(spec):
    refused(raw_frame({"t": [spec], "n": 4}, b"\0" * 4))


@pytest.mark.parametrize("t,n", [({}, 0), ("t", 0), (None, 0), ([], -1), ([], 1.0), ([], "0"), ([], None),
                                 ([], MAX_FRAME + 1), ([], [0])])
def test_malformed_tensor_lists_and_sizes_are_refused(t, n):
    refused(raw_frame({"t": t, "n": n}))


@pytest.mark.parametrize("header", [[], 1, "x", None, b"x", [["<f4", [1], 4]]])
def test_header_that_is_not_a_map_is_refused(header):
    refused(raw_frame(header))


def test_non_string_map_keys_are_refused():
    refused(raw_frame({1: 2}))


def test_oversized_header_is_refused_before_parsing():
    # The length prefix alone condemns it: a peer cannot make us parse megabytes of header.
    refused(struct.pack("<I", MAX_HEADER + 1) + b"\x80" * 16)
    refused(struct.pack("<I", 0xFFFFFFFF))
    big = msgpack.packb({"blob": b"x" * (MAX_HEADER + 1)}, use_bin_type=True)
    refused(struct.pack("<I", len(big)) + big)


def test_header_length_past_the_end_is_refused():
    packed = msgpack.packb({"t": [], "n": 0})
    refused(struct.pack("<I", len(packed) + 1) + packed)


def test_oversized_payload_declaration_is_refused():
    # 5 GiB declared across two specs: refused from the header alone, before any allocation.
    n = 5 << 30
    with pytest.raises(FrameError):
        decode_header(raw_frame({"t": [["|u1", [n // 2], n // 2], ["|u1", [n // 2], n // 2]], "n": n}))


# Headers built from arbitrary msgpack values in the codec's own slots: whatever a peer writes into
# "t" and "n" must be refused cleanly or (if it happens to be consistent) decoded.
spec_like = st.one_of(
    msgpack_values,
    st.tuples(st.sampled_from(DTYPES) | msgpack_values,
              st.lists(st.integers(-2, 2 ** 64 - 1) | msgpack_scalars, max_size=70) | msgpack_values,
              st.integers(-2, 2 ** 64 - 1) | msgpack_values).map(list))


@SETTINGS
@given(st.lists(spec_like, max_size=3) | msgpack_values, st.integers(-2, 2 ** 64 - 1) | msgpack_values,
       st.binary(max_size=64))
def test_arbitrary_specs_parse_or_refuse(t, n, payload):
    parses_or_refuses(raw_frame({"t": t, "n": n}, payload))


@SETTINGS
@given(st.lists(arrays(max_side=6), min_size=1, max_size=3), st.data())
def test_single_bit_flips_parse_or_refuse(tensors, data):
    frame = bytearray(frame_bytes({"k": "t", "s": 1}, tensors))
    i = data.draw(st.integers(0, len(frame) - 1))
    frame[i] ^= 1 << data.draw(st.integers(0, 7))
    parses_or_refuses(bytes(frame))


def test_frame_error_is_a_value_error():
    # Callers that catch ValueError for bad input keep working.
    assert issubclass(FrameError, ValueError)
