"""The rest of tf.nn's convolution family (TF 1.x names): 1-D, dilated, depthwise and separable
convolution, local response normalization, space/depth rearrangement, 1-D pooling and max-pooling
with argmax.

Op types defined here: DepthwiseConv2dNative, DepthwiseConv2dNativeBackpropInput,
DepthwiseConv2dNativeBackpropFilter, LRN, LRNGrad, SpaceToDepth, DepthToSpace, MaxPoolWithArgmax,
MaxPoolGradWithArgmax. The rest is composed as TF composes it: conv1d is ExpandDims + Conv2D +
Squeeze, max_pool1d/avg_pool1d the same around the 2-D pools, separable_conv2d a depthwise
convolution then a 1x1 Conv2D, so gradients come from the parts.

Where TF runs a dilated (atrous) convolution as SpaceToBatch + convolution + BatchToSpace
(`with_space_to_batch`), actorflow passes the rate to the kernels as `dilations` (Conv2D's and
DepthwiseConv2dNative's kernels take dilations): the same sums, without the two reshuffles.
"""
from __future__ import annotations

import collections
import numbers

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import array_ops, math_ops, nn_ops
from actorflow.graph.ops.nn_ops import (
    AvgPool,
    Conv2D,
    MaxPool,
    _check_compatible,
    _check_float,
    _check_same_dtype,
    _image_axes,
    _image_shape,
    _padding_arg,
    _pool_output_shape,
    _window_arg,
    _with_rank,
    conv2d,
)
from actorflow.graph.tensor_shape import TensorShape

__all__ = [
    "conv1d", "convolution", "atrous_conv2d", "depthwise_conv2d", "depthwise_conv2d_native",
    "depthwise_conv2d_native_backprop_input", "depthwise_conv2d_native_backprop_filter", "separable_conv2d",
    "lrn", "local_response_normalization", "space_to_depth", "depth_to_space", "max_pool1d", "avg_pool1d",
    "max_pool_with_argmax",
]


# ---------------------------------------------------------------------------------------------
# Argument helpers (TF's nn_ops._get_sequence)
# ---------------------------------------------------------------------------------------------

def _get_sequence(value, n, channel_index, name) -> list:
    """An int or a list of 1, n or n + 2 ints as the full n + 2 list, 1 on the batch and channel
    axes (TF's _get_sequence)."""
    if value is None:
        return [1] * (n + 2)
    if isinstance(value, Tensor):
        raise TypeError(f"{name} must be a Python int or list of ints, not a tensor")
    value = [int(v) for v in (value if isinstance(value, (list, tuple, np.ndarray)) else [value])]
    if len(value) == n + 2:
        return value
    if len(value) == 1:
        value = value * n
    elif len(value) != n:
        raise ValueError(f"{name} should be of length 1, {n} or {n + 2}. Received: {name}={value} of length "
                         f"{len(value)}")
    return [1, 1] + value if channel_index == 1 else [1] + value + [1]


def _fmt_2d(data_format, fn) -> str:
    if data_format is None or data_format in ("NHWC", "N...C"):
        return "NHWC"
    if data_format in ("NCHW", "NC..."):
        return "NCHW"
    raise ValueError(f"{fn}: data_format must be 'NHWC' or 'NCHW', got {data_format!r}")


def _fmt_1d(data_format, fn) -> str:
    """The 2-D format a 1-D data format (NWC/NCW, or TF's deprecated NHWC/NCHW spellings) runs as."""
    if data_format is None or data_format in ("NWC", "NHWC"):
        return "NHWC"
    if data_format in ("NCW", "NCHW"):
        return "NCHW"
    raise ValueError(f"{fn}: `data_format` must be 'NWC' or 'NCW'. Received: data_format={data_format}")


def _as_tensor(v, dtype=None, name=None):
    if isinstance(v, Tensor) or hasattr(v, "_as_graph_element"):
        return convert_to_tensor(v)
    return convert_to_tensor(v, dtype=dtype, name=name)


# ---------------------------------------------------------------------------------------------
# 1-D, N-D and atrous convolution (composed of Conv2D)
# ---------------------------------------------------------------------------------------------

def conv1d(value=None, filters=None, stride=None, padding=None, use_cudnn_on_gpu=None, data_format=None,
           name=None, input=None, dilations=None):  # noqa: A002  (TF's name)
    """1-D convolution of a [batch, in_width, in_channels] input (NWC; NCW: [batch, in_channels,
    in_width]) with a [filter_width, in_channels, out_channels] filter (tf.compat.v1.nn.conv1d).

    As in TF: the input gets a height axis of 1 and the filter a leading axis of 1, a Conv2D runs,
    and the height axis is squeezed away, so the gradients are Conv2D's. `stride` and `dilations`
    are an int or a list of 1 or 3 ints; `value` and `input` are aliases. Inputs with more than one
    batch dimension are not supported (TF folds them into one).
    """
    if (value is None) == (input is None):
        raise ValueError("conv1d needs exactly one of value and input")
    value = value if value is not None else input
    if filters is None:
        raise ValueError("conv1d needs filters")
    with name_scope(name, "conv1d", [value, filters]) as scope:
        data_format = _fmt_1d(data_format, "conv1d")
        channel_index, spatial_start_dim = (2, -3) if data_format == "NHWC" else (1, -2)
        strides = [1] + _get_sequence(stride, 1, channel_index, "stride")
        dils = [1] + _get_sequence(dilations, 1, channel_index, "dilations")
        x = _as_tensor(value)
        if x.shape.ndims is not None and x.shape.ndims != 3:
            raise ValueError(f"conv1d: input '{x.name}' must be rank 3 ([batch, width, channels] or [batch, "
                             f"channels, width]), got shape {x.shape}")
        f = _as_tensor(filters, dtype=x.dtype)
        if f.shape.ndims is not None and f.shape.ndims != 3:
            raise ValueError(f"conv1d: filters '{f.name}' must be rank 3 ([width, in_channels, out_channels]), got "
                             f"shape {f.shape}")
        x = array_ops.expand_dims(x, spatial_start_dim)
        f = array_ops.expand_dims(f, 0)
        result = Conv2D(x, f, strides=tuple(strides), padding=_padding_arg(padding, "conv1d"),
                        data_format=data_format, dilations=tuple(dils), name=scope)
        return array_ops.squeeze(result, [spatial_start_dim])


def convolution(input, filter=None, padding=None, strides=None, dilation_rate=None, name=None,  # noqa: A002
                data_format=None, filters=None, dilations=None):
    """1-D, 2-D or 3-D convolution, optionally atrous (tf.compat.v1.nn.convolution).

    The number of spatial dimensions comes from the filter's rank (else the input's): 1 runs
    `conv1d`, 2 runs `conv2d`, 3 runs `conv3d`, each with `dilation_rate` as dilations. As in TF,
    strides above 1 cannot be combined with a dilation rate above 1. `filters` and `dilations` are
    TF's aliases of `filter` and `dilation_rate`.
    """
    if (filter is None) == (filters is None):
        raise ValueError("convolution needs exactly one of filter and filters")
    if dilation_rate is not None and dilations is not None:
        raise ValueError("Cannot specify both 'dilation_rate' and 'dilations'")
    f = filter if filter is not None else filters
    rate = dilation_rate if dilation_rate is not None else dilations
    x = _as_tensor(input, name="input")
    f = _as_tensor(f, dtype=x.dtype, name="filters")
    n = f.shape.ndims - 2 if f.shape.ndims else (x.shape.ndims - 2 if x.shape.ndims else None)
    if n is None:
        raise ValueError(f"convolution: the rank of input '{x.name}' or of filter '{f.name}' must be known")
    if n not in (1, 2, 3):
        raise ValueError(f"convolution: only 1-D, 2-D and 3-D convolutions are supported, got {n} spatial "
                         f"dimensions (filter shape {f.shape}, input shape {x.shape})")
    channel_index = n + 1 if data_format is None or not str(data_format).startswith("NC") else 1
    rates = _get_sequence(rate, n, channel_index, "dilations")
    strides_ = _get_sequence(strides, n, channel_index, "strides")
    spatial = slice(2, None) if channel_index == 1 else slice(1, -1)
    if any(r != 1 for r in rates[spatial]) and any(s != 1 for s in strides_[spatial]):
        raise ValueError(f"convolution: strides > 1 not supported in conjunction with dilation_rate > 1; got "
                         f"strides {strides_} and dilation_rate {rates}")
    with name_scope(name, "convolution", [x, f]) as scope:
        if n == 1:
            return conv1d(x, f, strides_, padding, data_format=data_format, dilations=rates, name=scope)
        if n == 3:
            from actorflow.graph.ops.nn_conv3d_ops import conv3d  # (that module imports this one)
            return conv3d(x, f, strides_, padding, data_format="NCDHW" if channel_index == 1 else "NDHWC",
                          dilations=rates, name=scope)
        return conv2d(x, f, strides_, padding, data_format=_fmt_2d(data_format, "convolution"), dilations=rates,
                      name=scope)


def atrous_conv2d(value, filters, rate, padding, name=None):
    """Dilated 2-D convolution of NHWC `value` with an HWIO filter, `rate - 1` zeros between filter
    taps (tf.nn.atrous_conv2d): `convolution` with dilation_rate [rate, rate]."""
    if not isinstance(rate, (numbers.Integral, np.integer)) or rate < 1:
        raise ValueError(f"atrous_conv2d: rate must be a positive int, got {rate!r}")
    return convolution(value, filters, padding, dilation_rate=[int(rate)] * 2, name=name)


# ---------------------------------------------------------------------------------------------
# Depthwise convolution
# ---------------------------------------------------------------------------------------------

def _depthwise_output_shape(x: TensorShape, f: TensorShape, attrs) -> TensorShape:
    return nn_ops._conv_output_shape(x, f, attrs, depthwise=True)


_infer_depthwise, _infer_depthwise_backprop_input, _infer_depthwise_backprop_filter = \
    nn_ops.conv_inferences(_depthwise_output_shape)


DepthwiseConv2dNative = define_op("DepthwiseConv2dNative", _infer_depthwise)
DepthwiseConv2dNativeBackpropInput = define_op("DepthwiseConv2dNativeBackpropInput", _infer_depthwise_backprop_input)
DepthwiseConv2dNativeBackpropFilter = define_op("DepthwiseConv2dNativeBackpropFilter",
                                                _infer_depthwise_backprop_filter)


nn_ops.conv_gradients(DepthwiseConv2dNative, DepthwiseConv2dNativeBackpropInput, DepthwiseConv2dNativeBackpropFilter)


def _depthwise_attrs(strides, padding, data_format, dilations, fn) -> dict:
    fmt = _fmt_2d(data_format, fn)
    return {"strides": _window_arg(strides, "strides", fmt, fn), "padding": _padding_arg(padding, fn),
            "data_format": fmt, "dilations": _window_arg(dilations, "dilations", fmt, fn)}


def depthwise_conv2d_native(input, filter, strides, padding, data_format="NHWC", dilations=(1, 1, 1, 1),  # noqa: A002
                            name=None):
    """Depthwise 2-D convolution (tf.compat.v1.nn.depthwise_conv2d_native; op DepthwiseConv2dNative).

    Each of the C input channels is convolved with its own `channel_multiplier` filters: a filter
    [kh, kw, C, M] gives C * M output channels, channel c * M + m from input channel c and filter
    [:, :, c, m]. `strides` and `dilations` are 4-element lists (or an int, or [h, w]).
    """
    with name_scope(name, "DepthwiseConv2dNative", [input, filter]) as scope:
        x = _as_tensor(input)
        f = _as_tensor(filter, dtype=x.dtype)
        return DepthwiseConv2dNative(x, f, **_depthwise_attrs(strides, padding, data_format, dilations,
                                                              "depthwise_conv2d_native"), name=scope)


def depthwise_conv2d_native_backprop_input(input_sizes, filter, out_backprop, strides, padding,  # noqa: A002
                                           data_format="NHWC", dilations=(1, 1, 1, 1), name=None):
    """The gradient of depthwise_conv2d_native with respect to its input, of shape `input_sizes`
    (tf.compat.v1.nn.depthwise_conv2d_native_backprop_input)."""
    with name_scope(name, "DepthwiseConv2dNativeBackpropInput", [input_sizes, filter, out_backprop]) as scope:
        dy = _as_tensor(out_backprop)
        return DepthwiseConv2dNativeBackpropInput(
            _as_tensor(input_sizes, dtype=dtypes.int32), _as_tensor(filter, dtype=dy.dtype), dy,
            **_depthwise_attrs(strides, padding, data_format, dilations, "depthwise_conv2d_native_backprop_input"),
            name=scope)


def depthwise_conv2d_native_backprop_filter(input, filter_sizes, out_backprop, strides, padding,  # noqa: A002
                                            data_format="NHWC", dilations=(1, 1, 1, 1), name=None):
    """The gradient of depthwise_conv2d_native with respect to its filter, of shape `filter_sizes`
    (tf.compat.v1.nn.depthwise_conv2d_native_backprop_filter)."""
    with name_scope(name, "DepthwiseConv2dNativeBackpropFilter", [input, filter_sizes, out_backprop]) as scope:
        x = _as_tensor(input)
        return DepthwiseConv2dNativeBackpropFilter(
            x, _as_tensor(filter_sizes, dtype=dtypes.int32), _as_tensor(out_backprop, dtype=x.dtype),
            **_depthwise_attrs(strides, padding, data_format, dilations, "depthwise_conv2d_native_backprop_filter"),
            name=scope)


def _rate_dilations(rate, strides, data_format, fn):
    """TF's `rate` ([h, w]; None is [1, 1]) as a 4-element dilations list, refusing strides > 1
    with a rate > 1 (which TF's space-to-batch path does not compute meaningfully)."""
    if rate is None:
        rate = [1, 1]
    rate = [int(r) for r in (rate if isinstance(rate, (list, tuple, np.ndarray)) else [rate, rate])]
    if len(rate) != 2 or any(r < 1 for r in rate):
        raise ValueError(f"{fn}: rate must be two positive ints [rate_height, rate_width], got {rate}")
    if any(r > 1 for r in rate) and any(s != 1 for s in _window_arg(strides, "strides", data_format, fn)):
        raise ValueError(f"{fn}: when the dilation rate is greater than 1 ({rate}), all strides must be 1, got "
                         f"strides {strides}")
    return (1, 1, rate[0], rate[1]) if data_format == "NCHW" else (1, rate[0], rate[1], 1)


def depthwise_conv2d(input, filter, strides, padding, rate=None, name=None, data_format=None,  # noqa: A002
                     dilations=None):
    """Depthwise 2-D convolution with an optional dilation rate (tf.compat.v1.nn.depthwise_conv2d).

    `rate` (or its alias `dilations`) is [rate_height, rate_width]; it runs as the dilations of
    DepthwiseConv2dNative rather than TF's space-to-batch reshuffle (the same values). A rate above
    1 with strides above 1 is an error here; TF only warns, and its result is not a strided
    dilated convolution.
    """
    if rate is not None and dilations is not None:
        raise ValueError("Cannot specify both 'rate' and 'dilations'")
    rate = dilations if dilations is not None else rate
    fmt = _fmt_2d(data_format, "depthwise_conv2d")
    with name_scope(name, "depthwise", [input, filter]) as scope:
        x = _as_tensor(input, name="tensor_in")
        f = _as_tensor(filter, dtype=x.dtype, name="filter_in")
        return DepthwiseConv2dNative(x, f, strides=_window_arg(strides, "strides", fmt, "depthwise_conv2d"),
                                     padding=_padding_arg(padding, "depthwise_conv2d"), data_format=fmt,
                                     dilations=_rate_dilations(rate, strides, fmt, "depthwise_conv2d"), name=scope)


def separable_conv2d(input, depthwise_filter, pointwise_filter, strides, padding, rate=None, name=None,  # noqa: A002
                     data_format=None, dilations=None):
    """A depthwise convolution followed by a 1x1 convolution mixing its channels
    (tf.compat.v1.nn.separable_conv2d): `depthwise_filter` [kh, kw, C, M], `pointwise_filter`
    [1, 1, C * M, out_channels]. Built as TF builds it: DepthwiseConv2dNative named "depthwise",
    then a VALID stride-1 Conv2D."""
    if rate is not None and dilations is not None:
        raise ValueError("Cannot specify both 'rate' and 'dilations'")
    rate = dilations if dilations is not None else rate
    fmt = _fmt_2d(data_format, "separable_conv2d")
    with name_scope(name, "separable_conv2d", [input, depthwise_filter, pointwise_filter]) as scope:
        x = _as_tensor(input, name="tensor_in")
        df = _as_tensor(depthwise_filter, dtype=x.dtype, name="depthwise_filter")
        pf = _as_tensor(pointwise_filter, dtype=x.dtype, name="pointwise_filter")
        ps = pf.shape
        if ps.ndims is not None and ps.ndims != 4:
            raise ValueError(f"separable_conv2d: pointwise_filter must be rank 4, got shape {ps}")
        if ps.ndims == 4 and (ps[0] not in (None, 1) or ps[1] not in (None, 1)):
            raise ValueError(f"separable_conv2d: pointwise_filter must be [1, 1, in_channels * channel_multiplier, "
                             f"out_channels], got shape {ps}")
        depthwise = DepthwiseConv2dNative(x, df, strides=_window_arg(strides, "strides", fmt, "separable_conv2d"),
                                          padding=_padding_arg(padding, "separable_conv2d"), data_format=fmt,
                                          dilations=_rate_dilations(rate, strides, fmt, "separable_conv2d"),
                                          name="depthwise")
        return Conv2D(depthwise, pf, strides=(1, 1, 1, 1), padding="VALID", data_format=fmt,
                      dilations=(1, 1, 1, 1), name=scope)


# ---------------------------------------------------------------------------------------------
# Local response normalization
# ---------------------------------------------------------------------------------------------

def _lrn_attrs(attrs):
    r = attrs.get("depth_radius", 5)
    if int(r) != r or r < 0:
        raise InferenceError(f"depth_radius must be a non-negative int, got {r!r}")


def _infer_lrn(inputs, attrs):
    (x,) = inputs
    _check_float(x, "input")
    _lrn_attrs(attrs)
    return [(x.dtype, _with_rank(x.shape, 4, "input"))]


def _infer_lrn_grad(inputs, attrs):
    dy, x, y = inputs
    _check_float(dy, "input_grads")
    _check_same_dtype(dy, x, "input_grads", "input_image")
    _check_same_dtype(dy, y, "input_grads", "output_image")
    _lrn_attrs(attrs)
    s = _with_rank(dy.shape, 4, "input_grads")
    for t, what in ((x, "input_image"), (y, "output_image")):
        _check_compatible(s, t.shape, f"{what} shape {t.shape} does not match input_grads shape {s}")
        s = s.merge_with(t.shape)
    return [(dy.dtype, s)]


LRN = define_op("LRN", _infer_lrn)
LRNGrad = define_op("LRNGrad", _infer_lrn_grad)


@LRN.gradient
def _lrn_grad(op, grad):
    attrs = {k: op.attrs[k] for k in ("depth_radius", "bias", "alpha", "beta")}
    return [LRNGrad(grad, op.inputs[0], op.outputs[0], **attrs)]


def lrn(input, depth_radius=5, bias=1, alpha=1, beta=0.5, name=None):  # noqa: A002
    """Local response normalization over the last axis (tf.nn.lrn / local_response_normalization;
    op LRN): ``input / (bias + alpha * sqr_sum) ** beta`` with ``sqr_sum[..., d]`` the sum of
    ``input[..., d - depth_radius : d + depth_radius + 1] ** 2``. `input` is 4-D; float64 is
    accepted too (TF's kernel takes half and float32 only)."""
    with name_scope(name, "LRN", [input]) as scope:
        x = _as_tensor(input)
        if isinstance(depth_radius, bool) or not isinstance(depth_radius, (numbers.Integral, np.integer)):
            raise TypeError(f"lrn: depth_radius must be an int, got {depth_radius!r}")
        return LRN(x, depth_radius=int(depth_radius), bias=float(bias), alpha=float(alpha), beta=float(beta),
                   name=scope)


local_response_normalization = lrn


# ---------------------------------------------------------------------------------------------
# SpaceToDepth / DepthToSpace
# ---------------------------------------------------------------------------------------------

def _block_size(attrs) -> int:
    b = attrs.get("block_size")
    if b is None or int(b) != b or b < 2:
        raise InferenceError(f"block_size must be an int of at least 2, got {b!r}")
    return int(b)


def _infer_space_to_depth(inputs, attrs):
    (x,) = inputs
    b = _block_size(attrs)
    axes = _image_axes(attrs)
    s = _with_rank(x.shape, 4, "input")
    h, w, c = (s[a] for a in axes)
    for size, dim in ((h, "height"), (w, "width")):
        if size is not None and size % b:
            raise InferenceError(f"image {dim} {size} is not divisible by block_size {b} (input shape {s})")
    return [(x.dtype, _image_shape(axes, s[0], None if h is None else h // b, None if w is None else w // b,
                                   None if c is None else c * b * b))]


def _infer_depth_to_space(inputs, attrs):
    (x,) = inputs
    b = _block_size(attrs)
    axes = _image_axes(attrs)
    s = _with_rank(x.shape, 4, "input")
    h, w, c = (s[a] for a in axes)
    if c is not None and c % (b * b):
        raise InferenceError(f"input depth {c} is not divisible by block_size * block_size = {b * b} "
                             f"(input shape {s})")
    return [(x.dtype, _image_shape(axes, s[0], None if h is None else h * b, None if w is None else w * b,
                                   None if c is None else c // (b * b)))]


SpaceToDepth = define_op("SpaceToDepth", _infer_space_to_depth)
DepthToSpace = define_op("DepthToSpace", _infer_depth_to_space)


@SpaceToDepth.gradient
def _space_to_depth_grad(op, grad):
    return [DepthToSpace(grad, block_size=op.attrs["block_size"], data_format=op.attrs.get("data_format", "NHWC"))]


@DepthToSpace.gradient
def _depth_to_space_grad(op, grad):
    return [SpaceToDepth(grad, block_size=op.attrs["block_size"], data_format=op.attrs.get("data_format", "NHWC"))]


def _block_arg(block_size, fn) -> int:
    if isinstance(block_size, bool) or not isinstance(block_size, (numbers.Integral, np.integer)) or block_size < 2:
        raise ValueError(f"{fn}: block_size must be an int of at least 2, got {block_size!r}")
    return int(block_size)


def space_to_depth(input, block_size, name=None, data_format="NHWC"):  # noqa: A002
    """Moves each block_size x block_size block of pixels into the depth axis
    (tf.compat.v1.space_to_depth / tf.nn.space_to_depth; op SpaceToDepth): NHWC [N, H, W, C] gives
    [N, H/b, W/b, b*b*C], output channel (dy * b + dx) * C + c. NCHW is accepted too."""
    with name_scope(name, "SpaceToDepth", [input]) as scope:
        return SpaceToDepth(_as_tensor(input), block_size=_block_arg(block_size, "space_to_depth"),
                            data_format=_fmt_2d(data_format, "space_to_depth"), name=scope)


def depth_to_space(input, block_size, name=None, data_format="NHWC"):  # noqa: A002
    """The inverse of space_to_depth (tf.compat.v1.depth_to_space / tf.nn.depth_to_space; op
    DepthToSpace): NHWC [N, H, W, b*b*C] gives [N, H*b, W*b, C]."""
    with name_scope(name, "DepthToSpace", [input]) as scope:
        return DepthToSpace(_as_tensor(input), block_size=_block_arg(block_size, "depth_to_space"),
                            data_format=_fmt_2d(data_format, "depth_to_space"), name=scope)


# ---------------------------------------------------------------------------------------------
# 1-D pooling (composed of the 2-D pools) and MaxPoolWithArgmax
# ---------------------------------------------------------------------------------------------

def _pool1d(op_def, fn, default_name, input, ksize, strides, padding, data_format, name):  # noqa: A002
    if data_format is None:
        data_format = "NWC"
    if data_format not in ("NWC", "NCW"):
        raise ValueError(f"{fn}: data_format must be 'NWC' or 'NCW', got {data_format!r}")
    with name_scope(name, default_name, [input]) as scope:
        channel_index = 1 if data_format.startswith("NC") else 2
        ks = [1] + _get_sequence(ksize, 1, channel_index, "ksize")
        st = [1] + _get_sequence(strides, 1, channel_index, "strides")
        expanding_dim = 1 if data_format == "NWC" else 2
        x = _as_tensor(input)
        if x.shape.ndims is not None and x.shape.ndims != 3:
            raise ValueError(f"{fn}: input '{x.name}' must be rank 3, got shape {x.shape}")
        x = array_ops.expand_dims(x, expanding_dim)
        result = op_def(x, ksize=tuple(ks), strides=tuple(st), padding=_padding_arg(padding, fn),
                        data_format="NHWC" if data_format == "NWC" else "NCHW", name=scope)
        return array_ops.squeeze(result, [expanding_dim])


def max_pool1d(input, ksize, strides, padding, data_format="NWC", name=None):  # noqa: A002
    """Maximum over windows of a 3-D NWC (or NCW) input (tf.nn.max_pool1d): MaxPool over a height-1
    image, as TF builds it."""
    return _pool1d(MaxPool, "max_pool1d", "MaxPool1d", input, ksize, strides, padding, data_format, name)


def avg_pool1d(input, ksize, strides, padding, data_format="NWC", name=None):  # noqa: A002
    """Mean over windows of a 3-D NWC (or NCW) input (tf.nn.avg_pool1d): AvgPool over a height-1
    image, as TF builds it."""
    return _pool1d(AvgPool, "avg_pool1d", "AvgPool1D", input, ksize, strides, padding, data_format, name)


def _argmax_dtype(attrs):
    t = dtypes.as_dtype(attrs.get("Targmax", dtypes.int64))
    if t not in (dtypes.int32, dtypes.int64):
        raise InferenceError(f"Targmax must be int32 or int64, got {t.name}")
    return t


def _infer_max_pool_with_argmax(inputs, attrs):
    (x,) = inputs
    if not x.dtype.is_numeric:
        raise InferenceError(f"input must be numeric, got {x.dtype.name}")
    if attrs.get("data_format", "NHWC") != "NHWC":
        raise InferenceError("MaxPoolWithArgmax supports only NHWC")
    s = _pool_output_shape(x.shape, attrs)
    return [(x.dtype, s), (_argmax_dtype(attrs), s)]


def _infer_max_pool_grad_with_argmax(inputs, attrs):
    x, grad, argmax = inputs
    _check_same_dtype(x, grad, "input", "grad")
    if argmax.dtype not in (dtypes.int32, dtypes.int64):
        raise InferenceError(f"argmax must be int32 or int64, got {argmax.dtype.name}")
    want = _pool_output_shape(x.shape, attrs)
    for t, what in ((grad, "grad"), (argmax, "argmax")):
        _check_compatible(want, t.shape, f"{what} shape {t.shape} does not match the pooled shape {want} "
                                         f"of input {x.shape}")
    return [(x.dtype, _with_rank(x.shape, 4, "input"))]


MaxPoolWithArgmax = define_op("MaxPoolWithArgmax", _infer_max_pool_with_argmax)
MaxPoolGradWithArgmax = define_op("MaxPoolGradWithArgmax", _infer_max_pool_grad_with_argmax)


@MaxPoolWithArgmax.gradient
def _max_pool_with_argmax_grad(op, grad, unused_argmax_grad=None):
    if not op.inputs[0].dtype.is_floating:
        return [None]
    attrs = {k: op.attrs[k] for k in ("ksize", "strides", "padding", "include_batch_in_index") if k in op.attrs}
    return [MaxPoolGradWithArgmax(op.inputs[0], grad, op.outputs[1], **attrs)]


@MaxPoolGradWithArgmax.gradient
def _max_pool_grad_with_argmax_grad(op, grad):
    # As TF's MaxPoolGradGradWithArgmax: the gradient reaching the input gradient, read back at
    # each output's argmax; zero for the input, none for the indices.
    x, _, argmax = op.inputs
    idx = math_ops.cast(argmax, dtypes.int64)
    if not op.attrs.get("include_batch_in_index", False):
        shape = math_ops.cast(array_ops.shape(x), dtypes.int64)
        per_image = math_ops.reduce_prod(array_ops.slice(shape, [1], [3]))
        first = math_ops.multiply(array_ops.range(array_ops.gather(shape, 0)), per_image)
        idx = math_ops.add(idx, array_ops.reshape(first, [-1, 1, 1, 1]))
    return [array_ops.zeros_like(x), array_ops.gather(array_ops.reshape(grad, [-1]), idx), None]


# TF's generated wrapper returns a namedtuple: programs read `.output` and `.argmax`.
_MaxPoolWithArgmaxOutput = collections.namedtuple("MaxPoolWithArgmax", ["output", "argmax"])


def max_pool_with_argmax(input, ksize, strides, padding, data_format="NHWC", Targmax=None, name=None,  # noqa: A002,N803
                         output_dtype=None, include_batch_in_index=False):
    """Max-pooling of an NHWC image that also returns where each maximum came from
    (tf.compat.v1.nn.max_pool_with_argmax; op MaxPoolWithArgmax).

    Returns the namedtuple (output, argmax), as TF. argmax is the flat index ``(y * width + x) * channels + c`` of the
    chosen input pixel, ``((b * height + y) * width + x) * channels + c`` with
    `include_batch_in_index`; ties go to the first pixel in row-major window order, as in TF's CPU
    kernel. `Targmax` (alias `output_dtype`) is int64 by default. Only NHWC is supported, as in TF.
    """
    if data_format != "NHWC":
        raise ValueError(f"max_pool_with_argmax: `data_format` values other than 'NHWC' are not supported. "
                         f"Received: data_format={data_format}")
    if Targmax is not None and output_dtype is not None:
        raise ValueError("Cannot specify both 'Targmax' and 'output_dtype'")
    t = dtypes.as_dtype(output_dtype if output_dtype is not None else (Targmax or dtypes.int64))
    with name_scope(name, "MaxPoolWithArgmax", [input]) as scope:
        x = _as_tensor(input)
        fn = "max_pool_with_argmax"
        output, argmax = MaxPoolWithArgmax(x, ksize=_window_arg(ksize, "ksize", "NHWC", fn),
                                           strides=_window_arg(strides, "strides", "NHWC", fn),
                                           padding=_padding_arg(padding, fn), Targmax=t,
                                           include_batch_in_index=bool(include_batch_in_index), name=scope)
        return _MaxPoolWithArgmaxOutput(output, argmax)
