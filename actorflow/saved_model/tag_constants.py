"""Tags that select a meta graph in a SavedModel (tf.compat.v1.saved_model.tag_constants)."""
SERVING = "serve"
TRAINING = "train"
EVAL = "eval"
GPU = "gpu"
TPU = "tpu"

__all__ = ["SERVING", "TRAINING", "EVAL", "GPU", "TPU"]
