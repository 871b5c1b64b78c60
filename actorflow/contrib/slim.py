"""af.contrib.slim: the names tf.contrib.slim (TF 1.15) gathers from tf.contrib.layers and
tf.contrib.framework: layers, initializers, regularizers, arg_scope and the model-variable helpers,
plus `slim.losses` (af.losses). slim's training loop (`slim.learning`) and model zoo are not here.
"""
from __future__ import annotations

from actorflow import losses  # noqa: F401  (slim.losses)
from actorflow.contrib import metrics  # noqa: F401  (slim.metrics: the streaming metrics)
from actorflow.contrib import slim_evaluation as evaluation  # noqa: F401  (slim.evaluation)
from actorflow.contrib import slim_learning as learning  # noqa: F401  (slim.learning)
from actorflow.contrib import slim_model_analyzer as model_analyzer  # noqa: F401  (slim.model_analyzer)
from actorflow.contrib.framework import *  # noqa: F401,F403
from actorflow.contrib.framework import __all__ as _framework_all
from actorflow.contrib.layers import *  # noqa: F401,F403
from actorflow.contrib.layers import __all__ as _layers_all
from actorflow.contrib.layers import utils  # noqa: F401  (slim.utils)
from actorflow.contrib.slim_data import (  # noqa: F401  (slim's data pipeline)
    dataset,
    dataset_data_provider,
    parallel_reader,
    prefetch_queue,
    tfexample_decoder,
)

__all__ = sorted(set(_framework_all) | set(_layers_all) | {"losses", "utils", "learning", "evaluation", "metrics", "model_analyzer", "dataset", "dataset_data_provider",
                                                           "parallel_reader", "prefetch_queue", "tfexample_decoder"})
