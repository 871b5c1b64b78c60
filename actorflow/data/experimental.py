"""af.data.experimental: the names TF 1.x programs use from tf.data.experimental."""
from __future__ import annotations

from actorflow.data.dataset import AUTOTUNE

__all__ = ["AUTOTUNE"]
