"""Exporting an Estimator as a SavedModel (tf.estimator.export): ServingInputReceiver, the raw
serving input function, and the export outputs that become signatures."""
from __future__ import annotations

from actorflow.graph.graph import Tensor
from actorflow.graph.ops.constant import placeholder
from actorflow.saved_model.signature_def_utils import (
    classification_signature_def,
    predict_signature_def,
    regression_signature_def,
)

__all__ = ["ServingInputReceiver", "build_raw_serving_input_receiver_fn", "PredictOutput", "ClassificationOutput",
           "RegressionOutput"]


def _as_dict(x, default_key, what):
    if x is None:
        raise ValueError(f"{what} must be defined.")
    if isinstance(x, Tensor):
        return {default_key: x}
    if not isinstance(x, dict):
        raise ValueError(f"{what} must be a Tensor or a dict of Tensors, given: {x!r}")
    for k, v in x.items():
        if not isinstance(k, str):
            raise ValueError(f"{what} keys must be strings: {k!r}")
        if not isinstance(v, Tensor):
            raise ValueError(f"{what} values must be Tensors: {k}: {v!r}")
    return dict(x)


class ServingInputReceiver:
    """What a serving_input_receiver_fn returns (tf.estimator.export.ServingInputReceiver): the
    `features` given to the model_fn, and the `receiver_tensors` that requests feed. A single Tensor
    becomes {'feature': t} and {'input': t} respectively, as in TF."""

    def __init__(self, features, receiver_tensors, receiver_tensors_alternatives=None):
        self.features = features if isinstance(features, Tensor) else _as_dict(features, "feature", "features")
        self.receiver_tensors = _as_dict(receiver_tensors, "input", "receiver_tensors")
        self.receiver_tensors_alternatives = receiver_tensors_alternatives


def build_raw_serving_input_receiver_fn(features, default_batch_size=None):
    """A serving_input_receiver_fn that feeds placeholders shaped like `features` (a dict of Tensors),
    with the batch dimension `default_batch_size` (tf.estimator.export.build_raw_serving_input_receiver_fn)."""
    def fn():
        receivers = {}
        for name, t in features.items():
            shape = t.shape.as_list() if t.shape.ndims is not None else None
            if shape:
                shape[0] = default_batch_size
            receivers[name] = placeholder(t.dtype, shape, name=name)
        return ServingInputReceiver(receivers, receivers)
    return fn


class PredictOutput:
    """A predict signature's outputs (tf.estimator.export.PredictOutput)."""

    def __init__(self, outputs):
        self.outputs = _as_dict(outputs, "output", "Prediction outputs")

    def as_signature_def(self, receiver_tensors):
        return predict_signature_def(receiver_tensors, self.outputs)


class ClassificationOutput:
    """A classify signature's outputs: `scores` and/or `classes` (tf.estimator.export.ClassificationOutput)."""

    def __init__(self, scores=None, classes=None):
        if scores is None and classes is None:
            raise ValueError("At least one of scores and classes must be set.")
        self.scores, self.classes = scores, classes

    def as_signature_def(self, receiver_tensors):
        if len(receiver_tensors) != 1:
            raise ValueError(f"Classification input must be a single Tensor; got {receiver_tensors}")
        (examples,) = receiver_tensors.values()
        return classification_signature_def(examples, self.classes, self.scores)


class RegressionOutput:
    """A regress signature's output `value` (tf.estimator.export.RegressionOutput)."""

    def __init__(self, value):
        if not isinstance(value, Tensor):
            raise ValueError(f"Regression output value must be a Tensor; got {value!r}.")
        self.value = value

    def as_signature_def(self, receiver_tensors):
        if len(receiver_tensors) != 1:
            raise ValueError(f"Regression input must be a single Tensor; got {receiver_tensors}")
        (examples,) = receiver_tensors.values()
        return regression_signature_def(examples, self.value)
