"""More of tf.nn's convolution family under TF 1.x names, composed of existing ops as TF composes
them: conv2d_backprop_filter (and the top-level conv2d_backprop_{filter,input}_v2, which take the
filter / input tensor instead of its shape), depthwise_conv2d_backprop_{filter,input},
conv1d_transpose, conv_transpose, atrous_conv2d_transpose, max_pool_v2 / avg_pool_v2 (1-, 2- or
3-D by rank), pool (N-D pooling with a dilation rate) and with_space_to_batch. Gradients come from
the ops they are made of.
"""
from __future__ import annotations

import numbers

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import Tensor, convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, nn_conv3d_ops, nn_ops
from actorflow.graph.ops.array_ops.space_batch import (
    batch_to_space_nd,
    required_space_to_batch_paddings,
    space_to_batch_nd,
)
from actorflow.graph.ops.constant import identity
from actorflow.graph.ops.infer import constant_value
from actorflow.graph.ops.nn_conv_ops import (
    _get_sequence,
    avg_pool1d,
    depthwise_conv2d_native_backprop_filter,
    depthwise_conv2d_native_backprop_input,
    max_pool1d,
)
from actorflow.graph.ops.nn_ops import Conv2DBackpropFilter, _data_format, _padding_arg, _window_arg

__all__ = ["conv2d_backprop_filter", "conv2d_backprop_filter_v2", "conv2d_backprop_input_v2",
           "depthwise_conv2d_backprop_filter", "depthwise_conv2d_backprop_input", "conv1d_transpose",
           "conv_transpose", "atrous_conv2d_transpose", "max_pool_v2", "avg_pool_v2", "pool", "with_space_to_batch"]

depthwise_conv2d_backprop_input = depthwise_conv2d_native_backprop_input    # tf.nn's other names of the ops
depthwise_conv2d_backprop_filter = depthwise_conv2d_native_backprop_filter


def conv2d_backprop_filter(input, filter_sizes, out_backprop, strides, padding, use_cudnn_on_gpu=True,  # noqa: A002
                           data_format="NHWC", dilations=(1, 1, 1, 1), name=None):
    """The gradient of conv2d with respect to its filter, of shape `filter_sizes`
    (tf.compat.v1.nn.conv2d_backprop_filter; op Conv2DBackpropFilter)."""
    fmt = _data_format(data_format, "conv2d_backprop_filter")
    with name_scope(name, "Conv2DBackpropFilter", [input, filter_sizes, out_backprop]) as scope:
        x = convert_to_tensor(input)
        dy = convert_to_tensor(out_backprop, dtype=x.dtype) if not isinstance(out_backprop, Tensor) else out_backprop
        sizes = convert_to_tensor(filter_sizes, dtype=dtypes.int32) if not isinstance(filter_sizes, Tensor) \
            else filter_sizes
        return Conv2DBackpropFilter(x, sizes, dy, strides=_window_arg(strides, "strides", fmt, "conv2d"),
                                    padding=_padding_arg(padding, "conv2d_backprop_filter"), data_format=fmt,
                                    dilations=_window_arg(dilations, "dilations", fmt, "conv2d"), name=scope)


def conv2d_backprop_filter_v2(input, filter, out_backprop, strides, padding, use_cudnn_on_gpu=True,  # noqa: A002
                              explicit_paddings=(), data_format="NHWC", dilations=(1, 1, 1, 1), name=None):
    """conv2d_backprop_filter given the filter itself rather than its shape
    (tf.compat.v1.conv2d_backprop_filter_v2)."""
    if explicit_paddings:
        raise ValueError("conv2d_backprop_filter_v2: explicit_paddings are not supported")
    with name_scope(name, "Conv2DBackpropFilterV2", [input, filter, out_backprop]) as scope:
        f = convert_to_tensor(filter)
        return conv2d_backprop_filter(input, array_ops.shape(f), out_backprop, strides, padding,
                                      data_format=data_format, dilations=dilations, name=scope)


def conv2d_backprop_input_v2(input, filter, out_backprop, strides, padding, use_cudnn_on_gpu=True,  # noqa: A002
                             explicit_paddings=(), data_format="NHWC", dilations=(1, 1, 1, 1), name=None):
    """conv2d_backprop_input given the input itself rather than its shape
    (tf.compat.v1.conv2d_backprop_input_v2)."""
    if explicit_paddings:
        raise ValueError("conv2d_backprop_input_v2: explicit_paddings are not supported")
    with name_scope(name, "Conv2DBackpropInputV2", [input, filter, out_backprop]) as scope:
        x = convert_to_tensor(input)
        return nn_ops.conv2d_backprop_input(array_ops.shape(x), filter, out_backprop, strides, padding,
                                            data_format=data_format, dilations=dilations, name=scope)


def conv1d_transpose(input, filters, output_shape, strides, padding="SAME", data_format="NWC",  # noqa: A002
                     dilations=None, name=None):
    """The transpose of conv1d: `input` [batch, width, in_channels] and `filters` [width,
    out_channels, in_channels] give an output of `output_shape` (tf.nn.conv1d_transpose): as in TF,
    a conv2d_transpose over a height of 1."""
    if data_format is None:
        data_format = "NWC"
    if data_format not in ("NWC", "NCW"):
        raise ValueError(f"conv1d_transpose: data_format must be 'NWC' or 'NCW', got {data_format!r}")
    with name_scope(name, "conv1d_transpose", [input, filters, output_shape]) as scope:
        channel_index, spatial = (2, 1) if data_format == "NWC" else (1, 2)
        st = [1] + _get_sequence(strides, 1, channel_index, "stride")
        dil = [1] + _get_sequence(dilations, 1, channel_index, "dilations")
        x = convert_to_tensor(input)
        if x.shape.ndims not in (None, 3):
            raise ValueError(f"conv1d_transpose: input '{x.name}' must be rank 3, got shape {x.shape}")
        f = convert_to_tensor(filters, dtype=x.dtype)
        if isinstance(output_shape, Tensor):
            shape = array_ops.concat([output_shape[:spatial], [1], output_shape[spatial:]], 0)
        else:
            shape = list(output_shape)
            if len(shape) != 3:
                raise ValueError(f"conv1d_transpose: output_shape must have 3 elements, got {shape}")
            shape = shape[:spatial] + [1] + shape[spatial:]
        out = nn_ops.conv2d_transpose(array_ops.expand_dims(x, spatial), array_ops.expand_dims(f, 0), shape,
                                      strides=st, padding=padding,
                                      data_format="NHWC" if data_format == "NWC" else "NCHW", dilations=dil)
        return array_ops.squeeze(out, [spatial], name=scope)


def conv_transpose(input, filters, output_shape, strides, padding="SAME", data_format=None,  # noqa: A002
                   dilations=None, name=None):
    """conv1d_transpose, conv2d_transpose or conv3d_transpose by the length of `output_shape` (or the
    input's rank) (tf.nn.conv_transpose)."""
    n = len(output_shape) if not isinstance(output_shape, Tensor) else output_shape.shape[0]
    if n is None:
        n = convert_to_tensor(input).shape.ndims
    n = None if n is None else int(n) - 2
    nc = data_format is not None and str(data_format).startswith("NC")
    with name_scope(name, "conv_transpose", [input, filters, output_shape]) as scope:
        if n == 1:
            return conv1d_transpose(input, filters, output_shape, strides, padding,
                                    data_format="NCW" if nc else "NWC", dilations=dilations, name=scope)
        if n == 2:
            fmt = "NCHW" if nc else "NHWC"
            return nn_ops.conv2d_transpose(input, filters, output_shape,
                                           strides=_get_sequence(strides, 2, 1 if nc else 3, "strides"),
                                           padding=padding, data_format=fmt,
                                           dilations=_get_sequence(dilations, 2, 1 if nc else 3, "dilations"),
                                           name=scope)
        if n == 3:
            return nn_conv3d_ops.conv3d_transpose(input, filters, output_shape, strides, padding=padding,
                                                  data_format="NCDHW" if nc else "NDHWC", dilations=dilations,
                                                  name=scope)
    raise ValueError(f"conv_transpose: output_shape must have 3, 4 or 5 elements (1-, 2- or 3-D), got "
                     f"{output_shape}")


def atrous_conv2d_transpose(value, filters, output_shape, rate, padding, name=None):
    """The transpose of atrous_conv2d (tf.nn.atrous_conv2d_transpose): conv2d_transpose with the
    rate as dilations (TF reaches the same sums through space_to_batch)."""
    if not isinstance(rate, (numbers.Integral, np.integer)) or rate < 1:
        raise ValueError(f"atrous_conv2d_transpose: rate must be a positive int, got {rate!r}")
    with name_scope(name, "atrous_conv2d_transpose", [value, filters, output_shape]) as scope:
        return nn_ops.conv2d_transpose(value, filters, output_shape, strides=[1, 1, 1, 1], padding=padding,
                                       dilations=[1, int(rate), int(rate), 1], name=scope)


# ---------------------------------------------------------------------------------------------
# N-D pooling
# ---------------------------------------------------------------------------------------------

def _pool_nd(is_max, fn, input, ksize, strides, padding, data_format, name):  # noqa: A002
    x = convert_to_tensor(input)
    n = x.shape.ndims
    if n is None:
        raise ValueError(f"{fn}: the rank of input '{x.name}' must be known")
    nc = data_format is not None and str(data_format).startswith("NC")
    if n == 3:
        return (max_pool1d if is_max else avg_pool1d)(x, ksize, strides, padding,
                                                      data_format="NCW" if nc else "NWC", name=name)
    if n == 4:
        c = 1 if nc else 3
        return (nn_ops.max_pool if is_max else nn_ops.avg_pool)(
            x, _get_sequence(ksize, 2, c, "ksize"), _get_sequence(strides, 2, c, "strides"), padding,
            data_format="NCHW" if nc else "NHWC", name=name)
    if n == 5:
        return (nn_conv3d_ops.max_pool3d if is_max else nn_conv3d_ops.avg_pool3d)(
            x, ksize, strides, padding, data_format="NCDHW" if nc else "NDHWC", name=name)
    raise ValueError(f"{fn}: input must be rank 3, 4 or 5 (1-, 2- or 3-D pooling), got shape {x.shape}")


def max_pool_v2(input, ksize, strides, padding, data_format=None, name=None):  # noqa: A002
    """Max pooling of a 3-, 4- or 5-D input (tf.nn.max_pool, tf.compat.v1.nn.max_pool_v2)."""
    return _pool_nd(True, "max_pool_v2", input, ksize, strides, padding, data_format, name)


def avg_pool_v2(input, ksize, strides, padding, data_format=None, name=None):  # noqa: A002
    """Average pooling of a 3-, 4- or 5-D input (tf.nn.avg_pool, tf.compat.v1.nn.avg_pool_v2)."""
    return _pool_nd(False, "avg_pool_v2", input, ksize, strides, padding, data_format, name)


def _static_ints(v, what, fn):
    c = v if not isinstance(v, Tensor) else constant_value(v)
    if c is None:
        raise ValueError(f"{fn}: {what} must be known when the graph is built")
    return [int(a) for a in np.asarray(c).reshape(-1)]


def _adjust(orig, fill, spatial_dims):
    """TF's _with_space_to_batch_adjust: `orig` ([M] or [M, 2]) spread over dims 1..max(spatial_dims),
    `fill` in the dims that are not spatial."""
    orig = np.asarray(orig)
    out = np.full((spatial_dims[-1],) + orig.shape[1:], fill, orig.dtype)
    for i, d in enumerate(spatial_dims):
        out[d - 1] = orig[i]
    return out


def with_space_to_batch(input, dilation_rate, padding, op, filter_shape=None, spatial_dims=None,  # noqa: A002
                        data_format=None):
    """Runs `op(converted_input, num_spatial_dims, padding)` on the space-to-batch form of `input`
    so that `op` sees a dilation of `dilation_rate` as a dense window, then moves the result back
    (tf.nn.with_space_to_batch). `dilation_rate` and (for SAME) `filter_shape` must be static."""
    x = convert_to_tensor(input, name="input")
    rate = _static_ints(dilation_rate, "dilation_rate", "with_space_to_batch")
    m = len(rate)
    start = 2 if data_format is not None and str(data_format).startswith("NC") else 1
    dims = list(range(start, m + start)) if spatial_dims is None else [int(d) for d in spatial_dims]
    if dims != sorted(set(dims)) or any(d < 1 for d in dims):
        raise ValueError("with_space_to_batch: spatial_dims must be a monotonically increasing sequence of positive "
                         f"integers, got {list(dims)}")
    if len(dims) != m:
        raise ValueError(f"with_space_to_batch: {len(dims)} spatial_dims for a dilation_rate of {m} elements")
    if x.shape.ndims is not None and x.shape.ndims < dims[-1] + 1:
        raise ValueError(f"with_space_to_batch: input '{x.name}' has rank {x.shape.ndims}, needs at least "
                         f"{dims[-1] + 1} for spatial_dims {dims}")
    if any(r < 1 for r in rate):
        raise ValueError(f"with_space_to_batch: dilation_rate must be positive, got {rate}")
    padding = _padding_arg(padding, "with_space_to_batch")
    if all(r == 1 for r in rate):
        return op(x, m, padding)
    if padding == "SAME":
        if filter_shape is None:
            raise ValueError("with_space_to_batch: filter_shape must be specified for SAME padding")
        fs = _static_ints(filter_shape, "filter_shape", "with_space_to_batch")[:m]
        extra = [(k - 1) * r for k, r in zip(fs, rate)]
        base = np.array([[e // 2, e - e // 2] for e in extra], np.int32)
    else:
        base = np.zeros((m, 2), np.int32)
    static = [x.shape[d] for d in dims] if x.shape.ndims is not None else [None]
    if None not in static:
        full = np.array(static) + base.sum(axis=1)
        grow = (-full) % np.array(rate)
        paddings = base + np.stack([np.zeros(m, np.int32), grow], axis=1)
        crops = np.stack([np.zeros(m, np.int32), grow], axis=1)
        block = _adjust(np.array(rate, np.int32), 1, dims)
        paddings, crops = _adjust(paddings.astype(np.int32), 0, dims), _adjust(crops.astype(np.int32), 0, dims)
    else:
        spatial = array_ops.shape(x)[dims[0]:dims[-1] + 1]
        if dims != list(range(dims[0], dims[-1] + 1)):
            raise ValueError("with_space_to_batch: non-contiguous spatial_dims need a static input shape")
        paddings, crops = required_space_to_batch_paddings(spatial, rate, base)
        block = _adjust(np.array(rate, np.int32), 1, dims)
        if dims[0] > 1:
            lead = np.zeros((dims[0] - 1, 2), np.int32)
            paddings = array_ops.concat([lead, paddings], 0)
            crops = array_ops.concat([lead, crops], 0)
    converted = space_to_batch_nd(x, block, paddings)
    result = op(converted, m, "VALID")
    return batch_to_space_nd(result, block, crops)


def pool(input, window_shape, pooling_type, padding, dilation_rate=None, strides=None, name=None,  # noqa: A002
         data_format=None, dilations=None):
    """N-D (1-, 2- or 3-D) max or average pooling with an optional dilation rate (tf.nn.pool); a
    dilation rate runs through with_space_to_batch as in TF, and cannot be combined with strides > 1
    or (as in TF 2.21) with SAME padding."""
    if dilation_rate is not None and dilations is not None:
        raise ValueError("pool: cannot specify both 'dilation_rate' and 'dilations'")
    rate = dilation_rate if dilation_rate is not None else dilations
    window = [int(w) for w in window_shape]
    m = len(window)
    if m not in (1, 2, 3):
        raise ValueError(f"pool: window_shape must have 1 to 3 elements, got {window}")
    if pooling_type not in ("MAX", "AVG"):
        raise ValueError(f"pool: pooling_type must be 'MAX' or 'AVG', got {pooling_type!r}")
    rate = [1] * m if rate is None else [int(r) for r in rate]
    strides = [1] * m if strides is None else [int(s) for s in strides]
    if len(rate) != m or len(strides) != m:
        raise ValueError(f"pool: dilation_rate {rate} and strides {strides} must have {m} elements like window_shape")
    if any(w < 1 for w in window) or any(r < 1 for r in rate) or any(s < 1 for s in strides):
        raise ValueError(f"pool: window_shape, dilation_rate and strides must be positive, got {window}, {rate}, "
                         f"{strides}")
    if any(s > 1 for s in strides) and any(r > 1 for r in rate):
        raise ValueError(f"pool: strides > 1 not supported in conjunction with dilation_rate > 1; got strides "
                         f"{strides} and dilation_rate {rate}")
    if str(padding).upper() == "SAME" and any(r > 1 for r in rate):
        raise ValueError(f"pool: pooling with 'SAME' padding is not implemented for `dilation_rate` > 1. Received: "
                         f"padding={padding} and dilation_rate={rate}")
    nc = data_format is not None and str(data_format).startswith("NC")
    is_max = pooling_type == "MAX"
    with name_scope(name, f"{pooling_type.lower()}_pool", [input]) as scope:
        x = convert_to_tensor(input)
        if x.shape.ndims not in (None, m + 2):
            raise ValueError(f"pool: input '{x.name}' must have rank {m + 2}, got shape {x.shape}")
        spatial_dims = list(range(2, m + 2)) if nc else list(range(1, m + 1))

        def op(converted, _, pad):
            if m == 1:
                return (max_pool1d if is_max else avg_pool1d)(converted, window, strides, pad,
                                                              data_format="NCW" if nc else "NWC")
            if m == 2:
                c = 1 if nc else 3
                return (nn_ops.max_pool if is_max else nn_ops.avg_pool)(
                    converted, _get_sequence(window, 2, c, "ksize"), _get_sequence(strides, 2, c, "strides"), pad,
                    data_format="NCHW" if nc else "NHWC")
            return (nn_conv3d_ops.max_pool3d if is_max else nn_conv3d_ops.avg_pool3d)(
                converted, window, strides, pad, data_format="NCDHW" if nc else "NDHWC")
        out = with_space_to_batch(x, rate, padding, op, filter_shape=window, spatial_dims=spatial_dims,
                                  data_format=data_format)
        return identity(out, name=scope)
