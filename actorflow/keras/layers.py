"""af.keras.layers: tf.keras.layers of TF 1.x, called on graph tensors.

Dense, the convolutions, pooling, Flatten, Dropout and BatchNormalization are the af.layers
classes with Keras's arguments, defaults and names (so `Dense(64, activation="relu")(x)` on a
placeholder makes the variables `dense/kernel` and `dense/bias`); the rest are written here on
graph ops. The recurrent layers and the wrappers are in keras/recurrent.py and exported here.
Dropout, BatchNormalization and the recurrent layers take `training` from the call, else from
`keras.backend.learning_phase()` (a bool placeholder, default False, that `Model.fit` feeds True).
"""
from __future__ import annotations

import numbers

import numpy as np

from actorflow import feature_column as _fc
from actorflow import layers as _tfl
from actorflow.graph import dtypes
from actorflow.graph.graph import GraphKeys, convert_to_tensor, get_default_graph
from actorflow.graph.ops import array_ops, math_ops, nn_ops
from actorflow.graph.ops.constant import constant
from actorflow.graph.ops.image_ops import resize_bilinear
from actorflow.graph.ops.sort_ops import cumsum, repeat
from actorflow.graph.variable_scope import variable_scope
from actorflow.keras import backend as K
from actorflow.keras.engine import Input, InputLayer, InputSpec, Layer, _act, _con, _init, _reg

__all__ = ["Layer", "Input", "InputLayer", "InputSpec", "LayerNormalization", "AlphaDropout", "serialize", "Attention",
           "AdditiveAttention", "DenseFeatures", "Dense", "Conv1D", "Conv2D", "Conv2DTranspose", "Convolution1D",
           "Convolution2D", "MaxPooling1D", "MaxPooling2D", "AveragePooling1D", "AveragePooling2D", "MaxPool1D",
           "MaxPool2D", "AvgPool1D", "AvgPool2D", "GlobalAveragePooling1D", "GlobalAveragePooling2D",
           "GlobalMaxPooling1D", "GlobalMaxPooling2D", "GlobalAvgPool1D", "GlobalAvgPool2D", "GlobalMaxPool1D",
           "GlobalMaxPool2D", "Flatten", "Dropout", "BatchNormalization", "Embedding", "Masking", "Activation",
           "Reshape",
           "Permute", "RepeatVector", "Lambda", "Concatenate", "concatenate", "Add", "add", "Multiply", "multiply",
           "Subtract", "subtract", "Average", "average", "Maximum", "maximum", "Minimum", "minimum",
           "ZeroPadding1D", "ZeroPadding2D", "UpSampling1D", "UpSampling2D", "LeakyReLU", "ReLU", "ELU", "Softmax",
           "SimpleRNN", "LSTM", "GRU", "Bidirectional", "TimeDistributed", "Wrapper", "RNN", "SimpleRNNCell",
           "LSTMCell", "GRUCell", "StackedRNNCells", "AbstractRNNCell", "ConvLSTM2D", "Conv3D", "SeparableConv1D", "SeparableConv2D", "SeparableConvolution2D",
           "DepthwiseConv2D", "Cropping1D", "Cropping2D", "SpatialDropout1D", "SpatialDropout2D", "GaussianNoise",
           "GaussianDropout", "ActivityRegularization", "Dot", "dot", "PReLU", "ThresholdedReLU",
           "MaxPooling3D", "AveragePooling3D", "MaxPool3D", "AvgPool3D", "GlobalAveragePooling3D",
           "GlobalMaxPooling3D", "GlobalAvgPool3D", "GlobalMaxPool3D", "ZeroPadding3D", "Cropping3D", "UpSampling3D",
           "SpatialDropout3D", "Conv3DTranspose", "Convolution2DTranspose", "Convolution3DTranspose",
           "Convolution3D", "SeparableConvolution1D"]

_KERNEL_KEYS = ("activation", "use_bias", "kernel_initializer", "bias_initializer", "kernel_regularizer",
                "bias_regularizer", "activity_regularizer", "kernel_constraint", "bias_constraint")


def _kernel_kwargs(activation, use_bias, kernel_initializer, bias_initializer, kernel_regularizer,
                   bias_regularizer, activity_regularizer, kernel_constraint, bias_constraint) -> dict:
    return dict(activation=_act(activation), use_bias=bool(use_bias), kernel_initializer=_init(kernel_initializer),
                bias_initializer=_init(bias_initializer), kernel_regularizer=_reg(kernel_regularizer),
                bias_regularizer=_reg(bias_regularizer), activity_regularizer=_reg(activity_regularizer),
                kernel_constraint=_con(kernel_constraint), bias_constraint=_con(bias_constraint))


def _fmt(data_format):
    return data_format or K.image_data_format()


# ---------------------------------------------------------------------------------------------
# The af.layers-based layers
# ---------------------------------------------------------------------------------------------

class Dense(Layer, _tfl.Dense):
    """activation(inputs @ kernel + bias) (tf.keras.layers.Dense); `kernel` [in, units], `bias` [units]."""
    _masking = True
    _config_keys = ("units",) + _KERNEL_KEYS

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, name=None, **kwargs):
        name, kwargs = self._init_keras(name, kwargs)
        _tfl.Dense.__init__(self, units, name=name, **kwargs, **_kernel_kwargs(
            activation, use_bias, kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer,
            activity_regularizer, kernel_constraint, bias_constraint))
        self._keras_post()


_CONV_KEYS = ("filters", "kernel_size", "strides", "padding", "data_format", "dilation_rate") + _KERNEL_KEYS


class Conv2D(Layer, _tfl.Conv2D):
    """2-D convolution (tf.keras.layers.Conv2D); `kernel` [kh, kw, in, filters]. data_format
    defaults to `backend.image_data_format()`."""
    _config_keys = _CONV_KEYS

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None, dilation_rate=(1, 1),
                 activation=None, use_bias=True, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                 bias_constraint=None, name=None, **kwargs):
        name, kwargs = self._init_keras(name, kwargs)
        _tfl.Conv2D.__init__(self, filters, kernel_size, strides=strides, padding=padding,
                             data_format=_fmt(data_format), dilation_rate=dilation_rate, name=name, **kwargs,
                             **_kernel_kwargs(activation, use_bias, kernel_initializer, bias_initializer,
                                              kernel_regularizer, bias_regularizer, activity_regularizer,
                                              kernel_constraint, bias_constraint))
        self._keras_post()


class Conv1D(Layer, _tfl.Conv1D):
    """1-D convolution over [batch, steps, channels] (tf.keras.layers.Conv1D); padding "valid",
    "same" or "causal"."""
    _config_keys = _CONV_KEYS

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format="channels_last", dilation_rate=1,
                 activation=None, use_bias=True, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                 bias_constraint=None, name=None, **kwargs):
        name, kwargs = self._init_keras(name, kwargs)
        _tfl.Conv1D.__init__(self, filters, kernel_size, strides=strides, padding=padding,
                             data_format=data_format, dilation_rate=dilation_rate, name=name, **kwargs,
                             **_kernel_kwargs(activation, use_bias, kernel_initializer, bias_initializer,
                                              kernel_regularizer, bias_regularizer, activity_regularizer,
                                              kernel_constraint, bias_constraint))
        self._keras_post()


def _init_transpose(layer, base, rank, filters, kernel_size, strides, padding, data_format, dilation_rate, name,
                    kwargs, *kernel_args):
    """The af.layers part of a Keras transposed convolution's construction (dilation 1 only)."""
    if tuple(np.broadcast_to(dilation_rate, rank)) != (1,) * rank:
        raise NotImplementedError(f"{base.__name__}: dilation_rate other than 1 is not supported")
    name, kwargs = layer._init_keras(name, kwargs)
    base.__init__(layer, filters, kernel_size, strides=strides, padding=padding, data_format=_fmt(data_format),
                  name=name, **kwargs, **_kernel_kwargs(*kernel_args))


class Conv2DTranspose(Layer, _tfl.Conv2DTranspose):
    """Transposed 2-D convolution (tf.keras.layers.Conv2DTranspose); `kernel` [kh, kw, filters, in].
    `output_padding` (per axis, less than the stride) sets the output size to (in - 1) * stride +
    kernel - 2 * pad + output_padding. Dilation other than 1 is not supported."""
    _config_keys = ("filters", "kernel_size", "strides", "padding", "output_padding", "data_format") + _KERNEL_KEYS

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", output_padding=None, data_format=None,
                 dilation_rate=(1, 1), activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, name=None, **kwargs):
        _init_transpose(self, _tfl.Conv2DTranspose, 2, filters, kernel_size, strides, padding, data_format,
                        dilation_rate, name, kwargs, activation, use_bias, kernel_initializer, bias_initializer,
                        kernel_regularizer, bias_regularizer, activity_regularizer, kernel_constraint, bias_constraint)
        self.output_padding = None
        if output_padding is not None:
            op = tuple(int(v) for v in np.broadcast_to(output_padding, 2))
            for p, st in zip(op, self.strides):
                if p >= st:
                    raise ValueError(f"Stride {tuple(self.strides)} must be greater than output padding {op}. "
                                     f"Received strides={tuple(self.strides)}, output_padding={op}.")
            self.output_padding = self._output_padding = op
        self._keras_post()


class Conv3DTranspose(Layer, _tfl.Conv3DTranspose):
    """Transposed 3-D convolution (tf.keras.layers.Conv3DTranspose); `kernel` [kd, kh, kw, filters, in].
    `output_padding` and dilation other than 1 are not supported."""
    _config_keys = ("filters", "kernel_size", "strides", "padding", "data_format") + _KERNEL_KEYS

    def __init__(self, filters, kernel_size, strides=(1, 1, 1), padding="valid", output_padding=None,
                 data_format=None, dilation_rate=(1, 1, 1), activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros", kernel_regularizer=None,
                 bias_regularizer=None, activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
                 name=None, **kwargs):
        if output_padding is not None:
            raise NotImplementedError("Conv3DTranspose: output_padding is not supported")
        _init_transpose(self, _tfl.Conv3DTranspose, 3, filters, kernel_size, strides, padding, data_format,
                        dilation_rate, name, kwargs, activation, use_bias, kernel_initializer, bias_initializer,
                        kernel_regularizer, bias_regularizer, activity_regularizer, kernel_constraint, bias_constraint)
        self._keras_post()


Convolution1D, Convolution2D = Conv1D, Conv2D
Convolution2DTranspose, Convolution3DTranspose = Conv2DTranspose, Conv3DTranspose


def _pool_class(base, rank, default_pool, default_format):
    class Pool(Layer, base):
        _config_keys = ("pool_size", "strides", "padding", "data_format")

        def __init__(self, pool_size=default_pool, strides=None, padding="valid", data_format=default_format,
                     name=None, **kwargs):
            name, kwargs = self._init_keras(name, kwargs)
            base.__init__(self, pool_size, pool_size if strides is None else strides, padding=padding,
                          data_format=_fmt(data_format), name=name, **kwargs)
            self._keras_post()

    Pool.__name__ = Pool.__qualname__ = base.__name__
    Pool.__doc__ = (f"{'Max' if base._max else 'Average'} pooling over {rank}-D windows (tf.keras.layers."
                    f"{base.__name__}); `strides` default to `pool_size`.")
    return Pool


MaxPooling2D = _pool_class(_tfl.MaxPooling2D, 2, (2, 2), None)
AveragePooling2D = _pool_class(_tfl.AveragePooling2D, 2, (2, 2), None)
MaxPooling1D = _pool_class(_tfl.MaxPooling1D, 1, 2, "channels_last")
AveragePooling1D = _pool_class(_tfl.AveragePooling1D, 1, 2, "channels_last")
MaxPooling3D = _pool_class(_tfl.MaxPooling3D, 3, (2, 2, 2), None)
AveragePooling3D = _pool_class(_tfl.AveragePooling3D, 3, (2, 2, 2), None)
MaxPool1D, MaxPool2D, AvgPool1D, AvgPool2D = MaxPooling1D, MaxPooling2D, AveragePooling1D, AveragePooling2D
MaxPool3D, AvgPool3D = MaxPooling3D, AveragePooling3D


class Flatten(Layer, _tfl.Flatten):
    """Reshapes to [batch, -1] (tf.keras.layers.Flatten)."""
    _config_keys = ("data_format",)

    def __init__(self, data_format=None, name=None, **kwargs):
        name, kwargs = self._init_keras(name, kwargs)
        _tfl.Flatten.__init__(self, data_format=_fmt(data_format), name=name, **kwargs)
        self._keras_post()


class Dropout(Layer, _tfl.Dropout):
    """Drops `rate` of the inputs in the training phase (tf.keras.layers.Dropout)."""
    _masking = True
    _config_keys = ("rate", "noise_shape", "seed")

    def __init__(self, rate, noise_shape=None, seed=None, name=None, **kwargs):
        name, kwargs = self._init_keras(name, kwargs)
        _tfl.Dropout.__init__(self, rate=rate, noise_shape=noise_shape, seed=seed, name=name, **kwargs)
        self._keras_post()


class BatchNormalization(Layer, _tfl.BatchNormalization):
    """Batch normalization (tf.keras.layers.BatchNormalization): batch statistics in the training
    phase, the moving averages otherwise; the ops updating the moving averages are in `updates`
    and UPDATE_OPS (a compiled model runs them with each training step)."""
    _masking = True
    _config_keys = ("axis", "momentum", "epsilon", "center", "scale", "beta_initializer", "gamma_initializer",
                    "moving_mean_initializer", "moving_variance_initializer", "beta_regularizer",
                    "gamma_regularizer", "beta_constraint", "gamma_constraint")

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True, beta_initializer="zeros",
                 gamma_initializer="ones", moving_mean_initializer="zeros", moving_variance_initializer="ones",
                 beta_regularizer=None, gamma_regularizer=None, beta_constraint=None, gamma_constraint=None,
                 name=None, **kwargs):
        name, kwargs = self._init_keras(name, kwargs)
        _tfl.BatchNormalization.__init__(
            self, axis=axis, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
            beta_initializer=_init(beta_initializer), gamma_initializer=_init(gamma_initializer),
            moving_mean_initializer=_init(moving_mean_initializer),
            moving_variance_initializer=_init(moving_variance_initializer), beta_regularizer=_reg(beta_regularizer),
            gamma_regularizer=_reg(gamma_regularizer), beta_constraint=_con(beta_constraint),
            gamma_constraint=_con(gamma_constraint), name=name, **kwargs)
        self._keras_post()


# ---------------------------------------------------------------------------------------------
# Layers on graph ops
# ---------------------------------------------------------------------------------------------

def _float(x, layer):
    return _tfl._float_input(x, layer.name)


class _GlobalPooling(Layer):
    _config_keys = ("data_format",)
    _rank = 2
    _max = False

    def __init__(self, data_format=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.data_format = _fmt(data_format) if self._rank == 2 else (data_format or "channels_last")

    def call(self, inputs, mask=None):
        x = _float(inputs, self)
        nd = self._rank + 2
        if x.shape.ndims != nd:
            raise ValueError(f"Input 0 of layer {self.name} is incompatible with the layer: expected ndim={nd}, "
                             f"found ndim={x.shape.ndims}. Full shape received: {x.shape}")
        axes = list(range(1, 1 + self._rank)) if self.data_format == "channels_last" else \
            list(range(2, 2 + self._rank))
        if mask is not None and self._rank == 1 and not self._max:
            # The mean over the unmasked steps (tf.keras's GlobalAveragePooling1D with a mask).
            m = array_ops.expand_dims(math_ops.cast(mask, x.dtype), 2 if self.data_format == "channels_last" else 1)
            return math_ops.divide(math_ops.reduce_sum(math_ops.multiply(x, m), axes),
                                   math_ops.reduce_sum(m, axes))
        return (math_ops.reduce_max if self._max else math_ops.reduce_mean)(x, axes)

    def compute_mask(self, inputs, mask=None):
        return None


class GlobalAveragePooling1D(_GlobalPooling):
    """The mean over the steps of [batch, steps, channels] (tf.keras.layers.GlobalAveragePooling1D);
    with a mask, over the unmasked steps."""
    _rank = 1
    _masking = True


class GlobalAveragePooling2D(_GlobalPooling):
    """The mean over height and width (tf.keras.layers.GlobalAveragePooling2D)."""


class GlobalMaxPooling1D(_GlobalPooling):
    """The max over the steps (tf.keras.layers.GlobalMaxPooling1D)."""
    _rank = 1
    _max = True


class GlobalMaxPooling2D(_GlobalPooling):
    """The max over height and width (tf.keras.layers.GlobalMaxPooling2D)."""
    _max = True


class GlobalAveragePooling3D(_GlobalPooling):
    """The mean over depth, height and width (tf.keras.layers.GlobalAveragePooling3D)."""
    _rank = 3


class GlobalMaxPooling3D(_GlobalPooling):
    """The max over depth, height and width (tf.keras.layers.GlobalMaxPooling3D)."""
    _rank = 3
    _max = True


GlobalAvgPool1D, GlobalAvgPool2D, GlobalAvgPool3D = GlobalAveragePooling1D, GlobalAveragePooling2D, GlobalAveragePooling3D
GlobalMaxPool1D, GlobalMaxPool2D, GlobalMaxPool3D = GlobalMaxPooling1D, GlobalMaxPooling2D, GlobalMaxPooling3D


class Embedding(Layer):
    """Rows of an `embeddings` [input_dim, output_dim] matrix for integer inputs
    (tf.keras.layers.Embedding). With `mask_zero`, id 0 is padding: the output's mask is
    `inputs != 0`, for the masking layers downstream (an LSTM skips those steps)."""
    _config_keys = ("input_dim", "output_dim", "embeddings_initializer", "embeddings_regularizer",
                    "activity_regularizer", "embeddings_constraint", "mask_zero", "input_length")

    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform", embeddings_regularizer=None,
                 activity_regularizer=None, embeddings_constraint=None, mask_zero=False, input_length=None,
                 name=None, **kwargs):
        if "input_shape" not in kwargs and "batch_input_shape" not in kwargs:
            kwargs["input_shape"] = (input_length,) if input_length is not None else (None,)
        kwargs.setdefault("dtype", K.floatx())
        super().__init__(name=name, activity_regularizer=_reg(activity_regularizer), **kwargs)
        self.input_dim, self.output_dim = int(input_dim), int(output_dim)
        self.embeddings_initializer = _init(embeddings_initializer)
        self.embeddings_regularizer = _reg(embeddings_regularizer)
        self.embeddings_constraint = _con(embeddings_constraint)
        self.input_length = input_length
        self.mask_zero = bool(mask_zero)
        self.supports_masking = self.mask_zero

    def compute_mask(self, inputs, mask=None):
        if not self.mask_zero:
            return None
        return math_ops.not_equal(inputs, 0)

    def build(self, input_shape):
        self.embeddings = self.add_weight("embeddings", [self.input_dim, self.output_dim],
                                          initializer=self.embeddings_initializer,
                                          regularizer=self.embeddings_regularizer,
                                          constraint=self.embeddings_constraint)
        self.built = True

    def call(self, inputs):
        ids = convert_to_tensor(inputs)
        if ids.dtype not in (dtypes.int32, dtypes.int64):
            ids = math_ops.cast(ids, dtypes.int32)
        return array_ops.gather(self.embeddings, ids)


class Masking(Layer):
    """Masks the steps of [batch, steps, features] whose features all equal `mask_value`
    (tf.keras.layers.Masking): those steps become zeros and the output's mask is false there,
    so the recurrent layers downstream skip them."""
    _config_keys = ("mask_value",)
    _masking = True

    def __init__(self, mask_value=0.0, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.mask_value = mask_value
        self._compute_output_and_mask_jointly = True

    def compute_mask(self, inputs, mask=None):
        return math_ops.reduce_any(math_ops.not_equal(inputs, self.mask_value), axis=-1)

    def call(self, inputs):
        x = convert_to_tensor(inputs)
        keep = math_ops.reduce_any(math_ops.not_equal(x, constant(self.mask_value, dtype=x.dtype)), axis=-1,
                                   keepdims=True)
        out = math_ops.multiply(x, math_ops.cast(keep, x.dtype))
        out._keras_mask = array_ops.squeeze(keep, axis=[-1])
        return out


class Activation(Layer):
    """Applies an activation function, by name or callable (tf.keras.layers.Activation)."""
    _masking = True
    _config_keys = ("activation",)

    def __init__(self, activation, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.activation = _act(activation)

    def call(self, inputs):
        return self.activation(inputs)


def _batch_reshape(x, target):
    """Reshapes each example of `x` to `target` (one entry may be -1)."""
    return array_ops.reshape(x, [-1] + list(target) if -1 not in target else
                             array_ops.concat([array_ops.shape(x)[:1], constant(list(target), dtype=dtypes.int32)],
                                              0))


class Reshape(Layer):
    """Reshapes each example to `target_shape` (tf.keras.layers.Reshape); one entry may be -1."""
    _config_keys = ("target_shape",)

    def __init__(self, target_shape, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.target_shape = tuple(int(d) for d in target_shape)

    def call(self, inputs):
        x = convert_to_tensor(inputs)
        target = list(self.target_shape)
        if -1 in target:
            rest = x.shape[1:]
            if rest.is_fully_defined():
                known = int(np.prod([d for d in target if d != -1]))
                total = int(np.prod(rest.as_list()))
                if total % known:
                    raise ValueError(f"Reshape {self.name}: total size of the new array must be unchanged, "
                                     f"input shape {x.shape}, target {self.target_shape}")
                target[target.index(-1)] = total // known
        if -1 in target:
            return _batch_reshape(x, target)
        return array_ops.reshape(x, [-1] + target)


class Permute(Layer):
    """Permutes the non-batch axes by `dims` (1-based, tf.keras.layers.Permute)."""
    _config_keys = ("dims",)

    def __init__(self, dims, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.dims = tuple(int(d) for d in dims)
        if sorted(self.dims) != list(range(1, len(self.dims) + 1)):
            raise ValueError(f"Invalid permutation `dims` for Permute Layer: {dims}. The set of indices in `dims` "
                             f"must be consecutive and start from 1.")

    def call(self, inputs):
        return array_ops.transpose(inputs, [0] + list(self.dims))


class RepeatVector(Layer):
    """[batch, features] -> [batch, n, features] (tf.keras.layers.RepeatVector)."""
    _config_keys = ("n",)

    def __init__(self, n, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.n = int(n)

    def call(self, inputs):
        x = convert_to_tensor(inputs)
        if x.shape.ndims != 2:
            raise ValueError(f"Input 0 of layer {self.name} is incompatible with the layer: expected ndim=2, found "
                             f"ndim={x.shape.ndims}")
        return K.repeat(x, self.n)


class Lambda(Layer):
    """Wraps `function(inputs, **arguments)` as a layer (tf.keras.layers.Lambda). `output_shape`
    is accepted for Keras's sake; the graph gives the real shape."""

    def __init__(self, function, output_shape=None, mask=None, arguments=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.function = function
        self.arguments = dict(arguments or {})
        self._output_shape_arg = output_shape
        self.mask = mask
        if mask is not None:
            self.supports_masking = True

    def call(self, inputs, mask=None, training=None):
        import inspect
        kw = dict(self.arguments)
        params = inspect.signature(self.function).parameters
        if "training" in params and training is not None:
            kw["training"] = training
        if "mask" in params:
            kw["mask"] = mask
        return self.function(inputs, **kw)

    def compute_mask(self, inputs, mask=None):
        """`mask` as given: a function of (inputs, mask), or a fixed mask (None: no mask)."""
        return self.mask(inputs, mask) if callable(self.mask) else self.mask

    def get_config(self):
        cfg = super().get_config()
        cfg.update(function=getattr(self.function, "__name__", repr(self.function)), arguments=self.arguments)
        return cfg

    @classmethod
    def _from_config_with(cls, config, custom_objects=None):
        config = dict(config)
        fn = (custom_objects or {}).get(config["function"])
        if fn is None:
            raise ValueError(f"Lambda layer {config.get('name')}: its function '{config['function']}' is code, not "
                             f"config; pass it in custom_objects")
        config["function"] = fn
        return cls(**config)


class _Merge(Layer):
    """A layer on a list of tensors of one shape (the merge layers)."""
    _masking = True

    def _inputs(self, inputs):
        if not isinstance(inputs, (list, tuple)):
            raise ValueError(f"A merge layer ({self.name}) should be called on a list of inputs.")
        if len(inputs) < self._min_inputs:
            raise ValueError(f"A merge layer ({self.name}) should be called on a list of at least "
                             f"{self._min_inputs} inputs. Got {len(inputs)} inputs.")
        return [convert_to_tensor(x) for x in inputs]

    _min_inputs = 2

    @staticmethod
    def _check_masks(inputs, mask):
        """A merge layer's input masks must be a list, one per input."""
        if not isinstance(mask, (list, tuple)):
            raise ValueError(f"`mask` should be a list. Received: mask={mask}")
        if not isinstance(inputs, (list, tuple)) or len(mask) != len(inputs):
            raise ValueError(f"The lists `inputs` and `mask` should have the same length. Received: inputs={inputs} "
                             f"of length {len(inputs)}, and mask={mask} of length {len(mask)}")

    def compute_mask(self, inputs, mask=None):
        """The steps every input keeps: the logical and of the inputs' masks."""
        if mask is None:
            return None
        self._check_masks(inputs, mask)
        masks = [array_ops.expand_dims(m, 0) for m in mask if m is not None]
        if not masks:
            return None
        return math_ops.reduce_all(array_ops.concat(masks, 0), axis=0)

    def call(self, inputs):
        xs = self._inputs(inputs)
        out = xs[0]
        for x in xs[1:]:
            out = self._merge(out, x)
        return self._finish(out, len(xs))

    def _finish(self, out, n):
        return out


class Add(_Merge):
    """The element-wise sum of its inputs (tf.keras.layers.Add)."""

    def _merge(self, a, b):
        return math_ops.add(a, b)


class Multiply(_Merge):
    """The element-wise product (tf.keras.layers.Multiply)."""

    def _merge(self, a, b):
        return math_ops.multiply(a, b)


class Maximum(_Merge):
    """The element-wise maximum (tf.keras.layers.Maximum)."""

    def _merge(self, a, b):
        return math_ops.maximum(a, b)


class Minimum(_Merge):
    """The element-wise minimum (tf.keras.layers.Minimum)."""

    def _merge(self, a, b):
        return math_ops.minimum(a, b)


class Average(_Merge):
    """The element-wise mean (tf.keras.layers.Average)."""

    def _merge(self, a, b):
        return math_ops.add(a, b)

    def _finish(self, out, n):
        return math_ops.divide(out, constant(float(n), dtype=out.dtype))


class Subtract(_Merge):
    """inputs[0] - inputs[1] (tf.keras.layers.Subtract); exactly two inputs."""

    def call(self, inputs):
        xs = self._inputs(inputs)
        if len(xs) != 2:
            raise ValueError(f"A `Subtract` layer ({self.name}) should be called on exactly 2 inputs, got {len(xs)}")
        return math_ops.subtract(xs[0], xs[1])


class Concatenate(_Merge):
    """Concatenation along `axis` (tf.keras.layers.Concatenate)."""
    _config_keys = ("axis",)
    _min_inputs = 1

    def __init__(self, axis=-1, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.axis = int(axis)

    def call(self, inputs):
        return array_ops.concat(self._inputs(inputs), self.axis)

    def compute_mask(self, inputs, mask=None):
        """The inputs' masks (all-true for an unmasked input) concatenated along `axis`, then
        reduced with a logical and over the last axis (tf.keras's Concatenate)."""
        if mask is None:
            return None
        self._check_masks(inputs, mask)
        if all(m is None for m in mask):
            return None
        masks = []
        for x, m in zip(inputs, mask):
            x = convert_to_tensor(x)
            if m is None:
                masks.append(array_ops.ones_like(x, dtype=dtypes.bool_))
            elif m.shape.ndims is not None and x.shape.ndims is not None and m.shape.ndims < x.shape.ndims:
                masks.append(array_ops.expand_dims(m, -1))
            else:
                masks.append(m)
        return math_ops.reduce_all(array_ops.concat(masks, self.axis), axis=-1)


def add(inputs, **kwargs):
    """Functional form of Add."""
    return Add(**kwargs)(inputs)


def multiply(inputs, **kwargs):
    """Functional form of Multiply."""
    return Multiply(**kwargs)(inputs)


def subtract(inputs, **kwargs):
    """Functional form of Subtract."""
    return Subtract(**kwargs)(inputs)


def average(inputs, **kwargs):
    """Functional form of Average."""
    return Average(**kwargs)(inputs)


def maximum(inputs, **kwargs):
    """Functional form of Maximum."""
    return Maximum(**kwargs)(inputs)


def minimum(inputs, **kwargs):
    """Functional form of Minimum."""
    return Minimum(**kwargs)(inputs)


def concatenate(inputs, axis=-1, **kwargs):
    """Functional form of Concatenate."""
    return Concatenate(axis=axis, **kwargs)(inputs)


def _int_pair(v, what):
    if isinstance(v, numbers.Integral):
        return (int(v), int(v))
    return tuple(int(d) for d in v)


class ZeroPadding1D(Layer):
    """Zeros before and after the steps of [batch, steps, channels] (tf.keras.layers.ZeroPadding1D)."""
    _config_keys = ("padding",)

    def __init__(self, padding=1, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.padding = _int_pair(padding, "padding")

    def call(self, inputs):
        return array_ops.pad(inputs, [[0, 0], list(self.padding), [0, 0]])


class ZeroPadding2D(Layer):
    """Zero rows and columns around an image (tf.keras.layers.ZeroPadding2D): `padding` an int,
    (rows, cols), or ((top, bottom), (left, right))."""
    _config_keys = ("padding", "data_format")

    def __init__(self, padding=(1, 1), data_format=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if isinstance(padding, numbers.Integral):
            padding = ((padding, padding), (padding, padding))
        elif all(isinstance(p, numbers.Integral) for p in padding):
            padding = ((padding[0], padding[0]), (padding[1], padding[1]))
        self.padding = tuple(tuple(int(v) for v in p) for p in padding)
        self.data_format = _fmt(data_format)

    def call(self, inputs):
        (t, b), (l, r) = self.padding  # noqa: E741
        if self.data_format == "channels_last":
            pads = [[0, 0], [t, b], [l, r], [0, 0]]
        else:
            pads = [[0, 0], [0, 0], [t, b], [l, r]]
        return array_ops.pad(inputs, pads)


class UpSampling1D(Layer):
    """Repeats each step `size` times (tf.keras.layers.UpSampling1D)."""
    _config_keys = ("size",)

    def __init__(self, size=2, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.size = int(size)

    def call(self, inputs):
        x = convert_to_tensor(inputs)
        _, steps, ch = x.shape.as_list()
        y = array_ops.tile(array_ops.expand_dims(x, 2), [1, 1, self.size, 1])
        return array_ops.reshape(y, [-1, steps * self.size if steps is not None else -1, ch])


class UpSampling2D(Layer):
    """Upsampling by size[0] x size[1] (tf.keras.layers.UpSampling2D): "nearest" repeats each pixel,
    "bilinear" interpolates with half-pixel centers (tf.image.resize's); needs static height and
    width."""
    _config_keys = ("size", "data_format", "interpolation")

    def __init__(self, size=(2, 2), data_format=None, interpolation="nearest", name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if interpolation not in ("nearest", "bilinear"):
            raise ValueError(f'`interpolation` argument should be one of `"nearest"` or `"bilinear"`. Received: '
                             f'"{interpolation}".')
        self.size = _int_pair(size, "size")
        self.data_format = _fmt(data_format)
        self.interpolation = interpolation

    def call(self, inputs):
        x = convert_to_tensor(inputs)
        if self.data_format == "channels_first":
            x = array_ops.transpose(x, [0, 2, 3, 1])
        _, h, w, c = x.shape.as_list()
        if h is None or w is None or c is None:
            raise ValueError(f"UpSampling2D {self.name}: needs a static height, width and channels, got {x.shape}")
        sh, sw = self.size
        if self.interpolation == "bilinear":
            y = resize_bilinear(x, [h * sh, w * sw], half_pixel_centers=True)
        else:
            y = array_ops.reshape(x, [-1, h, 1, w, 1, c])
            y = array_ops.tile(y, [1, 1, sh, 1, sw, 1])
            y = array_ops.reshape(y, [-1, h * sh, w * sw, c])
        if self.data_format == "channels_first":
            y = array_ops.transpose(y, [0, 3, 1, 2])
        return y


def _triple(v, what):
    """((a, b), (c, d), (e, f)) from an int, three ints, or three pairs (the 3-D layers' arguments)."""
    if isinstance(v, numbers.Integral):
        return ((int(v), int(v)),) * 3
    v = tuple(v)
    if len(v) != 3:
        raise ValueError(f"`{what}` should have 3 elements. Received: {v}.")
    if all(isinstance(p, numbers.Integral) for p in v):
        return tuple((int(p), int(p)) for p in v)
    return tuple(tuple(int(q) for q in p) for p in v)


def _spatial_axes(data_format):
    return [1, 2, 3] if data_format == "channels_last" else [2, 3, 4]


class ZeroPadding3D(Layer):
    """Zeros around a volume (tf.keras.layers.ZeroPadding3D): `padding` an int, three ints, or
    three (before, after) pairs."""
    _config_keys = ("padding", "data_format")

    def __init__(self, padding=(1, 1, 1), data_format=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.padding, self.data_format = _triple(padding, "padding"), _fmt(data_format)

    def call(self, inputs):
        pads = [[0, 0]] * 5
        for axis, p in zip(_spatial_axes(self.data_format), self.padding):
            pads[axis] = list(p)
        return array_ops.pad(inputs, pads)


class Cropping3D(Layer):
    """Drops the edges of a volume (tf.keras.layers.Cropping3D): `cropping` an int, three ints, or
    three (before, after) pairs."""
    _config_keys = ("cropping", "data_format")

    def __init__(self, cropping=((1, 1), (1, 1), (1, 1)), data_format=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.cropping, self.data_format = _triple(cropping, "cropping"), _fmt(data_format)

    def call(self, inputs):
        x = convert_to_tensor(inputs)
        index = [slice(None)] * 5
        for axis, (a, b) in zip(_spatial_axes(self.data_format), self.cropping):
            index[axis] = slice(a, -b if b else None)
        return x[tuple(index)]


class UpSampling3D(Layer):
    """Nearest-neighbour upsampling of a volume: each voxel repeated size[0] x size[1] x size[2]
    times (tf.keras.layers.UpSampling3D)."""
    _config_keys = ("size", "data_format")

    def __init__(self, size=(2, 2, 2), data_format=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.size = tuple(int(v) for v in ((size,) * 3 if isinstance(size, numbers.Integral) else size))
        self.data_format = _fmt(data_format)

    def call(self, inputs):
        x = convert_to_tensor(inputs)
        for axis, n in zip(_spatial_axes(self.data_format), self.size):
            x = repeat(x, n, axis=axis)
        return x


class LeakyReLU(Layer):
    """max(x, alpha * x), alpha 0.3 by default (tf.keras.layers.LeakyReLU)."""
    _masking = True
    _config_keys = ("alpha",)

    def __init__(self, alpha=0.3, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.alpha = float(alpha)

    def call(self, inputs):
        return nn_ops.leaky_relu(inputs, alpha=self.alpha)


class ReLU(Layer):
    """Rectified linear with Keras's max_value, negative_slope and threshold (tf.keras.layers.ReLU)."""
    _masking = True
    _config_keys = ("max_value", "negative_slope", "threshold")

    def __init__(self, max_value=None, negative_slope=0.0, threshold=0.0, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if max_value is not None and max_value < 0:
            raise ValueError(f"max_value of ReLU layer cannot be negative, got {max_value}")
        self.max_value, self.negative_slope, self.threshold = max_value, float(negative_slope), float(threshold)

    def call(self, inputs):
        return K.relu(inputs, alpha=self.negative_slope, max_value=self.max_value, threshold=self.threshold)


class ELU(Layer):
    """x for x > 0, alpha * (exp(x) - 1) otherwise (tf.keras.layers.ELU)."""
    _masking = True
    _config_keys = ("alpha",)

    def __init__(self, alpha=1.0, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.alpha = float(alpha)

    def call(self, inputs):
        return K.elu(inputs, self.alpha)


class Softmax(Layer):
    """Softmax over `axis` (tf.keras.layers.Softmax); a `mask` excludes its false positions."""
    _masking = True
    _config_keys = ("axis",)

    def __init__(self, axis=-1, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.axis = int(axis)

    def call(self, inputs, mask=None):
        x = convert_to_tensor(inputs)
        if mask is not None:
            # Masked positions get a large negative logit (-1e9; half float16's lowest for float16).
            big = -1e9 if x.dtype != dtypes.float16 else float(np.finfo(np.float16).min) / 2
            x = math_ops.add(x, math_ops.multiply(math_ops.subtract(constant(1.0, dtype=x.dtype),
                                                                    math_ops.cast(mask, x.dtype)),
                                                  constant(big, dtype=x.dtype)))
        return nn_ops.softmax(x, axis=self.axis)


# ---------------------------------------------------------------------------------------------
# More convolutions, cropping, noise, and the remaining element-wise layers
# ---------------------------------------------------------------------------------------------

class Conv3D(Layer, _tfl.Conv3D):
    """3-D convolution (tf.keras.layers.Conv3D); `kernel` [kd, kh, kw, in, filters]."""
    _config_keys = _CONV_KEYS

    def __init__(self, filters, kernel_size, strides=(1, 1, 1), padding="valid", data_format=None,
                 dilation_rate=(1, 1, 1), activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, name=None, **kwargs):
        name, kwargs = self._init_keras(name, kwargs)
        _tfl.Conv3D.__init__(self, filters, kernel_size, strides=strides, padding=padding,
                             data_format=_fmt(data_format), dilation_rate=dilation_rate, name=name, **kwargs,
                             **_kernel_kwargs(activation, use_bias, kernel_initializer, bias_initializer,
                                              kernel_regularizer, bias_regularizer, activity_regularizer,
                                              kernel_constraint, bias_constraint))
        self._keras_post()


def _separable_class(base, rank, defaults):
    class Sep(Layer, base):
        _config_keys = ("filters", "kernel_size", "strides", "padding", "data_format", "dilation_rate",
                        "depth_multiplier", "depthwise_initializer", "pointwise_initializer") + _KERNEL_KEYS[:1] + \
            ("use_bias", "bias_initializer")

        def __init__(self, filters, kernel_size, strides=defaults[0], padding="valid", data_format=defaults[1],
                     dilation_rate=defaults[0], depth_multiplier=1, activation=None, use_bias=True,
                     depthwise_initializer="glorot_uniform", pointwise_initializer="glorot_uniform",
                     bias_initializer="zeros", depthwise_regularizer=None, pointwise_regularizer=None,
                     bias_regularizer=None, activity_regularizer=None, depthwise_constraint=None,
                     pointwise_constraint=None, bias_constraint=None, name=None, **kwargs):
            name, kwargs = self._init_keras(name, kwargs)
            base.__init__(self, filters, kernel_size, strides=strides, padding=padding,
                          data_format=_fmt(data_format), dilation_rate=dilation_rate,
                          depth_multiplier=depth_multiplier, activation=_act(activation), use_bias=use_bias,
                          depthwise_initializer=_init(depthwise_initializer),
                          pointwise_initializer=_init(pointwise_initializer), bias_initializer=_init(bias_initializer),
                          depthwise_regularizer=_reg(depthwise_regularizer),
                          pointwise_regularizer=_reg(pointwise_regularizer), bias_regularizer=_reg(bias_regularizer),
                          activity_regularizer=_reg(activity_regularizer),
                          depthwise_constraint=_con(depthwise_constraint),
                          pointwise_constraint=_con(pointwise_constraint), bias_constraint=_con(bias_constraint),
                          name=name, **kwargs)
            self._keras_post()

    Sep.__name__ = Sep.__qualname__ = base.__name__
    Sep.__doc__ = (f"Depthwise-separable {rank}-D convolution (tf.keras.layers.{base.__name__}): "
                   f"`depthwise_kernel`, `pointwise_kernel`, `bias`.")
    return Sep


SeparableConv2D = _separable_class(_tfl.SeparableConv2D, 2, ((1, 1), None))
SeparableConv1D = _separable_class(_tfl.SeparableConv1D, 1, (1, "channels_last"))
SeparableConvolution2D = SeparableConv2D


class DepthwiseConv2D(Layer):
    """Depthwise 2-D convolution (tf.keras.layers.DepthwiseConv2D): `depthwise_kernel`
    [kh, kw, in, depth_multiplier], output channels in * depth_multiplier."""
    _config_keys = ("kernel_size", "strides", "padding", "depth_multiplier", "data_format", "activation",
                    "use_bias", "depthwise_initializer", "bias_initializer")

    def __init__(self, kernel_size, strides=(1, 1), padding="valid", depth_multiplier=1, data_format=None,
                 activation=None, use_bias=True, depthwise_initializer="glorot_uniform", bias_initializer="zeros",
                 depthwise_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 depthwise_constraint=None, bias_constraint=None, name=None, **kwargs):
        super().__init__(name=name, activity_regularizer=activity_regularizer, **kwargs)
        self.kernel_size = _tfl._pair(kernel_size, "kernel_size", "depthwise_conv2d")
        self.strides = _tfl._pair(strides, "strides", "depthwise_conv2d")
        self.padding = _tfl._padding(padding, "depthwise_conv2d")
        self.depth_multiplier = int(depth_multiplier)
        self.data_format = _fmt(data_format)
        self.activation, self.use_bias = _act(activation), bool(use_bias)
        self.depthwise_initializer, self.bias_initializer = _init(depthwise_initializer), _init(bias_initializer)
        self.depthwise_regularizer, self.bias_regularizer = _reg(depthwise_regularizer), _reg(bias_regularizer)
        self.depthwise_constraint, self.bias_constraint = _con(depthwise_constraint), _con(bias_constraint)

    def build(self, input_shape):
        axis = -1 if self.data_format == "channels_last" else 1
        cin = input_shape[axis]
        if input_shape.ndims != 4 or cin is None:
            raise ValueError(f"Inputs to `DepthwiseConv2D` should have rank 4 and a known channel dimension. "
                             f"Received input shape: {input_shape}")
        cin = int(cin)
        self.depthwise_kernel = self.add_weight("depthwise_kernel", (*self.kernel_size, cin, self.depth_multiplier),
                                                initializer=self.depthwise_initializer,
                                                regularizer=self.depthwise_regularizer,
                                                constraint=self.depthwise_constraint)
        self.bias = self.add_weight("bias", (cin * self.depth_multiplier,), initializer=self.bias_initializer,
                                    regularizer=self.bias_regularizer,
                                    constraint=self.bias_constraint) if self.use_bias else None
        self.built = True

    def call(self, inputs):
        from actorflow.graph.ops.nn_conv_ops import depthwise_conv2d
        fmt = "NHWC" if self.data_format == "channels_last" else "NCHW"
        st = [1, *self.strides, 1] if fmt == "NHWC" else [1, 1, *self.strides]
        out = depthwise_conv2d(_float(inputs, self), self.depthwise_kernel, st, self.padding, data_format=fmt)
        if self.bias is not None:
            out = nn_ops.bias_add(out, self.bias, data_format=fmt)
        return self.activation(out)


class Cropping1D(Layer):
    """Drops `cropping` = (start, end) steps of [batch, steps, features] (tf.keras.layers.Cropping1D)."""
    _config_keys = ("cropping",)

    def __init__(self, cropping=(1, 1), name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.cropping = _int_pair(cropping, "cropping")

    def call(self, inputs):
        a, b = self.cropping
        x = convert_to_tensor(inputs)
        return x[:, a:(-b if b else None), :]


class Cropping2D(Layer):
    """Drops rows and columns at the edges (tf.keras.layers.Cropping2D): `cropping` an int,
    (rows, cols), or ((top, bottom), (left, right))."""
    _config_keys = ("cropping", "data_format")

    def __init__(self, cropping=((0, 0), (0, 0)), data_format=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if isinstance(cropping, numbers.Integral):
            cropping = ((cropping, cropping), (cropping, cropping))
        elif all(isinstance(c, numbers.Integral) for c in cropping):
            cropping = ((cropping[0], cropping[0]), (cropping[1], cropping[1]))
        self.cropping = tuple(tuple(int(v) for v in c) for c in cropping)
        self.data_format = _fmt(data_format)

    def call(self, inputs):
        (t, b), (l, r) = self.cropping  # noqa: E741
        x = convert_to_tensor(inputs)
        rows, cols = slice(t, -b if b else None), slice(l, -r if r else None)
        if self.data_format == "channels_last":
            return x[:, rows, cols, :]
        return x[:, :, rows, cols]


class SpatialDropout1D(Layer, _tfl.Dropout):
    """Drops whole feature maps of [batch, steps, channels] in the training phase
    (tf.keras.layers.SpatialDropout1D): one mask per example and channel."""
    _masking = True
    _config_keys = ("rate",)

    def __init__(self, rate, name=None, **kwargs):
        name, kwargs = self._init_keras(name, kwargs)
        _tfl.Dropout.__init__(self, rate=rate, name=name, **kwargs)
        self._keras_post()

    def call(self, inputs, training=False):
        x = convert_to_tensor(inputs)
        shape = array_ops.shape(x)
        self.noise_shape = self._noise_shape(shape)
        return _tfl.Dropout.call(self, x, training=training)

    def _noise_shape(self, shape):
        return array_ops.stack([shape[0], constant(1), shape[2]])


class SpatialDropout2D(SpatialDropout1D):
    """Drops whole feature maps of an image batch in the training phase (tf.keras.layers.SpatialDropout2D)."""
    _config_keys = ("rate", "data_format")

    def __init__(self, rate, data_format=None, name=None, **kwargs):
        super().__init__(rate, name=name, **kwargs)
        self.data_format = _fmt(data_format)

    def _noise_shape(self, shape):
        if self.data_format == "channels_last":
            return array_ops.stack([shape[0], constant(1), constant(1), shape[3]])
        return array_ops.stack([shape[0], shape[1], constant(1), constant(1)])


class SpatialDropout3D(SpatialDropout2D):
    """Drops whole feature maps of a volume batch in the training phase (tf.keras.layers.SpatialDropout3D)."""

    def _noise_shape(self, shape):
        one = constant(1)
        if self.data_format == "channels_last":
            return array_ops.stack([shape[0], one, one, one, shape[4]])
        return array_ops.stack([shape[0], shape[1], one, one, one])


class GaussianNoise(Layer):
    """Adds N(0, stddev**2) noise in the training phase (tf.keras.layers.GaussianNoise)."""
    _masking = True
    _config_keys = ("stddev",)

    def __init__(self, stddev, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.stddev = float(stddev)

    def call(self, inputs, training=None):
        x = _float(inputs, self)
        return K.in_train_phase(lambda: math_ops.add(x, K.random_normal(array_ops.shape(x), stddev=self.stddev,
                                                                         dtype=x.dtype)), x, training=training)


class AlphaDropout(Layer):
    """Dropout that keeps a SELU network's mean and variance (tf.keras.layers.AlphaDropout): in the
    training phase, dropped units become SELU's negative saturation value and the result is scaled
    and shifted back."""
    _masking = True
    _config_keys = ("rate", "noise_shape", "seed")

    def __init__(self, rate, noise_shape=None, seed=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.rate, self.noise_shape, self.seed = float(rate), noise_shape, seed

    def call(self, inputs, training=None):
        x = _float(inputs, self)
        if not 0 < self.rate < 1:
            return x
        rate = self.rate
        alpha_p = -1.6732632423543772848170429916717 * 1.0507009873554804934193349852946

        def dropped():
            shape = self.noise_shape if self.noise_shape is not None else array_ops.shape(x)
            kept = math_ops.cast(math_ops.greater_equal(K.random_uniform(shape, seed=self.seed, dtype=x.dtype),
                                                        rate), x.dtype)
            a = ((1 - rate) * (1 + rate * alpha_p ** 2)) ** -0.5
            b = -a * alpha_p * rate
            y = math_ops.add(math_ops.multiply(x, kept),
                             math_ops.multiply(constant(alpha_p, dtype=x.dtype),
                                               math_ops.subtract(constant(1.0, dtype=x.dtype), kept)))
            return math_ops.add(math_ops.multiply(y, constant(a, dtype=x.dtype)), constant(b, dtype=x.dtype))
        return K.in_train_phase(dropped, x, training=training)


class LayerNormalization(Layer):
    """Normalizes each example over `axis` (the last by default) to mean 0 and variance 1, then
    scales by `gamma` and shifts by `beta` (tf.keras.layers.LayerNormalization)."""
    _masking = True
    _config_keys = ("axis", "epsilon", "center", "scale", "beta_initializer", "gamma_initializer",
                    "beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint")

    def __init__(self, axis=-1, epsilon=1e-3, center=True, scale=True, beta_initializer="zeros",
                 gamma_initializer="ones", beta_regularizer=None, gamma_regularizer=None, beta_constraint=None,
                 gamma_constraint=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.axis = [int(a) for a in axis] if isinstance(axis, (list, tuple)) else int(axis)
        self.epsilon, self.center, self.scale = float(epsilon), bool(center), bool(scale)
        self.beta_initializer, self.gamma_initializer = _init(beta_initializer), _init(gamma_initializer)
        self.beta_regularizer, self.gamma_regularizer = _reg(beta_regularizer), _reg(gamma_regularizer)
        self.beta_constraint, self.gamma_constraint = _con(beta_constraint), _con(gamma_constraint)

    def _axes(self, ndim):
        axes = self.axis if isinstance(self.axis, list) else [self.axis]
        out = sorted(a % ndim for a in axes)
        if len(set(out)) != len(out):
            raise ValueError(f"Duplicate axis: {self.axis}")
        return out

    def build(self, input_shape):
        nd = input_shape.ndims
        axes = self._axes(nd)
        shape = [input_shape[a] for a in axes]
        if any(d is None for d in shape):
            raise ValueError(f"Layer {self.name}: the normalized axes {axes} of the input must be known, got "
                             f"{input_shape}")
        shape = [int(d) for d in shape]
        self.gamma = self.add_weight("gamma", shape, initializer=self.gamma_initializer,
                                     regularizer=self.gamma_regularizer, constraint=self.gamma_constraint) \
            if self.scale else None
        self.beta = self.add_weight("beta", shape, initializer=self.beta_initializer,
                                    regularizer=self.beta_regularizer, constraint=self.beta_constraint) \
            if self.center else None
        self.built = True

    def call(self, inputs):
        x = _float(inputs, self)
        nd = x.shape.ndims
        axes = self._axes(nd)
        mean, var = nn_ops.moments(x, axes, keep_dims=True)
        bshape = [x.shape[a] if a in axes else 1 for a in range(nd)]

        def bcast(v):
            return None if v is None else array_ops.reshape(v.value(), [int(d) for d in bshape])
        return nn_ops.batch_normalization(x, mean, var, offset=bcast(self.beta), scale=bcast(self.gamma),
                                          variance_epsilon=self.epsilon)


class _DenseAttention(Layer):
    """What Attention and AdditiveAttention share (tf.keras's BaseDenseAttention): inputs [query,
    value] or [query, value, key] ([batch, T, dim]); the softmax of the query-key scores over the
    value steps, a value mask (and `causal`, or `use_causal_mask` on the call) keeping steps out
    with a -1e9 bias, dropout on the weights in the training phase, a query mask zeroing rows. The
    output mask is the query's."""
    _masking = True
    _config_keys = ("use_scale", "dropout", "causal")

    def __init__(self, use_scale=False, dropout=0.0, causal=False, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.use_scale, self.dropout, self.causal = bool(use_scale), float(dropout), bool(causal)

    def _check(self, inputs, mask):
        cls = type(self).__name__
        if not isinstance(inputs, (list, tuple)):
            raise ValueError(f"{cls} layer must be called on a list of inputs, namely [query, value] or [query, value, "
                             f"key]. Received: {inputs}.")
        if len(inputs) < 2 or len(inputs) > 3:
            raise ValueError(f"{cls} layer accepts inputs list of length 2 or 3, namely [query, value] or [query, "
                             f"value, key]. Received length: {len(inputs)}.")
        if mask is not None:
            if not isinstance(mask, (list, tuple)):
                raise ValueError(f"{cls} layer mask must be a list, namely [query_mask, value_mask]. Received: {mask}.")
            if len(mask) < 2 or len(mask) > len(inputs):
                raise ValueError(f"{cls} layer mask must be a list of length 2, namely [query_mask, value_mask]. "
                                 f"Received length: {len(mask)}.")

    def compute_mask(self, inputs, mask=None):
        self._check(inputs, mask)
        return convert_to_tensor(mask[0]) if mask is not None and mask[0] is not None else None

    def call(self, inputs, mask=None, training=None, return_attention_scores=False, use_causal_mask=False):
        self._check(inputs, mask)
        q, v = convert_to_tensor(inputs[0]), convert_to_tensor(inputs[1])
        k = convert_to_tensor(inputs[2]) if len(inputs) > 2 else v
        q_mask = mask[0] if mask is not None else None
        v_mask = mask[1] if mask is not None else None
        scores = self._scores(q, k)
        keep = None if v_mask is None else array_ops.expand_dims(v_mask, -2)        # [batch, 1, Tv]
        if self.causal or use_causal_mask:
            shape = array_ops.shape(scores)
            tri = array_ops.concat([array_ops.ones_like(shape[:-2]), shape[-2:]], 0)
            ones = array_ops.ones(tri, dtype=dtypes.int32)
            causal = math_ops.greater_equal(cumsum(ones, axis=-2), cumsum(ones, axis=-1))
            keep = causal if keep is None else math_ops.logical_and(keep, causal)
        if keep is not None:
            big = 65504.0 if scores.dtype == dtypes.float16 else 1.0e9
            scores = math_ops.subtract(scores, math_ops.multiply(
                constant(big, dtype=scores.dtype), math_ops.cast(math_ops.logical_not(keep), scores.dtype)))
        weights = nn_ops.softmax(scores)
        if self.dropout > 0:
            w = weights
            weights = K.in_train_phase(lambda: nn_ops.dropout(w, rate=self.dropout), w, training=training)
        result = math_ops.matmul(weights, v)
        if q_mask is not None:
            result = math_ops.multiply(result, math_ops.cast(array_ops.expand_dims(q_mask, -1), result.dtype))
        if return_attention_scores:
            return result, weights
        return result


class Attention(_DenseAttention):
    """Dot-product (Luong-style) attention (tf.keras.layers.Attention): scores = query . key,
    times a learned scalar `scale` (initially 1) with `use_scale`."""

    def build(self, input_shape):
        self.scale = self.add_weight("scale", [], initializer="ones") if self.use_scale else None
        self.built = True

    def _scores(self, q, k):
        scores = math_ops.matmul(q, k, transpose_b=True)
        return math_ops.multiply(scores, self.scale.value()) if self.scale is not None else scores


class AdditiveAttention(_DenseAttention):
    """Additive (Bahdanau-style) attention (tf.keras.layers.AdditiveAttention): scores =
    sum(scale * tanh(query + key)) over the features, `scale` [dim] learned with `use_scale`
    (the default)."""

    def __init__(self, use_scale=True, dropout=0.0, causal=False, name=None, **kwargs):
        super().__init__(use_scale=use_scale, dropout=dropout, causal=causal, name=name, **kwargs)

    def build(self, input_shape):
        dim = input_shape[1][-1] if isinstance(input_shape, (list, tuple)) else input_shape[-1]
        self.scale = self.add_weight("scale", [int(dim)], initializer="glorot_uniform") if self.use_scale else None
        self.built = True

    def _scores(self, q, k):
        s = math_ops.tanh(math_ops.add(array_ops.expand_dims(q, -2), array_ops.expand_dims(k, -3)))
        if self.scale is not None:
            s = math_ops.multiply(s, self.scale.value())
        return math_ops.reduce_sum(s, -1)


class DenseFeatures(Layer):
    """A model's dense input from a dict of features and the feature columns that read them
    (tf.keras.layers.DenseFeatures): each column's dense tensor, in the order of the columns'
    names, concatenated on the last axis. The variables the columns make (an embedding column's
    table) are the layer's weights, under `<layer>/<column name>/`."""

    def __init__(self, feature_columns, trainable=True, name=None, **kwargs):
        super().__init__(trainable=trainable, name=name, **kwargs)
        self._feature_columns = _fc._check_columns(
            feature_columns, _fc._DenseColumn, "DenseColumn. You can wrap a categorical column with an "
            "embedding_column or indicator_column")

    def build(self, input_shape):
        self.built = True

    def call(self, features, cols_to_output_tensors=None):
        if not isinstance(features, dict):
            raise ValueError(f"We expected a dictionary here. Instead we got: {features}")
        g = get_default_graph()
        seen = {id(v) for v in g.get_collection(GraphKeys.GLOBAL_VARIABLES)}
        outs = []
        for c in self._feature_columns:
            with variable_scope(None, default_name=c.name):
                t = c._dense(features)
            outs.append(t)
            if cols_to_output_tensors is not None:
                cols_to_output_tensors[c] = t
        for v in g.get_collection(GraphKeys.GLOBAL_VARIABLES):
            if id(v) not in seen:
                trainable = any(v is w for w in g.get_collection(GraphKeys.TRAINABLE_VARIABLES))
                (self._trainable_weights if trainable else self._non_trainable_weights).append(v)
        return outs[0] if len(outs) == 1 else array_ops.concat(outs, -1)


def serialize(layer):
    """{"class_name", "config"} of a layer (tf.keras.layers.serialize); `deserialize` rebuilds it."""
    return {"class_name": type(layer).__name__, "config": layer.get_config()}


class GaussianDropout(Layer):
    """Multiplies by N(1, rate / (1 - rate)) noise in the training phase (tf.keras.layers.GaussianDropout)."""
    _masking = True
    _config_keys = ("rate",)

    def __init__(self, rate, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.rate = float(rate)

    def call(self, inputs, training=None):
        x = _float(inputs, self)
        if not 0 < self.rate < 1:
            return x
        std = float(np.sqrt(self.rate / (1.0 - self.rate)))
        return K.in_train_phase(lambda: math_ops.multiply(x, K.random_normal(array_ops.shape(x), mean=1.0,
                                                                              stddev=std, dtype=x.dtype)),
                                x, training=training)


class ActivityRegularization(Layer):
    """The identity, adding l1 * sum(|x|) + l2 * sum(x**2) (per batch example) to the losses
    (tf.keras.layers.ActivityRegularization)."""
    _masking = True
    _config_keys = ("l1", "l2")

    def __init__(self, l1=0.0, l2=0.0, name=None, **kwargs):  # noqa: E741
        from actorflow.keras.regularizers import L1L2
        super().__init__(name=name, activity_regularizer=L1L2(l1=l1, l2=l2), **kwargs)
        self.l1, self.l2 = float(l1), float(l2)


class Dot(_Merge):
    """Dot products of two [batch, n] (or [batch, m, n]) tensors along `axes`
    (tf.keras.layers.Dot); `normalize` l2-normalizes first (cosine proximity)."""
    _config_keys = ("axes", "normalize")

    def __init__(self, axes, normalize=False, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.axes, self.normalize = axes, bool(normalize)

    def compute_mask(self, inputs, mask=None):
        return None

    def call(self, inputs):
        a, b = self._inputs(inputs)[:2]
        axes = (self.axes, self.axes) if isinstance(self.axes, numbers.Integral) else tuple(self.axes)
        axes = tuple(ax % t.shape.ndims for ax, t in zip(axes, (a, b)))
        if self.normalize:
            a, b = nn_ops.l2_normalize(a, axis=axes[0]), nn_ops.l2_normalize(b, axis=axes[1])
        if a.shape.ndims == 2 and b.shape.ndims == 2:
            return math_ops.reduce_sum(math_ops.multiply(a, b), 1, keepdims=True)
        if a.shape.ndims == 3 and b.shape.ndims == 3:
            a = a if axes[0] == 2 else array_ops.transpose(a, [0, 2, 1])
            b = b if axes[1] == 1 else array_ops.transpose(b, [0, 2, 1])
            return math_ops.matmul(a, b)
        raise NotImplementedError(f"Dot {self.name}: inputs of rank 2 or 3 only, got {a.shape} and {b.shape}")


def dot(inputs, axes, normalize=False, **kwargs):
    """Functional form of Dot."""
    return Dot(axes, normalize=normalize, **kwargs)(inputs)


class PReLU(Layer):
    """max(x, 0) + alpha * min(x, 0) with a learned `alpha` per element (tf.keras.layers.PReLU);
    `shared_axes` share it along those axes."""
    _masking = True
    _config_keys = ("alpha_initializer", "shared_axes")

    def __init__(self, alpha_initializer="zeros", alpha_regularizer=None, alpha_constraint=None, shared_axes=None,
                 name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.alpha_initializer, self.alpha_regularizer = _init(alpha_initializer), _reg(alpha_regularizer)
        self.alpha_constraint = _con(alpha_constraint)
        self.shared_axes = None if shared_axes is None else \
            [int(a) for a in (shared_axes if isinstance(shared_axes, (list, tuple)) else [shared_axes])]

    def build(self, input_shape):
        shape = list(input_shape.as_list()[1:])
        for a in self.shared_axes or []:
            shape[a - 1] = 1
        if any(d is None for d in shape):
            raise ValueError(f"PReLU {self.name}: the non-batch shape must be static, got {input_shape}")
        self.alpha = self.add_weight("alpha", shape, initializer=self.alpha_initializer,
                                     regularizer=self.alpha_regularizer, constraint=self.alpha_constraint)
        self.built = True

    def call(self, inputs):
        x = _float(inputs, self)
        neg = math_ops.multiply(self.alpha, math_ops.subtract(x, nn_ops.relu(x)))
        return math_ops.add(nn_ops.relu(x), neg)


class ThresholdedReLU(Layer):
    """x where x > theta, else 0 (tf.keras.layers.ThresholdedReLU)."""
    _masking = True
    _config_keys = ("theta",)

    def __init__(self, theta=1.0, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.theta = float(theta)

    def call(self, inputs):
        x = _float(inputs, self)
        return math_ops.multiply(x, math_ops.cast(math_ops.greater(x, constant(self.theta, dtype=x.dtype)), x.dtype))


Convolution3D, SeparableConvolution1D = Conv3D, SeparableConv1D

from actorflow.keras.recurrent import (  # noqa: E402
    GRU,
    LSTM,
    RNN,
    AbstractRNNCell,
    Bidirectional,
    ConvLSTM2D,
    GRUCell,
    LSTMCell,
    SimpleRNN,
    SimpleRNNCell,
    StackedRNNCells,
    TimeDistributed,
    Wrapper,
)
