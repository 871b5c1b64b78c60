"""tf.nn's 3-D convolution and pooling (TF 1.x names): conv3d, conv3d_transpose, the conv3d backprop
functions, max_pool3d and avg_pool3d.

Op types defined here: Conv3D, Conv3DBackpropInputV2, Conv3DBackpropFilterV2, MaxPool3D, MaxPool3DGrad,
MaxPool3DGradGrad, AvgPool3D, AvgPool3DGrad (kernels: kernels/cpu/conv3d.py). Gradients are TF's: the convolution and its
two backprop ops are linear in their operands, each one's gradient made of the other two (as Conv2D's);
MaxPool3D's gradient is MaxPool3DGrad (whose gradient is MaxPool3DGradGrad), AvgPool3D's AvgPool3DGrad,
and AvgPool3DGrad's gradient AvgPool3D.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.nn_conv_ops import _get_sequence
from actorflow.graph.ops.nn_ops import (
    _check_compatible,
    _check_float,
    _check_same_dtype,
    _out_size,
    _padding_arg,
    _pool_attrs,
    _sizes_input,
    _with_rank,
    conv_gradients,
    conv_inferences,
)
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["conv3d", "conv3d_transpose", "conv3d_backprop_filter", "conv3d_backprop_filter_v2",
           "conv3d_backprop_input_v2", "max_pool3d", "avg_pool3d"]

_AXES = {"NDHWC": (1, 2, 3, 4), "NCDHW": (2, 3, 4, 1)}


def _axes(attrs) -> tuple:
    fmt = attrs.get("data_format", "NDHWC")
    try:
        return _AXES[fmt]
    except KeyError:
        raise InferenceError(f"data_format must be 'NDHWC' or 'NCDHW', got {fmt!r}") from None


def _window3(attrs, key, axes, default=None) -> tuple:
    """The (depth, height, width) entries of a 5-element window attr."""
    v = attrs.get(key, default)
    if v is None:
        raise InferenceError(f"attr '{key}' is required")
    v = tuple(int(x) for x in v)
    if len(v) != 5:
        raise InferenceError(f"{key} must have 5 elements, got {list(v)}")
    if v[0] != 1 or v[axes[3]] != 1:
        raise InferenceError(f"{key} in the batch and depth (channel) dimensions must be 1, got {list(v)}")
    out = tuple(v[a] for a in axes[:3])
    if min(out) < 1:
        raise InferenceError(f"{key} must be positive, got {list(v)}")
    return out


def _padding(attrs) -> str:
    p = attrs.get("padding")
    if p not in ("SAME", "VALID"):
        raise InferenceError(f"padding must be 'SAME' or 'VALID', got {p!r}")
    return p


def _shape5(axes, n, spatial, c) -> TensorShape:
    dims = [None] * 5
    dims[0] = n
    for a, s in zip(axes[:3], spatial):
        dims[a] = s
    dims[axes[3]] = c
    return TensorShape(dims)


def _conv3d_output_shape(x: TensorShape, f: TensorShape, attrs) -> TensorShape:
    axes = _axes(attrs)
    strides = _window3(attrs, "strides", axes)
    dil = _window3(attrs, "dilations", axes, (1,) * 5)
    padding = _padding(attrs)
    x = _with_rank(x, 5, "input")
    f = _with_rank(f, 5, "filter")
    in_c = x[axes[3]]
    if in_c is not None and f[3] is not None and in_c != f[3]:
        raise InferenceError(f"input depth {in_c} (input shape {x}) does not match the filter's in_channels {f[3]} "
                             f"(filter shape {f}, DHWIO)")
    spatial = [_out_size(x[a], f[i], strides[i], dil[i], padding, dim)
               for i, (a, dim) in enumerate(zip(axes[:3], ("depth", "height", "width")))]
    return _shape5(axes, x[0], spatial, f[4])


def _pool3d_output_shape(x: TensorShape, attrs) -> TensorShape:
    axes = _axes(attrs)
    k = _window3(attrs, "ksize", axes)
    s = _window3(attrs, "strides", axes)
    padding = _padding(attrs)
    x = _with_rank(x, 5, "input")
    spatial = [_out_size(x[a], k[i], s[i], 1, padding, dim)
               for i, (a, dim) in enumerate(zip(axes[:3], ("depth", "height", "width")))]
    return _shape5(axes, x[0], spatial, x[axes[3]])


_infer_conv3d, _infer_conv3d_backprop_input, _infer_conv3d_backprop_filter = \
    conv_inferences(_conv3d_output_shape, rank=5)

Conv3D = define_op("Conv3D", _infer_conv3d)
Conv3DBackpropInputV2 = define_op("Conv3DBackpropInputV2", _infer_conv3d_backprop_input)
Conv3DBackpropFilterV2 = define_op("Conv3DBackpropFilterV2", _infer_conv3d_backprop_filter)
conv_gradients(Conv3D, Conv3DBackpropInputV2, Conv3DBackpropFilterV2)


def _infer_pool3d(inputs, attrs):
    (x,) = inputs
    _check_float(x, "input")
    return [(x.dtype, _pool3d_output_shape(x.shape, attrs))]


def _infer_max_pool3d_grad(inputs, attrs):
    orig_in, orig_out, grad = inputs
    _check_float(grad, "grad")
    _check_same_dtype(orig_in, orig_out, "orig_input", "orig_output")
    want = _pool3d_output_shape(orig_in.shape, attrs)
    for t, what in ((orig_out, "orig_output"), (grad, "grad")):
        _check_compatible(want, t.shape, f"{what} shape {t.shape} does not match the pooled shape {want} "
                                         f"of orig_input {orig_in.shape}")
    return [(grad.dtype, _with_rank(orig_in.shape, 5, "orig_input"))]


def _infer_avg_pool3d_grad(inputs, attrs):
    sizes, grad = inputs
    _check_float(grad, "grad")
    in_shape = _sizes_input(sizes, "orig_input_shape", 5)
    want = _pool3d_output_shape(in_shape, attrs)
    _check_compatible(want, grad.shape, f"grad shape {grad.shape} does not match the pooled shape {want} "
                                        f"of an input of shape {in_shape}")
    return [(grad.dtype, in_shape)]


def _infer_max_pool3d_grad_grad(inputs, attrs):
    orig_in, orig_out, grad = inputs
    _check_float(grad, "grad")
    _check_same_dtype(orig_in, grad, "orig_input", "grad")
    want = _pool3d_output_shape(orig_in.shape, attrs)
    _check_compatible(orig_in.shape, grad.shape, f"grad shape {grad.shape} does not match orig_input {orig_in.shape}")
    _check_compatible(want, orig_out.shape, f"orig_output shape {orig_out.shape} does not match the pooled shape "
                                            f"{want} of orig_input {orig_in.shape}")
    return [(grad.dtype, want)]


MaxPool3D = define_op("MaxPool3D", _infer_pool3d)
MaxPool3DGrad = define_op("MaxPool3DGrad", _infer_max_pool3d_grad)
MaxPool3DGradGrad = define_op("MaxPool3DGradGrad", _infer_max_pool3d_grad_grad)
AvgPool3D = define_op("AvgPool3D", _infer_pool3d)
AvgPool3DGrad = define_op("AvgPool3DGrad", _infer_avg_pool3d_grad)


@MaxPool3D.gradient
def _max_pool3d_grad(op, grad):
    return [MaxPool3DGrad(op.inputs[0], op.outputs[0], grad, **_pool_attrs(op))]


@MaxPool3DGrad.gradient
def _max_pool3d_grad_grad(op, grad):
    x, y, _ = op.inputs
    return [array_ops.zeros_like(x), array_ops.zeros_like(y), MaxPool3DGradGrad(x, y, grad, **_pool_attrs(op))]


@AvgPool3D.gradient
def _avg_pool3d_grad(op, grad):
    return [AvgPool3DGrad(array_ops.shape(op.inputs[0]), grad, **_pool_attrs(op))]


@AvgPool3DGrad.gradient
def _avg_pool3d_grad_grad(op, grad):
    return [None, AvgPool3D(grad, **_pool_attrs(op))]


# ---------------------------------------------------------------------------------------------
# Functions
# ---------------------------------------------------------------------------------------------

def _fmt3(data_format, fn) -> str:
    if data_format is None or data_format in ("NDHWC", "N...C"):
        return "NDHWC"
    if data_format in ("NCDHW", "NC..."):
        return "NCDHW"
    raise ValueError(f"{fn}: data_format must be 'NDHWC' or 'NCDHW', got {data_format!r}")


def _seq(v, name, fmt, default=None):
    if v is None:
        v = default
    return tuple(_get_sequence(v, 3, 1 if fmt == "NCDHW" else 4, name))


def _pick(a, b, names, fn):
    if (a is None) == (b is None):
        raise ValueError(f"{fn} needs exactly one of {names[0]} and {names[1]}")
    return a if a is not None else b


def _sizes_arg(v, fn, what):
    s = v if isinstance(v, Tensor) else array_ops.stack([convert_to_tensor(d, dtype=dtypes.int32) for d in v])
    s = math_ops.cast(s, dtypes.int32) if s.dtype != dtypes.int32 else s
    if s.shape.dims is not None and s.shape.dims != (5,):
        raise ValueError(f"{fn}: {what} must have shape (5,), got {s.shape}")
    return s


def conv3d(input, filter=None, strides=None, padding=None, data_format="NDHWC",  # noqa: A002 (TF's names)
           dilations=(1, 1, 1, 1, 1), name=None, filters=None):
    """3-D convolution (cross-correlation) of an NDHWC `input` with a DHWIO filter
    (tf.compat.v1.nn.conv3d; op Conv3D). `strides` and `dilations` are 5 elements (an int or 3 are
    also taken, as by tf.nn.conv3d); `padding` is 'SAME' or 'VALID'."""
    f = _pick(filter, filters, ("filter", "filters"), "conv3d")
    if strides is None:
        raise ValueError("conv3d needs strides")
    fmt = _fmt3(data_format, "conv3d")
    with name_scope(name, "Conv3D", [input, f]) as scope:
        x = convert_to_tensor(input)
        f = convert_to_tensor(f, dtype=x.dtype) if not isinstance(f, Tensor) else f
        return Conv3D(x, f, strides=_seq(strides, "strides", fmt), padding=_padding_arg(padding, "conv3d"),
                      data_format=fmt, dilations=_seq(dilations, "dilations", fmt, 1), name=scope)


def conv3d_backprop_input_v2(input_sizes, filter=None, out_backprop=None, strides=None, padding=None,  # noqa: A002
                             data_format="NDHWC", dilations=(1, 1, 1, 1, 1), name=None):
    """The gradient of conv3d with respect to its input, of shape `input_sizes`
    (tf.compat.v1.nn.conv3d_backprop_input_v2; op Conv3DBackpropInputV2)."""
    fmt = _fmt3(data_format, "conv3d_backprop_input_v2")
    with name_scope(name, "Conv3DBackpropInputV2", [input_sizes, filter, out_backprop]) as scope:
        dy = convert_to_tensor(out_backprop)
        f = convert_to_tensor(filter, dtype=dy.dtype)
        return Conv3DBackpropInputV2(_sizes_arg(input_sizes, "conv3d_backprop_input_v2", "input_sizes"), f, dy,
                                     strides=_seq(strides, "strides", fmt),
                                     padding=_padding_arg(padding, "conv3d_backprop_input_v2"), data_format=fmt,
                                     dilations=_seq(dilations, "dilations", fmt, 1), name=scope)


def conv3d_backprop_filter_v2(input, filter_sizes, out_backprop, strides, padding,  # noqa: A002
                              data_format="NDHWC", dilations=(1, 1, 1, 1, 1), name=None):
    """The gradient of conv3d with respect to its filter, of shape `filter_sizes`
    (tf.compat.v1.nn.conv3d_backprop_filter_v2; op Conv3DBackpropFilterV2)."""
    fmt = _fmt3(data_format, "conv3d_backprop_filter_v2")
    with name_scope(name, "Conv3DBackpropFilterV2", [input, filter_sizes, out_backprop]) as scope:
        x = convert_to_tensor(input)
        dy = convert_to_tensor(out_backprop, dtype=x.dtype)
        return Conv3DBackpropFilterV2(x, _sizes_arg(filter_sizes, "conv3d_backprop_filter_v2", "filter_sizes"), dy,
                                      strides=_seq(strides, "strides", fmt),
                                      padding=_padding_arg(padding, "conv3d_backprop_filter_v2"), data_format=fmt,
                                      dilations=_seq(dilations, "dilations", fmt, 1), name=scope)


conv3d_backprop_filter = conv3d_backprop_filter_v2    # tf.compat.v1.nn.conv3d_backprop_filter: the same op


def conv3d_transpose(value=None, filter=None, output_shape=None, strides=None, padding="SAME",  # noqa: A002
                     data_format="NDHWC", name=None, input=None, filters=None, dilations=None):  # noqa: A002
    """The transpose of conv3d: `value` [batch, d, h, w, in_channels] and a filter [d, h, w,
    out_channels, in_channels] give an output of `output_shape` (tf.compat.v1.nn.conv3d_transpose;
    op Conv3DBackpropInputV2, as in TF)."""
    value = _pick(value, input, ("value", "input"), "conv3d_transpose")
    f = _pick(filter, filters, ("filter", "filters"), "conv3d_transpose")
    if output_shape is None or strides is None:
        raise ValueError("conv3d_transpose needs output_shape and strides")
    fmt = _fmt3(data_format, "conv3d_transpose")
    with name_scope(name, "conv3d_transpose", [value, f, output_shape]) as scope:
        value = convert_to_tensor(value)
        f = convert_to_tensor(f, dtype=value.dtype)
        axis = 4 if fmt == "NDHWC" else 1
        if f.shape.ndims == 5 and value.shape.ndims == 5 and None not in (f.shape[4], value.shape[axis]) \
                and f.shape[4] != value.shape[axis]:
            raise ValueError(f"input channels does not match filter's input channels, {value.shape[axis]} != "
                             f"{f.shape[4]}")
        return Conv3DBackpropInputV2(_sizes_arg(output_shape, "conv3d_transpose", "output_shape"), f, value,
                                     strides=_seq(strides, "strides", fmt),
                                     padding=_padding_arg(padding, "conv3d_transpose"), data_format=fmt,
                                     dilations=_seq(dilations, "dilations", fmt, 1), name=scope)


def _pool3d(op_def, fn, default_name, input, ksize, strides, padding, data_format, name):  # noqa: A002
    fmt = _fmt3(data_format, fn)
    if ksize is None or strides is None:
        raise ValueError(f"{fn} needs ksize and strides")
    with name_scope(name, default_name, [input]) as scope:
        x = convert_to_tensor(input)
        return op_def(x, ksize=_seq(ksize, "ksize", fmt), strides=_seq(strides, "strides", fmt),
                      padding=_padding_arg(padding, fn), data_format=fmt, name=scope)


def max_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None):  # noqa: A002
    """Maximum over `ksize` windows of an NDHWC volume (tf.nn.max_pool3d; op MaxPool3D); `ksize`
    and `strides` are an int, 3 or 5 elements. SAME windows ignore the padding."""
    return _pool3d(MaxPool3D, "max_pool3d", "MaxPool3D", input, ksize, strides, padding, data_format, name)


def avg_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None):  # noqa: A002
    """Mean over `ksize` windows of an NDHWC volume (tf.nn.avg_pool3d; op AvgPool3D); SAME windows
    average only the elements inside the volume, as in TF."""
    return _pool3d(AvgPool3D, "avg_pool3d", "AvgPool3D", input, ksize, strides, padding, data_format, name)
