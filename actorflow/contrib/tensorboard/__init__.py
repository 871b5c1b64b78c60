"""af.contrib.tensorboard: tf.contrib.tensorboard (TF 1.x), whose one public part is the embedding
projector's configuration, `plugins.projector`."""
from __future__ import annotations

from actorflow.contrib.tensorboard import plugins

__all__ = ["plugins"]
