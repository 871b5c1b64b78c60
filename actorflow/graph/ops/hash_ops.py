"""The hash ops: string bucketing by TF's legacy Hash64 (`StringToHashBucket`, tf.string_to_hash_bucket
and tf.compat.v1.strings.to_hash_bucket), by keyed SipHash-2-4 (`StringToHashBucketStrong`), and
`Fingerprint` (tf.fingerprint: FarmHash Fingerprint64 of each row, as 8 little-endian bytes).

The values equal TensorFlow's (kernels/cpu/string_hashes.py, farmhash.py). None has a gradient.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops.array_ops._args import _op_scope
from actorflow.graph.ops.string_ops import _need_string, _str_tensor
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["fingerprint", "string_to_hash_bucket", "string_to_hash_bucket_strong"]


def _buckets(attrs, op):
    n = int(attrs["num_buckets"])
    if n < 1:
        raise InferenceError(f"{op}: num_buckets must be >= 1, got {n}")


def _infer_bucket(op):
    def infer(inputs, attrs):
        _need_string(inputs[0], op)
        _buckets(attrs, op)
        if op == "StringToHashBucketStrong":
            key = attrs["key"]
            if len(key) != 2:
                raise InferenceError(f"StringToHashBucketStrong: key must have 2 elements, got {len(key)}")
        return [(dtypes.int64, inputs[0].shape)]
    return infer


StringToHashBucket = define_op("StringToHashBucket", _infer_bucket("StringToHashBucket"))
StringToHashBucketStrong = define_op("StringToHashBucketStrong", _infer_bucket("StringToHashBucketStrong"))


def _infer_fingerprint(inputs, attrs):
    data, method = inputs
    if not (data.dtype.is_numeric or data.dtype.is_bool or data.dtype.is_string):
        raise InferenceError(f"Fingerprint: data must be numeric, bool or string, got {data.dtype.name}")
    if data.shape.ndims == 0:
        raise InferenceError(f"Fingerprint: data must have rank at least one, got a scalar ('{data.name}')")
    if not method.dtype.is_string or method.shape.ndims not in (None, 0):
        raise InferenceError(f"Fingerprint: method must be a scalar string, got {method.dtype.name} {method.shape}")
    rows = data.shape.as_list()[0] if data.shape.ndims is not None else None
    return [(dtypes.uint8, TensorShape([rows, 8]))]


Fingerprint = define_op("Fingerprint", _infer_fingerprint)
for _d in (StringToHashBucket, StringToHashBucketStrong):
    _d.gradient(lambda op, grad: [None])
Fingerprint.gradient(lambda op, grad: [None, None])


def string_to_hash_bucket(string_tensor, num_buckets, name=None, input=None):  # noqa: A002
    """TensorFlow's legacy Hash64 of each string modulo `num_buckets`, int64 (tf.string_to_hash_bucket,
    tf.compat.v1.strings.to_hash_bucket; `input` is the latter's name for the strings). The same
    buckets as TensorFlow's; TF recommends the fast (Fingerprint64) or strong (keyed) variants."""
    if input is not None:
        string_tensor = input
    if string_tensor is None:
        raise ValueError("string_to_hash_bucket needs the strings (string_tensor or input)")
    with _op_scope(name, "StringToHashBucket") as sc:
        return sc.op(StringToHashBucket, _str_tensor(string_tensor), num_buckets=int(num_buckets))


def string_to_hash_bucket_strong(input, num_buckets, key, name=None):  # noqa: A002
    """SipHash-2-4 of each string under the 128-bit `key` (two unsigned 64-bit ints) modulo
    `num_buckets`, int64 (tf.strings.to_hash_bucket_strong): TF's buckets, hard to collide on purpose
    without the key."""
    key = [int(k) for k in key]
    if len(key) != 2 or not all(0 <= k < 1 << 64 for k in key):
        raise ValueError(f"to_hash_bucket_strong: key must be two unsigned 64-bit integers, got {key}")
    with _op_scope(name, "StringToHashBucketStrong") as sc:
        return sc.op(StringToHashBucketStrong, _str_tensor(input), num_buckets=int(num_buckets), key=tuple(key))


def fingerprint(data, method="farmhash64", name=None):
    """[rows, 8] uint8 fingerprints of the rows of `data` (tf.fingerprint): FarmHash Fingerprint64 of
    each row's bytes (numeric data), or of a row's one string, or of the concatenated fingerprints of
    a row's strings, each written as 8 little-endian bytes. Only method "farmhash64" exists, as in TF."""
    with _op_scope(name, "Fingerprint") as sc:
        data = convert_to_tensor(data)
        return sc.op(Fingerprint, data, convert_to_tensor(method, dtype=dtypes.string))
