"""af.keras.losses: Keras's loss functions (per sample: the mean over the last axis) and the Loss
classes of TF 1.13+ (tf.keras.losses), by name or object.

A function `loss(y_true, y_pred)` returns one value per sample; `Model.compile` weights and
averages them over the batch. A Loss object called as `loss(y_true, y_pred, sample_weight)`
returns that average itself (Keras's SUM_OVER_BATCH_SIZE reduction).
"""
from __future__ import annotations

from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.ops import math_ops, nn_ops
from actorflow.graph.ops.constant import constant
from actorflow.keras import backend as K

__all__ = ["mean_squared_error", "mean_absolute_error", "mean_absolute_percentage_error",
           "mean_squared_logarithmic_error", "squared_hinge", "hinge", "categorical_hinge", "logcosh",
           "categorical_crossentropy", "sparse_categorical_crossentropy", "binary_crossentropy",
           "kullback_leibler_divergence", "poisson", "cosine_proximity", "mse", "MSE", "mae", "MAE", "mape", "MAPE",
           "msle", "MSLE", "kld", "KLD", "cosine", "Loss", "MeanSquaredError", "MeanAbsoluteError",
           "BinaryCrossentropy", "CategoricalCrossentropy", "SparseCategoricalCrossentropy", "Hinge", "get",
           "serialize", "deserialize"]


def _pair(y_true, y_pred):
    y_pred = convert_to_tensor(y_pred)
    y_true = math_ops.cast(convert_to_tensor(y_true), y_pred.dtype)
    return y_true, y_pred


def mean_squared_error(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    return K.mean(math_ops.square(y_pred - y_true), axis=-1)


def mean_absolute_error(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    return K.mean(math_ops.abs(y_pred - y_true), axis=-1)


def mean_absolute_percentage_error(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    diff = math_ops.abs((y_true - y_pred) / K.clip(math_ops.abs(y_true), K.epsilon(), float("inf")))
    return 100.0 * K.mean(diff, axis=-1)


def mean_squared_logarithmic_error(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    a = math_ops.log(K.clip(y_pred, K.epsilon(), float("inf")) + 1.0)
    b = math_ops.log(K.clip(y_true, K.epsilon(), float("inf")) + 1.0)
    return K.mean(math_ops.square(a - b), axis=-1)


def squared_hinge(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    return K.mean(math_ops.square(math_ops.maximum(1.0 - y_true * y_pred, 0.0)), axis=-1)


def hinge(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    return K.mean(math_ops.maximum(1.0 - y_true * y_pred, 0.0), axis=-1)


def categorical_hinge(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    pos = math_ops.reduce_sum(y_true * y_pred, -1)
    neg = math_ops.reduce_max((1.0 - y_true) * y_pred, -1)
    return math_ops.maximum(neg - pos + 1.0, 0.0)


def logcosh(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    x = y_pred - y_true
    return K.mean(x + nn_ops.softplus(-2.0 * x) - constant(0.6931471805599453, dtype=x.dtype), axis=-1)


def categorical_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0):
    y_true, y_pred = _pair(y_true, y_pred)
    if label_smoothing:
        n = math_ops.cast(K.shape(y_true)[-1], y_pred.dtype)
        y_true = y_true * (1.0 - label_smoothing) + label_smoothing / n
    return K.categorical_crossentropy(y_true, y_pred, from_logits=from_logits)


def sparse_categorical_crossentropy(y_true, y_pred, from_logits=False, axis=-1):
    return K.sparse_categorical_crossentropy(y_true, y_pred, from_logits=from_logits, axis=axis)


def binary_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0):
    y_true, y_pred = _pair(y_true, y_pred)
    if label_smoothing:
        y_true = y_true * (1.0 - label_smoothing) + 0.5 * label_smoothing
    return K.mean(K.binary_crossentropy(y_true, y_pred, from_logits=from_logits), axis=-1)


def kullback_leibler_divergence(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    y_true = K.clip(y_true, K.epsilon(), 1)
    y_pred = K.clip(y_pred, K.epsilon(), 1)
    return math_ops.reduce_sum(y_true * math_ops.log(y_true / y_pred), -1)


def poisson(y_true, y_pred):
    y_true, y_pred = _pair(y_true, y_pred)
    return K.mean(y_pred - y_true * math_ops.log(y_pred + K.epsilon()), axis=-1)


def cosine_proximity(y_true, y_pred, axis=-1):
    y_true, y_pred = _pair(y_true, y_pred)
    return -math_ops.reduce_sum(nn_ops.l2_normalize(y_true, axis=axis) * nn_ops.l2_normalize(y_pred, axis=axis),
                                axis)


mse = MSE = mean_squared_error
mae = MAE = mean_absolute_error
mape = MAPE = mean_absolute_percentage_error
msle = MSLE = mean_squared_logarithmic_error
kld = KLD = kullback_leibler_divergence
cosine = cosine_proximity


class Loss:
    """A loss object (tf.keras.losses.Loss): `call` gives per-sample values; calling it gives their
    weighted mean over the batch."""

    def __init__(self, reduction="sum_over_batch_size", name=None):
        self.reduction, self.name = reduction, name or type(self).__name__

    def call(self, y_true, y_pred):
        raise NotImplementedError

    def __call__(self, y_true, y_pred, sample_weight=None):
        per = convert_to_tensor(self.call(y_true, y_pred))
        if sample_weight is not None:
            per = per * math_ops.cast(convert_to_tensor(sample_weight), per.dtype)
        if self.reduction == "none":
            return per
        total = math_ops.reduce_sum(per)
        if self.reduction == "sum":
            return total
        return total / math_ops.cast(math_ops.reduce_prod(K.shape(per)), per.dtype) if per.shape.ndims else total

    def get_config(self):
        return {"reduction": self.reduction, "name": self.name}


class _FnLoss(Loss):
    _fn = None

    def __init__(self, reduction="sum_over_batch_size", name=None, **kwargs):
        super().__init__(reduction, name)
        self._kwargs = kwargs

    def call(self, y_true, y_pred):
        return type(self)._fn(y_true, y_pred, **self._kwargs)

    def get_config(self):
        return {**super().get_config(), **self._kwargs}


class MeanSquaredError(_FnLoss):
    """Mean squared error (tf.keras.losses.MeanSquaredError)."""
    _fn = staticmethod(mean_squared_error)


class MeanAbsoluteError(_FnLoss):
    """Mean absolute error (tf.keras.losses.MeanAbsoluteError)."""
    _fn = staticmethod(mean_absolute_error)


class Hinge(_FnLoss):
    """Hinge loss (tf.keras.losses.Hinge)."""
    _fn = staticmethod(hinge)


class BinaryCrossentropy(_FnLoss):
    """Binary cross-entropy (tf.keras.losses.BinaryCrossentropy): from_logits, label_smoothing."""
    _fn = staticmethod(binary_crossentropy)

    def __init__(self, from_logits=False, label_smoothing=0, reduction="sum_over_batch_size", name=None):
        super().__init__(reduction, name, from_logits=from_logits, label_smoothing=label_smoothing)


class CategoricalCrossentropy(_FnLoss):
    """Categorical cross-entropy on one-hot targets (tf.keras.losses.CategoricalCrossentropy)."""
    _fn = staticmethod(categorical_crossentropy)

    def __init__(self, from_logits=False, label_smoothing=0, reduction="sum_over_batch_size", name=None):
        super().__init__(reduction, name, from_logits=from_logits, label_smoothing=label_smoothing)


class SparseCategoricalCrossentropy(_FnLoss):
    """Categorical cross-entropy on integer targets (tf.keras.losses.SparseCategoricalCrossentropy)."""
    _fn = staticmethod(sparse_categorical_crossentropy)

    def __init__(self, from_logits=False, reduction="sum_over_batch_size", name=None):
        super().__init__(reduction, name, from_logits=from_logits)


_BY_NAME = {f.__name__: f for f in (mean_squared_error, mean_absolute_error, mean_absolute_percentage_error,
                                    mean_squared_logarithmic_error, squared_hinge, hinge, categorical_hinge,
                                    logcosh, categorical_crossentropy, sparse_categorical_crossentropy,
                                    binary_crossentropy, kullback_leibler_divergence, poisson, cosine_proximity)}
_BY_NAME.update(mse=mse, MSE=mse, mae=mae, MAE=mae, mape=mape, MAPE=mape, msle=msle, MSLE=msle, kld=kld, KLD=kld,
                cosine=cosine)


def get(identifier):
    """A loss from a name ("mse", "categorical_crossentropy", ...), a Loss object or a function."""
    if identifier is None:
        return None
    if isinstance(identifier, str):
        f = _BY_NAME.get(identifier)
        if f is None:
            raise ValueError(f"Unknown loss function: {identifier!r}; known: {sorted(_BY_NAME)}")
        return f
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret loss function identifier: {identifier!r}")


def per_sample(loss):
    """The per-sample function of a loss (a Loss object's `call`, or the function itself)."""
    loss = get(loss)
    return loss.call if isinstance(loss, Loss) else loss


def serialize(loss):
    return loss.__name__ if hasattr(loss, "__name__") else {"class_name": type(loss).__name__,
                                                          "config": loss.get_config()}


def deserialize(name, custom_objects=None):
    if custom_objects and name in custom_objects:
        return custom_objects[name]
    return get(name)


