"""af.keras.metrics: Keras's metric functions (per sample, as in TF 1.x Keras): the accuracies,
top-k accuracy, and the loss functions under their short names.

`Model.compile(metrics=["accuracy"])` picks binary, categorical or sparse categorical accuracy
from the loss and the output's shape, as Keras does (`resolve`).
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor
from actorflow.graph.ops import array_ops, math_ops, nn_ops
from actorflow.keras import backend as K
from actorflow.keras import losses as _losses
from actorflow.keras.losses import (  # noqa: F401
    binary_crossentropy,
    categorical_crossentropy,
    cosine_proximity,
    hinge,
    kullback_leibler_divergence,
    logcosh,
    mae,
    mape,
    mean_absolute_error,
    mean_absolute_percentage_error,
    mean_squared_error,
    mean_squared_logarithmic_error,
    mse,
    msle,
    poisson,
    sparse_categorical_crossentropy,
    squared_hinge,
)

__all__ = ["binary_accuracy", "categorical_accuracy", "sparse_categorical_accuracy", "top_k_categorical_accuracy",
           "sparse_top_k_categorical_accuracy", "mean_squared_error", "mean_absolute_error", "mse", "mae", "get",
           "resolve"]


def _floatx():
    return dtypes.as_dtype(K.floatx())


def binary_accuracy(y_true, y_pred, threshold=0.5):
    """mean(y_true == (y_pred > threshold)) over the last axis."""
    y_pred = convert_to_tensor(y_pred)
    y_true = math_ops.cast(convert_to_tensor(y_true), y_pred.dtype)
    pred = math_ops.cast(math_ops.greater(y_pred, threshold), y_pred.dtype)
    return K.mean(math_ops.cast(math_ops.equal(y_true, pred), _floatx()), axis=-1)


def categorical_accuracy(y_true, y_pred):
    """Whether the argmax of y_pred is the argmax of the one-hot y_true."""
    return math_ops.cast(math_ops.equal(math_ops.argmax(y_true, -1), math_ops.argmax(y_pred, -1)), _floatx())


def _sparse_labels(y_true, y_pred):
    y_true = convert_to_tensor(y_true)
    y_pred = convert_to_tensor(y_pred)
    if y_true.shape.ndims is None or y_true.shape.ndims == y_pred.shape.ndims:
        y_true = array_ops.reshape(y_true, array_ops.shape(y_pred)[:-1])
    return math_ops.cast(y_true, dtypes.int64)


def sparse_categorical_accuracy(y_true, y_pred):
    """Whether the argmax of y_pred is the integer label y_true."""
    labels = _sparse_labels(y_true, y_pred)
    return math_ops.cast(math_ops.equal(labels, math_ops.argmax(y_pred, -1)), _floatx())


def top_k_categorical_accuracy(y_true, y_pred, k=5):
    """Whether the one-hot label is among the k highest predictions."""
    return math_ops.cast(nn_ops.in_top_k(y_pred, math_ops.cast(math_ops.argmax(y_true, -1), dtypes.int32), k),
                         _floatx())


def sparse_top_k_categorical_accuracy(y_true, y_pred, k=5):
    """Whether the integer label is among the k highest predictions."""
    labels = math_ops.cast(_sparse_labels(y_true, y_pred), dtypes.int32)
    return math_ops.cast(nn_ops.in_top_k(y_pred, labels, k), _floatx())


_BY_NAME = {f.__name__: f for f in (binary_accuracy, categorical_accuracy, sparse_categorical_accuracy,
                                    top_k_categorical_accuracy, sparse_top_k_categorical_accuracy)}


def get(identifier):
    """A metric function from a name or a callable (the losses' names work too)."""
    if isinstance(identifier, str):
        f = _BY_NAME.get(identifier)
        if f is not None:
            return f
        try:
            return _losses.get(identifier)
        except ValueError:
            raise ValueError(f"Unknown metric function: {identifier!r}") from None
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret metric function identifier: {identifier!r}")


def resolve(metric, loss_fn, output) -> tuple:
    """(name, function) of a compile metric: "accuracy"/"acc" become binary accuracy for a
    binary cross-entropy loss or a single output unit, sparse categorical accuracy for a sparse
    loss, else categorical accuracy (named "acc", as TF 1.x reports it); "crossentropy"/"ce" the
    matching cross-entropy."""
    if metric in ("accuracy", "acc", "crossentropy", "ce"):
        fn = getattr(loss_fn, "call", loss_fn)
        fn = getattr(fn, "__func__", fn)
        inner = getattr(type(getattr(loss_fn, "__self__", None) or loss_fn), "_fn", None)
        names = {getattr(fn, "__name__", None), getattr(inner, "__name__", None) if inner else None}
        last = output.shape[-1] if output.shape.ndims else None
        if "binary_crossentropy" in names or last == 1:
            kind = "binary"
        elif "sparse_categorical_crossentropy" in names:
            kind = "sparse"
        else:
            kind = "categorical"
        if metric in ("accuracy", "acc"):
            f = {"binary": binary_accuracy, "sparse": sparse_categorical_accuracy,
                 "categorical": categorical_accuracy}[kind]
            return "acc", f
        f = {"binary": binary_crossentropy, "sparse": sparse_categorical_crossentropy,
             "categorical": categorical_crossentropy}[kind]
        return "ce", f
    f = get(metric)
    return getattr(f, "__name__", type(f).__name__), f
