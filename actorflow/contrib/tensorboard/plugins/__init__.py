"""af.contrib.tensorboard.plugins: the embedding projector (`projector`)."""
from __future__ import annotations

from actorflow.contrib.tensorboard.plugins import projector

__all__ = ["projector"]
