"""af.compat: `af.compat.v1` is actorflow itself, whose API is TF 1.x's, so that programs written
against `tf.compat.v1` port by their import too."""
from __future__ import annotations

import sys

from actorflow.graph.tensor_shape import dimension_at_index, dimension_value

v1 = sys.modules["actorflow"]

__all__ = ["v1", "dimension_value", "dimension_at_index"]
