"""af.contrib.image: tf.contrib.image's projective transforms (transform, rotate, translate and
the helpers that build and compose transforms), for augmentation pipelines; see
actorflow/graph/ops/image_transform_ops.py."""
from __future__ import annotations

from actorflow.graph.ops.image_transform_ops import (
    angles_to_projective_transforms,
    compose_transforms,
    flat_transforms_to_matrices,
    matrices_to_flat_transforms,
    rotate,
    transform,
    translate,
    translations_to_projective_transforms,
)

__all__ = ["transform", "rotate", "translate", "angles_to_projective_transforms",
           "translations_to_projective_transforms", "compose_transforms", "flat_transforms_to_matrices",
           "matrices_to_flat_transforms"]
