"""Box ops: CropAndResize (with its gradients to the image and to the boxes), the non-max
suppressions (NonMaxSuppressionV3, V4, V5, WithOverlaps, CombinedNonMaxSuppression) and
DrawBoundingBoxesV2, with TF 1.x's wrappers.

TF-1.x counterparts: `tf.image.crop_and_resize`, `tf.image.non_max_suppression` (and
`_with_scores`, `_padded`, `_overlaps`), `tf.image.combined_non_max_suppression`,
`tf.image.draw_bounding_boxes`. The kernels are kernels/cpu/image_boxes.py. Only CropAndResize is
differentiable, as in TF.
"""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["crop_and_resize", "non_max_suppression", "non_max_suppression_with_scores", "non_max_suppression_padded",
           "non_max_suppression_overlaps", "combined_non_max_suppression", "draw_bounding_boxes",
           "sample_distorted_bounding_box", "extract_glimpse"]

_FLOATS = (dtypes.float16, dtypes.float32, dtypes.float64)
_IMAGE_TYPES = (dtypes.uint8, dtypes.uint16, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64) + _FLOATS


def _need(t, op, what, dts, rank=None):
    if t.dtype not in dts:
        raise InferenceError(f"{op}: {what} must be one of {[d.name for d in dts]}, got {t.dtype.name} ('{t.name}')")
    if rank is not None and t.shape.ndims not in (None, rank):
        raise InferenceError(f"{op}: {what} must be {rank}-D, but '{t.name}' has shape {t.shape}")


def _dim(t, i):
    return t.shape.dims[i] if t.shape.ndims is not None else None


def _infer_crop_and_resize(inputs, attrs):
    image, boxes, box_ind, crop_size = inputs
    op = "CropAndResize"
    _need(image, op, "image", _IMAGE_TYPES, 4)
    _need(boxes, op, "boxes", (dtypes.float32,), 2)
    _need(box_ind, op, "box_ind", (dtypes.int32,), 1)
    _need(crop_size, op, "crop_size", (dtypes.int32,), 1)
    if attrs.get("method", "bilinear") not in ("bilinear", "nearest"):
        raise InferenceError(f"{op}: method must be 'bilinear' or 'nearest', got {attrs['method']!r}")
    if _dim(boxes, 1) not in (None, 4):
        raise InferenceError(f"{op}: boxes must have 4 columns, got shape {boxes.shape}")
    from actorflow.graph.ops.infer import constant_value
    cs = constant_value(crop_size)
    h, w = (int(cs[0]), int(cs[1])) if cs is not None else (None, None)
    return [(dtypes.float32, TensorShape([_dim(boxes, 0), h, w, _dim(image, 3)]))]


def _infer_grad_image(inputs, attrs):
    from actorflow.graph.ops.infer import constant_value
    v = constant_value(inputs[3])
    shape = TensorShape([int(d) for d in v]) if v is not None else TensorShape([None] * 4)
    return [(dtypes.as_dtype(attrs.get("T", dtypes.float32)), shape)]


def _infer_grad_boxes(inputs, attrs):
    return [(dtypes.float32, TensorShape([_dim(inputs[2], 0), 4]))]


CropAndResize = define_op("CropAndResize", _infer_crop_and_resize)
CropAndResizeGradImage = define_op("CropAndResizeGradImage", _infer_grad_image)
CropAndResizeGradBoxes = define_op("CropAndResizeGradBoxes", _infer_grad_boxes)


@CropAndResize.gradient
def _crop_and_resize_grad(op, grad):
    """TF's _CropAndResizeGrad: to the image when it is float (CropAndResizeGradImage), always to the
    boxes (CropAndResizeGradBoxes, bilinear's derivative even for nearest)."""
    image, boxes, box_ind, _ = op.inputs
    grad = convert_to_tensor(grad)
    if image.shape.is_fully_defined():
        image_shape = convert_to_tensor(np.array(image.shape.as_list(), np.int32))
    else:
        image_shape = array_ops.shape(image)
    g_image = None
    if image.dtype in _FLOATS:
        g_image = CropAndResizeGradImage(grad, boxes, box_ind, image_shape, T=image.dtype,
                                         method=op.attrs.get("method", "bilinear"))
    g_boxes = CropAndResizeGradBoxes(grad, image, boxes, box_ind, method="bilinear")
    return [g_image, g_boxes, None, None]


for _d in (CropAndResizeGradImage, CropAndResizeGradBoxes):
    _d.gradient(lambda op, *grads: [None] * len(op.inputs))


def crop_and_resize(image, boxes, box_ind=None, crop_size=None, method="bilinear", extrapolation_value=0,
                    name=None, box_indices=None):
    """Crops of `image` [batch, height, width, depth] at the normalized `boxes` [num_boxes, 4] (y1, x1,
    y2, x2) of the images `box_ind` names, each resized to `crop_size` = [crop_height, crop_width] by
    bilinear or nearest sampling, float32; samples outside the image are `extrapolation_value`
    (tf.compat.v1.image.crop_and_resize; `box_indices` is TF 2's name of `box_ind`)."""
    if box_ind is None:
        box_ind = box_indices
    if box_ind is None or crop_size is None:
        raise TypeError("crop_and_resize() needs box_ind and crop_size")
    with name_scope(name, "CropAndResize", [image, boxes, box_ind]) as scope:
        image = convert_to_tensor(image, name="image")
        boxes = convert_to_tensor(boxes, dtype=dtypes.float32, name="boxes")
        box_ind = convert_to_tensor(box_ind, dtype=dtypes.int32, name="box_ind")
        crop_size = convert_to_tensor(crop_size, dtype=dtypes.int32, name="crop_size")
        return CropAndResize(image, boxes, box_ind, crop_size, method=str(method),
                             extrapolation_value=float(extrapolation_value), name=scope)


# ---------------------------------------------------------------------------------------------
# Non-max suppression

def _infer_nms(op, n_scalars, outputs):
    def infer(inputs, attrs):
        boxes, scores = inputs[0], inputs[1]
        _need(boxes, op, "boxes", (dtypes.float16, dtypes.float32), 2)
        _need(scores, op, "scores", (dtypes.float16, dtypes.float32), 1)
        for t in inputs[2:2 + n_scalars]:
            if t.shape.ndims not in (None, 0):
                raise InferenceError(f"{op}: '{t.name}' must be a scalar, got shape {t.shape}")
        from actorflow.graph.ops.infer import constant_value
        m = constant_value(inputs[2])
        n = int(m) if m is not None and attrs.get("pad_to_max_output_size", False) else None
        return [(dtypes.int32 if o == "i" else scores.dtype if o == "s" else dtypes.int32,
                 TensorShape([n]) if o in "is" else TensorShape([])) for o in outputs]
    return infer


NonMaxSuppressionV3 = define_op("NonMaxSuppressionV3", _infer_nms("NonMaxSuppressionV3", 3, "i"))
NonMaxSuppressionV4 = define_op("NonMaxSuppressionV4", _infer_nms("NonMaxSuppressionV4", 3, "in"))
NonMaxSuppressionV5 = define_op("NonMaxSuppressionV5", _infer_nms("NonMaxSuppressionV5", 4, "isn"))
NonMaxSuppressionV3.gradient(lambda op, *grads: [None] * len(op.inputs))      # TF: not differentiable


def _scalar(x, dtype, name):
    return convert_to_tensor(x, dtype=dtype, name=name)


def non_max_suppression(boxes, scores, max_output_size, iou_threshold=0.5, score_threshold=float("-inf"),
                        name=None):
    """The indices (int32, at most `max_output_size`) of `boxes` [num_boxes, 4] greedily kept by
    descending score, dropping each box whose IoU with a kept one exceeds `iou_threshold` and those
    scoring `score_threshold` or less (tf.image.non_max_suppression, op NonMaxSuppressionV3)."""
    with name_scope(name, "non_max_suppression") as scope:
        boxes = convert_to_tensor(boxes, name="boxes")
        scores = convert_to_tensor(scores, dtype=boxes.dtype, name="scores")
        return NonMaxSuppressionV3(boxes, scores, _scalar(max_output_size, dtypes.int32, "max_output_size"),
                                   _scalar(iou_threshold, boxes.dtype, "iou_threshold"),
                                   _scalar(score_threshold, boxes.dtype, "score_threshold"), name=scope)


def non_max_suppression_with_scores(boxes, scores, max_output_size, iou_threshold=0.5,
                                    score_threshold=float("-inf"), soft_nms_sigma=0.0, name=None):
    """(selected_indices, selected_scores): non_max_suppression that also returns the kept scores;
    with `soft_nms_sigma` > 0, Soft-NMS (overlapping boxes' scores scaled by exp(-iou^2 / (2 sigma))
    instead of removed) (tf.image.non_max_suppression_with_scores, op NonMaxSuppressionV5)."""
    with name_scope(name, "non_max_suppression_with_scores") as scope:
        boxes = convert_to_tensor(boxes, name="boxes")
        scores = convert_to_tensor(scores, dtype=boxes.dtype, name="scores")
        sel, sc, _ = NonMaxSuppressionV5(boxes, scores, _scalar(max_output_size, dtypes.int32, "max_output_size"),
                                         _scalar(iou_threshold, boxes.dtype, "iou_threshold"),
                                         _scalar(score_threshold, boxes.dtype, "score_threshold"),
                                         _scalar(soft_nms_sigma, boxes.dtype, "soft_nms_sigma"),
                                         pad_to_max_output_size=False, name=scope)
        return sel, sc


def non_max_suppression_padded(boxes, scores, max_output_size, iou_threshold=0.5, score_threshold=float("-inf"),
                               pad_to_max_output_size=False, name=None, sorted_input=False,
                               canonicalized_coordinates=False, tile_size=512):
    """(selected_indices, num_valid): non_max_suppression of boxes [num_boxes, 4], the indices padded
    with zeros to `max_output_size` when `pad_to_max_output_size` (tf.image.non_max_suppression_padded,
    op NonMaxSuppressionV4); boxes [..., num_boxes, 4] with scores [..., num_boxes] (TF 2's batched
    form, padding required) give [..., max_output_size] and [...]. `sorted_input`,
    `canonicalized_coordinates` and `tile_size` are hints to TF's tiled algorithm, whose result
    (that of greedy NMS) this is."""
    with name_scope(name, "non_max_suppression_padded") as scope:
        boxes = convert_to_tensor(boxes, name="boxes")
        scores = convert_to_tensor(scores, dtype=boxes.dtype, name="scores")
        rank = boxes.shape.ndims
        if rank is None or rank == 2:
            return NonMaxSuppressionV4(boxes, scores, _scalar(max_output_size, dtypes.int32, "max_output_size"),
                                       _scalar(iou_threshold, boxes.dtype, "iou_threshold"),
                                       _scalar(score_threshold, boxes.dtype, "score_threshold"),
                                       pad_to_max_output_size=bool(pad_to_max_output_size), name=scope)
        if not pad_to_max_output_size:
            raise ValueError(f"'pad_to_max_output_size' (value {pad_to_max_output_size}) must be True for batched "
                             "input")
        from actorflow.graph.ops.functional_ops import map_fn
        batch_dims = array_ops.shape(boxes)[:-2]
        n = array_ops.shape(boxes)[-2]
        flat_boxes = array_ops.reshape(boxes, array_ops.stack([-1, n, 4]))
        flat_scores = array_ops.reshape(scores, array_ops.stack([-1, n]))

        def one(args):
            b, sc = args
            return tuple(NonMaxSuppressionV4(b, sc, _scalar(max_output_size, dtypes.int32, "max_output_size"),
                                             _scalar(iou_threshold, boxes.dtype, "iou_threshold"),
                                             _scalar(score_threshold, boxes.dtype, "score_threshold"),
                                             pad_to_max_output_size=True))
        idx, valid = map_fn(one, (flat_boxes, flat_scores), dtype=(dtypes.int32, dtypes.int32))
        idx = array_ops.reshape(idx, array_ops.concat([batch_dims, array_ops.reshape(max_output_size, [1])], 0))
        valid = array_ops.reshape(valid, batch_dims, name=scope)
        return idx, valid


def _infer_nms_overlaps(inputs, attrs):
    ov, scores = inputs[0], inputs[1]
    _need(ov, "NonMaxSuppressionWithOverlaps", "overlaps", (dtypes.float32,), 2)
    _need(scores, "NonMaxSuppressionWithOverlaps", "scores", (dtypes.float32,), 1)
    return [(dtypes.int32, TensorShape([None]))]


NonMaxSuppressionWithOverlaps = define_op("NonMaxSuppressionWithOverlaps", _infer_nms_overlaps)
NonMaxSuppressionWithOverlaps.gradient(lambda op, *grads: [None] * len(op.inputs))      # TF: not differentiable


def non_max_suppression_overlaps(overlaps, scores, max_output_size, overlap_threshold=0.5,
                                 score_threshold=float("-inf"), name=None):
    """non_max_suppression with the overlaps of every pair of boxes given as an [n, n] matrix
    (tf.image.non_max_suppression_overlaps, op NonMaxSuppressionWithOverlaps)."""
    with name_scope(name, "non_max_suppression_overlaps") as scope:
        overlaps = convert_to_tensor(overlaps, dtype=dtypes.float32, name="overlaps")
        scores = convert_to_tensor(scores, dtype=dtypes.float32, name="scores")
        return NonMaxSuppressionWithOverlaps(overlaps, scores,
                                             _scalar(max_output_size, dtypes.int32, "max_output_size"),
                                             _scalar(overlap_threshold, dtypes.float32, "overlap_threshold"),
                                             _scalar(score_threshold, dtypes.float32, "score_threshold"), name=scope)


def _infer_combined(inputs, attrs):
    boxes, scores = inputs[0], inputs[1]
    op = "CombinedNonMaxSuppression"
    _need(boxes, op, "boxes", (dtypes.float32,), 4)
    _need(scores, op, "scores", (dtypes.float32,), 3)
    from actorflow.graph.ops.infer import constant_value
    total, per = constant_value(inputs[3]), constant_value(inputs[2])
    classes = _dim(scores, 2)
    size = None
    if total is not None:
        size = int(total)
        if attrs.get("pad_per_class", False):
            size = None if per is None or classes is None else min(size, int(per) * classes)
    b = _dim(boxes, 0)
    return [(dtypes.float32, TensorShape([b, size, 4])), (dtypes.float32, TensorShape([b, size])),
            (dtypes.float32, TensorShape([b, size])), (dtypes.int32, TensorShape([b]))]


CombinedNonMaxSuppression = define_op("CombinedNonMaxSuppression", _infer_combined)


def combined_non_max_suppression(boxes, scores, max_output_size_per_class, max_total_size, iou_threshold=0.5,
                                 score_threshold=float("-inf"), pad_per_class=False, clip_boxes=True, name=None):
    """Per image and class non-max suppression of `boxes` [batch, num_boxes, q, 4] (q 1: shared by
    every class) scored by `scores` [batch, num_boxes, num_classes], the survivors of all classes
    ranked by score: (nmsed_boxes, nmsed_scores, nmsed_classes, valid_detections), zero-padded to
    `max_total_size` (tf.image.combined_non_max_suppression)."""
    with name_scope(name, "combined_non_max_suppression") as scope:
        boxes = convert_to_tensor(boxes, dtype=dtypes.float32, name="boxes")
        scores = convert_to_tensor(scores, dtype=dtypes.float32, name="scores")
        return CombinedNonMaxSuppression(
            boxes, scores, _scalar(max_output_size_per_class, dtypes.int32, "max_output_size_per_class"),
            _scalar(max_total_size, dtypes.int32, "max_total_size"), _scalar(iou_threshold, dtypes.float32, "iou"),
            _scalar(score_threshold, dtypes.float32, "score_threshold"), pad_per_class=bool(pad_per_class),
            clip_boxes=bool(clip_boxes), name=scope)


# ---------------------------------------------------------------------------------------------
# DrawBoundingBoxes

def _infer_draw(inputs, attrs):
    images, boxes = inputs[:2]
    op = "DrawBoundingBoxesV2" if len(inputs) == 3 else "DrawBoundingBoxes"
    _need(images, op, "images", (dtypes.float16, dtypes.float32), 4)
    _need(boxes, op, "boxes", (dtypes.float32,), 3)
    if len(inputs) == 3:
        _need(inputs[2], op, "colors", (dtypes.float32,), 2)
    return [(images.dtype, images.shape)]


DrawBoundingBoxes = define_op("DrawBoundingBoxes", _infer_draw)       # TF's default colours
DrawBoundingBoxes.gradient(lambda op, *grads: [None] * len(op.inputs))     # TF: not differentiable
DrawBoundingBoxesV2 = define_op("DrawBoundingBoxesV2", _infer_draw)       # no gradient, as in TF


def draw_bounding_boxes(images, boxes, name=None, colors=None):
    """`images` [batch, height, width, depth] (float) with the outlines of `boxes` [batch, num_boxes, 4]
    (normalized y_min, x_min, y_max, x_max) drawn one pixel wide, box k in colour k of `colors`
    [num_colors, 4] (cycling; TF's default table without), white on gray images
    (tf.compat.v1.image.draw_bounding_boxes)."""
    with name_scope(name, "draw_bounding_boxes") as scope:
        images = convert_to_tensor(images, name="images")
        boxes = convert_to_tensor(boxes, dtype=dtypes.float32, name="boxes")
        if colors is None:
            return DrawBoundingBoxes(images, boxes, name=scope)
        colors = convert_to_tensor(colors, dtype=dtypes.float32, name="colors")
        return DrawBoundingBoxesV2(images, boxes, math_ops.cast(colors, dtypes.float32), name=scope)


# ---------------------------------------------------------------------------------------------
# SampleDistortedBoundingBox

def _infer_sample_box(inputs, attrs):
    size, boxes, covered = inputs
    op = "SampleDistortedBoundingBoxV2"
    _need(size, op, "image_size", (dtypes.uint8, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64), 1)
    _need(boxes, op, "bounding_boxes", (dtypes.float32,), 3)
    if covered.shape.ndims not in (None, 0):
        raise InferenceError(f"{op}: min_object_covered must be a scalar, got shape {covered.shape}")
    return [(size.dtype, TensorShape([3])), (size.dtype, TensorShape([3])), (dtypes.float32, TensorShape([1, 1, 4]))]


SampleDistortedBoundingBoxV2 = define_op("SampleDistortedBoundingBoxV2", _infer_sample_box, stateful=True)
SampleDistortedBoundingBoxV2.gradient(lambda op, *grads: [None] * len(op.inputs))    # TF: not differentiable


def sample_distorted_bounding_box(image_size, bounding_boxes, seed=None, seed2=None, min_object_covered=0.1,
                                  aspect_ratio_range=None, area_range=None, max_attempts=None,
                                  use_image_if_no_bounding_boxes=None, name=None):
    """A random crop of an image of `image_size` [height, width, channels] for augmentation:
    (begin, size, bboxes) for tf.slice and draw_bounding_boxes. Up to `max_attempts` crops with an
    aspect ratio in `aspect_ratio_range` and an area fraction in `area_range` are drawn until one
    covers `min_object_covered` of some box of `bounding_boxes` [batch, N, 4]; else the whole image
    (tf.compat.v1.image.sample_distorted_bounding_box, TF's algorithm; the numbers drawn differ from
    TF's, and `seed` follows the graph seed as every actorflow random op does)."""
    from actorflow.graph.ops.random_ops import get_seed
    with name_scope(name, "sample_distorted_bounding_box") as scope:
        s1, s2 = get_seed(seed)
        if seed2 is not None:
            s2 = seed2
        image_size = convert_to_tensor(image_size, name="image_size")
        boxes = convert_to_tensor(bounding_boxes, dtype=dtypes.float32, name="bounding_boxes")
        covered = convert_to_tensor(min_object_covered, dtype=dtypes.float32, name="min_object_covered")
        return SampleDistortedBoundingBoxV2(
            image_size, boxes, covered, seed=int(s1 or 0), seed2=int(s2 or 0),
            aspect_ratio_range=tuple(float(v) for v in (aspect_ratio_range or (0.75, 1.33))),
            area_range=tuple(float(v) for v in (area_range or (0.05, 1.0))),
            max_attempts=int(max_attempts or 100),
            use_image_if_no_bounding_boxes=bool(use_image_if_no_bounding_boxes), name=scope)



# ---------------------------------------------------------------------------------------------
# ExtractGlimpse

def _infer_glimpse(inputs, attrs):
    images, size, offsets = inputs
    op = "ExtractGlimpse"
    _need(images, op, "input", (dtypes.float32,), 4)
    _need(size, op, "size", (dtypes.int32,), 1)
    _need(offsets, op, "offsets", (dtypes.float32,), 2)
    if attrs.get("noise", "uniform") not in ("uniform", "gaussian", "zero", ""):
        raise InferenceError(f"{op}: noise must be 'uniform', 'gaussian' or 'zero', got {attrs['noise']!r}")
    from actorflow.graph.ops.infer import constant_value
    v = constant_value(size)
    h, w = (int(v[0]), int(v[1])) if v is not None else (None, None)
    return [(dtypes.float32, TensorShape([_dim(images, 0), h, w, _dim(images, 3)]))]


ExtractGlimpse = define_op("ExtractGlimpse", _infer_glimpse, stateful=True)     # its noise is random
ExtractGlimpse.gradient(lambda op, *grads: [None, None, None])      # TF: not differentiable


def extract_glimpse(input, size, offsets, centered=True, normalized=True, uniform_noise=True, name=None):  # noqa: A002
    """A window of `size` [height, width] from each image of `input` [batch, height, width, depth]
    (float32) at `offsets` [batch, 2] (y, x): relative to the image centre with `centered`, in
    [-1, 1] units with `normalized` as well, else in pixels; truncated to whole pixels. Where the
    window leaves the image it holds uniform noise in the image's [min, max), as TF 1.x's
    extract_glimpse fills it (whatever `uniform_noise` says, as in TF 2.21) (tf.compat.v1.image.extract_glimpse)."""
    with name_scope(name, "ExtractGlimpse", [input]) as scope:
        images = convert_to_tensor(input, dtype=dtypes.float32, name="input")
        size = convert_to_tensor(size, dtype=dtypes.int32, name="size")
        offsets = convert_to_tensor(offsets, dtype=dtypes.float32, name="offsets")
        return ExtractGlimpse(images, size, offsets, centered=bool(centered), normalized=bool(normalized),
                              uniform_noise=bool(uniform_noise), noise="uniform", name=scope)
