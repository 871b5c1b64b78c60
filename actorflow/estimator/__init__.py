"""af.estimator: TF 1.x's high-level training API (tf.estimator, TF 1.15's semantics), over
af.train's MonitoredTrainingSession, checkpoint hooks and Saver, af.metrics and af.data."""
from __future__ import annotations

from actorflow.estimator import export, inputs, tpu
from actorflow.estimator.canned import DNNClassifier, DNNRegressor, LinearClassifier, LinearRegressor
from actorflow.estimator.estimator import Estimator, WarmStartSettings
from actorflow.estimator.model_fn import EstimatorSpec, ModeKeys
from actorflow.estimator.run_config import RunConfig
from actorflow.estimator.training import EvalSpec, TrainSpec, train_and_evaluate
from actorflow.train.session_run_hook import CheckpointSaverListener

__all__ = ["Estimator", "EstimatorSpec", "ModeKeys", "RunConfig", "WarmStartSettings", "TrainSpec", "EvalSpec",
           "train_and_evaluate", "CheckpointSaverListener", "inputs", "export", "tpu",
           "DNNClassifier", "DNNRegressor", "LinearClassifier", "LinearRegressor"]
