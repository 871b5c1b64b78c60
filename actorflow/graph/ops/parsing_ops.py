"""Parsing serialized tf.train.Example records and raw bytes: FixedLenFeature, parse_single_example,
parse_example (ops ParseSingleExample, ParseExample: dense features) and decode_raw (op DecodeRaw).

The kernels (kernels/cpu/parsing.py) read the records with TF's Example message
(actorflow/example_proto.py) and report what TF reports: a missing required feature, a feature of
the wrong kind, a wrong number of values, each naming the key. A VarLenFeature comes back as a
SparseTensor (indices [n, 1] for one record, [n, 2] with the record's position for a batch).
"""
from __future__ import annotations

import collections

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.tensor_shape import TensorShape, as_shape

__all__ = ["FixedLenFeature", "VarLenFeature", "parse_single_example", "parse_example", "decode_raw",
           "serialize_tensor", "parse_tensor", "decode_compressed"]

_FEATURE_DTYPES = (dtypes.float32, dtypes.int64, dtypes.string)


class FixedLenFeature(collections.namedtuple("FixedLenFeature", ["shape", "dtype", "default_value"])):
    """A feature of a fixed number of values (tf.io.FixedLenFeature): float32, int64 or string."""

    def __new__(cls, shape, dtype, default_value=None):
        return super().__new__(cls, shape, dtype, default_value)


class VarLenFeature(collections.namedtuple("VarLenFeature", ["dtype"])):
    """A feature of any number of values, parsed into a SparseTensor (tf.io.VarLenFeature)."""


def _infer_parse(batched):
    def infer(inputs, attrs):
        serialized = inputs[0]
        if serialized.dtype is not dtypes.string:
            raise InferenceError(f"serialized must be a string tensor, got {serialized.dtype.name}")
        lead = []
        if batched:
            if serialized.shape.ndims not in (None, 1):
                raise InferenceError(f"serialized must be a vector of records, got shape {serialized.shape}")
            lead = [serialized.shape.dims[0] if serialized.shape.dims is not None else None]
        elif serialized.shape.ndims not in (None, 0):
            raise InferenceError(f"serialized must be a scalar record, got shape {serialized.shape}")
        rank = 2 if batched else 1
        sparse_types = [dtypes.as_dtype(t) for t in attrs.get("sparse_types", ())]
        return ([(dtypes.int64, TensorShape([None, rank]))] * len(sparse_types)
                + [(t, TensorShape([None])) for t in sparse_types]
                + [(dtypes.int64, TensorShape([rank]))] * len(sparse_types)
                + [(dtypes.as_dtype(t), TensorShape(lead + list(as_shape(s).dims)))
                   for t, s in zip(attrs["Tdense"], attrs["dense_shapes"])])
    return infer


ParseSingleExample = define_op("ParseSingleExample", _infer_parse(False))
ParseExample = define_op("ParseExample", _infer_parse(True))


def _infer_decode_raw(inputs, attrs):
    x = inputs[0]
    if x.dtype is not dtypes.string:
        raise InferenceError(f"DecodeRaw takes a string tensor, got {x.dtype.name}")
    return [(dtypes.as_dtype(attrs["out_type"]), TensorShape(None if x.shape.dims is None
                                                            else list(x.shape.dims) + [None]))]


DecodeRaw = define_op("DecodeRaw", _infer_decode_raw)


def _infer_serialize_tensor(inputs, attrs):
    return [(dtypes.string, TensorShape([]))]


def _infer_parse_tensor(inputs, attrs):
    s = inputs[0]
    if s.dtype is not dtypes.string or s.shape.ndims not in (None, 0):
        raise InferenceError(f"ParseTensor: serialized must be a string scalar, got {s.dtype.name} {s.shape}")
    return [(dtypes.as_dtype(attrs["out_type"]), TensorShape(None))]


def _infer_decode_compressed(inputs, attrs):
    x = inputs[0]
    if x.dtype is not dtypes.string:
        raise InferenceError(f"DecodeCompressed: bytes must be a string tensor, got {x.dtype.name}")
    if attrs.get("compression_type", "") not in ("", "ZLIB", "GZIP"):
        raise InferenceError(f"DecodeCompressed: compression_type must be '', 'ZLIB' or 'GZIP', got "
                             f"{attrs['compression_type']!r}")
    return [(dtypes.string, x.shape)]


SerializeTensor = define_op("SerializeTensor", _infer_serialize_tensor)
ParseTensor = define_op("ParseTensor", _infer_parse_tensor)
DecodeCompressed = define_op("DecodeCompressed", _infer_decode_compressed)
for _d in (ParseSingleExample, ParseExample, DecodeRaw, SerializeTensor, ParseTensor, DecodeCompressed):
    _d.gradient(lambda op, *grads: [None] * len(op.inputs))


def _dense_specs(features: dict):
    if not isinstance(features, dict) or not features:
        raise ValueError("features must be a non-empty dict of feature names to FixedLenFeature or VarLenFeature")
    keys, types, shapes, defaults = [], [], [], []
    for key in sorted(features):
        f = features[key]
        if isinstance(f, VarLenFeature):
            continue
        if not isinstance(f, FixedLenFeature):
            raise TypeError(f"feature '{key}': {type(f).__name__} is not supported by actorflow (FixedLenFeature "
                            "and VarLenFeature only)")
        dt = dtypes.as_dtype(f.dtype)
        if dt not in _FEATURE_DTYPES:
            raise ValueError(f"feature '{key}': dtype {dt.name} is not float32, int64 or string")
        shape = as_shape(f.shape)
        if not shape.is_fully_defined():
            raise ValueError(f"feature '{key}': the shape {shape} must be fully defined")
        if f.default_value is None:
            default = np.zeros([0], dtype=dt.np)          # required
        else:
            default = np.broadcast_to(np.asarray(f.default_value, dtype=dt.np if dt is not dtypes.string else object),
                                      shape.as_list()).copy()
        keys.append(key)
        types.append(dt)
        shapes.append(shape)
        defaults.append(default)
    return keys, types, shapes, defaults


def _parse(op_def, serialized, features, name, default_name):
    from actorflow.graph.sparse_tensor import SparseTensor
    keys, types, shapes, defaults = _dense_specs(features)
    skeys = [k for k in sorted(features) if isinstance(features[k], VarLenFeature)]
    stypes = [dtypes.as_dtype(features[k].dtype) for k in skeys]
    for k, t in zip(skeys, stypes):
        if t not in _FEATURE_DTYPES:
            raise ValueError(f"feature '{k}': dtype {t.name} is not float32, int64 or string")
    with name_scope(name or default_name):
        s = convert_to_tensor(serialized, dtype=dtypes.string, name="serialized")
        ds = [convert_to_tensor(d, dtype=t, name=f"default_{i}") for i, (d, t) in enumerate(zip(defaults, types))]
        outs = op_def(s, *ds, dense_keys=tuple(keys), Tdense=tuple(types), dense_shapes=tuple(shapes), Ndense=len(keys),
                      sparse_keys=tuple(skeys), sparse_types=tuple(stypes), Nsparse=len(skeys))
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    n = len(skeys)
    result = {k: SparseTensor(outs[i], outs[n + i], outs[2 * n + i]) for i, k in enumerate(skeys)}
    result.update(zip(keys, outs[3 * n:]))
    return result


def parse_single_example(serialized, features, name=None, example_names=None):
    """The features of one serialized Example (a string scalar), as a dict of dense tensors
    (tf.io.parse_single_example); `features` maps names to FixedLenFeature."""
    return _parse(ParseSingleExample, serialized, features, name, "ParseSingleExample")


def parse_example(serialized, features, name=None, example_names=None):
    """The features of a batch of serialized Examples (a string vector), each [batch, *shape]
    (tf.io.parse_example)."""
    return _parse(ParseExample, serialized, features, name, "ParseExample")


def decode_raw(input_bytes=None, out_type=None, little_endian=True, name=None, bytes=None):  # noqa: A002
    """Reinterprets the bytes of each string as a vector of `out_type` (tf.io.decode_raw); every
    string must have the same length."""
    if input_bytes is None:
        input_bytes = bytes
    if out_type is None:
        raise TypeError("decode_raw() missing required argument 'out_type'")
    with name_scope(name or "DecodeRaw"):
        x = convert_to_tensor(input_bytes, dtype=dtypes.string, name="bytes")
        return DecodeRaw(x, out_type=dtypes.as_dtype(out_type), little_endian=bool(little_endian))


def serialize_tensor(tensor, name=None):
    """`tensor` as the bytes of TF's TensorProto, a string scalar (tf.io.serialize_tensor): the same
    bytes TF writes, so TF's parse_tensor reads them and af's reads TF's."""
    with name_scope(name or "SerializeTensor"):
        t = convert_to_tensor(tensor, name="tensor")
        return SerializeTensor(t, T=t.dtype)


def parse_tensor(serialized, out_type, name=None):
    """The tensor serialized as TensorProto bytes in the string scalar `serialized`
    (tf.io.parse_tensor); a dtype other than `out_type` fails the step."""
    with name_scope(name or "ParseTensor"):
        s = convert_to_tensor(serialized, dtype=dtypes.string, name="serialized")
        return ParseTensor(s, out_type=dtypes.as_dtype(out_type))


def decode_compressed(bytes, compression_type="", name=None):  # noqa: A002 (TF's name)
    """Each string of `bytes` decompressed (tf.io.decode_compressed): compression_type "ZLIB",
    "GZIP", or "" for none."""
    with name_scope(name or "DecodeCompressed"):
        x = convert_to_tensor(bytes, dtype=dtypes.string, name="bytes")
        return DecodeCompressed(x, compression_type=str(compression_type or ""))
