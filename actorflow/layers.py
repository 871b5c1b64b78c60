"""af.layers: the functional layers of tf.compat.v1.layers (dense, conv2d, pooling, dropout, ...).

Each call opens a variable scope named `name`, or a unique default ("dense", "dense_1", ...), and
creates its variables there with `get_variable`, so they are named like TF's ("dense/kernel",
"dense/bias") and can be shared with `reuse=True` (or AUTO_REUSE) and the same `name`.
Kernels default to glorot_uniform (get_variable's default), biases to zeros.

`training` may be a Python bool or a scalar bool tensor. A tensor selects between the training
and inference results with SelectV2 (both are computed), which keeps everything differentiable
without control-flow gradients; TF 1.x uses `tf.cond` there.
"""
from __future__ import annotations

import numbers

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import GraphKeys, Tensor, convert_to_tensor, get_default_graph
from actorflow.graph.initializers import ones_initializer, zeros_initializer
from actorflow.graph.ops import array_ops, math_ops, nn_ops
from actorflow.graph.ops.constant import identity
from actorflow.graph.ops.infer import constant_value
from actorflow.graph.variable_scope import get_variable, variable_scope
from actorflow.graph.variables import assign_sub

# Shared default initializers (stateless; the variable's dtype is given when they are called).
_ZEROS = zeros_initializer()
_ONES = ones_initializer()

__all__ = ["dense", "conv2d", "conv2d_transpose", "max_pooling2d", "average_pooling2d", "flatten", "dropout", "batch_normalization"]


# ---------------------------------------------------------------------------------------------
# Shared pieces
# ---------------------------------------------------------------------------------------------

def _layer_scope(name, default_name, reuse=None):
    # TF layers built with reuse but no name share the base name's scope ("dense", not "dense_1").
    if name is None and reuse:
        return variable_scope(default_name, reuse=reuse)
    return variable_scope(name, default_name=default_name, reuse=reuse)


def _float_input(inputs, layer) -> Tensor:
    x = convert_to_tensor(inputs)
    if not x.dtype.is_floating:
        raise TypeError(f"Layer {layer} expects a floating-point input, got {x.dtype.name} tensor '{x.name}'")
    return x


def _pair(v, what, layer):
    if isinstance(v, numbers.Integral):
        return int(v), int(v)
    v = tuple(int(d) for d in v)
    if len(v) != 2:
        raise ValueError(f"Layer {layer}: `{what}` must be an int or a pair of ints, got {v}")
    return v


def _padding(padding, layer) -> str:
    p = str(padding).upper()
    if p not in ("VALID", "SAME"):
        raise ValueError(f"Layer {layer}: padding must be 'valid' or 'same', got {padding!r}")
    return p


def _data_format(data_format, layer) -> str:
    if data_format in ("channels_last", None):
        return "NHWC"
    if data_format == "channels_first":
        return "NCHW"
    raise ValueError(f"Layer {layer}: data_format must be 'channels_last' or 'channels_first', got {data_format!r}")


def _static_bool(training):
    """The Python value of `training` when it is known while building, else None."""
    if isinstance(training, (bool, np.bool_)):
        return bool(training)
    if isinstance(training, Tensor):
        v = constant_value(training)
        return None if v is None else bool(v)
    if training is None:
        return False
    return bool(training)


def _training_tensor(training) -> Tensor:
    t = convert_to_tensor(training, dtype=dtypes.bool_) if not isinstance(training, Tensor) else training
    if t.dtype is not dtypes.bool_:
        raise TypeError(f"`training` must be a Python bool or a bool tensor, got a {t.dtype.name} tensor '{t.name}'")
    if t.shape.ndims not in (None, 0):
        raise ValueError(f"`training` must be a scalar, got shape {t.shape} ('{t.name}')")
    if t.shape.ndims is None:
        # A bool placeholder of unknown shape: pin it to a scalar (a run-time check), so that
        # selecting with it keeps the layer's static shape, as TF's cond does.
        t = array_ops.reshape(t, [])
    return t


def _regularize(out, activity_regularizer):
    if activity_regularizer is not None:
        loss = activity_regularizer(out)
        if loss is not None:
            get_default_graph().add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)


# ---------------------------------------------------------------------------------------------
# Layers
# ---------------------------------------------------------------------------------------------

def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None, bias_initializer=_ZEROS,
          kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
          bias_constraint=None, trainable=True, name=None, reuse=None):
    """activation(inputs @ kernel + bias) (tf.compat.v1.layers.dense).

    Variables `<scope>/kernel` [in, units] and `<scope>/bias` [units]. Inputs of rank > 2 are
    multiplied along their last axis (TF uses tensordot; here reshape, matmul, reshape).
    """
    x = _float_input(inputs, "dense")
    ndims = x.shape.ndims
    if ndims is None or ndims < 2:
        raise ValueError(f"Input 0 of layer dense is incompatible with the layer: expected min_ndim=2, found "
                         f"ndim={ndims}. Full shape received: {x.shape}")
    in_dim = x.shape[-1]
    if in_dim is None:
        raise ValueError("The last dimension of the inputs to `Dense` should be defined. Found `None`.")
    units = int(units)
    with _layer_scope(name, "dense", reuse):
        kernel = get_variable("kernel", [in_dim, units], dtype=x.dtype, initializer=kernel_initializer,
                              regularizer=kernel_regularizer, trainable=trainable, constraint=kernel_constraint)
        bias = get_variable("bias", [units], dtype=x.dtype, initializer=bias_initializer,
                            regularizer=bias_regularizer, trainable=trainable,
                            constraint=bias_constraint) if use_bias else None
        if ndims == 2:
            out = math_ops.matmul(x, kernel)
        else:
            flat = array_ops.reshape(x, [-1, in_dim])
            out = math_ops.matmul(flat, kernel)
            lead = x.shape[:-1]
            if lead.is_fully_defined():
                out_shape = lead.as_list() + [units]
            else:
                dyn = array_ops.strided_slice(array_ops.shape(x), [0], [ndims - 1])
                out_shape = array_ops.concat([dyn, convert_to_tensor([units], dtype=dyn.dtype)], 0)
            out = array_ops.reshape(out, out_shape)
            out.set_shape(lead.concatenate([units]))
        if bias is not None:
            out = nn_ops.bias_add(out, bias)
        if activation is not None:
            out = activation(out)
        _regularize(out, activity_regularizer)
        return out


def conv2d(inputs, filters, kernel_size, strides=(1, 1), padding="valid", data_format="channels_last",
           dilation_rate=(1, 1), activation=None, use_bias=True, kernel_initializer=None,
           bias_initializer=_ZEROS, kernel_regularizer=None, bias_regularizer=None,
           activity_regularizer=None, kernel_constraint=None, bias_constraint=None, trainable=True, name=None,
           reuse=None):
    """2-D convolution layer (tf.compat.v1.layers.conv2d): `<scope>/kernel` [kh, kw, in, filters]
    and `<scope>/bias` [filters]. `padding` is "valid" or "same" (any case)."""
    x = _float_input(inputs, "conv2d")
    if x.shape.ndims != 4:
        raise ValueError(f"Input 0 of layer conv2d is incompatible with the layer: expected ndim=4, found "
                         f"ndim={x.shape.ndims}. Full shape received: {x.shape}")
    fmt = _data_format(data_format, "conv2d")
    channel_axis = 3 if fmt == "NHWC" else 1
    in_ch = x.shape[channel_axis]
    if in_ch is None:
        raise ValueError("The channel dimension of the inputs should be defined. Found `None`.")
    kh, kw = _pair(kernel_size, "kernel_size", "conv2d")
    sh, sw = _pair(strides, "strides", "conv2d")
    dh, dw = _pair(dilation_rate, "dilation_rate", "conv2d")
    filters = int(filters)
    with _layer_scope(name, "conv2d", reuse):
        kernel = get_variable("kernel", [kh, kw, in_ch, filters], dtype=x.dtype, initializer=kernel_initializer,
                              regularizer=kernel_regularizer, trainable=trainable, constraint=kernel_constraint)
        bias = get_variable("bias", [filters], dtype=x.dtype, initializer=bias_initializer,
                            regularizer=bias_regularizer, trainable=trainable,
                            constraint=bias_constraint) if use_bias else None
        full = (lambda a, b: [1, a, b, 1]) if fmt == "NHWC" else (lambda a, b: [1, 1, a, b])
        out = nn_ops.conv2d(x, kernel, strides=full(sh, sw), padding=_padding(padding, "conv2d"), data_format=fmt,
                            dilations=full(dh, dw))
        if bias is not None:
            out = nn_ops.bias_add(out, bias, data_format=fmt)
        if activation is not None:
            out = activation(out)
        _regularize(out, activity_regularizer)
        return out


def conv2d_transpose(inputs, filters, kernel_size, strides=(1, 1), padding="valid", data_format="channels_last",
                     activation=None, use_bias=True, kernel_initializer=None, bias_initializer=_ZEROS,
                     kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                     bias_constraint=None, trainable=True, name=None, reuse=None):
    """Transposed 2-D convolution layer (tf.compat.v1.layers.conv2d_transpose): `<scope>/kernel`
    [kh, kw, filters, in_channels] and `<scope>/bias` [filters]; each spatial size becomes
    `size * stride` ("same") or `(size - 1) * stride + kernel` ("valid"), as in TF."""
    x = _float_input(inputs, "conv2d_transpose")
    if x.shape.ndims != 4:
        raise ValueError(f"Input 0 of layer conv2d_transpose is incompatible with the layer: expected ndim=4, found "
                         f"ndim={x.shape.ndims}. Full shape received: {x.shape}")
    fmt = _data_format(data_format, "conv2d_transpose")
    h_axis, w_axis, c_axis = (1, 2, 3) if fmt == "NHWC" else (2, 3, 1)
    in_ch = x.shape[c_axis]
    if in_ch is None:
        raise ValueError("The channel dimension of the inputs should be defined. Found `None`.")
    kh, kw = _pair(kernel_size, "kernel_size", "conv2d_transpose")
    sh, sw = _pair(strides, "strides", "conv2d_transpose")
    pad = _padding(padding, "conv2d_transpose")
    filters = int(filters)

    def out_size(size, k, st):          # `size` is an int, or a scalar tensor when it is not known statically
        return size * st if pad == "SAME" else (size - 1) * st + k
    dyn = array_ops.shape(x)
    sizes = [x.shape[i] if x.shape[i] is not None else dyn[i] for i in range(4)]
    out_h, out_w = out_size(sizes[h_axis], kh, sh), out_size(sizes[w_axis], kw, sw)
    batch = dyn[0]
    output_shape = [batch, out_h, out_w, filters] if fmt == "NHWC" else [batch, filters, out_h, out_w]
    with _layer_scope(name, "conv2d_transpose", reuse):
        kernel = get_variable("kernel", [kh, kw, filters, in_ch], dtype=x.dtype, initializer=kernel_initializer,
                              regularizer=kernel_regularizer, trainable=trainable, constraint=kernel_constraint)
        bias = get_variable("bias", [filters], dtype=x.dtype, initializer=bias_initializer,
                            regularizer=bias_regularizer, trainable=trainable,
                            constraint=bias_constraint) if use_bias else None
        full = (lambda a, b: [1, a, b, 1]) if fmt == "NHWC" else (lambda a, b: [1, 1, a, b])
        out = nn_ops.conv2d_transpose(x, kernel, output_shape, strides=full(sh, sw), padding=pad, data_format=fmt)
        static = [x.shape[0], out_h if isinstance(out_h, int) else None, out_w if isinstance(out_w, int) else None]
        static = static + [filters] if fmt == "NHWC" else [static[0], filters] + static[1:]
        out.set_shape(static)
        if bias is not None:
            out = nn_ops.bias_add(out, bias, data_format=fmt)
        if activation is not None:
            out = activation(out)
        _regularize(out, activity_regularizer)
        return out


def _pooling(pool_fn, default_name, inputs, pool_size, strides, padding, data_format, name):
    x = _float_input(inputs, default_name)
    if x.shape.ndims not in (None, 4):
        raise ValueError(f"Input 0 of layer {default_name} is incompatible with the layer: expected ndim=4, found "
                         f"ndim={x.shape.ndims}. Full shape received: {x.shape}")
    fmt = _data_format(data_format, default_name)
    ph, pw = _pair(pool_size, "pool_size", default_name)
    sh, sw = _pair(strides, "strides", default_name)
    full = (lambda a, b: [1, a, b, 1]) if fmt == "NHWC" else (lambda a, b: [1, 1, a, b])
    with _layer_scope(name, default_name):
        return pool_fn(x, ksize=full(ph, pw), strides=full(sh, sw), padding=_padding(padding, default_name),
                       data_format=fmt)


def max_pooling2d(inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None):
    """Max pooling over `pool_size` windows (tf.compat.v1.layers.max_pooling2d)."""
    return _pooling(nn_ops.max_pool, "max_pooling2d", inputs, pool_size, strides, padding, data_format, name)


def average_pooling2d(inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None):
    """Average pooling over `pool_size` windows (tf.compat.v1.layers.average_pooling2d)."""
    return _pooling(nn_ops.avg_pool, "average_pooling2d", inputs, pool_size, strides, padding, data_format, name)


def flatten(inputs, name=None, data_format="channels_last"):
    """Reshapes to [batch, -1], keeping the batch axis (tf.compat.v1.layers.flatten)."""
    x = convert_to_tensor(inputs)
    with _layer_scope(name, "flatten"):
        ndims = x.shape.ndims
        if ndims is not None and ndims <= 1:
            return array_ops.expand_dims(x, 1)
        if data_format == "channels_first" and ndims is not None and ndims > 2:
            # Channels last first, so the flattened order matches channels_last models.
            x = array_ops.transpose(x, [0] + list(range(2, ndims)) + [1])
        rest = x.shape[1:]
        if rest.is_fully_defined():
            out = array_ops.reshape(x, [-1, int(np.prod(rest.as_list(), dtype=np.int64))])
        else:
            batch = array_ops.strided_slice(array_ops.shape(x), [0], [1])
            out = array_ops.reshape(x, array_ops.concat([batch, convert_to_tensor([-1], dtype=batch.dtype)], 0))
        return out


def dropout(inputs, rate=0.5, noise_shape=None, seed=None, training=False, name=None):
    """Zeroes each element with probability `rate` and scales the rest by 1 / (1 - rate) when
    `training`; the identity otherwise (tf.compat.v1.layers.dropout)."""
    x = _float_input(inputs, "dropout")
    with _layer_scope(name, "dropout"):
        static = _static_bool(training)
        if static is False:
            return identity(x)
        if isinstance(rate, numbers.Real) and not 0 <= rate < 1:
            raise ValueError(f"Layer dropout: rate must be in [0, 1), got {rate}")
        dropped = nn_ops.dropout(x, noise_shape=noise_shape, seed=seed, rate=rate)
        if static is True:
            return dropped
        return math_ops.where(_training_tensor(training), dropped, x)


def batch_normalization(inputs, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                        beta_initializer=_ZEROS, gamma_initializer=_ONES,
                        moving_mean_initializer=_ZEROS,
                        moving_variance_initializer=_ONES, beta_regularizer=None,
                        gamma_regularizer=None, beta_constraint=None, gamma_constraint=None, training=False,
                        trainable=True, name=None, reuse=None, renorm=False, renorm_clipping=None,
                        renorm_momentum=0.99, fused=None, virtual_batch_size=None, adjustment=None):
    """Batch normalization (tf.compat.v1.layers.batch_normalization).

    Normalizes with the batch's mean and variance when `training`, with the moving averages
    otherwise. Variables `<scope>/gamma`, `beta`, `moving_mean` and `moving_variance` (the last two
    not trainable). When training, the ops updating the moving averages
    (moving = moving - (moving - batch) * (1 - momentum)) are added to the UPDATE_OPS collection:
    run them with the train op, as in TF 1.x. The moving variance tracks the biased batch variance
    (TF's non-fused path). `fused` is accepted and ignored; renorm and virtual batches are not
    supported.
    """
    if renorm or virtual_batch_size is not None or adjustment is not None:
        raise NotImplementedError("batch_normalization: renorm, virtual_batch_size and adjustment are not supported")
    x = _float_input(inputs, "batch_normalization")
    ndims = x.shape.ndims
    if ndims is None:
        raise ValueError(f"Input has undefined rank: {x.shape} ('{x.name}')")
    axes = set()
    for a in ([axis] if isinstance(axis, numbers.Integral) else list(axis)):
        if not -ndims <= a < ndims:
            raise ValueError(f"Invalid axis {a} for batch_normalization of an input of rank {ndims} ('{x.name}')")
        axes.add(a % ndims)
    axes = sorted(axes)
    param_shape = []
    for a in axes:
        if x.shape[a] is None:
            raise ValueError(f"Axis {a} of input tensor should have a defined dimension but the layer received an "
                             f"input with shape {x.shape}.")
        param_shape.append(x.shape[a])
    reduction_axes = [i for i in range(ndims) if i not in axes]
    in_dtype = x.dtype
    # float16 statistics lose too much: compute in float32, as TF does.
    pdtype = dtypes.float32 if in_dtype is dtypes.float16 else in_dtype
    with _layer_scope(name, "batch_normalization", reuse):
        gamma = get_variable("gamma", param_shape, dtype=pdtype, initializer=gamma_initializer,
                             regularizer=gamma_regularizer, trainable=trainable,
                             constraint=gamma_constraint) if scale else None
        beta = get_variable("beta", param_shape, dtype=pdtype, initializer=beta_initializer,
                            regularizer=beta_regularizer, trainable=trainable,
                            constraint=beta_constraint) if center else None
        moving_mean = get_variable("moving_mean", param_shape, dtype=pdtype, initializer=moving_mean_initializer,
                                   trainable=False)
        moving_variance = get_variable("moving_variance", param_shape, dtype=pdtype,
                                       initializer=moving_variance_initializer, trainable=False)
        xc = math_ops.cast(x, pdtype)
        if len(axes) == 1 and axes[0] == ndims - 1:
            def bcast(v):
                return v
        else:
            bshape = [1] * ndims
            for a in axes:
                bshape[a] = x.shape[a]

            def bcast(v):
                return None if v is None else array_ops.reshape(v, bshape)

        static = _static_bool(training)
        if static is False:
            mean, variance = moving_mean.value(), moving_variance.value()
        else:
            batch_mean, batch_var = nn_ops.moments(xc, reduction_axes)
            if static is True:
                mean, variance = batch_mean, batch_var
                decay = convert_to_tensor(1.0 - momentum, dtype=pdtype)
            else:
                t = _training_tensor(training)
                mean = math_ops.where(t, batch_mean, moving_mean.value())
                variance = math_ops.where(t, batch_var, moving_variance.value())
                # Not training: a zero step, so the update ops are harmless to run.
                decay = math_ops.where(t, convert_to_tensor(1.0 - momentum, dtype=pdtype),
                                       convert_to_tensor(0.0, dtype=pdtype))
            g = get_default_graph()
            updates = []
            for var, value, scope in ((moving_mean, batch_mean, "AssignMovingAvg"),
                                      (moving_variance, batch_var, "AssignMovingAvg_1")):
                with g.name_scope(scope):
                    delta = math_ops.multiply(math_ops.subtract(var.value(), value), decay)
                    updates.append(assign_sub(var, delta))
            for u in updates:
                g.add_to_collection(GraphKeys.UPDATE_OPS, u)
        out = nn_ops.batch_normalization(xc, bcast(mean), bcast(variance),
                                         bcast(beta.value()) if beta is not None else None,
                                         bcast(gamma.value()) if gamma is not None else None, epsilon)
        return math_ops.cast(out, in_dtype)
