"""Image differences and quality measures: image_gradients, sobel_edges, total_variation, psnr, ssim
and ssim_multiscale, built from array, math and convolution ops exactly as TF's image_ops_impl.py
builds them, so their values and their gradients (by composition) are TF's.

TF-1.x counterparts: `tf.image.*` of the same names.
"""
from __future__ import annotations

import numpy as np

from actorflow.graph import dtypes
from actorflow.graph.control_flow import cond
from actorflow.graph.graph import control_dependencies, convert_to_tensor, name_scope
from actorflow.graph.ops import array_ops, math_ops
from actorflow.graph.ops.check_ops import Assert
from actorflow.graph.ops.constant import constant, identity
from actorflow.graph.ops.deprecated import shape_n
from actorflow.graph.ops.image_ops import convert_image_dtype
from actorflow.graph.ops.nn_conv_ops import depthwise_conv2d
from actorflow.graph.ops.nn_ops import avg_pool, relu, softmax

__all__ = ["image_gradients", "sobel_edges", "total_variation", "psnr", "ssim", "ssim_multiscale"]


def image_gradients(image):
    """(dy, dx): the differences of each pixel of `image` [batch, height, width, depth] with the one
    below and the one to its right, zero in the last row and column (tf.image.image_gradients)."""
    image = convert_to_tensor(image, name="image")
    if image.shape.ndims != 4:
        raise ValueError(f"image_gradients expects a 4D tensor [batch_size, h, w, d], not {image.shape}.")
    image_shape = array_ops.shape(image)
    batch, height, width, depth = array_ops.unstack(image_shape, 4)
    dy = image[:, 1:, :, :] - image[:, :-1, :, :]
    dx = image[:, :, 1:, :] - image[:, :, :-1, :]
    dy = array_ops.concat([dy, array_ops.zeros(array_ops.stack([batch, 1, width, depth]), image.dtype)], 1)
    dy = array_ops.reshape(dy, image_shape)
    dx = array_ops.concat([dx, array_ops.zeros(array_ops.stack([batch, height, 1, depth]), image.dtype)], 2)
    dx = array_ops.reshape(dx, image_shape)
    dy.set_shape(image.shape)
    dx.set_shape(image.shape)
    return dy, dx


def sobel_edges(image):
    """The vertical and horizontal Sobel responses of `image` [batch, height, width, depth], as
    [batch, height, width, depth, 2], the borders reflected (tf.image.sobel_edges)."""
    image = convert_to_tensor(image, name="image")
    static = image.shape
    image_shape = array_ops.shape(image)
    kernels = [[[-1, -2, -1], [0, 0, 0], [1, 2, 1]], [[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]]]
    k = np.expand_dims(np.transpose(np.asarray(kernels), (1, 2, 0)), -2)
    kernels_t = array_ops.tile(constant(k, dtype=image.dtype),
                               array_ops.stack([1, 1, image_shape[-1], 1]), name="sobel_filters")
    padded = array_ops.pad(image, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="REFLECT")
    out = depthwise_conv2d(padded, kernels_t, [1, 1, 1, 1], "VALID")
    out = array_ops.reshape(out, array_ops.concat([image_shape, constant(np.array([2], np.int32))], 0))
    out.set_shape(static.concatenate([2]) if static.ndims is not None else None)
    return out


def total_variation(images, name=None):
    """The sum of the absolute differences of neighbouring pixels, per image: a scalar for one image
    [height, width, channels], [batch] for a batch (tf.image.total_variation)."""
    with name_scope(name, "total_variation"):
        images = convert_to_tensor(images, name="images")
        nd = images.shape.ndims
        if nd == 3:
            d1 = images[1:, :, :] - images[:-1, :, :]
            d2 = images[:, 1:, :] - images[:, :-1, :]
            axis = None
        elif nd == 4:
            d1 = images[:, 1:, :, :] - images[:, :-1, :, :]
            d2 = images[:, :, 1:, :] - images[:, :, :-1, :]
            axis = [1, 2, 3]
        else:
            raise ValueError("'images' must be either 3 or 4-dimensional.")
        return (math_ops.reduce_sum(math_ops.abs(d1), axis=axis)
                + math_ops.reduce_sum(math_ops.abs(d2), axis=axis))


def _verify_compatible_image_shapes(img1, img2):
    """TF's _verify_compatible_image_shapes: at least 3-D, the last three dimensions equal, batch
    dimensions broadcastable; static checks where the shapes are known, else an assertion."""
    s1, s2 = img1.shape, img2.shape
    if s1.ndims is not None and s1.ndims < 3:
        raise ValueError(f"img1 (shape {s1}) must be at least three-dimensional.")
    if s2.ndims is not None and s2.ndims < 3:
        raise ValueError(f"img2 (shape {s2}) must be at least three-dimensional.")
    if s1.ndims is not None and s2.ndims is not None:
        if not s1[-3:].is_compatible_with(s2[-3:]):
            raise ValueError(f"Shapes must be compatible: {s1} and {s2}")
        for a, b in zip(reversed(s1.dims[:-3]), reversed(s2.dims[:-3])):
            if a is not None and b is not None and a != b and 1 not in (a, b):
                raise ValueError(f"Shapes must be broadcastable: {s1} and {s2}")
    sh1, sh2 = shape_n([img1, img2])
    checks = [Assert(math_ops.greater_equal(array_ops.size(sh1), 3), [sh1, sh2]),
              Assert(math_ops.reduce_all(math_ops.equal(sh1[-3:], sh2[-3:])), [sh1, sh2])]
    return sh1, sh2, checks


def psnr(a, b, max_val, name=None):
    """The peak signal-to-noise ratio of `a` and `b` in dB, per image (over the last three
    dimensions), computed in float32 (tf.image.psnr); `max_val` is the images' dynamic range."""
    with name_scope(name, "PSNR", [a, b]):
        a = convert_to_tensor(a, name="a")
        b = convert_to_tensor(b, name="b")
        max_val = math_ops.cast(max_val, a.dtype)
        max_val = convert_image_dtype(max_val, dtypes.float32)
        a = convert_image_dtype(a, dtypes.float32)
        b = convert_image_dtype(b, dtypes.float32)
        mse = math_ops.reduce_mean(math_ops.squared_difference(a, b), [-3, -2, -1])
        val = math_ops.subtract(20 * math_ops.log(max_val) / math_ops.log(constant(10.0)),
                                np.float32(10 / np.log(10)) * math_ops.log(mse), name="psnr")
        _, _, checks = _verify_compatible_image_shapes(a, b)
        with control_dependencies(checks):
            return identity(val)


def _ssim_helper(x, y, reducer, max_val, compensation=1.0, k1=0.01, k2=0.03):
    c1 = (k1 * max_val) ** 2
    c2 = (k2 * max_val) ** 2
    mean0, mean1 = reducer(x), reducer(y)
    num0 = mean0 * mean1 * 2.0
    den0 = math_ops.square(mean0) + math_ops.square(mean1)
    luminance = (num0 + c1) / (den0 + c1)
    num1 = reducer(x * y) * 2.0
    den1 = reducer(math_ops.square(x) + math_ops.square(y))
    c2 *= compensation
    cs = (num1 - num0 + c2) / (den1 - den0 + c2)
    return luminance, cs


def _fspecial_gauss(size, sigma):
    """A normalized size x size Gaussian window, [size, size, 1, 1] (TF's _fspecial_gauss)."""
    size = convert_to_tensor(size, dtype=dtypes.int32)
    sigma = convert_to_tensor(sigma)
    coords = math_ops.cast(array_ops.range(size), sigma.dtype)
    coords -= math_ops.cast(size - 1, sigma.dtype) / 2.0
    g = math_ops.square(coords)
    g *= -0.5 / math_ops.square(sigma)
    g = array_ops.reshape(g, [1, -1]) + array_ops.reshape(g, [-1, 1])
    g = softmax(array_ops.reshape(g, [1, -1]))
    return array_ops.reshape(g, array_ops.stack([size, size, 1, 1]))


def _ssim_per_channel(img1, img2, max_val=1.0, filter_size=11, filter_sigma=1.5, k1=0.01, k2=0.03,
                      return_index_map=False):
    filter_size = constant(filter_size, dtype=dtypes.int32)
    filter_sigma = constant(filter_sigma, dtype=img1.dtype)
    shape1, shape2 = shape_n([img1, img2])
    checks = [Assert(math_ops.reduce_all(math_ops.greater_equal(shape1[-3:-1], filter_size)),
                     ["ssim: the images are smaller than the filter", shape1, filter_size]),
              Assert(math_ops.reduce_all(math_ops.greater_equal(shape2[-3:-1], filter_size)),
                     ["ssim: the images are smaller than the filter", shape2, filter_size])]
    with control_dependencies(checks):
        img1 = identity(img1)
    kernel = _fspecial_gauss(filter_size, filter_sigma)
    kernel = array_ops.tile(kernel, array_ops.stack([1, 1, shape1[-1], 1]))

    def reducer(x):
        shape = array_ops.shape(x)
        x = array_ops.reshape(x, array_ops.concat([constant(np.array([-1], np.int32)), shape[-3:]], 0))
        y = depthwise_conv2d(x, kernel, strides=[1, 1, 1, 1], padding="VALID")
        return array_ops.reshape(y, array_ops.concat([shape[:-3], array_ops.shape(y)[1:]], 0))

    luminance, cs = _ssim_helper(img1, img2, reducer, max_val, 1.0, k1, k2)
    axes = constant(np.array([-3, -2], np.int32))
    val = luminance * cs if return_index_map else math_ops.reduce_mean(luminance * cs, axes)
    return val, math_ops.reduce_mean(cs, axes)


def _prepare(img1, img2, max_val):
    img1 = convert_to_tensor(img1, name="img1")
    img2 = convert_to_tensor(img2, name="img2")
    shape1, shape2, checks = _verify_compatible_image_shapes(img1, img2)
    with control_dependencies(checks):
        img1 = identity(img1)
    max_val = convert_image_dtype(math_ops.cast(max_val, img1.dtype), dtypes.float32)
    return (convert_image_dtype(img1, dtypes.float32), convert_image_dtype(img2, dtypes.float32), max_val,
            shape1, shape2)


def ssim(img1, img2, max_val, filter_size=11, filter_sigma=1.5, k1=0.01, k2=0.03, return_index_map=False):
    """The structural similarity of `img1` and `img2` [..., height, width, channels], per image: a
    Gaussian window of `filter_size` and `filter_sigma`, averaged over the channels, in float32
    (tf.image.ssim). The images must be at least `filter_size` on each side."""
    with name_scope(None, "SSIM", [img1, img2]):
        img1, img2, max_val, _, _ = _prepare(img1, img2, max_val)
        per_channel, _ = _ssim_per_channel(img1, img2, max_val, filter_size, filter_sigma, k1, k2,
                                           return_index_map)
        return math_ops.reduce_mean(per_channel, [-1])


_MSSSIM_WEIGHTS = (0.0448, 0.2856, 0.3001, 0.2363, 0.1333)


def ssim_multiscale(img1, img2, max_val, power_factors=_MSSSIM_WEIGHTS, filter_size=11, filter_sigma=1.5, k1=0.01,
                    k2=0.03):
    """The multi-scale SSIM of `img1` and `img2` (tf.image.ssim_multiscale): one scale per power
    factor, each a 2x2 average pool of the last (odd sizes padded symmetrically first)."""
    with name_scope(None, "MS-SSIM", [img1, img2]):
        img1, img2, max_val, shape1, shape2 = _prepare(img1, img2, max_val)
        imgs = [img1, img2]
        heads = [s[:-3] for s in (shape1, shape2)]
        tails = [s[-3:] for s in (shape1, shape2)]
        divisor = [1, 2, 2, 1]
        divisor_t = constant(np.array(divisor[1:], np.int32))

        def do_pad(images, remainder):
            padding = array_ops.expand_dims(remainder, -1)
            padding = array_ops.pad(padding, [[1, 0], [1, 0]])
            return [array_ops.pad(x, padding, mode="SYMMETRIC") for x in images]

        mcs = []
        per_channel = None
        for k in range(len(power_factors)):
            with name_scope(None, f"Scale{k}", imgs):
                if k > 0:
                    flat = [array_ops.reshape(x, array_ops.concat([constant(np.array([-1], np.int32)), t], 0))
                            for x, t in zip(imgs, tails)]
                    remainder = tails[0] % divisor_t
                    need_padding = math_ops.reduce_any(math_ops.not_equal(remainder, 0))
                    padded = cond(need_padding, lambda flat=flat, r=remainder: do_pad(flat, r),
                                  lambda flat=flat: [identity(x) for x in flat])
                    for p in padded:
                        p.set_shape([None, None, None, img1.shape.dims[-1] if img1.shape.ndims else None])
                    down = [avg_pool(x, ksize=divisor, strides=divisor, padding="VALID") for x in padded]
                    tails = [x[1:] for x in shape_n(down)]
                    imgs = [array_ops.reshape(x, array_ops.concat([h, t], 0)) for x, h, t in zip(down, heads, tails)]
                per_channel, cs = _ssim_per_channel(*imgs, max_val=max_val, filter_size=filter_size,
                                                    filter_sigma=filter_sigma, k1=k1, k2=k2)
                mcs.append(relu(cs))
        mcs.pop()
        stacked = array_ops.stack(mcs + [relu(per_channel)], axis=-1)
        ms = math_ops.reduce_prod(math_ops.pow(stacked, constant(np.asarray(power_factors, np.float32))), [-1])
        return math_ops.reduce_mean(ms, [-1])
