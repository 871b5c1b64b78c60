"""Image ops: the resize ops (ResizeBilinear, ResizeNearestNeighbor, ResizeBicubic, ResizeArea) with
their gradient ops, AdjustContrastv2, and TF 1.x's `tf.image` functions built on them and on the
array ops (flips are ReverseV2, crops Slice, pads Pad), as TF's image_ops_impl.py builds them.

TF-1.x counterparts: `tf.compat.v1.image.*`. The resize ops follow TF's kernels' pixel conventions
exactly: a resized pixel y samples the input at y * scale (legacy) or (y + 0.5) * scale - 0.5
(`half_pixel_centers`), scale = in / out, or (in - 1) / (out - 1) with `align_corners`; the
arithmetic is float32, as TF's. The random functions draw with the random ops, in TF's order and
shapes, so under the same seeds they draw TF's numbers (flips, crops, brightness deltas, contrast
factors...); the colour adjustments' own arithmetic may still differ from TF's kernels in the last bit.
"""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.control_flow import case, cond
from actorflow.graph.graph import Tensor, control_dependencies, convert_to_tensor, name_scope
from actorflow.graph.op_def import InferenceError, define_op
from actorflow.graph.ops import array_ops, math_ops, random_ops
from actorflow.graph.ops.check_ops import Assert
from actorflow.graph.ops.constant import constant, identity
from actorflow.graph.ops.infer import constant_value
from actorflow.graph.ops.math_more_ops import saturate_cast
from actorflow.graph.ops.sort_ops import reverse
from actorflow.graph.tensor_shape import TensorShape

__all__ = ["ResizeMethod", "resize_images", "resize", "resize_bilinear", "resize_nearest_neighbor", "resize_bicubic",
           "resize_area", "resize_image_with_crop_or_pad", "resize_with_crop_or_pad", "central_crop",
           "crop_to_bounding_box", "pad_to_bounding_box", "flip_left_right", "flip_up_down", "random_flip_left_right",
           "random_flip_up_down", "transpose_image", "transpose", "rot90", "per_image_standardization",
           "convert_image_dtype", "rgb_to_grayscale", "grayscale_to_rgb", "adjust_brightness", "adjust_contrast",
           "random_brightness", "random_contrast", "random_crop", "adjust_gamma", "rgb_to_yiq", "yiq_to_rgb",
           "rgb_to_yuv", "yuv_to_rgb", "rgb_to_hsv", "hsv_to_rgb", "adjust_hue", "adjust_saturation", "random_hue",
           "random_saturation", "resize_image_with_pad"]


class ResizeMethod:
    """The `method` of `resize_images` (tf.compat.v1.image.ResizeMethod: TF 1.x's integer codes)."""
    BILINEAR = 0
    NEAREST_NEIGHBOR = 1
    BICUBIC = 2
    AREA = 3


# ---------------------------------------------------------------------------------------------
# The resize ops

_INTS = (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.int64)
_FLOATS = (dtypes.float16, dtypes.float32, dtypes.float64)
_RESIZE_TYPES = _INTS + _FLOATS
_NN_GRAD_TYPES = (dtypes.uint8, dtypes.int8, dtypes.int32) + _FLOATS


def _check_corners(attrs):
    if attrs.get("half_pixel_centers", False) and attrs.get("align_corners", False):
        raise InferenceError("If half_pixel_centers is True, align_corners must be False.")


def _check_images(t, what, allowed):
    if t.dtype not in allowed:
        raise InferenceError(f"{what} must be one of {[d.name for d in allowed]}, got {t.dtype.name} ('{t.name}')")
    if t.shape.ndims is not None and t.shape.ndims != 4:
        raise InferenceError(f"{what} must be 4-dimensional, but '{t.name}' has shape {t.shape}")


def _size_dims(size):
    """The (height, width) a size tensor names, each None when not known at build time."""
    if size.dtype is not dtypes.int32:
        raise InferenceError(f"size must be an int32 tensor, got {size.dtype.name} ('{size.name}')")
    if not size.shape.is_compatible_with(TensorShape([2])):
        raise InferenceError(f"size must be 1-dimensional with 2 elements, but '{size.name}' has shape {size.shape}")
    v = constant_value(size)
    if v is None:
        return None, None
    h, w = (int(d) for d in np.reshape(v, -1))
    if h <= 0 or w <= 0:
        raise InferenceError(f"output dimensions must be positive, got size [{h}, {w}]")
    return h, w


def _resized(images, size, out_dtype):
    dims = images.shape.dims or [None] * 4
    h, w = _size_dims(size)
    return [(out_dtype, TensorShape([dims[0], h, w, dims[3]]))]


def _infer_resize(float_output):
    def infer(inputs, attrs):
        images, size = inputs
        _check_corners(attrs)
        _check_images(images, "images", _RESIZE_TYPES)
        return _resized(images, size, dtypes.float32 if float_output else images.dtype)
    return infer


def _infer_resize_grad(inputs, attrs):
    grads, original = inputs
    _check_corners(attrs)
    _check_images(grads, "grads", (dtypes.float32,))
    _check_images(original, "original_image", _FLOATS)
    return [(original.dtype, original.shape if original.shape.ndims is not None else TensorShape([None] * 4))]


def _infer_nn_grad(inputs, attrs):
    grads, size = inputs
    _check_corners(attrs)
    _check_images(grads, "grads", _NN_GRAD_TYPES)
    return _resized(grads, size, grads.dtype)


ResizeBilinear = define_op("ResizeBilinear", _infer_resize(True))
ResizeBilinearGrad = define_op("ResizeBilinearGrad", _infer_resize_grad)
ResizeNearestNeighbor = define_op("ResizeNearestNeighbor", _infer_resize(False))
ResizeNearestNeighborGrad = define_op("ResizeNearestNeighborGrad", _infer_nn_grad)
ResizeBicubic = define_op("ResizeBicubic", _infer_resize(True))
ResizeBicubicGrad = define_op("ResizeBicubicGrad", _infer_resize_grad)
ResizeArea = define_op("ResizeArea", _infer_resize(True))     # no gradient, as in TF


def _corners(op):
    return {"align_corners": op.attrs.get("align_corners", False),
            "half_pixel_centers": op.attrs.get("half_pixel_centers", False)}


def _dense(grad):
    return convert_to_tensor(grad)


@ResizeBilinear.gradient
def _resize_bilinear_grad(op, grad):
    """TF's _ResizeBilinearGrad: ResizeBilinearGrad of the float32 gradient onto the input's dtype."""
    x = op.inputs[0]
    if grad is None or x.dtype not in _FLOATS:
        return [None, None]
    return [ResizeBilinearGrad(_dense(grad), x, **_corners(op)), None]


@ResizeBicubic.gradient
def _resize_bicubic_grad(op, grad):
    """TF's _ResizeBicubicGrad: float32 and float64 inputs only."""
    x = op.inputs[0]
    if grad is None or x.dtype not in (dtypes.float32, dtypes.float64):
        return [None, None]
    return [ResizeBicubicGrad(_dense(grad), x, **_corners(op)), None]


@ResizeNearestNeighbor.gradient
def _resize_nearest_neighbor_grad(op, grad):
    """TF's _ResizeNearestNeighborGrad: every resized pixel's gradient added to the pixel it copied."""
    x = op.inputs[0]
    if grad is None or x.dtype not in _NN_GRAD_TYPES:
        return [None, None]
    hw = x.shape.dims[1:3] if x.shape.dims is not None else [None, None]
    if all(d is not None for d in hw):
        size = constant(np.array(hw, np.int32))
    else:
        size = array_ops.strided_slice(array_ops.shape(x), [1], [3])
    return [ResizeNearestNeighborGrad(_dense(grad), size, **_corners(op)), None]


@ResizeBilinearGrad.gradient
def _resize_bilinear_grad_grad(op, grad):
    """TF marks ResizeBilinearGrad not differentiable (and has no gradient for the other two
    gradient ops): no second derivatives through a resize."""
    return [None, None]


def _resize_op(op_def, images, size, name, **attrs):
    with name_scope(name, op_def.type, [images, size]) as scope:
        images = convert_to_tensor(images, name="images")
        size = convert_to_tensor(size, dtype=dtypes.int32, name="size")
        return op_def(images, size, name=scope, **attrs)


def resize_bilinear(images, size, align_corners=False, name=None, half_pixel_centers=False):
    """`images` [batch, height, width, channels] resized to `size` by bilinear interpolation, as
    float32 (tf.compat.v1.image.resize_bilinear, op ResizeBilinear)."""
    return _resize_op(ResizeBilinear, images, size, name, align_corners=bool(align_corners),
                      half_pixel_centers=bool(half_pixel_centers))


def resize_nearest_neighbor(images, size, align_corners=False, name=None, half_pixel_centers=False):
    """`images` [batch, height, width, channels] resized to `size` by nearest neighbours, in their own
    dtype (tf.compat.v1.image.resize_nearest_neighbor, op ResizeNearestNeighbor)."""
    return _resize_op(ResizeNearestNeighbor, images, size, name, align_corners=bool(align_corners),
                      half_pixel_centers=bool(half_pixel_centers))


def resize_bicubic(images, size, align_corners=False, name=None, half_pixel_centers=False):
    """`images` [batch, height, width, channels] resized to `size` by bicubic interpolation (Keys'
    kernel, a = -0.75, or -0.5 with `half_pixel_centers`), as float32 (tf.compat.v1.image.resize_bicubic,
    op ResizeBicubic)."""
    return _resize_op(ResizeBicubic, images, size, name, align_corners=bool(align_corners),
                      half_pixel_centers=bool(half_pixel_centers))


def resize_area(images, size, align_corners=False, name=None):
    """`images` [batch, height, width, channels] resized to `size` by area averaging, as float32
    (tf.compat.v1.image.resize_area, op ResizeArea; no gradient, as in TF)."""
    return _resize_op(ResizeArea, images, size, name, align_corners=bool(align_corners))


# ---------------------------------------------------------------------------------------------
# Helpers shared by the image functions (TF's _ImageDimensions, _assert, with_dependencies)

def _is_tensor(x) -> bool:
    return isinstance(x, Tensor)


def _image_dims(image, rank):
    """Each dimension of `image`: an int where known at build time, else an int32 scalar tensor."""
    dims = image.shape.with_rank(rank).dims
    if all(d is not None for d in dims):
        return list(dims)
    dynamic = array_ops.unstack(array_ops.shape(image), rank)
    return [d if d is not None else t for d, t in zip(dims, dynamic)]


def _assert(cond_, msg):
    """TF's _assert: a Python condition that fails raises ValueError now; a tensor one becomes an
    Assert op that fails the step."""
    if _is_tensor(cond_):
        return [Assert(cond_, [msg])]
    if not cond_:
        raise ValueError(msg)
    return []


def _with_dependencies(deps, t):
    if not deps:
        return t
    with control_dependencies(deps):
        return identity(t)


def _ge(a, b):
    return math_ops.greater_equal(a, b) if _is_tensor(a) or _is_tensor(b) else a >= b


def _gt(a, b):
    return math_ops.greater(a, b) if _is_tensor(a) or _is_tensor(b) else a > b


def _detail(**values):
    """The values, as " (name value, ...)", for a message, when all are known at build time; else an
    empty string (the step's error then names the op)."""
    if any(_is_tensor(v) for v in values.values()):
        return ""
    return " (" + ", ".join(f"{k} {v}" for k, v in values.items()) + ")"


def _check_image_rank(image, what="image"):
    """TF's _CheckAtLeast3DImage(require_static=False): the rank (at least 3) and non-zero inner
    dimensions, statically where known, else by an assertion."""
    shape = image.shape
    if shape.ndims is not None and shape.ndims < 3:
        raise ValueError(f"'{what}' (shape {image.shape}) must be at least three-dimensional.")
    inner = shape.dims[-3:] if shape.ndims is not None else [None] * 3
    if any(d == 0 for d in inner):
        raise ValueError(f"inner 3 dims of '{what}.shape' must be > 0: {shape}")
    if all(d is not None for d in inner):
        return []
    return [Assert(math_ops.reduce_all(math_ops.greater(array_ops.shape(image)[-3:], 0)),
                   [f"inner 3 dims of '{what}.shape' must be > 0."])]


def _to_batch(image, op_name):
    """`image` as a batch (a single image gains a batch dimension) and whether it was one."""
    nd = image.shape.ndims
    if nd == 4:
        return image, True
    if nd == 3:
        return array_ops.expand_dims(image, 0), False
    if nd is None:
        image = array_ops.expand_dims(image, 0)
        image.set_shape([None] * 4)
        return image, False
    raise ValueError(f"{op_name}: 'image' (shape {image.shape}) must have either 3 or 4 dimensions.")


def _from_batch(t, is_batch):
    return t if is_batch else array_ops.squeeze(t, axis=[0])


def _int32s(values):
    return array_ops.stack([v if _is_tensor(v) else np.int32(v) for v in values])


# ---------------------------------------------------------------------------------------------
# resize_images

def resize_images(images, size, method=ResizeMethod.BILINEAR, align_corners=False, preserve_aspect_ratio=False,
                  name=None):
    """`images` (one [height, width, channels] or a batch of them) resized to `size` = [new_height,
    new_width] by `method` (tf.compat.v1.image.resize_images). Bilinear, bicubic and area return
    float32, nearest neighbour the input's dtype; when the size is already right (known at build
    time) the images come back unchanged, as in TF."""
    ops_by_method = {ResizeMethod.BILINEAR: ResizeBilinear, ResizeMethod.NEAREST_NEIGHBOR: ResizeNearestNeighbor,
                     ResizeMethod.BICUBIC: ResizeBicubic, ResizeMethod.AREA: ResizeArea}
    aliases = {"bilinear": 0, "nearest": 1, "bicubic": 2, "area": 3}
    key = aliases.get(method, method) if isinstance(method, str) else method
    if key not in ops_by_method:
        raise ValueError(f"Resize method is not implemented: {method}")
    op_def = ops_by_method[key]
    with name_scope(name, "resize", [images, size]):
        images = convert_to_tensor(images, name="images")
        if images.shape.ndims is None:
            raise ValueError("'images' contains no shape.")
        is_batch = True
        if images.shape.ndims == 3:
            is_batch = False
            images = array_ops.expand_dims(images, 0)
        elif images.shape.ndims != 4:
            raise ValueError("'images' must have either 3 or 4 dimensions.")
        _, height, width, _ = images.shape.as_list()
        try:
            size = convert_to_tensor(size, dtype=dtypes.int32, name="size")
        except (TypeError, ValueError):
            raise ValueError("'size' must be a 1-D int32 Tensor") from None
        if not size.shape.is_compatible_with(TensorShape([2])):
            raise ValueError("'size' must be a 1-D Tensor of 2 elements: new_height, new_width")
        if preserve_aspect_ratio:
            _, cur_h, cur_w, _ = _image_dims(images, 4)
            f32 = dtypes.float32
            cur_h = math_ops.cast(cur_h, f32)
            cur_w = math_ops.cast(cur_w, f32)
            scale = math_ops.minimum(math_ops.cast(size[0], f32) / cur_h, math_ops.cast(size[1], f32) / cur_w)
            size = array_ops.stack([math_ops.cast(math_ops.round(scale * cur_h), dtypes.int32),
                                    math_ops.cast(math_ops.round(scale * cur_w), dtypes.int32)], name="size")
        v = constant_value(size)
        new_h, new_w = (None, None) if v is None else (int(d) for d in np.reshape(v, -1))
        if None not in (new_h, new_w, height, width) and (height, width) == (new_h, new_w):
            return _from_batch(images, is_batch)
        attrs = {"align_corners": bool(align_corners)}
        if op_def is not ResizeArea:
            attrs["half_pixel_centers"] = False
        out = op_def(images, size, **attrs)
        out.set_shape([None, new_h, new_w, None])
        return _from_batch(out, is_batch)


resize = resize_images


# ---------------------------------------------------------------------------------------------
# Crops and pads

def crop_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """The box of `target_height` x `target_width` pixels at (`offset_height`, `offset_width`) of
    `image` (one image or a batch) (tf.image.crop_to_bounding_box; a Slice)."""
    with name_scope(None, "crop_to_bounding_box", [image]):
        image = convert_to_tensor(image, name="image")
        image, is_batch = _to_batch(image, "crop_to_bounding_box")
        checks = _check_image_rank(image)
        batch, height, width, depth = _image_dims(image, 4)
        checks += _assert(_ge(offset_width, 0), "crop_to_bounding_box: offset_width must be >= 0.")
        checks += _assert(_ge(offset_height, 0), "crop_to_bounding_box: offset_height must be >= 0.")
        checks += _assert(_gt(target_width, 0), "crop_to_bounding_box: target_width must be > 0.")
        checks += _assert(_gt(target_height, 0), "crop_to_bounding_box: target_height must be > 0.")
        checks += _assert(_ge(width, target_width + offset_width), "crop_to_bounding_box: width must be >= "
                          "target + offset." + _detail(width=width, target=target_width, offset=offset_width))
        checks += _assert(_ge(height, target_height + offset_height), "crop_to_bounding_box: height must be >= "
                          "target + offset." + _detail(height=height, target=target_height, offset=offset_height))
        image = _with_dependencies(checks, image)
        cropped = array_ops.slice(image, _int32s([0, offset_height, offset_width, 0]),
                                  _int32s([-1, target_height, target_width, -1]))
        cropped.set_shape([None if _is_tensor(d) else d for d in (batch, target_height, target_width, depth)])
        return _from_batch(cropped, is_batch)


def pad_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """`image` (one image or a batch) padded with zeros to `target_height` x `target_width`, its
    top-left corner at (`offset_height`, `offset_width`) (tf.image.pad_to_bounding_box; a Pad)."""
    with name_scope(None, "pad_to_bounding_box", [image]):
        image = convert_to_tensor(image, name="image")
        image, is_batch = _to_batch(image, "pad_to_bounding_box")
        batch, height, width, depth = _image_dims(image, 4)
        after_w = target_width - offset_width - width
        after_h = target_height - offset_height - height
        checks = _check_image_rank(image)
        checks += _assert(_ge(offset_height, 0), "pad_to_bounding_box: offset_height must be >= 0")
        checks += _assert(_ge(offset_width, 0), "pad_to_bounding_box: offset_width must be >= 0")
        checks += _assert(_ge(after_w, 0), "pad_to_bounding_box: width must be <= target - offset"
                          + _detail(width=width, target=target_width, offset=offset_width))
        checks += _assert(_ge(after_h, 0), "pad_to_bounding_box: height must be <= target - offset"
                          + _detail(height=height, target=target_height, offset=offset_height))
        image = _with_dependencies(checks, image)
        paddings = array_ops.reshape(_int32s([0, 0, offset_height, after_h, offset_width, after_w, 0, 0]), [4, 2])
        padded = array_ops.pad(image, paddings)
        padded.set_shape([None if _is_tensor(d) else d for d in (batch, target_height, target_width, depth)])
        return _from_batch(padded, is_batch)


def resize_image_with_crop_or_pad(image, target_height, target_width):
    """`image` (one image or a batch) cropped about its centre and/or padded with zeros evenly to
    `target_height` x `target_width` (tf.compat.v1.image.resize_image_with_crop_or_pad)."""
    with name_scope(None, "resize_image_with_crop_or_pad", [image]):
        image = convert_to_tensor(image, name="image")
        image, is_batch = _to_batch(image, "resize_image_with_crop_or_pad")
        checks = _check_image_rank(image)
        checks += _assert(_gt(target_width, 0), "resize_image_with_crop_or_pad: target_width must be > 0.")
        checks += _assert(_gt(target_height, 0), "resize_image_with_crop_or_pad: target_height must be > 0.")
        image = _with_dependencies(checks, image)

        def max_(x, y):
            return math_ops.maximum(x, y) if _is_tensor(x) or _is_tensor(y) else max(x, y)

        def min_(x, y):
            return math_ops.minimum(x, y) if _is_tensor(x) or _is_tensor(y) else min(x, y)

        _, height, width, _ = _image_dims(image, 4)
        width_diff = target_width - width
        height_diff = target_height - height
        cropped = crop_to_bounding_box(image, max_(-height_diff // 2, 0), max_(-width_diff // 2, 0),
                                       min_(target_height, height), min_(target_width, width))
        resized = pad_to_bounding_box(cropped, max_(height_diff // 2, 0), max_(width_diff // 2, 0),
                                      target_height, target_width)
        return _from_batch(resized, is_batch)


resize_with_crop_or_pad = resize_image_with_crop_or_pad


def central_crop(image, central_fraction):
    """The central `central_fraction` (in (0, 1]) of each side of `image` (one image or a batch)
    (tf.image.central_crop; a Slice)."""
    with name_scope(None, "central_crop", [image]):
        image = convert_to_tensor(image, name="image")
        frac = constant_value(central_fraction) if _is_tensor(central_fraction) else central_fraction
        if frac is not None:
            frac = float(frac)
            if frac <= 0.0 or frac > 1.0:
                raise ValueError(f"central_crop: central_fraction must be within (0, 1], got {frac}")
            if frac == 1.0:
                return image
        else:
            central_fraction = convert_to_tensor(central_fraction, dtype=dtypes.float32)
            image = _with_dependencies([Assert(math_ops.logical_and(central_fraction > 0.0, central_fraction <= 1.0),
                                               ["central_fraction must be within (0, 1]"])], image)
        _check_image_rank(image)
        rank = image.shape.ndims
        if rank not in (3, 4):
            raise ValueError(f"central_crop: `image` should either be a Tensor with rank = 3 or rank = 4. "
                             f"Had rank = {rank}.")
        first = 0 if rank == 3 else 1
        dims = image.shape.dims
        starts, sizes, static = [], [], []
        for i in (first, first + 1):
            d = dims[i]
            if d is not None and frac is not None:
                start = int((float(d) - float(d) * frac) / 2)
                starts.append(start)
                sizes.append(d - 2 * start)
                static.append(d - 2 * start)
            else:
                dt = array_ops.shape(image)[i] if d is None else d
                dd = math_ops.cast(dt, dtypes.float64)
                f = math_ops.cast(frac if frac is not None else central_fraction, dtypes.float64)
                start = math_ops.cast((dd - dd * f) / 2, dtypes.int32)
                starts.append(start)
                sizes.append(dt - start * 2)
                static.append(None)
        if rank == 3:
            begin, size = _int32s(starts + [0]), _int32s(sizes + [-1])
            out = array_ops.slice(image, begin, size)
            out.set_shape(static + [dims[2]])
        else:
            begin, size = _int32s([0] + starts + [0]), _int32s([-1] + sizes + [-1])
            out = array_ops.slice(image, begin, size)
            out.set_shape([dims[0]] + static + [dims[3]])
        return out


# ---------------------------------------------------------------------------------------------
# Flips, transposes, rotations

def _by_rank(image, op_name, f3, f4):
    nd = image.shape.ndims
    if nd is None:
        return cond(math_ops.equal(array_ops.rank(image), 3), f3, f4)
    if nd == 3:
        return f3()
    if nd == 4:
        return f4()
    raise ValueError(f"{op_name}: 'image' (shape {image.shape}) must have either 3 or 4 dimensions.")


def _flip_shape(image, result):
    result.set_shape([None, None, None] if image.shape.ndims is None else image.shape)
    return result


def _flip(image, flip_index, scope_name):
    with name_scope(None, scope_name, [image]):
        image = convert_to_tensor(image, name="image")
        image = _with_dependencies(_check_image_rank(image), image)
        return _by_rank(image, scope_name, lambda: _flip_shape(image, reverse(image, [flip_index])),
                        lambda: reverse(image, [flip_index + 1]))


def flip_left_right(image):
    """`image` (one image or a batch) mirrored horizontally (tf.image.flip_left_right; a ReverseV2)."""
    return _flip(image, 1, "flip_left_right")


def flip_up_down(image):
    """`image` (one image or a batch) mirrored vertically (tf.image.flip_up_down; a ReverseV2)."""
    return _flip(image, 0, "flip_up_down")


def _random_flip(image, flip_index, seed, scope_name):
    with name_scope(None, scope_name, [image]) as scope:
        image = convert_to_tensor(image, name="image")
        image = _with_dependencies(_check_image_rank(image), image)

        def f_rank3():
            u = random_ops.random_uniform([], 0, 1.0, seed=seed)
            result = cond(math_ops.less(u, 0.5), lambda: reverse(image, [flip_index]), lambda: image, name=scope)
            return _flip_shape(image, result)

        def f_rank4():
            batch = array_ops.shape(image)[0]
            u = random_ops.random_uniform(array_ops.reshape(batch, [1]), 0, 1.0, seed=seed)
            flips = math_ops.cast(math_ops.round(array_ops.reshape(u, array_ops.stack([batch, 1, 1, 1]))),
                                  image.dtype)
            flipped = reverse(image, [flip_index + 1])
            return flips * flipped + (1 - flips) * image

        return _by_rank(image, scope_name, f_rank3, f_rank4)


def random_flip_left_right(image, seed=None):
    """`image` mirrored horizontally with probability 1/2, each image of a batch on its own draw
    (tf.image.random_flip_left_right)."""
    return _random_flip(image, 1, seed, "random_flip_left_right")


def random_flip_up_down(image, seed=None):
    """`image` mirrored vertically with probability 1/2, each image of a batch on its own draw
    (tf.image.random_flip_up_down)."""
    return _random_flip(image, 0, seed, "random_flip_up_down")


def transpose_image(image, name=None):
    """`image` (one image or a batch) with height and width swapped (tf.compat.v1.image.transpose_image)."""
    with name_scope(name, "transpose", [image]):
        image = convert_to_tensor(image, name="image")
        image = _with_dependencies(_check_image_rank(image), image)
        return _by_rank(image, "transpose_image", lambda: array_ops.transpose(image, [1, 0, 2], name=name),
                        lambda: array_ops.transpose(image, [0, 2, 1, 3], name=name))


transpose = transpose_image


def rot90(image, k=1, name=None):
    """`image` (one image or a batch) rotated counter-clockwise by `k` quarter turns (tf.image.rot90)."""
    with name_scope(name, "rot90", [image, k]) as scope:
        image = convert_to_tensor(image, name="image")
        image = _with_dependencies(_check_image_rank(image), image)
        k = convert_to_tensor(k, dtype=dtypes.int32, name="k")
        if k.shape.ndims not in (None, 0):
            raise ValueError(f"rot90: k must be a scalar, got shape {k.shape}")
        k_static = constant_value(k)
        k = math_ops.mod(k, 4)

        def rotate(h):          # h: the height axis
            def r90():
                perm = [1, 0, 2] if h == 0 else [0, 2, 1, 3]
                return array_ops.transpose(reverse(image, [h + 1]), perm)

            def r180():
                return reverse(image, [h, h + 1])

            def r270():
                perm = [1, 0, 2] if h == 0 else [0, 2, 1, 3]
                return reverse(array_ops.transpose(image, perm), [h + 1])
            if k_static is not None:        # TF builds a case; a known k picks its branch
                result = [lambda: image, r90, r180, r270][int(k_static) % 4]()
            else:
                result = case([(math_ops.equal(k, 1), r90), (math_ops.equal(k, 2), r180),
                               (math_ops.equal(k, 3), r270)], default=lambda: image, exclusive=True, name=scope)
            dims = image.shape.dims
            result.set_shape([None, None, dims[2]] if h == 0 else [dims[0], None, None, dims[3]])
            return result
        return _by_rank(image, "rot90", lambda: rotate(0), lambda: rotate(1))


# ---------------------------------------------------------------------------------------------
# Dtypes and colour

def convert_image_dtype(image, dtype, saturate=False, name=None):
    """`image` converted to `dtype`, rescaling values: floats span [0, 1], integers [0, MAX]
    (tf.image.convert_image_dtype, with its rules: integer to narrower integer divides, to wider
    multiplies; float to integer scales by MAX + 0.5 and casts, clamped first with `saturate`)."""
    image = convert_to_tensor(image, name="image")
    dtype = dtypes.as_dtype(dtype)
    if not dtype.is_floating and not dtype.is_integer:
        raise AttributeError("convert_image_dtype: dtype must be either floating point or integer")
    if not image.dtype.is_floating and not image.dtype.is_integer:
        raise AttributeError("convert_image_dtype: image dtype must be either floating point or integer")
    if dtype is image.dtype:
        return identity(image, name=name)
    with name_scope(name, "convert_image", [image]) as scope:
        if image.dtype.is_integer and dtype.is_integer:
            scale_in, scale_out = image.dtype.max, dtype.max
            if scale_in > scale_out:
                scaled = math_ops.floordiv(image, constant((scale_in + 1) // (scale_out + 1),
                                                                     dtype=image.dtype))
                return saturate_cast(scaled, dtype) if saturate else math_ops.cast(scaled, dtype, name=scope)
            cast = saturate_cast(image, dtype) if saturate else math_ops.cast(image, dtype)
            return math_ops.multiply(cast, constant((scale_out + 1) // (scale_in + 1), dtype=dtype),
                                     name=scope)
        if image.dtype.is_floating and dtype.is_floating:
            return math_ops.cast(image, dtype, name=scope)
        if image.dtype.is_integer:
            cast = math_ops.cast(image, dtype)
            return math_ops.multiply(cast, constant(1.0 / image.dtype.max, dtype=dtype), name=scope)
        scaled = math_ops.multiply(image, constant(dtype.max + 0.5, dtype=image.dtype))
        return saturate_cast(scaled, dtype) if saturate else math_ops.cast(scaled, dtype, name=scope)


def rgb_to_grayscale(images, name=None):
    """The luma (0.2989 R + 0.5870 G + 0.1140 B, computed in float32) of RGB `images` [..., 3], as
    [..., 1] in their dtype (tf.image.rgb_to_grayscale)."""
    with name_scope(name, "rgb_to_grayscale", [images]):
        images = convert_to_tensor(images, name="images")
        orig = images.dtype
        flt = convert_image_dtype(images, dtypes.float32)
        gray = array_ops.tensordot(flt, np.array([0.2989, 0.5870, 0.1140], np.float32), [-1, -1])
        return convert_image_dtype(array_ops.expand_dims(gray, -1), orig)


def grayscale_to_rgb(images, name=None):
    """Grayscale `images` [..., 1] repeated into 3 channels (tf.image.grayscale_to_rgb)."""
    with name_scope(name, "grayscale_to_rgb", [images]) as scope:
        images = convert_to_tensor(images, name="images")
        shape = images.shape
        if shape.ndims is not None:
            if shape.ndims < 2:
                raise ValueError(f"grayscale_to_rgb: 'images' (shape {shape}) must be at least two-dimensional.")
            if shape.dims[-1] is not None and shape.dims[-1] != 1:
                raise ValueError(f"grayscale_to_rgb: last dimension of 'images' (shape {shape}) must be size 1.")
        if shape.ndims is None or shape.dims[-1] is None:      # TF's _AssertGrayscaleImage, at run time
            images = _with_dependencies([Assert(math_ops.equal(array_ops.shape(images)[-1], 1),
                                                ["grayscale_to_rgb: last dimension of 'images' must be size 1."])],
                                        images)
        rank_1 = array_ops.expand_dims(array_ops.rank(images) - 1, 0)
        multiples = array_ops.concat([array_ops.ones(rank_1, dtype=dtypes.int32), np.array([3], np.int32)], 0)
        rgb = array_ops.tile(images, multiples, name=scope)
        if shape.ndims is not None:
            rgb.set_shape(list(shape.dims[:-1]) + [3])
        return rgb


def per_image_standardization(image):
    """Each image (the last three dimensions) scaled to mean 0 and variance 1, as float32: (x - mean)
    / max(stddev, 1 / sqrt(pixels)) (tf.image.per_image_standardization, TF 2's form)."""
    with name_scope(None, "per_image_standardization", [image]) as scope:
        image = convert_to_tensor(image, name="image")
        image = _with_dependencies(_check_image_rank(image), image)
        image = math_ops.cast(image, dtypes.float32)
        num_pixels = math_ops.reduce_prod(array_ops.shape(image)[-3:])
        axes = [-1, -2, -3]
        mean = math_ops.reduce_mean(image, axis=axes, keepdims=True)
        var = math_ops.reduce_mean(math_ops.square(image - mean), axis=axes, keepdims=True)
        stddev = math_ops.sqrt(var)
        min_stddev = math_ops.rsqrt(math_ops.cast(num_pixels, dtypes.float32))
        adjusted = math_ops.maximum(stddev, min_stddev)
        return math_ops.divide(image - mean, adjusted, name=scope)


def adjust_brightness(image, delta):
    """`image` plus `delta`, computed in float (integer images as [0, 1] floats) and converted back
    to the image's dtype with saturation (tf.image.adjust_brightness)."""
    with name_scope(None, "adjust_brightness", [image, delta]) as scope:
        image = convert_to_tensor(image, name="image")
        orig = image.dtype
        flt = image if orig in (dtypes.float16, dtypes.float32) else convert_image_dtype(image, dtypes.float32)
        adjusted = math_ops.add(flt, math_ops.cast(delta, flt.dtype), name=scope)
        return convert_image_dtype(adjusted, orig, saturate=True)


def _infer_adjust_contrast(inputs, attrs):
    images, factor = inputs
    if images.dtype not in (dtypes.float16, dtypes.float32):
        raise InferenceError(f"images must be float16 or float32, got {images.dtype.name} ('{images.name}')")
    if factor.dtype is not dtypes.float32:
        raise InferenceError(f"contrast_factor must be float32, got {factor.dtype.name}")
    if images.shape.ndims is not None and images.shape.ndims < 3:
        raise InferenceError(f"input must be at least 3-D, but '{images.name}' has shape {images.shape}")
    if factor.shape.ndims not in (None, 0):
        raise InferenceError(f"contrast_factor must be scalar, got shape {factor.shape}")
    return [(images.dtype, images.shape)]


AdjustContrastv2 = define_op("AdjustContrastv2", _infer_adjust_contrast)     # no gradient, as in TF


def adjust_contrast(images, contrast_factor):
    """Each channel of each image moved away from its mean by `contrast_factor`: (x - mean) * factor
    + mean, in float (integer images as [0, 1] floats), converted back with saturation
    (tf.image.adjust_contrast, op AdjustContrastv2; no gradient, as in TF)."""
    with name_scope(None, "adjust_contrast", [images, contrast_factor]) as scope:
        images = convert_to_tensor(images, name="images")
        orig = images.dtype
        flt = images if orig in (dtypes.float16, dtypes.float32) else convert_image_dtype(images, dtypes.float32)
        factor = convert_to_tensor(contrast_factor, dtype=dtypes.float32, name="contrast_factor")
        adjusted = AdjustContrastv2(flt, factor, name=scope)
        return convert_image_dtype(adjusted, orig, saturate=True)


def random_brightness(image, max_delta, seed=None):
    """adjust_brightness by a delta drawn uniformly from [-max_delta, max_delta)
    (tf.image.random_brightness)."""
    if max_delta < 0:
        raise ValueError("random_brightness: max_delta must be non-negative.")
    delta = random_ops.random_uniform([], -max_delta, max_delta, seed=seed)
    return adjust_brightness(image, delta)


def random_contrast(image, lower, upper, seed=None):
    """adjust_contrast by a factor drawn uniformly from [lower, upper) (tf.image.random_contrast)."""
    if upper <= lower:
        raise ValueError("random_contrast: upper must be > lower.")
    if lower < 0:
        raise ValueError("random_contrast: lower must be non-negative.")
    factor = random_ops.random_uniform([], lower, upper, seed=seed)
    return adjust_contrast(image, factor)


random_crop = random_ops.random_crop



def adjust_gamma(image, gamma=1, gain=1):
    """gain * image ** gamma, computed in float (integer images as [0, 1] floats) and converted back
    with saturation (tf.image.adjust_gamma); a negative `gamma` is an error."""
    with name_scope(None, "adjust_gamma", [image, gamma, gain]):
        image = convert_to_tensor(image, name="image")
        orig = image.dtype
        flt = image if orig in (dtypes.float16, dtypes.float32) else convert_image_dtype(image, dtypes.float32)
        deps = _assert(_ge(gamma, 0), "Gamma should be a non-negative real number.")
        gamma = _with_dependencies(deps, convert_to_tensor(gamma, dtype=flt.dtype)) if deps else gamma
        adjusted = gain * flt ** gamma
        return convert_image_dtype(adjusted, orig, saturate=True)


# TF's colour-space matrices (image_ops_impl.py), applied as images @ kernel over the last axis.
_RGB_TO_YIQ = [[0.299, 0.59590059, 0.2115], [0.587, -0.27455667, -0.52273617], [0.114, -0.32134392, 0.31119955]]
_YIQ_TO_RGB = [[1, 1, 1], [0.95598634, -0.27201283, -1.10674021], [0.6208248, -0.64720424, 1.70423049]]
_RGB_TO_YUV = [[0.299, -0.14714119, 0.61497538], [0.587, -0.28886916, -0.51496512], [0.114, 0.43601035, -0.10001026]]
_YUV_TO_RGB = [[1, 1, 1], [0, -0.394642334, 2.03206185], [1.13988303, -0.58062185, 0]]


def _colour_matrix(images, kernel, what):
    images = convert_to_tensor(images, name="images")
    if not images.dtype.is_floating:
        raise TypeError(f"{what}: images must be a float tensor, got {images.dtype.name}")
    k = constant(np.asarray(kernel, images.dtype.np), name="kernel")
    nd = images.shape.ndims
    if nd is None:
        raise ValueError(f"{what}: images must have a known rank")
    return array_ops.tensordot(images, k, [[nd - 1], [0]])


def rgb_to_yiq(images):
    """RGB `images` [..., 3] (floats) in YIQ (tf.image.rgb_to_yiq)."""
    return _colour_matrix(images, _RGB_TO_YIQ, "rgb_to_yiq")


def yiq_to_rgb(images):
    """YIQ `images` [..., 3] back to RGB (tf.image.yiq_to_rgb)."""
    return _colour_matrix(images, _YIQ_TO_RGB, "yiq_to_rgb")


def rgb_to_yuv(images):
    """RGB `images` [..., 3] (floats) in YUV (tf.image.rgb_to_yuv)."""
    return _colour_matrix(images, _RGB_TO_YUV, "rgb_to_yuv")


def yuv_to_rgb(images):
    """YUV `images` [..., 3] back to RGB (tf.image.yuv_to_rgb)."""
    return _colour_matrix(images, _YUV_TO_RGB, "yuv_to_rgb")


def _infer_colour(op, scalar_input=None):
    def infer(inputs, attrs):
        images = inputs[0]
        allowed = (dtypes.float16, dtypes.float32, dtypes.float64) if scalar_input is None else (dtypes.float16,
                                                                                                 dtypes.float32)
        if images.dtype not in allowed:
            raise InferenceError(f"{op}: images must be one of {[d.name for d in allowed]}, got {images.dtype.name}")
        if images.shape.ndims is not None:
            if images.shape.ndims < (1 if scalar_input is None else 3):
                raise InferenceError(f"{op}: input must be at least {1 if scalar_input is None else 3}-D, got shape "
                                     f"{images.shape}")
            if images.shape.dims[-1] not in (None, 3):
                raise InferenceError(f"{op}: input must have 3 channels but input only has "
                                     f"{images.shape.dims[-1]} channels.")
        if scalar_input is not None and inputs[1].shape.ndims not in (None, 0):
            raise InferenceError(f"{op}: {scalar_input} must be scalar, got shape {inputs[1].shape}")
        return [(images.dtype, images.shape)]
    return infer


RGBToHSV = define_op("RGBToHSV", _infer_colour("RGBToHSV"))
HSVToRGB = define_op("HSVToRGB", _infer_colour("HSVToRGB"))            # not differentiable, as in TF
AdjustHue = define_op("AdjustHue", _infer_colour("AdjustHue", "delta"))     # no gradient, as in TF
AdjustSaturation = define_op("AdjustSaturation", _infer_colour("AdjustSaturation", "scale"))   # no gradient


def _safe_reciprocal(x):
    return math_ops.div_no_nan(math_ops.cast(1.0, x.dtype), x)


@RGBToHSV.gradient
def _rgb_to_hsv_grad(op, grad):
    """d(h, s, v)/d(r, g, b), derived per pixel from which channel is the largest (M) and which the
    smallest (m), with the ties resolved as TF resolves them (largest: r before g before b; smallest:
    b before g before r). With v = x_M, D = v - x_m, s = D / v and h = (x_a - x_b) / (6 D) + const,
    where (a, b) are the channels after M in the order r, g, b, r, g:

        dv/dx_c = [c = M]
        ds/dx_c = [x_c > 0] ([c = M] x_m / v^2 - [c = m] / v)
        dh/dx_c = [v > 0] ([c = M] (-(x_a - x_b)) / D^2 + ([c = a] - [c = b]) / D
                           + [c = m, c != M] (x_a - x_b) / D^2) / 6

    Zero denominators give zero (div_no_nan), as TF's gradient does on grey pixels.
    """
    x = op.inputs[0]
    dtype = x.dtype
    r, g, b = x[..., 0], x[..., 1], x[..., 2]

    def mask(*conds):
        return math_ops.cast(conds[0] & conds[1], dtype)
    biggest = array_ops.stack([mask(r >= g, r >= b), mask(g > r, g >= b), mask(b > r, b > g)], axis=-1)
    smallest = array_ops.stack([mask(r < g, r < b), mask(g <= r, g < b), mask(b <= r, b <= g)], axis=-1)
    after_1 = array_ops.concat([biggest[..., 2:], biggest[..., :2]], axis=-1)     # c = a: c - 1 is M
    after_2 = array_ops.concat([biggest[..., 1:], biggest[..., :1]], axis=-1)     # c = b: c - 2 is M

    def channel_sum(t):
        return math_ops.reduce_sum(t, axis=-1, keepdims=True)
    v = channel_sum(x * biggest)
    lo = channel_sum(x * smallest)
    d = v - lo
    diff = channel_sum(x * (after_1 - after_2))                                    # x_a - x_b
    one = math_ops.cast(1.0, dtype)
    inv_d = math_ops.div_no_nan(one, d)
    inv_v = math_ops.div_no_nan(one, v)
    positive_v = math_ops.cast(v > 0, dtype)
    dv = biggest
    ds = math_ops.cast(x > 0, dtype) * (biggest * lo * inv_v * inv_v - smallest * inv_v)
    dh = positive_v * (-biggest * diff * inv_d * inv_d + (after_1 - after_2) * inv_d
                       + smallest * (one - biggest) * diff * inv_d * inv_d) / 6
    grad = convert_to_tensor(grad)
    return [grad[..., 0:1] * dh + grad[..., 1:2] * ds + grad[..., 2:3] * dv]


@HSVToRGB.gradient
def _hsv_to_rgb_grad(op, grad):
    """TF marks HSVToRGB not differentiable."""
    return [None]


def rgb_to_hsv(images, name=None):
    """RGB `images` [..., 3] (floats in [0, 1]) as hue, saturation and value, each in [0, 1]
    (tf.image.rgb_to_hsv, op RGBToHSV)."""
    with name_scope(name, "RGBToHSV", [images]) as scope:
        return RGBToHSV(convert_to_tensor(images, name="images"), name=scope)


def hsv_to_rgb(images, name=None):
    """HSV `images` [..., 3] back to RGB (tf.image.hsv_to_rgb, op HSVToRGB; no gradient, as in TF)."""
    with name_scope(name, "HSVToRGB", [images]) as scope:
        return HSVToRGB(convert_to_tensor(images, name="images"), name=scope)


def _float_adjust(op_def, image, value, what, name, default_name):
    with name_scope(name, default_name, [image, value]) as scope:
        image = convert_to_tensor(image, name="image")
        orig = image.dtype
        flt = image if orig in (dtypes.float16, dtypes.float32) else convert_image_dtype(image, dtypes.float32)
        value = convert_to_tensor(value, dtype=dtypes.float32, name=what)
        return convert_image_dtype(op_def(flt, value, name=scope), orig)


def adjust_hue(image, delta, name=None):
    """`image`'s hues rotated by `delta` (a fraction of a turn, in [-1, 1]), computed in float32
    (tf.image.adjust_hue, op AdjustHue; no gradient, as in TF)."""
    return _float_adjust(AdjustHue, image, delta, "delta", name, "adjust_hue")


def adjust_saturation(image, saturation_factor, name=None):
    """`image`'s saturation multiplied by `saturation_factor` and clipped to [0, 1], in float32
    (tf.image.adjust_saturation, op AdjustSaturation; no gradient, as in TF)."""
    return _float_adjust(AdjustSaturation, image, saturation_factor, "saturation_factor", name, "adjust_saturation")


def random_hue(image, max_delta, seed=None):
    """adjust_hue by a delta drawn uniformly from [-max_delta, max_delta), max_delta in [0, 0.5]
    (tf.image.random_hue)."""
    if max_delta > 0.5:
        raise ValueError("max_delta must be <= 0.5.")
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    delta = random_ops.random_uniform([], -max_delta, max_delta, seed=seed)
    return adjust_hue(image, delta)


def random_saturation(image, lower, upper, seed=None):
    """adjust_saturation by a factor drawn uniformly from [lower, upper) (tf.image.random_saturation)."""
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    factor = random_ops.random_uniform([], lower, upper, seed=seed)
    return adjust_saturation(image, factor)


def resize_image_with_pad(image, target_height, target_width, method=ResizeMethod.BILINEAR, align_corners=False):
    """`image` (one image or a batch) resized by `method`, keeping its aspect ratio, to fit
    [target_height, target_width], then centred and padded with zeros to exactly that size
    (tf.compat.v1.image.resize_image_with_pad)."""
    with name_scope(None, "resize_image_with_pad", [image]):
        image = convert_to_tensor(image, name="image")
        image, is_batch = _to_batch(image, "resize_image_with_pad")
        deps = _check_image_rank(image)
        deps += _assert(_gt(target_width, 0), "target_width must be > 0.")
        deps += _assert(_gt(target_height, 0), "target_height must be > 0.")
        image = _with_dependencies(deps, image)

        def max_(x, y):
            return math_ops.maximum(x, y) if _is_tensor(x) or _is_tensor(y) else max(x, y)

        _, height, width, _ = _image_dims(image, 4)
        f32 = dtypes.float32
        f_height, f_width = math_ops.cast(height, f32), math_ops.cast(width, f32)
        f_target_h, f_target_w = math_ops.cast(target_height, f32), math_ops.cast(target_width, f32)
        ratio = max_(f_width / f_target_w, f_height / f_target_h)
        rh_float, rw_float = f_height / ratio, f_width / ratio
        resized_h = math_ops.cast(math_ops.floor(rh_float), dtypes.int32)
        resized_w = math_ops.cast(math_ops.floor(rw_float), dtypes.int32)
        p_height = max_(0, math_ops.cast(math_ops.floor((f_target_h - rh_float) / 2), dtypes.int32))
        p_width = max_(0, math_ops.cast(math_ops.floor((f_target_w - rw_float) / 2), dtypes.int32))
        resized = resize_images(image, array_ops.stack([resized_h, resized_w]), method, align_corners=align_corners)
        padded = pad_to_bounding_box(resized, p_height, p_width, target_height, target_width)
        if padded.shape.ndims is None:
            raise ValueError("padded contains no shape.")
        return _from_batch(padded, is_batch)
