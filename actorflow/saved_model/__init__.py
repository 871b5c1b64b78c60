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
    main_op,
    signature_constants,
    signature_def_utils,
    tag_constants,
    utils,
)
from actorflow.saved_model.builder import SavedModelBuilder
from actorflow.saved_model.loader import load, maybe_saved_model_directory
from actorflow.saved_model.main_op import main_op_with_restore
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
# tf.saved_model's other constants at the top of the namespace, as TF 1.x has them.
GPU, TPU = tag_constants.GPU, tag_constants.TPU
ASSETS_DIRECTORY = constants.ASSETS_DIRECTORY
ASSETS_KEY = "saved_model_assets"
DEBUG_DIRECTORY = "debug"
DEBUG_INFO_FILENAME_PB = "saved_model_debug_info.pb"
LEGACY_INIT_OP_KEY = constants.LEGACY_INIT_OP_KEY
MAIN_OP_KEY = constants.MAIN_OP_KEY
SAVED_MODEL_FILENAME_PB = "saved_model.pb"          # TF's name; actorflow writes constants.SAVED_MODEL_FILENAME
SAVED_MODEL_FILENAME_PBTXT = "saved_model.pbtxt"
SAVED_MODEL_SCHEMA_VERSION = 1
VARIABLES_DIRECTORY = constants.VARIABLES_DIRECTORY
VARIABLES_FILENAME = constants.VARIABLES_FILENAME
CLASSIFY_INPUTS = signature_constants.CLASSIFY_INPUTS
CLASSIFY_OUTPUT_CLASSES = signature_constants.CLASSIFY_OUTPUT_CLASSES
CLASSIFY_OUTPUT_SCORES = signature_constants.CLASSIFY_OUTPUT_SCORES
PREDICT_INPUTS = signature_constants.PREDICT_INPUTS
PREDICT_OUTPUTS = signature_constants.PREDICT_OUTPUTS
REGRESS_INPUTS = signature_constants.REGRESS_INPUTS
REGRESS_OUTPUTS = signature_constants.REGRESS_OUTPUTS


def contains_saved_model(export_dir) -> bool:
    """Whether `export_dir` holds a SavedModel (tf.compat.v1.saved_model.contains_saved_model)."""
    return maybe_saved_model_directory(export_dir)

__all__ = ["simple_save", "SavedModelBuilder", "Builder", "load", "maybe_saved_model_directory", "builder", "loader",
           "constants", "signature_constants", "signature_def_utils", "tag_constants", "utils",
           "build_signature_def", "classification_signature_def", "predict_signature_def",
           "regression_signature_def", "is_valid_signature", "build_tensor_info", "get_tensor_from_tensor_info",
           "SERVING", "TRAINING", "DEFAULT_SERVING_SIGNATURE_DEF_KEY", "PREDICT_METHOD_NAME",
           "CLASSIFY_METHOD_NAME", "REGRESS_METHOD_NAME", "GPU", "TPU", "ASSETS_DIRECTORY", "ASSETS_KEY",
           "DEBUG_DIRECTORY", "DEBUG_INFO_FILENAME_PB", "LEGACY_INIT_OP_KEY", "MAIN_OP_KEY", "SAVED_MODEL_FILENAME_PB",
           "SAVED_MODEL_FILENAME_PBTXT", "SAVED_MODEL_SCHEMA_VERSION", "VARIABLES_DIRECTORY", "VARIABLES_FILENAME",
           "CLASSIFY_INPUTS", "CLASSIFY_OUTPUT_CLASSES", "CLASSIFY_OUTPUT_SCORES", "PREDICT_INPUTS",
           "PREDICT_OUTPUTS", "REGRESS_INPUTS", "REGRESS_OUTPUTS", "contains_saved_model", "main_op",
           "main_op_with_restore"]

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
