"""The wire format: a small msgpack header followed by raw tensor buffers. Never pickle.

A frame is ``u32 header length | msgpack header | payload``. The header is a map; its "t" entry
lists the tensors in the payload as ``[dtype, shape, nbytes]`` in order. Decoding validates every
tensor's dtype, shape and size against the header and the payload, and refuses oversized or
malformed frames with FrameError. Tensors decode without a copy (`np.frombuffer` on the payload).

String tensors (object arrays of bytes) travel with the dtype tag "str": their payload is each
element's u32 length followed by its bytes, in C order (see `_encode_strings`).

A large frame travels as several websocket messages (aiohttp moves 1 MiB messages several times
faster than one huge one): the first carries the header and ``"n": total payload bytes``; the
payload follows in as many raw continuation messages as needed. Between actorflow tasks, which
negotiate bulk frames, a payload of 256 KiB or more instead follows as one bulk frame that the
receiver reads straight into the tensor (transport/bulk.py); the header then says ``"b": 1``.
"""
from __future__ import annotations

import struct

import msgpack
import numpy as np

__all__ = ["FrameError", "encode", "decode", "decode_header", "split_payload", "CHUNK", "MAX_FRAME",
           "MAX_HEADER", "ALLOWED_DTYPES"]

CHUNK = 4 << 20                 # continuation message size (4 MiB measured best on loopback)
MAX_HEADER = 1 << 20            # a header larger than this is refused
MAX_FRAME = 4 << 30             # a frame (header + payload) larger than this is refused
MAX_RANK = 32                   # tensors of higher rank are refused
MAX_DIM = 1 << 40               # and so are dimensions larger than this
ALLOWED_DTYPES = frozenset(["<f2", "<f4", "<f8", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "|b1",
                           "<c8", "<c16"])
_U32 = struct.Struct("<I")
STRING_TAG = "str"              # the dtype tag of a string tensor (length-prefixed bytes)


class FrameError(ValueError):
    """A malformed, oversized or inconsistent frame."""


def _dtype_str(dt: np.dtype) -> str:
    s = dt.str
    if s[0] == ">":
        raise FrameError(f"big-endian dtype {dt} cannot be sent")
    return s


def encode(header: dict, tensors=(), bulk_min: int | None = None) -> tuple[bytes, list]:
    """Returns (head bytes, list of payload buffers). `tensors` are numpy arrays or scalars.

    With `bulk_min`, a payload of at least that many bytes is marked ``"b": 1``: it travels apart
    from the header, as one bulk frame (transport/bulk.py).
    """
    specs = []
    bufs = []
    for t in tensors:
        a = np.asarray(t)
        if a.dtype == object:
            raw = _encode_strings(a)
            specs.append((STRING_TAG, list(a.shape), len(raw)))
            bufs.append(raw)
            continue
        if not a.flags.c_contiguous:
            a = a.copy(order="C")
        ds = _dtype_str(a.dtype)
        if ds not in ALLOWED_DTYPES:
            raise FrameError(f"dtype {a.dtype} cannot be sent")
        specs.append((ds, list(a.shape), a.nbytes))
        bufs.append(memoryview(a.reshape(-1).view(np.uint8)) if a.nbytes else b"")
    h = dict(header)
    h["t"] = specs
    h["n"] = sum(s[2] for s in specs)
    if bulk_min is not None and h["n"] >= bulk_min:
        h["b"] = 1
    packed = msgpack.packb(h, use_bin_type=True)
    if len(packed) > MAX_HEADER:
        raise FrameError(f"header of {len(packed)} bytes exceeds the {MAX_HEADER}-byte limit")
    return _U32.pack(len(packed)) + packed, bufs


def decode_header(data) -> tuple[dict, int]:
    """Parses the header at the start of `data`; returns (header, payload offset)."""
    mv = memoryview(data)
    if len(mv) < 4:
        raise FrameError(f"frame of {len(mv)} bytes is too short for a header")
    (hlen,) = _U32.unpack_from(mv, 0)
    if hlen > MAX_HEADER or 4 + hlen > len(mv):
        raise FrameError(f"header length {hlen} is invalid for a frame of {len(mv)} bytes")
    try:
        header = msgpack.unpackb(mv[4:4 + hlen], raw=False, strict_map_key=True, max_bin_len=MAX_HEADER,
                                 max_str_len=MAX_HEADER, max_array_len=1 << 16, max_map_len=1 << 12)
    except Exception as e:  # noqa: BLE001 - any msgpack failure is a malformed frame
        raise FrameError(f"malformed frame header: {e}") from None
    if not isinstance(header, dict):
        raise FrameError("frame header is not a map")
    specs = header.get("t", [])
    n = header.get("n", 0)
    if not isinstance(specs, list) or not isinstance(n, int) or n < 0 or n > MAX_FRAME:
        raise FrameError(f"frame declares an invalid payload size {n!r}")
    total = 0
    for s in specs:
        if (not isinstance(s, list) or len(s) != 3 or not isinstance(s[0], str)
                or (s[0] not in ALLOWED_DTYPES and s[0] != STRING_TAG)
                or not isinstance(s[1], list) or len(s[1]) > MAX_RANK
                or not all(type(d) is int and 0 <= d <= MAX_DIM for d in s[1]) or type(s[2]) is not int):
            raise FrameError(f"malformed tensor spec {s!r}")
        count = 1
        nonzero = 1
        for d in s[1]:
            count *= d
            nonzero *= d or 1
        if nonzero > MAX_DIM:     # numpy cannot represent such a shape even when it is empty
            raise FrameError(f"tensor spec {s!r}: shape is too large")
        if s[0] == STRING_TAG:
            if s[2] < 4 * count:      # each element carries at least its 4-byte length
                raise FrameError(f"tensor spec {s!r}: {count} strings need at least {4 * count} bytes")
        elif count * np.dtype(s[0]).itemsize != s[2]:
            raise FrameError(f"tensor spec {s!r}: shape and dtype give {count * np.dtype(s[0]).itemsize} bytes, "
                             f"header says {s[2]}")
        total += s[2]
    if total != n:
        raise FrameError(f"tensor sizes add up to {total} bytes but the frame declares {n}")
    header["t"] = specs
    header["n"] = n
    return header, 4 + hlen


def decode(header: dict, payload, offset: int = 0) -> list:
    """The tensors of a frame, as read-only numpy views of `payload` from `offset`."""
    mv = memoryview(payload)
    need = offset + header["n"]
    if len(mv) != need:
        raise FrameError(f"frame payload is {len(mv) - offset} bytes, header declares {header['n']}")
    out = []
    pos = offset
    for ds, shape, nbytes in header["t"]:
        if ds == STRING_TAG:
            out.append(_decode_strings(mv[pos:pos + nbytes], shape))
            pos += nbytes
            continue
        a = np.frombuffer(mv, dtype=np.dtype(ds), count=nbytes // np.dtype(ds).itemsize, offset=pos).reshape(shape)
        out.append(a)
        pos += nbytes
    return out


def _encode_strings(a: np.ndarray) -> bytes:
    """An object array of bytes (or str, taken as UTF-8) as u32-length-prefixed elements."""
    parts = []
    for x in a.reshape(-1):
        b = x.encode("utf-8") if isinstance(x, str) else x
        if not isinstance(b, bytes):
            raise FrameError(f"a string tensor holds a {type(x).__name__}, which cannot be sent")
        parts.append(_U32.pack(len(b)))
        parts.append(b)
    return b"".join(parts)


def _decode_strings(mv: memoryview, shape) -> np.ndarray:
    """The inverse of `_encode_strings`: every length is checked against the bytes left."""
    count = 1
    for d in shape:
        count *= d
    out = np.empty(count, dtype=object)
    pos, end = 0, len(mv)
    for i in range(count):
        if pos + 4 > end:
            raise FrameError(f"string tensor of shape {shape} is truncated at element {i}")
        (n,) = _U32.unpack_from(mv, pos)
        pos += 4
        if n > end - pos:
            raise FrameError(f"string element {i} declares {n} bytes but only {end - pos} remain")
        out[i] = bytes(mv[pos:pos + n])
        pos += n
    if pos != end:
        raise FrameError(f"string tensor of shape {shape} leaves {end - pos} unread bytes")
    out.setflags(write=False)
    return out.reshape(shape)


def split_payload(head: bytes, bufs: list, chunk: int = CHUNK) -> list:
    """The websocket messages for one frame: head (with small payloads inline), then raw chunks."""
    total = sum(len(b) for b in bufs)
    if total <= chunk:
        return [head + b"".join(bytes(b) if isinstance(b, memoryview) else b for b in bufs)] if bufs else [head]
    msgs = [head]
    for b in bufs:
        mv = memoryview(b)
        for i in range(0, len(mv), chunk):
            msgs.append(mv[i:i + chunk])
    return msgs
