"""The `af.image` namespace: TF 1.x's `tf.compat.v1.image` names for resizing, cropping, padding,
flipping, rotating, dtype conversion and colour adjustments of images.

Everything here is defined in graph/ops/image_ops.py (the resize ops and AdjustContrastv2 with their
kernels in kernels/cpu/image.py), the codecs in graph/ops/image_codec_ops.py, and random_crop in graph/ops/random_ops.py; this module only gathers
the public names.
"""
from actorflow.graph.ops.image_boxes_ops import *  # noqa: F401,F403
from actorflow.graph.ops.image_boxes_ops import __all__ as _boxes_all
from actorflow.graph.ops.image_codec_ops import *  # noqa: F401,F403
from actorflow.graph.ops.image_codec_ops import __all__ as _codec_all
from actorflow.graph.ops.image_metrics_ops import *  # noqa: F401,F403
from actorflow.graph.ops.image_metrics_ops import __all__ as _metrics_all
from actorflow.graph.ops.image_ops import *  # noqa: F401,F403
from actorflow.graph.ops.image_ops import __all__ as _ops_all

__all__ = list(_ops_all) + list(_codec_all) + list(_metrics_all) + list(_boxes_all)
