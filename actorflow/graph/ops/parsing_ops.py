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
           "serialize_tensor", "parse_tensor", "decode_compressed", "FixedLenSequenceFeature",
           "parse_single_sequence_example", "parse_sequence_example", "decode_json_example", "SparseFeature"]

_FEATURE_DTYPES = (dtypes.float32, dtypes.int64, dtypes.string)


class FixedLenFeature(collections.namedtuple("FixedLenFeature", ["shape", "dtype", "default_value"])):
    """A feature of a fixed number of values (tf.io.FixedLenFeature): float32, int64 or string."""

    def __new__(cls, shape, dtype, default_value=None):
        return super().__new__(cls, shape, dtype, default_value)


class VarLenFeature(collections.namedtuple("VarLenFeature", ["dtype"])):
    """A feature of any number of values, parsed into a SparseTensor (tf.io.VarLenFeature)."""


class SparseFeature(collections.namedtuple("SparseFeature", ["index_key", "value_key", "dtype", "size",
                                                            "already_sorted"])):
    """A SparseTensor [size] built from two features of a record, the positions (`index_key`, int64)
    and the values (`value_key`) (tf.io.SparseFeature); one index key only (TF also takes several,
    for a SparseTensor of higher rank)."""

    def __new__(cls, index_key, value_key, dtype, size, already_sorted=False):
        return super().__new__(cls, index_key, value_key, dtype, size, already_sorted)


class FixedLenSequenceFeature(collections.namedtuple("FixedLenSequenceFeature",
                                                     ["shape", "dtype", "allow_missing", "default_value"])):
    """A feature list of `shape` values per step, parsed into [steps, *shape]
    (tf.io.FixedLenSequenceFeature); `allow_missing` lets a SequenceExample lack it (zero steps),
    `default_value` pads shorter sequences of a batch (0 or b"" without)."""

    def __new__(cls, shape, dtype, allow_missing=False, default_value=None):
        return super().__new__(cls, shape, dtype, allow_missing, default_value)


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


def _sparse_feature_inputs(features: dict) -> tuple[dict, dict]:
    """`features` with each SparseFeature replaced by VarLenFeatures of its index and value keys,
    and the SparseFeatures by name."""
    plain, sparse = {}, {}
    for key, f in features.items():
        if not isinstance(f, SparseFeature):
            plain[key] = f
            continue
        index_key, size = f.index_key, f.size
        if isinstance(index_key, (list, tuple)):
            if len(index_key) != 1:
                raise ValueError(f"feature '{key}': actorflow supports a SparseFeature of one index_key, got "
                                 f"{index_key}")
            index_key = index_key[0]
        if isinstance(size, (list, tuple)):
            size = size[0]
        sparse[key] = SparseFeature(index_key, f.value_key, f.dtype, int(size), f.already_sorted)
        for k, dt in ((index_key, dtypes.int64), (f.value_key, dtypes.as_dtype(f.dtype))):
            prev = plain.get(k)
            if prev is not None and not (isinstance(prev, VarLenFeature) and dtypes.as_dtype(prev.dtype) is dt):
                raise ValueError(f"feature '{k}' is used by SparseFeature '{key}' and also as {prev}")
            plain[k] = VarLenFeature(dt)
    return plain, sparse


def _assemble_sparse_feature(f: SparseFeature, idx, val, batched: bool):
    """TF's sparse_merge of the index and value features: values at (record, index), sorted."""
    from actorflow.graph.graph import control_dependencies
    from actorflow.graph.ops import array_ops, math_ops
    from actorflow.graph.ops.check_ops import Assert
    from actorflow.graph.ops.constant import constant, identity
    from actorflow.graph.ops.sort_ops import argsort
    from actorflow.graph.sparse_tensor import SparseTensor
    check = Assert(math_ops.equal(array_ops.size(idx.values), array_ops.size(val.values)),
                   [f"SparseFeature: the index feature '{f.index_key}' and the value feature '{f.value_key}' "
                    "have different numbers of values"])
    with control_dependencies([check]):
        positions = identity(idx.values)
    size = np.int64(f.size)
    if batched:
        rows = idx.indices[:, 0]
        indices = array_ops.stack([rows, positions], axis=1)
        shape = array_ops.stack([idx.dense_shape[0], constant(size)])
        linear = rows * size + positions
    else:
        indices = array_ops.expand_dims(positions, 1)
        shape = constant(np.array([size], np.int64))
        linear = positions
    values = val.values
    if not f.already_sorted:
        order = argsort(linear, stable=True)
        indices = array_ops.gather(indices, order)
        values = array_ops.gather(values, order)
    return SparseTensor(indices, values, shape)


def _parse(op_def, serialized, features, name, default_name):
    if any(isinstance(f, SparseFeature) for f in (features or {}).values()):
        plain, sparse = _sparse_feature_inputs(features)
        out = _parse(op_def, serialized, plain, name, default_name)
        result = {k: v for k, v in out.items() if k in features}
        for key, f in sparse.items():
            result[key] = _assemble_sparse_feature(f, out[f.index_key], out[f.value_key], op_def is ParseExample)
        return result
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


def _infer_parse_sequence(batched):
    def infer(inputs, attrs):
        serialized = inputs[0]
        op = "ParseSequenceExample" if batched else "ParseSingleSequenceExample"
        if serialized.dtype is not dtypes.string:
            raise InferenceError(f"{op}: serialized must be a string tensor, got {serialized.dtype.name}")
        want = 1 if batched else 0
        if serialized.shape.ndims not in (None, want):
            raise InferenceError(f"{op}: serialized must be {'a vector' if batched else 'a scalar'}, got shape "
                                 f"{serialized.shape}")
        lead = [serialized.shape.dims[0] if serialized.shape.dims else None] if batched else []
        out = []

        def sparse(types, rank):
            return ([(dtypes.int64, TensorShape([None, rank]))] * len(types)
                    + [(dtypes.as_dtype(t), TensorShape([None])) for t in types]
                    + [(dtypes.int64, TensorShape([rank]))] * len(types))
        out += sparse(attrs.get("context_sparse_types", ()), 1 + batched)
        out += [(dtypes.as_dtype(t), TensorShape(lead + list(as_shape(sh).dims)))
                for t, sh in zip(attrs.get("Tcontext_dense", ()), attrs.get("context_dense_shapes", ()))]
        out += sparse(attrs.get("feature_list_sparse_types", ()), 2 + batched)
        out += [(dtypes.as_dtype(t), TensorShape(lead + [None] + list(as_shape(sh).dims)))
                for t, sh in zip(attrs.get("feature_list_dense_types", ()), attrs.get("feature_list_dense_shapes", ()))]
        if batched:
            out += [(dtypes.int64, TensorShape(lead))] * len(attrs.get("feature_list_dense_types", ()))
        return out
    return infer


def _infer_decode_json(inputs, attrs):
    if inputs[0].dtype is not dtypes.string:
        raise InferenceError(f"DecodeJSONExample: json_examples must be a string tensor, got {inputs[0].dtype.name}")
    return [(dtypes.string, inputs[0].shape)]


DecodeJSONExample = define_op("DecodeJSONExample", _infer_decode_json)
DecodeJSONExample.gradient(lambda op, *grads: [None])


def decode_json_example(json_examples, name=None):
    """Each string of `json_examples`, an Example in protobuf's JSON form, as the serialized binary
    Example (tf.io.decode_json_example); JSON that is not an Example fails the step. The bytes may
    differ from TF's (packed repeated fields) and parse to the same Example."""
    with name_scope(name or "DecodeJSONExample"):
        x = convert_to_tensor(json_examples, dtype=dtypes.string, name="json_examples")
        return DecodeJSONExample(x)


ParseSingleSequenceExample = define_op("ParseSingleSequenceExample", _infer_parse_sequence(False))
ParseSequenceExample = define_op("ParseSequenceExample", _infer_parse_sequence(True))
for _d in (ParseSingleSequenceExample, ParseSequenceExample):
    _d.gradient(lambda op, *grads: [None] * len(op.inputs))


def _sequence_specs(features: dict | None):
    """(dense keys, types, shapes, allow_missing keys, sparse keys, sparse types) of feature lists."""
    keys, types, shapes, missing, skeys, stypes = [], [], [], [], [], []
    for key in sorted(features or {}):
        f = features[key]
        if isinstance(f, VarLenFeature):
            skeys.append(key)
            stypes.append(_feature_dtype(key, f.dtype))
            continue
        if not isinstance(f, FixedLenSequenceFeature):
            raise TypeError(f"sequence feature '{key}': {type(f).__name__} is not supported (FixedLenSequenceFeature "
                            "and VarLenFeature only)")
        dt = _feature_dtype(key, f.dtype)
        shape = as_shape(f.shape)
        if not shape.is_fully_defined():
            raise ValueError(f"sequence feature '{key}': the shape {shape} must be fully defined")
        keys.append(key)
        types.append(dt)
        shapes.append(shape)
        if f.default_value is not None:          # TF's rule: sequences pad with 0 or b""
            raise ValueError(f"Value feature_list.dense_defaults[{key}] must be None")
        if f.allow_missing:
            missing.append(key)
    return keys, types, shapes, missing, skeys, stypes


def _feature_dtype(key, dtype):
    dt = dtypes.as_dtype(dtype)
    if dt not in _FEATURE_DTYPES:
        raise ValueError(f"feature '{key}': dtype {dt.name} is not float32, int64 or string")
    return dt


def _parse_sequence(op_def, serialized, context_features, sequence_features, name, default_name):
    from actorflow.graph.sparse_tensor import SparseTensor
    context_features = dict(context_features or {})
    c_dense = {k: f for k, f in context_features.items() if not isinstance(f, VarLenFeature)}
    c_keys, c_types, c_shapes, c_defaults = _dense_specs(c_dense) if c_dense else ([], [], [], [])
    c_skeys = sorted(k for k, f in context_features.items() if isinstance(f, VarLenFeature))
    c_stypes = [_feature_dtype(k, context_features[k].dtype) for k in c_skeys]
    f_keys, f_types, f_shapes, missing, f_skeys, f_stypes = _sequence_specs(sequence_features)
    if not (c_keys or c_skeys or f_keys or f_skeys):
        raise ValueError("Must provide at least one context_features or sequence_features")
    with name_scope(name or default_name):
        s = convert_to_tensor(serialized, dtype=dtypes.string, name="serialized")
        ds = [convert_to_tensor(d, dtype=t, name=f"context_default_{i}")
              for i, (d, t) in enumerate(zip(c_defaults, c_types))]
        outs = op_def(s, *ds, context_sparse_keys=tuple(c_skeys), context_sparse_types=tuple(c_stypes),
                      context_dense_keys=tuple(c_keys), Tcontext_dense=tuple(c_types),
                      context_dense_shapes=tuple(c_shapes), feature_list_sparse_keys=tuple(f_skeys),
                      feature_list_sparse_types=tuple(f_stypes), feature_list_dense_keys=tuple(f_keys),
                      feature_list_dense_types=tuple(f_types), feature_list_dense_shapes=tuple(f_shapes),
                      feature_list_dense_missing_assumed_empty=tuple(missing))
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    pos = 0

    def take(n):
        nonlocal pos
        got = outs[pos:pos + n]
        pos += n
        return got

    def sparse(keys):
        n = len(keys)
        idx, vals, shp = take(n), take(n), take(n)
        return {k: SparseTensor(i, v, sh) for k, i, v, sh in zip(keys, idx, vals, shp)}
    context = sparse(c_skeys)
    context.update(zip(c_keys, take(len(c_keys))))
    lists = sparse(f_skeys)
    lists.update(zip(f_keys, take(len(f_keys))))
    lengths = dict(zip(f_keys, take(len(f_keys)))) if op_def is ParseSequenceExample else None
    return context, lists, lengths


def parse_single_sequence_example(serialized, context_features=None, sequence_features=None, example_name=None,
                                  name=None):
    """(context, feature_lists): the features of one serialized SequenceExample (a string scalar)
    (tf.io.parse_single_sequence_example). `context_features` take FixedLenFeature and
    VarLenFeature; `sequence_features` FixedLenSequenceFeature ([steps, *shape]) and VarLenFeature
    (a SparseTensor indexed by step and position)."""
    context, lists, _ = _parse_sequence(ParseSingleSequenceExample, serialized, context_features, sequence_features,
                                        name, "ParseSingleSequenceExample")
    return context, lists


def parse_sequence_example(serialized, context_features=None, sequence_features=None, example_names=None,
                           name=None):
    """(context, feature_lists, lengths): a batch of serialized SequenceExamples (a string vector)
    parsed as parse_single_sequence_example parses one, each dense feature list padded to the
    batch's longest ([batch, steps, *shape], padded with 0 or b"") and its lengths
    [batch] int64 in `lengths` (tf.io.parse_sequence_example)."""
    return _parse_sequence(ParseSequenceExample, serialized, context_features, sequence_features, name,
                           "ParseSequenceExample")
