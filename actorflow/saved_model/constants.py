"""File and directory names of a SavedModel directory (tf.compat.v1.saved_model.constants).

Differs from TF: the graph file is `saved_model.afm` (actorflow's checksummed msgpack), not
`saved_model.pb`; the variables are an actorflow checkpoint with the prefix `variables/variables`.
"""
SAVED_MODEL_FILENAME = "saved_model.afm"
VARIABLES_DIRECTORY = "variables"
VARIABLES_FILENAME = "variables"
ASSETS_DIRECTORY = "assets"
MAIN_OP_KEY = "saved_model_main_op"
LEGACY_INIT_OP_KEY = "legacy_init_op"

__all__ = ["SAVED_MODEL_FILENAME", "VARIABLES_DIRECTORY", "VARIABLES_FILENAME", "ASSETS_DIRECTORY",
           "MAIN_OP_KEY", "LEGACY_INIT_OP_KEY"]
