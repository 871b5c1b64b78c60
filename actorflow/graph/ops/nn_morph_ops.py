"""Grayscale morphology (tf.nn.dilation2d, tf.compat.v1.nn.erosion2d). Op types: Dilation2D,
Dilation2DBackpropInput, Dilation2DBackpropFilter (kernels: kernels/cpu/morphology.py). Erosion is
built as TF 1.x builds it: -dilation2d(-value, the kernel reversed in both spatial axes)."""
from __future__ import annotations

from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import math_ops
from actorflow.graph.ops.nn_conv_ops import _get_sequence
from actorflow.graph.ops.nn_ops import _check_same_dtype, _out_size, _padding_arg, _with_rank
from actorflow.graph.ops.sort_ops import reverse
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["dilation2d", "erosion2d"]


def _hw(attrs, key):
    v = [int(a) for a in attrs.get(key, ())]
    if len(v) != 4 or v[0] != 1 or v[3] != 1 or min(v) < 1:
        raise InferenceError(f"{key} must be [1, h, w, 1] with positive h and w, got {v}")
    return v[1], v[2]


def _dilation_shape(x: TensorShape, f: TensorShape, attrs) -> TensorShape:
    x = _with_rank(x, 4, "input")
    f = _with_rank(f, 3, "filter")
    if x[3] is not None and f[2] is not None and x[3] != f[2]:
        raise InferenceError(f"input depth {x[3]} (input shape {x}) does not match the filter's depth {f[2]} "
                             f"(filter shape {f})")
    (sh, sw), (rh, rw) = _hw(attrs, "strides"), _hw(attrs, "rates")
    padding = attrs.get("padding")
    if padding not in ("SAME", "VALID"):
        raise InferenceError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    return TensorShape([x[0], _out_size(x[1], f[0], sh, rh, padding, "height"),
                        _out_size(x[2], f[1], sw, rw, padding, "width"), x[3] if x[3] is not None else f[2]])


def _infer_dilation(inputs, attrs):
    x, f = inputs
    if not x.dtype.is_floating and not x.dtype.is_integer:
        raise InferenceError(f"input must be a real number type, got {x.dtype.name}")
    _check_same_dtype(x, f, "input", "filter")
    return [(x.dtype, _dilation_shape(x.shape, f.shape, attrs))]


def _infer_backprop(which):
    def infer(inputs, attrs):
        x, f, dy = inputs
        _check_same_dtype(x, f, "input", "filter")
        _check_same_dtype(x, dy, "input", "out_backprop")
        want = _dilation_shape(x.shape, f.shape, attrs)
        if not want.is_compatible_with(dy.shape):
            raise InferenceError(f"out_backprop shape {dy.shape} does not match the output shape {want}")
        return [(x.dtype, x.shape if which == "input" else f.shape)]
    return infer


Dilation2D = define_op("Dilation2D", _infer_dilation)
Dilation2DBackpropInput = define_op("Dilation2DBackpropInput", _infer_backprop("input"))
Dilation2DBackpropFilter = define_op("Dilation2DBackpropFilter", _infer_backprop("filter"))


def _attrs(op):
    return {k: op.attrs[k] for k in ("strides", "rates", "padding")}


@Dilation2D.gradient
def _dilation2d_grad(op, grad):
    x, f = op.inputs
    return [Dilation2DBackpropInput(x, f, grad, **_attrs(op)), Dilation2DBackpropFilter(x, f, grad, **_attrs(op))]


def dilation2d(input, filter=None, strides=None, rates=None, padding=None, name=None,  # noqa: A002 (TF's names)
               filters=None, dilations=None, data_format="NHWC"):
    """Grayscale dilation of an NHWC `input` by a [fh, fw, depth] structuring function: the max over
    each window of input + filter (tf.compat.v1.nn.dilation2d, and tf.nn.dilation2d's `filters` /
    `dilations` names; op Dilation2D). `strides` and `rates` are 4 elements [1, h, w, 1] (or 2)."""
    if (filter is None) == (filters is None):
        raise ValueError("dilation2d needs exactly one of filter and filters")
    if rates is not None and dilations is not None:
        raise ValueError("dilation2d: cannot specify both rates and dilations")
    if data_format != "NHWC":
        raise ValueError(f"dilation2d: only data_format 'NHWC' is supported, got {data_format!r}")
    f = filter if filter is not None else filters
    rates = rates if rates is not None else dilations
    if strides is None:
        raise ValueError("dilation2d needs strides")
    with name_scope(name, "dilation2d", [input, f]) as scope:
        x = convert_to_tensor(input)
        f = convert_to_tensor(f, dtype=x.dtype)
        return Dilation2D(x, f, strides=tuple(_get_sequence(strides, 2, 3, "strides")),
                          rates=tuple(_get_sequence(rates, 2, 3, "rates")),
                          padding=_padding_arg(padding, "dilation2d"), name=scope)


def erosion2d(value, kernel, strides, rates, padding, name=None):
    """Grayscale erosion of an NHWC `value` by a [kh, kw, depth] structuring function: the min over
    each window of value - kernel (tf.compat.v1.nn.erosion2d), built as TF builds it:
    -dilation2d(-value, reverse(kernel, [0, 1]))."""
    with name_scope(name, "erosion2d", [value, kernel]) as scope:
        x = convert_to_tensor(value)
        k = convert_to_tensor(kernel, dtype=x.dtype)
        return math_ops.negative(dilation2d(math_ops.negative(x), reverse(k, [0, 1]), strides=strides,
                                            rates=rates, padding=padding), name=scope)
