"""af.io: TF 2.x's `tf.io` namespace as far as actorflow has it: `af.io.gfile` (see actorflow/gfile.py)."""
from __future__ import annotations

from actorflow import gfile

__all__ = ["gfile"]
