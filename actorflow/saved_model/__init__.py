"""SavedModel: export a trained graph with its signatures and variables, and load it back
(tf.compat.v1.saved_model).

See builder.py for the directory layout. `simple_save` covers the common case; `loader.load` and
`load` read an export into a session; the model server (af.serving) serves these directories.
"""
from __future__ import annotations

from actorflow.saved_model import (
    builder,
    constants,
    loader,
    signature_constants,
    signature_def_utils,
    tag_constants,
    utils,
)
from actorflow.saved_model.builder import SavedModelBuilder
from actorflow.saved_model.loader import load, maybe_saved_model_directory
from actorflow.saved_model.signature_def_utils import (
    build_signature_def,
    classification_signature_def,
    is_valid_signature,
    predict_signature_def,
    regression_signature_def,
)
from actorflow.saved_model.utils import build_tensor_info, get_tensor_from_tensor_info

SERVING = tag_constants.SERVING
TRAINING = tag_constants.TRAINING
DEFAULT_SERVING_SIGNATURE_DEF_KEY = signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY
PREDICT_METHOD_NAME = signature_constants.PREDICT_METHOD_NAME
CLASSIFY_METHOD_NAME = signature_constants.CLASSIFY_METHOD_NAME
REGRESS_METHOD_NAME = signature_constants.REGRESS_METHOD_NAME

__all__ = ["simple_save", "SavedModelBuilder", "Builder", "load", "maybe_saved_model_directory", "builder", "loader",
           "constants", "signature_constants", "signature_def_utils", "tag_constants", "utils",
           "build_signature_def", "classification_signature_def", "predict_signature_def",
           "regression_signature_def", "is_valid_signature", "build_tensor_info", "get_tensor_from_tensor_info",
           "SERVING", "TRAINING", "DEFAULT_SERVING_SIGNATURE_DEF_KEY", "PREDICT_METHOD_NAME",
           "CLASSIFY_METHOD_NAME", "REGRESS_METHOD_NAME"]

Builder = SavedModelBuilder


def simple_save(session, export_dir, inputs, outputs, legacy_init_op=None):
    """Exports the session's graph and variables as a SavedModel with one predict signature under
    the serving tag and the default key (tf.compat.v1.saved_model.simple_save).

    `inputs` and `outputs` map signature keys to Tensors. Refuses an existing non-empty `export_dir`.
    """
    sig = predict_signature_def(inputs, outputs)
    b = SavedModelBuilder(export_dir)
    b.add_meta_graph_and_variables(session, [tag_constants.SERVING],
                                   signature_def_map={DEFAULT_SERVING_SIGNATURE_DEF_KEY: sig},
                                   main_op=legacy_init_op)
    return b.save()
