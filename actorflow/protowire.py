"""Protocol-buffer wire format, the little of it that actorflow writes and reads by hand: varints and
length-delimited fields. Used where a message is small and fixed (a TensorProto, a ReaderBaseState,
a tensor bundle's index entries) and pulling in a generated class would cost more than it saves.
"""
from __future__ import annotations

__all__ = ["encode_varint", "decode_varint", "length_delimited"]


def encode_varint(n: int) -> bytes:
    """`n` as a base-128 varint; a negative int64 as its 64-bit two's complement (ten bytes), as
    protobuf writes int64 fields."""
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def decode_varint(buf, pos: int) -> tuple[int, int]:
    """(value, position after it) of the varint at `pos`; ValueError when it is truncated or longer
    than 64 bits."""
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def length_delimited(field: int, payload: bytes) -> bytes:
    """Field `field` of wire type 2 (bytes, string, sub-message) holding `payload`."""
    return encode_varint(field << 3 | 2) + encode_varint(len(payload)) + payload
