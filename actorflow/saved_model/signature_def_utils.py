"""Building signatures (tf.compat.v1.saved_model.signature_def_utils)."""
from __future__ import annotations

from actorflow.saved_model import signature_constants as sc
from actorflow.train.meta_graph import SignatureDef, TensorInfo, tensor_info

__all__ = ["build_signature_def", "predict_signature_def", "classification_signature_def",
           "regression_signature_def", "is_valid_signature", "SignatureDef"]


def _infos(d, what):
    if not isinstance(d, dict) or not d:
        raise ValueError(f"{what} must be a non-empty dict of key -> Tensor")
    out = {}
    for k, t in d.items():
        if not isinstance(k, str) or not k:
            raise ValueError(f"{what} keys must be non-empty strings, got {k!r}")
        out[k] = t if isinstance(t, TensorInfo) else tensor_info(t)
    return out


def build_signature_def(inputs=None, outputs=None, method_name=None, defaults=None) -> SignatureDef:
    """A SignatureDef from dicts of key -> TensorInfo (tf.compat.v1.saved_model.signature_def_utils.build_signature_def).
    `defaults` is not supported."""
    if defaults:
        raise NotImplementedError("build_signature_def: defaults are not supported")
    return SignatureDef(dict(inputs or {}), dict(outputs or {}), method_name or "")


def predict_signature_def(inputs, outputs) -> SignatureDef:
    """A predict signature from dicts of key -> Tensor (tf.compat.v1.saved_model.predict_signature_def)."""
    return SignatureDef(_infos(inputs, "Prediction inputs"), _infos(outputs, "Prediction outputs"),
                        sc.PREDICT_METHOD_NAME)


def classification_signature_def(examples, classes, scores) -> SignatureDef:
    """A classify signature: input `examples`, outputs `classes` and/or `scores`
    (tf.compat.v1.saved_model.classification_signature_def).

    Differs from TF: `examples` is any tensor of feature rows (TF requires serialized tf.Example
    strings, which actorflow does not parse)."""
    if examples is None:
        raise ValueError("Classification examples cannot be None.")
    if classes is None and scores is None:
        raise ValueError("Classification classes and scores cannot both be None.")
    outs = {}
    if classes is not None:
        outs[sc.CLASSIFY_OUTPUT_CLASSES] = tensor_info(classes)
    if scores is not None:
        outs[sc.CLASSIFY_OUTPUT_SCORES] = tensor_info(scores)
    return SignatureDef({sc.CLASSIFY_INPUTS: tensor_info(examples)}, outs, sc.CLASSIFY_METHOD_NAME)


def regression_signature_def(examples, predictions) -> SignatureDef:
    """A regress signature: input `examples`, output `outputs`
    (tf.compat.v1.saved_model.regression_signature_def); `examples` as in classification_signature_def."""
    if examples is None:
        raise ValueError("Regression examples cannot be None.")
    if predictions is None:
        raise ValueError("Regression predictions cannot be None.")
    return SignatureDef({sc.REGRESS_INPUTS: tensor_info(examples)}, {sc.REGRESS_OUTPUTS: tensor_info(predictions)},
                        sc.REGRESS_METHOD_NAME)


def is_valid_signature(signature_def) -> bool:
    """Whether a SignatureDef is well formed for its method (tf.compat.v1.saved_model.is_valid_signature)."""
    if not isinstance(signature_def, SignatureDef) or not signature_def.outputs:
        return False
    m = signature_def.method_name
    if m == sc.PREDICT_METHOD_NAME:
        return bool(signature_def.inputs)
    if m == sc.CLASSIFY_METHOD_NAME:
        return set(signature_def.inputs) == {sc.CLASSIFY_INPUTS} and \
            set(signature_def.outputs) <= {sc.CLASSIFY_OUTPUT_CLASSES, sc.CLASSIFY_OUTPUT_SCORES}
    if m == sc.REGRESS_METHOD_NAME:
        return set(signature_def.inputs) == {sc.REGRESS_INPUTS} and set(signature_def.outputs) == {sc.REGRESS_OUTPUTS}
    return False
