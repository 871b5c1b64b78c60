"""Projective image transforms (tf.contrib.image's transform/rotate/translate; op
ImageProjectiveTransformV2).

Each image of a batch [n, h, w, c] maps output pixel (x, y) to input point
((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k), k = c0 x + c1 y + 1, for its transform
[a0, a1, a2, b0, b1, b2, c0, c1] (one transform, or one per image). NEAREST reads the input pixel at
the rounded point; BILINEAR blends the four pixels around it; pixels outside the input read as 0
(fill_mode CONSTANT). The gradient with respect to the images is TF's: the output gradient
transformed by the inverse transforms.
"""
from __future__ import annotations

from actorflow.graph import dtypes
from actorflow.graph.graph import convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import array_ops, linalg_ops, math_ops
from actorflow.graph.ops.infer import constant_value
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["transform", "rotate", "translate", "angles_to_projective_transforms",
           "translations_to_projective_transforms", "compose_transforms", "flat_transforms_to_matrices",
           "matrices_to_flat_transforms"]

_INTERPOLATIONS = ("NEAREST", "BILINEAR")


def _infer(inputs, attrs):
    images, transforms, output_shape = inputs
    if images.shape.ndims not in (None, 4):
        raise InferenceError(f"images must be [batch, height, width, channels], got shape {images.shape}")
    if transforms.dtype is not dtypes.float32:
        raise InferenceError(f"transforms must be float32, got {transforms.dtype.name}")
    if transforms.shape.ndims not in (None, 2) or (transforms.shape.ndims == 2 and transforms.shape[1] not in (None, 8)):
        raise InferenceError(f"transforms must be [1 or batch, 8], got shape {transforms.shape}")
    interp = attrs.get("interpolation", "NEAREST")
    interp = interp.decode() if isinstance(interp, bytes) else interp
    if interp not in _INTERPOLATIONS:
        raise InferenceError(f"interpolation must be one of {_INTERPOLATIONS}, got {interp!r}")
    fill = attrs.get("fill_mode", "CONSTANT")
    fill = fill.decode() if isinstance(fill, bytes) else fill
    if fill != "CONSTANT":
        raise InferenceError(f"fill_mode {fill!r} is not supported (only CONSTANT, TF 1.x's)")
    size = constant_value(output_shape)
    b = images.shape[0] if images.shape.ndims == 4 else None
    c = images.shape[3] if images.shape.ndims == 4 else None
    hw = [None, None] if size is None else [int(v) for v in size.reshape(-1)]
    return [(images.dtype, TensorShape([b] + hw + [c]))]


ImageProjectiveTransformV2 = define_op("ImageProjectiveTransformV2", _infer)


def _transform_grad(op, grad):
    transforms = op.inputs[1]
    inverse = matrices_to_flat_transforms(linalg_ops.matrix_inverse(flat_transforms_to_matrices(transforms)))
    size = array_ops.shape(op.inputs[0])[1:3]
    back = ImageProjectiveTransformV2(grad, inverse, size, interpolation=op.attrs.get("interpolation", "NEAREST"),
                                      fill_mode="CONSTANT")
    return [back, None, None]


ImageProjectiveTransformV2.gradient(_transform_grad)


def flat_transforms_to_matrices(transforms):
    """[n, 8] transforms as [n, 3, 3] matrices (the ninth entry 1)."""
    transforms = convert_to_tensor(transforms, name="transforms")
    n = array_ops.shape(transforms)[0]
    ones = array_ops.ones(array_ops.stack([n, 1]), dtype=transforms.dtype)
    return array_ops.reshape(array_ops.concat([transforms, ones], 1), [-1, 3, 3])


def matrices_to_flat_transforms(matrices):
    """[n, 3, 3] matrices as [n, 8] transforms, normalised so that the ninth entry is 1."""
    flat = array_ops.reshape(convert_to_tensor(matrices, name="matrices"), [-1, 9])
    flat = flat / flat[:, 8:9]
    return flat[:, :8]


def compose_transforms(*transforms):
    """One transform per image doing `transforms[0]` after ... after `transforms[-1]` (their matrices
    multiplied left to right)."""
    if not transforms:
        raise ValueError("compose_transforms: transforms cannot be empty")
    with name_scope(None, "compose_transforms"):
        composed = flat_transforms_to_matrices(transforms[0])
        for t in transforms[1:]:
            composed = math_ops.matmul(composed, flat_transforms_to_matrices(t))
        return matrices_to_flat_transforms(composed)


def angles_to_projective_transforms(angles, image_height, image_width, name=None):
    """Transforms rotating images counterclockwise by `angles` (radians) about their centres."""
    with name_scope(name, "angles_to_projective_transforms"):
        angles = convert_to_tensor(angles, dtype=dtypes.float32, name="angles")
        if angles.shape.ndims == 0:
            angles = array_ops.reshape(angles, [1])
        elif angles.shape.ndims not in (None, 1):
            raise ValueError(f"angles should have rank 0 or 1, got shape {angles.shape}")
        h = math_ops.cast(image_height, dtypes.float32) - 1.0
        w = math_ops.cast(image_width, dtypes.float32) - 1.0
        cos, sin = math_ops.cos(angles), math_ops.sin(angles)
        x_offset = (w - (cos * w - sin * h)) / 2.0
        y_offset = (h - (sin * w + cos * h)) / 2.0
        zeros = array_ops.zeros_like(angles)
        return array_ops.stack([cos, -sin, x_offset, sin, cos, y_offset, zeros, zeros], axis=1)


def translations_to_projective_transforms(translations, name=None):
    """Transforms shifting images by `translations` [n, 2] (dx, dy) pixels."""
    with name_scope(name, "translations_to_projective_transforms"):
        t = convert_to_tensor(translations, dtype=dtypes.float32, name="translations")
        if t.shape.ndims == 1:
            t = array_ops.reshape(t, [1, 2])
        if t.shape.ndims not in (None, 2):
            raise ValueError(f"translations should have rank 1 or 2, got shape {t.shape}")
        one, zero = array_ops.ones_like(t[:, 0]), array_ops.zeros_like(t[:, 0])
        return array_ops.stack([one, zero, -t[:, 0], zero, one, -t[:, 1], zero, zero], axis=1)


def transform(images, transforms, interpolation="NEAREST", output_shape=None, name=None):
    """`images` ([h, w], [h, w, c] or [n, h, w, c]) under projective `transforms` ([8] or [n, 8])
    (tf.contrib.image.transform); see the module's docstring."""
    with name_scope(name, "transform", [images, transforms]):
        images = convert_to_tensor(images, name="images")
        rank = images.shape.ndims
        if rank not in (2, 3, 4):
            raise ValueError(f"transform: images must have rank 2, 3 or 4, got shape {images.shape}")
        x = images
        if rank == 2:
            x = x[None, :, :, None]
        elif rank == 3:
            x = x[None]
        if output_shape is None:
            output_shape = array_ops.shape(x)[1:3]
        output_shape = convert_to_tensor(output_shape, dtype=dtypes.int32, name="output_shape")
        t = convert_to_tensor(transforms, dtype=dtypes.float32, name="transforms")
        if t.shape.ndims == 1:
            t = t[None]
        elif t.shape.ndims != 2:
            raise ValueError(f"transform: transforms should have rank 1 or 2, got shape {t.shape}")
        interp = interpolation.upper()
        if interp not in _INTERPOLATIONS:
            raise ValueError(f"transform: interpolation must be NEAREST or BILINEAR, got {interpolation!r}")
        out = ImageProjectiveTransformV2(x, t, output_shape, interpolation=interp, fill_mode="CONSTANT")
        if rank == 2:
            return out[0, :, :, 0]
        return out[0] if rank == 3 else out


def rotate(images, angles, interpolation="NEAREST", name=None):
    """`images` rotated counterclockwise by `angles` radians (one, or one per image) about their
    centres, the corners filled with zeros (tf.contrib.image.rotate)."""
    with name_scope(name, "rotate"):
        images = convert_to_tensor(images, name="images")
        shape = array_ops.shape(images)
        r = images.shape.ndims
        h, w = (shape[0], shape[1]) if r in (2, 3) else (shape[1], shape[2])
        return transform(images, angles_to_projective_transforms(angles, h, w), interpolation=interpolation)


def translate(images, translations, interpolation="NEAREST", name=None):
    """`images` shifted by `translations` ([dx, dy], or one per image) pixels (tf.contrib.image.translate)."""
    with name_scope(name, "translate"):
        return transform(images, translations_to_projective_transforms(translations), interpolation=interpolation)


