"""Data types: TensorFlow's names over numpy dtypes (tf.dtypes.DType)."""
from __future__ import annotations

import numpy as np


class DType:
    """A tensor element type; `af.float32` and friends are the instances.

    TF-1.x counterpart: `tf.DType`. DTypes are singletons, so `is` and `==` agree.
    """

    __slots__ = ("name", "as_numpy_dtype", "_np", "_quantized")

    def __init__(self, name: str, np_type, quantized: bool = False):
        self.name = name
        self.as_numpy_dtype = np_type
        self._np = np.dtype(np_type)
        self._quantized = quantized

    @property
    def np(self) -> np.dtype:
        return self._np

    @property
    def base_dtype(self) -> "DType":
        return self

    @property
    def is_floating(self) -> bool:
        return self._np.kind == "f"

    @property
    def is_complex(self) -> bool:
        return self._np.kind == "c"

    @property
    def is_integer(self) -> bool:
        return self._np.kind in "iu" and not self._quantized

    @property
    def is_unsigned(self) -> bool:
        return self._np.kind == "u" and not self._quantized

    @property
    def is_quantized(self) -> bool:
        """Whether this is one of TF's quantized types (qint8, quint8, qint16, quint16, qint32)."""
        return self._quantized

    @property
    def real_dtype(self) -> "DType":
        """float32 for complex64, float64 for complex128, else this type (tf.DType.real_dtype)."""
        return {"complex64": float32, "complex128": float64}.get(self.name, self)

    @property
    def is_bool(self) -> bool:
        return self._np.kind == "b"

    @property
    def is_string(self) -> bool:
        return self.name == "string"

    @property
    def is_numeric(self) -> bool:
        return self._np.kind in "iufc"

    @property
    def is_differentiable(self) -> bool:
        """Gradients flow through tensors of this type: floats, complex numbers, and variants (tensor
        lists, whose gradients are lists of gradients), as TF's backprop-able types."""
        return self.is_floating or self.is_complex or self.name == "variant"

    @property
    def size(self) -> int:
        return self._np.itemsize

    @property
    def min(self):
        if self._quantized:
            raise TypeError(f"Cannot find minimum value of {self!r} with quantized type {self!r}.")
        return np.finfo(self._np).min if self.is_floating else (False if self.is_bool else np.iinfo(self._np).min)

    @property
    def max(self):
        if self._quantized:
            raise TypeError(f"Cannot find maximum value of {self!r} with quantized type {self!r}.")
        return np.finfo(self._np).max if self.is_floating else (True if self.is_bool else np.iinfo(self._np).max)

    @property
    def as_datatype_enum(self) -> int:
        """TF's DataType enum value of this type (types.proto: DT_FLOAT is 1), as GraphDefs and
        checkpoints spell it."""
        return _ENUM[self.name]

    def is_compatible_with(self, other) -> bool:
        """Whether values of `other` (a DType or anything as_dtype takes) fit this type: the same type
        (tf.DType.is_compatible_with; actorflow has no reference dtypes)."""
        return as_dtype(other) is self

    def __repr__(self) -> str:
        return f"af.{self.name}"

    def __reduce__(self):
        return as_dtype, (self.name,)


float16 = DType("float16", np.float16)
float32 = DType("float32", np.float32)
float64 = DType("float64", np.float64)
int8 = DType("int8", np.int8)
int16 = DType("int16", np.int16)
int32 = DType("int32", np.int32)
int64 = DType("int64", np.int64)
uint8 = DType("uint8", np.uint8)
uint16 = DType("uint16", np.uint16)     # 16-bit PNG images (af.image.decode_png / encode_png)
uint32 = DType("uint32", np.uint32)
uint64 = DType("uint64", np.uint64)
bool_ = DType("bool", np.bool_)
complex64 = DType("complex64", np.complex64)
complex128 = DType("complex128", np.complex128)
half = float16
double = float64
resource = DType("resource", np.object_)   # a handle to step-local runtime state (accumulators)
# Byte strings, held as numpy object arrays of `bytes` (TF's tf.string; as_numpy_dtype is object).
string = DType("string", np.object_)
variant = DType("variant", np.object_)     # an opaque host value: a dataset definition (af.data)
# TF's quantized types (tf.quantize's outputs). Their values are plain integer arrays of the same width,
# as TF 2's Session.run returns them (TF's as_numpy_dtype is a one-field structured dtype instead);
# a numpy dtype never converts to them: as_dtype(np.int8) is int8.
qint8 = DType("qint8", np.int8, quantized=True)
quint8 = DType("quint8", np.uint8, quantized=True)
qint16 = DType("qint16", np.int16, quantized=True)
quint16 = DType("quint16", np.uint16, quantized=True)
qint32 = DType("qint32", np.int32, quantized=True)
QUANTIZED_DTYPES = frozenset({qint8, quint8, qint16, quint16, qint32})

_ALL = (float16, float32, float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64, bool_, complex64, complex128, string)
_BY_NAME = {d.name: d for d in _ALL}
_BY_NAME.update({"half": float16, "double": float64, "float": float32, "int": int32, "resource": resource,
                 "variant": variant, "string": string})
_BY_NP = {d.np: d for d in _ALL}
_BY_NAME.update({d.name: d for d in QUANTIZED_DTYPES})
# TF's DataType enum (tensorflow/core/framework/types.proto) for the types actorflow has.
_ENUM = {"float32": 1, "float64": 2, "int32": 3, "uint8": 4, "int16": 5, "int8": 6, "string": 7, "complex64": 8,
         "int64": 9, "bool": 10, "uint16": 17, "complex128": 18, "float16": 19, "resource": 20, "variant": 21, "uint32": 22, "uint64": 23,
         "qint8": 11, "quint8": 12, "qint32": 13, "qint16": 15, "quint16": 16}
_BY_ENUM = {v: _BY_NAME[k] for k, v in _ENUM.items()}


def as_dtype(value) -> DType:
    """Converts a DType, numpy dtype, Python type or name to a DType (tf.as_dtype)."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value in _BY_NAME:
        return _BY_NAME[value]
    if type(value) is int and value in _BY_ENUM:          # a DataType enum value, as tf.as_dtype takes
        return _BY_ENUM[value]
    if value is float:
        return float32
    if value is int:
        return int32
    if value is bool:
        return bool_
    if value is complex:
        return complex128
    if value in (str, bytes):
        return string
    try:
        return _BY_NP[np.dtype(value)]
    except (TypeError, KeyError):
        raise TypeError(f"Cannot convert {value!r} to an actorflow dtype; "
                        f"supported: {', '.join(d.name for d in _ALL)}") from None


def from_numpy(dt: np.dtype) -> DType:
    return _BY_NP[np.dtype(dt)]


def _to_bytes(x) -> bytes:
    if isinstance(x, bytes):
        return bytes(x)        # np.bytes_ becomes plain bytes
    if isinstance(x, str):
        return x.encode("utf-8")
    raise TypeError(f"expected str or bytes, got {type(x).__name__} {x!r}")


def string_array(value) -> np.ndarray:
    """`value` (a str, bytes, nested list of them, or an array of them) as an object array of bytes,
    the representation of an `af.string` tensor; str is encoded as UTF-8, as TF does."""
    if isinstance(value, (str, bytes)):
        arr = np.empty((), dtype=object)
        arr[()] = _to_bytes(value)
        return arr
    src = np.asarray(value, dtype=object)
    if src.dtype != object:
        src = src.astype(object)
    out = np.empty(src.shape, dtype=object)
    flat_in, flat_out = src.reshape(-1), out.reshape(-1)
    for i in range(flat_in.size):
        flat_out[i] = _to_bytes(flat_in[i])
    return out
