"""Keys and method names of signatures (tf.compat.v1.saved_model.signature_constants)."""
DEFAULT_SERVING_SIGNATURE_DEF_KEY = "serving_default"

PREDICT_METHOD_NAME = "tensorflow/serving/predict"
PREDICT_INPUTS = "inputs"
PREDICT_OUTPUTS = "outputs"

CLASSIFY_METHOD_NAME = "tensorflow/serving/classify"
CLASSIFY_INPUTS = "inputs"
CLASSIFY_OUTPUT_CLASSES = "classes"
CLASSIFY_OUTPUT_SCORES = "scores"

REGRESS_METHOD_NAME = "tensorflow/serving/regress"
REGRESS_INPUTS = "inputs"
REGRESS_OUTPUTS = "outputs"

SUPERVISED_TRAIN_METHOD_NAME = "tensorflow/supervised/training"
SUPERVISED_EVAL_METHOD_NAME = "tensorflow/supervised/eval"

__all__ = ["DEFAULT_SERVING_SIGNATURE_DEF_KEY", "PREDICT_METHOD_NAME", "PREDICT_INPUTS", "PREDICT_OUTPUTS",
           "CLASSIFY_METHOD_NAME", "CLASSIFY_INPUTS", "CLASSIFY_OUTPUT_CLASSES", "CLASSIFY_OUTPUT_SCORES",
           "REGRESS_METHOD_NAME", "REGRESS_INPUTS", "REGRESS_OUTPUTS", "SUPERVISED_TRAIN_METHOD_NAME",
           "SUPERVISED_EVAL_METHOD_NAME"]
