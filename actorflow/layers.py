"""af.layers: the layers of tf.compat.v1.layers, as classes (Dense, Conv2D, BatchNormalization, ...)
and their functional forms (dense, conv2d, batch_normalization, ...).

A layer object creates its variables once, with `get_variable` inside its variable scope: the
first call picks `name`, or a unique default ("dense", "dense_1", ...), so variables are named
like TF's ("dense/kernel", "dense/bias"); later calls re-enter that scope with reuse=True, so
`layer(x1); layer(x2)` shares one set of variables. The functional forms build a layer and call
it once, as TF does: they share variables with `reuse=True` (or AUTO_REUSE) and the same `name`.
Kernels default to glorot_uniform (get_variable's default), biases to zeros.

`training` may be a Python bool or a scalar bool tensor. A tensor selects between the training
and inference results with SelectV2 (both are computed), which keeps everything differentiable
without control-flow gradients; TF 1.x uses `tf.cond` there.
"""
from __future__ import annotations

import numbers
import re

import numpy as np

from actorflow.graph import control_flow, dtypes
from actorflow.graph.graph import GraphKeys, Tensor, convert_to_tensor, get_default_graph
from actorflow.graph.initializers import ones_initializer, zeros_initializer
from actorflow.graph.ops import array_ops, math_ops, nn_conv3d_ops, nn_conv_ops, nn_misc_ops, nn_ops
from actorflow.graph.ops.constant import identity
from actorflow.graph.ops.infer import constant_value
from actorflow.graph.variable_scope import VariableScope, get_variable, variable_scope
from actorflow.graph.variables import assign_sub

# Shared default initializers (stateless; the variable's dtype is given when they are called).
_ZEROS = zeros_initializer()
_ONES = ones_initializer()

__all__ = ["dense", "conv1d", "conv2d", "conv2d_transpose", "max_pooling1d", "average_pooling1d", "max_pooling2d",
           "average_pooling2d", "flatten", "dropout", "batch_normalization",
           "Layer", "Dense", "Conv1D", "Conv2D", "Conv2DTranspose", "MaxPooling1D", "MaxPooling2D", "AveragePooling1D",
           "AveragePooling2D", "Dropout", "Flatten", "BatchNormalization",
           "conv3d", "conv3d_transpose", "max_pooling3d", "average_pooling3d",
           "Conv3D", "Conv3DTranspose", "MaxPooling3D", "AveragePooling3D",
           "separable_conv1d", "separable_conv2d", "SeparableConv1D", "SeparableConv2D"]


# ---------------------------------------------------------------------------------------------
# Shared pieces
# ---------------------------------------------------------------------------------------------

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


def _triple(v, what, layer):
    if isinstance(v, numbers.Integral):
        return (int(v),) * 3
    v = tuple(int(d) for d in v)
    if len(v) != 3:
        raise ValueError(f"Layer {layer}: `{what}` must be an int or a tuple of 3 ints, got {v}")
    return v


def _tuple_arg(rank):
    return {1: _single, 2: _pair, 3: _triple}[rank]


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


# ---------------------------------------------------------------------------------------------
# The base class
# ---------------------------------------------------------------------------------------------

_LAYER_NAMES_KEY = "__af_layer_name_uids"


def _snake_case(name: str) -> str:
    """Keras's to_snake_case: "Conv2DTranspose" -> "conv2d_transpose", the default layer names."""
    s = re.sub("(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    s = re.sub("([a-z])([A-Z])", r"\1_\2", s).lower()
    return s if s[0] != "_" else "private" + s


def _unique_layer_name(base: str) -> str:
    """"dense_1", "dense_2", ... per graph: TF 1.x layers' names (Keras's unique_object_name, one-based).
    Only the layer's `name`; its variable scope ("dense", "dense_1", ...) is made unique separately,
    by variable_scope."""
    coll = get_default_graph().get_collection_ref(_LAYER_NAMES_KEY)
    if not coll:
        coll.append({})
    uids = coll[0]
    n = uids.get(base, 0)
    uids[base] = n + 1
    return f"{base}_{n + 1}"


class Layer:
    """A layer of tf.compat.v1.layers: variables created once by `build`, the computation in
    `call`, both inside the layer's variable scope (tf.compat.v1.layers.Layer).

    The scope is chosen at the first call: `<name>` made unique ("dense", "dense_1", ...) under the
    current variable scope, or `scope=` given to that call. Later calls re-enter it with
    reuse=True, so a layer called twice shares one set of variables, and the ops of each call go
    under the scope's name scope ("dense/MatMul", "dense/MatMul_1"). The variables are created
    with `get_variable` (`add_weight`), so `reuse`, custom getters, partitioners and initializer
    defaults of enclosing scopes apply, as in TF. Subclasses override `build(input_shape)` and
    `call(inputs, ...)`. Differences from TF: no Keras functional-model machinery (input specs,
    masks, `get_weights`); `losses` holds the regularization losses of this layer's variables.
    """

    def __init__(self, trainable=True, name=None, dtype=None, **kwargs):
        scope = kwargs.pop("_scope", None)
        self._reuse = kwargs.pop("_reuse", None)
        activity_regularizer = kwargs.pop("activity_regularizer", None)
        # Keras arguments of model building that a graph-mode layer has no use for.
        for k in ("input_shape", "batch_input_shape", "batch_size", "input_dim", "autocast", "dynamic"):
            kwargs.pop(k, None)
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unexpected keyword arguments {sorted(kwargs)}")
        self.trainable = bool(trainable)
        self.built = False
        self.activity_regularizer = activity_regularizer
        self._dtype = None if dtype is None else dtypes.as_dtype(dtype)
        self._trainable_weights: list = []
        self._non_trainable_weights: list = []
        self._updates: list = []
        self._losses: list = []
        base = _snake_case(type(self).__name__)
        if isinstance(name, VariableScope):
            self._base_name, self._name = name.name, _unique_layer_name(base)
        elif name:
            self._base_name = self._name = str(name)
        else:
            self._base_name, self._name = base, _unique_layer_name(base)
        self._scope = None
        if scope is not None:
            with variable_scope(scope) as captured:
                self._scope = captured

    # -- facts ------------------------------------------------------------------------------

    name = property(lambda self: self._name, doc="The layer's name: as given, else unique per graph (\"dense_1\").")
    dtype = property(lambda self: self._dtype, doc="The dtype of its variables (the first input's if not given).")
    scope_name = property(lambda self: self._scope.name if self._scope is not None else None,
                          doc="The name of its variable scope, known after the first call.")

    @property
    def trainable_weights(self) -> list:
        """The trainable variables this layer created or reused, in creation order."""
        return list(self._trainable_weights) if self.trainable else []

    @property
    def non_trainable_weights(self) -> list:
        """The other variables (batch norm's moving statistics), in creation order."""
        if self.trainable:
            return list(self._non_trainable_weights)
        return list(self._trainable_weights) + list(self._non_trainable_weights)

    trainable_variables = trainable_weights
    non_trainable_variables = non_trainable_weights

    @property
    def weights(self) -> list:
        """Trainable weights, then the others (TF's order)."""
        return self.trainable_weights + self.non_trainable_weights

    variables = weights

    @property
    def updates(self) -> list:
        """The update ops its calls made (batch norm's moving averages), also in UPDATE_OPS."""
        return list(self._updates)

    @property
    def losses(self) -> list:
        """Regularization losses of its variables and outputs (also in REGULARIZATION_LOSSES)."""
        return list(self._losses)

    # -- building ---------------------------------------------------------------------------

    def add_weight(self, name, shape, dtype=None, initializer=None, regularizer=None, trainable=True,
                   constraint=None, partitioner=None, **kwargs):
        """Creates (or, once built or with reuse, finds) the variable `<scope>/<name>` with
        get_variable and tracks it (tf.compat.v1.layers.Layer.add_weight)."""
        dtype = dtypes.as_dtype(dtype) if dtype is not None else (self._dtype or dtypes.float32)
        reuse = True if self.built else self._reuse
        g = get_default_graph()
        before = len(g.get_collection(GraphKeys.REGULARIZATION_LOSSES))
        with variable_scope(self._scope, reuse=reuse, auxiliary_name_scope=False):
            v = get_variable(name, shape, dtype=dtype, initializer=initializer, regularizer=regularizer,
                             trainable=bool(trainable) and self.trainable, constraint=constraint,
                             partitioner=partitioner, **kwargs)
        self._losses.extend(g.get_collection(GraphKeys.REGULARIZATION_LOSSES)[before:])
        tracked = self._trainable_weights if trainable else self._non_trainable_weights
        if not any(v is w for w in tracked):
            tracked.append(v)
        return v

    def add_update(self, updates, inputs=None):
        """Records update ops (and adds them to UPDATE_OPS, as TF 1.x layers do)."""
        g = get_default_graph()
        for u in (updates if isinstance(updates, (list, tuple)) else [updates]):
            self._updates.append(u)
            g.add_to_collection(GraphKeys.UPDATE_OPS, u)

    def add_loss(self, losses, inputs=None):
        """Records losses (and adds them to REGULARIZATION_LOSSES, as TF 1.x layers do)."""
        g = get_default_graph()
        for loss in (losses if isinstance(losses, (list, tuple)) else [losses]):
            self._losses.append(loss)
            g.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)

    def build(self, input_shape):
        """Creates the variables for inputs of `input_shape`; the base layer has none."""
        self.built = True

    def call(self, inputs, **kwargs):
        """The layer's computation; the base layer returns its inputs."""
        return inputs

    # -- calling ----------------------------------------------------------------------------

    def _set_scope(self, scope=None):
        if self._scope is None:
            if self._reuse:
                cm = variable_scope(scope if scope is not None else self._base_name)
            else:
                cm = variable_scope(scope, default_name=self._base_name)
            with cm as captured:
                self._scope = captured

    def __call__(self, inputs, *args, **kwargs):
        """Builds the layer on the first call, then runs `call` in its scope (reused after the first)."""
        scope = kwargs.pop("scope", None)
        self._set_scope(scope)
        g = get_default_graph()
        reuse = True if self.built else self._reuse
        with variable_scope(self._scope, reuse=reuse, auxiliary_name_scope=False), \
                g.name_scope(self._scope.original_name_scope):
            if not self.built:
                if isinstance(inputs, dict):        # features by name (a DenseFeatures layer's)
                    first = inputs[sorted(inputs)[0]] if inputs else None
                else:
                    first = inputs[0] if isinstance(inputs, (list, tuple)) else inputs
                if self._dtype is None:
                    t = first if isinstance(first, Tensor) else convert_to_tensor(first)
                    self._dtype = t.dtype.base_dtype if t.dtype.is_floating else dtypes.float32
                if isinstance(inputs, dict):
                    shape = {k: convert_to_tensor(v).shape for k, v in inputs.items()}
                elif isinstance(inputs, (list, tuple)):
                    shape = [convert_to_tensor(i).shape for i in inputs]
                else:
                    shape = convert_to_tensor(inputs).shape
                self.build(shape)
                self.built = True
            out = self.call(inputs, *args, **kwargs)
            if self.activity_regularizer is not None:
                loss = self.activity_regularizer(out)
                if loss is not None:
                    self.add_loss(loss)
        return out

    def apply(self, inputs, *args, **kwargs):
        """The same as calling the layer (tf.compat.v1.layers.Layer.apply)."""
        return self(inputs, *args, **kwargs)

    def __repr__(self):
        return f"<{type(self).__name__} '{self._name}'>"


def _add_bias_activation(layer, out, fmt="NHWC"):
    if layer.bias is not None:
        out = nn_ops.bias_add(out, layer.bias, data_format=fmt)
    if layer.activation is not None:
        out = layer.activation(out)
    return out


# ---------------------------------------------------------------------------------------------
# Dense
# ---------------------------------------------------------------------------------------------

def _kernel_options(layer, activation, use_bias, kernel_initializer, bias_initializer, kernel_regularizer,
                    bias_regularizer, kernel_constraint, bias_constraint) -> None:
    """The attributes a layer with a kernel and a bias keeps (Dense, the convolutions)."""
    layer.activation = activation
    layer.use_bias = use_bias
    layer.kernel_initializer, layer.bias_initializer = kernel_initializer, bias_initializer
    layer.kernel_regularizer, layer.bias_regularizer = kernel_regularizer, bias_regularizer
    layer.kernel_constraint, layer.bias_constraint = kernel_constraint, bias_constraint
    layer.kernel = layer.bias = None


class Dense(Layer):
    """activation(inputs @ kernel + bias) (tf.compat.v1.layers.Dense).

    Variables `<scope>/kernel` [in, units] and `<scope>/bias` [units]. Inputs of rank > 2 are
    multiplied along their last axis (TF uses tensordot; here reshape, matmul, reshape).
    """

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer=None, bias_initializer=_ZEROS,
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                 bias_constraint=None, trainable=True, name=None, **kwargs):
        super().__init__(trainable=trainable, name=name, activity_regularizer=activity_regularizer, **kwargs)
        self.units = int(units)
        _kernel_options(self, activation, use_bias, kernel_initializer, bias_initializer, kernel_regularizer,
                        bias_regularizer, kernel_constraint, bias_constraint)

    def build(self, input_shape):
        ndims = input_shape.ndims
        if ndims is None or ndims < 2:
            raise ValueError(f"Input 0 of layer dense is incompatible with the layer: expected min_ndim=2, found "
                             f"ndim={ndims}. Full shape received: {input_shape}")
        in_dim = input_shape[-1]
        if in_dim is None:
            raise ValueError("The last dimension of the inputs to `Dense` should be defined. Found `None`.")
        self.kernel = self.add_weight("kernel", [in_dim, self.units], initializer=self.kernel_initializer,
                                      regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        self.bias = self.add_weight("bias", [self.units], initializer=self.bias_initializer,
                                    regularizer=self.bias_regularizer,
                                    constraint=self.bias_constraint) if self.use_bias else None
        self.built = True

    def call(self, inputs):
        x = _float_input(inputs, "dense")
        ndims = x.shape.ndims
        in_dim = self.kernel.shape[0]
        if ndims is None or ndims < 2 or (x.shape[-1] is not None and x.shape[-1] != in_dim):
            raise ValueError(f"Input 0 of layer {self.name} is incompatible with the layer: expected axis -1 of input "
                             f"shape to have value {in_dim}, got shape {x.shape}")
        units = self.units
        if ndims == 2:
            out = math_ops.matmul(x, self.kernel)
        else:
            flat = array_ops.reshape(x, [-1, in_dim])
            out = math_ops.matmul(flat, self.kernel)
            lead = x.shape[:-1]
            if lead.is_fully_defined():
                out_shape = lead.as_list() + [units]
            else:
                dyn = array_ops.strided_slice(array_ops.shape(x), [0], [ndims - 1])
                out_shape = array_ops.concat([dyn, convert_to_tensor([units], dtype=dyn.dtype)], 0)
            out = array_ops.reshape(out, out_shape)
            out.set_shape(lead.concatenate([units]))
        return _add_bias_activation(self, out)


def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None, bias_initializer=_ZEROS,
          kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
          bias_constraint=None, trainable=True, name=None, reuse=None):
    """Functional form of Dense (tf.compat.v1.layers.dense): variables `<scope>/kernel` and
    `<scope>/bias`, shared with `reuse=True` (or AUTO_REUSE) and the same `name`."""
    return Dense(units, activation=activation, use_bias=use_bias, kernel_initializer=kernel_initializer,
                 bias_initializer=bias_initializer, kernel_regularizer=kernel_regularizer,
                 bias_regularizer=bias_regularizer, activity_regularizer=activity_regularizer,
                 kernel_constraint=kernel_constraint, bias_constraint=bias_constraint, trainable=trainable,
                 name=name, _scope=name, _reuse=reuse)(inputs)


# ---------------------------------------------------------------------------------------------
# Convolutions
# ---------------------------------------------------------------------------------------------

def _single(v, what, layer):
    if isinstance(v, numbers.Integral):
        return int(v)
    v = tuple(int(d) for d in v)
    if len(v) != 1:
        raise ValueError(f"Layer {layer}: `{what}` must be an int or a tuple of one int, got {v}")
    return v[0]


class _Conv(Layer):
    """What Conv1D, Conv2D and Conv2DTranspose share: arguments, the kernel and the bias."""
    _rank = 2
    _layer = "conv2d"

    def __init__(self, filters, kernel_size, strides, padding, data_format, dilation_rate, activation, use_bias,
                 kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer, activity_regularizer,
                 kernel_constraint, bias_constraint, trainable, name, **kwargs):
        super().__init__(trainable=trainable, name=name, activity_regularizer=activity_regularizer, **kwargs)
        layer = self._layer
        tup = _tuple_arg(self._rank)
        self.filters = int(filters)
        self.kernel_size = tup(kernel_size, "kernel_size", layer)
        self.strides = tup(strides, "strides", layer)
        self.dilation_rate = tup(dilation_rate, "dilation_rate", layer)
        if self._rank == 1 and str(padding).lower() == "causal":
            self.padding = "CAUSAL"
        else:
            self.padding = _padding(padding, layer)
        self.data_format = data_format
        self._fmt = _data_format(data_format, layer)
        _kernel_options(self, activation, use_bias, kernel_initializer, bias_initializer, kernel_regularizer,
                        bias_regularizer, kernel_constraint, bias_constraint)

    def _in_channels(self, input_shape):
        nd = self._rank + 2
        if input_shape.ndims != nd:
            raise ValueError(f"Input 0 of layer {self._layer} is incompatible with the layer: expected ndim={nd}, "
                             f"found ndim={input_shape.ndims}. Full shape received: {input_shape}")
        c = input_shape[-1 if self._fmt == "NHWC" else 1]
        if c is None:
            raise ValueError("The channel dimension of the inputs should be defined. Found `None`.")
        return c

    def _make_bias(self):
        self.bias = self.add_weight("bias", [self.filters], initializer=self.bias_initializer,
                                    regularizer=self.bias_regularizer,
                                    constraint=self.bias_constraint) if self.use_bias else None

    def _full(self, a, b):
        return [1, a, b, 1] if self._fmt == "NHWC" else [1, 1, a, b]


class Conv2D(_Conv):
    """2-D convolution layer (tf.compat.v1.layers.Conv2D): `<scope>/kernel` [kh, kw, in, filters]
    and `<scope>/bias` [filters]. `padding` is "valid" or "same" (any case)."""

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format="channels_last",
                 dilation_rate=(1, 1), activation=None, use_bias=True, kernel_initializer=None,
                 bias_initializer=_ZEROS, kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, trainable=True, name=None, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate, activation, use_bias,
                         kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer,
                         activity_regularizer, kernel_constraint, bias_constraint, trainable, name, **kwargs)

    def build(self, input_shape):
        in_ch = self._in_channels(input_shape)
        kh, kw = self.kernel_size
        self.kernel = self.add_weight("kernel", [kh, kw, in_ch, self.filters], initializer=self.kernel_initializer,
                                      regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        self._make_bias()
        self.built = True

    def call(self, inputs):
        x = _float_input(inputs, self._layer)
        self._in_channels(x.shape)
        out = nn_ops.conv2d(x, self.kernel, strides=self._full(*self.strides), padding=self.padding,
                            data_format=self._fmt, dilations=self._full(*self.dilation_rate))
        return _add_bias_activation(self, out, self._fmt)


class Conv1D(_Conv):
    """1-D convolution layer (tf.compat.v1.layers.Conv1D): `<scope>/kernel` [k, in, filters] and
    `<scope>/bias` [filters]; inputs [batch, width, channels] ("channels_last") or [batch,
    channels, width]. Computed as a 2-D convolution over a height of 1 (as TF's conv1d does);
    "causal" padding pads the start of the sequence by dilation * (k - 1)."""
    _rank = 1
    _layer = "conv1d"

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format="channels_last",
                 dilation_rate=1, activation=None, use_bias=True, kernel_initializer=None,
                 bias_initializer=_ZEROS, kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, trainable=True, name=None, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate, activation, use_bias,
                         kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer,
                         activity_regularizer, kernel_constraint, bias_constraint, trainable, name, **kwargs)

    def build(self, input_shape):
        in_ch = self._in_channels(input_shape)
        self.kernel = self.add_weight("kernel", [self.kernel_size, in_ch, self.filters],
                                      initializer=self.kernel_initializer, regularizer=self.kernel_regularizer,
                                      constraint=self.kernel_constraint)
        self._make_bias()
        self.built = True

    def call(self, inputs):
        x = _float_input(inputs, self._layer)
        self._in_channels(x.shape)
        padding = self.padding
        if padding == "CAUSAL":
            left = self.dilation_rate * (self.kernel_size - 1)
            t_axis = 1 if self._fmt == "NHWC" else 2
            pads = [[0, 0], [0, 0], [0, 0]]
            pads[t_axis] = [left, 0]
            x = array_ops.pad(x, pads)
            padding = "VALID"
        # NWC -> N,1,W,C (NHWC); NCW -> N,C,1,W (NCHW): the width stays the second spatial axis.
        h_axis = 1 if self._fmt == "NHWC" else 2
        x4 = array_ops.expand_dims(x, h_axis)
        k4 = array_ops.expand_dims(self.kernel, 0)
        out = nn_ops.conv2d(x4, k4, strides=self._full(1, self.strides), padding=padding, data_format=self._fmt,
                            dilations=self._full(1, self.dilation_rate))
        out = array_ops.squeeze(out, [h_axis])
        return _add_bias_activation(self, out, "NHWC" if self._fmt == "NHWC" else "NCHW")


class Conv2DTranspose(_Conv):
    """Transposed 2-D convolution layer (tf.compat.v1.layers.Conv2DTranspose): `<scope>/kernel`
    [kh, kw, filters, in_channels] and `<scope>/bias` [filters]; each spatial size becomes
    `size * stride` ("same") or `size * stride + max(kernel - stride, 0)` ("valid"), as in TF."""
    _layer = "conv2d_transpose"

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format="channels_last",
                 activation=None, use_bias=True, kernel_initializer=None, bias_initializer=_ZEROS,
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                 bias_constraint=None, trainable=True, name=None, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, (1, 1), activation, use_bias,
                         kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer,
                         activity_regularizer, kernel_constraint, bias_constraint, trainable, name, **kwargs)

    def build(self, input_shape):
        in_ch = self._in_channels(input_shape)
        kh, kw = self.kernel_size
        self.kernel = self.add_weight("kernel", [kh, kw, self.filters, in_ch], initializer=self.kernel_initializer,
                                      regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        self._make_bias()
        self.built = True

    def call(self, inputs):
        x = _float_input(inputs, self._layer)
        self._in_channels(x.shape)
        fmt, pad = self._fmt, self.padding
        h_axis, w_axis = (1, 2) if fmt == "NHWC" else (2, 3)
        (kh, kw), (sh, sw), filters = self.kernel_size, self.strides, self.filters

        output_padding = getattr(self, "_output_padding", None)      # Keras's Conv2DTranspose sets it

        def out_size(size, k, st, op):      # `size` is an int, or a scalar tensor when it is not known statically
            if op is None:                  # Keras's deconv_output_length
                return size * st if pad == "SAME" else size * st + max(k - st, 0)
            return (size - 1) * st + k - 2 * (k // 2 if pad == "SAME" else 0) + op
        dyn = array_ops.shape(x)
        sizes = [x.shape[i] if x.shape[i] is not None else dyn[i] for i in range(4)]
        ops_ = output_padding or (None, None)
        out_h, out_w = out_size(sizes[h_axis], kh, sh, ops_[0]), out_size(sizes[w_axis], kw, sw, ops_[1])
        batch = dyn[0]
        output_shape = [batch, out_h, out_w, filters] if fmt == "NHWC" else [batch, filters, out_h, out_w]
        out = nn_ops.conv2d_transpose(x, self.kernel, output_shape, strides=self._full(sh, sw), padding=pad,
                                      data_format=fmt)
        static = [x.shape[0], out_h if isinstance(out_h, int) else None, out_w if isinstance(out_w, int) else None]
        static = static + [filters] if fmt == "NHWC" else [static[0], filters] + static[1:]
        out.set_shape(static)
        return _add_bias_activation(self, out, fmt)


def conv1d(inputs, filters, kernel_size, strides=1, padding="valid", data_format="channels_last", dilation_rate=1,
           activation=None, use_bias=True, kernel_initializer=None, bias_initializer=_ZEROS,
           kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
           bias_constraint=None, trainable=True, name=None, reuse=None):
    """Functional form of Conv1D (tf.compat.v1.layers.conv1d)."""
    return Conv1D(filters, kernel_size, strides=strides, padding=padding, data_format=data_format,
                  dilation_rate=dilation_rate, activation=activation, use_bias=use_bias,
                  kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
                  kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
                  activity_regularizer=activity_regularizer, kernel_constraint=kernel_constraint,
                  bias_constraint=bias_constraint, trainable=trainable, name=name, _scope=name, _reuse=reuse)(inputs)


def conv2d(inputs, filters, kernel_size, strides=(1, 1), padding="valid", data_format="channels_last",
           dilation_rate=(1, 1), activation=None, use_bias=True, kernel_initializer=None,
           bias_initializer=_ZEROS, kernel_regularizer=None, bias_regularizer=None,
           activity_regularizer=None, kernel_constraint=None, bias_constraint=None, trainable=True, name=None,
           reuse=None):
    """Functional form of Conv2D (tf.compat.v1.layers.conv2d)."""
    return Conv2D(filters, kernel_size, strides=strides, padding=padding, data_format=data_format,
                  dilation_rate=dilation_rate, activation=activation, use_bias=use_bias,
                  kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
                  kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
                  activity_regularizer=activity_regularizer, kernel_constraint=kernel_constraint,
                  bias_constraint=bias_constraint, trainable=trainable, name=name, _scope=name, _reuse=reuse)(inputs)


def conv2d_transpose(inputs, filters, kernel_size, strides=(1, 1), padding="valid", data_format="channels_last",
                     activation=None, use_bias=True, kernel_initializer=None, bias_initializer=_ZEROS,
                     kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                     bias_constraint=None, trainable=True, name=None, reuse=None):
    """Functional form of Conv2DTranspose (tf.compat.v1.layers.conv2d_transpose)."""
    return Conv2DTranspose(filters, kernel_size, strides=strides, padding=padding, data_format=data_format,
                           activation=activation, use_bias=use_bias, kernel_initializer=kernel_initializer,
                           bias_initializer=bias_initializer, kernel_regularizer=kernel_regularizer,
                           bias_regularizer=bias_regularizer, activity_regularizer=activity_regularizer,
                           kernel_constraint=kernel_constraint, bias_constraint=bias_constraint, trainable=trainable,
                           name=name, _scope=name, _reuse=reuse)(inputs)


class Conv3D(_Conv):
    """3-D convolution layer (tf.compat.v1.layers.Conv3D): `<scope>/kernel` [kd, kh, kw, in, filters]
    and `<scope>/bias` [filters]; inputs [batch, depth, height, width, channels] ("channels_last")
    or channels first."""
    _rank = 3
    _layer = "conv3d"

    def __init__(self, filters, kernel_size, strides=(1, 1, 1), padding="valid", data_format="channels_last",
                 dilation_rate=(1, 1, 1), activation=None, use_bias=True, kernel_initializer=None,
                 bias_initializer=_ZEROS, kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, trainable=True, name=None, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate, activation, use_bias,
                         kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer,
                         activity_regularizer, kernel_constraint, bias_constraint, trainable, name, **kwargs)

    def build(self, input_shape):
        in_ch = self._in_channels(input_shape)
        self.kernel = self.add_weight("kernel", [*self.kernel_size, in_ch, self.filters],
                                      initializer=self.kernel_initializer, regularizer=self.kernel_regularizer,
                                      constraint=self.kernel_constraint)
        self._make_bias()
        self.built = True

    def call(self, inputs):
        x = _float_input(inputs, self._layer)
        self._in_channels(x.shape)
        fmt3 = "NDHWC" if self._fmt == "NHWC" else "NCDHW"
        out = nn_conv3d_ops.conv3d(x, self.kernel, strides=list(self.strides), padding=self.padding,
                                   data_format=fmt3, dilations=list(self.dilation_rate))
        return _add_bias_activation(self, out, self._fmt)


class Conv3DTranspose(_Conv):
    """Transposed 3-D convolution layer (tf.compat.v1.layers.Conv3DTranspose): `<scope>/kernel`
    [kd, kh, kw, filters, in_channels] and `<scope>/bias` [filters]; each spatial size becomes
    `size * stride` ("same") or `size * stride + max(kernel - stride, 0)` ("valid"), as Keras's
    deconv_output_length."""
    _rank = 3
    _layer = "conv3d_transpose"

    def __init__(self, filters, kernel_size, strides=(1, 1, 1), padding="valid", data_format="channels_last",
                 activation=None, use_bias=True, kernel_initializer=None, bias_initializer=_ZEROS,
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                 bias_constraint=None, trainable=True, name=None, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, (1, 1, 1), activation, use_bias,
                         kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer,
                         activity_regularizer, kernel_constraint, bias_constraint, trainable, name, **kwargs)

    def build(self, input_shape):
        in_ch = self._in_channels(input_shape)
        self.kernel = self.add_weight("kernel", [*self.kernel_size, self.filters, in_ch],
                                      initializer=self.kernel_initializer, regularizer=self.kernel_regularizer,
                                      constraint=self.kernel_constraint)
        self._make_bias()
        self.built = True

    def call(self, inputs):
        x = _float_input(inputs, self._layer)
        self._in_channels(x.shape)
        channels_last = self._fmt == "NHWC"
        axes = (1, 2, 3) if channels_last else (2, 3, 4)
        dyn = array_ops.shape(x)
        outs = []
        for a, k, st in zip(axes, self.kernel_size, self.strides):
            size = x.shape[a] if x.shape[a] is not None else dyn[a]
            outs.append(size * st if self.padding == "SAME" else size * st + max(k - st, 0))
        batch = dyn[0]
        output_shape = [batch, *outs, self.filters] if channels_last else [batch, self.filters, *outs]
        out = nn_conv3d_ops.conv3d_transpose(x, self.kernel, output_shape, strides=list(self.strides),
                                             padding=self.padding, data_format="NDHWC" if channels_last else "NCDHW")
        static = [o if isinstance(o, int) else None for o in outs]
        static = [x.shape[0], *static, self.filters] if channels_last else [x.shape[0], self.filters, *static]
        out.set_shape(static)
        return _add_bias_activation(self, out, self._fmt)


def conv3d(inputs, filters, kernel_size, strides=(1, 1, 1), padding="valid", data_format="channels_last",
           dilation_rate=(1, 1, 1), activation=None, use_bias=True, kernel_initializer=None,
           bias_initializer=_ZEROS, kernel_regularizer=None, bias_regularizer=None,
           activity_regularizer=None, kernel_constraint=None, bias_constraint=None, trainable=True, name=None,
           reuse=None):
    """Functional form of Conv3D (tf.compat.v1.layers.conv3d)."""
    return Conv3D(filters, kernel_size, strides=strides, padding=padding, data_format=data_format,
                  dilation_rate=dilation_rate, activation=activation, use_bias=use_bias,
                  kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
                  kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
                  activity_regularizer=activity_regularizer, kernel_constraint=kernel_constraint,
                  bias_constraint=bias_constraint, trainable=trainable, name=name, _scope=name, _reuse=reuse)(inputs)


def conv3d_transpose(inputs, filters, kernel_size, strides=(1, 1, 1), padding="valid", data_format="channels_last",
                     activation=None, use_bias=True, kernel_initializer=None, bias_initializer=_ZEROS,
                     kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                     bias_constraint=None, trainable=True, name=None, reuse=None):
    """Functional form of Conv3DTranspose (tf.compat.v1.layers.conv3d_transpose)."""
    return Conv3DTranspose(filters, kernel_size, strides=strides, padding=padding, data_format=data_format,
                           activation=activation, use_bias=use_bias, kernel_initializer=kernel_initializer,
                           bias_initializer=bias_initializer, kernel_regularizer=kernel_regularizer,
                           bias_regularizer=bias_regularizer, activity_regularizer=activity_regularizer,
                           kernel_constraint=kernel_constraint, bias_constraint=bias_constraint, trainable=trainable,
                           name=name, _scope=name, _reuse=reuse)(inputs)


class _SeparableConv(_Conv):
    """What SeparableConv1D and SeparableConv2D share: `<scope>/depthwise_kernel` [*kernel_size, in,
    depth_multiplier], `<scope>/pointwise_kernel` [*ones, in * depth_multiplier, filters] and
    `<scope>/bias` [filters], made in that order, as TF's layers make them."""

    def __init__(self, filters, kernel_size, strides, padding, data_format, dilation_rate, depth_multiplier,
                 activation, use_bias, depthwise_initializer, pointwise_initializer, bias_initializer,
                 depthwise_regularizer, pointwise_regularizer, bias_regularizer, activity_regularizer,
                 depthwise_constraint, pointwise_constraint, bias_constraint, trainable, name, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate, activation, use_bias,
                         None, bias_initializer, None, bias_regularizer, activity_regularizer, None,
                         bias_constraint, trainable, name, **kwargs)
        self.depth_multiplier = int(depth_multiplier)
        self.depthwise_initializer, self.pointwise_initializer = depthwise_initializer, pointwise_initializer
        self.depthwise_regularizer, self.pointwise_regularizer = depthwise_regularizer, pointwise_regularizer
        self.depthwise_constraint, self.pointwise_constraint = depthwise_constraint, pointwise_constraint
        self.depthwise_kernel = self.pointwise_kernel = None

    def build(self, input_shape):
        in_ch = self._in_channels(input_shape)
        ks = self.kernel_size if self._rank == 2 else (self.kernel_size,)
        self.depthwise_kernel = self.add_weight("depthwise_kernel", [*ks, in_ch, self.depth_multiplier],
                                                initializer=self.depthwise_initializer,
                                                regularizer=self.depthwise_regularizer,
                                                constraint=self.depthwise_constraint)
        self.pointwise_kernel = self.add_weight("pointwise_kernel",
                                                [1] * self._rank + [in_ch * self.depth_multiplier, self.filters],
                                                initializer=self.pointwise_initializer,
                                                regularizer=self.pointwise_regularizer,
                                                constraint=self.pointwise_constraint)
        self._make_bias()
        self.built = True


class SeparableConv2D(_SeparableConv):
    """Depthwise separable 2-D convolution layer (tf.compat.v1.layers.SeparableConv2D): a depthwise
    convolution then a 1x1 convolution (nn.separable_conv2d), plus the bias."""
    _layer = "separable_conv2d"

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format="channels_last",
                 dilation_rate=(1, 1), depth_multiplier=1, activation=None, use_bias=True, depthwise_initializer=None,
                 pointwise_initializer=None, bias_initializer=_ZEROS, depthwise_regularizer=None,
                 pointwise_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 depthwise_constraint=None, pointwise_constraint=None, bias_constraint=None, trainable=True, name=None,
                 **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate, depth_multiplier,
                         activation, use_bias, depthwise_initializer, pointwise_initializer, bias_initializer,
                         depthwise_regularizer, pointwise_regularizer, bias_regularizer, activity_regularizer,
                         depthwise_constraint, pointwise_constraint, bias_constraint, trainable, name, **kwargs)

    def call(self, inputs):
        x = _float_input(inputs, self._layer)
        self._in_channels(x.shape)
        out = nn_conv_ops.separable_conv2d(x, self.depthwise_kernel, self.pointwise_kernel,
                                           strides=self._full(*self.strides), padding=self.padding,
                                           rate=list(self.dilation_rate), data_format=self._fmt)
        return _add_bias_activation(self, out, self._fmt)


class SeparableConv1D(_SeparableConv):
    """Depthwise separable 1-D convolution layer (tf.compat.v1.layers.SeparableConv1D): as TF, a
    separable 2-D convolution over a height of 1; "causal" padding pads the sequence's start."""
    _rank = 1
    _layer = "separable_conv1d"

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format="channels_last",
                 dilation_rate=1, depth_multiplier=1, activation=None, use_bias=True, depthwise_initializer=None,
                 pointwise_initializer=None, bias_initializer=_ZEROS, depthwise_regularizer=None,
                 pointwise_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 depthwise_constraint=None, pointwise_constraint=None, bias_constraint=None, trainable=True, name=None,
                 **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate, depth_multiplier,
                         activation, use_bias, depthwise_initializer, pointwise_initializer, bias_initializer,
                         depthwise_regularizer, pointwise_regularizer, bias_regularizer, activity_regularizer,
                         depthwise_constraint, pointwise_constraint, bias_constraint, trainable, name, **kwargs)

    def call(self, inputs):
        x = _float_input(inputs, self._layer)
        self._in_channels(x.shape)
        padding = self.padding
        t_axis = 1 if self._fmt == "NHWC" else 2
        if padding == "CAUSAL":
            pads = [[0, 0], [0, 0], [0, 0]]
            pads[t_axis] = [self.dilation_rate * (self.kernel_size - 1), 0]
            x = array_ops.pad(x, pads)
            padding = "VALID"
        # NWC -> N,1,W,C (NHWC); NCW -> N,C,1,W (NCHW), as Keras's SeparableConv1D, which also strides the
        # height-1 axis (depthwise convolution needs equal strides; one row gives one row either way)
        x4 = array_ops.expand_dims(x, t_axis)
        out = nn_conv_ops.separable_conv2d(x4, array_ops.expand_dims(self.depthwise_kernel, 0),
                                           array_ops.expand_dims(self.pointwise_kernel, 0),
                                           strides=self._full(self.strides, self.strides), padding=padding,
                                           rate=[1, self.dilation_rate], data_format=self._fmt)
        out = array_ops.squeeze(out, [t_axis])
        return _add_bias_activation(self, out, self._fmt)


def separable_conv2d(inputs, filters, kernel_size, strides=(1, 1), padding="valid", data_format="channels_last",
                     dilation_rate=(1, 1), depth_multiplier=1, activation=None, use_bias=True,
                     depthwise_initializer=None, pointwise_initializer=None, bias_initializer=_ZEROS,
                     depthwise_regularizer=None, pointwise_regularizer=None, bias_regularizer=None,
                     activity_regularizer=None, depthwise_constraint=None, pointwise_constraint=None,
                     bias_constraint=None, trainable=True, name=None, reuse=None):
    """Functional form of SeparableConv2D (tf.compat.v1.layers.separable_conv2d)."""
    return SeparableConv2D(filters, kernel_size, strides=strides, padding=padding, data_format=data_format,
                           dilation_rate=dilation_rate, depth_multiplier=depth_multiplier, activation=activation,
                           use_bias=use_bias, depthwise_initializer=depthwise_initializer,
                           pointwise_initializer=pointwise_initializer, bias_initializer=bias_initializer,
                           depthwise_regularizer=depthwise_regularizer, pointwise_regularizer=pointwise_regularizer,
                           bias_regularizer=bias_regularizer, activity_regularizer=activity_regularizer,
                           depthwise_constraint=depthwise_constraint, pointwise_constraint=pointwise_constraint,
                           bias_constraint=bias_constraint, trainable=trainable, name=name, _scope=name,
                           _reuse=reuse)(inputs)


def separable_conv1d(inputs, filters, kernel_size, strides=1, padding="valid", data_format="channels_last",
                     dilation_rate=1, depth_multiplier=1, activation=None, use_bias=True, depthwise_initializer=None,
                     pointwise_initializer=None, bias_initializer=_ZEROS, depthwise_regularizer=None,
                     pointwise_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                     depthwise_constraint=None, pointwise_constraint=None, bias_constraint=None, trainable=True,
                     name=None, reuse=None):
    """Functional form of SeparableConv1D (tf.compat.v1.layers.separable_conv1d)."""
    return SeparableConv1D(filters, kernel_size, strides=strides, padding=padding, data_format=data_format,
                           dilation_rate=dilation_rate, depth_multiplier=depth_multiplier, activation=activation,
                           use_bias=use_bias, depthwise_initializer=depthwise_initializer,
                           pointwise_initializer=pointwise_initializer, bias_initializer=bias_initializer,
                           depthwise_regularizer=depthwise_regularizer, pointwise_regularizer=pointwise_regularizer,
                           bias_regularizer=bias_regularizer, activity_regularizer=activity_regularizer,
                           depthwise_constraint=depthwise_constraint, pointwise_constraint=pointwise_constraint,
                           bias_constraint=bias_constraint, trainable=trainable, name=name, _scope=name,
                           _reuse=reuse)(inputs)


# ---------------------------------------------------------------------------------------------
# Pooling
# ---------------------------------------------------------------------------------------------

class _Pooling(Layer):
    """Max or average pooling over 1-D, 2-D or 3-D windows; no variables."""
    _rank = 2
    _max = True

    def __init__(self, pool_size, strides, padding="valid", data_format="channels_last", name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        layer = _snake_case(type(self).__name__)
        tup = _tuple_arg(self._rank)
        self.pool_size = tup(pool_size, "pool_size", layer)
        self.strides = tup(strides, "strides", layer)
        self.padding = _padding(padding, layer)
        self.data_format = data_format
        self._fmt = _data_format(data_format, layer)

    def call(self, inputs):
        layer = _snake_case(type(self).__name__)
        x = _float_input(inputs, layer)
        nd = self._rank + 2
        if x.shape.ndims not in (None, nd):
            raise ValueError(f"Input 0 of layer {layer} is incompatible with the layer: expected ndim={nd}, found "
                             f"ndim={x.shape.ndims}. Full shape received: {x.shape}")
        fmt = self._fmt
        if self._rank == 3:
            fmt3 = "NDHWC" if fmt == "NHWC" else "NCDHW"
            pool3 = nn_conv3d_ops.max_pool3d if self._max else nn_conv3d_ops.avg_pool3d
            return pool3(x, ksize=list(self.pool_size), strides=list(self.strides), padding=self.padding,
                         data_format=fmt3)
        full = (lambda a, b: [1, a, b, 1]) if fmt == "NHWC" else (lambda a, b: [1, 1, a, b])
        pool = nn_ops.max_pool if self._max else nn_ops.avg_pool
        if self._rank == 2:
            return pool(x, ksize=full(*self.pool_size), strides=full(*self.strides), padding=self.padding,
                        data_format=fmt)
        # As Keras's Pooling1D: a width-1 axis after the sequence (NWC -> N,W,1,C; NCW -> N,C,W,1).
        pad_axis = 2 if fmt == "NHWC" else 3
        out = pool(array_ops.expand_dims(x, pad_axis), ksize=full(self.pool_size, 1),
                   strides=full(self.strides, 1), padding=self.padding, data_format=fmt)
        return array_ops.squeeze(out, [pad_axis])


class MaxPooling2D(_Pooling):
    """Max pooling over `pool_size` windows (tf.compat.v1.layers.MaxPooling2D)."""


class AveragePooling2D(_Pooling):
    """Average pooling over `pool_size` windows (tf.compat.v1.layers.AveragePooling2D)."""
    _max = False


class MaxPooling1D(_Pooling):
    """Max pooling of [batch, steps, channels] over `pool_size` steps (tf.compat.v1.layers.MaxPooling1D)."""
    _rank = 1


class AveragePooling1D(_Pooling):
    """Average pooling of [batch, steps, channels] (tf.compat.v1.layers.AveragePooling1D)."""
    _rank = 1
    _max = False


def max_pooling2d(inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None):
    """Max pooling over `pool_size` windows (tf.compat.v1.layers.max_pooling2d)."""
    return MaxPooling2D(pool_size, strides, padding=padding, data_format=data_format, name=name, _scope=name)(inputs)


def average_pooling2d(inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None):
    """Average pooling over `pool_size` windows (tf.compat.v1.layers.average_pooling2d)."""
    return AveragePooling2D(pool_size, strides, padding=padding, data_format=data_format, name=name,
                            _scope=name)(inputs)


def max_pooling1d(inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None):
    """Max pooling over `pool_size` steps (tf.compat.v1.layers.max_pooling1d)."""
    return MaxPooling1D(pool_size, strides, padding=padding, data_format=data_format, name=name, _scope=name)(inputs)


def average_pooling1d(inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None):
    """Average pooling over `pool_size` steps (tf.compat.v1.layers.average_pooling1d)."""
    return AveragePooling1D(pool_size, strides, padding=padding, data_format=data_format, name=name,
                            _scope=name)(inputs)


class MaxPooling3D(_Pooling):
    """Max pooling over `pool_size` (depth, height, width) windows (tf.compat.v1.layers.MaxPooling3D)."""
    _rank = 3


class AveragePooling3D(_Pooling):
    """Average pooling over `pool_size` (depth, height, width) windows
    (tf.compat.v1.layers.AveragePooling3D)."""
    _rank = 3
    _max = False


def max_pooling3d(inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None):
    """Max pooling over `pool_size` windows (tf.compat.v1.layers.max_pooling3d)."""
    return MaxPooling3D(pool_size, strides, padding=padding, data_format=data_format, name=name, _scope=name)(inputs)


def average_pooling3d(inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None):
    """Average pooling over `pool_size` windows (tf.compat.v1.layers.average_pooling3d)."""
    return AveragePooling3D(pool_size, strides, padding=padding, data_format=data_format, name=name,
                            _scope=name)(inputs)


# ---------------------------------------------------------------------------------------------
# Flatten, Dropout
# ---------------------------------------------------------------------------------------------

class Flatten(Layer):
    """Reshapes to [batch, -1], keeping the batch axis (tf.compat.v1.layers.Flatten)."""

    def __init__(self, data_format="channels_last", name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.data_format = data_format

    def call(self, inputs):
        x = convert_to_tensor(inputs)
        ndims = x.shape.ndims
        if ndims is not None and ndims <= 1:
            return array_ops.expand_dims(x, 1)
        if self.data_format == "channels_first" and ndims is not None and ndims > 2:
            # Channels last first, so the flattened order matches channels_last models.
            x = array_ops.transpose(x, [0] + list(range(2, ndims)) + [1])
        rest = x.shape[1:]
        if rest.is_fully_defined():
            return array_ops.reshape(x, [-1, int(np.prod(rest.as_list(), dtype=np.int64))])
        batch = array_ops.strided_slice(array_ops.shape(x), [0], [1])
        return array_ops.reshape(x, array_ops.concat([batch, convert_to_tensor([-1], dtype=batch.dtype)], 0))


def flatten(inputs, name=None, data_format="channels_last"):
    """Reshapes to [batch, -1], keeping the batch axis (tf.compat.v1.layers.flatten)."""
    return Flatten(data_format=data_format, name=name, _scope=name)(inputs)


class Dropout(Layer):
    """Zeroes each element with probability `rate` and scales the rest by 1 / (1 - rate) when
    called with `training`; the identity otherwise (tf.compat.v1.layers.Dropout). A `training`
    tensor selects with a tf.cond, as TF's does: the mask is drawn only in runs that train."""

    def __init__(self, rate=0.5, noise_shape=None, seed=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if isinstance(rate, numbers.Real) and not 0 <= rate < 1:
            raise ValueError(f"Layer dropout: rate must be in [0, 1), got {rate}")
        self.rate, self.noise_shape, self.seed = rate, noise_shape, seed

    def call(self, inputs, training=False):
        x = _float_input(inputs, "dropout")
        static = _static_bool(training)
        if static is False:
            return identity(x)
        if static is True:
            return nn_ops.dropout(x, noise_shape=self.noise_shape, seed=self.seed, rate=self.rate)
        # A tensor `training`: TF's smart_cond, a tf.cond whose true branch draws the mask, so that a
        # run not in training draws nothing and the op's random stream stays where TF's does.
        return control_flow.cond(
            _training_tensor(training),
            lambda: nn_ops.dropout(x, noise_shape=self.noise_shape, seed=self.seed, rate=self.rate),
            lambda: identity(x))


def dropout(inputs, rate=0.5, noise_shape=None, seed=None, training=False, name=None):
    """Functional form of Dropout (tf.compat.v1.layers.dropout)."""
    return Dropout(rate=rate, noise_shape=noise_shape, seed=seed, name=name, _scope=name)(inputs, training=training)


# ---------------------------------------------------------------------------------------------
# Batch normalization
# ---------------------------------------------------------------------------------------------

class BatchNormalization(Layer):
    """Batch normalization (tf.compat.v1.layers.BatchNormalization).

    Normalizes with the batch's mean and variance when called with `training`, with the moving
    averages otherwise. Variables `<scope>/gamma`, `beta`, `moving_mean` and `moving_variance` (the
    last two not trainable). When training, the ops updating the moving averages
    (moving = moving - (moving - batch) * (1 - momentum)) are added to the UPDATE_OPS collection
    and to `updates`: run them with the train op, as in TF 1.x. The moving variance tracks the
    batch variance as TF 1.x's layer does: the unbiased one (n / (n - 1)) where TF would take its
    fused kernel (`fused` not False, a 4-D input normalized over axis 1 or 3, or 5-D over 1 or 4,
    float16/float32), the biased one elsewhere. The computation itself is the same either way, but
    for second derivatives: the fused kernel's are exact, nn.moments' (the non-fused path's) drop
    the batch mean's dependence inside the variance, as in TF. Renorm and virtual batches are not
    supported.
    """

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True, beta_initializer=_ZEROS,
                 gamma_initializer=_ONES, moving_mean_initializer=_ZEROS, moving_variance_initializer=_ONES,
                 beta_regularizer=None, gamma_regularizer=None, beta_constraint=None, gamma_constraint=None,
                 renorm=False, renorm_clipping=None, renorm_momentum=0.99, fused=None, trainable=True,
                 virtual_batch_size=None, adjustment=None, name=None, **kwargs):
        if renorm or virtual_batch_size is not None or adjustment is not None:
            raise NotImplementedError("batch_normalization: renorm, virtual_batch_size and adjustment are not "
                                      "supported")
        super().__init__(trainable=trainable, name=name, **kwargs)
        self.axis = axis
        self.momentum, self.epsilon, self.center, self.scale = momentum, epsilon, center, scale
        self.beta_initializer, self.gamma_initializer = beta_initializer, gamma_initializer
        self.moving_mean_initializer = moving_mean_initializer
        self.moving_variance_initializer = moving_variance_initializer
        self.beta_regularizer, self.gamma_regularizer = beta_regularizer, gamma_regularizer
        self.beta_constraint, self.gamma_constraint = beta_constraint, gamma_constraint
        self._beta_first = False
        self.fused = fused
        self.gamma = self.beta = self.moving_mean = self.moving_variance = None

    def build(self, input_shape):
        ndims = input_shape.ndims
        if ndims is None:
            raise ValueError(f"Input has undefined rank: {input_shape}")
        axes = set()
        for a in ([self.axis] if isinstance(self.axis, numbers.Integral) else list(self.axis)):
            if not -ndims <= a < ndims:
                raise ValueError(f"Invalid axis {a} for batch_normalization of an input of rank {ndims}")
            axes.add(a % ndims)
        self._axes = sorted(axes)
        param_shape = []
        for a in self._axes:
            if input_shape[a] is None:
                raise ValueError(f"Axis {a} of input tensor should have a defined dimension but the layer received "
                                 f"an input with shape {input_shape}.")
            param_shape.append(input_shape[a])
        self._ndims = ndims
        self._param_shape = param_shape
        # TF 1.x's layer takes its fused kernel where that kernel applies (one channel axis 1 or 3 of
        # a 4-D input, 1 or 4 of a 5-D one, float16/float32), unless fused=False, and silently falls
        # back elsewhere; that kernel's batch variance, which the moving variance then tracks, is the
        # unbiased one.
        channel_ok = len(self._axes) == 1 and (
            (ndims == 4 and self._axes[0] in (1, 3)) or (ndims == 5 and self._axes[0] in (1, 4)))
        self._fused_stats = (self.fused is not False and channel_ok
                             and self._dtype in (dtypes.float16, dtypes.float32))
        # float16 statistics lose too much: the variables are float32, as in TF.
        pdtype = dtypes.float32 if self._dtype is dtypes.float16 else self._dtype
        self._pdtype = pdtype
        def gamma():
            return self.add_weight("gamma", param_shape, dtype=pdtype, initializer=self.gamma_initializer,
                                   regularizer=self.gamma_regularizer,
                                   constraint=self.gamma_constraint) if self.scale else None

        def beta():
            return self.add_weight("beta", param_shape, dtype=pdtype, initializer=self.beta_initializer,
                                   regularizer=self.beta_regularizer,
                                   constraint=self.beta_constraint) if self.center else None
        if self._beta_first:         # contrib.layers.batch_norm's own paths create beta first
            self.beta, self.gamma = beta(), gamma()
        else:
            self.gamma, self.beta = gamma(), beta()
        self.moving_mean = self.add_weight("moving_mean", param_shape, dtype=pdtype,
                                           initializer=self.moving_mean_initializer, trainable=False)
        self.moving_variance = self.add_weight("moving_variance", param_shape, dtype=pdtype,
                                               initializer=self.moving_variance_initializer, trainable=False)
        self.built = True

    def call(self, inputs, training=False):
        x = _float_input(inputs, "batch_normalization")
        ndims, axes, pdtype = self._ndims, self._axes, self._pdtype
        if x.shape.ndims != ndims:
            raise ValueError(f"Input 0 of layer {self.name} has rank {x.shape.ndims}, built for rank {ndims} "
                             f"('{x.name}')")
        reduction_axes = [i for i in range(ndims) if i not in axes]
        in_dtype = x.dtype
        xc = math_ops.cast(x, pdtype)
        if len(axes) == 1 and axes[0] == ndims - 1:
            def bcast(v):
                return v
        else:
            bshape = [1] * ndims
            for a, d in zip(axes, self._param_shape):
                bshape[a] = d

            def bcast(v):
                return None if v is None else array_ops.reshape(v, bshape)

        moving_mean, moving_variance = self.moving_mean, self.moving_variance
        static = _static_bool(training)
        if static is False:
            mean, variance = moving_mean.value(), moving_variance.value()
        else:
            # Where TF takes its fused kernel, its second derivatives too (fused_batch_moments).
            batch_mean, batch_var = (nn_misc_ops.fused_batch_moments(xc, reduction_axes) if self._fused_stats
                                     else nn_ops.moments(xc, reduction_axes))
            if static is True:
                mean, variance = batch_mean, batch_var
                decay = convert_to_tensor(1.0 - self.momentum, dtype=pdtype)
            else:
                t = _training_tensor(training)
                mean = math_ops.where(t, batch_mean, moving_mean.value())
                variance = math_ops.where(t, batch_var, moving_variance.value())
                # Not training: a zero step, so the update ops are harmless to run.
                decay = math_ops.where(t, convert_to_tensor(1.0 - self.momentum, dtype=pdtype),
                                       convert_to_tensor(0.0, dtype=pdtype))
            g = get_default_graph()
            updates = []
            track_var = batch_var
            if self._fused_stats:
                n = math_ops.divide(math_ops.cast(array_ops.size(xc), pdtype),
                                    math_ops.cast(array_ops.size(batch_var), pdtype))
                one = convert_to_tensor(1.0, dtype=pdtype)
                track_var = math_ops.multiply(batch_var, math_ops.where(
                    math_ops.greater(n, one), math_ops.divide(n, math_ops.maximum(math_ops.subtract(n, one), one)),
                    one))
            for var, value, scope in ((moving_mean, batch_mean, "AssignMovingAvg"),
                                      (moving_variance, track_var, "AssignMovingAvg_1")):
                with g.name_scope(scope):
                    delta = math_ops.multiply(math_ops.subtract(var.value(), value), decay)
                    updates.append(assign_sub(var, delta))
            self.add_update(updates)
        out = nn_ops.batch_normalization(xc, bcast(mean), bcast(variance),
                                         bcast(self.beta.value()) if self.beta is not None else None,
                                         bcast(self.gamma.value()) if self.gamma is not None else None, self.epsilon)
        return math_ops.cast(out, in_dtype)


def batch_normalization(inputs, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                        beta_initializer=_ZEROS, gamma_initializer=_ONES,
                        moving_mean_initializer=_ZEROS,
                        moving_variance_initializer=_ONES, beta_regularizer=None,
                        gamma_regularizer=None, beta_constraint=None, gamma_constraint=None, training=False,
                        trainable=True, name=None, reuse=None, renorm=False, renorm_clipping=None,
                        renorm_momentum=0.99, fused=None, virtual_batch_size=None, adjustment=None):
    """Functional form of BatchNormalization (tf.compat.v1.layers.batch_normalization): run the
    ops in UPDATE_OPS with the train op to update the moving averages."""
    layer = BatchNormalization(axis=axis, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
                               beta_initializer=beta_initializer, gamma_initializer=gamma_initializer,
                               moving_mean_initializer=moving_mean_initializer,
                               moving_variance_initializer=moving_variance_initializer,
                               beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer,
                               beta_constraint=beta_constraint, gamma_constraint=gamma_constraint, renorm=renorm,
                               renorm_clipping=renorm_clipping, renorm_momentum=renorm_momentum, fused=fused,
                               trainable=trainable, virtual_batch_size=virtual_batch_size, adjustment=adjustment,
                               name=name, _scope=name, _reuse=reuse)
    return layer(inputs, training=training)
