"""The `af.image` namespace: TF 1.x's `tf.compat.v1.image` names for resizing, cropping, padding,
flipping, rotating, dtype conversion and colour adjustments of images.

Everything here is defined in graph/ops/image_ops.py (the resize ops and AdjustContrastv2 with their
kernels in kernels/cpu/image.py) and random_crop in graph/ops/random_ops.py; this module only gathers
the public names.
"""
# Patch extraction is an array op (graph/ops/array_ops/patches.py); tf.compat.v1.image names it too.
from actorflow.graph.ops.array_ops.patches import extract_image_patches, extract_patches  # noqa: F401
from actorflow.graph.ops.image_ops import *  # noqa: F401,F403
from actorflow.graph.ops.image_ops import __all__  # noqa: F401

__all__ = list(__all__) + ["extract_image_patches", "extract_patches"]
