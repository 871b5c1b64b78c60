"""The `af.image` namespace: TF 1.x's `tf.compat.v1.image` names for resizing, cropping, padding,
flipping, rotating, dtype conversion and colour adjustments of images.

Everything here is defined in graph/ops/image_ops.py (resizes, crops, flips, colour: kernels in
kernels/cpu/image.py and image_colour.py), image_codec_ops.py (PNG, JPEG, GIF, BMP, WebP:
kernels/cpu/image_codec.py), image_metrics_ops.py (gradients, Sobel, PSNR, SSIM), image_boxes_ops.py
(crop_and_resize, non-max suppression, bounding boxes, glimpses: kernels/cpu/image_boxes.py),
array_ops/patches.py and random_ops.py (random_crop); this module only gathers the public names.
"""
# Patch extraction is an array op (graph/ops/array_ops/patches.py); tf.compat.v1.image names it too.
from actorflow.graph.ops.array_ops.patches import extract_image_patches, extract_patches  # noqa: F401
from actorflow.graph.ops.image_boxes_ops import *  # noqa: F401,F403
from actorflow.graph.ops.image_boxes_ops import __all__ as _boxes_all
from actorflow.graph.ops.image_codec_ops import *  # noqa: F401,F403
from actorflow.graph.ops.image_codec_ops import __all__ as _codec_all
from actorflow.graph.ops.image_metrics_ops import *  # noqa: F401,F403
from actorflow.graph.ops.image_metrics_ops import __all__ as _metrics_all
from actorflow.graph.ops.image_ops import *  # noqa: F401,F403
from actorflow.graph.ops.image_ops import __all__ as _ops_all

__all__ = (list(_ops_all) + list(_codec_all) + list(_metrics_all) + list(_boxes_all)
           + ["extract_image_patches", "extract_patches"])
