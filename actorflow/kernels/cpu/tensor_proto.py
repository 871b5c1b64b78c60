"""SerializeTensor and ParseTensor (graph/ops/parsing_ops.py): a tensor as TF's TensorProto bytes
(tensorflow/core/framework/tensor.proto) and back.

The wire format is written here by hand, field by field as TF's AsProtoTensorContent writes it
(dtype, tensor_shape, then tensor_content in little-endian order, or string_val per element for
strings; fields at their default omitted), so the bytes equal TF's and TF parses what actorflow
writes. ParseTensor also reads the typed value fields (float_val, int64_val, ...) other writers
use, a short list repeating its last value as TF's MakeNdarray does.
"""
from __future__ import annotations

import struct

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel

# TF's DataType enum (types.proto) of the numpy types actorflow has; strings are numpy objects.
_ENUM = {np.dtype(np.float32): 1, np.dtype(np.float64): 2, np.dtype(np.int32): 3, np.dtype(np.uint8): 4,
         np.dtype(np.int16): 5, np.dtype(np.int8): 6, np.dtype(object): 7, np.dtype(np.int64): 9,
         np.dtype(np.bool_): 10, np.dtype(np.uint16): 17, np.dtype(np.float16): 19}
_BY_ENUM = {v: k for k, v in _ENUM.items()}
_NAMES = {7: "string", 10: "bool"}


def _name(dt: np.dtype) -> str:
    return _NAMES.get(_ENUM.get(dt, 0), dt.name)


def _varint(n: int) -> bytes:
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


def _field(num: int, wire: int) -> bytes:
    return _varint(num << 3 | wire)


def _bytes_field(num: int, data: bytes) -> bytes:
    return _field(num, 2) + _varint(len(data)) + data


def serialize(value: np.ndarray) -> bytes:
    """`value` as TF's TensorProto bytes."""
    value = np.asarray(value)
    if value.dtype not in _ENUM:
        raise InvalidArgumentError(f"SerializeTensor: unsupported dtype {value.dtype}")
    out = bytearray(_field(1, 0) + _varint(_ENUM[value.dtype]))
    shape = b"".join(_bytes_field(2, _field(1, 0) + _varint(d) if d else b"") for d in value.shape)
    out += _bytes_field(2, shape)
    if value.dtype == object:
        for s in value.reshape(-1):
            out += _bytes_field(8, s if isinstance(s, bytes) else str(s).encode())
    elif value.size:
        out += _bytes_field(4, np.ascontiguousarray(value, value.dtype.newbyteorder("<")).tobytes())
    return bytes(out)


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def varint(self) -> int:
        n = shift = 0
        while True:
            if self.pos >= len(self.data) or shift > 63:
                raise ValueError("truncated varint")
            b = self.data[self.pos]
            self.pos += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return n

    def fields(self):
        while self.pos < len(self.data):
            key = self.varint()
            num, wire = key >> 3, key & 7
            if wire == 0:
                yield num, wire, self.varint()
            elif wire == 1:
                yield num, wire, self.take(8)
            elif wire == 2:
                yield num, wire, self.take(self.varint())
            elif wire == 5:
                yield num, wire, self.take(4)
            else:
                raise ValueError(f"unsupported wire type {wire}")

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("truncated field")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b


def _signed(n: int, bits: int = 64) -> int:
    return n - (1 << bits) if n >= 1 << (bits - 1) else n


# The typed value fields: field number -> (numpy dtype of the values, how each is stored)
_VAL_FIELDS = {5: ("<f4", "fixed32"), 6: ("<f8", "fixed64"), 7: (np.int64, "varint"), 8: (object, "bytes"),
               10: (np.int64, "varint"), 11: (np.int64, "varint"), 13: (np.int64, "varint"),
               16: (np.uint64, "varint"), 17: (np.uint64, "varint")}


def parse(data: bytes):
    """(numpy array, numpy dtype) from TensorProto bytes; ValueError when they are not one."""
    r = _Reader(data)
    dt_enum, dims, content, vals = 0, [], None, []
    for num, wire, v in r.fields():
        if num == 1 and wire == 0:
            dt_enum = v
        elif num == 2 and wire == 2:
            for n2, w2, dim in _Reader(v).fields():
                if n2 == 2 and w2 == 2:
                    size = 0
                    for n3, w3, x in _Reader(dim).fields():
                        if n3 == 1 and w3 == 0:
                            size = _signed(x)
                    dims.append(size)
                elif n2 == 3 and w2 == 0 and v:
                    raise ValueError("unknown rank")
        elif num == 4 and wire == 2:
            content = v
        elif num in _VAL_FIELDS:
            npdt, how = _VAL_FIELDS[num]
            if how == "bytes":
                vals.append(v)
            elif wire == 2 and how == "varint":          # packed
                rr = _Reader(v)
                while rr.pos < len(v):
                    vals.append(rr.varint())
            elif wire == 2:
                vals.extend(np.frombuffer(v, npdt).tolist())
            elif how == "varint":
                vals.append(v)
            else:
                vals.append(np.frombuffer(v, npdt)[0])
    if dt_enum not in _BY_ENUM:
        raise ValueError(f"unsupported dtype enum {dt_enum}")
    dt = _BY_ENUM[dt_enum]
    if any(d < 0 for d in dims):
        raise ValueError(f"negative dimension in {dims}")
    n = int(np.prod(dims)) if dims else 1
    if dt.kind == "O":
        if content is not None:
            raise ValueError("a string tensor with tensor_content")
        arr = np.empty(len(vals), dtype=object)
        arr[:] = [bytes(x) for x in vals]
    elif content is not None:
        if len(content) != n * dt.itemsize:
            raise ValueError(f"tensor_content holds {len(content)} bytes, the shape {dims} needs {n * dt.itemsize}")
        return np.frombuffer(content, dt.newbyteorder("<")).astype(dt).reshape(dims), dt
    elif dt == np.float16:
        arr = np.array(vals, np.uint16).view(np.float16)
    elif dt.kind in "iub" and vals:
        arr = np.array([_signed(int(x)) if dt.kind == "i" else int(x) for x in vals]).astype(dt)
    else:
        arr = np.array(vals, dtype=dt)
    if arr.size == n:
        return arr.reshape(dims), dt
    if arr.size == 0 and n:
        return (np.full(dims, b"", object) if dt.kind == "O" else np.zeros(dims, dt)), dt
    if 0 < arr.size < n:
        return np.concatenate([arr, np.repeat(arr[-1:], n - arr.size)]).reshape(dims), dt
    raise ValueError(f"{arr.size} values for the shape {dims}")


@register_kernel("SerializeTensor", "CPU", releases_gil=False)
def serialize_tensor_kernel(attrs):
    """tf.io.serialize_tensor: TensorProto bytes, a string scalar."""
    def fn(x):
        out = np.empty((), dtype=object)
        out[()] = serialize(x)
        return out
    return fn


@register_kernel("ParseTensor", "CPU", releases_gil=False)
def parse_tensor_kernel(attrs):
    """tf.io.parse_tensor: the tensor of TensorProto bytes; its dtype must be `out_type`."""
    want = np.dtype(attrs["out_type"])

    def fn(serialized):
        s = np.asarray(serialized, dtype=object)
        if s.ndim != 0:
            raise InvalidArgumentError(f"ParseTensor: serialized must be a scalar, got shape {list(s.shape)}")
        data = s[()]
        try:
            value, dt = parse(bytes(data))
        except (ValueError, struct.error) as e:
            raise InvalidArgumentError(f"ParseTensor: Could not parse `serialized` as TensorProto: {e} "
                                       f"('{bytes(data)[:40]!r}')") from None
        if dt != want:
            raise InvalidArgumentError(f"ParseTensor: Type mismatch between parsed tensor ({_name(dt)}) and dtype "
                                       f"({_name(want)})")
        return value
    return fn
