"""af.contrib.layers: tf.contrib.layers of TF 1.15 (slim's layers), over af.layers.

Each layer is a function that opens a variable scope named as TF names it (``fully_connected``,
``Conv``, ``Conv2d_transpose``, ``BatchNorm``, ``LayerNorm``, ``BiasAdd``...; made unique, or
`scope=`), builds the af.layers layer in it, and renames the variables as contrib does:
``kernel`` -> ``weights``, ``bias`` -> ``biases`` (``fully_connected/weights``, ``Conv/biases``).
Every variable is a model variable: in GLOBAL_VARIABLES and MODEL_VARIABLES (and
TRAINABLE_VARIABLES when trainable), and in `variables_collections` (a list, or a dict keyed by
the short names ``weights``, ``biases``, ``beta``, ``gamma``, ``moving_mean``, ``moving_variance``).
Regularizers add their losses to REGULARIZATION_LOSSES; `outputs_collections` receive the output,
aliased by the layer's scope, so that `utils.convert_collection_to_dict` (slim.utils) gives a
network's end points as TF's does.
The layers are decorated with `add_arg_scope`, so `af.contrib.framework.arg_scope` sets their
defaults the way slim programs do.

Differences from TF 1.15: 3-D convolutions and pooling, feature columns and batch_norm's
`batch_weights`, `renorm`, `adjustment` and `zero_debias_moving_mean` are not here (an error
names the argument).
"""
from __future__ import annotations

import functools
import logging as _logging
import math
import numbers

from actorflow import layers as core_layers
from actorflow.contrib import layers_utils as utils  # noqa: F401  (tf.contrib.layers.utils, slim.utils)
from actorflow.contrib.framework import add_arg_scope, model_variable
from actorflow.contrib.layers_utils import collect_named_outputs
from actorflow.graph import dtypes
from actorflow.graph.graph import (
    GraphKeys,
    Tensor,
    control_dependencies,
    convert_to_tensor,
    get_collection,
    get_default_graph,
    name_scope,
)
from actorflow.graph.indexed_slices import IndexedSlices
from actorflow.graph.initializers import Initializer, _shape_list, ones_initializer, zeros_initializer
from actorflow.graph.ops import array_ops, clip_ops, math_ops, nn_conv_ops, nn_ops, random_ops
from actorflow.graph.ops.constant import constant, identity
from actorflow.graph.ops.summary_ops import histogram as _histogram_summary
from actorflow.graph.ops.summary_ops import scalar as _scalar_summary
from actorflow.graph.variable_scope import PartitionedVariable, get_variable, variable_scope
from actorflow.graph.variables import Variable, trainable_variables
from actorflow.train import optimizers as _optimizers
from actorflow.train.optimizer import Optimizer
from actorflow.train.training_util import assert_global_step, get_global_step

__all__ = [
    # initializers and regularizers
    "xavier_initializer", "xavier_initializer_conv2d", "variance_scaling_initializer",
    "l1_regularizer", "l2_regularizer", "l1_l2_regularizer", "sum_regularizer", "apply_regularization",
    # layers
    "fully_connected", "linear", "relu", "relu6", "elu", "convolution", "convolution1d", "convolution2d", "conv1d",
    "conv2d", "convolution2d_transpose", "conv2d_transpose", "separable_convolution2d", "separable_conv2d", "max_pool2d", "avg_pool2d", "flatten", "dropout",
    "batch_norm", "layer_norm", "instance_norm", "group_norm", "recompute_grad", "bias_add", "one_hot_encoding", "embed_sequence", "softmax", "unit_norm", "maxout",
    "repeat", "stack",
    # embeddings (contrib.layers' embedding_ops)
    "safe_embedding_lookup_sparse", "embedding_lookup_unique",
    # training and summaries
    "optimize_loss", "OPTIMIZER_CLS_NAMES", "OPTIMIZER_SUMMARIES", "summarize_tensor", "summarize_tensors",
    "summarize_collection", "summarize_activation", "summarize_activations", "summarize_variables",
    "summarize_weights", "summarize_biases",
]

DATA_FORMAT_NCHW = "NCHW"
DATA_FORMAT_NHWC = "NHWC"


# ---------------------------------------------------------------------------------------------
# Initializers
# ---------------------------------------------------------------------------------------------

class _ContribVarianceScaling(Initializer):
    """contrib's variance scaling: fans from the shape of the variable (or shard) being made,
    stddev sqrt(factor / n), a normal truncated at two stddevs with stddev sqrt(1.3 factor / n)."""

    def __init__(self, factor, mode, uniform, seed, dtype):
        self.factor, self.mode, self.uniform, self.seed, self.dtype = factor, mode, uniform, seed, dtype

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = dtypes.as_dtype(dtype or self.dtype)
        if not dtype.is_floating:
            raise TypeError("Cannot create initializer for non-floating point type.")
        shape = _shape_list(shape)
        if shape:
            fan_in = float(shape[-2]) if len(shape) > 1 else float(shape[-1])
            fan_out = float(shape[-1])
        else:
            fan_in = fan_out = 1.0
        for d in shape[:-2]:
            fan_in *= float(d)
            fan_out *= float(d)
        n = {"FAN_IN": fan_in, "FAN_OUT": fan_out, "FAN_AVG": (fan_in + fan_out) / 2.0}[self.mode]
        if self.uniform:
            limit = math.sqrt(3.0 * self.factor / n)
            return random_ops.random_uniform(shape, -limit, limit, dtype=dtype, seed=self.seed)
        return random_ops.truncated_normal(shape, 0.0, math.sqrt(1.3 * self.factor / n), dtype=dtype, seed=self.seed)

    def get_config(self):
        return {"factor": self.factor, "mode": self.mode, "uniform": self.uniform, "seed": self.seed,
                "dtype": self.dtype.name}


def variance_scaling_initializer(factor=2.0, mode="FAN_IN", uniform=False, seed=None, dtype=dtypes.float32):
    """Samples with variance factor / n, n the fan-in, fan-out or their mean
    (tf.contrib.layers.variance_scaling_initializer).

    Not tf.variance_scaling_initializer: the defaults are He's (factor 2, FAN_IN, normal), the
    modes are upper case, the truncated normal has stddev sqrt(1.3 factor / n), n is not floored
    at 1, and the fans come from the shape being initialized (a shard's own, when partitioned).
    """
    dtype = dtypes.as_dtype(dtype)
    if not dtype.is_floating:
        raise TypeError("Cannot create initializer for non-floating point type.")
    if mode not in ("FAN_IN", "FAN_OUT", "FAN_AVG"):
        raise TypeError(f"Unknown mode {mode!r}: expected one of ['FAN_IN', 'FAN_OUT', 'FAN_AVG']")
    return _ContribVarianceScaling(factor, mode, bool(uniform), seed, dtype)


def xavier_initializer(uniform=True, seed=None, dtype=dtypes.float32):
    """Glorot's initializer (tf.contrib.layers.xavier_initializer): U[-l, l] with
    l = sqrt(6 / (fan_in + fan_out)), or with `uniform=False` a truncated normal of stddev
    sqrt(1.3 * 2 / (fan_in + fan_out))."""
    return variance_scaling_initializer(factor=1.0, mode="FAN_AVG", uniform=uniform, seed=seed, dtype=dtype)


xavier_initializer_conv2d = xavier_initializer

# The layers' default initializers (stateless; TF builds them once, as default arguments).
_XAVIER = xavier_initializer()
_ZEROS = zeros_initializer()
_ONES = ones_initializer()


# ---------------------------------------------------------------------------------------------
# Regularizers
# ---------------------------------------------------------------------------------------------

def _check_scale(scale, what="scale"):
    """None when the scale turns the regularizer off (0), else the scale; TF's errors otherwise."""
    if isinstance(scale, bool) or isinstance(scale, numbers.Integral):
        raise ValueError(f"{what} cannot be an integer: {scale}")
    if isinstance(scale, numbers.Real):
        if scale < 0.0:
            raise ValueError(f"Setting a scale less than 0 on a regularizer: {scale:g}")
        if scale == 0.0:
            return None
    return scale


def l1_regularizer(scale, scope=None):
    """A function `l1(weights)`: scale * sum(|weights|) (tf.contrib.layers.l1_regularizer); a
    scale of 0 gives a function returning None."""
    if _check_scale(scale) is None:
        return lambda _: None

    def l1(weights, name=None):
        with name_scope(scope, "l1_regularizer", [weights]) as sc:
            my_scale = convert_to_tensor(scale, dtype=weights.dtype.base_dtype, name="scale")
            return math_ops.multiply(my_scale, math_ops.reduce_sum(math_ops.abs(weights)), name=sc)
    return l1


def l2_regularizer(scale, scope=None):
    """A function `l2(weights)`: scale * sum(weights ** 2) / 2 (tf.contrib.layers.l2_regularizer);
    a scale of 0 gives a function returning None."""
    if _check_scale(scale) is None:
        return lambda _: None

    def l2(weights):
        with name_scope(scope, "l2_regularizer", [weights]) as sc:
            my_scale = convert_to_tensor(scale, dtype=weights.dtype.base_dtype, name="scale")
            return math_ops.multiply(my_scale, nn_ops.l2_loss(weights), name=sc)
    return l2


def sum_regularizer(regularizer_list, scope=None):
    """A function applying the sum of the regularizers in the list; None when the list has none
    (tf.contrib.layers.sum_regularizer)."""
    regularizer_list = [r for r in regularizer_list if r is not None]
    if not regularizer_list:
        return None

    def sum_reg(weights):
        with name_scope(scope, "sum_regularizer", [weights]) as sc:
            parts = [t for t in (r(weights) for r in regularizer_list) if t is not None]
            return math_ops.add_n(parts, name=sc) if parts else None
    return sum_reg


def l1_l2_regularizer(scale_l1=1.0, scale_l2=1.0, scope=None):
    """The sum of an L1 and an L2 regularizer (tf.contrib.layers.l1_l2_regularizer); either scale 0
    leaves the other alone."""
    _check_scale(scale_l1, "scale_l1")
    _check_scale(scale_l2, "scale_l2")
    scope = scope or "l1_l2_regularizer"
    if isinstance(scale_l1, numbers.Real) and scale_l1 == 0.0:
        return l2_regularizer(scale_l2, scope)
    if isinstance(scale_l2, numbers.Real) and scale_l2 == 0.0:
        return l1_regularizer(scale_l1, scope)
    return sum_regularizer([l1_regularizer(scale_l1), l2_regularizer(scale_l2)], scope=scope)


def apply_regularization(regularizer, weights_list=None):
    """The sum of `regularizer` over `weights_list` (default: the WEIGHTS collection), also added
    to REGULARIZATION_LOSSES (tf.contrib.layers.apply_regularization)."""
    if not weights_list:
        weights_list = get_collection(GraphKeys.WEIGHTS)
    if not weights_list:
        raise ValueError("No weights to regularize.")
    with name_scope("get_regularization_penalty", values=weights_list) as sc:
        penalties = [regularizer(w) for w in weights_list]
        penalties = [p if p is not None else constant(0.0) for p in penalties]
        for p in penalties:
            if p.shape.ndims != 0:
                raise ValueError(f"regularizer must return a scalar Tensor instead of a Tensor with rank "
                                 f"{p.shape.ndims}.")
        summed = math_ops.add_n(penalties, name=sc)
    get_default_graph().add_to_collection(GraphKeys.REGULARIZATION_LOSSES, summed)
    return summed


# ---------------------------------------------------------------------------------------------
# Shared pieces
# ---------------------------------------------------------------------------------------------

_KERNEL_RENAME = {"bias": "biases", "kernel": "weights"}


def _model_variable_getter(rename=None):
    """A custom getter making each variable a model variable, its short name renamed by `rename`
    (contrib's _build_variable_getter)."""
    def getter(getter, name, *args, **kwargs):
        short = name.rsplit("/", 1)[-1]
        if rename and short in rename:
            name = name[:len(name) - len(short)] + rename[short]
        given = kwargs.pop("collections", None)
        collections = []
        for c in list(given if given is not None else [GraphKeys.GLOBAL_VARIABLES]) + [
                GraphKeys.GLOBAL_VARIABLES, GraphKeys.MODEL_VARIABLES]:
            if c not in collections:
                collections.append(c)
        return getter(name, *args, collections=collections, **kwargs)
    return getter


def _variable_collections(variables_collections, name):
    if isinstance(variables_collections, dict):
        return variables_collections.get(name)
    return variables_collections


def _add_variable_to_collections(variable, variables_collections, name) -> None:
    collections = _variable_collections(variables_collections, name) or []
    parts = list(variable) if isinstance(variable, PartitionedVariable) else [variable]
    g = get_default_graph()
    for c in collections:
        for v in parts:
            if not any(v is x for x in g.get_collection(c)):
                g.add_to_collection(c, v)




def _scope_name(sc) -> str:
    return sc.rstrip("/") if isinstance(sc, str) else sc.name


def _n_ints(value, n, what, layer):
    if isinstance(value, numbers.Integral):
        return (int(value),) * n
    value = tuple(int(v) for v in value)
    if len(value) != n:
        raise ValueError(f"{layer}: `{what}` must be an int or a list of {n} ints, got {value}")
    return value


def _rank(x: Tensor, layer) -> int:
    r = x.shape.ndims
    if r is None:
        raise ValueError(f"{layer}: inputs {x.name} have an undefined rank")
    return r


def _check_nhwc_nchw(data_format):
    if data_format not in (DATA_FORMAT_NCHW, DATA_FORMAT_NHWC):
        raise ValueError(f"data_format has to be either NCHW or NHWC, got {data_format!r}.")


def _channels_format(data_format):
    return "channels_first" if data_format and data_format.startswith("NC") else "channels_last"


def _finish(outputs, normalizer_fn, normalizer_params, activation_fn, outputs_collections, sc):
    if normalizer_fn is not None:
        outputs = normalizer_fn(outputs, **(normalizer_params or {}))
    if activation_fn is not None:
        outputs = activation_fn(outputs)
    return collect_named_outputs(outputs_collections, _scope_name(sc), outputs)


# ---------------------------------------------------------------------------------------------
# Fully connected and convolutions
# ---------------------------------------------------------------------------------------------

@add_arg_scope
def fully_connected(inputs, num_outputs, activation_fn=nn_ops.relu, normalizer_fn=None, normalizer_params=None,
                    weights_initializer=_XAVIER, weights_regularizer=None,
                    biases_initializer=_ZEROS, biases_regularizer=None, reuse=None,
                    variables_collections=None, outputs_collections=None, trainable=True, scope=None):
    """activation_fn(normalizer_fn(inputs @ weights) or inputs @ weights + biases)
    (tf.contrib.layers.fully_connected).

    Variables `<scope>/weights` [in, num_outputs] (Xavier) and `<scope>/biases` [num_outputs]
    (zeros; none when `normalizer_fn` is given or `biases_initializer` is None), scope
    ``fully_connected`` made unique unless given. Inputs of rank > 2 are multiplied along their
    last axis; rank < 2 or an unknown last dimension is an error. The activation defaults to relu.
    """
    if isinstance(num_outputs, bool) or not isinstance(num_outputs, numbers.Integral):
        raise ValueError(f"num_outputs type should be one of [int], got {type(num_outputs)}.")
    with variable_scope(scope, "fully_connected", [inputs], reuse=reuse,
                        custom_getter=_model_variable_getter(_KERNEL_RENAME)) as sc:
        inputs = convert_to_tensor(inputs)
        layer = core_layers.Dense(units=int(num_outputs), activation=None,
                                  use_bias=not normalizer_fn and biases_initializer is not None,
                                  kernel_initializer=weights_initializer, bias_initializer=biases_initializer,
                                  kernel_regularizer=weights_regularizer, bias_regularizer=biases_regularizer,
                                  trainable=trainable, name=sc.name, dtype=inputs.dtype.base_dtype, _scope=sc,
                                  _reuse=reuse)
        outputs = layer.apply(inputs)
        _add_variable_to_collections(layer.kernel, variables_collections, "weights")
        if layer.bias is not None:
            _add_variable_to_collections(layer.bias, variables_collections, "biases")
        return _finish(outputs, normalizer_fn, normalizer_params, activation_fn, outputs_collections, sc)


@add_arg_scope
def convolution(inputs, num_outputs, kernel_size, stride=1, padding="SAME", data_format=None, rate=1,
                activation_fn=nn_ops.relu, normalizer_fn=None, normalizer_params=None,
                weights_initializer=_XAVIER, weights_regularizer=None,
                biases_initializer=_ZEROS, biases_regularizer=None, reuse=None,
                variables_collections=None, outputs_collections=None, trainable=True, scope=None, conv_dims=None):
    """A 1-D or 2-D convolution, then `normalizer_fn` or biases, then the activation (relu by
    default) (tf.contrib.layers.convolution).

    The rank of `inputs` (3 or 4) picks the convolution; `data_format` "NWC"/"NHWC" (default) or
    "NCW"/"NCHW". Variables `<scope>/weights` [k..., in, out] and `<scope>/biases`, scope ``Conv``.
    3-D convolutions (rank 5) are not supported.
    """
    if data_format not in (None, "NWC", "NCW", "NHWC", "NCHW", "NDHWC", "NCDHW"):
        raise ValueError(f"Invalid data_format: {data_format!r}")
    with variable_scope(scope, "Conv", [inputs], reuse=reuse,
                        custom_getter=_model_variable_getter(_KERNEL_RENAME)) as sc:
        inputs = convert_to_tensor(inputs)
        input_rank = inputs.shape.ndims
        if conv_dims is not None and conv_dims + 2 != input_rank:
            raise ValueError(f"Convolution expects input with rank {conv_dims + 2}, got {input_rank} "
                             f"('{inputs.name}')")
        if input_rank == 3:
            layer_class = core_layers.Conv1D
        elif input_rank == 4:
            layer_class = core_layers.Conv2D
        else:
            raise ValueError(f"Convolution not supported for input with rank {input_rank} ('{inputs.name}'); "
                             "actorflow supports ranks 3 and 4")
        layer = layer_class(filters=num_outputs, kernel_size=kernel_size, strides=stride, padding=padding,
                            data_format=_channels_format(data_format), dilation_rate=rate, activation=None,
                            use_bias=not normalizer_fn and biases_initializer is not None,
                            kernel_initializer=weights_initializer, bias_initializer=biases_initializer,
                            kernel_regularizer=weights_regularizer, bias_regularizer=biases_regularizer,
                            trainable=trainable, name=sc.name, dtype=inputs.dtype.base_dtype, _scope=sc,
                            _reuse=reuse)
        outputs = layer.apply(inputs)
        _add_variable_to_collections(layer.kernel, variables_collections, "weights")
        if layer.bias is not None:
            _add_variable_to_collections(layer.bias, variables_collections, "biases")
        return _finish(outputs, normalizer_fn, normalizer_params, activation_fn, outputs_collections, sc)


def _fixed_rank_convolution(conv_dims):
    def conv(inputs, num_outputs, kernel_size, stride=1, padding="SAME", data_format=None, rate=1,
             activation_fn=nn_ops.relu, normalizer_fn=None, normalizer_params=None,
             weights_initializer=_XAVIER, weights_regularizer=None,
             biases_initializer=_ZEROS, biases_regularizer=None, reuse=None, variables_collections=None,
             outputs_collections=None, trainable=True, scope=None):
        return convolution(inputs, num_outputs, kernel_size, stride, padding, data_format, rate, activation_fn,
                           normalizer_fn, normalizer_params, weights_initializer, weights_regularizer,
                           biases_initializer, biases_regularizer, reuse, variables_collections,
                           outputs_collections, trainable, scope, conv_dims=conv_dims)
    conv.__name__ = conv.__qualname__ = f"convolution{conv_dims}d"
    conv.__doc__ = (f"`convolution` for inputs of rank {conv_dims + 2} only (tf.contrib.layers.convolution"
                    f"{conv_dims}d).")
    return add_arg_scope(conv)


convolution1d = _fixed_rank_convolution(1)
convolution2d = _fixed_rank_convolution(2)
conv1d = convolution1d
conv2d = convolution2d


@add_arg_scope
def convolution2d_transpose(inputs, num_outputs, kernel_size, stride=1, padding="SAME", data_format=DATA_FORMAT_NHWC,
                            activation_fn=nn_ops.relu, normalizer_fn=None, normalizer_params=None,
                            weights_initializer=_XAVIER, weights_regularizer=None,
                            biases_initializer=_ZEROS, biases_regularizer=None, reuse=None,
                            variables_collections=None, outputs_collections=None, trainable=True, scope=None):
    """A transposed 2-D convolution, then `normalizer_fn` or biases, then the activation
    (tf.contrib.layers.conv2d_transpose): `<scope>/weights` [kh, kw, out, in], scope
    ``Conv2d_transpose``; each spatial size becomes size * stride ("SAME") or
    (size - 1) * stride + kernel ("VALID")."""
    with variable_scope(scope, "Conv2d_transpose", [inputs], reuse=reuse,
                        custom_getter=_model_variable_getter(_KERNEL_RENAME)) as sc:
        _check_nhwc_nchw(data_format)
        inputs = convert_to_tensor(inputs)
        layer = core_layers.Conv2DTranspose(filters=num_outputs, kernel_size=kernel_size, strides=stride,
                                            padding=padding, data_format=_channels_format(data_format),
                                            activation=None,
                                            use_bias=not normalizer_fn and biases_initializer is not None,
                                            kernel_initializer=weights_initializer,
                                            bias_initializer=biases_initializer,
                                            kernel_regularizer=weights_regularizer,
                                            bias_regularizer=biases_regularizer, trainable=trainable, name=sc.name,
                                            dtype=inputs.dtype.base_dtype, _scope=sc, _reuse=reuse)
        outputs = layer.apply(inputs)
        _add_variable_to_collections(layer.kernel, variables_collections, "weights")
        if layer.bias is not None:
            _add_variable_to_collections(layer.bias, variables_collections, "biases")
        return _finish(outputs, normalizer_fn, normalizer_params, activation_fn, outputs_collections, sc)


conv2d_transpose = convolution2d_transpose


@add_arg_scope
def separable_convolution2d(inputs, num_outputs, kernel_size, depth_multiplier=1, stride=1, padding="SAME",
                            data_format=DATA_FORMAT_NHWC, rate=1, activation_fn=nn_ops.relu, normalizer_fn=None,
                            normalizer_params=None, weights_initializer=_XAVIER, pointwise_initializer=None,
                            weights_regularizer=None, biases_initializer=_ZEROS, biases_regularizer=None, reuse=None,
                            variables_collections=None, outputs_collections=None, trainable=True, scope=None):
    """A depthwise convolution (``depthwise_weights`` [kh, kw, in, depth_multiplier]), then, unless
    `num_outputs` is None, a 1x1 convolution (``pointwise_weights`` [1, 1, in * multiplier,
    num_outputs]), then `normalizer_fn` or ``biases``, then the activation
    (tf.contrib.layers.separable_conv2d), scope ``SeparableConv2d``. `pointwise_initializer`
    defaults to `weights_initializer`; `weights_regularizer` applies to both kernels."""
    _check_nhwc_nchw(data_format)
    with variable_scope(scope, "SeparableConv2d", [inputs], reuse=reuse) as sc:
        inputs = convert_to_tensor(inputs)
        if inputs.shape.ndims != 4:
            raise ValueError(f"separable_conv2d: inputs must be 4-D, got shape {inputs.shape} ('{inputs.name}')")
        dtype = inputs.dtype.base_dtype
        channels = inputs.shape[1 if data_format == DATA_FORMAT_NCHW else 3]
        if channels is None:
            raise ValueError(f"separable_conv2d: the channel dimension of '{inputs.name}' must be known")
        kh, kw = _n_ints(kernel_size, 2, "kernel_size", "separable_conv2d")
        sh, sw = _n_ints(stride, 2, "stride", "separable_conv2d")
        rates = list(_n_ints(rate, 2, "rate", "separable_conv2d"))
        strides = [1, 1, sh, sw] if data_format == DATA_FORMAT_NCHW else [1, sh, sw, 1]
        weights_collections = _variable_collections(variables_collections, "weights")
        depthwise = model_variable("depthwise_weights", shape=[kh, kw, channels, depth_multiplier], dtype=dtype,
                                   initializer=weights_initializer, regularizer=weights_regularizer,
                                   trainable=trainable, collections=weights_collections)
        if num_outputs is not None:
            pointwise = model_variable("pointwise_weights", shape=[1, 1, channels * depth_multiplier, num_outputs],
                                       dtype=dtype, initializer=pointwise_initializer or weights_initializer,
                                       regularizer=weights_regularizer, trainable=trainable,
                                       collections=weights_collections)
            outputs = nn_conv_ops.separable_conv2d(inputs, depthwise, pointwise, strides, str(padding).upper(),
                                              rate=rates, data_format=data_format)
            out_channels = num_outputs
        else:
            outputs = nn_conv_ops.depthwise_conv2d(inputs, depthwise, strides, str(padding).upper(), rate=rates,
                                              data_format=data_format)
            out_channels = channels * depth_multiplier
        if normalizer_fn is None and biases_initializer is not None:
            biases = model_variable("biases", shape=[out_channels], dtype=dtype, initializer=biases_initializer,
                                    regularizer=biases_regularizer, trainable=trainable,
                                    collections=_variable_collections(variables_collections, "biases"))
            outputs = nn_ops.bias_add(outputs, biases, data_format=data_format)
        return _finish(outputs, normalizer_fn, normalizer_params, activation_fn, outputs_collections, sc)


separable_conv2d = separable_convolution2d

linear = functools.partial(fully_connected, activation_fn=None)
relu = functools.partial(fully_connected, activation_fn=nn_ops.relu)
relu6 = functools.partial(fully_connected, activation_fn=nn_ops.relu6)
elu = functools.partial(fully_connected, activation_fn=nn_ops.elu)


# ---------------------------------------------------------------------------------------------
# Pooling, flatten, dropout, bias, one-hot, embeddings, softmax
# ---------------------------------------------------------------------------------------------

def _pool2d(pool, default_name, inputs, kernel_size, stride, padding, data_format, outputs_collections, scope):
    _check_nhwc_nchw(data_format)
    with name_scope(scope, default_name, [inputs]) as sc:
        inputs = convert_to_tensor(inputs)
        if inputs.shape.ndims not in (None, 4):
            raise ValueError(f"{default_name}: inputs must be 4-D, got shape {inputs.shape} ('{inputs.name}')")
        kh, kw = _n_ints(kernel_size, 2, "kernel_size", default_name)
        sh, sw = _n_ints(stride, 2, "stride", default_name)
        if data_format == DATA_FORMAT_NHWC:
            ksize, strides = [1, kh, kw, 1], [1, sh, sw, 1]
        else:
            ksize, strides = [1, 1, kh, kw], [1, 1, sh, sw]
        outputs = pool(inputs, ksize=ksize, strides=strides, padding=str(padding).upper(), data_format=data_format)
        return collect_named_outputs(outputs_collections, sc, outputs)


@add_arg_scope
def max_pool2d(inputs, kernel_size, stride=2, padding="VALID", data_format=DATA_FORMAT_NHWC, outputs_collections=None,
               scope=None):
    """2-D max pooling over `kernel_size` windows (tf.contrib.layers.max_pool2d); ops under ``MaxPool2D``."""
    return _pool2d(nn_ops.max_pool, "MaxPool2D", inputs, kernel_size, stride, padding, data_format,
                   outputs_collections, scope)


@add_arg_scope
def avg_pool2d(inputs, kernel_size, stride=2, padding="VALID", data_format=DATA_FORMAT_NHWC, outputs_collections=None,
               scope=None):
    """2-D average pooling over `kernel_size` windows (tf.contrib.layers.avg_pool2d); ops under ``AvgPool2D``."""
    return _pool2d(nn_ops.avg_pool, "AvgPool2D", inputs, kernel_size, stride, padding, data_format,
                   outputs_collections, scope)


@add_arg_scope
def flatten(inputs, outputs_collections=None, scope=None):
    """Reshapes to [batch, k], keeping the first axis (tf.contrib.layers.flatten); an input of
    unknown rank or of rank < 2 is an error."""
    with name_scope(scope, "Flatten", [inputs]) as sc:
        inputs = convert_to_tensor(inputs)
        rank = inputs.shape.ndims
        if rank is None or rank < 2:
            raise ValueError(f"Inputs must have at least 2 dimensions, got shape {inputs.shape} ('{inputs.name}')")
        outputs = core_layers.flatten(inputs)
        return collect_named_outputs(outputs_collections, sc, outputs)


@add_arg_scope
def dropout(inputs, keep_prob=0.5, noise_shape=None, is_training=True, outputs_collections=None, scope=None,
            seed=None):
    """Keeps each element with probability `keep_prob`, scaled by 1 / keep_prob, when
    `is_training` (a bool or a bool tensor); the identity otherwise (tf.contrib.layers.dropout)."""
    with variable_scope(scope, "Dropout", [inputs], custom_getter=_model_variable_getter()) as sc:
        inputs = convert_to_tensor(inputs)
        if isinstance(keep_prob, numbers.Real) and not 0 < keep_prob <= 1:
            raise ValueError(f"dropout: keep_prob must be in (0, 1], got {keep_prob}")
        rate = 1.0 - keep_prob if isinstance(keep_prob, numbers.Real) else math_ops.subtract(1.0, keep_prob)
        layer = core_layers.Dropout(rate=rate, noise_shape=noise_shape, seed=seed, name=sc.name, _scope=sc)
        outputs = layer.apply(inputs, training=is_training)
        return collect_named_outputs(outputs_collections, sc.name, outputs)


@add_arg_scope
def bias_add(inputs, activation_fn=None, initializer=_ZEROS, regularizer=None, reuse=None,
             variables_collections=None, outputs_collections=None, trainable=True, data_format=DATA_FORMAT_NHWC,
             scope=None):
    """Adds a variable `<scope>/biases` over the channel axis (tf.contrib.layers.bias_add), scope ``BiasAdd``."""
    _check_nhwc_nchw(data_format)
    with variable_scope(scope, "BiasAdd", [inputs], reuse=reuse) as sc:
        inputs = convert_to_tensor(inputs)
        rank = inputs.shape.ndims
        if rank is None:
            raise ValueError(f"Dims of shape must be known but is None ('{inputs.name}')")
        if rank != 4 and data_format == DATA_FORMAT_NCHW:
            raise ValueError("Data format NCHW only supports 4D Tensor")
        num_features = inputs.shape[1 if data_format == DATA_FORMAT_NCHW else -1]
        if num_features is None:
            raise ValueError(f"`C` dimension must be known but is None ('{inputs.name}')")
        biases = model_variable("biases", shape=[num_features], dtype=inputs.dtype.base_dtype,
                                initializer=initializer, regularizer=regularizer,
                                collections=_variable_collections(variables_collections, "biases"),
                                trainable=trainable)
        outputs = nn_ops.bias_add(inputs, biases, data_format=data_format)
        if activation_fn is not None:
            outputs = activation_fn(outputs)
        return collect_named_outputs(outputs_collections, sc.name, outputs)


@add_arg_scope
def one_hot_encoding(labels, num_classes, on_value=1.0, off_value=0.0, outputs_collections=None, scope=None):
    """tf.one_hot of `labels` over `num_classes` (tf.contrib.layers.one_hot_encoding)."""
    with name_scope(scope, "OneHotEncoding", [labels]) as sc:
        labels = convert_to_tensor(labels)
        if labels.dtype is dtypes.int32:
            labels = math_ops.cast(labels, dtypes.int64)
        outputs = array_ops.one_hot(labels, num_classes, on_value=on_value, off_value=off_value)
        return collect_named_outputs(outputs_collections, sc, outputs)


def safe_embedding_lookup_sparse(embedding_weights, sparse_ids, sparse_weights=None, combiner=None, default_id=None,
                                 name=None, partition_strategy="div", max_norm=None):
    """tf.contrib.layers.safe_embedding_lookup_sparse: tf.nn.safe_embedding_lookup_sparse, whose
    combiner defaults to "mean" here (contrib warned that the default would become "sqrtn")."""
    from actorflow.graph.ops.sparse_ops import safe_embedding_lookup_sparse as lookup
    if combiner is None:
        _logging.getLogger(__name__).warning('The default value of combiner will change from "mean" to "sqrtn" '
                                            'after 2016/11/01.')
        combiner = "mean"
    return lookup(embedding_weights, sparse_ids, sparse_weights, combiner=combiner, default_id=default_id, name=name,
                  partition_strategy=partition_strategy, max_norm=max_norm)


def embedding_lookup_unique(params, ids, partition_strategy="mod", name=None):
    """tf.contrib.layers.embedding_lookup_unique: `embedding_lookup` of the unique ids of `ids` (of any
    shape), gathered back to each id: the same values, each row looked up once."""
    with name_scope(name, "EmbeddingLookupUnique", [params, ids]):
        ids = convert_to_tensor(ids)
        flat = array_ops.reshape(ids, [-1])
        from actorflow.graph.ops.sort_ops import unique as _unique
        unique, idx = _unique(flat)
        rows = nn_ops.embedding_lookup(params, unique, partition_strategy=partition_strategy)
        looked_up = array_ops.gather(rows, idx)
        return array_ops.reshape(looked_up, array_ops.concat([array_ops.shape(ids), array_ops.shape(rows)[1:]], 0))


def embed_sequence(ids, vocab_size=None, embed_dim=None, unique=False, initializer=None, regularizer=None,
                   trainable=True, scope=None, reuse=None):
    """Embeds `ids` [batch, length] into [batch, length, embed_dim] with the model variable
    `<scope>/embeddings` [vocab_size, embed_dim] (tf.contrib.layers.embed_sequence), scope
    ``EmbedSequence``. `unique` changes nothing in the result."""
    if not (reuse or (vocab_size and embed_dim)):
        raise ValueError(f"Must specify vocab size and embedding dimension when not reusing. Got "
                         f"vocab_size={vocab_size} and embed_dim={embed_dim}")
    with variable_scope(scope, "EmbedSequence", [ids], reuse=reuse):
        shape = [vocab_size, embed_dim]
        if reuse and (vocab_size is None or embed_dim is None):
            shape = None
        embeddings = model_variable("embeddings", shape=shape, initializer=initializer, regularizer=regularizer,
                                    trainable=trainable)
        return nn_ops.embedding_lookup(embeddings, ids)


@add_arg_scope
def softmax(logits, scope=None):
    """Softmax over the last axis of logits of any rank >= 2 (tf.contrib.layers.softmax)."""
    with variable_scope(scope, "softmax", [logits]):
        logits = convert_to_tensor(logits)
        rank = logits.shape.ndims
        if rank is None or rank < 2 or logits.shape[-1] is None:
            raise ValueError(f"softmax: logits must have rank >= 2 and a known last dimension, got {logits.shape}")
        flat = array_ops.reshape(logits, [-1, logits.shape[-1]])
        out = array_ops.reshape(nn_ops.softmax(flat), array_ops.shape(logits))
        out.set_shape(logits.shape)
        return out


@add_arg_scope
def unit_norm(inputs, dim, epsilon=1e-7, scope=None):
    """inputs / sqrt(epsilon + sum(inputs ** 2 over `dim`)) (tf.contrib.layers.unit_norm)."""
    with variable_scope(scope, "UnitNorm", [inputs]):
        inputs = convert_to_tensor(inputs)
        rank = _rank(inputs, "unit_norm")
        if dim < 0 or dim >= rank:
            raise ValueError("dim must be positive but smaller than the input rank.")
        lengths = math_ops.sqrt(epsilon + math_ops.reduce_sum(math_ops.square(inputs), dim, keepdims=True))
        return math_ops.divide(inputs, lengths)


@add_arg_scope
def maxout(inputs, num_units, axis=-1, scope=None):
    """The maximum over groups of num_channels / num_units features along `axis`
    (tf.contrib.layers.maxout)."""
    with variable_scope(scope, "MaxOut", [inputs]):
        inputs = convert_to_tensor(inputs)
        shape = inputs.shape.as_list()
        num_channels = shape[axis]
        if num_channels is None or num_channels % num_units:
            raise ValueError(f"number of features({num_channels}) is not a multiple of num_units({num_units})")
        shape[axis] = num_units
        shape += [num_channels // num_units]
        dyn = array_ops.shape(inputs)
        shape = [dyn[i] if d is None else d for i, d in enumerate(shape)]
        if any(isinstance(d, Tensor) for d in shape):
            shape = array_ops.stack([convert_to_tensor(d, dtype=dtypes.int32) for d in shape])
        return math_ops.reduce_max(array_ops.reshape(inputs, shape), -1, keepdims=False)


# ---------------------------------------------------------------------------------------------
# Normalization
# ---------------------------------------------------------------------------------------------

@add_arg_scope
def batch_norm(inputs, decay=0.999, center=True, scale=False, epsilon=0.001, activation_fn=None,
               param_initializers=None, param_regularizers=None, updates_collections=GraphKeys.UPDATE_OPS,
               is_training=True, reuse=None, variables_collections=None, outputs_collections=None, trainable=True,
               batch_weights=None, fused=None, data_format=DATA_FORMAT_NHWC, zero_debias_moving_mean=False,
               scope=None, renorm=False, renorm_clipping=None, renorm_decay=0.99, adjustment=None):
    """Batch normalization (tf.contrib.layers.batch_norm), over every axis but the channel one
    (last for NHWC, second for NCHW).

    Variables under ``BatchNorm``: `beta` (with `center`), `gamma` (with `scale`, off by default
    here, unlike tf.layers), `moving_mean` and `moving_variance`. With `is_training` (a bool or a
    bool tensor) the batch's statistics normalize and the moving averages
    (moving -= (moving - batch) * (1 - decay)) are updated by ops put in `updates_collections`
    (UPDATE_OPS: run them with the train op), or, with `updates_collections=None`, run before the
    output is returned. As in TF, where the fused kernel applies (rank 2 or 4, `fused` not False,
    float16/32) the moving variance tracks the unbiased batch variance; elsewhere the biased one.
    epsilon is used as given, as TF 2's compat.v1 (tf_slim) passes it to the fused kernel (TF 1.x
    raised it to at least 1.001e-5, cuDNN's floor); second derivatives on the fused path are the
    fused kernel's (exact; see nn.fused_batch_norm). The variables are created as TF's path creates
    them: beta first on its own fused and legacy paths (a 2-D batch, or updates outside
    UPDATE_OPS), gamma first where it takes the core layer.
    """
    for arg, v in (("batch_weights", batch_weights), ("adjustment", adjustment)):
        if v is not None:
            raise NotImplementedError(f"batch_norm: `{arg}` is not supported by actorflow")
    if renorm:
        raise NotImplementedError("batch_norm: `renorm` is not supported by actorflow")
    if zero_debias_moving_mean:
        raise NotImplementedError("batch_norm: `zero_debias_moving_mean` is not supported by actorflow")
    _check_nhwc_nchw(data_format)
    inputs = convert_to_tensor(inputs)
    rank = inputs.shape.ndims
    if rank is None:
        raise ValueError(f"Inputs {inputs.name} has undefined rank.")
    fused = True if fused is None else fused
    fused_path = bool(fused) and rank in (2, 4) and inputs.dtype.base_dtype in (dtypes.float16, dtypes.float32)
    param_initializers = param_initializers or {}
    param_regularizers = param_regularizers or {}
    with variable_scope(scope, "BatchNorm", [inputs], reuse=reuse, custom_getter=_model_variable_getter()) as sc:
        x = inputs
        if rank == 2:
            channels = inputs.shape[-1]
            if channels is None:
                raise ValueError(f"`C` dimension must be known but is None ('{inputs.name}')")
            if fused_path:
                # TF's fused kernel takes 4-D inputs: a 2-D batch is normalized as [N, 1, 1, C].
                x = array_ops.reshape(inputs, [-1, 1, 1, channels] if data_format == DATA_FORMAT_NHWC
                                      else [-1, channels, 1, 1])
        axis = 1 if data_format == DATA_FORMAT_NCHW else -1
        if x.shape.ndims >= 2 and x.shape[axis] is None:
            raise ValueError(f"Inputs {inputs.name} has undefined channels dimension {x.shape}.")
        layer = core_layers.BatchNormalization(
            axis=axis, momentum=decay, epsilon=epsilon,
            center=center, scale=scale, beta_initializer=param_initializers.get("beta", zeros_initializer()),
            gamma_initializer=param_initializers.get("gamma", _ONES),
            moving_mean_initializer=param_initializers.get("moving_mean", zeros_initializer()),
            moving_variance_initializer=param_initializers.get("moving_variance", _ONES),
            beta_regularizer=param_regularizers.get("beta"), gamma_regularizer=param_regularizers.get("gamma"),
            trainable=trainable, fused=fused_path, name=sc.name, _scope=sc, _reuse=reuse)
        # TF takes the core layer (gamma created first) only for updates in UPDATE_OPS and not a
        # 2-D batch on the fused path; its own fused and legacy paths create beta, then gamma.
        layer._beta_first = not (updates_collections == GraphKeys.UPDATE_OPS and not (fused and rank == 2))
        outputs = layer.apply(x, training=is_training)
        if outputs is not x and x is not inputs:
            outputs = array_ops.reshape(outputs, array_ops.shape(inputs))
            outputs.set_shape(inputs.shape)
        for var, name in ((layer.moving_mean, "moving_mean"), (layer.moving_variance, "moving_variance"),
                          (layer.beta, "beta"), (layer.gamma, "gamma")):
            if var is not None:
                _add_variable_to_collections(var, variables_collections, name)
        updates = layer.updates
        if updates and updates_collections != GraphKeys.UPDATE_OPS:
            ref = get_default_graph().get_collection_ref(GraphKeys.UPDATE_OPS)
            ref[:] = [u for u in ref if not any(u is w for w in updates)]
            if updates_collections is None:
                with control_dependencies(updates):
                    outputs = identity(outputs)
            else:
                for u in updates:
                    get_default_graph().add_to_collections(updates_collections, u)
        if activation_fn is not None:
            outputs = activation_fn(outputs)
        return collect_named_outputs(outputs_collections, sc.name, outputs)


@add_arg_scope
def layer_norm(inputs, center=True, scale=True, activation_fn=None, reuse=None, variables_collections=None,
               outputs_collections=None, trainable=True, begin_norm_axis=1, begin_params_axis=-1, scope=None):
    """Layer normalization (tf.contrib.layers.layer_norm): moments over axes
    `begin_norm_axis`..R-1, then `gamma` and `beta` of shape inputs.shape[begin_params_axis:]
    (model variables under ``LayerNorm``); epsilon 1e-12 (1e-3 for float16), as in TF."""
    with variable_scope(scope, "LayerNorm", [inputs], reuse=reuse) as sc:
        inputs = convert_to_tensor(inputs)
        rank = inputs.shape.ndims
        if rank is None:
            raise ValueError(f"Inputs {inputs.name} has undefined rank.")
        dtype = inputs.dtype.base_dtype
        if begin_norm_axis < 0:
            begin_norm_axis = rank + begin_norm_axis
        if begin_params_axis >= rank or begin_norm_axis >= rank:
            raise ValueError(f"begin_params_axis ({begin_params_axis}) and begin_norm_axis ({begin_norm_axis}) "
                             f"must be < rank(inputs) ({rank})")
        params_shape = inputs.shape[begin_params_axis:]
        if not params_shape.is_fully_defined():
            raise ValueError(f"Inputs {inputs.name}: shape(inputs)[{begin_params_axis}:] is not fully defined: "
                             f"{inputs.shape}")
        beta = gamma = None
        if center:
            beta = model_variable("beta", shape=params_shape, dtype=dtype, initializer=zeros_initializer(),
                                  collections=_variable_collections(variables_collections, "beta"),
                                  trainable=trainable)
        if scale:
            gamma = model_variable("gamma", shape=params_shape, dtype=dtype, initializer=_ONES,
                                   collections=_variable_collections(variables_collections, "gamma"),
                                   trainable=trainable)
        eps = 1e-12 if dtype is not dtypes.float16 else 1e-3
        mean, variance = nn_ops.moments(inputs, list(range(begin_norm_axis, rank)), keep_dims=True)
        outputs = nn_ops.batch_normalization(inputs, mean, variance, offset=beta, scale=gamma, variance_epsilon=eps)
        outputs.set_shape(inputs.shape)
        if activation_fn is not None:
            outputs = activation_fn(outputs)
        return collect_named_outputs(outputs_collections, sc.name, outputs)


def _norm_params(variables_collections, param_initializers, params_shape, dtype, center, scale, trainable,
                 broadcast=None):
    """The `beta` and `gamma` model variables of a normalization (None where not asked for), reshaped
    to `broadcast` when given."""
    inits = param_initializers or {}
    beta = gamma = None
    if center:
        beta = model_variable("beta", shape=params_shape, dtype=dtype, initializer=inits.get("beta", zeros_initializer()),
                              collections=_variable_collections(variables_collections, "beta"), trainable=trainable)
        if broadcast is not None:
            beta = array_ops.reshape(beta, broadcast)
    if scale:
        gamma = model_variable("gamma", shape=params_shape, dtype=dtype, initializer=inits.get("gamma", _ONES),
                               collections=_variable_collections(variables_collections, "gamma"), trainable=trainable)
        if broadcast is not None:
            gamma = array_ops.reshape(gamma, broadcast)
    return beta, gamma


@add_arg_scope
def instance_norm(inputs, center=True, scale=True, epsilon=1e-6, activation_fn=None, param_initializers=None,
                  reuse=None, variables_collections=None, outputs_collections=None, trainable=True,
                  data_format="NHWC", scope=None):
    """Instance normalization (tf.contrib.layers.instance_norm): each example's channels normalized over
    their spatial axes, then `gamma` and `beta` per channel (model variables under ``InstanceNorm``)."""
    inputs = convert_to_tensor(inputs)
    rank = inputs.shape.ndims
    if rank is None:
        raise ValueError(f"Inputs {inputs.name} has undefined rank.")
    if data_format not in ("NCHW", "NHWC"):
        raise ValueError("data_format has to be either NCHW or NHWC.")
    with variable_scope(scope, "InstanceNorm", [inputs], reuse=reuse) as sc:
        channel_axis = 1 if data_format == "NCHW" else rank - 1
        params_shape = inputs.shape[channel_axis:channel_axis + 1]
        if not params_shape.is_fully_defined():
            raise ValueError(f"Inputs {inputs.name} has undefined channels dimension {params_shape}.")
        broadcast = [1, params_shape.dims[0]] + [1] * (rank - 2) if data_format == "NCHW" else None
        beta, gamma = _norm_params(variables_collections, param_initializers, params_shape,
                                   inputs.dtype.base_dtype, center, scale, trainable, broadcast)
        axes = [a for a in range(1, rank) if a != channel_axis]
        mean, variance = nn_ops.moments(inputs, axes, keep_dims=True)
        outputs = nn_ops.batch_normalization(inputs, mean, variance, beta, gamma, epsilon, name="instancenorm")
        if activation_fn is not None:
            outputs = activation_fn(outputs)
        return collect_named_outputs(outputs_collections, sc.name, outputs)


@add_arg_scope
def group_norm(inputs, groups=32, channels_axis=-1, reduction_axes=(-3, -2), center=True, scale=True, epsilon=1e-6,
               activation_fn=None, param_initializers=None, reuse=None, variables_collections=None,
               outputs_collections=None, trainable=True, scope=None, mean_close_to_zero=False):
    """Group normalization (tf.contrib.layers.group_norm): the channels split into `groups`, each group
    normalized over itself and `reduction_axes` (the spatial axes of NHWC by default), then `gamma` and
    `beta` per channel (model variables under ``GroupNorm``). `mean_close_to_zero` computes the moments
    in one pass (sufficient statistics), as TF does."""
    inputs = convert_to_tensor(inputs)
    rank = inputs.shape.ndims
    if rank is None:
        raise ValueError(f"Inputs {inputs.name} has undefined rank.")
    if channels_axis > rank - 1:
        raise ValueError("Axis is out of bounds.")
    dims = inputs.shape.dims
    dynamic = array_ops.shape(inputs)
    shape_list = [dynamic[i] if d is None else d for i, d in enumerate(dims)]
    if channels_axis < 0:
        channels_axis += rank
    channels = dims[channels_axis]
    if channels is None:
        raise ValueError(f"Inputs {inputs.name} has undefined channel dimension: {channels_axis}.")
    axes = [a + rank if a < 0 else a for a in reduction_axes]
    for a in axes:
        if a > rank:
            raise ValueError("Axis is out of bounds.")
        if dims[a] is None:
            raise ValueError(f"Inputs {inputs.name} has undefined dimensions {a}.")
        if a == channels_axis:
            raise ValueError("reduction_axis must be mutually exclusive with channels_axis")
    if groups > channels:
        raise ValueError(f"Invalid groups {groups} for {channels} channels.")
    if channels % groups:
        raise ValueError(f"{channels} channels is not commensurate with {groups} groups.")
    before, after = shape_list[:channels_axis], shape_list[channels_axis + 1:]
    broadcast = [1] * len(before) + [groups, channels // groups] + [1] * len(after)
    grouped = array_ops.reshape(inputs, array_ops.stack(before + [groups, channels // groups] + after)
                                if any(isinstance(d, Tensor) for d in shape_list)
                                else before + [groups, channels // groups] + after)
    moments_axes = [channels_axis + 1] + [a + 1 if a > channels_axis else a for a in axes]
    with variable_scope(scope, "GroupNorm", [grouped], reuse=reuse) as sc:
        beta, gamma = _norm_params(variables_collections, param_initializers, [channels], inputs.dtype.base_dtype,
                                   center, scale, trainable, broadcast)
        if mean_close_to_zero:
            from actorflow.graph.ops.nn_misc_ops import normalize_moments, sufficient_statistics
            counts, mean_ss, variance_ss, _ = sufficient_statistics(grouped, moments_axes, keep_dims=True)
            mean, variance = normalize_moments(counts, mean_ss, variance_ss, shift=None)
        else:
            mean, variance = nn_ops.moments(grouped, moments_axes, keep_dims=True)
        gain = math_ops.rsqrt(variance + epsilon)
        offset = -mean * gain
        if gamma is not None:
            gain = gain * gamma
            offset = offset * gamma
        if beta is not None:
            offset = offset + beta
        outputs = grouped * gain + offset
        outputs = array_ops.reshape(outputs, array_ops.stack(shape_list)
                                    if any(isinstance(d, Tensor) for d in shape_list) else shape_list)
        if activation_fn is not None:
            outputs = activation_fn(outputs)
        return collect_named_outputs(outputs_collections, sc.name, outputs)


def recompute_grad(fn, use_data_dep=None, tupleize_grads=False):
    """tf.contrib.layers.recompute_grad (a decorator): af.recompute_grad's, whose values and gradients
    are fn's (the forward activations are kept rather than recomputed); the two TPU/memory knobs are
    accepted and change nothing."""
    from actorflow.graph.custom_gradient import recompute_grad as _recompute
    return _recompute(fn)


# ---------------------------------------------------------------------------------------------
# repeat and stack
# ---------------------------------------------------------------------------------------------

def _layer_name(layer) -> str | None:
    if hasattr(layer, "__name__"):
        return layer.__name__
    if hasattr(layer, "func") and hasattr(layer.func, "__name__"):
        return layer.func.__name__
    return None


def repeat(inputs, repetitions, layer, *args, **kwargs):
    """Applies `layer(outputs, *args, **kwargs)` `repetitions` times, the i-th in scope
    `<scope>/<scope>_<i>` (tf.contrib.layers.repeat)."""
    scope = kwargs.pop("scope", None)
    with variable_scope(scope, "Repeat", [inputs]):
        outputs = convert_to_tensor(inputs)
        if scope is None:
            scope = _layer_name(layer) or "repeat"
        for i in range(repetitions):
            kwargs["scope"] = f"{scope}_{i + 1}"
            outputs = layer(outputs, *args, **kwargs)
        return outputs


def stack(inputs, layer, stack_args, **kwargs):
    """Applies `layer` once per entry of `stack_args` (its positional arguments), the i-th in scope
    `<scope>/<scope>_<i>` (tf.contrib.layers.stack)."""
    scope = kwargs.pop("scope", None)
    if not isinstance(stack_args, (list, tuple)):
        raise ValueError("stack_args need to be a list or tuple")
    with variable_scope(scope, "Stack", [inputs]):
        outputs = convert_to_tensor(inputs)
        if scope is None:
            scope = _layer_name(layer) or "stack"
        for i, layer_args in enumerate(stack_args):
            kwargs["scope"] = f"{scope}_{i + 1}"
            if not isinstance(layer_args, (list, tuple)):
                layer_args = [layer_args]
            outputs = layer(outputs, *layer_args, **kwargs)
        return outputs


# ---------------------------------------------------------------------------------------------
# optimize_loss
# ---------------------------------------------------------------------------------------------

OPTIMIZER_CLS_NAMES = {
    "Adagrad": _optimizers.AdagradOptimizer,
    "Adam": _optimizers.AdamOptimizer,
    "Ftrl": _optimizers.FtrlOptimizer,
    "Momentum": lambda learning_rate: _optimizers.MomentumOptimizer(learning_rate, momentum=0.9),
    "RMSProp": _optimizers.RMSPropOptimizer,
    "SGD": _optimizers.GradientDescentOptimizer,
}

OPTIMIZER_SUMMARIES = ["learning_rate", "loss", "gradients", "gradient_norm", "global_gradient_norm"]


def _multiply_gradients(grads_and_vars, gradient_multipliers):
    out = []
    for grad, var in grads_and_vars:
        key = var if var in gradient_multipliers else var.name if var.name in gradient_multipliers else None
        if grad is not None and key is not None:
            m = gradient_multipliers[key]
            if isinstance(grad, IndexedSlices):
                grad = IndexedSlices(grad.values * m, grad.indices, grad.dense_shape)
            else:
                grad = grad * math_ops.cast(m, grad.dtype)
        out.append((grad, var))
    return out


def _add_scaled_noise(grads_and_vars, scale):
    out = []
    for grad, var in grads_and_vars:
        if grad is None:
            out.append((None, var))
            continue
        shape = grad.dense_shape if isinstance(grad, IndexedSlices) else array_ops.shape(grad)
        out.append((grad + random_ops.truncated_normal(shape) * scale, var))
    return out


def optimize_loss(loss, global_step, learning_rate, optimizer, gradient_noise_scale=None, gradient_multipliers=None,
                  clip_gradients=None, learning_rate_decay_fn=None, update_ops=None, variables=None, name=None,
                  summaries=None, colocate_gradients_with_ops=False, increment_global_step=True):
    """The train op of `loss`: the loss, after the update ops, the gradient step and the
    global-step increment (tf.contrib.layers.optimize_loss).

    `optimizer` is a name in OPTIMIZER_CLS_NAMES ('SGD', 'Adam', 'Adagrad', 'Momentum' (0.9),
    'RMSProp', 'Ftrl'), an Optimizer class or instance, or a function of the learning rate.
    A float `learning_rate` becomes the variable ``OptimizeLoss/learning_rate``. `clip_gradients`
    is a float (clip by global norm) or a function of the (gradient, variable) pairs. Summaries of
    the loss, learning rate and gradient norms are added to SUMMARIES as in TF.
    """
    loss = convert_to_tensor(loss)
    if loss.shape.ndims not in (None, 0):
        raise ValueError(f"optimize_loss: loss must be a scalar, got shape {loss.shape} ('{loss.name}')")
    if global_step is None:
        global_step = get_global_step()
    else:
        assert_global_step(global_step)
    g = get_default_graph()
    with variable_scope(name, "OptimizeLoss", [loss, global_step]):
        if update_ops is None:
            update_ops = list(dict.fromkeys(g.get_collection(GraphKeys.UPDATE_OPS)))
        if update_ops:
            with control_dependencies(list(update_ops)):
                loss = identity(loss)
        lr = None
        if learning_rate is not None:
            if isinstance(learning_rate, Tensor) and learning_rate.shape.ndims == 0:
                lr = learning_rate
            elif isinstance(learning_rate, float):
                if learning_rate < 0.0:
                    raise ValueError(f"Invalid learning_rate {learning_rate}.")
                from actorflow.graph.initializers import constant_initializer
                lr = get_variable("learning_rate", [], trainable=False,
                                  initializer=constant_initializer(learning_rate))
            else:
                raise ValueError(f"Learning rate should be 0d Tensor or float. Got {learning_rate!r} of type "
                                 f"{type(learning_rate)}")
        if summaries is None:
            summaries = ["loss", "learning_rate", "global_gradient_norm"]
        else:
            for s in summaries:
                if s not in OPTIMIZER_SUMMARIES:
                    raise ValueError(f"Summaries should be one of [{', '.join(OPTIMIZER_SUMMARIES)}], you "
                                     f"provided {s}.")
        if learning_rate is not None and learning_rate_decay_fn is not None:
            if global_step is None:
                raise ValueError("global_step is required for learning_rate_decay_fn.")
            lr = learning_rate_decay_fn(lr, global_step)
            if "learning_rate" in summaries:
                _scalar_summary("learning_rate", lr)

        if isinstance(optimizer, str):
            if lr is None:
                raise ValueError(f"Learning rate is None, but should be specified if optimizer is string "
                                 f"({optimizer}).")
            if optimizer not in OPTIMIZER_CLS_NAMES:
                raise ValueError(f"Optimizer name should be one of [{', '.join(OPTIMIZER_CLS_NAMES)}], you "
                                 f"provided {optimizer}.")
            opt = OPTIMIZER_CLS_NAMES[optimizer](learning_rate=lr)
        elif isinstance(optimizer, type) and issubclass(optimizer, Optimizer):
            if lr is None:
                raise ValueError(f"Learning rate is None, but should be specified if optimizer is class "
                                 f"({optimizer}).")
            opt = optimizer(learning_rate=lr)
        elif isinstance(optimizer, Optimizer):
            opt = optimizer
        elif callable(optimizer):
            opt = optimizer(lr) if learning_rate is not None else optimizer()
            if not isinstance(opt, Optimizer):
                raise ValueError(f"Unrecognized optimizer: function should return subclass of Optimizer. Got {opt}.")
        else:
            raise ValueError("Unrecognized optimizer: should be string, subclass of Optimizer, instance of subclass "
                             f"of Optimizer or function with one argument. Got {optimizer!r}.")

        if variables is None:
            variables = trainable_variables()
        gradients = opt.compute_gradients(loss, variables, colocate_gradients_with_ops=colocate_gradients_with_ops)
        if gradient_noise_scale is not None:
            gradients = _add_scaled_noise(gradients, gradient_noise_scale)
        if gradient_multipliers is not None:
            gradients = _multiply_gradients(gradients, gradient_multipliers)
            if not gradients:
                raise ValueError("Empty list of (gradient, var) pairs encountered. This is most likely to be caused "
                                 "by an improper value of gradient_multipliers.")
        present = [gv[0] for gv in gradients if gv[0] is not None]
        if ("global_gradient_norm" in summaries or "gradient_norm" in summaries) and present:
            _scalar_summary("global_norm/gradient_norm", clip_ops.global_norm(present))
        if isinstance(clip_gradients, float):
            grads, tvars = zip(*gradients)
            clipped, _ = clip_ops.clip_by_global_norm(list(grads), clip_gradients)
            gradients = list(zip(clipped, tvars))
        elif callable(clip_gradients):
            gradients = clip_gradients(gradients)
        elif clip_gradients is not None:
            raise ValueError(f"Unknown type {type(clip_gradients)} for clip_gradients")
        if "loss" in summaries:
            _scalar_summary("loss", loss)
        for grad, var in gradients:
            values = grad.values if isinstance(grad, IndexedSlices) else grad
            if values is not None:
                var_name = var.name.replace(":", "_")
                if "gradients" in summaries:
                    _histogram_summary(f"gradients/{var_name}", values)
                if "gradient_norm" in summaries:
                    _scalar_summary(f"gradient_norm/{var_name}", clip_ops.global_norm([values]))
        if clip_gradients is not None and ("global_gradient_norm" in summaries or "gradient_norm" in summaries):
            present = [gv[0] for gv in gradients if gv[0] is not None]
            if present:
                _scalar_summary("global_norm/clipped_gradient_norm", clip_ops.global_norm(present))
        grad_updates = opt.apply_gradients(gradients, global_step=global_step if increment_global_step else None,
                                           name="train")
        with control_dependencies([grad_updates]):
            return identity(loss)


# ---------------------------------------------------------------------------------------------
# Summaries (tf.contrib.layers.summarize_*), over af.summary's ops
# ---------------------------------------------------------------------------------------------

def summarize_tensor(tensor, tag=None):
    """A scalar summary of a scalar tensor, else a histogram, tagged with the op's name
    (tf.contrib.layers.summarize_tensor)."""
    tag = tag or tensor.op.name
    if tensor.shape.ndims == 0:
        return _scalar_summary(tag, tensor)
    return _histogram_summary(tag, tensor)


def summarize_tensors(tensors, summarizer=summarize_tensor):
    """`summarizer` applied to each tensor (tf.contrib.layers.summarize_tensors)."""
    return [summarizer(t) for t in tensors]


def summarize_collection(collection, name_filter=None, summarizer=summarize_tensor):
    """`summarizer` applied to the items of a collection whose names match `name_filter`
    (tf.contrib.layers.summarize_collection)."""
    return summarize_tensors(get_collection(collection, name_filter), summarizer)


def summarize_activation(op):
    """A histogram `<op>/activation` of an activation, and for Relu/Relu6/Softplus the fraction of
    zeros `<op>/zeros` (and of sixes for Relu6) (tf.contrib.layers.summarize_activation)."""
    kind = op.op.type
    if kind in ("Relu", "Softplus", "Relu6"):
        x = op.op.inputs[0]
        _scalar_summary(f"{op.op.name}/zeros",
                        math_ops.reduce_mean(math_ops.cast(math_ops.less(x, math_ops.cast(0.0, x.dtype)),
                                                           dtypes.float32)))
    if kind == "Relu6":
        x = op.op.inputs[0]
        _scalar_summary(f"{op.op.name}/sixes",
                        math_ops.reduce_mean(math_ops.cast(math_ops.greater(x, math_ops.cast(6.0, x.dtype)),
                                                           dtypes.float32)))
    return _histogram_summary(f"{op.op.name}/activation", op)


def summarize_activations(name_filter=None, summarizer=summarize_activation):
    """Summaries of the ACTIVATIONS collection (tf.contrib.layers.summarize_activations)."""
    return summarize_collection(GraphKeys.ACTIVATIONS, name_filter, summarizer)


def summarize_variables(name_filter=None):
    """Summaries of the trainable variables (tf.contrib.layers.summarize_variables)."""
    return summarize_collection(GraphKeys.TRAINABLE_VARIABLES, name_filter, _summarize_variable)


def summarize_weights(name_filter=None):
    """Summaries of the WEIGHTS collection (tf.contrib.layers.summarize_weights)."""
    return summarize_collection(GraphKeys.WEIGHTS, name_filter, _summarize_variable)


def summarize_biases(name_filter=None):
    """Summaries of the BIASES collection (tf.contrib.layers.summarize_biases)."""
    return summarize_collection(GraphKeys.BIASES, name_filter, _summarize_variable)


def _summarize_variable(v):
    t = v.value() if isinstance(v, Variable) else v
    return summarize_tensor(t, tag=v.op.name)
