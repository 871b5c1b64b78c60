"""TensorProto bytes (tensorflow/core/framework/tensor.proto) of a numpy array and back, written
by hand (no protobuf dependency): what SerializeSparse / DeserializeSparse exchange with TF.

Writing follows TF's Tensor::AsProtoTensorContent, byte for byte: dtype (field 1), the shape
(field 2: one `dim` per dimension, its size omitted when 0), then the raw little-endian buffer as
`tensor_content` (field 4, omitted when empty), or one `string_val` (field 8) per element of a
string tensor. Reading also takes the typed repeated fields (float_val, int_val, ...) TF accepts.
"""
from __future__ import annotations

import struct

import numpy as np

from actorflow.protowire import decode_varint, encode_varint, length_delimited

__all__ = ["encode", "decode", "DTYPE_ENUM"]

# types.proto's DataType numbers of the dtypes actorflow has (string: numpy object arrays of bytes).
DTYPE_ENUM = {np.dtype(np.float32): 1, np.dtype(np.float64): 2, np.dtype(np.int32): 3, np.dtype(np.uint8): 4,
              np.dtype(np.int16): 5, np.dtype(np.int8): 6, np.dtype(object): 7, np.dtype(np.int64): 9,
              np.dtype(np.bool_): 10, np.dtype(np.uint16): 17, np.dtype(np.float16): 19, np.dtype(np.uint32): 22,
              np.dtype(np.uint64): 23}
_ENUM_DTYPE = {v: k for k, v in DTYPE_ENUM.items()}


def encode(a: np.ndarray) -> bytes:
    """The serialized TensorProto of `a`."""
    a = np.asarray(a)
    if a.dtype not in DTYPE_ENUM:
        raise ValueError(f"no TensorProto dtype for {a.dtype}")
    shape = b"".join(length_delimited(2, b"" if d == 0 else b"\x08" + encode_varint(int(d))) for d in a.shape)
    out = b"\x08" + encode_varint(DTYPE_ENUM[a.dtype]) + length_delimited(2, shape)
    if a.dtype.kind == "O":
        for s in a.reshape(-1):
            out += length_delimited(8, s.encode() if isinstance(s, str) else bytes(s))
    elif a.size:
        out += length_delimited(4, np.ascontiguousarray(a, a.dtype.newbyteorder("<")).tobytes())
    return out


def _fields(buf: bytes):
    """(field number, wire type, value) of each field: ints for varints, bytes otherwise."""
    i = 0
    while i < len(buf):
        key, i = decode_varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = decode_varint(buf, i)
        elif wire == 1:
            v, i = buf[i:i + 8], i + 8
        elif wire == 5:
            v, i = buf[i:i + 4], i + 4
        elif wire == 2:
            n, i = decode_varint(buf, i)
            v, i = buf[i:i + n], i + n
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if i > len(buf):
            raise ValueError("truncated field")
        yield num, wire, v


def _shape(buf: bytes):
    dims = []
    for num, _, v in _fields(buf):
        if num == 2:
            size = 0
            for n2, _, v2 in _fields(v):
                if n2 == 1:
                    size = v2 - (1 << 64) if v2 >= 1 << 63 else v2
            dims.append(size)
        elif num == 3 and v:
            raise ValueError("a TensorProto of unknown rank")
    return tuple(dims)


_TYPED = {5: ("<f4", 4), 6: ("<f8", 8), 7: (None, 0), 10: (None, 0), 11: (None, 0), 13: (None, 0), 16: (None, 0),
          17: (None, 0)}


def decode(buf: bytes) -> np.ndarray:
    """The array of a serialized TensorProto (ValueError when it is not one)."""
    dtype, shape, content, typed, strings = None, (), None, [], []
    for num, wire, v in _fields(bytes(buf)):
        if num == 1:
            dtype = _ENUM_DTYPE.get(v)
            if dtype is None:
                raise ValueError(f"unsupported TensorProto dtype {v}")
        elif num == 2:
            shape = _shape(v)
        elif num == 4:
            content = v
        elif num == 8:
            strings.append(bytes(v))
        elif num in _TYPED:
            fmt, width = _TYPED[num]
            if wire == 2 and fmt:                       # packed floats or doubles
                typed.extend(np.frombuffer(v, fmt).tolist())
            elif wire == 2:                             # packed varints
                j = 0
                while j < len(v):
                    x, j = decode_varint(v, j)
                    typed.append(x)
            elif wire in (1, 5):
                typed.append(struct.unpack("<d" if wire == 1 else "<f", v)[0])
            else:
                typed.append(v)
    if dtype is None:
        raise ValueError("not a TensorProto: no dtype")
    n = int(np.prod(shape)) if shape else 1
    if dtype.kind == "O":
        vals = strings
        out = np.empty(len(vals), object)
        out[:] = vals
    elif content is not None:
        if len(content) != n * dtype.itemsize:           # TF's Tensor::FromProto: the buffer must fit the shape
            raise ValueError(f"tensor_content holds {len(content)} bytes, the shape {list(shape)} needs "
                             f"{n * dtype.itemsize}")
        out = np.frombuffer(content, dtype.newbyteorder("<")).astype(dtype)
    else:
        if dtype.kind in "ib":                         # varints: two's complement in 64 bits
            typed = [x - (1 << 64) if x >= 1 << 63 else x for x in typed]
        if dtype == np.float16 and typed:               # half_val holds the float16 bit patterns
            out = np.array(typed, np.uint16).view(np.float16)
        else:
            out = np.array(typed, dtype=dtype)
    if out.size == n:
        return out.reshape(shape)
    if out.size and out.size < n:                      # TF repeats the last value to fill the shape
        return np.concatenate([out, np.repeat(out[-1:], n - out.size)]).reshape(shape)
    raise ValueError(f"a TensorProto of shape {list(shape)} holds {out.size} values")
