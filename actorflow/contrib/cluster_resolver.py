"""af.contrib.cluster_resolver: TF 1.15's tf.contrib.cluster_resolver names, af.distribute.cluster_resolver's
resolvers (TPUClusterResolver among them: a clear error, actorflow has no TPU)."""
from __future__ import annotations

from actorflow.distribute.cluster_resolver import *  # noqa: F401,F403
from actorflow.distribute.cluster_resolver import __all__  # noqa: F401
