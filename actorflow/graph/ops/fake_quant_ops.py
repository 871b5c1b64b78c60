"""Simulated quantization for quantization-aware training (tf.fake_quant_with_min_max_args, _vars,
_vars_per_channel, and their _gradient ops; tf.quantization's names).

The range [min, max] is nudged so that 0.0 is exactly representable, then each float is clamped to
it and rounded to one of the 2^num_bits - 1 (or 2^num_bits - 2 with `narrow_range`) steps: TF's
float32 arithmetic, step for step (kernels/cpu/fake_quant.py), so the values equal TensorFlow's. The
gradient is the straight-through estimator: the incoming gradient where the input lies in the nudged
range, else 0 for the input and summed into min (below) or max (above) for the _vars forms.
"""
from __future__ import annotations

from actorflow import errors
from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops.array_ops._args import _op_scope
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["fake_quant_with_min_max_args", "fake_quant_with_min_max_args_gradient", "fake_quant_with_min_max_vars",
           "fake_quant_with_min_max_vars_gradient", "fake_quant_with_min_max_vars_per_channel",
           "fake_quant_with_min_max_vars_per_channel_gradient"]


def _need_float32(t, op, what):
    if t.dtype is not dtypes.float32:
        raise InferenceError(f"{op}: {what} must be float32, got {t.dtype.name} ('{t.name}')")


def _check_bits(attrs, op):
    bits = int(attrs.get("num_bits", 8))
    if not 2 <= bits <= 16:
        raise InferenceError(f"{op}: num_bits is out of range, expected between 2 and 16, was: {bits}")


def _infer_args(inputs, attrs):
    _need_float32(inputs[0], "FakeQuantWithMinMaxArgs", "inputs")
    _check_bits(attrs, "FakeQuantWithMinMaxArgs")
    return [(dtypes.float32, inputs[0].shape)]


def _infer_args_grad(inputs, attrs):
    g, x = inputs
    for t, w in ((g, "gradients"), (x, "inputs")):
        _need_float32(t, "FakeQuantWithMinMaxArgsGradient", w)
    _check_bits(attrs, "FakeQuantWithMinMaxArgsGradient")
    return [(dtypes.float32, x.shape.merge_with(g.shape))]


def _scalar_range(op, mn, mx):
    for t, w in ((mn, "min"), (mx, "max")):
        _need_float32(t, op, w)
        if t.shape.ndims not in (None, 0):
            raise InferenceError(f"{op}: {w} must be a scalar, got shape {t.shape} ('{t.name}')")


def _channel_range(op, x, mn, mx):
    depth = x.shape.as_list()[-1] if x.shape.ndims else None
    if x.shape.ndims is not None and not 1 <= x.shape.ndims <= 4:
        raise InferenceError(f"{op}: inputs must have rank 1 to 4 (channels last), got shape {x.shape}")
    for t, w in ((mn, "min"), (mx, "max")):
        _need_float32(t, op, w)
        if t.shape.ndims not in (None, 1):
            raise InferenceError(f"{op}: {w} must be a vector, got shape {t.shape} ('{t.name}')")
        n = t.shape.as_list()[0] if t.shape.ndims == 1 else None
        if n is not None and depth is not None and n != depth:
            raise InferenceError(f"{op}: {w} has {n} channels but the inputs' last dimension is {depth}")
    return TensorShape([depth])


def _infer_vars(inputs, attrs):
    x, mn, mx = inputs
    _need_float32(x, "FakeQuantWithMinMaxVars", "inputs")
    _scalar_range("FakeQuantWithMinMaxVars", mn, mx)
    _check_bits(attrs, "FakeQuantWithMinMaxVars")
    return [(dtypes.float32, x.shape)]


def _infer_vars_grad(inputs, attrs):
    g, x, mn, mx = inputs
    _need_float32(g, "FakeQuantWithMinMaxVarsGradient", "gradients")
    _need_float32(x, "FakeQuantWithMinMaxVarsGradient", "inputs")
    _scalar_range("FakeQuantWithMinMaxVarsGradient", mn, mx)
    _check_bits(attrs, "FakeQuantWithMinMaxVarsGradient")
    return [(dtypes.float32, x.shape.merge_with(g.shape)), (dtypes.float32, TensorShape([])),
            (dtypes.float32, TensorShape([]))]


def _infer_channel(inputs, attrs):
    x, mn, mx = inputs
    _need_float32(x, "FakeQuantWithMinMaxVarsPerChannel", "inputs")
    _channel_range("FakeQuantWithMinMaxVarsPerChannel", x, mn, mx)
    _check_bits(attrs, "FakeQuantWithMinMaxVarsPerChannel")
    return [(dtypes.float32, x.shape)]


def _infer_channel_grad(inputs, attrs):
    g, x, mn, mx = inputs
    _need_float32(g, "FakeQuantWithMinMaxVarsPerChannelGradient", "gradients")
    _need_float32(x, "FakeQuantWithMinMaxVarsPerChannelGradient", "inputs")
    depth = _channel_range("FakeQuantWithMinMaxVarsPerChannelGradient", x, mn, mx)
    _check_bits(attrs, "FakeQuantWithMinMaxVarsPerChannelGradient")
    return [(dtypes.float32, x.shape.merge_with(g.shape)), (dtypes.float32, depth), (dtypes.float32, depth)]


FakeQuantWithMinMaxArgs = define_op("FakeQuantWithMinMaxArgs", _infer_args)
FakeQuantWithMinMaxArgsGradient = define_op("FakeQuantWithMinMaxArgsGradient", _infer_args_grad)
FakeQuantWithMinMaxVars = define_op("FakeQuantWithMinMaxVars", _infer_vars)
FakeQuantWithMinMaxVarsGradient = define_op("FakeQuantWithMinMaxVarsGradient", _infer_vars_grad)
FakeQuantWithMinMaxVarsPerChannel = define_op("FakeQuantWithMinMaxVarsPerChannel", _infer_channel)
FakeQuantWithMinMaxVarsPerChannelGradient = define_op("FakeQuantWithMinMaxVarsPerChannelGradient",
                                                      _infer_channel_grad)


def _bits(op):
    return {"num_bits": op.attrs.get("num_bits", 8), "narrow_range": op.attrs.get("narrow_range", False)}


@FakeQuantWithMinMaxArgs.gradient
def _args_grad(op, grad):
    return [FakeQuantWithMinMaxArgsGradient(grad, op.inputs[0], min=op.attrs["min"], max=op.attrs["max"],
                                            **_bits(op))]


@FakeQuantWithMinMaxVars.gradient
def _vars_grad(op, grad):
    return list(FakeQuantWithMinMaxVarsGradient(grad, *op.inputs, **_bits(op)))


@FakeQuantWithMinMaxVarsPerChannel.gradient
def _channel_grad(op, grad):
    return list(FakeQuantWithMinMaxVarsPerChannelGradient(grad, *op.inputs, **_bits(op)))


for _d in (FakeQuantWithMinMaxArgsGradient, FakeQuantWithMinMaxVarsGradient,
           FakeQuantWithMinMaxVarsPerChannelGradient):
    _d.gradient(lambda op, *grads: [None] * len(op.inputs))


def _check_args(min, max, num_bits):  # noqa: A002
    if not float(min) < float(max):
        raise errors.InvalidArgumentError(None, None, f"FakeQuantWithMinMaxArgs: min has to be smaller than max, "
                                                      f"was: min={min}, max={max}")
    if not 2 <= int(num_bits) <= 16:
        raise errors.InvalidArgumentError(None, None, f"FakeQuantWithMinMaxArgs: num_bits is out of range, expected "
                                                      f"between 2 and 16, was: {num_bits}")


def _f32(x, what):
    return convert_to_tensor(x, dtype=dtypes.float32, name=what)


def fake_quant_with_min_max_args(inputs, min=-6, max=6, num_bits=8, narrow_range=False, name=None):  # noqa: A002
    """Fake-quantizes float32 `inputs` to the nudged [min, max] range in 2^num_bits steps
    (tf.quantization.fake_quant_with_min_max_args); min < max, 2 <= num_bits <= 16, else
    InvalidArgumentError."""
    _check_args(min, max, num_bits)
    with _op_scope(name, "FakeQuantWithMinMaxArgs") as sc:
        return sc.op(FakeQuantWithMinMaxArgs, _f32(inputs, "inputs"), min=float(min), max=float(max),
                     num_bits=int(num_bits), narrow_range=bool(narrow_range))


def fake_quant_with_min_max_args_gradient(gradients, inputs, min=-6, max=6, num_bits=8, narrow_range=False,  # noqa: A002
                                          name=None):
    """`gradients` where `inputs` lie in the nudged range, else 0
    (tf.quantization.fake_quant_with_min_max_args_gradient)."""
    _check_args(min, max, num_bits)
    with _op_scope(name, "FakeQuantWithMinMaxArgsGradient") as sc:
        return sc.op(FakeQuantWithMinMaxArgsGradient, _f32(gradients, "gradients"), _f32(inputs, "inputs"),
                     min=float(min), max=float(max), num_bits=int(num_bits), narrow_range=bool(narrow_range))


def fake_quant_with_min_max_vars(inputs, min, max, num_bits=8, narrow_range=False, name=None):  # noqa: A002
    """fake_quant_with_min_max_args with min and max scalar float32 tensors (variables trained by the
    gradient) (tf.quantization.fake_quant_with_min_max_vars)."""
    with _op_scope(name, "FakeQuantWithMinMaxVars") as sc:
        return sc.op(FakeQuantWithMinMaxVars, _f32(inputs, "inputs"), _f32(min, "min"), _f32(max, "max"),
                     num_bits=int(num_bits), narrow_range=bool(narrow_range))


def fake_quant_with_min_max_vars_gradient(gradients, inputs, min, max, num_bits=8, narrow_range=False,  # noqa: A002
                                          name=None):
    """(backprops wrt inputs, wrt min, wrt max) of fake_quant_with_min_max_vars
    (tf.quantization.fake_quant_with_min_max_vars_gradient)."""
    with _op_scope(name, "FakeQuantWithMinMaxVarsGradient") as sc:
        return tuple(sc.op(FakeQuantWithMinMaxVarsGradient, _f32(gradients, "gradients"), _f32(inputs, "inputs"),
                           _f32(min, "min"), _f32(max, "max"), num_bits=int(num_bits),
                           narrow_range=bool(narrow_range)))


def fake_quant_with_min_max_vars_per_channel(inputs, min, max, num_bits=8, narrow_range=False, name=None):  # noqa: A002
    """fake_quant_with_min_max_vars with one [min, max] per channel (the last dimension; inputs of rank 1
    to 4) (tf.quantization.fake_quant_with_min_max_vars_per_channel)."""
    with _op_scope(name, "FakeQuantWithMinMaxVarsPerChannel") as sc:
        return sc.op(FakeQuantWithMinMaxVarsPerChannel, _f32(inputs, "inputs"), _f32(min, "min"), _f32(max, "max"),
                     num_bits=int(num_bits), narrow_range=bool(narrow_range))


def fake_quant_with_min_max_vars_per_channel_gradient(gradients, inputs, min, max, num_bits=8,  # noqa: A002
                                                      narrow_range=False, name=None):
    """(backprops wrt inputs, wrt min [d], wrt max [d]) of fake_quant_with_min_max_vars_per_channel
    (tf.quantization.fake_quant_with_min_max_vars_per_channel_gradient)."""
    with _op_scope(name, "FakeQuantWithMinMaxVarsPerChannelGradient") as sc:
        return tuple(sc.op(FakeQuantWithMinMaxVarsPerChannelGradient, _f32(gradients, "gradients"),
                           _f32(inputs, "inputs"), _f32(min, "min"), _f32(max, "max"), num_bits=int(num_bits),
                           narrow_range=bool(narrow_range)))
