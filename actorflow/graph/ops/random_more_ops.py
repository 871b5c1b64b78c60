"""Sampling ops with TF 1.x's seeds (graph/ops/random_ops.py get_seed): Multinomial
(tf.multinomial, tf.random.categorical) and RandomShuffle (tf.random_shuffle, tf.random.shuffle)."""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops.array_ops._infer import _no_gradient, _static_int
from actorflow.graph.ops.random_ops import _seed_attrs
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["multinomial", "categorical", "random_shuffle"]


def _infer_multinomial(inputs, attrs):
    logits, num_samples = inputs
    if not logits.dtype.is_floating:
        raise InferenceError(f"logits must be floating point, got {logits.dtype.name}")
    if logits.shape.ndims not in (None, 2):
        raise InferenceError(f"logits must be a matrix [batch_size, num_classes], got shape {logits.shape}")
    if num_samples.dtype is not dtypes.int32 or num_samples.shape.ndims not in (None, 0):
        raise InferenceError(f"num_samples must be an int32 scalar, got {num_samples.dtype.name} {num_samples.shape}")
    batch = logits.shape.dims[0] if logits.shape.dims is not None else None
    return [(dtypes.as_dtype(attrs.get("output_dtype", dtypes.int64)), TensorShape([batch, _static_int(num_samples)]))]


Multinomial = define_op("Multinomial", _infer_multinomial, stateful=True)
Multinomial.gradient(_no_gradient)
RandomShuffle = define_op("RandomShuffle", lambda inputs, attrs: [(inputs[0].dtype, inputs[0].shape)], stateful=True)
RandomShuffle.gradient(_no_gradient)


def multinomial(logits, num_samples, seed=None, name=None, output_dtype=None):
    """`num_samples` class indices drawn for each row of `logits` (unnormalized log-probabilities)
    (tf.compat.v1.multinomial)."""
    with name_scope(name or "multinomial"):
        logits = convert_to_tensor(logits, name="logits")
        n = convert_to_tensor(num_samples, dtype=dtypes.int32, name="num_samples")
        out = dtypes.as_dtype(output_dtype) if output_dtype is not None else dtypes.int64
        if out not in (dtypes.int32, dtypes.int64):
            raise TypeError(f"output_dtype must be int32 or int64, got {out.name}")
        return Multinomial(logits, n, output_dtype=out, **_seed_attrs(seed))


def categorical(logits, num_samples, dtype=None, seed=None, name=None):
    """tf.random.categorical: `multinomial` with the output dtype named `dtype`."""
    return multinomial(logits, num_samples, seed=seed, name=name or "categorical", output_dtype=dtype)


def random_shuffle(value, seed=None, name=None):
    """`value` with its first dimension randomly permuted (tf.random_shuffle)."""
    with name_scope(name or "random_shuffle"):
        return RandomShuffle(convert_to_tensor(value, name="value"), **_seed_attrs(seed))
